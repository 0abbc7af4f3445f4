#!/bin/sh
# moe_generation_test.sh: generation and evaluation of mixture-of-experts checkpoints
# (configs/mixtral-tiny.args: 4 SwiGLU experts, top-2 softmax routing; and a variant with
# sigmoid routing, the expert bias of aux-loss-free balancing, gated shared experts and dense
# layers between MoE ones, --moe-layer-freq [1,0,1]):
#  - the server's greedy generation with the KV cache (prompts of different lengths, so a step's
#    batch mixes prefills and single tokens) and its scoring equal greedy generation and scoring
#    by the training forward re-run on the whole sequence for every token without a cache
#    (tests/tools/gpt_forward_reference): the same tokens, log-probabilities within 1e-5;
#  - evaluate --task WIKITEXT103 on one window gives the training forward's loss (within 1e-6);
#  - TP2, PP2 and EP2 servers (EP2: each rank holds 2 experts, the rows reach them by the
#    all-to-all) give the 1-rank tokens (log-probabilities within 1e-4), and evaluate on TP2, EP2
#    and TP2 x EP2 the 1-rank loss;
#  - the MoE flags of Megatron's scripts are checked against the checkpoint (--num-experts 8 for
#    4 experts is refused) or accepted as changing nothing (--moe-grouped-gemm, ...);
#  - a checkpoint trained with a capacity that drops tokens loads with a note that inference
#    routes dropless (Megatron-Core's InferenceTopKRouter).
. "${top_srcdir:-.}/tests/lib.sh"
SERVER="$top_builddir/app/run_text_generation_server"
EVALUATE="$top_builddir/app/evaluate"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
MOE_ARGS="$top_srcdir/configs/mixtral-tiny.args"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

SHARED="--num-layers 3 --moe-layer-freq [1,0,1] --moe-router-score-function sigmoid --moe-router-enable-expert-bias
        --moe-router-load-balancing-type none --moe-aux-loss-coeff 0 --moe-shared-expert-intermediate-size 32
        --moe-shared-expert-gate"
# shellcheck disable=SC2086
run_app 1 --args-file "$MOE_ARGS" --eval-iters 0 --train-iters 30 --log-interval 10 --save "$WORK/mixtral"
ok $? "mixtral-tiny trains 30 iterations and saves"
# shellcheck disable=SC2086
run_app 1 --args-file "$MOE_ARGS" $SHARED --eval-iters 0 --train-iters 30 --log-interval 10 --save "$WORK/shared"
ok $? "the shared-expert, expert-bias, sigmoid variant trains 30 iterations and saves"

# start_server NAME RANKS CHECKPOINT [FLAGS...]: mpiexec -n RANKS server on a free port; sets PORT, MPIEXEC_PID
start_server() {
    name=$1; ranks=$2; ckpt=$3; shift 3
    rm -f "$WORK/$name.port"
    "$MPIEXEC" -n "$ranks" "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device cpu \
        --max-batch-size 4 --inference-max-rows 64 "$@" >"$WORK/$name.out" 2>&1 &
    MPIEXEC_PID=$!
    PIDS="$PIDS $MPIEXEC_PID"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 300 ] && kill -0 $MPIEXEC_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
    RANK0_PID=$(sed -n 's/.*; process \([0-9]*\) stops on.*/\1/p' "$WORK/$name.out")
}
stop() {
    kill -TERM "$RANK0_PID" 2>/dev/null
    i=0
    while kill -0 $MPIEXEC_PID 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
    wait $MPIEXEC_PID
}
# put NAME BODY: the server's answer to a PUT of BODY (JSON) in NAME.json
put() {
    python3 - "$PORT" "$2" "$WORK/$1.json" <<'PY'
import json, sys, urllib.request
port, body, out = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=body.encode(), method="PUT")
open(out, "w").write(urllib.request.urlopen(req, timeout=120).read().decode())
PY
}

python3 -c "
print(' '.join(str(10 + i) for i in range(3)))
print(' '.join(str(20 + i % 200) for i in range(40)))
print(' '.join(str(100 + i % 150) for i in range(17)))
" > "$WORK/greedy.lines"
python3 -c "print(' '.join(str((7 * i) % 250) for i in range(64)))" > "$WORK/score.line"
GREEDY=$(python3 -c "
import json, sys
prompts = [l.strip() for l in open(sys.argv[1])]
print(json.dumps({'prompts': prompts, 'tokens_to_generate': 20, 'top_k': 1, 'logprobs': True, 'stop_token': -1}))" "$WORK/greedy.lines")
SCORE=$(python3 -c "import json,sys; print(json.dumps({'prompts': [open(sys.argv[1]).read().strip()], 'tokens_to_generate': 0, 'logprobs': True}))" "$WORK/score.line")

# against_reference NAME CKPT FLAGS: NAME.G.json (greedy) and NAME.S.json (scoring) against the no-cache training forward
against_reference() {
    name=$1; ckpt=$2; flags=$3
    ref="--args-file $MOE_ARGS $flags --load $ckpt --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 --mock-data --seq-length 64"
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:60 "$WORK/greedy.lines" $ref > "$WORK/$name.greedy.ref" 2>&1 ||
        sed 's/^/# /' "$WORK/$name.greedy.ref" | head -5
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $ref > "$WORK/$name.score.ref" 2>&1
    python3 - "$WORK" "$name" <<'PY'
import json, sys
work, name = sys.argv[1], sys.argv[2]
greedy, score = json.load(open("%s/%s.G.json" % (work, name))), json.load(open("%s/%s.S.json" % (work, name)))
lines = open("%s/%s.greedy.ref" % (work, name)).read().split("\n")
ref_tokens = [list(map(int, l.split()[1:])) for l in lines if l.startswith("tokens:")]
ref_logprobs = [list(map(float, l.split()[1:])) for l in lines if l.startswith("logprobs:")]
bad, worst = [], 0.0
for b, tokens in enumerate(greedy["tokens"]):
    if tokens != ref_tokens[b][:len(tokens)]: bad.append("prompt %d: server %s, reference %s" % (b, tokens, ref_tokens[b]))
    worst = max([worst] + [abs(x - y) for x, y in zip(greedy["logprobs"][b], ref_logprobs[b])])
scored = [list(map(float, l.split()[1:])) for l in open("%s/%s.score.ref" % (work, name)) if l.startswith("logprobs:")][0]
worst_score = max(abs(x - y) for x, y in zip(score["logprobs"][0], scored))
print("# %s: greedy tokens %s" % (name, [t[-6:] for t in greedy["tokens"]]))
print("# %s: worst log-probability difference from the no-cache forward: generation %.3g, scoring %.3g" % (name, worst, worst_score))
for line in bad: print("#", line)
sys.exit(1 if bad or worst > 1e-5 or worst_score > 1e-5 or len(ref_tokens) != 3 or len(scored) != len(score["logprobs"][0]) else 0)
PY
}

# evaluate_window NAME CKPT RANKS [FLAGS...]: evaluate on one window of the 63 scored targets
evaluate_window() {
    name=$1; ckpt=$2; ranks=$3; shift 3
    cp "$WORK/score.line" "$WORK/$name.wiki.test.tokens"
    timeout 120 "$MPIEXEC" -n "$ranks" "$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/$name.wiki.test.tokens" --load "$ckpt" \
        --device cpu --seq-length 63 --overlapping-eval 63 --metrics-file "$WORK/$name.eval.jsonl" "$@" > "$WORK/$name.eval.out" 2>&1
}

for variant in "mixtral" "shared $SHARED"; do
    # shellcheck disable=SC2086
    set -- $variant
    name=$1; shift
    start_server $name 1 "$WORK/$name"
    [ -n "$PORT" ] && grep -q "> mixture of experts: 4 experts" "$WORK/$name.out"
    ok $? "$name: the server loads the MoE checkpoint ($(grep -o 'mixture of experts:.*' "$WORK/$name.out"))"
    put $name.G "$GREEDY"
    put $name.S "$SCORE"
    stop
    against_reference $name "$WORK/$name" "$*"
    ok $? "$name: greedy tokens, log-probabilities and scoring with the KV cache equal the no-cache training forward's"
    evaluate_window $name "$WORK/$name" 1
    python3 - "$WORK/$name.eval.jsonl" "$WORK/$name.score.ref" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ref = [list(map(float, l.split()[1:])) for l in open(sys.argv[2]) if l.startswith("logprobs:")][0]
expected = -sum(ref) / len(ref)
print("# evaluate avg loss %.9g, from the training forward %.9g" % (m["avg_loss"], expected))
sys.exit(0 if m["num_windows"] == 1 and len(ref) == 63 and abs(m["avg_loss"] - expected) < 1e-6 else 1)
PY
    ok $? "$name: evaluate's WIKITEXT103 loss is the training forward's"
done

# --- model-parallel layouts: the 1-rank tokens ---
for layout in "mixtral tp2 2 --tensor-model-parallel-size 2" "mixtral pp2 2 --pipeline-model-parallel-size 2" \
              "shared tp2 2 --tensor-model-parallel-size 2" "mixtral ep2 2 --expert-model-parallel-size 2" \
              "shared ep2 2 --expert-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    model=$1; tag=$1_$2; ranks=$3; shift 3
    start_server $tag $ranks "$WORK/$model" "$@"
    put $tag.G "$GREEDY"
    stop
    python3 - "$WORK/$model.G.json" "$WORK/$tag.G.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
worst = max(abs(x - y) for la, lb in zip(a["logprobs"], b["logprobs"]) for x, y in zip(la, lb))
print("# worst log-probability difference from the 1-rank server %.3g" % worst)
sys.exit(0 if a["tokens"] == b["tokens"] and worst < 1e-4 else 1)
PY
    ok $? "$tag: the server on $ranks ranks ($*) gives the 1-rank tokens"
done
for layout in "mixtral tp2 2 --tensor-model-parallel-size 2" "shared ep2 2 --expert-model-parallel-size 2" \
              "shared tp2ep2 4 --tensor-model-parallel-size 2 --expert-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    model=$1; tag=$1_$2; ranks=$3; shift 3
    evaluate_window $tag "$WORK/$model" $ranks "$@"
    python3 - "$WORK/$model.eval.jsonl" "$WORK/$tag.eval.jsonl" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("# avg loss: 1 rank %.9g, several %.9g" % (a["avg_loss"], b["avg_loss"]))
sys.exit(0 if abs(a["avg_loss"] - b["avg_loss"]) < 1e-5 else 1)
PY
    ok $? "$tag: evaluate on $ranks ranks ($*) gives the 1-rank loss"
done

# --- the MoE flags of Megatron's scripts: checked against the checkpoint, or no effect ---
evaluate_window flags "$WORK/mixtral" 1 --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-grouped-gemm \
    --moe-token-dispatcher-type alltoall --moe-aux-loss-coeff 1e-2
grep -q '"avg_loss"' "$WORK/flags.eval.jsonl" && grep -q "moe-grouped-gemm" "$WORK/flags.eval.out"
ok $? "evaluate takes the checkpoint's --num-experts, --moe-router-topk, --moe-ffn-hidden-size and names the no-effect MoE flags"
evaluate_window wrong "$WORK/mixtral" 1 --num-experts 8
grep -q -- "--num-experts 8, but the checkpoint .* has num_experts 4" "$WORK/wrong.eval.out"
ok $? "--num-experts 8 against a checkpoint of 4 experts is refused naming both"

# --- a checkpoint trained with token dropping: inference routes dropless, and says so ---
run_app 1 --args-file "$MOE_ARGS" --moe-expert-capacity-factor 1.0 --eval-iters 0 --train-iters 2 --lr-warmup-iters 0 --save "$WORK/capacity"
evaluate_window capacity "$WORK/capacity" 1
grep -q "trained with --moe-expert-capacity-factor 1: inference keeps every token's top-k experts" "$WORK/capacity.eval.out"
ok $? "a checkpoint trained with --moe-expert-capacity-factor 1.0 evaluates with a note that inference is dropless"
done_testing
