#!/bin/sh
# generation_vs_hf.sh: issue 20's GPU figures on one GPU: our generation server against
# Hugging Face transformers (parity: greedy tokens and log-probabilities) and a plain PyTorch
# KV-cache loop (speed: time to first token and tokens/s at batch 1 and 32), on the same GPT-2
# checkpoint, for each shape (perf/generation_vs_hf.py does the comparing).
#
#   perf/generation_vs_hf.sh [SHAPE...]   SHAPE = name:layers:hidden:heads
#   (default: 124M:12:768:12 1.3B:24:2048:16)
#
# The checkpoint: HF_GPT2_DIR (a Hugging Face GPT-2 directory, e.g. gpt2 downloaded beforehand)
# is imported with convert_checkpoint --from-hf for the 124M shape; otherwise, and for other
# shapes, pretrain_gpt trains the shape for TRAIN_ITERS (default 50) iterations on mock data with
# the GPT-2 tokenizer (so logits are not uniform) and convert_checkpoint --to-hf exports it.
# Environment: BIN (folder of pretrain_gpt, convert_checkpoint, run_text_generation_server;
# default app/), PYTHON (python3), LOGDIR (default a temporary directory). Needs torch and
# transformers.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top/app}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/generation-vs-hf.XXXXXX)}
shapes=${*:-124M:12:768:12 1.3B:24:2048:16}
gpt2="$top/configs/tokenizers/gpt2"
echo "# generation_vs_hf, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
echo "# GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
echo "# peer: $($python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
for shape in $shapes; do
    IFS=: read -r name layers hidden heads <<EOF2
$shape
EOF2
    ck="$logdir/ck-$name"; hf="$logdir/hf-$name"
    if [ "$name" = 124M ] && [ -n "${HF_GPT2_DIR:-}" ]; then
        "$bin/convert_checkpoint" --from-hf --input "$HF_GPT2_DIR" --save "$ck" > "$logdir/import-$name.out" 2>&1
        hf=$HF_GPT2_DIR
        echo "## $name: Hugging Face checkpoint $HF_GPT2_DIR"
    else
        mpiexec -n 1 "$bin/pretrain_gpt" --device cuda --num-layers "$layers" --hidden-size "$hidden" \
            --num-attention-heads "$heads" --seq-length 1024 --max-position-embeddings 1024 \
            --tokenizer-type GPT2BPETokenizer --vocab-file "$gpt2/vocab.json" --merge-file "$gpt2/merges.txt" \
            --mock-data --vocab-size 50257 --micro-batch-size 4 --global-batch-size 8 --train-iters "${TRAIN_ITERS:-50}" --lr 3e-4 \
            --lr-warmup-iters 5 --eval-iters 0 --log-interval 10 --save "$ck" > "$logdir/train-$name.out" 2>&1
        "$bin/convert_checkpoint" --to-hf --load "$ck" --output "$hf" > "$logdir/export-$name.out" 2>&1
        echo "## $name: trained here for ${TRAIN_ITERS:-50} iterations on mock data, exported to Hugging Face"
    fi
    rm -f "$logdir/port"
    "$bin/run_text_generation_server" --device cuda --load "$ck" --port 0 --port-file "$logdir/port" \
        --vocab-file "$gpt2/vocab.json" --merge-file "$gpt2/merges.txt" --max-batch-size 32 \
        --inference-max-seq-length 1024 --max-tokens-to-oom 100000 > "$logdir/server-$name.out" 2>&1 &
    server=$!
    i=0; while [ ! -s "$logdir/port" ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i + 1)); done
    [ -s "$logdir/port" ] || { echo "the server did not start:"; tail -5 "$logdir/server-$name.out"; kill $server; exit 1; }
    status=0
    "$python" "$top/perf/generation_vs_hf.py" "$(cat "$logdir/port")" "$hf" || status=$?
    kill $server; wait $server 2>/dev/null || true
    [ $status -eq 0 ] || echo "FAIL on $name (status $status)"
done
