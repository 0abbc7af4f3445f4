#!/bin/sh
# tests/mpi/test_split_test.sh: after training, Megatron's pretrain() evaluates the validation set
# and then the test set (--eval-iters global batches from a fresh test iterator), printing
# " validation loss at iteration N on test set | ..."; here too, in the log and the metrics JSON.
# With --lr 0 and the same corpus as validation and test data, the test loss must equal the
# first validation loss (the same samples from the start) bit for bit; no test split, no test.
. "${top_srcdir:-.}/tests/lib.sh"

prepare() {  # prepare NAME DOCS BASE LEN: a NullTokenizer corpus as Megatron .bin/.idx
    awk -v docs="$2" -v base="$3" -v span="$4" 'BEGIN { for (d = 0; d < docs; d++) {
        len = 5 + (d * 37) % span; line = "{\"text\": \"";
        for (k = 0; k < len; k++) line = line (k ? " " : "") (base + 1000 * d + k);
        print line "\"}" } }' > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type NullTokenizer --vocab-size 1000000 --append-eod >"$WORK/pre.out" 2>&1 &&
    "$top_builddir/app/convert_corpus" --input "$WORK/$1_text_document.h5" --output-prefix "$WORK/$1" --to mmap \
        >"$WORK/conv.out" 2>&1
}
prepare a 300 0 60 && prepare c 300 500000 60
ok $? "two corpora of 300 documents"

MODEL="--num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 --micro-batch-size 2
       --global-batch-size 4 --tokenizer-type NullTokenizer --vocab-size 1000001 --seed 1234
       --train-iters 4 --eval-interval 2 --eval-iters 2 --log-interval 1 --lr-warmup-iters 0"

run_app 2 $MODEL --lr 1e-3 --data-path "$WORK/a" --split 90,5,5 --metrics-file "$WORK/run.jsonl"
status=$?
grep -q "^ validation loss at iteration 4 on validation set | lm loss value: " "$WORK/out" &&
    grep -q "^ validation loss at iteration 4 on test set | lm loss value: " "$WORK/out"
ok $(( status + $? )) "after training: the validation set, then the test set, in Megatron's words"
test_loss=$(json_field "$WORK/run.jsonl" test lm_loss)
[ "$(json_field "$WORK/run.jsonl" test iteration)" = 4 ] && awk -v v="$test_loss" 'BEGIN { exit !(v > 0 && v < 100) }'
ok $? "one test line in the metrics JSON: {\"split\": \"test\", \"iteration\": 4, \"lm_loss\": $test_loss, ...}"
[ "$(sed -n 's/.*validation loss at iteration 4 on validation set .*//p' "$WORK/out" | wc -l)" -eq 1 ] &&
    [ "$(json_field "$WORK/run.jsonl" validation lm_loss | wc -l)" -eq 3 ]
ok $? "validation still at iterations 2 and 4 and once after training (3 lines)"

# the test iterator starts at sample 0 of the test set: with --lr 0 and the validation and test
# sets built from the same corpus (one epoch each, so the same samples), the test loss equals
# the first validation loss, and not the later ones (the validation iterator moved on)
run_app 2 $MODEL --lr 0 --train-data-path "$WORK/a" --valid-data-path "$WORK/c" --test-data-path "$WORK/c" \
    --metrics-file "$WORK/same.jsonl"
status=$?
first_valid=$(json_field "$WORK/same.jsonl" validation lm_loss | head -1)
last_valid=$(json_field "$WORK/same.jsonl" validation lm_loss | tail -1)
test_loss=$(json_field "$WORK/same.jsonl" test lm_loss)
[ $status -eq 0 ] && [ -n "$test_loss" ] && [ "$test_loss" = "$first_valid" ] && [ "$test_loss" != "$last_valid" ]
ok $? "--lr 0, validation and test data the same corpus: test loss $test_loss = first validation loss, != last ($last_valid)"

# no test dataset: --split 98,2,0 gives it no weight; 949,50,1 over 300 documents gives it none
run_app 2 $MODEL --lr 1e-3 --data-path "$WORK/a" --split 98,2,0 --metrics-file "$WORK/notest.jsonl"
[ $? -eq 0 ] && ! grep -q "on test set" "$WORK/out" && ! grep -q '"test"' "$WORK/notest.jsonl" &&
    grep -q "no test dataset" "$WORK/out"
ok $? "--split 98,2,0: no test dataset, no test evaluation"
run_app 2 $MODEL --lr 1e-3 --data-path "$WORK/a" --split 949,50,1
[ $? -eq 0 ] && ! grep -q "on test set" "$WORK/out" && grep -q "no test dataset" "$WORK/out"
ok $? "--split 949,50,1 over 300 documents (a test split without documents): a note, no test evaluation"
run_app 2 $MODEL --lr 1e-3 --data-path "$WORK/a" --split 90,5,5 --eval-iters 0
[ $? -eq 0 ] && ! grep -q "validation loss" "$WORK/out"
ok $? "--eval-iters 0: neither validation nor test (Megatron's do_valid and do_test)"
done_testing
