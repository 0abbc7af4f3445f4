#!/bin/sh
# moe_flags_test.sh: Megatron's MoE flags that this program does not build are refused before any
# work, one error line each that names the flag and what to use instead; the ones that only pick
# an implementation or a performance knob (flex-dispatcher SM counts, grouped-tensor layouts,
# all-to-all overlap and stream priority, router padding for fp8) are accepted and a short run of
# configs/mixtral-tiny.args with all of them trains; Megatron's checks of the grouped-tensor
# layout flags hold; --recompute-modules moe_act and moe need an MoE model, and Megatron's checks
# of them (moe_act with delayed fp8 scaling, --moe-layer-recompute with full recompute) hold.
. "${top_srcdir:-.}/tests/lib.sh"
MIXTRAL="--args-file $top_srcdir/configs/mixtral-tiny.args --device cpu --train-iters 1 --lr-warmup-iters 0 --eval-iters 0 --log-interval 1"

# expect_refused PATTERN ARGS...: exit 2, one error line naming the first flag and matching PATTERN
expect_refused() {
    pattern=$1; shift
    run_app 1 $MIXTRAL "$@"; status=$?
    lines=$(grep -c "error:" "$WORK/err")
    if [ "$status" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$1" "$WORK/err" && grep -q -- "$pattern" "$WORK/err" &&
        ! grep -q "iteration" "$WORK/out"; then
        ok 0 "$* refused, naming: $pattern"
    else
        ok 1 "$* refused, naming: $pattern"; diag "status $status, $lines error lines:"; sed 's/^/#   /' "$WORK/err" | head -3
    fi
}

# refused flags of Megatron's MoE group, each with the alternative its message names
expect_refused "expert-tensor-parallel-size" --expert-tensor-parallel-num-weight-shards 2
expect_refused "leave it unset" --moe-shared-expert-glu-interleave-size 32
expect_refused "routes each token itself" --moe-enable-routing-replay
expect_refused "moe-router-enable-expert-bias" --moe-router-quantile-balancing-ema 0.5
expect_refused "leave it out" --moe-single-grouped-bias
expect_refused "moe-token-dispatcher-type alltoall" --moe-enable-deepep
expect_refused "only works with --moe-router-topk 1" --moe-apply-probs-on-input
expect_refused "leave it unset" --moe-latent-size 16
expect_refused "leave it unset" --moe-mlp-glu-interleave-size 32
expect_refused "recompute-modules moe" --moe-paged-stash
expect_refused "metrics-file" --save-tokens-per-expert-interval 10
expect_refused "convert_checkpoint" --moe-use-upcycling
expect_refused "metrics-file" --moe-routing-trace-path "$WORK/trace"
expect_refused "metrics-file" --moe-routing-trace-capture-logits
expect_refused "metrics-file" --moe-routing-trace-capture-hidden-states
expect_refused "metrics-file" --moe-routing-trace-dump-weights
expect_refused "needs shared experts" --recompute-modules shared_experts --recompute-granularity selective
expect_refused "cannot work with --moe-shared-expert-overlap" --recompute-modules shared_experts --recompute-granularity selective --moe-shared-expert-intermediate-size 32 --moe-shared-expert-overlap
expect_refused "full recompute granularity" --moe-layer-recompute --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
expect_refused "use --recompute-granularity full, or moe_act" --recompute-modules moe --recompute-granularity selective --bf16 --fp8-format hybrid --fp8-recipe tensorwise
expect_refused "use --fp8-recipe tensorwise" --recompute-modules moe_act --recompute-granularity selective --bf16 --fp8-format hybrid
# Megatron's checks of the layout flags
run_app 1 $MIXTRAL --moe-single-grouped-weight; grep -q "moe-single-grouped-weight needs --moe-grouped-gemm and --moe-use-grouped-tensor" "$WORK/err"
ok $? "--moe-single-grouped-weight without --moe-use-grouped-tensor is refused (Megatron's check)"
run_app 1 --args-file "$TINY_ARGS" --device cpu --train-iters 1 --lr-warmup-iters 0 --recompute-granularity selective --recompute-modules moe_act
grep -q "moe_act needs --num-experts" "$WORK/err"
ok $? "--recompute-modules moe_act without --num-experts is refused"
# the accepted ones: a run with all of them trains
run_app 1 $MIXTRAL --overlap-moe-expert-parallel-comm --overlap-dispatch-backward-with-experts-wgrad \
    --ep-overlap-early-attn-memory-release --high-priority-a2a-comm-stream --use-grouped-gemm-for-shared-expert \
    --moe-router-padding-for-quantization --moe-router-padding-for-fp8 --use-grouped-gemm-for-dense-mlp \
    --moe-use-grouped-tensor --moe-single-grouped-weight --moe-flex-dispatcher-backend hybridep \
    --moe-permute-fusion-into-hybridep --moe-hybridep-pad-uneven-dispatch-inputs --moe-pad-experts-for-cuda-graph-inference \
    --moe-flex-dispatcher-num-sms 24 --moe-deepep-num-sms 20 --moe-hybridep-num-sms 16 --moe-hybridep-num-blocks-permute 8 \
    --moe-hybridep-num-blocks-unpermute 8 --moe-hybridep-num-sms-preprocessing 108 --moe-ncclep-zero-copy \
    --moe-dispatch-fwd-dtype bf16 --moe-combine-bwd-dtype mxfp8 --moe-expert-rank-capacity-factor 1.5 \
    --inference-moe-disable-fused-quant-kernels --inference-moe-token-dispatcher-type nccl --moe-paged-stash-page-size 64 \
    --moe-paged-stash-buffer-size-factor-cuda 1.1 --moe-paged-stash-buffer-size-factor-cpu 0 --moe-upcycling-granularity 1 \
    --moe-routing-trace-max-training-iters 5 --recompute-granularity selective --recompute-modules core_attn moe_act
status=$?
[ $status -eq 0 ] && grep -q "iteration *1/" "$WORK/out"
ok $? "the no-effect MoE flags (and --recompute-modules moe_act) are accepted and the run trains"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -3
run_app 1 $MIXTRAL --moe-hybridep-num-sms 0; grep -q "moe-hybridep-num-sms" "$WORK/err"
ok $? "a no-effect flag's value is still checked (--moe-hybridep-num-sms 0 is refused)"
done_testing
