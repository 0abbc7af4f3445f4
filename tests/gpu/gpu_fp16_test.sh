#!/bin/sh
# gpu_fp16_test.sh: --fp16 on --device cuda: the fp16 kernels (kernels_cuda_fp16(): parameters,
# activations and their gradients in IEEE half; fp32 gradients, masters, Adam, statistics) with
# Megatron's dynamic loss scaler. Skipped where no GPU is visible.
#  - from Megatron's default --initial-loss-scale 2^32 the first iterations overflow fp16 (the
#    logits' gradient is scale / tokens times softmax - onehot: 2^22 here, where fp16 ends at
#    65504; the fp32 CPU backend never overflows there): they are skipped and the scale halves
#    (hysteresis 2) until it fits, then the loss falls; the log lines carry the loss scale and
#    the skipped-iteration count;
#  - Megatron's overflow recipe (tests/mpi/fp16_test.sh part b: --init-method-std 1.0 and
#    --initial-loss-scale 2^127): every iteration is skipped and the scale halves each time;
#  - with a scale that never overflows (2^10) the fp16 losses track the fp32 CPU backend's and
#    the --bf16 GPU run's within 1% (relative) over 20 iterations (dropout on);
#  - a --fp16 GPU checkpoint continues under --bf16 and on the CPU, and a --bf16 one under
#    --fp16, each within 1% of the unbroken run;
#  - on 2 GPUs (TAP skips with one): TP2 (with and without sequence parallelism), DP2 (with and
#    without the distributed optimizer, whose parameter all-gather moves fp16) and PP2 (fp16
#    activations between stages) with --fp16 train, losses within 1e-2 of one GPU's.
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt with top_srcdir holding
# tests/ and configs/.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

MODEL="--args-file $TINY_ARGS --train-iters 20 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0"
DROPOUT="--hidden-dropout 0.1 --attention-dropout 0.1"
SCALE_2_127=170141183460469231731687303715884105728
field() { json_field "$WORK/$1.jsonl" train "$2"; }

# train NAME NRANKS FLAGS...: one run, its losses in $WORK/NAME.loss
train() {
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl"
    status=$?
    cp "$WORK/out" "$WORK/$name.out"
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    field "$name" lm_loss > "$WORK/$name.loss"
    return $status
}

# ---- dynamic scaling from 2^32: overflows first, then trains ----
train dynamic 1 --device cuda --fp16 --train-iters 40
ok $? "--fp16 on one GPU trains 40 iterations from the default --initial-loss-scale 2^32"
grep -q -- "--fp16: the CUDA kernels compute in fp16" "$WORK/dynamic.out" && grep -q "computing in fp16" "$WORK/dynamic.out"
ok $? "the start-up lines say the GPU computes in fp16"
diag "$(grep 'iteration        1/' "$WORK/dynamic.out" | cut -c1-220)"
diag "$(grep 'iteration       40/' "$WORK/dynamic.out" | cut -c1-220)"
skipped=$(field dynamic skipped_iterations | awk '{ s += $1 } END { print s + 0 }')
scales=$(field dynamic loss_scale | tr '\n' ' ')
diag "skipped $skipped; scales $scales"
[ "$(grep -c "| loss scale: [0-9.]* |.* number of skipped iterations: *[0-9]* |" "$WORK/dynamic.out")" = 40 ]
ok $? "every log line carries the loss scale and the number of skipped iterations"
first_scale=$(field dynamic loss_scale | head -1); last_scale=$(field dynamic loss_scale | tail -1)
[ "$skipped" -ge 1 ] && [ "$skipped" -le 30 ] && awk -v a="$first_scale" -v b="$last_scale" 'BEGIN { exit !(b < a) }'
ok $? "2^32 overflows fp16: $skipped iterations skipped, the scale backs off ($first_scale -> $last_scale)"
first=$(awk '$1 > 0' "$WORK/dynamic.loss" | head -1); last=$(tail -1 "$WORK/dynamic.loss")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a - 0.3) }'
ok $? "after the skips the loss falls ($first -> $last)"

# ---- Megatron's overflow recipe (tests/mpi/fp16_test.sh part b) ----
train overflow 1 --device cuda --fp16 --init-method-std 1.0 --initial-loss-scale $SCALE_2_127 --hysteresis 1 --train-iters 6
status=$?
diag "skipped $(field overflow skipped_iterations | tr '\n' ' '); scales $(field overflow loss_scale | tr '\n' ' ')"
field overflow loss_scale > "$WORK/overflow.scales"
field overflow skipped_iterations > "$WORK/overflow.skips"
[ $status -eq 0 ] && [ "$(head -1 "$WORK/overflow.skips")" = 1 ] &&
    paste -d' ' "$WORK/overflow.skips" "$WORK/overflow.scales" | awk -v s="$SCALE_2_127" '
        { if ($1 == 1) s = s / 2; d = $2 - s; if (d < 0) d = -d; if (d > 1e-6 * s) bad++ } END { exit bad > 0 || NR != 6 }'
ok $? "--init-method-std 1.0 --initial-loss-scale 2^127: overflows are skipped and halve the scale (hysteresis 1)"

# ---- fp16 against fp32 (CPU) and bf16 (GPU), a scale that never overflows ----
SAFE="--initial-loss-scale 1024"
train cpu 1 --device cpu --fp16 $SAFE $DROPOUT
ok $? "the CPU reference run (--fp16: fp32 with the scaler)"
train fp16 1 --device cuda --fp16 $SAFE $DROPOUT
ok $? "the one-GPU --fp16 run"
[ "$(field fp16 skipped_iterations | awk '{ s += $1 } END { print s + 0 }')" = 0 ]
ok $? "a scale of 2^10 never overflows: no skipped iteration"
train bf16 1 --device cuda --bf16 $DROPOUT
ok $? "the one-GPU --bf16 run"
compare_losses cpu fp16 1e-2 20 "fp16 GPU losses over 20 iterations within 1% of the fp32 CPU backend's"
compare_losses bf16 fp16 1e-2 20 "fp16 GPU losses within 1% of the bf16 GPU run's"
grep -q "memory per parameter (fp16 mixed precision): 18.00 bytes" "$WORK/fp16.out"
ok $? "fp16 mixed precision memory: 18 bytes per parameter"

# ---- checkpoints across dtypes and backends (fp32 masters in the file) ----
train ck_fp16 1 --device cuda --fp16 $SAFE $DROPOUT --exit-interval 10 --save "$WORK/ck_fp16"
ok $? "a --fp16 GPU run saves iteration 10"
tail -10 "$WORK/fp16.loss" > "$WORK/fp16_tail.loss"
train fp16_to_bf16 1 --device cuda --bf16 $DROPOUT --load "$WORK/ck_fp16"
ok $? "a --bf16 GPU run loads the --fp16 checkpoint"
compare_losses fp16_tail fp16_to_bf16 1e-2 10 "--bf16 continuation of the --fp16 checkpoint: within 1% of the fp16 run"
train fp16_to_cpu 1 --device cpu --fp16 $SAFE $DROPOUT --load "$WORK/ck_fp16"
ok $? "the CPU backend loads the --fp16 GPU checkpoint"
compare_losses fp16_tail fp16_to_cpu 1e-2 10 "CPU continuation of the --fp16 checkpoint: within 1% of the fp16 run"
train ck_bf16 1 --device cuda --bf16 $DROPOUT --exit-interval 10 --save "$WORK/ck_bf16"
ok $? "a --bf16 GPU run saves iteration 10"
tail -10 "$WORK/bf16.loss" > "$WORK/bf16_tail.loss"
train bf16_to_fp16 1 --device cuda --fp16 $SAFE $DROPOUT --load "$WORK/ck_bf16"
ok $? "a --fp16 GPU run loads the --bf16 checkpoint"
compare_losses bf16_tail bf16_to_fp16 1e-2 10 "--fp16 continuation of the --bf16 checkpoint: within 1% of the bf16 run"

# ---- 2 GPUs: TP2 (fp16 activations through NCCL all-reduces), DP2, PP2 (fp16 send/recv) ----
for layout in "TP2|--tensor-model-parallel-size 2" "TP2 + sequence parallel|--tensor-model-parallel-size 2 --sequence-parallel" \
              "DP2|" "DP2 distributed optimizer|--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather" \
              "PP2|--pipeline-model-parallel-size 2"; do
    layout_name=${layout%%|*} flags=${layout#*|}
    if [ "$gpus" -lt 2 ]; then
        tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP $layout_name with --fp16: needs 2 GPUs"
        continue
    fi
    tag=$(echo "$layout_name" | tr -c 'a-zA-Z0-9\n' '_')
    train "$tag" 2 --device cuda --fp16 $SAFE $DROPOUT $flags
    [ $? -eq 0 ] || { ok 1 "$layout_name with --fp16 on 2 GPUs: run failed"; continue; }
    compare_losses fp16 "$tag" 1e-2 20 "$layout_name with --fp16 on 2 GPUs: losses within 1e-2 of one GPU"
done
done_testing
