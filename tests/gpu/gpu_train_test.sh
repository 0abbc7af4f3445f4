#!/bin/sh
# gpu_train_test.sh: the GPT model trains on GPUs (--device cuda: bf16 mixed precision, NCCL)
# like the fp32 CPU reference. Skipped where no GPU is visible.
#  - 20 iterations on one GPU: every loss within 1% (relative) of the CPU backend's, same seed,
#    dropout off and on; the memory line reports 18 bytes/parameter; the log line carries MFU.
#  - --deterministic-mode twice: bitwise-identical losses and parameters (--dump-parameters);
#    with selective, full-uniform and full-block recomputation and the norms recomputed
#    (--recompute-modules layernorm): the same bits, less memory (full, norms);
#    with --keep-mlp-activation: losses within 1e-3, reruns bitwise, more memory, the same bits
#    with the norms recomputed; with --memory-efficient-layer-norm (alone and with the activation
#    kept): losses within 1e-3, reruns bitwise, less memory; with the loss
#    in chunks (--cross-entropy-chunk-rows): losses within 1e-3.
#  - the MLP's exact GeLU (--no-bias-gelu-fusion, --disable-bias-linear: the plain GEMM and the
#    erf GeLU kernels around cuBLASLt's epilogues): within 1% of the CPU's over 20 iterations,
#    reruns bitwise, kept activation within 1e-3, TP2 + SP + --tp-comm-overlap within 1e-2.
#  - on 2 and 4 GPUs (when present): TP2, PP2, DP2, TP2+SP, TP2+SP with --tp-comm-overlap,
#    TP2xPP2, TP4+SP, TP2xPP2+SP (also interleaved) and TP2xDP2+SP with --tp-comm-overlap, DP4 with the
#    distributed optimizer: losses within 1e-2 (relative) of the 1-GPU
#    run; --tp-comm-overlap twice with --deterministic-mode: the same bits.
#  - a model larger than the GPU's free memory stops before allocating, with both figures.
#  - one rank more than the node's GPUs is refused with one message naming both counts.
#  - --window-size 16,0 (sliding-window attention; sequence 64, so most keys lie outside the
#    window), dropout 0.1: GPU losses within 1% of the CPU's over 20 iterations, and not those of
#    the run without a window.
#  - the tiny Llama (RoPE, RMSNorm, SwiGLU, grouped-query attention): GPU losses within 1% of
#    the CPU's, and TP2 + SP within 1e-2 of one GPU (2 GPUs).
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt with top_srcdir holding
# tests/ and configs/ (see perf/results/gpu-tests/gpu-training-2026-11-22.md).
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

MODEL="--args-file $TINY_ARGS --train-iters 20 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0"
losses() { json_field "$1" train lm_loss; }

# train NAME NRANKS FLAGS...: one run, its losses in $WORK/NAME.loss
train() {
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl" --dump-parameters "$WORK/$name.bin"
    status=$?
    cp "$WORK/out" "$WORK/$name.out"
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

for dropout in 0.0 0.1; do
    flags="--hidden-dropout $dropout --attention-dropout $dropout"
    train "cpu_$dropout" 1 --device cpu $flags
    ok $? "CPU reference run (dropout $dropout)"
    train "gpu_$dropout" 1 --device cuda $flags
    ok $? "one-GPU run (dropout $dropout)"
    diag "$(grep 'iteration       20/' "$WORK/gpu_$dropout.out" | cut -c1-220)"
    compare_losses "cpu_$dropout" "gpu_$dropout" 1e-2 20 "bf16 GPU losses over 20 iterations within 1% of the fp32 CPU backend (dropout $dropout)"
done
grep -q "memory per parameter (bf16 mixed precision): 18.00 bytes" "$WORK/gpu_0.1.out"
ok $? "mixed precision memory: 18 bytes per parameter ($(grep -o 'memory per parameter.*bytes' "$WORK/gpu_0.1.out"))"
grep -q "| MFU: [0-9.]*%" "$WORK/gpu_0.1.out" && grep -q '"mfu": ' "$WORK/gpu_0.1.jsonl"
ok $? "the log line and the metrics carry MFU ($(grep -o 'GPU [0-9]* of.*' "$WORK/gpu_0.1.out" | head -1))"

# a model that cannot fit in GPU memory stops before allocating, with the estimate and the
# device's free memory (app/training/memory_estimate.h)
run_app 1 $MODEL --device cuda --hidden-size 32768 --num-attention-heads 64 --num-layers 64
status=$?; diag "$(grep error "$WORK/err")"
[ $status -ne 0 ] && grep -q "this run needs about .* GiB per rank .* but .* GiB of GPU memory is available per rank" "$WORK/err" &&
    ! grep -qi "out of memory" "$WORK/err"
ok $? "an impossible model stops before allocating, naming the estimate and the GPU's free memory"
grep -q "theoretical memory footprints: weight and optimizer=" "$WORK/gpu_0.1.out"
ok $? "the estimate is printed as Megatron's theoretical memory footprints line"

# more ranks on the node than GPUs: refused before any GPU is touched, naming both counts
# (app/parallel/gpu_placement.h), not a failed NCCL initialization
run_app $((gpus + 1)) $MODEL --device cuda --micro-batch-size 1 --global-batch-size $((gpus + 1))
status=$?; diag "$(grep error "$WORK/err" | head -1 | cut -c1-160)"
[ $status -ne 0 ] && grep -q "error: --device cuda: a node runs $((gpus + 1)) ranks but sees $gpus GPU" "$WORK/err" &&
    [ "$(grep -c error "$WORK/err")" -eq 1 ] && ! grep -qi "nccl" "$WORK/err"
ok $? "$((gpus + 1)) ranks on $gpus GPU(s): one message naming both counts"

# sliding-window attention (--window-size 16,0 at sequence 64): the CUDA kernels' window against
# the CPU's, dropout on (the same masks on both backends)
win="--window-size 16,0 --hidden-dropout 0.1 --attention-dropout 0.1"
train cpu_window 1 --device cpu $win
ok $? "CPU reference run with --window-size 16,0"
train gpu_window 1 --device cuda $win
ok $? "one-GPU run with --window-size 16,0"
compare_losses cpu_window gpu_window 1e-2 20 "--window-size 16,0: bf16 GPU losses over 20 iterations within 1% of the CPU backend's"
! cmp -s "$WORK/gpu_window.loss" "$WORK/gpu_0.1.loss" && [ -s "$WORK/gpu_window.loss" ]
ok $? "--window-size 16,0 changes the GPU losses (the window reaches the kernels)"

train det1 1 --device cuda --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1
train det2 1 --device cuda --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1
cmp -s "$WORK/det1.loss" "$WORK/det2.loss" && [ -s "$WORK/det1.loss" ]
ok $? "--deterministic-mode: two runs give bitwise-identical losses"
cmp -s "$WORK/det1.bin" "$WORK/det2.bin"
ok $? "--deterministic-mode: two runs give bitwise-identical parameters"

# activation recomputation on the GPU (4 layers, --deterministic-mode, dropout on): losses and
# parameters bitwise those without, and less peak memory with full recompute
RECOMPUTE="--device cuda --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1 --num-layers 4 --train-iters 5"
train rc_none 1 $RECOMPUTE
for mode in "selective --recompute-activations" "uniform --recompute-granularity full --recompute-method uniform --recompute-num-layers 1" \
            "block --recompute-granularity full --recompute-method block --recompute-num-layers 2" \
            "norms --recompute-granularity selective --recompute-modules layernorm"; do
    set -- $mode; mode_name=$1; shift  # not `name`: train() sets that one
    train "rc_$mode_name" 1 $RECOMPUTE "$@"
    cmp -s "$WORK/rc_none.loss" "$WORK/rc_$mode_name.loss" && [ -s "$WORK/rc_none.loss" ] && cmp -s "$WORK/rc_none.bin" "$WORK/rc_$mode_name.bin"
    ok $? "recompute $mode_name on the GPU: losses and parameters bitwise those without recomputation"
    mem_none=$(json_field "$WORK/rc_none.jsonl" train peak_memory_gib | tail -1)
    mem=$(json_field "$WORK/rc_$mode_name.jsonl" train peak_memory_gib | tail -1)
    diag "peak memory: none $mem_none GiB, $mode_name $mem GiB"
    [ "$mode_name" = selective ] && continue  # flash attention keeps only [B,H,T] fp32 statistics
    awk -v a="$mem" -v b="$mem_none" 'BEGIN { exit !(a != "" && a + 0 < b + 0) }'
    ok $? "recompute $mode_name on the GPU: peak memory lower than without"
done
# --keep-mlp-activation: fc2's input is the forward's GeLU (the GEMM epilogue's, from the fp32 sum)
# instead of one computed again from the bf16 pre-activation, so close to, not bitwise, the above;
# reruns are bitwise; more peak memory (4 layers' activations against the two scratch buffers)
train rc_keep 1 $RECOMPUTE --keep-mlp-activation
compare_losses rc_none rc_keep 1e-3 5 "--keep-mlp-activation on the GPU: losses within 1e-3 of recomputing the activation"
train rc_keep2 1 $RECOMPUTE --keep-mlp-activation
cmp -s "$WORK/rc_keep.loss" "$WORK/rc_keep2.loss" && [ -s "$WORK/rc_keep.loss" ] && cmp -s "$WORK/rc_keep.bin" "$WORK/rc_keep2.bin"
ok $? "--keep-mlp-activation on the GPU: two --deterministic-mode runs bitwise identical"
train rc_keep_norms 1 $RECOMPUTE --keep-mlp-activation --recompute-granularity selective --recompute-modules layernorm
cmp -s "$WORK/rc_keep.loss" "$WORK/rc_keep_norms.loss" && cmp -s "$WORK/rc_keep.bin" "$WORK/rc_keep_norms.bin"
ok $? "--keep-mlp-activation with --recompute-modules layernorm on the GPU: bitwise the kept norms' run"
mem_keep=$(json_field "$WORK/rc_keep.jsonl" train peak_memory_gib | tail -1)
diag "peak memory: none $mem_none GiB, keep $mem_keep GiB"
awk -v a="$mem_keep" -v b="$mem_none" 'BEGIN { exit !(a != "" && a + 0 > b + 0) }'
ok $? "--keep-mlp-activation on the GPU: peak memory higher than recomputing the activation"
# --memory-efficient-layer-norm: the norms' backward from their bf16 outputs, so close to, not
# bitwise, the above; reruns bitwise; less peak memory, alone and with the MLP activation kept
train rc_memeff 1 $RECOMPUTE --memory-efficient-layer-norm
compare_losses rc_none rc_memeff 1e-3 5 "--memory-efficient-layer-norm on the GPU: losses within 1e-3 of the norms' backward from their inputs"
train rc_memeff2 1 $RECOMPUTE --memory-efficient-layer-norm
cmp -s "$WORK/rc_memeff.loss" "$WORK/rc_memeff2.loss" && [ -s "$WORK/rc_memeff.loss" ] && cmp -s "$WORK/rc_memeff.bin" "$WORK/rc_memeff2.bin"
ok $? "--memory-efficient-layer-norm on the GPU: two --deterministic-mode runs bitwise identical"
train rc_keep_memeff 1 $RECOMPUTE --keep-mlp-activation --memory-efficient-layer-norm
compare_losses rc_keep rc_keep_memeff 1e-3 5 "--memory-efficient-layer-norm with --keep-mlp-activation on the GPU: losses within 1e-3"
mem_memeff=$(json_field "$WORK/rc_memeff.jsonl" train peak_memory_gib | tail -1)
mem_keep_memeff=$(json_field "$WORK/rc_keep_memeff.jsonl" train peak_memory_gib | tail -1)
diag "peak memory: none $mem_none GiB, memeff $mem_memeff GiB, keep $mem_keep GiB, keep + memeff $mem_keep_memeff GiB"
awk -v a="$mem_memeff" -v b="$mem_none" -v c="$mem_keep_memeff" -v d="$mem_keep" \
    'BEGIN { exit !(a != "" && a + 0 < b + 0 && c != "" && c + 0 < d + 0) }'
ok $? "--memory-efficient-layer-norm on the GPU: peak memory lower, alone and with the MLP activation kept"
# --cross-entropy-chunk-rows: the loss in chunks of 100 of the 256 rows, its backward in the same pass
train rc_chunk 1 $RECOMPUTE --cross-entropy-chunk-rows 100
compare_losses rc_none rc_chunk 1e-3 5 "--cross-entropy-chunk-rows 100 on the GPU: losses within 1e-3 of one pass"

# the MLP's exact GeLU (--no-bias-gelu-fusion; --disable-bias-linear turns the fusion off too, as
# in Megatron): the plain GEMM and the erf GeLU kernels of BERT's LM head instead of cuBLASLt's
# GELU/DGELU epilogues (app/model/mlp_gelu.h); the fused tanh path is the one tested above
train erf_cpu 1 --device cpu --no-bias-gelu-fusion
ok $? "--no-bias-gelu-fusion: CPU reference run"
train erf_gpu 1 --device cuda --no-bias-gelu-fusion
ok $? "--no-bias-gelu-fusion: one-GPU run"
compare_losses erf_cpu erf_gpu 1e-2 20 "--no-bias-gelu-fusion: bf16 GPU losses over 20 iterations within 1% of the fp32 CPU backend's exact GeLU"
train nobias_cpu 1 --device cpu --disable-bias-linear
train nobias_gpu 1 --device cuda --disable-bias-linear
compare_losses nobias_cpu nobias_gpu 1e-2 20 "--disable-bias-linear (exact GeLU): bf16 GPU losses within 1% of the fp32 CPU backend"
train erf_det1 1 $RECOMPUTE --no-bias-gelu-fusion
train erf_det2 1 $RECOMPUTE --no-bias-gelu-fusion
cmp -s "$WORK/erf_det1.loss" "$WORK/erf_det2.loss" && [ -s "$WORK/erf_det1.loss" ] && cmp -s "$WORK/erf_det1.bin" "$WORK/erf_det2.bin" &&
    ! cmp -s "$WORK/rc_none.bin" "$WORK/erf_det1.bin"
ok $? "--no-bias-gelu-fusion on the GPU: two --deterministic-mode runs bitwise identical, parameters other than the fused tanh GeLU's"
compare_losses rc_none erf_det1 1e-2 5 "--no-bias-gelu-fusion on the GPU: losses within 1e-2 of the tanh GeLU's (the forms differ by < 5e-4)"
train erf_keep 1 $RECOMPUTE --no-bias-gelu-fusion --keep-mlp-activation
compare_losses erf_det1 erf_keep 1e-3 5 "--no-bias-gelu-fusion with --keep-mlp-activation on the GPU: losses within 1e-3 of making fc2's input again"
if [ "$gpus" -ge 2 ]; then  # TP2 + SP + --tp-comm-overlap: fc2's backward by row blocks
    train erf_tp2 2 --device cuda --no-bias-gelu-fusion --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
    ok $? "--no-bias-gelu-fusion: TP2 + SP + --tp-comm-overlap on 2 GPUs"
    compare_losses erf_gpu erf_tp2 1e-2 20 "--no-bias-gelu-fusion: TP2 + SP + --tp-comm-overlap within 1e-2 of one GPU"
fi

# the Llama family (configs/llama-tiny.args: RoPE, RMSNorm, SwiGLU, 4 heads in 2 query groups,
# no biases, untied): the CUDA kernels train like the CPU backend, and over TP2 when 2 GPUs exist
GPT_MODEL=$MODEL
MODEL="--args-file $top_srcdir/configs/llama-tiny.args --train-iters 20 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1"
train llama_cpu 1 --device cpu
ok $? "Llama: CPU reference run"
train llama_gpu 1 --device cuda
ok $? "Llama: one-GPU run"
compare_losses llama_cpu llama_gpu 1e-2 20 "Llama: bf16 GPU losses over 20 iterations within 1% of the fp32 CPU backend"
train llama_gpu_keep 1 --device cuda --keep-mlp-activation
compare_losses llama_cpu llama_gpu_keep 1e-2 20 "Llama: with --keep-mlp-activation (SwiGLU output kept) GPU losses within 1% of the CPU backend"
if [ "$gpus" -ge 2 ]; then
    train llama_tp2 2 --device cuda --tensor-model-parallel-size 2 --sequence-parallel
    ok $? "Llama: TP2 + sequence parallel on 2 GPUs"
    compare_losses llama_gpu llama_tp2 1e-2 20 "Llama: TP2 + SP on 2 GPUs: losses within 1e-2 of one GPU"
fi
MODEL=$GPT_MODEL

# parallel layouts against the one-GPU run (dropout on)
MODEL="$MODEL --device cuda --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"
layout() {  # layout NAME NRANKS FLAGS... [--reference NAME, last]
    layout_name=$1; n=$2; shift 2  # not `name`: train() sets that one
    reference=one
    case "$*" in *"--reference one4") reference=one4; set -- $(echo "$*" | sed 's/ --reference one4$//') ;; esac
    if [ "$gpus" -lt "$n" ]; then diag "skipping $layout_name: needs $n GPUs"; return; fi
    tag=$(echo "$layout_name" | tr -c 'a-zA-Z0-9\n' '_')
    train "$tag" "$n" "$@"
    status=$?
    [ $status -eq 0 ] || { ok 1 "$layout_name: run failed ($status)"; return; }
    compare_losses "$reference" "$tag" 1e-2 20 "$layout_name on $n GPUs: losses within 1e-2 of one GPU"
}
if [ "$gpus" -ge 2 ]; then
    train one 1
    ok $? "one-GPU reference for the parallel layouts"
    train one4 1 --num-layers 4
    ok $? "one-GPU reference with 4 layers"
fi
layout "TP2" 2 --tensor-model-parallel-size 2
layout "PP2" 2 --pipeline-model-parallel-size 2
layout "DP2 overlapped reduction" 2 --overlap-grad-reduce --ddp-bucket-size 20000
layout "TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "TP2 + SP + tp-comm-overlap" 2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
if [ "$gpus" -ge 2 ]; then  # the copy-engine schedule is deterministic: a rerun gives the same bits
    train tpov_a 2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap --deterministic-mode
    s1=$?
    train tpov_b 2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap --deterministic-mode
    [ $s1 -eq 0 ] && [ $? -eq 0 ] && cmp -s "$WORK/tpov_a.bin" "$WORK/tpov_b.bin" && cmp -s "$WORK/tpov_a.loss" "$WORK/tpov_b.loss"
    ok $? "TP2 + SP + --tp-comm-overlap (--deterministic-mode) twice: bitwise-identical losses and parameters"
fi
layout "TP2xPP2" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
layout "TP4 + SP + tp-comm-overlap" 4 --tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap
layout "TP2xPP2 + SP + tp-comm-overlap" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --tp-comm-overlap
layout "TP2xPP2 interleaved + SP + tp-comm-overlap" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --tp-comm-overlap --num-layers 4 --num-layers-per-virtual-pipeline-stage 1 --reference one4
layout "TP2xDP2 + SP + tp-comm-overlap" 4 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap \
    --use-distributed-optimizer --overlap-grad-reduce
layout "PP4" 4 --pipeline-model-parallel-size 4 --num-layers 4 --reference one4
layout "PP2 interleaved x2 virtual" 2 --pipeline-model-parallel-size 2 --num-layers 4 --num-layers-per-virtual-pipeline-stage 1 --reference one4
layout "DP4 distributed optimizer" 4 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
if [ "$gpus" -ge 4 ]; then
    grep -q "memory per parameter (bf16 mixed precision): 9.00 bytes" "$WORK/DP4_distributed_optimizer.out"
    ok $? "distributed optimizer memory: 6 + 12/4 = 9 bytes per parameter"
fi
done_testing
