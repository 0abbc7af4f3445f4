#!/bin/sh
# moe_test.sh: the mixture-of-experts layer's behaviour through pretrain_gpt (fp32 CPU):
# 1. the load-balancing loss balances: a checkpoint whose router is biased towards expert 0 (a
#    constant added to the pre-MLP norm's output and a matching router weight: +4 on expert 0's
#    logit for every token) keeps sending nearly every token to expert 0 when trained without
#    the loss, and spreads them evenly over the 4 experts with --moe-aux-loss-coeff 0.1;
# 2. the log line and the metrics carry Megatron's MoE items (load_balancing_loss, z_loss, tokens
#    per expert adding up to tokens x top-k);
# 3. MoE flags that do not fit are refused with one message saying what to use.
. "${top_srcdir:-.}/tests/lib.sh"
POKE="$top_builddir/tests/tools/h5_poke"
MODEL="--args-file $top_srcdir/configs/gpt-tiny.args --num-layers 1 --num-experts 4 --moe-router-topk 1
       --disable-bias-linear --eval-iters 0 --lr-warmup-iters 0 --lr 1e-2 --log-interval 5 --seed 5"

run_app 1 $MODEL --train-iters 1 --save "$WORK/biased"
ok $? "a one-iteration MoE checkpoint"
F="$WORK/biased/iter_0000001.h5"
"$POKE" "$F" /model/decoder.layers.0.pre_mlp_layernorm.bias 0 2 &&
    "$POKE" "$F" /model/decoder.layers.0.mlp.router.weight 0 2 && "$POKE" "$F" --strip-checksums
ok $? "the router biased towards expert 0 (norm bias[0] = 2, router weight[0,0] = 2)"

tokens() {  # the last log's tokens per expert of layer 0, space-separated
    grep -o '"tokens_per_expert": \[[0-9, ]*\]' "$1" | tail -1 | sed 's/.*\[//; s/\]//; s/,//g'
}
for coeff in 0 0.1; do
    cp -r "$WORK/biased" "$WORK/ck$coeff"
    run_app 1 $MODEL --train-iters 31 --load "$WORK/ck$coeff" --override-opt-param-scheduler \
        --moe-aux-loss-coeff $coeff --metrics-file "$WORK/m$coeff.jsonl"
    ok $? "30 iterations from the biased router, --moe-aux-loss-coeff $coeff"
done
counts=$(tokens "$WORK/m0.jsonl")
diag "without the loss, tokens per expert after 30 iterations: $counts"
echo "$counts" | awk '{ t = $1 + $2 + $3 + $4; exit !(t == 1024 && $1 > 0.8 * t) }'
ok $? "without the load-balancing loss, expert 0 still takes more than 80% of the tokens"
counts=$(tokens "$WORK/m0.1.jsonl")
diag "with --moe-aux-loss-coeff 0.1: $counts"
echo "$counts" | awk '{ t = $1 + $2 + $3 + $4; lo = $1; hi = $1
    for (i = 2; i <= 4; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
    exit !(t == 1024 && lo > 0.15 * t && hi < 0.35 * t) }'
ok $? "with it, every expert takes between 15% and 35% of the tokens (even: 25%)"
grep -q "load_balancing_loss: [0-9.]* |" "$WORK/out" && grep -q '"load_balancing_loss": ' "$WORK/m0.1.jsonl"
ok $? "the log line and the metrics carry load_balancing_loss (Megatron's track_moe_metrics)"

# top-2 of 4 with the z loss: tokens per expert add up to 16 x 64 x 2 per layer; the loss of an
# even router is 1 and the z loss near log(4)^2
run_app 1 $MODEL --num-layers 2 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 \
    --train-iters 2 --log-interval 1 --metrics-file "$WORK/top2.jsonl"
ok $? "top-2 with the aux and z losses trains"
tail -1 "$WORK/top2.jsonl" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
layers = r["moe_layers"]
assert len(layers) == 2 and all(sum(l["tokens_per_expert"]) == 16 * 64 * 2 for l in layers), layers
assert 0.9 < r["load_balancing_loss"] < 1.2 and 1.5 < r["z_loss"] < 2.5, r
print("# load_balancing_loss %.4f, z_loss %.4f, tokens %s" % (r["load_balancing_loss"], r["z_loss"], [l["tokens_per_expert"] for l in layers]))'
ok $? "metrics: 2 MoE layers, tokens per expert summing to 2048 each, load_balancing_loss near 1, z_loss near log(4)^2"

DENSE="--args-file $top_srcdir/configs/gpt-tiny.args --num-layers 1 --eval-iters 0 --lr-warmup-iters 0"
refused() {  # refused WHAT_IN_THE_MESSAGE FLAGS...: the run stops before any work with that message
    what=$1; shift
    run_app 1 $DENSE --train-iters 1 "$@"
    status=$?
    [ $status -ne 0 ] && grep -q -- "$what" "$WORK/err"
    ok $? "refused: $* ($(grep -o 'error: .*' "$WORK/err" | head -1 | cut -c 1-150))"
}
MOE="--num-experts 4 --disable-bias-linear"
refused "expert-model-parallel-size 2 does not divide the data-parallel size 1" $MOE --expert-model-parallel-size 2
refused "is not divisible by --expert-model-parallel-size 3" --num-experts 4 --disable-bias-linear --expert-model-parallel-size 3
refused "expert-model-parallel-size 2 needs --num-experts" --expert-model-parallel-size 2
refused "add --disable-bias-linear" --num-experts 4
refused "exceeds --num-experts 4" $MOE --moe-router-topk 5
refused 'gives 3 layers, but --num-layers is 1' $MOE --moe-layer-freq '[1,0,1]'
refused "expected 0 or 1" $MOE --moe-layer-freq '[2]'
refused "needs --num-experts" --moe-router-topk 2
refused "sinkhorn is not supported" $MOE --moe-router-load-balancing-type sinkhorn
refused "needs --moe-expert-capacity-factor" $MOE --moe-token-drop-policy position
refused "shared experts are not built yet" $MOE --moe-shared-expert-intermediate-size 64
refused "is not divisible by --moe-router-num-groups 3" $MOE --moe-router-num-groups 3 --moe-router-group-topk 1
done_testing
