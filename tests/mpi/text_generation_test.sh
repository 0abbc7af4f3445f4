#!/bin/sh
# text_generation_test.sh: generation, the REST server and the zero-shot evaluations end to end
# on a tiny GPT trained here on mock data (documents that count upward; NullTokenizer, so prompts
# are token ids written as text):
#  - the server (a real HTTP server on a free loopback port, real requests through curl): greedy
#    generation with the KV cache over a batch of prompts of different lengths equals greedy
#    generation by the training forward re-run without a cache on the growing sequence
#    (tests/tools/gpt_forward_reference), log-probabilities included; scoring
#    (tokens_to_generate 0); seeded sampling reproducible; top-k/top-p/stop tokens; every
#    malformed request gets a 4xx with a JSON message and the server keeps serving; concurrent
#    requests are not mixed; the CLI client;
#  - a checkpoint trained and saved by pretrain_gpt as TP2xPP2 on 4 ranks loads into the 1-rank
#    server and gives the tokens of the same training run on 1 rank;
#  - evaluate --task WIKITEXT103 (overlapping windows) and --task LAMBADA (strict) give the
#    numbers computed here in Python from the server's log-probabilities and greedy tokens.
. "${top_srcdir:-.}/tests/lib.sh"
SERVER="$top_builddir/app/run_text_generation_server"
EVALUATE="$top_builddir/app/evaluate"
CLI="$top_builddir/app/text_generation_cli"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

# --- the model: 100 iterations on one rank, then 4 more on one rank and, as TP2xPP2, on four ---
TRAIN="--args-file $TINY_ARGS --eval-iters 0 --log-interval 10"
run_app 1 $TRAIN --train-iters 100 --save "$WORK/base"; ok $? "the tiny GPT trains on one rank and saves"
run_app 1 $TRAIN --train-iters 104 --override-opt-param-scheduler --load "$WORK/base" --save "$WORK/tp1"; ok $? "4 more iterations on 1 rank"
run_app 4 $TRAIN --train-iters 104 --override-opt-param-scheduler --load "$WORK/base" --save "$WORK/tp2pp2" --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2; ok $? "the same 4 iterations as TP2xPP2 on 4 ranks, saved in that layout"

# start_server NAME CHECKPOINT [FLAGS...]: serve on a free port; sets PORT
start_server() {
    name=$1; ckpt=$2; shift 2
    rm -f "$WORK/$name.port"
    "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device cpu "$@" >"$WORK/$name.out" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
}
put() {  # put PORT BODY OUT: the status code on stdout, the answer in OUT
    curl -s -o "$3" -w "%{http_code}" -X PUT -H "Content-Type: application/json" --data-binary "$2" "http://127.0.0.1:$1/api"
}

# at most 8 token rows per forward: longer prefills and scorings run in pieces
start_server tp1 "$WORK/tp1" --max-request-bytes 4096 --max-batch-size 8 --inference-max-rows 8
[ -n "$PORT" ] && grep -q "serving on http://127.0.0.1:$PORT/api" "$WORK/tp1.out"
ok $? "the server binds 127.0.0.1 on a free port ($PORT) and says where it serves"
P1=$PORT

# --- greedy with the cache == greedy by the full training forward without a cache ---
GREEDY='{"prompts": ["10 11 12", "200 201 202 203 204", "7", "50 51 52 53"], "tokens_to_generate": 12, "top_k": 1, "logprobs": true}'
status=$(put $P1 "$GREEDY" "$WORK/greedy.json"); [ "$status" = 200 ]; ok $? "a greedy batch of 4 prompts of different lengths is answered (status $status)"
REF_FLAGS="--args-file $TINY_ARGS --load $WORK/tp1 --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 --mock-data"
printf '10 11 12\n200 201 202 203 204\n7\n50 51 52 53\n' > "$WORK/greedy.lines"
# every sequence extended to the longest prompt (5) + 12 tokens, as the server's batch does
timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:17 "$WORK/greedy.lines" $REF_FLAGS > "$WORK/reference.txt" 2>&1 ||
    sed 's/^/# /' "$WORK/reference.txt"
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
r = json.load(open(work + "/greedy.json"))
lines = open(work + "/reference.txt").read().split("\n")
ref_tokens = [list(map(int, l.split()[1:])) for l in lines if l.startswith("tokens:")]
ref_logprobs = [list(map(float, l.split()[1:])) for l in lines if l.startswith("logprobs:")]
bad = []
worst = 0.0
for b, tokens in enumerate(r["tokens"]):
    n = len(tokens)
    # the server stops a sequence after a stop token (end of document); the reference does not
    if tokens != ref_tokens[b][:n]:
        bad.append("prompt %d: server %s, reference %s" % (b, tokens, ref_tokens[b]))
    if n < len(ref_tokens[b]) and tokens[-1] != 255:
        bad.append("prompt %d ended early without a stop token" % b)
    if len(r["logprobs"][b]) != n - 1:
        bad.append("prompt %d: %d logprobs for %d tokens" % (b, len(r["logprobs"][b]), n))
    for x, y in zip(r["logprobs"][b], ref_logprobs[b]):
        worst = max(worst, abs(x - y))
print("# greedy tokens:", r["tokens"])
print("# worst log-probability difference from the no-cache forward: %.3g" % worst)
for line in bad: print("#", line)
sys.exit(1 if bad or worst > 1e-4 or len(ref_tokens) != 4 else 0)
PY
ok $? "greedy tokens and log-probabilities (prompt and output) equal the no-cache training forward's"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); t=r['tokens'][0]; sys.exit(0 if t[:8]==list(range(10,18)) and r['text'][0].startswith('10 11 12 13') and r['segments'][0][:3]==['10','11','12'] else 1)" "$WORK/greedy.json"
ok $? "the model continues the count; text and segments are the detokenized tokens"

# --- scoring only: tokens_to_generate 0 ---
status=$(put $P1 '{"prompts": ["30 31 32 33 34 90 91"], "tokens_to_generate": 0, "logprobs": true}' "$WORK/score.json")
echo "30 31 32 33 34 90 91" > "$WORK/score.line"
timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $REF_FLAGS > "$WORK/score.ref" 2>&1
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
r = json.load(open(work + "/score.json"))
ref = [list(map(float, l.split()[1:])) for l in open(work + "/score.ref") if l.startswith("logprobs:")][0]
got = r["logprobs"][0]
worst = max(abs(a - b) for a, b in zip(got, ref))
print("# scored log-probabilities", got, "worst difference %.3g" % worst)
sys.exit(0 if r["tokens"][0] == [30, 31, 32, 33, 34, 90, 91] and len(got) == 6 and worst < 1e-4 else 1)
PY
ok $? "tokens_to_generate 0 scores the prompt like the no-cache forward (status $status)"

# --- seeded sampling ---
SAMPLE='{"prompts": ["10 11 12", "100 101"], "tokens_to_generate": 16, "temperature": 3.0, "random_seed": 1234}'
put $P1 "$SAMPLE" "$WORK/s1.json" >/dev/null; put $P1 "$GREEDY" "$WORK/between.json" >/dev/null
put $P1 "$SAMPLE" "$WORK/s2.json" >/dev/null
put $P1 "$(echo "$SAMPLE" | sed 's/1234/4321/')" "$WORK/s3.json" >/dev/null
cmp -s "$WORK/s1.json" "$WORK/s2.json" && grep -q '"tokens"' "$WORK/s1.json"; ok $? "the same random_seed gives the same sample, other requests in between"
! cmp -s "$WORK/s1.json" "$WORK/s3.json"; ok $? "another random_seed gives another sample"
put $P1 '{"prompts": ["10 11 12"], "tokens_to_generate": 16, "temperature": 3.0}' "$WORK/u1.json" >/dev/null
put $P1 '{"prompts": ["10 11 12"], "tokens_to_generate": 16, "temperature": 3.0}' "$WORK/u2.json" >/dev/null
! cmp -s "$WORK/u1.json" "$WORK/u2.json"; ok $? "without random_seed two requests draw differently"
python3 - "$P1" "$WORK" <<'PY'
import json, sys, urllib.request
port, work = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req))
bad = []
for k in (2, 5):
    r = put({"prompts": ["10 11 12"], "tokens_to_generate": 10, "top_k": k, "temperature": 2.0, "random_seed": 3})
    if len(r["tokens"][0]) != 13 or any(not 0 <= t < 256 for t in r["tokens"][0]): bad.append("top_k %d" % k)
r = put({"prompts": ["10 11 12"], "tokens_to_generate": 10, "top_p": 0.05, "random_seed": 3})
if r["tokens"][0][:13] != list(range(10, 23))[:len(r["tokens"][0])]: bad.append("top_p 0.05 is not greedy here: %s" % r["tokens"][0])
r = put({"prompts": ["10 11 12"], "tokens_to_generate": 10, "top_k": 1, "stop_token": 15})
if r["tokens"][0] != [10, 11, 12, 13, 14, 15]: bad.append("stop_token 15: %s" % r["tokens"][0])
r = put({"prompts": ["10 11 12", "40"], "tokens_to_generate": 10, "top_k": 1, "stop_tokens": [15, 43]})
if r["tokens"] != [[10, 11, 12, 13, 14, 15], [40, 41, 42, 43]]: bad.append("stop_tokens: %s" % r["tokens"])
r = put({"prompts": [""], "add_BOS": True, "tokens_to_generate": 2, "top_k": 1})
if r["tokens"][0][0] != 255 or len(r["tokens"][0]) != 3: bad.append("add_BOS: %s" % r["tokens"][0])
for line in bad: print("#", line)
sys.exit(1 if bad else 0)
PY
ok $? "top_k, top_p (a small nucleus is the argmax), stop_token, stop_tokens per sequence, add_BOS"

# --- malformed requests: 4xx with a JSON message, and the server goes on ---
python3 - "$P1" <<'PY'
import json, sys, urllib.request, urllib.error
port = sys.argv[1]
def send(body, method="PUT", path="/api"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=data, method=method)
    try:
        r = urllib.request.urlopen(req)
        return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
good = {"prompts": ["10 11"], "tokens_to_generate": 2}
cases = [
    (b"{not json", 400), (b"", 400), (b"[1, 2]", 400), (b'{"prompts": ["1"], "prompts": ["2"]}', 400),
    ({"tokens_to_generate": 2}, 400), ({"prompts": "10 11"}, 400), ({"prompts": [10, 11]}, 400),
    ({"prompts": []}, 400), ({"prompts": ["1"] * 129}, 400), ({"prompts": ["1"] * 9}, 400),
    (dict(good, tokens_to_generate=-1), 400), (dict(good, tokens_to_generate="5"), 400),
    (dict(good, tokens_to_generate=1.5), 400), (dict(good, tokens_to_generate=0), 400),
    (dict(good, tokens_to_generate=1000), 400), (dict(good, tokens_to_generate=63), 400),
    (dict(good, temperature=0), 400), (dict(good, temperature=101), 400), (dict(good, temperature="hot"), 400),
    (dict(good, top_k=-1), 400), (dict(good, top_k=1001), 400), (dict(good, top_k=2.5), 400),
    (dict(good, top_p=1), 400), (dict(good, top_p=1.5), 400), (dict(good, top_p=-0.5), 400),
    (dict(good, top_k=5, top_p=0.5), 400), (dict(good, top_p_decay=0.5), 400),
    (dict(good, top_p=0.5, top_p_bound=0.9), 400), (dict(good, logprobs="yes"), 400),
    (dict(good, add_BOS=1), 400), ({"prompts": [""]}, 400), (dict(good, random_seed=-3), 400),
    (dict(good, random_seed="x"), 400), (dict(good, stop_token=256), 400), (dict(good, stop_token="a"), 400),
    (dict(good, stop_tokens=[]), 400), (dict(good, stop_tokens=[1, "x"]), 400), (dict(good, stop_on_eol="no"), 400),
    (dict(good, max_len=5), 400), (dict(good, sentences=["a"]), 400), (dict(good, beam_width=2), 400),
    ({"prompts": ["10 eleven"]}, 400), ({"prompts": ["99999"]}, 400), ({"prompts": ["  "], "tokens_to_generate": 1}, 400),
    (dict(good, length_penalty="1"), 400),
    (json.dumps({"prompts": ["1 " * 3000]}).encode(), 413),
    (b"{}", 405, "GET"), (json.dumps(good).encode(), 405, "POST"), (json.dumps(good).encode(), 404, "PUT", "/generate"),
]
bad = 0
for case in cases:
    body, expected = case[0], case[1]
    method = case[2] if len(case) > 2 else "PUT"
    path = case[3] if len(case) > 3 else "/api"
    status, answer = send(body if method != "GET" else None, method, path)
    try:
        message = json.loads(answer)["message"]
    except Exception:
        message = None
    if status != expected or not message:
        bad += 1
        print("# %s %s %r: status %d (expected %d), answer %r" % (method, path, body[:80] if isinstance(body, bytes) else body, status, expected, answer[:200]))
    status, answer = send(good)
    if status != 200:
        bad += 1
        print("# the server stopped answering after %r: %d %r" % (body, status, answer))
print("# %d malformed requests, each followed by a good one" % len(cases))
sys.exit(1 if bad else 0)
PY
ok $? "every malformed request gets its 4xx and a JSON message, and the next good request is answered"
kill -0 ${PIDS##* } 2>/dev/null; ok $? "the server is still running"

# --- concurrent requests are answered without mixing ---
for i in 1 2 3 4 5 6; do
    put $P1 "{\"prompts\": [\"$((i * 20)) $((i * 20 + 1))\"], \"tokens_to_generate\": 20, \"top_k\": 1}" "$WORK/alone$i.json" >/dev/null
done
CURLS=""
for i in 1 2 3 4 5 6; do
    put $P1 "{\"prompts\": [\"$((i * 20)) $((i * 20 + 1))\"], \"tokens_to_generate\": 20, \"top_k\": 1}" "$WORK/together$i.json" >/dev/null &
    CURLS="$CURLS $!"
done
for p in $CURLS; do wait "$p"; done
same=0
for i in 1 2 3 4 5 6; do cmp -s "$WORK/alone$i.json" "$WORK/together$i.json" && grep -q "\"$((i * 20)) $((i * 20 + 1))" "$WORK/alone$i.json" && same=$((same + 1)); done
[ $same -eq 6 ]; ok $? "6 concurrent requests get the answers they get alone ($same of 6)"

# --- the command-line client ---
out=$("$CLI" "http://127.0.0.1:$P1/api" "10 11 12" 3 2>&1)
case "$out" in "10 11 12 "*) true ;; *) false ;; esac; ok $? "text_generation_cli sends a request and prints the text ($out)"
printf '20 21\n2\n' | "$CLI" "http://127.0.0.1:$P1/api" > "$WORK/cli.out" 2>&1
grep -q "Megatron Response: 20 21 " "$WORK/cli.out"; ok $? "text_generation_cli asks for a prompt and a length, as Megatron's does"
"$CLI" "http://127.0.0.1:$P1/api" "10 x" 3 > "$WORK/cli.err" 2>&1; s=$?
[ $s -ne 0 ] && grep -q "status 400" "$WORK/cli.err"; ok $? "text_generation_cli reports a refused request ($(cat "$WORK/cli.err"))"

# --- the TP2xPP2 checkpoint in a 1-rank server ---
start_server tp2pp2 "$WORK/tp2pp2"
status=$(put $PORT "$GREEDY" "$WORK/greedy_tp2pp2.json")
put $P1 "$GREEDY" "$WORK/greedy_tp1.json" >/dev/null
python3 - "$WORK" <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/greedy_tp2pp2.json"))
b = json.load(open(sys.argv[1] + "/greedy_tp1.json"))
worst = max(abs(x - y) for la, lb in zip(a["logprobs"], b["logprobs"]) for x, y in zip(la, lb))
print("# TP2xPP2 tokens %s; worst log-probability difference from the 1-rank run %.3g" % (a["tokens"], worst))
sys.exit(0 if a["tokens"] == b["tokens"] and worst < 1e-3 else 1)
PY
ok $? "the TP2xPP2 checkpoint served on 1 rank gives the 1-rank run's tokens (status $status)"
grep -q "iteration 104" "$WORK/tp2pp2.out"; ok $? "it is the checkpoint of iteration 104"

# --- WikiText perplexity with overlapping windows ---
# a text NullTokenizer reads (the detokenizer itself is tests/unit/detokenizer_test's); windows of 32
python3 - "$WORK" <<'PY'
import sys
lines = [" " + " ".join(str(i) for i in range(10, 90)) + " ", " " + " ".join(str(i) for i in range(150, 200)) + " ",
         " " + " ".join(str(i) for i in range(30, 70)) + " "]
open(sys.argv[1] + "/wiki.valid.tokens", "w").write(" \n".join(lines) + "\n")
PY
"$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/wiki.valid.tokens" --load "$WORK/tp1" --device cpu \
    --seq-length 32 --overlapping-eval 8 --micro-batch-size 3 --metrics-file "$WORK/wiki.jsonl" > "$WORK/wiki.out" 2>&1
ok $? "evaluate --task WIKITEXT103 runs ($(grep -o 'avg loss.*' "$WORK/wiki.out"))"
python3 - "$WORK" "$P1" <<'PY'
import json, math, re, sys, urllib.request
work, port = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req))
def wikitext_detokenizer(string):  # Megatron's tasks/zeroshot_gpt/detokenizer.py
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    for a, b in [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "), (" . ", ". "),
                 (" ! ", "! "), (" ? ", "? "), (" , ", ", ")]:
        string = string.replace(a, b)
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    for a, b in [("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" " + chr(176) + " ", chr(176)),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")]:
        string = string.replace(a, b)
    return string
raw = open(work + "/wiki.valid.tokens", encoding="utf-8").read()
num_original = len(raw.strip().split(" "))
text = wikitext_detokenizer(raw)
tokens = [int(word) for word in text.split()]  # NullTokenizer: ids written as text
seq_len, overlap = 32, 8                        # --seq-length, --overlapping-eval
total_targets = len(tokens) - 1
windows = max(math.ceil(max(total_targets - overlap, 0) / overlap) + 1, 1)
total_loss = 0.0
for idx in range(windows):                      # Megatron's _LMDataset
    start = idx * overlap
    window = tokens[start:start + seq_len + 1]
    logprobs = put({"prompts": [" ".join(map(str, window))], "tokens_to_generate": 0, "logprobs": True})["logprobs"][0]
    counted = range(len(window) - 1) if idx == 0 else range(max(0, seq_len - overlap), len(window) - 1)
    total_loss -= sum(logprobs[t] for t in counted)
val_loss = total_loss / (len(tokens) - 1)
ppl = math.exp(min(20, val_loss))
ratio = (len(tokens) - 1) / (num_original - 1)
adjusted = math.exp(min(20, val_loss * ratio))
m = json.loads(open(work + "/wiki.jsonl").readline())
print("# from the server's log-probabilities: %d windows, avg loss %.6f, ppl %.6f, adjusted ppl %.6f, token ratio %.6f"
      % (windows, val_loss, ppl, adjusted, ratio))
print("# evaluate: %d windows, avg loss %.6f, ppl %.6f, adjusted ppl %.6f, token ratio %.6f"
      % (m["num_windows"], m["avg_loss"], m["ppl"], m["adjusted_ppl"], m["token_ratio"]))
close = lambda a, b: abs(a - b) <= 1e-5 * max(1.0, abs(b))
sys.exit(0 if m["num_windows"] == windows and m["num_original_tokens"] == num_original and m["num_tokenized_tokens"] == len(tokens)
         and close(m["avg_loss"], val_loss) and close(m["ppl"], ppl) and close(m["adjusted_ppl"], adjusted)
         and close(m["token_ratio"], ratio) and windows > 3 else 1)
PY
ok $? "its avg loss, ppl, adjusted ppl and token ratio equal Megatron's formulas over the server's log-probabilities"

# --- LAMBADA, strict ---
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
rows = []
for start, last in [(20, 27), (40, 47), (100, 107), (60, 99), (5, 12), (130, 1)]:
    words = [str(i) for i in range(start, start + 7)] + [str(last)]
    rows.append({"text": " ".join(words)})
rows.append({"text": "70 71 72 73 74 75 76 \n 77  "})
with open(work + "/lambada_test.jsonl", "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
PY
"$EVALUATE" --task LAMBADA --strict-lambada --valid-data "$WORK/lambada_test.jsonl" --load "$WORK/tp1" --device cpu \
    --metrics-file "$WORK/lambada.jsonl" > "$WORK/lambada.out" 2>&1
ok $? "evaluate --task LAMBADA --strict-lambada runs ($(grep -o 'number correct.*' "$WORK/lambada.out"))"
python3 - "$WORK" "$P1" <<'PY'
import json, sys, urllib.request
work, port = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req))
correct = total = 0
for line in open(work + "/lambada_test.jsonl"):
    text = json.loads(line)["text"]
    last = text.split()[-1]
    context = text[:text.rfind(last)].strip()
    label = put({"prompts": [" " + last], "tokens_to_generate": 0, "logprobs": True})["tokens"][0]
    prompt = put({"prompts": [context], "tokens_to_generate": 0, "logprobs": True})["tokens"][0]
    # all argmax right, teacher-forced == greedy continuation equal to the label
    greedy = put({"prompts": [context], "tokens_to_generate": len(label), "top_k": 1, "stop_tokens": [0]})["tokens"][0]
    correct += greedy[len(prompt):] == label
    total += 1
m = json.loads(open(work + "/lambada.jsonl").readline())
print("# from the server's greedy tokens: %d of %d; evaluate: %d of %d" % (correct, total, m["number_correct"], m["total_examples"]))
sys.exit(0 if (m["number_correct"], m["total_examples"]) == (correct, total) and 0 < correct < total
         and abs(m["avg_accuracy"] - correct / total) < 1e-12 else 1)
PY
ok $? "its accuracy equals the last-word matches of the server's greedy continuations"
"$EVALUATE" --task LAMBADA --valid-data "$WORK/lambada_test.jsonl" --load "$WORK/tp1" --device cpu --metrics-file "$WORK/lambada.jsonl" > "$WORK/lambada2.out" 2>&1
[ "$(sed -n 2p "$WORK/lambada.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["number_correct"])')" = \
  "$(sed -n 1p "$WORK/lambada.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["number_correct"])')" ]
ok $? "without --strict-lambada (one-token words here) the same samples are right"
echo '{"txt": "1 2"}' > "$WORK/bad.jsonl"
"$EVALUATE" --task LAMBADA --valid-data "$WORK/bad.jsonl" --load "$WORK/tp1" --device cpu > "$WORK/bad.out" 2>&1
[ $? -ne 0 ] && grep -q "bad.jsonl:1" "$WORK/bad.out"; ok $? "a JSONL line without text is refused naming FILE:LINE"

# --- the GPT-2 tokenizer: text in and out, padded output rows (50257 ids of 50304) never count ---
GPT2="$top_srcdir/configs/tokenizers/gpt2"
run_app 1 $TRAIN --train-iters 3 --lr-warmup-iters 1 --global-batch-size 4 --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2/vocab.json" \
    --merge-file "$GPT2/merges.txt" --save "$WORK/gpt2"; ok $? "a tiny GPT with GPT-2's vocabulary trains and saves"
start_server gpt2 "$WORK/gpt2" --vocab-file "$GPT2/vocab.json" --merge-file "$GPT2/merges.txt" --inference-max-rows 64
python3 - "$PORT" "$WORK" <<'PY'
import json, sys, urllib.request
port, work = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req))
prompts = ["Hello, world: caf\u00e9 \u00fcber", "The quick brown fox"]
r = put({"prompts": prompts, "tokens_to_generate": 6, "top_k": 1, "logprobs": True, "prevent_newline_after_colon": True})
scored = put({"prompts": prompts, "tokens_to_generate": 0, "logprobs": True})
bad = []
for b, text in enumerate(prompts):
    if not r["text"][b].startswith(text): bad.append("text %r does not start with the prompt" % r["text"][b])
    if len(r["segments"][b]) != len(r["tokens"][b]): bad.append("not one segment per token")
    if r["tokens"][b][:len(scored["tokens"][b])] != scored["tokens"][b]: bad.append("the prompt tokens differ")
    if any(t >= 50257 for t in r["tokens"][b]): bad.append("a padded id was generated")
if "".join(r["segments"][1]) != r["text"][1]: bad.append("ASCII segments do not join into the text")
if "caf\u00e9 \u00fcber" not in r["text"][0]: bad.append("characters split over tokens are not whole in the text")
with open(work + "/gpt2.lines", "w") as f:
    for t in scored["tokens"]: f.write(" ".join(map(str, t)) + "\n")
json.dump(r, open(work + "/gpt2.json", "w"))
for line in bad: print("#", line)
print("# GPT-2 text:", json.dumps(r["text"]))
sys.exit(1 if bad else 0)
PY
ok $? "GPT-2 prompts come back as UTF-8 text (characters split over tokens whole) and one segment per token, no padded id generated"
total=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['tokens'][0]))" "$WORK/gpt2.json")
timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:$total "$WORK/gpt2.lines" --args-file "$TINY_ARGS" --vocab-size 50257 \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2/vocab.json" --merge-file "$GPT2/merges.txt" \
    --load "$WORK/gpt2" --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 < /dev/null > "$WORK/gpt2.ref" 2>&1
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
r = json.load(open(work + "/gpt2.json"))
lines = open(work + "/gpt2.ref").read().split("\n")
ref_tokens = [list(map(int, l.split()[1:])) for l in lines if l.startswith("tokens:")]
ref_logprobs = [list(map(float, l.split()[1:])) for l in lines if l.startswith("logprobs:")]
worst = max(abs(x - y) for a, b in zip(r["logprobs"], ref_logprobs) for x, y in zip(a, b))
print("# worst log-probability difference over the 50257 GPT-2 ids: %.3g" % worst)
sys.exit(0 if len(ref_tokens) == 2 and all(t == ref_tokens[b][:len(t)] for b, t in enumerate(r["tokens"])) and worst < 1e-4 else 1)
PY
ok $? "with the GPT-2 vocabulary too, greedy tokens and log-probabilities equal the no-cache forward's"

for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
grep -q "stopped by signal" "$WORK/tp1.out"; ok $? "SIGTERM stops the server cleanly ($(grep -o 'after.*' "$WORK/tp1.out"))"
PIDS=""
done_testing
