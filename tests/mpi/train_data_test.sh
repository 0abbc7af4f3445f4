#!/bin/sh
# train_data_test.sh: pretrain_gpt on a real corpus: Shakespeare preprocessed with the GPT-2
# tokenizer into our HDF5 corpus, and the same corpus converted to Megatron's .bin/.idx; training
# on either gives the same losses, and the loss falls.
. "${top_srcdir:-.}/tests/lib.sh"
GPT2="$top_srcdir/configs/tokenizers/gpt2"

# a JSONL corpus of the first 2000 paragraphs of the bundled text
awk 'BEGIN { RS = ""; n = 0 } n < 2000 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/shakespeare.jsonl"
"$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/shakespeare.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2/vocab.json" --merge-file "$GPT2/merges.txt" --append-eod \
    > "$WORK/pre.out" 2>&1
ok $? "preprocess_data writes the HDF5 corpus ($(grep -o '[0-9]* documents, [0-9]* sentences, [0-9]* tokens' "$WORK/pre.out"))"
"$top_builddir/app/convert_corpus" --input "$WORK/corpus_text_document.h5" --output-prefix "$WORK/megatron" --to mmap > "$WORK/conv.out" 2>&1
ok $? "convert_corpus writes Megatron's .bin/.idx"

DATA="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 2
      --global-batch-size 8 --train-iters 30 --lr 3e-3 --lr-warmup-iters 3 --log-interval 5 --eval-interval 15
      --eval-iters 1 --split 90,10,0 --tokenizer-type GPT2BPETokenizer --vocab-file $GPT2/vocab.json
      --merge-file $GPT2/merges.txt --hidden-dropout 0 --attention-dropout 0"
run_app 2 $DATA --data-path "$WORK/corpus_text_document" --metrics-file "$WORK/h5.jsonl"
ok $? "pretrain_gpt trains on the HDF5 corpus"
run_app 2 $DATA --data-path "$WORK/megatron" --metrics-file "$WORK/mmap.jsonl" --data-cache-path "$WORK/cache"
ok $? "pretrain_gpt trains on the .bin/.idx corpus (with an index cache)"
json_field "$WORK/h5.jsonl" train lm_loss > "$WORK/h5.loss"
json_field "$WORK/mmap.jsonl" train lm_loss > "$WORK/mmap.loss"
[ -s "$WORK/h5.loss" ] && cmp -s "$WORK/h5.loss" "$WORK/mmap.loss"
ok $? "the same losses from either format"
first=$(head -1 "$WORK/h5.loss"); last=$(tail -1 "$WORK/h5.loss")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(f > 10.0 && l < f - 1.0) }'
ok $? "the loss falls on Shakespeare (from $first to $last over 30 iterations)"
ls "$WORK/cache"/*-GPTDataset-train-shuffle_index.npy >/dev/null 2>&1
ok $? "--data-cache-path holds the built indices"

run_app 2 $DATA --data-path "$WORK/nothing_here"
grep -q "nothing_here" "$WORK/err" && [ "$(grep -c 'error' "$WORK/err")" -ge 1 ]
ok $? "a missing corpus is named ($(grep -m1 error "$WORK/err" | cut -c1-100))"
run_app 2 $DATA --data-path "$WORK/corpus_text_document" --mock-data --vocab-size 64
grep -q "\-\-mock-data and --data-path cannot both be given" "$WORK/err"
ok $? "--mock-data and --data-path exclude each other"

done_testing
