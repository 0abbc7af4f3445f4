#!/bin/sh
# gpu_generation_test.sh: generation on GPUs (--device cuda: bf16 weights and KV cache, the CUDA
# decode-attention, RoPE, RMSNorm and SwiGLU kernels) like the fp32 CPU reference. Skipped where no
# GPU is visible.
#  - a tiny GPT and the tiny Llama (configs/llama-tiny.args: RoPE at the cache position, RMSNorm,
#    SwiGLU, grouped-query attention, no biases, untied output), trained on the CPU on mock data
#    (documents that count upward): the server on one GPU gives the CPU server's greedy tokens
#    for prompts of different lengths, log-probabilities within 0.05; so does a Llama trained
#    with --apply-layernorm-1p and --use-rope-scaling (1 + w norm weights, Llama 3 frequencies);
#    and by the tiny Llama trained with --window-size 4,0 (the window from the checkpoint's args:
#    the flash prefill and the one-token decode read only the last 5 positions of the cache);
#  - on 2 GPUs (when present): the Llama server as TP2 and as PP2 (rank 0 serving, the other
#    following in lockstep over NCCL) gives the 1-GPU tokens and stops cleanly on SIGTERM;
#  - evaluate --task WIKITEXT103 on one GPU: the CPU's perplexity within 1%;
#  - a mixture of experts (configs/mixtral-tiny.args, 4 experts top-2; the forward-only router and
#    experts of app/model/moe_layer.h through the CUDA MoE kernels) likewise on one GPU, and on 2
#    GPUs with --expert-model-parallel-size 2 (the rows reach their experts over NCCL all-to-all).
# On the accelerator machine: GPU_BIN=folder of pretrain_gpt, run_text_generation_server and
# evaluate, with top_srcdir holding tests/ and configs/.
. "${top_srcdir:-.}/tests/lib.sh"
BIN=${GPU_BIN:-$top_builddir/app}
SERVER="$BIN/run_text_generation_server"
PRETRAIN_GPT="$BIN/pretrain_gpt"
EVALUATE="$BIN/evaluate"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

require_gpus 1

run_app 1 --args-file "$LLAMA_ARGS" --device cpu --eval-iters 0 --train-iters 60 --save "$WORK/llama"
ok $? "llama-tiny trains on the CPU and saves"
run_app 1 --args-file "$TINY_ARGS" --device cpu --eval-iters 0 --train-iters 60 --save "$WORK/gpt"
ok $? "gpt-tiny trains on the CPU and saves"
run_app 1 --args-file "$LLAMA_ARGS" --apply-layernorm-1p --use-rope-scaling --rotary-base 500000 --device cpu \
    --eval-iters 0 --train-iters 60 --save "$WORK/variants"
ok $? "llama-tiny with --apply-layernorm-1p and --use-rope-scaling trains on the CPU and saves"
run_app 1 --args-file "$LLAMA_ARGS" --window-size 4,0 --device cpu --eval-iters 0 --train-iters 60 --save "$WORK/window"
ok $? "llama-tiny with --window-size 4,0 trains on the CPU and saves"
run_app 1 --args-file "$top_srcdir/configs/mixtral-tiny.args" --device cpu --eval-iters 0 --train-iters 60 --save "$WORK/mixtral"
ok $? "mixtral-tiny trains on the CPU and saves"

# serve NAME RANKS DEVICE CHECKPOINT [FLAGS...]: sets PORT, MPIEXEC_PID, RANK0_PID
serve() {
    name=$1; ranks=$2; device=$3; ckpt=$4; shift 4
    rm -f "$WORK/$name.port"
    "$MPIEXEC" -n "$ranks" "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device "$device" \
        --max-batch-size 4 "$@" >"$WORK/$name.out" 2>&1 &
    MPIEXEC_PID=$!
    PIDS="$PIDS $MPIEXEC_PID"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 600 ] && kill -0 $MPIEXEC_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
    RANK0_PID=$(sed -n 's/.*; process \([0-9]*\) stops on.*/\1/p' "$WORK/$name.out")
    [ -n "$PORT" ] || sed 's/^/# /' "$WORK/$name.out" | tail -5
}
greedy() {  # greedy NAME: a greedy batch and a scoring request, answers in NAME.json
    python3 - "$PORT" "$WORK/$1.json" <<'PY'
import json, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
def put(body):
    req = urllib.request.Request("http://127.0.0.1:%s/api" % port, data=json.dumps(body).encode(), method="PUT")
    return json.load(urllib.request.urlopen(req, timeout=300))
json.dump([put({"prompts": ["10 11 12", "200 201 202 203 204", "7", "50 51 52 53"], "tokens_to_generate": 20,
                "top_k": 1, "logprobs": True}),
           put({"prompts": ["30 31 32 33 34 90 91 92 93"], "tokens_to_generate": 0, "logprobs": True})], open(out, "w"))
PY
}
same() {  # same NAME REFERENCE TOLERANCE: identical tokens, log-probabilities within TOLERANCE
    python3 - "$WORK/$1.json" "$WORK/$2.json" "$3" <<'PY'
import json, sys
a, b, tol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
worst = max(abs(u - v) for x, y in zip(a, b) for p, q in zip(x["logprobs"], y["logprobs"]) for u, v in zip(p, q))
bad = [(x["tokens"], y["tokens"]) for x, y in zip(a, b) if x["tokens"] != y["tokens"]]
print("# worst log-probability difference: %.3g" % worst)
for x, y in bad: print("# tokens %s, reference %s" % (x, y))
sys.exit(1 if bad or worst > tol else 0)
PY
}
stop() {  # stop NAME RANKS: SIGTERM to rank 0 ends every rank cleanly
    kill -TERM "$RANK0_PID" 2>/dev/null
    i=0
    while kill -0 $MPIEXEC_PID 2>/dev/null && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
    wait $MPIEXEC_PID
    status=$?
    [ $status -eq 0 ] && grep -q "stopped by signal 15" "$WORK/$1.out" &&
        [ "$(grep -c 'stopped after following' "$WORK/$1.out")" -eq $(($2 - 1)) ]
}

for model in gpt llama variants window mixtral; do
    serve ${model}_cpu 1 cpu "$WORK/$model"; greedy ${model}_cpu; stop ${model}_cpu 1
    serve ${model}_gpu 1 cuda "$WORK/$model"
    grep -q "cuda backend" "$WORK/${model}_gpu.out"; ok $? "$model: the server runs on the CUDA backend"
    greedy ${model}_gpu
    same ${model}_gpu ${model}_cpu 0.05; ok $? "$model: one GPU (bf16) gives the CPU's greedy tokens, log-probabilities within 0.05"
    stop ${model}_gpu 1; ok $? "$model: SIGTERM stops the GPU server"
done
if [ "$gpus" -ge 2 ]; then
    for layout in "tp2 --tensor-model-parallel-size 2" "pp2 --pipeline-model-parallel-size 2"; do
        # shellcheck disable=SC2086
        set -- $layout
        name=llama_$1; shift
        serve $name 2 cuda "$WORK/llama" "$@"
        greedy $name
        same $name llama_gpu 0.05; ok $? "Llama on 2 GPUs ($*): the 1-GPU tokens"
        stop $name 2; ok $? "Llama on 2 GPUs ($*): SIGTERM to rank 0 stops both ranks"
    done
    serve mixtral_ep2 2 cuda "$WORK/mixtral" --expert-model-parallel-size 2
    greedy mixtral_ep2
    same mixtral_ep2 mixtral_gpu 0.05; ok $? "mixtral-tiny on 2 GPUs (--expert-model-parallel-size 2): the 1-GPU tokens"
    stop mixtral_ep2 2; ok $? "mixtral-tiny on 2 GPUs: SIGTERM to rank 0 stops both ranks"
else
    diag "one GPU: the 2-GPU layouts are skipped"
fi
PIDS=""

python3 -c "print(' '.join(str(10 + i % 200) for i in range(300)))" > "$WORK/wiki.test.tokens"
for device in cpu cuda; do
    timeout 300 "$MPIEXEC" -n 1 "$EVALUATE" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/llama" \
        --device $device --seq-length 32 --overlapping-eval 16 --metrics-file "$WORK/eval_$device.jsonl" > "$WORK/eval_$device.out" 2>&1
done
python3 - "$WORK" <<'PY'
import json, sys
cpu, gpu = (json.load(open("%s/eval_%s.jsonl" % (sys.argv[1], d))) for d in ("cpu", "cuda"))
print("# Llama WikiText ppl: CPU %.6g, GPU %.6g" % (cpu["ppl"], gpu["ppl"]))
sys.exit(0 if abs(gpu["ppl"] - cpu["ppl"]) < 0.01 * cpu["ppl"] else 1)
PY
ok $? "evaluate WIKITEXT103 on the GPU: the CPU's perplexity within 1%"
done_testing
