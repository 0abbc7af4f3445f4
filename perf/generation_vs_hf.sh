#!/bin/sh
# generation_vs_hf.sh: issue 20's GPU figures on one GPU, in one run, against Hugging Face
# transformers on the same checkpoints (perf/generation_vs_hf.py does the comparing):
#
#  parity  a GPT-2 124M-shape model trained briefly (PARITY_ITERS, default 300) on the bundled
#          Shakespeare corpus (configs/data, GPT-2 tokenizer), exported with convert_checkpoint
#          --to-hf: our greedy continuations (every one of the tokens: "stop_token": -1, which no
#          token matches, so the end-of-document token does not end them) token for token against
#          GPT2LMHeadModel's greedy argmax (no stop either), in fp32 (our server --device cpu, the
#          fp32 reference backend) and in bf16 (our server --device cuda), with the per-token
#          log-probabilities of prompt and output;
#  speed   for each SHAPE, randomly initialized weights (pretrain_gpt --train-iters 1 --lr 0,
#          exported): time to first token and generation tokens/s at batch 1 and 32, every
#          sequence generating all NEW_TOKENS (stop_token -1), ours (--device cuda, over HTTP)
#          next to a plain PyTorch KV-cache greedy loop and transformers' generate(min_new_tokens
#          = max_new_tokens) on the same weights in bf16.
#
#   perf/generation_vs_hf.sh [parity] [speed] [SHAPE...]   SHAPE = name:layers:hidden:heads
#   (default: parity speed 124M:12:768:12 1.3B:24:2048:16)
#
# Environment: BIN (folder of pretrain_gpt, preprocess_data, convert_checkpoint,
# run_text_generation_server; default app/), PYTHON (python3), LOGDIR (default a temporary
# directory), DEVICE (cuda; cpu runs the whole flow on the CPU backend with tiny settings, a check
# of the script itself: the peers then need torch on the CPU), NEW_TOKENS (128), PARITY_ITERS.
# Needs torch and transformers. Prints markdown tables and PASS/FAIL lines; exit status 1 on FAIL.
# Under a 10-minute limit per command, run the parts one by one (same LOGDIR):
#   perf/generation_vs_hf.sh parity; perf/generation_vs_hf.sh speed 124M:12:768:12;
#   perf/generation_vs_hf.sh speed 1.3B:24:2048:16
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top/app}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/generation-vs-hf.XXXXXX)}
device=${DEVICE:-cuda}
new_tokens=${NEW_TOKENS:-128}
gpt2="$top/configs/tokenizers/gpt2"
gpt2_flags="--tokenizer-type GPT2BPETokenizer --vocab-file $gpt2/vocab.json --merge-file $gpt2/merges.txt"
modes=""; shapes=""
for arg in "$@"; do
    case "$arg" in parity|speed) modes="$modes $arg" ;; *) shapes="$shapes $arg" ;; esac
done
[ -n "$modes" ] || modes="parity speed"
[ -n "$shapes" ] || shapes="124M:12:768:12 1.3B:24:2048:16"
failed=0
mkdir -p "$logdir"
echo "# generation_vs_hf, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}, logs in $logdir"
[ "$device" = cuda ] && echo "# GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
echo "# peer: $($python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 | tail -1)"

# serve NAME DEVICE CHECKPOINT: our server on a free port in the background; sets PORT, SERVER
serve() {
    rm -f "$logdir/port-$1"
    "$bin/run_text_generation_server" --device "$2" --load "$3" --port 0 --port-file "$logdir/port-$1" \
        --vocab-file "$gpt2/vocab.json" --merge-file "$gpt2/merges.txt" --max-batch-size 32 \
        --inference-max-seq-length 1024 --max-tokens-to-oom 100000 > "$logdir/server-$1.out" 2>&1 &
    SERVER=$!
    i=0; while [ ! -s "$logdir/port-$1" ] && [ $i -lt 1200 ] && kill -0 $SERVER 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
    [ -s "$logdir/port-$1" ] || { echo "FAIL the server $1 did not start:"; tail -5 "$logdir/server-$1.out"; exit 1; }
    PORT=$(cat "$logdir/port-$1")
}

# train NAME ITERS LAYERS HIDDEN HEADS SEQ LR BATCH DATA_FLAGS...: pretrain_gpt (micro-batch BATCH,
# global 4 x BATCH), then --to-hf
train() {
    name=$1 iters=$2 layers=$3 hidden=$4 heads=$5 seq=$6 lr=$7 batch=$8; shift 8
    rm -rf "$logdir/ck-$name" "$logdir/hf-$name"
    # shellcheck disable=SC2086
    mpiexec -n 1 "$bin/pretrain_gpt" --device "$device" --num-layers "$layers" --hidden-size "$hidden" \
        --num-attention-heads "$heads" --seq-length "$seq" --max-position-embeddings 1024 $gpt2_flags \
        --vocab-size 50257 --micro-batch-size "$batch" --global-batch-size "$((4 * batch))" --train-iters "$iters" --lr "$lr" \
        --min-lr 0 --lr-decay-style cosine --lr-warmup-iters "$((iters / 10))" --weight-decay 0.1 --clip-grad 1.0 \
        --hidden-dropout 0 --attention-dropout 0 --eval-iters 0 --log-interval 50 --save "$logdir/ck-$name" "$@" \
        > "$logdir/train-$name.out" 2>&1 || { echo "FAIL training $name:"; tail -5 "$logdir/train-$name.out"; exit 1; }
    "$bin/convert_checkpoint" --to-hf --load "$logdir/ck-$name" --output "$logdir/hf-$name" > "$logdir/export-$name.out" 2>&1 ||
        { echo "FAIL exporting $name:"; tail -5 "$logdir/export-$name.out"; exit 1; }
}

for mode in $modes; do
    if [ "$mode" = parity ]; then
        data="$logdir/data/shakespeare_text_document"
        if [ ! -f "$data.h5" ]; then
            mkdir -p "$logdir/data"
            # one JSON document per paragraph of the play text, as autotools/quickstart.sh does
            "$python" -c '
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w") as out:
    for doc in re.split(r"\n\s*\n", text):
        if doc.strip():
            out.write(json.dumps({"text": doc.strip() + "\n"}) + "\n")
' "$top/configs/data/tinyshakespeare.txt" "$logdir/data/shakespeare.jsonl"
            # shellcheck disable=SC2086
            mpiexec -n 2 "$bin/preprocess_data" --input "$logdir/data/shakespeare.jsonl" --output-prefix "$logdir/data/shakespeare" \
                $gpt2_flags --append-eod --workers 2 > "$logdir/preprocess.out" 2>&1
        fi
        if [ "$device" = cuda ]; then set -- 300 12 768 12 256 8; else set -- 20 2 64 4 64 2; fi
        iters=${PARITY_ITERS:-$1}
        train parity "$iters" "$2" "$3" "$4" "$5" 6e-4 "$6" --data-path "$data" --split 949,50,1 \
            --data-cache-path "$logdir/data/cache"
        echo "## parity: shape $2 layers, hidden $3, $4 heads, trained $iters iterations on the Shakespeare corpus"
        echo "   ($(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train-parity.out" | tail -1)), exported to Hugging Face"
        serve parity-fp32 cpu "$logdir/ck-parity"; fp32_port=$PORT; fp32_server=$SERVER
        bf16_port=""
        if [ "$device" = cuda ]; then serve parity-bf16 cuda "$logdir/ck-parity"; bf16_port=$PORT; bf16_server=$SERVER; fi
        "$python" "$top/perf/generation_vs_hf.py" parity "$logdir/hf-parity" "$fp32_port" "${bf16_port:-none}" 32 || failed=1
        kill $fp32_server; wait $fp32_server 2>/dev/null || true
        if [ -n "$bf16_port" ]; then kill $bf16_server; wait $bf16_server 2>/dev/null || true; fi
    else
        for shape in $shapes; do
            IFS=: read -r name layers hidden heads <<EOF2
$shape
EOF2
            # random weights: one iteration at learning rate 0 saves the initialization
            train "$name" 1 "$layers" "$hidden" "$heads" 1024 0 1 --mock-data
            echo "## speed: $name ($layers layers, hidden $hidden, $heads heads), randomly initialized weights"
            serve "$name" "$device" "$logdir/ck-$name"
            "$python" "$top/perf/generation_vs_hf.py" speed "$logdir/hf-$name" "$PORT" "$new_tokens" || failed=1
            kill $SERVER; wait $SERVER 2>/dev/null || true
        done
    fi
done
exit $failed
