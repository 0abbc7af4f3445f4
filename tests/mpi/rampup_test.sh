#!/bin/sh
# tests/mpi/rampup_test.sh: --rampup-batch-size START INCREMENT SAMPLES trains as Megatron's
# RampupBatchsizeNumMicroBatchesCalculator schedules it (2 ranks, the tiny GPT on mock data):
# the global batch and consumed samples of every iteration, the iteration count from
# --train-samples, the data order (with --lr 0 each ramped batch's loss is the mean of the
# constant-batch losses over the same samples), a checkpoint at every batch-size change, a run
# stopped in the middle of the ramp and resumed giving the unbroken run's losses bit for bit,
# and Megatron's refusals.
. "${top_srcdir:-.}/tests/lib.sh"

grep -v -e '--train-iters' -e '--lr-warmup-iters' -e '--min-lr' "$TINY_ARGS" > "$WORK/tiny.args"
BASE="--args-file $WORK/tiny.args --micro-batch-size 2 --train-samples 200 --log-interval 1 --eval-interval 1000
      --eval-iters 1 --min-lr 0 --lr-warmup-samples 8"
RAMP="--rampup-batch-size 4 4 48"

# 1. the schedule: 4 4 4 4 (to 16 consumed), 8 8 (to 32), 12 12 (to 56 > 48), then 16
run_app 2 $BASE $RAMP --lr 0 --metrics-file "$WORK/ramp0.jsonl"
ok $? "--rampup-batch-size 4 4 48 trains (2 ranks, --train-samples 200)"
json_field "$WORK/ramp0.jsonl" train global_batch_size | tr '\n' ' ' > "$WORK/batches"
json_field "$WORK/ramp0.jsonl" train consumed_samples | tr '\n' ' ' > "$WORK/consumed"
[ "$(cat "$WORK/batches")" = "4 4 4 4 8 8 12 12 16 16 16 16 16 16 16 16 16 " ]
ok $? "the global batch of each of the 17 iterations is Megatron's ($(cat "$WORK/batches"))"
[ "$(cat "$WORK/consumed")" = "4 8 12 16 24 32 44 56 72 88 104 120 136 152 168 184 200 " ]
ok $? "consumed samples after each iteration: $(cat "$WORK/consumed")"
grep -q "will use batch size rampup starting from global batch size 4 to global batch size 16 with batch size increments 4 over 48 samples" "$WORK/out" &&
    grep -q "ramping up batch size from 12 to 16" "$WORK/out"
ok $? "Megatron's ramp-up log lines"

# 2. the data order: with --lr 0 the model stays put, so a ramped batch over samples [c, c + b)
# has the mean loss of the constant-batch-4 iterations over the same samples
run_app 2 $BASE --global-batch-size 4 --lr 0 --metrics-file "$WORK/const0.jsonl"
ok $? "the same samples with a constant global batch of 4 (50 iterations)"
json_field "$WORK/const0.jsonl" train lm_loss > "$WORK/const.loss"
json_field "$WORK/ramp0.jsonl" train lm_loss > "$WORK/ramp.loss"
awk -v batches="$(cat "$WORK/batches")" 'NR == FNR { c[NR] = $1; next }
    { split(batches, b, " "); n = b[FNR] / 4; s = 0; for (k = 1; k <= n; k++) s += c[at + k]; at += n;
      d = $1 - s / n; if (d < 0) d = -d; if (d > 1e-6 * s / n) { bad++; print "# iteration " FNR ": " $1 " vs " s / n } }
    END { exit bad > 0 || at != 50 }' "$WORK/const.loss" "$WORK/ramp.loss"
ok $? "each ramped batch's loss is the mean over the same 4-sample batches of the constant run (the data order follows the consumed samples)"

# 3. resume in the middle of the ramp: an unbroken run, and one stopped at iteration 6 (batch 8)
run_app 2 $BASE $RAMP --save "$WORK/whole" --metrics-file "$WORK/whole.jsonl"
ok $? "an unbroken ramped run with --save"
ls "$WORK/whole" > "$WORK/saved"
grep -q iter_0000004 "$WORK/saved" && grep -q iter_0000006 "$WORK/saved" && grep -q iter_0000008 "$WORK/saved" &&
    grep -q iter_0000017 "$WORK/saved" && ! grep -q iter_0000005 "$WORK/saved"
ok $? "a checkpoint at each batch-size change (iterations 4, 6, 8) and at the end, as Megatron saves them"
run_app 2 $BASE $RAMP --save "$WORK/part" --exit-interval 6 --metrics-file "$WORK/part1.jsonl"
s1=$?
run_app 2 $BASE $RAMP --load "$WORK/part" --save "$WORK/part" --metrics-file "$WORK/part2.jsonl"
s2=$?
grep -q "consumed samples 32" "$WORK/out"
ok $(( s1 + s2 + $? )) "stopped at iteration 6 (32 samples consumed, the next batch 12) and resumed from its checkpoint"
{ json_field "$WORK/part1.jsonl" train lm_loss; json_field "$WORK/part2.jsonl" train lm_loss; } > "$WORK/resumed.loss"
{ json_field "$WORK/part1.jsonl" train global_batch_size; json_field "$WORK/part2.jsonl" train global_batch_size; } >> "$WORK/resumed.loss"
{ json_field "$WORK/whole.jsonl" train lm_loss; json_field "$WORK/whole.jsonl" train global_batch_size; } > "$WORK/whole.loss"
[ "$(wc -l < "$WORK/whole.loss")" -eq 34 ] && cmp -s "$WORK/whole.loss" "$WORK/resumed.loss"
ok $? "the resumed run's 17 losses and batch sizes equal the unbroken run's, bit for bit"

# 4. refusals
run_app 2 --args-file "$TINY_ARGS" --micro-batch-size 2 $RAMP
grep -q "expected no batch-size rampup for iteration-based training" "$WORK/err"
ok $? "--rampup-batch-size with --train-iters is refused as Megatron refuses it"
run_app 2 $BASE --rampup-batch-size 6 2 48 --global-batch-size 16 --lr 0
grep -q "current global batch size (6) is not divisible by micro-batch-size (2)" "$WORK/err"
ok $? "a ramped batch of 6 over micro batch 2 x 2 ranks is refused with Megatron's message"
run_app 2 $BASE --rampup-batch-size 4 5 48 --lr 0
grep -q "global batch size interval (12) to be divisible by global batch size increment (5)" "$WORK/err"
ok $? "an increment that does not divide the interval is refused with Megatron's message"
done_testing
