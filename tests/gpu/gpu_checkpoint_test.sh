#!/bin/sh
# gpu_checkpoint_test.sh: distributed checkpoints from GPU training (--device cuda, bf16 mixed
# precision: the file holds the fp32 master weights). Skipped where no GPU is visible.
#  - bitwise resume on one GPU: with --deterministic-mode, 10 iterations straight equal 5, save,
#    exit (--exit-interval), load, 5 more: same losses and same final parameters, bit for bit;
#  - the GPU's checkpoint loads on the CPU backend (fp32) and training goes on there with losses
#    within 1% of the GPU's continuation;
#  - a CPU checkpoint loads on the GPU, and (with 2 GPUs) the 1-GPU checkpoint loads into TP2 and
#    DP2 with the distributed optimizer, with losses within 1% of the 1-GPU continuation.
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt with top_srcdir holding
# tests/ and configs/ (see perf/results/gpu-tests/gpu-training-2026-11-22.md).
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

MODEL="--args-file $TINY_ARGS --train-iters 10 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 8 --deterministic-mode"
losses() { json_field "$1" train lm_loss; }

# run NAME NRANKS FLAGS...: one run; output in $WORK/NAME.out, losses in $WORK/NAME.loss
run() {
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl"
    status=$?
    cp "$WORK/out" "$WORK/$name.out"
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

# close NAME REFERENCE COUNT DESCRIPTION: every loss of NAME within 1% of REFERENCE's
close() {
    paste "$WORK/$2.loss" "$WORK/$1.loss" | awk -v count="$3" 'BEGIN { worst = 0; n = 0 }
        { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > worst) worst = d }
        END { printf "# losses: worst relative difference %g over %d iterations\n", worst, n; exit !(n == count && worst < 1e-2) }'
    ok $? "$4"
}

# ---- bitwise resume on one GPU ----
run straight 1 --device cuda --dump-parameters "$WORK/straight.bin"
ok $? "10 iterations straight on one GPU"
run first 1 --device cuda --exit-interval 5 --save "$WORK/gpu"
status=$?
[ "$(cat "$WORK/gpu/latest_checkpointed_iteration.txt" 2>/dev/null)" = 5 ] && [ -f "$WORK/gpu/iter_0000005.h5" ]
ok $(( status + $? )) "--exit-interval 5 saves iteration 5 on the GPU and exits"
run second 1 --device cuda --load "$WORK/gpu" --dump-parameters "$WORK/resumed.bin"
status=$?
grep -q "loaded checkpoint.*iteration 5" "$WORK/second.out"
ok $(( status + $? )) "the GPU run loads iteration 5 and trains to 10"
cat "$WORK/first.loss" "$WORK/second.loss" > "$WORK/resumed.loss"
[ "$(wc -l < "$WORK/straight.loss")" -eq 10 ] && cmp -s "$WORK/straight.loss" "$WORK/resumed.loss"
ok $? "GPU resume: the losses of iterations 1-10 are bitwise identical"
cmp -s "$WORK/straight.bin" "$WORK/resumed.bin"
ok $? "GPU resume: the final parameters are bitwise identical"

# ---- across backends ----
tail -5 "$WORK/straight.loss" > "$WORK/gpu_tail.loss"
run on_cpu 1 --device cpu --load "$WORK/gpu"
ok $? "the CPU backend loads the GPU's checkpoint"
close on_cpu gpu_tail 5 "CPU continuation of the GPU checkpoint: losses within 1% of the GPU's"
run cpu_first 1 --device cpu --exit-interval 5 --save "$WORK/cpu"
ok $? "a CPU run saves iteration 5"
run on_gpu 1 --device cuda --load "$WORK/cpu"
ok $? "the GPU loads the CPU's checkpoint"
run cpu_rest 1 --device cpu --load "$WORK/cpu"
close on_gpu cpu_rest 5 "GPU continuation of the CPU checkpoint: losses within 1% of the CPU's"

# ---- resharding on load across GPUs ----
if [ "$gpus" -ge 2 ]; then
    run tp2 2 --device cuda --load "$WORK/gpu" --tensor-model-parallel-size 2 --save "$WORK/tp2"
    ok $? "TP2 on 2 GPUs loads the 1-GPU checkpoint"
    close tp2 gpu_tail 5 "TP2 continuation: losses within 1% of one GPU's"
    run dp2 2 --device cuda --load "$WORK/gpu" --use-distributed-optimizer
    ok $? "DP2 with the distributed optimizer loads the 1-GPU checkpoint"
    close dp2 gpu_tail 5 "DP2 distributed-optimizer continuation: losses within 1% of one GPU's"
else
    diag "skipping the 2-GPU resharding checks: one GPU"
fi
done_testing
