#!/bin/sh
# gpu_fp8_test.sh: FP8 training (issue 43, app/model/fp8_linear.h) on the CUDA backend, whose
# quantization runs on the GPU (kernels/cuda/cuda_fp8.cu) and whose layers' GEMMs are cuBLASLt
# fp8 GEMMs (kernels/cuda/cuda_fp8_gemm.cu), against the CPU backend's fp8 emulation. Skipped
# where no GPU is visible.
#  - configs/gpt-tiny.args with --bf16 and hybrid fp8 (delayed scaling, history 4), 20
#    iterations: one GPU's losses within 1% of the CPU's (the CPU's dequantized operands are
#    rounded to bf16 and its GEMMs accumulate in another order), and not bitwise bf16's on the GPU;
#  - the fp8 GEMMs against the GPU's own emulation (MTC_FP8_EMULATE=1): within 1e-2, the start-up
#    line naming the path each takes;
#  - tensorwise (current) scaling and e4m3: the same;
#  - the tiny Mixtral in fp8 (each expert on its own scales): within 1% of the CPU; its experts
#    as one cuBLASLt fp8 GEMM per expert (the start-up line says so) within 1e-2 of
#    MTC_FP8_EMULATE=1 and of MTC_FP8_EXPERTS_EMULATE=1 (not bitwise the latter), and
#    --deterministic-mode reruns bitwise;
#  - --deterministic-mode twice: bitwise-identical losses and parameters;
#  - the fused producers (LayerNorm/RMSNorm and GeLU/SwiGLU writing the next fp8 linear's input
#    codes), the weight codes made once a step (MTC_FP8_WEIGHT_CACHE transposed, both) and the
#    norms' outputs kept as fp8 codes for the backward (fp8_keeps_input_codes), with 4
#    micro-batches a step, full recompute and evaluation, GPT and the tiny Llama: bitwise the path
#    that quantizes every operand at every use (MTC_FP8_FUSE=0 MTC_FP8_WEIGHT_CACHE=off
#    MTC_FP8_KEEP_CODES=0);
#  - the MLP backward's elementwise pass fused (fp8_mlp_backward_fused): bitwise MTC_FP8_MLP_FUSED=0,
#    GPT (GeLU with fc1's bias), the tiny Llama (SwiGLU) and GPT with --swiglu (SwiGLU with a bias);
#  - on 2 GPUs (when present): TP2 + SP and DP2 with the distributed optimizer within 1e-2 of one
#    GPU (the amaxes reduced over the tensor- and data-parallel ranks through NCCL); the tiny
#    Mixtral with TP2 + SP and with --expert-tensor-parallel-size 1 x TP2 + SP x EP2 likewise.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

MODEL="--args-file $TINY_ARGS --train-iters 20 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --bf16"
FP8="--fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max"
losses() { json_field "$1" train lm_loss; }

train() {  # train NAME NRANKS FLAGS...: one run, its losses in $WORK/NAME.loss
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl" --dump-parameters "$WORK/$name.bin"
    status=$?
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

case_pair() {  # case_pair NAME FLAGS...: the CPU emulation and the GPU on one configuration
    pair=$1; shift
    train "${pair}_cpu" 1 --device cpu "$@"
    ok $? "$pair: CPU emulation run"
    train "${pair}_gpu" 1 --device cuda "$@"
    ok $? "$pair: one-GPU run"
    compare_losses "${pair}_cpu" "${pair}_gpu" 1e-2 20 "$pair: GPU losses over 20 iterations within 1% of the CPU's fp8 emulation"
}

case_pair hybrid $FP8
grep -q "as cuBLASLt fp8 GEMMs" "$WORK/out"
ok $? "the one-GPU run says its GEMMs are cuBLASLt fp8 GEMMs"
MTC_FP8_EMULATE=1 train hybrid_emulated 1 --device cuda $FP8
ok $? "one GPU, emulated (MTC_FP8_EMULATE=1): run"
grep -q "emulated: MTC_FP8_EMULATE=1" "$WORK/out"
ok $? "the emulated run says so"
compare_losses hybrid_emulated hybrid_gpu 1e-2 20 "fp8 GEMMs within 1e-2 of the GPU's emulation over 20 iterations"
train bf16_gpu 1 --device cuda
! cmp -s "$WORK/bf16_gpu.loss" "$WORK/hybrid_gpu.loss"
ok $? "fp8 on the GPU is not bitwise bf16 (its operands are rounded to fp8)"
case_pair tensorwise $FP8 --fp8-recipe tensorwise
case_pair e4m3 --fp8-format e4m3 --fp8-amax-history-len 4
MOE="--args-file $top_srcdir/configs/mixtral-tiny.args --train-iters 20 --log-interval 1 --eval-iters 0 --bf16 $FP8"
case_pair moe $MOE
# the experts as one cuBLASLt fp8 GEMM per expert row block (fp8_expert_forward/backward): the
# log says so, within 1e-2 of the GPU's emulation (MTC_FP8_EMULATE=1) and of the experts alone
# emulated (MTC_FP8_EXPERTS_EMULATE=1; the tolerance of the dense fp8 GEMMs against the emulation
# above: the emulation rounds the dequantized operands to bf16 and the forward GEMM accumulates
# fast), and not bitwise the latter (the experts' path changed)
grep -q "the experts' as one fp8 GEMM per expert" "$WORK/out"
ok $? "MoE on one GPU: the start-up line says the experts run as one fp8 GEMM per expert"
MTC_FP8_EMULATE=1 train moe_emulated 1 --device cuda $MOE
ok $? "MoE on one GPU, emulated (MTC_FP8_EMULATE=1): run"
compare_losses moe_emulated moe_gpu 1e-2 20 "MoE: the fp8 GEMMs (the experts' too) within 1e-2 of the GPU's emulation over 20 iterations"
MTC_FP8_EXPERTS_EMULATE=1 train moe_experts_emulated 1 --device cuda $MOE
grep -q "the experts' emulated (MTC_FP8_EXPERTS_EMULATE=1)" "$WORK/out"
ok $? "MoE with MTC_FP8_EXPERTS_EMULATE=1: run, the start-up line says the experts are emulated"
compare_losses moe_experts_emulated moe_gpu 1e-2 20 "MoE: the experts' fp8 GEMMs within 1e-2 of the experts emulated over 20 iterations"
! cmp -s "$WORK/moe_experts_emulated.bin" "$WORK/moe_gpu.bin"
ok $? "MoE: the experts' fp8 GEMMs change the parameters (not bitwise the run with them emulated)"
train moe_det1 1 --device cuda $MOE --deterministic-mode
train moe_det2 1 --device cuda $MOE --deterministic-mode
cmp -s "$WORK/moe_det1.loss" "$WORK/moe_det2.loss" && [ -s "$WORK/moe_det1.loss" ] && cmp -s "$WORK/moe_det1.bin" "$WORK/moe_det2.bin"
ok $? "MoE with the experts' fp8 GEMMs, --deterministic-mode twice: bitwise-identical losses and parameters"

MTC_FP8_WEIGHT_CACHE=transposed train det1 1 --device cuda $FP8 --deterministic-mode
MTC_FP8_WEIGHT_CACHE=transposed train det2 1 --device cuda $FP8 --deterministic-mode
cmp -s "$WORK/det1.loss" "$WORK/det2.loss" && [ -s "$WORK/det1.loss" ] && cmp -s "$WORK/det1.bin" "$WORK/det2.bin"
ok $? "--deterministic-mode with fp8: two runs give bitwise-identical losses and parameters"

# the fused producers (the norms and the activation writing the next fp8 linear's input codes)
# and the weight codes made once a step (kept through the step's 4 micro-batches, recompute and
# evaluation): bitwise the path that quantizes every operand at every use
same_bits() {  # same_bits A B WHAT: A's and B's losses and parameters bitwise
    cmp -s "$WORK/$1.loss" "$WORK/$2.loss" && [ -s "$WORK/$1.loss" ] && cmp -s "$WORK/$1.bin" "$WORK/$2.bin"
    ok $? "$3"
}
MTC_FP8_FUSE=0 MTC_FP8_WEIGHT_CACHE=off MTC_FP8_KEEP_CODES=0 train det_unfused 1 --device cuda $FP8 --deterministic-mode
same_bits det1 det_unfused "fused producers and once-a-step weight codes: the unfused path's losses and parameters bitwise"
MTC_FP8_WEIGHT_CACHE=both train det_both 1 --device cuda $FP8 --deterministic-mode
same_bits det1 det_both "MTC_FP8_WEIGHT_CACHE=both (the forward's weight codes kept too): the same bits"
RC="--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --eval-interval 5 --eval-iters 2"
MTC_FP8_WEIGHT_CACHE=both train det_rc 1 --device cuda $FP8 --deterministic-mode $RC
MTC_FP8_FUSE=0 MTC_FP8_WEIGHT_CACHE=off MTC_FP8_KEEP_CODES=0 train det_rc_unfused 1 --device cuda $FP8 --deterministic-mode $RC
same_bits det_rc det_rc_unfused "with full recompute and evaluation every 5 steps: fused and cached bitwise the unfused path"
LLAMA="--args-file $top_srcdir/configs/llama-tiny.args --train-iters 20 --log-interval 1 --eval-iters 0 --bf16"
MTC_FP8_WEIGHT_CACHE=transposed train llama_fused 1 --device cuda $LLAMA $FP8 --deterministic-mode
MTC_FP8_FUSE=0 MTC_FP8_WEIGHT_CACHE=off MTC_FP8_KEEP_CODES=0 train llama_unfused 1 --device cuda $LLAMA $FP8 --deterministic-mode
same_bits llama_fused llama_unfused "the tiny Llama (RMSNorm, SwiGLU): fused and cached bitwise the unfused path"
# the MLP backward's elementwise pass in one kernel (fp8_mlp_backward_fused, kernels.h's
# mlp_backward_fp8: fc2's input gradient first, then x's transposed codes, fc1's output-gradient
# codes and fc1's bias gradient from one pass): bitwise the separate passes (MTC_FP8_MLP_FUSED=0),
# GPT (GeLU, fc1 bias), the tiny Llama (SwiGLU, no bias) and GPT with SwiGLU (SwiGLU and a bias)
MTC_FP8_WEIGHT_CACHE=transposed MTC_FP8_MLP_FUSED=0 train det_mlp_unfused 1 --device cuda $FP8 --deterministic-mode
same_bits det1 det_mlp_unfused "GPT: the fused MLP backward pass bitwise MTC_FP8_MLP_FUSED=0 (losses and parameters)"
MTC_FP8_WEIGHT_CACHE=transposed MTC_FP8_MLP_FUSED=0 train llama_mlp_unfused 1 --device cuda $LLAMA $FP8 --deterministic-mode
same_bits llama_fused llama_mlp_unfused "the tiny Llama: the fused MLP backward pass bitwise MTC_FP8_MLP_FUSED=0"
train gpt_swiglu_fused 1 --device cuda $FP8 --swiglu --deterministic-mode
MTC_FP8_MLP_FUSED=0 train gpt_swiglu_unfused 1 --device cuda $FP8 --swiglu --deterministic-mode
same_bits gpt_swiglu_fused gpt_swiglu_unfused "GPT with SwiGLU (and fc1's bias): the fused MLP backward pass bitwise MTC_FP8_MLP_FUSED=0"

if [ "$gpus" -ge 2 ]; then
    for layout in "tp2_sp|--tensor-model-parallel-size 2 --sequence-parallel" \
                  "dp2_distopt|--use-distributed-optimizer --overlap-grad-reduce"; do
        case_name=${layout%%|*}; flags=${layout#*|}
        train "$case_name" 2 --device cuda $FP8 $flags
        ok $? "2 GPUs, $case_name: run"
        compare_losses hybrid_gpu "$case_name" 1e-2 20 "2 GPUs, fp8 $case_name ($flags): losses within 1e-2 of one GPU"
    done
    # the tiny Mixtral in fp8 with TP2 + SP: the experts split over both GPUs (ETP2 = TP2) and
    # whole on each (--expert-tensor-parallel-size 1, EP2 over the tensor-parallel pair: the
    # experts' amaxes reduced over their expert-data-parallel group through NCCL)
    for layout in "moe_tp2_sp|--tensor-model-parallel-size 2 --sequence-parallel" \
                  "moe_etp1_tp2_sp_ep2|--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 --expert-model-parallel-size 2"; do
        case_name=${layout%%|*}; flags=${layout#*|}
        train "$case_name" 2 --device cuda $MOE $flags
        ok $? "2 GPUs, $case_name: run"
        compare_losses moe_gpu "$case_name" 1e-2 20 "2 GPUs, fp8 MoE $case_name ($flags): losses within 1e-2 of one GPU"
    done
else
    diag "one GPU: the 2-GPU layouts (TP2 + SP, DP2 with the distributed optimizer, the MoE's TP2 + SP and ETP1 x TP2 + SP x EP2) are not run"
fi
done_testing
