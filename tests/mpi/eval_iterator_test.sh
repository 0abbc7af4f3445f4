#!/bin/sh
# tests/mpi/eval_iterator_test.sh: validation advances through the validation split as
# Megatron's one validation iterator does (consumed_valid_samples): two evaluations in a row
# with --lr 0 see different samples and report different losses, a run interrupted by
# --exit-interval and resumed from its checkpoint evaluates the same samples (bitwise the same
# validation losses) as an unbroken run, and a --split without a validation weight skips
# evaluation as Megatron does.
. "${top_srcdir:-.}/tests/lib.sh"
awk 'BEGIN { for (d = 0; d < 400; d++) { len = 20 + (d * 37) % 150; line = "{\"text\": \"";
    for (k = 0; k < len; k++) line = line (k ? " " : "") ((d * 7 + k * k) % 250); print line "\"}" } }' > "$WORK/c.jsonl"
"$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/c.jsonl" --output-prefix "$WORK/c" \
    --tokenizer-type NullTokenizer --vocab-size 255 --append-eod >"$WORK/pre.out" 2>&1
ok $? "a NullTokenizer corpus of 400 documents"
DATA="--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 2
      --global-batch-size 4 --vocab-size 256 --data-path $WORK/c_text_document --split 50,50,0
      --hidden-dropout 0 --attention-dropout 0 --log-interval 1"

run_app 2 $DATA --train-iters 3 --lr 0 --eval-interval 1 --eval-iters 1 --metrics-file "$WORK/lr0.jsonl"
ok $? "pretrain_gpt with --lr 0, an evaluation after every iteration"
json_field "$WORK/lr0.jsonl" validation lm_loss > "$WORK/lr0.valid"
count=$(wc -l < "$WORK/lr0.valid"); distinct=$(sort -u "$WORK/lr0.valid" | wc -l)
[ "$count" -eq 4 ] && [ "$distinct" -eq 4 ]
ok $? "with the weights fixed, the $count evaluations (3 in the loop and the final one) report $distinct different losses"
diag "$(tr '\n' ' ' < "$WORK/lr0.valid")"

# sample-based (--train-samples 24: 6 iterations), where Megatron does not re-derive the consumed
# validation samples from the iteration: the checkpoint's consumed_valid_samples must carry them
TRAIN="$DATA --train-samples 24 --lr 1e-3 --eval-interval 2 --eval-iters 2 --deterministic-mode"
run_app 2 $TRAIN --metrics-file "$WORK/whole.jsonl"
ok $? "an unbroken run of 6 iterations, evaluating every 2"
run_app 2 $TRAIN --save "$WORK/ckpt" --exit-interval 3 --metrics-file "$WORK/part1.jsonl"
ok $? "the same run stopped by --exit-interval 3 (after the evaluation at 2)"
run_app 2 $TRAIN --save "$WORK/ckpt" --load "$WORK/ckpt" --metrics-file "$WORK/part2.jsonl"
ok $? "resumed from its checkpoint"
json_field "$WORK/whole.jsonl" validation lm_loss > "$WORK/whole.valid"
{ json_field "$WORK/part1.jsonl" validation lm_loss; json_field "$WORK/part2.jsonl" validation lm_loss; } > "$WORK/resumed.valid"
[ "$(wc -l < "$WORK/whole.valid")" -eq 4 ] && cmp -s "$WORK/whole.valid" "$WORK/resumed.valid"
ok $? "interrupted and resumed, the 4 evaluations equal the unbroken run's bit for bit"
[ "$(sort -u "$WORK/whole.valid" | wc -l)" -eq 4 ]
ok $? "and each evaluation saw other samples"

run_app 1 $DATA --train-iters 2 --lr 0 --eval-interval 1 --eval-iters 1 --split 100,0,0 --global-batch-size 2 \
    --metrics-file "$WORK/novalid.jsonl"
[ $? -eq 0 ] && grep -q "no validation dataset" "$WORK/out" && ! grep -q '"validation"' "$WORK/novalid.jsonl"
ok $? "--split 100,0,0: no validation dataset, no evaluation (Megatron's do_valid)"
done_testing
