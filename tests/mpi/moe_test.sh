#!/bin/sh
# moe_test.sh: the mixture-of-experts layer's behaviour through pretrain_gpt (fp32 CPU):
# 1. the load-balancing loss balances: a checkpoint whose router is biased towards expert 0 (a
#    constant added to the pre-MLP norm's output and a matching router weight: +4 on expert 0's
#    logit for every token) keeps sending nearly every token to expert 0 when trained without
#    the loss, and spreads them evenly over the 4 experts with --moe-aux-loss-coeff 0.1;
# 2. the log line and the metrics carry Megatron's MoE items (load_balancing_loss, z_loss, tokens
#    per expert adding up to tokens x top-k);
# 3. the aux-loss-free expert bias (--moe-router-enable-expert-bias, aux loss off) balances the
#    same biased router; after one iteration it is rate x sign(mean - count) of the logged
#    tokens per expert, the same bits with 1 and 2 data-parallel ranks (the counts summed over
#    them; none with --moe-pad-expert-input-to-capacity, as Megatron's padded counts are equal);
#    it is saved in checkpoints and a resumed run continues bit for bit;
# 4. MoE flags that do not fit are refused with one message saying what to use.
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

# the expert bias: the same router biased towards expert 0, sigmoid scores (the bias needs them)
BIAS="$MODEL --moe-router-score-function sigmoid --moe-router-enable-expert-bias"
run_app 1 $BIAS --train-iters 1 --moe-router-bias-update-rate 0 --save "$WORK/bbiased"
F="$WORK/bbiased/iter_0000001.h5"
"$POKE" "$F" /model/decoder.layers.0.pre_mlp_layernorm.bias 0 2 &&
    "$POKE" "$F" /model/decoder.layers.0.mlp.router.weight 0 2 && "$POKE" "$F" --strip-checksums
ok $? "a one-iteration checkpoint with the expert bias (sigmoid scores), its router biased towards expert 0"
for rate in 0 0.01; do
    cp -r "$WORK/bbiased" "$WORK/bk$rate"
    run_app 1 $BIAS --train-iters 31 --load "$WORK/bk$rate" --override-opt-param-scheduler --log-interval 1 \
        --moe-router-bias-update-rate $rate --metrics-file "$WORK/b$rate.jsonl" --dump-parameters "$WORK/b$rate.bin" \
        --save "$WORK/bk$rate"
    ok $? "30 iterations from the biased router with the expert bias, --moe-router-bias-update-rate $rate, no aux loss"
done
spread() {  # spread FILE: per logged iteration, the smallest and largest share of layer 0's tokens
    grep -o '"tokens_per_expert": \[[0-9, ]*\]' "$1" | sed 's/.*\[//; s/\]//; s/,//g' |
        awk '{ t = $1 + $2 + $3 + $4; lo = $1; hi = $1; for (i = 2; i <= 4; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
               printf "%.3f %.3f %d\n", lo / t, hi / t, t }'
}
spread "$WORK/b0.jsonl" | tail -1 | awk '{ exit !($3 == 1024 && $2 > 0.8) }'
ok $? "rate 0 (the bias stays 0): one expert still takes more than 80% of the tokens ($(spread "$WORK/b0.jsonl" | tail -1 | cut -d' ' -f2))"
diag "rate 0.01, smallest and largest share per iteration: $(spread "$WORK/b0.01.jsonl" | awk '{ printf "%s-%s ", $1, $2 }')"
spread "$WORK/b0.01.jsonl" | awk 'NR == 1 { first = $2 - $1 } END { exit !(first > 0.8 && $3 == 1024 && $1 > 0.12 && $2 < 0.38) }'
ok $? "rate 0.01: the spread shrinks from more than 80% of the tokens to every expert between 12% and 38% at iteration 30"
python3 - "$WORK/b0.01.bin" <<'PY'
import struct, sys
path = sys.argv[1]
for line in open(path + ".index"):
    name, rows, cols, offset = line.split()
    if name.endswith("router.expert_bias"):
        with open(path, "rb") as f:
            f.seek(int(offset) * 4); bias = struct.unpack("<%df" % int(rows), f.read(4 * int(rows)))
print("# expert bias after 30 updates:", " ".join("%.2f" % b for b in bias))
sys.exit(0 if bias[0] < -0.1 and min(bias[1:]) > -0.05 else 1)
PY
ok $? "the bias of the over-used expert fell, the others' did not (decoder.layers.0.mlp.router.expert_bias in the dump)"

# one more update from the balanced router (near the mean, a rank's own counts would often give
# another sign than the global batch's), rate 0.25: bias = previous + float32(0.25) x sign(mean -
# count) for the logged counts, the same bits on 1 and 2 data-parallel ranks
bias_check() {  # bias_check DUMP METRICS: the dump's bias is the update of the metrics' counts
    python3 - "$1" "$2" "$WORK/b0.01.bin" <<'PY'
import json, struct, sys
dump, metrics, before_dump = sys.argv[1:]
def bias_of(dump):
    for line in open(dump + ".index"):
        name, rows, cols, offset = line.split()
        if name == "decoder.layers.0.mlp.router.expert_bias":
            with open(dump, "rb") as f:
                f.seek(int(offset) * 4); return struct.unpack("<4f", f.read(16))
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
counts = [json.loads(l)["moe_layers"][0]["tokens_per_expert"] for l in open(metrics) if '"train"' in l][-1]
before, bias = bias_of(before_dump), bias_of(dump)
mean = sum(counts) / 4.0
want = [f32(b + f32(0.25) * ((mean > c) - (mean < c))) for b, c in zip(before, counts)]
print("# counts %s: bias %s -> %s" % (counts, ["%.6g" % b for b in before], ["%.6g" % b for b in bias]))
sys.exit(0 if list(bias) == want else 1)
PY
}
for n in 1 2; do
    cp -r "$WORK/bk0.01" "$WORK/dp$n"
    run_app $n $BIAS --train-iters 32 --load "$WORK/dp$n" --override-opt-param-scheduler --log-interval 1 \
        --moe-router-bias-update-rate 0.25 --metrics-file "$WORK/dp$n.jsonl" --dump-parameters "$WORK/dp$n.bin"
    status=$?
    bias_check "$WORK/dp$n.bin" "$WORK/dp$n.jsonl"
    ok $((status + $?)) "DP$n: after one update the bias is 0.25 x sign(mean - count) of the global batch's tokens per expert"
done
python3 - "$WORK/dp1.bin" "$WORK/dp2.bin" <<'PY'
import sys
def bias_bytes(path):
    for line in open(path + ".index"):
        name, rows, cols, offset = line.split()
        if name.endswith("router.expert_bias"):
            with open(path, "rb") as f:
                f.seek(int(offset) * 4); return f.read(4 * int(rows))
b = [bias_bytes(p) for p in sys.argv[1:]]
sys.exit(0 if b[0] == b[1] else 1)
PY
ok $? "the expert bias after one update: the same bits with 1 and 2 data-parallel ranks"

# with --moe-pad-expert-input-to-capacity Megatron counts the padded routing map (every expert
# its capacity): the bias does not move, while dropping without padding moves it
for pad in "" --moe-pad-expert-input-to-capacity; do
    run_app 1 $BIAS --train-iters 3 --moe-expert-capacity-factor 1.5 $pad --moe-router-bias-update-rate 0.25 \
        --dump-parameters "$WORK/pad$pad.bin"
    ok $? "capacity factor 1.5 ${pad:-without padding}: trains with the expert bias"
done
python3 - "$WORK/pad.bin" "$WORK/pad--moe-pad-expert-input-to-capacity.bin" <<'PY'
import struct, sys
def bias_of(path):
    for line in open(path + ".index"):
        name, rows, cols, offset = line.split()
        if name.endswith("router.expert_bias"):
            with open(path, "rb") as f:
                f.seek(int(offset) * 4); return struct.unpack("<4f", f.read(16))
plain, padded = bias_of(sys.argv[1]), bias_of(sys.argv[2])
print("# bias after 3 updates: dropping %s, padded to capacity %s" % (plain, padded))
sys.exit(0 if padded == (0.0,) * 4 and any(b != 0 for b in plain) else 1)
PY
ok $? "--moe-pad-expert-input-to-capacity: the padded counts are equal and the bias stays 0 (Megatron's), without it the bias moves"

# checkpoints: 4 iterations straight, or 2 saved and resumed for 2 more: the same bits, the bias
# included; the checkpoint holds the bias the run had (its dump at the save)
cp -r "$WORK/bbiased" "$WORK/straight"
run_app 1 $BIAS --train-iters 5 --load "$WORK/straight" --override-opt-param-scheduler --moe-router-bias-update-rate 0.01 --lr-decay-iters 100 \
    --dump-parameters "$WORK/straight.bin"
ok $? "expert bias: 4 iterations straight"
cp -r "$WORK/bbiased" "$WORK/resumed"
run_app 1 $BIAS --train-iters 3 --load "$WORK/resumed" --override-opt-param-scheduler --moe-router-bias-update-rate 0.01 --lr-decay-iters 100 \
    --save "$WORK/resumed" --dump-parameters "$WORK/at3.bin"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$WORK/resumed/iter_0000003.h5" "$WORK/at3.bin"); status=$?
diag "$result"
ok $status "expert bias: the checkpoint at iteration 3 holds the run's bias (decoder.layers.0.mlp.router.expert_bias) and parameters, bit for bit"
run_app 1 $BIAS --train-iters 5 --load "$WORK/resumed" --moe-router-bias-update-rate 0.01 --lr-decay-iters 100 --dump-parameters "$WORK/resumed.bin"
status=$?
cmp -s "$WORK/straight.bin" "$WORK/resumed.bin" && cmp -s "$WORK/straight.bin.index" "$WORK/resumed.bin.index" &&
    grep -q "router.expert_bias" "$WORK/resumed.bin.index"
ok $((status + $?)) "expert bias: resumed at iteration 3, iteration 5's parameters and bias are the straight run's, bit for bit"
run_app 1 $MODEL --train-iters 2 --load "$WORK/bbiased" --moe-router-score-function sigmoid
grep -q -e "--moe-router-enable-expert-bias = 1 (this run: 0)" "$WORK/err"
ok $? "a checkpoint with the expert bias refuses a run without it, naming the flag"

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
refused "only supports the sigmoid and sqrtsoftplus score functions" $MOE --moe-router-enable-expert-bias
refused "needs --moe-router-enable-expert-bias" $MOE --moe-router-score-function sigmoid --moe-router-bias-update-rate 1e-2
refused "only works with --moe-token-dispatcher-type alltoall" $MOE --moe-shared-expert-intermediate-size 64 --moe-shared-expert-overlap
refused "needs --moe-shared-expert-intermediate-size" $MOE --moe-shared-expert-gate
refused "moe-shared-expert-intermediate-size must be positive" $MOE --moe-shared-expert-intermediate-size 0
refused "is not divisible by --moe-router-num-groups 3" $MOE --moe-router-num-groups 3 --moe-router-group-topk 1
done_testing
