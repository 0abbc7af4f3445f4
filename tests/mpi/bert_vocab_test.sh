#!/bin/sh
# tests/mpi/bert_vocab_test.sh: pretrain_bert's and finetune_bert's vocabulary is Megatron-Core's
# BERT tokenizer's, and holds every id the BERT dataset emits (issue 46).
# Megatron-Core (megatron/core/tokenizers/utils/build_tokenizer.py) builds --tokenizer-type
# BertWordPieceLowerCase and BertWordPieceCase as Hugging Face's BertTokenizer over --vocab-file
# (no [BOS]/[EOS] there); BertWordPieceCase alone gets the 100 additional_special_tokens
# <extra_id_0> .. <extra_id_99>. So tokenizer.vocab_size = len(tokenizer) = the file's tokens
# (+ 100 for BertWordPieceCase), and vocab_size_with_padding rounds it up to a multiple of
# --make-vocab-size-divisible-by x TP, printing " > padded vocab (size: V) with P dummy tokens
# (new size: V + P)". The BERT dataset draws its 10% random replacement tokens from
# token_lookup = sorted(tokenizer.inv_vocab), that whole vocabulary, the 100 extra ids included.
# Checked: pretrain_bert's log line and padded_vocab_size equal that computation for the 61-token
# test vocabulary (lower case and cased, --make-vocab-size-divisible-by 8, 7 (161 exactly: no
# room to spare) and 128 x TP2), for the 340M example's bert-large-uncased-sized file (30522) and
# a bert-large-cased-sized one (28996 + 100); finetune_bert prints the same line; every id of
# 300 samples of tests/tools/bert_samples (text and labels) is below the model's padded
# vocabulary, and the random draws do reach the extra ids (61 .. 160) for BertWordPieceCase (as
# Megatron's), none for the lower-case tokenizer; pretrain_bert trains on them at exactly 161; a
# corpus whose recorded vocabulary (our preprocess_data's WordPiece tokenizer: + [BOS]/[EOS])
# exceeds the model's padded one trains (its ids are checked at the door).
# Before the fix the model's vocabulary was the file + [BOS] + [EOS] (63 here: padded to 64),
# while the cased dataset put ids up to 160 into the samples, outside the embedding.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
PRETRAIN_BERT="$top_builddir/app/pretrain_bert"
FINETUNE="$top_builddir/app/finetune_bert"
TOOL="$top_builddir/tests/tools/bert_samples"
MNLI_TRAIN="$top_srcdir/tests/data/mnli_synthetic_train.tsv"
MNLI_DEV="$top_srcdir/tests/data/mnli_synthetic_dev_matched.tsv"

# vocabularies the size of bert-large-uncased's (30522 lines) and bert-large-cased's (28996): the
# test file's 61 tokens, then words
UNCASED_VOCAB="$WORK/uncased-vocab.txt" CASED_VOCAB="$WORK/cased-vocab.txt"
{ cat "$BERT_VOCAB"; awk 'BEGIN { for (i = 61; i < 30522; i++) print "w" i }'; } > "$UNCASED_VOCAB"
{ cat "$BERT_VOCAB"; awk 'BEGIN { for (i = 61; i < 28996; i++) print "w" i }'; } > "$CASED_VOCAB"
bert_corpus lower 60
bert_corpus cased 60 BertWordPieceCase

# megatron_padded TOKENIZER VOCAB_FILE DIVISIBLE TP: Megatron-Core's line, computed here as
# build_tokenizer and vocab_size_with_padding do (len(BertTokenizer) counts the file's distinct
# tokens, these files have no duplicates and no <extra_id_i>; + 100 for BertWordPieceCase)
megatron_padded() {
    extra=0
    [ "$1" = BertWordPieceCase ] && extra=100
    size=$(($(sort -u "$2" | wc -l) + extra)) multiple=$(($3 * $4))
    after=$(( (size + multiple - 1) / multiple * multiple ))
    echo " > padded vocab (size: $size) with $((after - size)) dummy tokens (new size: $after)"
}
new_size() { echo "$1" | sed 's/.*new size: \([0-9]*\))$/\1/'; }
# run_bert NRANKS TOKENIZER VOCAB_FILE FLAGS...: two iterations of a tiny BERT over the corpus
# made with TOKENIZER (or $CORPUS), output in $WORK/out
run_bert() {
    n=$1 tokenizer=$2 vocab=$3; shift 3
    corpus=${CORPUS:-lower}
    [ "$tokenizer" = BertWordPieceCase ] && corpus=cased
    timeout 120 "$MPIEXEC" -n "$n" "$PRETRAIN_BERT" --num-layers 1 --hidden-size 16 --num-attention-heads 2 \
        --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 2 \
        --lr 1e-3 --eval-iters 0 --tokenizer-type "$tokenizer" --vocab-file "$vocab" \
        --data-path "$WORK/${corpus}_text_sentence.h5" --split 949,50,1 "$@" > "$WORK/out" 2> "$WORK/err"
}
padded_vocab() { sed -n 's/^ *padded_vocab_size \.* \([0-9]*\)$/\1/p' "$WORK/out"; }
# check_padding DESCRIPTION NRANKS TOKENIZER VOCAB_FILE DIVISIBLE TP: pretrain_bert's line and
# padded size are Megatron's, and it trains
check_padding() {
    what=$1 n=$2 tokenizer=$3 vocab=$4 divisible=$5 tp=$6
    want=$(megatron_padded "$tokenizer" "$vocab" "$divisible" "$tp")
    run_bert "$n" "$tokenizer" "$vocab" --make-vocab-size-divisible-by "$divisible" --tensor-model-parallel-size "$tp"
    status=$?
    got=$(grep '^ > padded vocab' "$WORK/out")
    padded=$(padded_vocab)
    [ $status -eq 0 ] && [ "$got" = "$want" ] && [ "$padded" = "$(new_size "$want")" ] &&
        grep -q '] iteration *2/ *2 |.*| lm loss: [0-9.E+-]* |' "$WORK/out"
    ok $? "$what: Megatron's \"$want\"; pretrain_bert's \"$got\", padded_vocab_size $padded"
    [ $status -eq 0 ] || tail -3 "$WORK/err" | sed 's/^/#   /'
}
check_padding "61 tokens, lower case, --make-vocab-size-divisible-by 8" 1 BertWordPieceLowerCase "$BERT_VOCAB" 8 1
LOWER_PADDED=$padded
check_padding "61 tokens + 100 extra ids (cased), --make-vocab-size-divisible-by 8" 1 BertWordPieceCase "$BERT_VOCAB" 8 1
CASED_PADDED=$padded
check_padding "cased, --make-vocab-size-divisible-by 7: 161 exactly" 1 BertWordPieceCase "$BERT_VOCAB" 7 1
check_padding "cased, --make-vocab-size-divisible-by 128, TP2" 2 BertWordPieceCase "$BERT_VOCAB" 128 2
check_padding "lower case, --make-vocab-size-divisible-by 64, TP2" 2 BertWordPieceLowerCase "$BERT_VOCAB" 64 2
check_padding "the 340M example: 30522 tokens (bert-large-uncased), --make-vocab-size-divisible-by 128" \
    1 BertWordPieceLowerCase "$UNCASED_VOCAB" 128 1
[ "$got" = " > padded vocab (size: 30522) with 70 dummy tokens (new size: 30592)" ]
ok $? "bert-large-uncased's vocabulary: 30522, padded to 30592 (no [BOS]/[EOS])"
check_padding "28996 tokens (bert-large-cased) + 100 extra ids, TP2 (multiple 256)" 2 BertWordPieceCase "$CASED_VOCAB" 128 2
[ "$got" = " > padded vocab (size: 29096) with 88 dummy tokens (new size: 29184)" ]
ok $? "bert-large-cased's vocabulary with the extra ids: 29096, padded to 29184"

# a corpus made by our preprocess_data records its WordPiece tokenizer's size, the file + [BOS] +
# [EOS] (66 for a 64-token file), more than the model's 64 rows at --make-vocab-size-divisible-by 8:
# no id of it is outside (checked at the door), and it trains
VOCAB64="$WORK/vocab64.txt"
{ cat "$BERT_VOCAB"; printf 'zebra\nyak\nxylophone\n'; } > "$VOCAB64"
"$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/lower.jsonl" --output-prefix "$WORK/lower64" \
    --tokenizer-type BertWordPieceLowerCase --vocab-file "$VOCAB64" --split-sentences > "$WORK/pre64.out" 2>&1 &&
    grep -q "vocab 66" "$WORK/pre64.out"
ok $? "the corpus over the 64-token file records vocabulary 66 ($(grep -o 'vocab [0-9]*' "$WORK/pre64.out"))"
CORPUS=lower64
run_bert 2 BertWordPieceLowerCase "$VOCAB64" --make-vocab-size-divisible-by 8
status=$?
unset CORPUS
grep -o '[^ ]*lower64_text_sentence.h5: scanned [^;]*' "$WORK/out" | sed 's/^/# /'
[ $status -eq 0 ] && [ "$(padded_vocab)" = 64 ] && grep -q '] iteration *2/ *2 |.*| lm loss: [0-9.E+-]* |' "$WORK/out"
ok $? "a 64-token file at --make-vocab-size-divisible-by 8: 64 rows, the corpus (recorded 66 with [BOS]/[EOS]) trains"
[ $status -eq 0 ] || tail -3 "$WORK/err" | sed 's/^/#   /'

# every id the dataset emits, against the padded vocabulary pretrain_bert gives the same flags
# (the text: corpus ids, [CLS] [SEP] [MASK] and the random draws; the labels: the original ids)
samples() {  # samples TOKENIZER PADDED: 300 training samples; prints the text ids that are >= 61
    corpus=lower
    [ "$1" = BertWordPieceCase ] && corpus=cased
    timeout 120 "$MPIEXEC" -n 1 "$TOOL" --seq-length 32 --samples 300 0 0 --print train:0-299 \
        --tokenizer-type "$1" --vocab-file "$BERT_VOCAB" --data-path "$WORK/${corpus}_text_sentence.h5" \
        --split 949,50,1 > "$WORK/samples.txt" 2> "$WORK/samples.err"
    status=$?
    awk -F'|' -v padded="${2:-0}" '
        { n = split($1, text, " "); for (k = 4; k <= n; k++) { id = text[k] + 0; if (id > most) most = id
                                                               if (id >= padded) bad++; if (id >= 61) extra++ }
          n = split($3, lab, " "); for (k = 2; k <= n; k++) { id = lab[k] + 0; if (id >= padded) bad++ } }
        END { printf "# %d samples: largest text id %d, %d ids >= 61 (extra ids), %d >= the padded vocabulary %d\n",
                     NR, most, extra, bad, padded
              exit !(NR == 300 && padded > 0 && bad == 0) }' "$WORK/samples.txt" > "$WORK/verdict"
    verdict=$?
    cat "$WORK/verdict"
    [ $status -eq 0 ] || tail -3 "$WORK/samples.err" | sed 's/^/#   /'
    [ $status -eq 0 ] && [ $verdict -eq 0 ]
}
samples BertWordPieceCase "$CASED_PADDED"
ok $? "cased: every id of 300 samples (text and labels) is below pretrain_bert's padded vocabulary ($CASED_PADDED)"
extra=$(sed -n 's/.*, \([0-9]*\) ids >= 61.*/\1/p' "$WORK/verdict")
[ "${extra:-0}" -gt 0 ]
ok $? "cased: the random draws reach the 100 extra ids, as Megatron's token_lookup ($extra of them)"
samples BertWordPieceLowerCase "$LOWER_PADDED"
status=$?
ok $status "lower case: every id of 300 samples is below pretrain_bert's padded vocabulary ($LOWER_PADDED)"
extra=$(sed -n 's/.*, \([0-9]*\) ids >= 61.*/\1/p' "$WORK/verdict")
[ $status -eq 0 ] && [ "${extra:-1}" -eq 0 ]
ok $? "lower case: no id beyond the file's 61 (no extra ids, no [BOS]/[EOS])"

# finetune_bert sizes its model the same way (its checkpoint is a pretrain_bert one)
timeout 120 "$MPIEXEC" -n 1 "$FINETUNE" --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 24 \
    --max-position-embeddings 24 --make-vocab-size-divisible-by 8 --tokenizer-type BertWordPieceCase \
    --vocab-file "$BERT_VOCAB" --task MNLI --train-data "$MNLI_TRAIN" --valid-data "$MNLI_DEV" --micro-batch-size 4 \
    --lr 1e-3 --epochs 1 > "$WORK/out" 2> "$WORK/err"
status=$?
want=$(megatron_padded BertWordPieceCase "$BERT_VOCAB" 8 1)
[ $status -eq 0 ] && [ "$(grep '^ > padded vocab' "$WORK/out")" = "$want" ] && [ "$(padded_vocab)" = 168 ]
ok $? "finetune_bert (cased): \"$want\", padded_vocab_size $(padded_vocab)"
[ $status -eq 0 ] || tail -3 "$WORK/err" | sed 's/^/#   /'
done_testing
