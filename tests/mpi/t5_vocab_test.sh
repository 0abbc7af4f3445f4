#!/bin/sh
# tests/mpi/t5_vocab_test.sh: pretrain_t5's vocabulary holds the T5 dataset's sentinels (issue 46).
# Megatron-Core (megatron/core/tokenizers/utils/build_tokenizer.py) builds --tokenizer-type
# BertWordPieceCase as Hugging Face's BertTokenizer over --vocab-file with the 100
# additional_special_tokens <extra_id_0> .. <extra_id_99> (whatever --vocab-extra-ids says), so
# tokenizer.vocab_size = len(tokenizer) = the file's tokens + 100 (no [BOS]/[EOS] there), and
# vocab_size_with_padding rounds that up to a multiple of --make-vocab-size-divisible-by x TP,
# printing " > padded vocab (size: V) with P dummy tokens (new size: V + P)". The T5 dataset takes
# its sentinels from the same tokenizer (additional_special_tokens_ids: file size + i). Checked:
# pretrain_t5's padded vocabulary and its log line equal that computation for the 61-token test
# vocabulary (--make-vocab-size-divisible-by 7: 161 exactly, no room to spare; 128 x TP2) and for
# the 220M example's settings (a 28996-token file like bert-large-cased's: 29096 -> 29184); and
# with the most masked spans the setup allows (100, one per sentinel), every sentinel of the
# samples is below the model's padded vocabulary and none is [PAD], [UNK], [CLS], [SEP], [MASK]
# or the dataset's bos ([CLS]) and eos ([SEP]). Before the fix pretrain_t5 sized the model as
# the file + [BOS] + [EOS] (63 here; 29056 for the example): sentinels 0 and 1 took those two
# ids and the rest fell outside the embedding.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
PRETRAIN_T5="$top_builddir/app/pretrain_t5"
TOOL="$top_builddir/tests/tools/t5_samples"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

# a vocabulary the size of bert-large-cased's (28996 lines): the test file's 61 tokens, then words
LARGE_VOCAB="$WORK/large-vocab.txt"
{ cat "$BERT_VOCAB"; awk 'BEGIN { for (i = 61; i < 28996; i++) print "w" i }'; } > "$LARGE_VOCAB"
bert_corpus t5 60 BertWordPieceCase

# megatron_padded VOCAB_FILE DIVISIBLE TP: Megatron-Core's line for BertWordPieceCase, computed
# here as build_tokenizer and vocab_size_with_padding do (len(BertTokenizer) counts the file's
# distinct tokens; these files have no duplicates and no <extra_id_i>)
megatron_padded() {
    size=$(($(sort -u "$1" | wc -l) + 100)) multiple=$(($2 * $3))
    after=$(( (size + multiple - 1) / multiple * multiple ))
    echo " > padded vocab (size: $size) with $((after - size)) dummy tokens (new size: $after)"
}
# run_t5 NRANKS VOCAB_FILE FLAGS...: one iteration of a tiny T5, output in $WORK/out
run_t5() {
    n=$1 vocab=$2; shift 2
    timeout 120 "$MPIEXEC" -n "$n" "$PRETRAIN_T5" --encoder-num-layers 1 --decoder-num-layers 1 --hidden-size 16 \
        --num-attention-heads 2 --encoder-seq-length 32 --decoder-seq-length 12 --micro-batch-size 2 --train-iters 1 \
        --lr 1e-3 --eval-iters 0 --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file "$vocab" \
        --data-path "$WORK/t5_text_sentence.h5" --split 949,50,1 "$@" > "$WORK/out" 2> "$WORK/err"
}
# check_padding DESCRIPTION NRANKS VOCAB_FILE DIVISIBLE TP: pretrain_t5's line and padded size are Megatron's
check_padding() {
    what=$1 n=$2 vocab=$3 divisible=$4 tp=$5
    want=$(megatron_padded "$vocab" "$divisible" "$tp")
    run_t5 "$n" "$vocab" --make-vocab-size-divisible-by "$divisible" --tensor-model-parallel-size "$tp"
    status=$?
    got=$(grep '^ > padded vocab' "$WORK/out")
    padded=$(sed -n 's/^ *padded_vocab_size \.* \([0-9]*\)$/\1/p' "$WORK/out")
    [ $status -eq 0 ] && [ "$got" = "$want" ] && [ "$padded" = "$(echo "$want" | sed 's/.*new size: \([0-9]*\))$/\1/')" ]
    ok $? "$what: Megatron's \"$want\"; pretrain_t5's \"$got\", padded_vocab_size $padded"
    [ $status -eq 0 ] || tail -3 "$WORK/err" | sed 's/^/#   /'
}
check_padding "61 tokens, --make-vocab-size-divisible-by 7" 1 "$BERT_VOCAB" 7 1
SMALL_PADDED=$padded
check_padding "61 tokens, --make-vocab-size-divisible-by 128, TP2" 2 "$BERT_VOCAB" 128 2
check_padding "the 220M example: 28996 tokens, --make-vocab-size-divisible-by 128" 1 "$LARGE_VOCAB" 128 1
[ "$got" = " > padded vocab (size: 29096) with 88 dummy tokens (new size: 29184)" ]
ok $? "the 220M example's vocabulary: 28996 + 100 sentinels = 29096, padded to 29184"
check_padding "the 220M example at TP2 (multiple 256)" 2 "$LARGE_VOCAB" 128 2

# the most spans the setup allows: 4 documents of one 2000-token sentence of whole words and
# pieces (ids 5 .. 60), --mask-prob 0.26, 16 samples: sample 13 has 100 spans (sample 15 would need
# a 101st sentinel, which Megatron's deque does not have and the dataset refuses)
"$PYTHON" - "$WORK/long" <<'PY'
import struct, sys, numpy
rs = numpy.random.RandomState(3)
sentences = [rs.randint(5, 61, size=2000).astype(numpy.int32) for _ in range(4)]
with open(sys.argv[1] + ".bin", "wb") as f:
    for s in sentences:
        f.write(s.tobytes())
lengths = numpy.array([len(s) for s in sentences], dtype=numpy.int32)
pointers = (numpy.arange(4) * 8000).astype(numpy.int64)
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
    f.write(struct.pack("<Q", 4) + struct.pack("<Q", 5))
    f.write(lengths.tobytes() + pointers.tobytes() + numpy.arange(5, dtype=numpy.int64).tobytes())
PY
LONG="--encoder-seq-length 2002 --decoder-seq-length 1000 --mask-prob 0.26 --short-seq-prob 0 --seed 1234
      --tokenizer-type BertWordPieceCase --vocab-extra-ids 100 --vocab-file $BERT_VOCAB --data-path $WORK/long --split 1,0,0"
timeout 120 "$MPIEXEC" -n 1 "$TOOL" --samples 16 0 0 --print train:0-14 $LONG > "$WORK/long.txt" 2> "$WORK/long.err"
ok $? "15 samples of up to 2000 tokens at --mask-prob 0.26 (t5_samples)"
# the sentinels are the encoder input's ids outside the corpus's 5 .. 60 (each span's one, in
# order), and in the decoder input and labels the ids after them; specials from the vocab file
specials=$(awk '$0 == "[PAD]" || $0 == "[UNK]" || $0 == "[CLS]" || $0 == "[SEP]" || $0 == "[MASK]" { printf "%s%d", s, NR - 1; s = "," }' "$BERT_VOCAB")
awk -F'|' -v padded="${SMALL_PADDED:-0}" -v specials="$specials" -v cls=2 -v sep=3 '
    BEGIN { n = split(specials, sp, ","); for (i = 1; i <= n; i++) special[sp[i]] = 1 }
    { split($1, enc, " "); split($2, dec, " "); split($3, lab, " "); spans = 0
      for (k = 4; k <= length(enc); k++) if (enc[k] > 60) {
          spans++; id = enc[k] + 0; seen[id] = 1
          if (id >= padded || id in special || id == cls || id == sep) bad++ }
      if (spans > most) most = spans
      if (dec[2] != cls) bad++                        # the decoder input opens with bos = [CLS]
      last = 0; for (k = 2; k <= length(lab); k++) if (lab[k] != -1) last = lab[k]
      if (last != sep) bad++ }                        # the labels close with eos = [SEP]
    END { for (id in seen) distinct++
          printf "# %d samples, up to %d spans, %d distinct sentinel ids (max id vs padded vocabulary %d), %d bad\n",
                 NR, most, distinct, padded, bad
          exit !(NR == 15 && most == 100 && distinct == 100 && padded > 0 && bad == 0) }' "$WORK/long.txt"
ok $? "100 spans, the most the tokenizer's sentinels allow: every sentinel below pretrain_t5's padded vocabulary ($SMALL_PADDED) and none a special id or the dataset's bos/eos"
timeout 120 "$MPIEXEC" -n 1 "$TOOL" --samples 16 0 0 --print train:15 $LONG > "$WORK/more.txt" 2>&1
[ $? -ne 0 ] && grep -q "more than the tokenizer's 100 sentinel" "$WORK/more.txt"
ok $? "sample 15, with a 101st span, is refused: $(grep -m1 -o "more than the tokenizer's 100 sentinel[^;]*" "$WORK/more.txt")"

# the sentinels and the model agree in training too: pretrain_t5 on the long corpus at the 161 vocabulary
timeout 120 "$MPIEXEC" -n 1 "$PRETRAIN_T5" --encoder-num-layers 1 --decoder-num-layers 1 --hidden-size 16 \
    --num-attention-heads 2 --micro-batch-size 1 --train-iters 1 --lr 1e-3 --eval-iters 0 --max-position-embeddings 2002 \
    --make-vocab-size-divisible-by 7 $LONG > "$WORK/train.out" 2> "$WORK/train.err"
[ $? -eq 0 ] && grep -q '] iteration *1/ *1 |.*| lm loss: [0-9.E+-]* |' "$WORK/train.out" &&
    grep -q '^ *padded_vocab_size \.* 161$' "$WORK/train.out"
ok $? "pretrain_t5 trains on those samples with a vocabulary of exactly 161 ids ($(grep -o 'padded_vocab_size .*' "$WORK/train.out"))"
[ -s "$WORK/train.err" ] && tail -2 "$WORK/train.err" | sed 's/^/#   /'
done_testing
