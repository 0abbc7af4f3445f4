#!/bin/sh
# generation_variants_test.sh: generation and evaluation of checkpoints trained with
# --apply-layernorm-1p and with --use-rope-scaling, and what pipeline parallelism sends.
#  - a tiny Llama trained a few iterations with --apply-layernorm-1p (norm weights stored as
#    w - 1) and one with --use-rope-scaling (Llama 3's frequency scaling, a large rotary base so
#    that most frequencies are scaled, long prompts): the server's greedy generation with the KV
#    cache and its scoring (400 positions) equal the no-cache training forward's
#    (tests/tools/gpt_forward_reference: tokens, log-probabilities within 1e-5; the forward without
#    the scaling is 1e-4 off), and evaluate loads them (its loss equals the one the
#    training forward's log-probabilities give);
#  - with --pipeline-model-parallel-size 2 a 512-token prompt with logprobs gives the 1-rank
#    server's tokens and log-probabilities, and the last stage sends the other stage only the
#    prompt's log-probabilities and one row of logits per step, not the prefill's
#    512 x vocabulary logits (its byte count, printed at shutdown, is checked exactly); evaluate
#    on PP2 sends one log-probability per target.
. "${top_srcdir:-.}/tests/lib.sh"
SERVER="$top_builddir/app/run_text_generation_server"
EVALUATE="$top_builddir/app/evaluate"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

LN1P="--apply-layernorm-1p --max-position-embeddings 1024"
SCALED="--use-rope-scaling --rope-scaling-factor 8 --rotary-base 500000 --max-position-embeddings 1024"
# shellcheck disable=SC2086
run_app 1 --args-file "$LLAMA_ARGS" $LN1P --eval-iters 0 --train-iters 24 --log-interval 12 --save "$WORK/ln1p"
ok $? "llama-tiny trains with --apply-layernorm-1p and saves"
# shellcheck disable=SC2086
run_app 1 --args-file "$LLAMA_ARGS" $SCALED --eval-iters 0 --train-iters 24 --log-interval 12 --save "$WORK/scaled"
ok $? "llama-tiny trains with --use-rope-scaling and saves"

# start_server NAME RANKS CHECKPOINT [FLAGS...]: mpiexec -n RANKS server on a free port; sets PORT, MPIEXEC_PID
start_server() {
    name=$1; ranks=$2; ckpt=$3; shift 3
    rm -f "$WORK/$name.port"
    "$MPIEXEC" -n "$ranks" "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device cpu \
        --max-batch-size 4 "$@" >"$WORK/$name.out" 2>&1 &
    MPIEXEC_PID=$!
    PIDS="$PIDS $MPIEXEC_PID"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 300 ] && kill -0 $MPIEXEC_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
    RANK0_PID=$(sed -n 's/.*; process \([0-9]*\) stops on.*/\1/p' "$WORK/$name.out")
}
# stop: SIGTERM to rank 0, wait for the job
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
# against_reference NAME CKPT FLAGS: greedy (G.json) and scoring (S.json) answers against the
# no-cache training forward on the same prompts
against_reference() {
    name=$1; ckpt=$2; flags=$3
    ref="--args-file $LLAMA_ARGS $flags --load $ckpt --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 --mock-data"
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:$GREEDY_LENGTH "$WORK/greedy.lines" $ref --seq-length 128 > "$WORK/$name.greedy.ref" 2>&1 ||
        sed 's/^/# /' "$WORK/$name.greedy.ref" | head -5
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $ref --seq-length 400 > "$WORK/$name.score.ref" 2>&1
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

# prompts of different lengths; the long ones put positions past 100, where rope scaling matters
python3 -c "
print(' '.join(str(10 + i) for i in range(3)))
print(' '.join(str(20 + i % 200) for i in range(90)))
print(' '.join(str(100 + i % 150) for i in range(57)))
" > "$WORK/greedy.lines"
python3 -c "print(' '.join(str((7 * i) % 250) for i in range(400)))" > "$WORK/score.line"
GREEDY_LENGTH=110
GREEDY=$(python3 -c "
import json, sys
prompts = [l.strip() for l in open(sys.argv[1])]
print(json.dumps({'prompts': prompts, 'tokens_to_generate': 20, 'top_k': 1, 'logprobs': True, 'stop_token': -1}))" "$WORK/greedy.lines")
SCORE=$(python3 -c "import json,sys; print(json.dumps({'prompts': [open(sys.argv[1]).read().strip()], 'tokens_to_generate': 0, 'logprobs': True}))" "$WORK/score.line")

for variant in "ln1p $LN1P" "scaled $SCALED"; do
    # shellcheck disable=SC2086
    set -- $variant
    name=$1; shift
    start_server $name 1 "$WORK/$name" --inference-max-rows 64
    [ -n "$PORT" ]; ok $? "the server loads the checkpoint trained with $*"
    put $name.G "$GREEDY"
    put $name.S "$SCORE"
    stop
    against_reference $name "$WORK/$name" "$*"
    ok $? "$name: greedy tokens, log-probabilities and scoring with the KV cache equal the no-cache training forward's"
    # evaluate: one window of the 399 scored targets; its loss is minus the mean of the reference's log-probabilities
    cp "$WORK/score.line" "$WORK/$name.wiki.test.tokens"
    timeout 120 "$MPIEXEC" -n 1 "$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/$name.wiki.test.tokens" --load "$WORK/$name" \
        --device cpu --seq-length 399 --overlapping-eval 399 --metrics-file "$WORK/$name.eval1.jsonl" > "$WORK/$name.eval1.out" 2>&1
    python3 - "$WORK/$name.eval1.jsonl" "$WORK/$name.score.ref" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ref = [list(map(float, l.split()[1:])) for l in open(sys.argv[2]) if l.startswith("logprobs:")][0]
expected = -sum(ref) / len(ref)
print("# evaluate avg loss %.9g, from the training forward %.9g" % (m["avg_loss"], expected))
sys.exit(0 if m["num_windows"] == 1 and len(ref) == 399 and abs(m["avg_loss"] - expected) < 1e-6 else 1)
PY
    ok $? "$name: evaluate loads the checkpoint and its WIKITEXT103 loss is the training forward's"
done

# --- pipeline parallelism: a 512-token prefill does not move 512 x vocabulary logits ---
LONG=$(python3 -c "import json; print(json.dumps({'prompts': [' '.join(str(10 + i % 240) for i in range(512))], 'tokens_to_generate': 4, 'top_k': 1, 'logprobs': True, 'stop_token': -1}))")
for layout in "long1 1" "long_pp2 2 --pipeline-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=$1; ranks=$2; shift 2
    start_server $name $ranks "$WORK/scaled" --inference-max-rows 1024 "$@"
    put $name "$LONG"
    stop
done
python3 - "$WORK" <<'PY'
import json, re, sys
work = sys.argv[1]
one, two = (json.load(open("%s/%s.json" % (work, n))) for n in ("long1", "long_pp2"))
worst = max(abs(x - y) for x, y in zip(one["logprobs"][0], two["logprobs"][0]))
sent = [int(x) for x in re.findall(r"last pipeline stage: (\d+) bytes", open(work + "/long_pp2.out").read())]
V, L, steps = 256, 512, 3
# the prefill: 512 log-probabilities and one row of logits; each of the 3 later steps: one and one
expected = 4 * ((L + V) + steps * (1 + V))
print("# PP2 512-token prompt: tokens %s, worst log-probability difference from one rank %.3g" % (two["tokens"][0][-5:], worst))
print("# the last stage sent %s bytes (expected %d; the prefill's logits alone are %d)" % (sent, expected, 4 * L * V))
sys.exit(0 if one["tokens"] == two["tokens"] and len(one["tokens"][0]) == 516 and worst < 1e-4 and sent == [expected] else 1)
PY
ok $? "PP2: a 512-token prompt gives the 1-rank tokens, and the last stage sends log-probabilities and next-token logits only"

# evaluate on PP2: the 1-rank loss, one double per target sent
python3 -c "print(' '.join(str(10 + i % 200) for i in range(300)))" > "$WORK/wiki.test.tokens"
for layout in "1 1" "pp2 2 --pipeline-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=$1; ranks=$2; shift 2
    timeout 120 "$MPIEXEC" -n $ranks "$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/ln1p" \
        --device cpu --seq-length 32 --overlapping-eval 16 --micro-batch-size 2 --metrics-file "$WORK/eval_$name.jsonl" "$@" > "$WORK/eval_$name.out" 2>&1
done
python3 - "$WORK" <<'PY'
import json, re, sys
work = sys.argv[1]
one, pp2 = (json.load(open("%s/eval_%s.jsonl" % (work, n))) for n in ("1", "pp2"))
sent = [int(x) for x in re.findall(r"last pipeline stage: (\d+) bytes", open(work + "/eval_pp2.out").read())]
expected = one["num_windows"] * 32 * 8
print("# ppl: 1 rank %.9g, PP2 %.9g; the last stage sent %s bytes (expected %d)" % (one["ppl"], pp2["ppl"], sent, expected))
sys.exit(0 if abs(one["avg_loss"] - pp2["avg_loss"]) < 1e-5 and sent == [expected] else 1)
PY
ok $? "evaluate on PP2 (--apply-layernorm-1p checkpoint): the 1-rank loss, one log-probability per target sent"
done_testing
