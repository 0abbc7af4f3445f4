#!/bin/sh
# gpu_moe_test.sh: mixture of experts on the CUDA backend (kernels/cuda/cuda_moe.cu and the
# per-expert cuBLASLt GEMMs) trains like the fp32 CPU reference. Skipped where no GPU is visible.
#  - configs/mixtral-tiny.args (4 SwiGLU experts, top-2, aux and z losses) with dropout and the
#    router's input jitter, 20 iterations on one GPU: losses within 1% of the CPU backend's, the
#    load-balancing loss within 5% (it is a small number computed from bf16 logits);
#  - sigmoid routing with top-k scaling and group-limited top-k (8 experts in 4 groups), and a
#    capacity that drops tokens (pre-softmax, drop by probability), and fp16 (--fp16 from a loss
#    scale of 1024, as gpu_fp16_test.sh: Megatron's 2^32 skips the first steps): the same;
#  - --deterministic-mode twice: bitwise-identical losses and parameters; with
#    --keep-mlp-activation (the experts' activation kept for the backward) and with
#    --recompute-modules moe (the layer's forward again in the backward) the same bits; the
#    experts' grouped GEMMs on 1 and 4 streams (MTC_GROUPED_GEMM_LANES; 2 by default) the same bits;
#  - Megatron's benchmark router (--moe-router-force-load-balancing: random logits from the
#    samples' Philox draws) like the CPU;
#  - on 2 GPUs (when present): EP2, TP2 + SP, EP2 with the distributed optimizer, PP2, and
#    --expert-tensor-parallel-size 1 with TP2 + SP (EP1 and EP2: experts whole, each GPU sending
#    its own tokens): losses within 1e-2 of one GPU (NCCL all-to-all for EP); EP2 with gated shared experts and
#    --deterministic-mode: --moe-shared-expert-overlap (the all-to-alls on a side stream while the
#    shared experts compute) gives the bits of the run without it.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

MODEL="--args-file $top_srcdir/configs/mixtral-tiny.args --train-iters 20 --lr 1e-3 --lr-warmup-iters 2
       --log-interval 1 --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1 --moe-input-jitter-eps 0.01
       --micro-batch-size 4 --global-batch-size 16"
losses() { json_field "$1" train lm_loss; }

train() {  # train NAME NRANKS FLAGS...: one run, its losses in $WORK/NAME.loss
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl" --dump-parameters "$WORK/$name.bin"
    status=$?
    cp "$WORK/out" "$WORK/$name.out"
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    json_field "$WORK/$name.jsonl" train load_balancing_loss > "$WORK/$name.lbl"
    return $status
}

case_pair() {  # case_pair NAME FLAGS...: CPU and GPU runs of one configuration compared
    pair=$1; shift
    train "${pair}_cpu" 1 --device cpu "$@"
    ok $? "$pair: CPU reference run"
    train "${pair}_gpu" 1 --device cuda "$@"
    ok $? "$pair: one-GPU run"
    diag "$(grep 'iteration       20/' "$WORK/${pair}_gpu.out" | cut -c1-240)"
    compare_losses "${pair}_cpu" "${pair}_gpu" 1e-2 20 "$pair: bf16 GPU losses over 20 iterations within 1% of the fp32 CPU backend"
    python3 - "$WORK/${pair}_cpu.lbl" "$WORK/${pair}_gpu.lbl" <<'EOF'
import sys
a = [float(x) for x in open(sys.argv[1]).read().split()]
b = [float(x) for x in open(sys.argv[2]).read().split()]
worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
print("# load-balancing loss: %d values, worst relative difference %.3g (first %s / %s)" % (len(a), worst, a[:1], b[:1]))
sys.exit(0 if worst < 5e-2 else 1)
EOF
    ok $? "$pair: the load-balancing loss within 5% of the CPU's at every iteration"
}

case_pair mixtral
case_pair sigmoid_groups --num-experts 8 --moe-router-score-function sigmoid --moe-router-topk-scaling-factor 2.0 \
    --moe-router-num-groups 4 --moe-router-group-topk 2
case_pair capacity --moe-expert-capacity-factor 0.5 --moe-token-drop-policy probs --moe-router-pre-softmax
train fp16 1 --device cuda --fp16 --initial-loss-scale 1024
diag "fp16 losses: $(head -3 "$WORK/fp16.loss" | tr '\n' ' ')"
compare_losses mixtral_cpu fp16 1e-2 20 "--fp16 (--initial-loss-scale 1024): GPU losses within 1% of the fp32 CPU backend"

train det1 1 --device cuda --deterministic-mode
train det2 1 --device cuda --deterministic-mode
cmp -s "$WORK/det1.loss" "$WORK/det2.loss" && [ -s "$WORK/det1.loss" ] && cmp -s "$WORK/det1.bin" "$WORK/det2.bin"
ok $? "--deterministic-mode: two runs give bitwise-identical losses and parameters"
train det_keep 1 --device cuda --deterministic-mode --keep-mlp-activation
cmp -s "$WORK/det1.loss" "$WORK/det_keep.loss" && cmp -s "$WORK/det1.bin" "$WORK/det_keep.bin"
ok $? "--keep-mlp-activation (the experts' activation kept, not computed again): the same bits"
for lanes in 1 4; do
    export MTC_GROUPED_GEMM_LANES=$lanes
    train det_lanes$lanes 1 --device cuda --deterministic-mode --keep-mlp-activation
    unset MTC_GROUPED_GEMM_LANES
    cmp -s "$WORK/det1.loss" "$WORK/det_lanes$lanes.loss" && cmp -s "$WORK/det1.bin" "$WORK/det_lanes$lanes.bin"
    ok $? "MTC_GROUPED_GEMM_LANES=$lanes (the experts' GEMMs on $lanes streams; 2 by default), kept input rows: the same bits"
done
train det_recompute 1 --device cuda --deterministic-mode --recompute-granularity selective --recompute-modules moe
cmp -s "$WORK/det1.loss" "$WORK/det_recompute.loss" && cmp -s "$WORK/det1.bin" "$WORK/det_recompute.bin"
ok $? "--recompute-modules moe (the MoE layer's forward again in the backward): the same bits"
case_pair forced --moe-router-force-load-balancing

if [ "$gpus" -ge 2 ]; then
    EP="--expert-model-parallel-size"
    for layout in "ep2|$EP 2" "tp2_sp|--tensor-model-parallel-size 2 --sequence-parallel" \
                  "ep2_distopt|$EP 2 --use-distributed-optimizer --overlap-grad-reduce" \
                  "pp2|--pipeline-model-parallel-size 2" \
                  "etp1_tp2_sp|--expert-tensor-parallel-size 1 --tensor-model-parallel-size 2 --sequence-parallel" \
                  "etp1_tp2_sp_ep2|--expert-tensor-parallel-size 1 --tensor-model-parallel-size 2 --sequence-parallel $EP 2"; do
        case_name=${layout%%|*}; flags=${layout#*|}
        train "$case_name" 2 --device cuda $flags
        ok $? "2 GPUs, $case_name: run"
        compare_losses mixtral_gpu "$case_name" 1e-2 20 "2 GPUs, $case_name ($flags): losses within 1e-2 of one GPU"
    done
    # --moe-shared-expert-overlap: the all-to-alls on the expert-parallel group's side stream
    # (comm ialltoallv) while the compute stream runs the shared experts' GEMMs: the bits of the
    # run without it
    SHARED="$EP 2 --moe-shared-expert-intermediate-size 64 --moe-shared-expert-gate --deterministic-mode"
    train ep2_shared 2 --device cuda $SHARED
    ok $? "2 GPUs, EP2 with gated shared experts, --deterministic-mode: run"
    train ep2_shared_overlap 2 --device cuda $SHARED --moe-shared-expert-overlap
    status=$?
    grep -q "the shared experts' fc1 and activation compute while the dispatch all-to-all is in flight" \
        "$WORK/ep2_shared_overlap.out"
    ok $((status + $?)) "2 GPUs, EP2 with shared experts and --moe-shared-expert-overlap: run, the start-up line says it overlaps"
    diag "$(grep 'iteration       20/' "$WORK/ep2_shared.out" "$WORK/ep2_shared_overlap.out" | sed 's/.*elapsed/elapsed/' | cut -c1-80)"
    [ -s "$WORK/ep2_shared.loss" ] && cmp -s "$WORK/ep2_shared.loss" "$WORK/ep2_shared_overlap.loss" &&
        cmp -s "$WORK/ep2_shared.bin" "$WORK/ep2_shared_overlap.bin"
    ok $? "2 GPUs, EP2: --moe-shared-expert-overlap gives the losses and parameters without it, bit for bit"
else
    diag "one GPU: the 2-GPU layouts (EP2, TP2 + SP, EP2 with the distributed optimizer, PP2, ETP1 x TP2 + SP with EP1 and EP2, EP2 shared-expert overlap) are not run"
fi
done_testing
