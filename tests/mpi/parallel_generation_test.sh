#!/bin/sh
# parallel_generation_test.sh: generation for Llama checkpoints, and generation split over ranks.
#  - Llama (configs/llama-tiny.args: RoPE, RMSNorm, SwiGLU, grouped-query attention 4 heads in 2
#    groups, no biases, untied output), trained here on mock data (documents that count upward):
#    the server's greedy generation with the KV cache over prompts of different lengths equals
#    greedy generation by the training forward re-run without a cache
#    (tests/tools/gpt_forward_reference), log-probabilities included, and so does scoring;
#  - the server run by mpiexec on 2 ranks (TP2, PP2) and 4 ranks (TP2xPP2), rank 0 serving HTTP
#    and the others following in lockstep, gives the 1-rank server's tokens (greedy and seeded
#    sampling; log-probabilities within 1e-4) for Llama and GPT checkpoints; SIGTERM to rank 0
#    stops every rank cleanly; rank 0 killed ends the job instead of leaving followers waiting;
#    stop_token -1 (Megatron takes any integer) generates all tokens_to_generate past the EOD;
#  - evaluate --task WIKITEXT103 on TP2 and PP2 ranks and --task LAMBADA on TP2xPP2 give the
#    1-rank numbers.
. "${top_srcdir:-.}/tests/lib.sh"
SERVER="$top_builddir/app/run_text_generation_server"
EVALUATE="$top_builddir/app/evaluate"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

run_app 1 --args-file "$LLAMA_ARGS" --eval-iters 0 --train-iters 60 --log-interval 20 --save "$WORK/llama"
ok $? "llama-tiny trains 60 iterations on one rank and saves"
run_app 1 --args-file "$TINY_ARGS" --eval-iters 0 --train-iters 30 --log-interval 10 --save "$WORK/gpt"
ok $? "gpt-tiny trains 30 iterations on one rank and saves"

# start_server NAME RANKS CHECKPOINT [FLAGS...]: mpiexec -n RANKS server on a free port; sets
# PORT, MPIEXEC_PID and RANK0_PID (rank 0's process, from its serving line)
start_server() {
    name=$1; ranks=$2; ckpt=$3; shift 3
    rm -f "$WORK/$name.port"
    "$MPIEXEC" -n "$ranks" "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device cpu \
        --max-batch-size 4 --inference-max-rows 16 "$@" >"$WORK/$name.out" 2>&1 &
    MPIEXEC_PID=$!
    PIDS="$PIDS $MPIEXEC_PID"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 300 ] && kill -0 $MPIEXEC_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
    RANK0_PID=$(sed -n 's/.*; process \([0-9]*\) stops on.*/\1/p' "$WORK/$name.out")
}
# requests NAME: the same requests to the server on PORT, answers in NAME.json
requests() {
    python3 - "$PORT" "$WORK/$1.json" <<'PY'
import json, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req, timeout=120))
answers = [
    put({"prompts": ["10 11 12", "200 201 202 203 204", "7", "50 51 52 53"], "tokens_to_generate": 12, "top_k": 1, "logprobs": True}),
    put({"prompts": ["30 31 32 33 34 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104"], "tokens_to_generate": 0, "logprobs": True}),
    put({"prompts": ["10 11 12", "100 101"], "tokens_to_generate": 16, "temperature": 2.0, "random_seed": 1234, "logprobs": True}),
    put({"prompts": ["40 41"], "tokens_to_generate": 10, "top_p": 0.9, "random_seed": 7}),
    # greedy without log-probabilities: the device picks the tokens (no logits to the host)
    put({"prompts": ["10 11 12", "200 201 202 203 204", "7", "50 51 52 53"], "tokens_to_generate": 12, "top_k": 1}),
]
json.dump(answers, open(out, "w"))
PY
}
# same NAME REFERENCE: identical tokens, log-probabilities within 1e-4; in both, greedy decoding on
# the device (request 4) gives the tokens of greedy decoding on the host (request 0)
same() {
    python3 - "$WORK/$1.json" "$WORK/$2.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst, bad = 0.0, []
for name, answers in (("this layout", a), ("1 rank", b)):
    if answers[4]["tokens"] != answers[0]["tokens"]:
        bad.append("%s: device greedy %s, host greedy %s" % (name, answers[4]["tokens"], answers[0]["tokens"]))
for i, (x, y) in enumerate(zip(a, b)):
    if x["tokens"] != y["tokens"]: bad.append("request %d: tokens %s, 1 rank %s" % (i, x["tokens"], y["tokens"]))
    for p, q in zip(x.get("logprobs", []), y.get("logprobs", [])):
        worst = max([worst] + [abs(u - v) for u, v in zip(p, q)])
print("# worst log-probability difference from one rank: %.3g" % worst)
for line in bad: print("#", line)
sys.exit(1 if bad or worst > 1e-4 or len(a) != 5 else 0)
PY
}
# stop NAME RANKS: SIGTERM to rank 0; every rank ends cleanly
stop() {
    kill -TERM "$RANK0_PID" 2>/dev/null
    i=0
    while kill -0 $MPIEXEC_PID 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
    wait $MPIEXEC_PID
    status=$?
    followers=$(grep -c "stopped after following" "$WORK/$1.out")
    [ $status -eq 0 ] && grep -q "stopped by signal 15" "$WORK/$1.out" && [ "$followers" -eq $(($2 - 1)) ]
}

# --- Llama on one rank: the cached forward against the no-cache training forward ---
start_server llama1 1 "$WORK/llama"
[ -n "$PORT" ]; ok $? "the server loads the Llama checkpoint and serves (port $PORT)"
requests llama1
REF_FLAGS="--args-file $LLAMA_ARGS --load $WORK/llama --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 --mock-data"
printf '10 11 12\n200 201 202 203 204\n7\n50 51 52 53\n' > "$WORK/greedy.lines"
timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:17 "$WORK/greedy.lines" $REF_FLAGS > "$WORK/reference.txt" 2>&1 ||
    sed 's/^/# /' "$WORK/reference.txt" | head -5
echo "30 31 32 33 34 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104" > "$WORK/score.line"
timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $REF_FLAGS > "$WORK/score.ref" 2>&1
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
greedy, score = json.load(open(work + "/llama1.json"))[:2]
lines = open(work + "/reference.txt").read().split("\n")
ref_tokens = [list(map(int, l.split()[1:])) for l in lines if l.startswith("tokens:")]
ref_logprobs = [list(map(float, l.split()[1:])) for l in lines if l.startswith("logprobs:")]
bad, worst = [], 0.0
for b, tokens in enumerate(greedy["tokens"]):
    n = len(tokens)
    if tokens != ref_tokens[b][:n]: bad.append("prompt %d: server %s, reference %s" % (b, tokens, ref_tokens[b]))
    if n < len(ref_tokens[b]) and tokens[-1] != 255: bad.append("prompt %d ended early without a stop token" % b)
    worst = max([worst] + [abs(x - y) for x, y in zip(greedy["logprobs"][b], ref_logprobs[b])])
scored = [list(map(float, l.split()[1:])) for l in open(work + "/score.ref") if l.startswith("logprobs:")][0]
worst_score = max(abs(x - y) for x, y in zip(score["logprobs"][0], scored))
print("# Llama greedy tokens:", greedy["tokens"])
print("# worst log-probability difference from the no-cache forward: generation %.3g, scoring %.3g" % (worst, worst_score))
for line in bad: print("#", line)
sys.exit(1 if bad or worst > 1e-4 or worst_score > 1e-4 or len(ref_tokens) != 4 or len(scored) != 19 else 0)
PY
ok $? "Llama: greedy tokens and log-probabilities (prompt and output) and scoring equal the no-cache training forward's"
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[0]['tokens'][0]; sys.exit(0 if t[:10]==list(range(10,20)) else 1)" "$WORK/llama1.json"
ok $? "the Llama model continues the count"
python3 - "$PORT" <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req))["tokens"][0]
body = {"prompts": ["245 246 247"], "tokens_to_generate": 30, "top_k": 1}
stopped, full = put(dict(body, stop_token=5)), put(dict(body, stop_token=-1))
print("# stop_token 5:", stopped)
print("# stop_token -1:", full)
sys.exit(0 if len(full) == 33 and full[:len(stopped)] == stopped and stopped[-1] == 5 and len(stopped) < 33 else 1)
PY
ok $? "stop_token -1 (no token matches it) generates every one of tokens_to_generate"
stop llama1 1; ok $? "SIGTERM stops the 1-rank server"

# --- the same requests on several ranks in lockstep ---
for layout in "tp2 2 --tensor-model-parallel-size 2" "pp2 2 --pipeline-model-parallel-size 2" \
              "tp2pp2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=llama_$1; ranks=$2; shift 2
    start_server $name $ranks "$WORK/llama" "$@"
    [ -n "$PORT" ] && [ -n "$RANK0_PID" ] && grep -q "$ranks ranks" "$WORK/$name.out"
    ok $? "Llama served by $ranks ranks ($*)"
    requests $name
    same $name llama1; ok $? "Llama on $ranks ranks ($*): the 1-rank server's tokens"
    stop $name $ranks; ok $? "SIGTERM to rank 0 stops all $ranks ranks cleanly ($(grep -c 'stopped after following' "$WORK/$name.out") followers)"
done
start_server gpt1 1 "$WORK/gpt"
requests gpt1
stop gpt1 1; ok $? "the GPT checkpoint on one rank"
start_server gpt_pp2 2 "$WORK/gpt" --pipeline-model-parallel-size 2
requests gpt_pp2
same gpt_pp2 gpt1; ok $? "GPT with tied embeddings (the last stage's copy) on PP2: the 1-rank server's tokens"
stop gpt_pp2 2; ok $? "SIGTERM to rank 0 stops both GPT PP2 ranks"
start_server gpt_tp2 2 "$WORK/gpt" --tensor-model-parallel-size 2
requests gpt_tp2
same gpt_tp2 gpt1; ok $? "GPT (learned positions, LayerNorm, biases) on TP2: the 1-rank server's tokens"

# rank 0 killed: the job ends, no follower keeps waiting
kill -KILL "$RANK0_PID" 2>/dev/null
i=0
while kill -0 $MPIEXEC_PID 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
! kill -0 $MPIEXEC_PID 2>/dev/null; ok $? "rank 0 killed: mpiexec ends the job within 30 s"
wait $MPIEXEC_PID; [ $? -ne 0 ]; ok $? "and exits with a failure"
PIDS=""

# a layout that does not fit the ranks or the model is refused with one line
"$MPIEXEC" -n 2 "$SERVER" --load "$WORK/llama" --device cpu --port 0 > "$WORK/bad1.out" 2>&1
[ $? -ne 0 ] && grep -q "2 ranks started for --tensor-model-parallel-size 1" "$WORK/bad1.out"
ok $? "2 ranks without a parallel layout are refused"
"$MPIEXEC" -n 4 "$SERVER" --load "$WORK/llama" --device cpu --port 0 --tensor-model-parallel-size 4 > "$WORK/bad2.out" 2>&1
[ $? -ne 0 ] && grep -q "does not divide the model" "$WORK/bad2.out"
ok $? "TP4 over 2 query groups is refused"

# --- evaluate on several ranks ---
python3 -c "print(' '.join(str(10 + i % 200) for i in range(300)))" > "$WORK/wiki.test.tokens"
for layout in "1 1" "tp2 2 --tensor-model-parallel-size 2" "pp2 2 --pipeline-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=$1; ranks=$2; shift 2
    timeout 120 "$MPIEXEC" -n $ranks "$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/llama" \
        --device cpu --seq-length 32 --overlapping-eval 16 --metrics-file "$WORK/eval_$name.jsonl" "$@" > "$WORK/eval_$name.out" 2>&1
    [ $? -eq 0 ] && [ "$(wc -l < "$WORK/eval_$name.jsonl")" -eq 1 ]; ok $? "evaluate WIKITEXT103 on $ranks ranks ($*) runs, one report"
done
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
one, tp2, pp2 = (json.load(open("%s/eval_%s.jsonl" % (work, n))) for n in ("1", "tp2", "pp2"))
print("# ppl: 1 rank %.9g, TP2 %.9g, PP2 %.9g" % (one["ppl"], tp2["ppl"], pp2["ppl"]))
sys.exit(0 if all(abs(m["avg_loss"] - one["avg_loss"]) < 1e-5 and m["num_windows"] == one["num_windows"] for m in (tp2, pp2)) else 1)
PY
ok $? "TP2 and PP2 give the 1-rank loss and perplexity"
python3 -c "
import json
for start in (20, 40, 100, 245, 5, 130):
    print(json.dumps({'text': ' '.join(str((start + i) % 255) for i in range(8))}))
" > "$WORK/lambada.jsonl"
for layout in "1 1" "tp2pp2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"; do
    # shellcheck disable=SC2086
    set -- $layout
    name=$1; ranks=$2; shift 2
    timeout 120 "$MPIEXEC" -n $ranks "$EVALUATE" --task LAMBADA --strict-lambada --valid-data "$WORK/lambada.jsonl" \
        --load "$WORK/llama" --device cpu --metrics-file "$WORK/lambada_$name.jsonl" "$@" > "$WORK/lambada_$name.out" 2>&1
done
python3 - "$WORK" <<'PY'
import json, sys
one, four = (json.load(open("%s/lambada_%s.jsonl" % (sys.argv[1], n))) for n in ("1", "tp2pp2"))
print("# LAMBADA: 1 rank %d of %d, TP2xPP2 %d of %d" % (one["number_correct"], one["total_examples"],
      four["number_correct"], four["total_examples"]))
sys.exit(0 if (one["number_correct"], one["total_examples"]) == (four["number_correct"], four["total_examples"]) == (one["number_correct"], 6) and one["number_correct"] > 0 else 1)
PY
ok $? "evaluate LAMBADA on TP2xPP2 (4 ranks): the 1-rank accuracy"
done_testing
