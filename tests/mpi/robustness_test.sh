#!/bin/sh
# robustness_test.sh: the NaN/Inf policy, the time limits, the heartbeat and the checkpoint
# argument checks of pretrain_gpt, on 2 ranks (TP2 and DP2). The hang timeout and the fault
# cases are in fault_injection_test.sh.
#  - an exploding run (--lr 1e6, TP2) stops at the first non-finite gradient norm, naming the
#    iteration, both ranks and their first non-finite tensor; exit 1; the newest checkpoint is
#    the last finite iteration's; no logged iteration holds a non-finite value;
#  - with --lr 1e30 (DP2) the loss goes non-finite first: the message names the loss;
#  - --no-check-for-nan-in-loss-and-grad goes on, skipping and counting those steps;
#  - --check-for-spiky-loss warns at the spike;
#  - --exit-duration-in-mins saves and exits (from the process start, and from
#    SLURM_JOB_START_TIME), and the restart goes on;
#  - --heartbeat-interval prints heartbeat lines between log lines;
#  - a checkpoint whose model arguments or learning-rate schedule conflict with the run's is
#    refused naming the flags; --override-opt-param-scheduler and
#    --use-checkpoint-opt_param-scheduler choose the schedule as in Megatron.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --vocab-size 128
       --make-vocab-size-divisible-by 64 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --min-lr 0
       --lr-warmup-iters 0 --log-interval 1 --eval-iters 0 --mock-data"
TP2="--tensor-model-parallel-size 2"
not_finite() { grep -i -c '"\(lm_loss\|grad_norm\)": *-\?\(nan\|inf\)' "$1"; }

# ---- NaN / Inf ----
# (gpt-tiny with --lr 1e6: the gradients go non-finite at iteration 3 while the loss is finite)
run_app 2 --args-file "$TINY_ARGS" $TP2 --lr 1e6 --min-lr 0 --lr-warmup-iters 0 --log-interval 1 --eval-iters 0 \
    --train-iters 20 --save "$WORK/explode" --save-interval 1 --metrics-file "$WORK/explode.jsonl" --check-for-spiky-loss
status=$?
sed -n '1,3p' "$WORK/err" | sed 's/^/# /'
named=$(sed -n 's/.*the gradient norm of iteration \([0-9]*\) is .*/\1/p' "$WORK/err")
logged=$(json_field "$WORK/explode.jsonl" train iteration | tail -1)
[ $status -eq 1 ] && [ -n "$named" ] && [ "$named" -eq $((logged + 1)) ] && [ "$(not_finite "$WORK/explode.jsonl")" -eq 0 ]
ok $? "an exploding TP2 run stops at iteration $named, one after the last finite one, exit $status"
grep -q "^  rank 0: first non-finite gradient [a-z_.0-9]* (sum of squares" "$WORK/err" &&
    grep -q "^  rank 1: first non-finite gradient " "$WORK/err" && grep -q "nothing is saved from this state" "$WORK/err"
ok $? "the message names each rank's first non-finite gradient tensor"
[ "$(cat "$WORK/explode/latest_checkpointed_iteration.txt")" = "$logged" ] &&
    [ ! -e "$WORK/explode/iter_$(printf %07d "$named").h5" ] && ! ls "$WORK/explode"/*.partial >/dev/null 2>&1
ok $? "nothing is saved from the non-finite state: the newest checkpoint is iteration $logged"
grep -q "WARNING: spiky loss at iteration 2: lm loss .* is more than 10x the largest of the last 1 iterations" "$WORK/out"
ok $? "--check-for-spiky-loss warns at the spike"

run_app 2 $MODEL --lr 1e30 --train-iters 20 --metrics-file "$WORK/loss.jsonl"
status=$?
[ $status -eq 1 ] && grep -q "error: the lm loss of iteration 2 is -\?nan" "$WORK/err" &&
    grep -q "^  rank [01]: its share of the loss (last pipeline stage) is -\?nan" "$WORK/err" &&
    [ "$(json_field "$WORK/loss.jsonl" train iteration | tail -1)" = 1 ]
ok $? "with --lr 1e30 (DP2) the loss of iteration 2 is named, after the forward"

run_app 2 $MODEL --lr 1e30 --train-iters 5 --metrics-file "$WORK/nocheck.jsonl" --no-check-for-nan-in-loss-and-grad
status=$?
[ $status -eq 0 ] && [ "$(json_field "$WORK/nocheck.jsonl" train nan_iterations | awk '{ s += $1 } END { print s }')" = 4 ]
ok $? "--no-check-for-nan-in-loss-and-grad runs on, skipping and counting 4 steps (per log interval, as Megatron)"
run_app 2 $MODEL --train-iters 2 --check-for-nan-in-loss-and-grad --no-check-for-nan-in-loss-and-grad
[ $? -eq 2 ] && grep -q "cannot both be given" "$WORK/err"
ok $? "the two NaN flags together are refused"

# ---- time limits and heartbeat ----
run_app 2 $MODEL $TP2 --train-iters 50 --exit-duration-in-mins 0.0001 --save "$WORK/duration"
status=$?
grep -q "exiting program after 0\.[0-9]* minutes (--exit-duration-in-mins 0.0001) at iteration 1$" "$WORK/out" &&
    [ "$(cat "$WORK/duration/latest_checkpointed_iteration.txt")" = 1 ]
ok $(( status + $? )) "--exit-duration-in-mins 0.0001 saves iteration 1 and exits 0"
export SLURM_JOB_START_TIME=$(( $(date +%s) - 600 ))
run_app 2 $MODEL $TP2 --train-iters 50 --exit-duration-in-mins 9.9 --save "$WORK/duration" --load "$WORK/duration"
status=$?
unset SLURM_JOB_START_TIME
grep -q "loaded checkpoint .*: iteration 1," "$WORK/out" &&
    grep -q "exiting program after 10\.[0-9]* minutes (--exit-duration-in-mins 9.9) at iteration 2$" "$WORK/out" &&
    [ "$(cat "$WORK/duration/latest_checkpointed_iteration.txt")" = 2 ]
ok $(( status + $? )) "the restart goes on; time counts from SLURM_JOB_START_TIME (10 minutes ago): exit after iteration 2"
run_app 2 $MODEL --train-iters 30 --log-interval 1000 --heartbeat-interval 0.01
status=$?
[ $status -eq 0 ] && grep -q "heartbeat: iteration [0-9]*/30, consumed samples [0-9]*$" "$WORK/out"
ok $? "--heartbeat-interval prints heartbeat lines between log lines ($(grep -c heartbeat "$WORK/out"))"

# ---- checkpoint argument checks ----
run_app 2 $MODEL $TP2 --train-iters 4 --save "$WORK/ckpt" --metrics-file "$WORK/straight.jsonl"
ok $? "a checkpoint of iteration 4 (--train-iters 4)"
run_app 2 $MODEL --train-iters 4 --num-attention-heads 2 --load "$WORK/ckpt"
[ $? -eq 2 ] && grep -q "conflict with this run's: --num-attention-heads = 4 (this run: 2), --kv-channels = 8 (this run: 16); pass matching flags, or --finetune" "$WORK/err"
ok $? "other attention heads (same tensor shapes) are refused naming the flags"
run_app 2 $MODEL --train-iters 5 --num-attention-heads 2 --load "$WORK/ckpt" --finetune
ok $? "... and --finetune loads the weights anyway"
run_app 2 $MODEL --train-iters 8 --load "$WORK/ckpt"
[ $? -eq 2 ] && grep -q "learning-rate schedule that conflicts with this run's: --lr-decay-iters = 4 (this run: 8); pass --override-opt-param-scheduler" "$WORK/err"
ok $? "a different LR schedule (--train-iters 8 moves the decay) is refused naming the flag"
lr_at() { json_field "$1" train learning_rate | sed -n "${2}p"; }
run_app 2 $MODEL --train-iters 8 --lr-decay-iters 4 --min-lr 1e-5 --load "$WORK/ckpt" --override-opt-param-scheduler \
    --metrics-file "$WORK/override.jsonl"
status=$?
run_app 2 $MODEL --train-iters 8 --lr-decay-iters 4 --min-lr 1e-5 --load "$WORK/ckpt" --use-checkpoint-opt_param-scheduler \
    --metrics-file "$WORK/checkpoint_lr.jsonl"
status=$((status + $?))
diag "learning rate at iteration 5: $(lr_at "$WORK/override.jsonl" 1) (this run's --min-lr 1e-5), $(lr_at "$WORK/checkpoint_lr.jsonl" 1) (the checkpoint's 0)"
[ $status -eq 0 ] && awk -v a="$(lr_at "$WORK/override.jsonl" 1)" -v b="$(lr_at "$WORK/checkpoint_lr.jsonl" 1)" \
    'BEGIN { exit !(a > 0.999e-5 && a < 1.001e-5 && b + 0 == 0) }'
ok $? "--override-opt-param-scheduler takes the run's schedule, --use-checkpoint-opt_param-scheduler the checkpoint's"

done_testing
