#!/bin/sh
# window_attention_test.sh: sliding-window attention (--window-size LEFT,RIGHT and
# --window-attn-skip-freq, Megatron's flags with Transformer Engine's causal semantics) in
# training and generation, on a tiny Llama (RoPE, grouped-query attention) with dropout on:
#  - a window that covers the sequence (64,0 at --seq-length 64) and (-1,0) give the run without
#    a window bit for bit (losses and parameters); --window-attn-skip-freq 1 (every layer full
#    attention) and the pattern [0]*4 too;
#  - a window of 8 changes the loss; (8,8) is TE's (8,0) with its warning, bit for bit;
#    --window-attn-skip-freq 2 equals the pattern [1,0,1,0] bit for bit (layers 2 and 4 full);
#  - with a window of 8 on layers 1 and 3: TP2, PP2, TP2 x PP2, and context parallelism CP2
#    (p2p, allgather and a2a: the ring's blocks cut by the window) give the one-rank losses within
#    1e-5 and parameters after 5 steps within 1e-5 (tests/mpi/parallel_compare.sh);
#  - a checkpoint trained with the window: the server's greedy generation with the KV cache and
#    its scoring equal the no-cache training forward's with the window
#    (tests/tools/gpt_forward_reference, within 1e-5), and differ from the forward without it;
#    evaluate's loss is the windowed forward's;
#  - bad values are refused with one message naming the flag (all forms:
#    tests/unit/window_attention_args_test).
. "${top_srcdir:-.}/tests/lib.sh"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
BASE="--args-file $LLAMA_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
      --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"

# train NAME FLAGS...: one rank; NAME.loss (losses as printed) and NAME.bin (parameters)
train() {
    name=$1; shift
    # shellcheck disable=SC2086
    run_app 1 $BASE "$@" --metrics-file "$WORK/$name.jsonl" --dump-parameters "$WORK/$name.bin"
    status=$?
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -3
    json_field "$WORK/$name.jsonl" train lm_loss > "$WORK/$name.loss"
    return $status
}
# same A B WHAT: bitwise the same losses (5 of them) and parameters
same() {
    [ "$(wc -l < "$WORK/$1.loss")" -eq 5 ] && cmp -s "$WORK/$1.loss" "$WORK/$2.loss" && cmp -s "$WORK/$1.bin" "$WORK/$2.bin"
    ok $? "$3 (losses and parameters bit for bit; first loss $(head -1 "$WORK/$2.loss"))"
}

train none; ok $? "the run without a window"
train wide --window-size 64,0; same none wide "--window-size 64,0 (the whole sequence of 64) equals no window"
train unbounded --window-size -1,0; same none unbounded "--window-size -1,0 (unbounded) equals no window"
train allfull --window-size 8,0 --window-attn-skip-freq 1
same none allfull "--window-attn-skip-freq 1 (every layer full attention) equals no window"
train nonepattern --window-size 8,0 --window-attn-skip-freq '[0]*4'
same none nonepattern "--window-attn-skip-freq [0]*4 equals no window"
train w8 --window-size 8,0; ok $? "the run with --window-size 8,0"
first_none=$(head -1 "$WORK/none.loss"); first_w8=$(head -1 "$WORK/w8.loss")
[ "$first_none" != "$first_w8" ] && ! cmp -s "$WORK/none.bin" "$WORK/w8.bin"
ok $? "a window of 8 changes the loss ($first_none without, $first_w8 with) and the trained parameters"
train w8right --window-size '(8, 8)'
same w8 w8right "--window-size (8, 8) is (8, 0), as Transformer Engine's causal attention makes it"
grep -q "WARNING: --window-size (8, 8): window_size should be (-1, 0) or (>=0, 0) for attn_mask_type=causal; using (8, 0)" "$WORK/out"
ok $? "... with Transformer Engine's warning"
train every2 --window-size 8,0 --window-attn-skip-freq 2
train pattern --window-size 8,0 --window-attn-skip-freq '([1]+[0])*2'
same every2 pattern "--window-attn-skip-freq 2 equals the pattern ([1]+[0])*2: layers 2 and 4 (1-based) attend fully"
! cmp -s "$WORK/every2.loss" "$WORK/w8.loss" && ! cmp -s "$WORK/every2.loss" "$WORK/none.loss"
ok $? "... which is neither the all-window nor the no-window run"

# parallel layouts with the window on layers 1 and 3
MODEL="$BASE --window-size 8,0 --window-attn-skip-freq 2"
. "$top_srcdir/tests/mpi/parallel_compare.sh"
reference window
layout "TP2 with the window" 2 --tensor-model-parallel-size 2
layout "PP2 with the window" 2 --pipeline-model-parallel-size 2
layout "TP2 PP2 with the window" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
layout "CP2 p2p with the window" 2 --context-parallel-size 2 --cp-comm-type p2p
layout "CP2 allgather with the window" 2 --context-parallel-size 2 --cp-comm-type allgather
layout "CP2 a2a with the window" 2 --context-parallel-size 2 --cp-comm-type a2a

# refused values
refused() {  # refused WHAT_IN_THE_MESSAGE FLAGS...
    what=$1; shift
    # shellcheck disable=SC2086
    run_app 1 $BASE --train-iters 1 "$@"
    status=$?
    [ $status -ne 0 ] && grep -q -- "$what" "$WORK/err"
    ok $? "refused: $* ($(grep -o 'error: .*' "$WORK/err" | head -1 | cut -c 1-150))"
}
# (every form is checked in tests/unit/window_attention_args_test; here that the program stops)
refused 'expected two integers LEFT,RIGHT' --window-size 8
refused 'window_size should be (-1, 0) or (>=0, 0)' --window-size -2,0
refused 'gives 3 layers, but --num-layers is 4' --window-size 8,0 --window-attn-skip-freq '[1,0,1]'

# generation: a checkpoint trained with the window, against the no-cache training forward
SERVER="$top_builddir/app/run_text_generation_server"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
WINDOW="--window-size 8,0 --window-attn-skip-freq 2"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086
run_app 1 --args-file "$LLAMA_ARGS" $WINDOW --eval-iters 0 --train-iters 24 --log-interval 12 --save "$WORK/ckpt"
ok $? "llama-tiny trains with the window and saves"
python3 -c "
print(' '.join(str(10 + i) for i in range(3)))
print(' '.join(str(20 + i % 200) for i in range(30)))
print(' '.join(str(100 + i % 150) for i in range(17)))
" > "$WORK/greedy.lines"
python3 -c "print(' '.join(str((7 * i) % 250) for i in range(64)))" > "$WORK/score.line"
GREEDY=$(python3 -c "
import json, sys
prompts = [l.strip() for l in open(sys.argv[1])]
print(json.dumps({'prompts': prompts, 'tokens_to_generate': 20, 'top_k': 1, 'logprobs': True, 'stop_token': -1}))" "$WORK/greedy.lines")
SCORE=$(python3 -c "import json,sys; print(json.dumps({'prompts': [open(sys.argv[1]).read().strip()], 'tokens_to_generate': 0, 'logprobs': True}))" "$WORK/score.line")
rm -f "$WORK/port"
"$MPIEXEC" -n 1 "$SERVER" --load "$WORK/ckpt" --port 0 --port-file "$WORK/port" --device cpu --max-batch-size 4 \
    --inference-max-rows 64 >"$WORK/server.out" 2>&1 &
MPIEXEC_PID=$!
PIDS="$MPIEXEC_PID"
i=0
while [ ! -s "$WORK/port" ] && [ $i -lt 300 ] && kill -0 $MPIEXEC_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$WORK/port" 2>/dev/null)
[ -n "$PORT" ]; ok $? "the server loads the checkpoint trained with the window"
put() {  # put NAME BODY: the server's answer in NAME.json
    python3 - "$PORT" "$2" "$WORK/$1.json" <<'PY'
import json, sys, urllib.request
port, body, out = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=body.encode(), method="PUT")
open(out, "w").write(urllib.request.urlopen(req, timeout=120).read().decode())
PY
}
put G "$GREEDY"
put S "$SCORE"
RANK0_PID=$(sed -n 's/.*; process \([0-9]*\) stops on.*/\1/p' "$WORK/server.out")
kill -TERM "$RANK0_PID" 2>/dev/null
i=0
while kill -0 $MPIEXEC_PID 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
wait $MPIEXEC_PID
# against FLAGS TAG: the no-cache forward (with FLAGS) into TAG.greedy.ref and TAG.score.ref
against() {
    ref="--args-file $LLAMA_ARGS $1 --load $WORK/ckpt --no-load-optim --no-load-rng --micro-batch-size 1 --global-batch-size 1 --mock-data"
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" greedy:50 "$WORK/greedy.lines" $ref --seq-length 64 > "$WORK/$2.greedy.ref" 2>&1 ||
        sed 's/^/# /' "$WORK/$2.greedy.ref" | head -5
    # shellcheck disable=SC2086
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $ref --seq-length 64 > "$WORK/$2.score.ref" 2>&1
    python3 - "$WORK" "$2" <<'PY'
import json, sys
work, tag = sys.argv[1], sys.argv[2]
greedy, score = json.load(open("%s/G.json" % work)), json.load(open("%s/S.json" % work))
lines = open("%s/%s.greedy.ref" % (work, tag)).read().split("\n")
ref_tokens = [list(map(int, l.split()[1:])) for l in lines if l.startswith("tokens:")]
ref_logprobs = [list(map(float, l.split()[1:])) for l in lines if l.startswith("logprobs:")]
bad, worst = [], 0.0
for b, tokens in enumerate(greedy["tokens"]):
    if tokens != ref_tokens[b][:len(tokens)]: bad.append("prompt %d: server %s, reference %s" % (b, tokens, ref_tokens[b]))
    worst = max([worst] + [abs(x - y) for x, y in zip(greedy["logprobs"][b], ref_logprobs[b])])
scored = [list(map(float, l.split()[1:])) for l in open("%s/%s.score.ref" % (work, tag)) if l.startswith("logprobs:")][0]
worst_score = max(abs(x - y) for x, y in zip(score["logprobs"][0], scored))
print("# %s: worst log-probability difference from the no-cache forward: generation %.3g, scoring %.3g (%d token mismatches)" % (tag, worst, worst_score, len(bad)))
sys.exit(1 if bad or worst > 1e-5 or worst_score > 1e-5 or len(ref_tokens) != 3 or len(scored) != len(score["logprobs"][0]) else 0)
PY
}
against "$WINDOW" window
ok $? "greedy tokens, log-probabilities and scoring with the KV cache equal the no-cache forward with the window"
against "" nowindow
[ $? -ne 0 ]; ok $? "... and not the forward without the window (the window matters past position 8)"
# evaluate: one window of the 63 scored targets; its loss is minus the mean of the reference's log-probabilities
cp "$WORK/score.line" "$WORK/wiki.test.tokens"
timeout 120 "$MPIEXEC" -n 1 "$top_builddir/app/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" \
    --load "$WORK/ckpt" --device cpu --seq-length 63 --overlapping-eval 63 --metrics-file "$WORK/eval.jsonl" > "$WORK/eval.out" 2>&1
python3 - "$WORK/eval.jsonl" "$WORK/window.score.ref" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
ref = [list(map(float, l.split()[1:])) for l in open(sys.argv[2]) if l.startswith("logprobs:")][0]
expected = -sum(ref) / len(ref)
print("# evaluate avg loss %.9g, from the training forward with the window %.9g" % (m["avg_loss"], expected))
sys.exit(0 if m["num_windows"] == 1 and len(ref) == 63 and abs(m["avg_loss"] - expected) < 1e-6 else 1)
PY
ok $? "evaluate takes the window from the checkpoint: its WIKITEXT103 loss is the training forward's with the window"

done_testing
