#!/bin/sh
# fp16_test.sh: --fp16 with Megatron's loss scaling through pretrain_gpt (2 ranks, the tiny GPT).
# The CPU backend computes in fp32 with the scaler fully active, so:
#  a) --fp16 (dynamic, 2^32) trains, logs "loss scale: 4294967296.0" and no skipped iteration,
#     and gives the fp32 run's losses and parameters bit for bit (scaling by 2^k is exact);
#  b) overflows at iterations 1-3: exactly those iterations are skipped (counted, per log
#     interval), the scale halves as Megatron's DynamicGradScaler does (hysteresis 1: at every
#     overflow; 2: from the second), the learning-rate schedule stands still, the parameters do
#     not move, then training goes on;
#  c) --loss-scale 1 and 2^16 (constant) give the fp32 losses bit for bit; --loss-scale 3 does not
#     (the scaling really runs) but stays within 1e-6; --bf16 --loss-scale on the CPU is
#     Megatron's constant scaler too;
#  d) a save in the middle and resumes (twice) give the unbroken run bit for bit: the scale, the
#     growth and the hysteresis trackers travel in /optimizer/grad_scaler; Megatron's warnings
#     where the checkpoint and the run disagree about having a scaler;
#  e) refusals, one line each: --fp16 with --bf16, --min-loss-scale 0 or negative or above the
#     initial scale, --loss-scale-window 0, --hysteresis 0; --fp16 --device cuda is accepted
#     (without a GPU only the generic no-GPU error stops it); a constant scale keeps the NaN
#     check: an overflow stops the run;
#  f) TP2, PP2 and DP2 with the distributed optimizer, with the overflows on rank 1 only, skip the
#     same iterations with the same scales as DP2 (found_inf is agreed over the model-parallel
#     group, or every rank).
# Every overflow is injected (MTC_FAULT_GRAD_INF: +inf in one gradient at chosen iterations and
# ranks, after the gradient reduction), so where they fall never hangs on the machine's rounding
# near fp32's largest value (natural overflows at a scale of 2^127 came and went with the BLAS
# kernels: under OPENBLAS_CORETYPE=Prescott hysteresis 2 overflowed once more at iteration 6).
. "${top_srcdir:-.}/tests/lib.sh"

MODEL="--args-file $TINY_ARGS --log-interval 1 --eval-iters 0 --train-iters 10 --lr-warmup-iters 0"
field() { json_field "$1" train "$2" | tr '\n' ' '; }
hash_of() { grep "final parameter hash" "$WORK/out"; }
fail_details() { sed 's/^/#   /' "$WORK/err" | tail -3; }

# ---- a) dynamic scaling without overflow ----
run_app 2 $MODEL --metrics-file "$WORK/fp32.jsonl"
ok $? "the fp32 reference run (DP2, 10 iterations)"
fp32_hash=$(hash_of)
run_app 2 $MODEL --fp16 --metrics-file "$WORK/fp16.jsonl"
ok $? "--fp16 trains"
fp16_hash=$(hash_of)
[ "$(grep -c "lm loss: .* | loss scale: 4294967296.0 | grad norm: [0-9.]* | number of skipped iterations:   0 | number of nan iterations:   0 |" "$WORK/out")" = 10 ]
ok $? "every log line shows 'loss scale: 4294967296.0' and 'number of skipped iterations:   0'"
grep -q "^WARNING: Setting args.check_for_nan_in_loss_and_grad to False since dynamic loss scaling is being used" "$WORK/out"
ok $? "Megatron's warning: dynamic loss scaling turns the NaN check off"
first=$(json_field "$WORK/fp16.jsonl" train lm_loss | head -1); last=$(json_field "$WORK/fp16.jsonl" train lm_loss | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'
ok $? "the loss falls ($first -> $last)"
[ "$(field "$WORK/fp16.jsonl" lm_loss)" = "$(field "$WORK/fp32.jsonl" lm_loss)" ] && [ -n "$fp16_hash" ] && [ "$fp16_hash" = "$fp32_hash" ]
ok $? "a scale of 2^32 gives the fp32 losses and final parameters bit for bit"

# ---- b) overflow: skipped, halved, then training goes on ----
# overflows injected at iterations 1-3 (every rank): hysteresis 1 halves the scale at each of them,
# hysteresis 2 from the second on; then no overflow, so the scale stands for the rest of the run
# (the growth window of 1000 is not reached)
INJECT_123="1@0,1@1,2@0,2@1,3@0,3@1"
SCALE_2_32=4294967296
MTC_FAULT_GRAD_INF=$INJECT_123 run_app 2 $MODEL --fp16 --hysteresis 1 --metrics-file "$WORK/h1.jsonl"
ok $? "--fp16 --hysteresis 1 with overflows injected at iterations 1-3 runs"
MTC_FAULT_GRAD_INF=$INJECT_123 run_app 2 $MODEL --fp16 --metrics-file "$WORK/h2.jsonl"
ok $? "--fp16 (--hysteresis 2) with overflows injected at iterations 1-3 runs"
grep -q "lm loss: 0.000000E+00 | loss scale: $SCALE_2_32.0 | number of skipped iterations:   1 | number of nan iterations:   0 |" "$WORK/out" &&
    grep -q "| loss scale: 1073741824.0 | grad norm: [0-9.]* | number of skipped iterations:   0 |" "$WORK/out"
ok $? "a skipped iteration's log line: Megatron's loss scale, no grad norm, 1 skipped (the count restarts each interval)"
diag "hysteresis 1: skipped $(field "$WORK/h1.jsonl" skipped_iterations); scales $(field "$WORK/h1.jsonl" loss_scale)"
diag "hysteresis 2: skipped $(field "$WORK/h2.jsonl" skipped_iterations); scales $(field "$WORK/h2.jsonl" loss_scale)"
# Megatron's DynamicGradScaler replayed on the logged skips: the scale logged after each iteration
replay() {  # replay FILE HYSTERESIS: 0 when every logged scale follows from the skips
    paste -d' ' "$1.skips" "$1.scales" | awk -v h="$2" -v s="$SCALE_2_32" '
        BEGIN { tracker = h; growth = 0 }
        { if ($1 == 1) { growth = 0; tracker--; if (tracker <= 0) s = s / 2 }
          else if (++growth == 1000) { growth = 0; tracker = h; s = s * 2 }
          if ($2 != s) { bad++; print "# iteration " NR ": logged " $2 ", expected " s } }
        END { exit bad > 0 || NR != 10 }'
}
for h in 1 2; do
    json_field "$WORK/h$h.jsonl" train skipped_iterations > "$WORK/h$h.skips"
    json_field "$WORK/h$h.jsonl" train loss_scale | awk '{ printf "%.0f\n", $1 }' > "$WORK/h$h.scales"
done
replay "$WORK/h1" 1 && replay "$WORK/h2" 2
ok $? "the logged scales follow Megatron's DynamicGradScaler from the skips (backoff 0.5, hysteresis 1 and 2)"
[ "$(field "$WORK/h1.jsonl" skipped_iterations)" = "1 1 1 0 0 0 0 0 0 0 " ] &&
    [ "$(field "$WORK/h2.jsonl" skipped_iterations)" = "1 1 1 0 0 0 0 0 0 0 " ] &&
    [ "$(tr '\n' ' ' < "$WORK/h1.scales")" = "2147483648 1073741824 536870912 536870912 536870912 536870912 536870912 536870912 536870912 536870912 " ] &&
    [ "$(tr '\n' ' ' < "$WORK/h2.scales")" = "4294967296 2147483648 1073741824 1073741824 1073741824 1073741824 1073741824 1073741824 1073741824 1073741824 " ]
ok $? "exactly the injected iterations are skipped; hysteresis 1 halves 2^32 three times, hysteresis 2 twice"
lrs=$(json_field "$WORK/h2.jsonl" train learning_rate | head -n 4 | sort -u)
[ "$(echo "$lrs" | wc -l)" = 1 ] && [ "$(json_field "$WORK/h2.jsonl" train learning_rate | sed -n 5p)" != "$lrs" ]
ok $? "the schedule does not advance on a skipped step: the first update (iteration 4) still uses the peak lr ($lrs)"
MTC_FAULT_GRAD_INF="1@0,1@1,2@0,2@1" run_app 2 $MODEL --fp16 --train-iters 2 --lr-decay-iters 10
ok $? "two skipped iterations"
skipped_hash=$(hash_of)
run_app 2 $MODEL --train-iters 1 --lr 0 --min-lr 0
initial_hash=$(hash_of)
[ -n "$skipped_hash" ] && [ "$skipped_hash" = "$initial_hash" ]
ok $? "the parameters after the skipped steps are the initial ones ($skipped_hash)"

# ---- c) constant scales ----
for scale in 1 65536; do
    run_app 2 $MODEL --fp16 --loss-scale $scale --metrics-file "$WORK/const$scale.jsonl"
    status=$?
    [ $status -eq 0 ] && [ "$(field "$WORK/const$scale.jsonl" lm_loss)" = "$(field "$WORK/fp32.jsonl" lm_loss)" ] &&
        [ "$(hash_of)" = "$fp32_hash" ] && grep -q "| loss scale: $scale.0 | grad norm" "$WORK/out" && ! grep -q "^WARNING: Setting" "$WORK/out"
    ok $? "--fp16 --loss-scale $scale: the fp32 losses and parameters bit for bit, the NaN check kept on"
done
run_app 2 $MODEL --fp16 --loss-scale 3 --metrics-file "$WORK/const3.jsonl"
ok $? "--fp16 --loss-scale 3 trains"
json_field "$WORK/fp32.jsonl" train lm_loss > "$WORK/fp32.loss"
json_field "$WORK/const3.jsonl" train lm_loss > "$WORK/const3.loss"
! cmp -s "$WORK/fp32.loss" "$WORK/const3.loss" &&
    awk 'NR == FNR { a[NR] = $1; next } { d = $1 - a[FNR]; if (d < 0) d = -d; if (d > 1e-6 * a[FNR]) bad++ } END { exit bad > 0 }' \
        "$WORK/fp32.loss" "$WORK/const3.loss"
ok $? "a scale of 3 rounds (its inverse is inexact): losses differ from fp32, by less than 1e-6"
run_app 2 $MODEL --bf16 --loss-scale 1024 --metrics-file "$WORK/bf16.jsonl"
[ $? -eq 0 ] && grep -q "| loss scale: 1024.0 | grad norm" "$WORK/out" && [ "$(field "$WORK/bf16.jsonl" lm_loss)" = "$(field "$WORK/fp32.jsonl" lm_loss)" ]
ok $? "--bf16 --loss-scale 1024 is Megatron's constant scaler (CPU: fp32, bitwise the fp32 losses)"

# ---- d) save in the middle, resume twice ----
# overflows at iterations 1, 2, 3 (hysteresis 2: the scale halves at the 2nd and the 3rd), a
# growth at 6 (window 3), overflows at 7 (hysteresis back to 2: not halved) and 8 (halved)
RESUME="$MODEL --fp16 --initial-loss-scale 65536 --loss-scale-window 3 --lr-decay-iters 10"
export MTC_FAULT_GRAD_INF="1@0,1@1,2@0,2@1,3@0,3@1,7@0,7@1,8@0,8@1"
run_app 2 $RESUME --metrics-file "$WORK/straight.jsonl"
ok $? "resume: 10 iterations straight (overflows, a growth, overflows again)"
diag "skipped: $(field "$WORK/straight.jsonl" skipped_iterations); scales: $(field "$WORK/straight.jsonl" loss_scale)"
[ "$(field "$WORK/straight.jsonl" skipped_iterations)" = "1 1 1 0 0 0 1 1 0 0 " ] &&
    [ "$(field "$WORK/straight.jsonl" loss_scale)" = "65536 32768 16384 16384 16384 32768 32768 16384 16384 16384 " ]
ok $? "the injected overflows skip iterations 1-3, 7 and 8; the scale follows Megatron's DynamicGradScaler"
straight_hash=$(hash_of)
run_app 2 $RESUME --train-iters 5 --save "$WORK/ckpt" --metrics-file "$WORK/resumed.jsonl" &&
    run_app 2 $RESUME --train-iters 7 --load "$WORK/ckpt" --save "$WORK/ckpt" --metrics-file "$WORK/resumed.jsonl" &&
    run_app 2 $RESUME --load "$WORK/ckpt" --save "$WORK/ckpt" --metrics-file "$WORK/resumed.jsonl"
ok $? "resume: 5 iterations, save; load, 2 more, save; load, 3 more"
resumed_hash=$(hash_of)
for f in lm_loss loss_scale skipped_iterations learning_rate grad_norm; do
    [ "$(field "$WORK/resumed.jsonl" $f)" = "$(field "$WORK/straight.jsonl" $f)" ] || { diag "$f differs"; false; } || break
done
[ $? -eq 0 ] && [ -n "$straight_hash" ] && [ "$resumed_hash" = "$straight_hash" ]
ok $? "resume: losses, loss scales, skips, learning rates, grad norms and final parameters bit for bit"
attr() { h5dump -a "/optimizer/grad_scaler/$2" "$WORK/ckpt/iter_000000$1.h5" 2>/dev/null | sed -n 's/^ *(0): *//p'; }
diag "iteration 5: scale $(attr 5 scale), growth_tracker $(attr 5 growth_tracker); iteration 7: hysteresis_tracker $(attr 7 hysteresis_tracker)"
[ "$(attr 5 growth_tracker)" = 2 ] && [ "$(attr 7 hysteresis_tracker)" = 1 ] &&
    awk -v a="$(attr 5 scale)" -v b="$(json_field "$WORK/straight.jsonl" train loss_scale | sed -n 5p)" \
        'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d < 1e-5 * b) }'
ok $? "the checkpoints hold the scaler mid-window: growth tracker 2 at iteration 5, hysteresis tracker 1 at 7, the logged scale"
unset MTC_FAULT_GRAD_INF

run_app 2 $MODEL --train-iters 11 --lr-decay-iters 10 --load "$WORK/ckpt" --save "$WORK/ckpt32" &&
    grep -q "^\*\*\*WARNING\*\*\* found the grad scaler in the checkpoint but this run's is None (no --fp16). Skipping loading grad scaler" "$WORK/out" &&
    run_app 2 $RESUME --train-iters 12 --load "$WORK/ckpt32" &&
    grep -q "^\*\*\*WARNING\*\*\* found a checkpoint without a dynamic grad scaler state, will not load grad scaler" "$WORK/out" &&
    grep -q "iteration *12/ *12 .* loss scale: 65536.0 |" "$WORK/out"
ok $? "Megatron's warnings: an fp32 run skips the checkpoint's scaler; an --fp16 run from an fp32 checkpoint starts at --initial-loss-scale"

# ---- e) refusals ----
refused() {  # refused MESSAGE_PATTERN ARGS...: exit 2 and one error line matching
    pattern=$1; shift
    run_app 2 $MODEL --train-iters 1 "$@"
    [ $? -eq 2 ] && [ "$(grep -c "error:" "$WORK/err")" = 1 ] && grep -q "error: .*$pattern" "$WORK/err"
}
refused "--fp16 and --bf16 cannot both be given" --fp16 --bf16
ok $? "--fp16 --bf16 is refused"
refused "min-loss-scale" --fp16 --min-loss-scale 0
ok $? "--min-loss-scale 0 is refused"
refused "min-loss-scale" --fp16 --min-loss-scale -1
ok $? "--min-loss-scale -1 is refused"
refused "--min-loss-scale 1024 exceeds --initial-loss-scale 512" --fp16 --initial-loss-scale 512 --min-loss-scale 1024
ok $? "--min-loss-scale above --initial-loss-scale is refused"
refused "loss-scale-window" --fp16 --loss-scale-window 0
ok $? "--loss-scale-window 0 is refused"
refused "hysteresis" --fp16 --hysteresis 0
ok $? "--hysteresis 0 is refused"
refused "loss-scale" --fp16 --loss-scale -2
ok $? "--loss-scale -2 is refused"
# --fp16 --device cuda is no longer refused (the fp16 CUDA kernels; tests/gpu/gpu_fp16_test.sh
# trains with it): where a GPU is visible it trains, elsewhere the one error is the generic one
# of --device cuda without a GPU, never about fp16
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ]; then
    run_app 1 $MODEL --train-iters 1 --fp16 --device cuda
    [ $? -eq 0 ] && grep -q -- "--fp16: the CUDA kernels compute in fp16" "$WORK/out"
    ok $? "--fp16 --device cuda trains on this machine's GPU"
else
    refused "--device cuda: no GPU is visible to this process" --fp16 --device cuda && ! grep -q "fp16" "$WORK/err"
    ok $? "--fp16 --device cuda passes validation; without a GPU it stops with the generic no-GPU error"
fi
MTC_FAULT_GRAD_INF="1@0,1@1" run_app 2 $MODEL --fp16 --loss-scale 65536 --train-iters 2
[ $? -eq 1 ] && grep -q "error: the gradient norm of iteration 1 is \(inf\|-\?nan\)" "$WORK/err"
ok $? "a constant scale keeps --check-for-nan-in-loss-and-grad: an overflow stops the run"

# ---- f) model parallelism agrees on found_inf ----
dp=$(field "$WORK/straight.jsonl" skipped_iterations)$(field "$WORK/straight.jsonl" loss_scale)
# (the overflows are injected on rank 1 alone: the other stage, tensor-parallel half or optimizer
# shard must skip with it)
for case in "--tensor-model-parallel-size 2|1e-4" "--pipeline-model-parallel-size 2|1e-5" "--use-distributed-optimizer|1e-5"; do
    layout=${case%|*} tolerance=${case#*|}
    rm -f "$WORK/layout.jsonl"
    MTC_FAULT_GRAD_INF="1@1,2@1,3@1,7@1,8@1" run_app 2 $RESUME $layout --metrics-file "$WORK/layout.jsonl"
    status=$?
    json_field "$WORK/layout.jsonl" train lm_loss > "$WORK/layout.loss"
    json_field "$WORK/straight.jsonl" train lm_loss > "$WORK/straight.loss"
    [ $status -eq 0 ] && [ "$(field "$WORK/layout.jsonl" skipped_iterations)$(field "$WORK/layout.jsonl" loss_scale)" = "$dp" ] &&
        awk -v t="$tolerance" 'NR == FNR { a[NR] = $1; next } { d = $1 - a[FNR]; if (d < 0) d = -d; if (d > t * a[FNR]) bad++ }
            END { exit bad > 0 || FNR != 10 }' "$WORK/straight.loss" "$WORK/layout.loss"
    ok $? "$layout: the same skipped iterations and scales as DP2 without it, losses within $tolerance"
done

done_testing
