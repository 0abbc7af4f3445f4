#!/bin/sh
# gpu_vs_peer.sh: training throughput of pretrain_gpt on one GPU next to the PyTorch peer
# (torch_gpt.py: torch.compile, flash attention, fused AdamW) on the same model shapes, in the
# same run. Both: bf16, random/mock tokens, dropout off, tied embeddings, vocabulary 50304,
# one micro-batch per step, the median step time over the steps after the first 10.
#
#   perf/gpu_vs_peer.sh [SHAPE...]     SHAPE = name:layers:hidden:heads:micro_batch:seq
#   (default: 124M:12:768:12:32:1024 1.3B:24:2048:16:8:2048, the issue's two shapes)
#
# Environment: PRETRAIN_GPT (default: pretrain_gpt on PATH, else app/pretrain_gpt), PEER (path
# of torch_gpt.py; default ../shared/peers/torch_gpt.py), STEPS (default 30), PYTHON (python3),
# OURS_FLAGS (extra pretrain_gpt flags), COMMIT (the commit to print where the tree has no .git).
# Logs go to $LOGDIR (default a temporary directory).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
pretrain=${PRETRAIN_GPT:-$(command -v pretrain_gpt || echo "$top/app/pretrain_gpt")}
peer=${PEER:-$top/../shared/peers/torch_gpt.py}
steps=${STEPS:-30}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/gpu-vs-peer.XXXXXX)}
shapes=${*:-124M:12:768:12:32:1024 1.3B:24:2048:16:8:2048}
mkdir -p "$logdir"

echo "# gpu_vs_peer, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
echo "# GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
echo "# ours: $pretrain; peer: $peer ($($python -c 'import torch; print("torch", torch.__version__)' 2>/dev/null))"
printf '| model | layers x hidden x heads | micro-batch x seq | ours ms/step | ours tokens/s | ours MFU | peer ms/step | peer tokens/s | peer MFU | ours / peer |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for shape in $shapes; do
    IFS=: read -r name l h a b s <<EOF
$shape
EOF
    ours_log="$logdir/ours-$name.jsonl"
    "$pretrain" --device cuda --num-layers "$l" --hidden-size "$h" --num-attention-heads "$a" \
        --seq-length "$s" --max-position-embeddings "$s" --vocab-size 50304 \
        --micro-batch-size "$b" --global-batch-size "$b" --train-iters "$steps" --lr 1e-4 \
        --mock-data --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-iters 0 \
        --metrics-file "$ours_log" ${OURS_FLAGS:-} > "$logdir/ours-$name.out" 2>&1 ||
        { echo "pretrain_gpt failed on $name:"; tail -5 "$logdir/ours-$name.out"; exit 1; }
    # median over iterations 11.. of elapsed_ms_per_iteration, and the MFU of that iteration's rate
    ours=$(grep '"split": "train"' "$ours_log" | sed -n '11,$p' |
        sed 's/.*"elapsed_ms_per_iteration": \([0-9.]*\).*"mfu": \([0-9.e-]*\).*/\1 \2/' | sort -n |
        awk '{ ms[NR] = $1; mfu[NR] = $2 } END { m = int((NR + 1) / 2); print ms[m], mfu[m] * 100 }')
    "$python" "$peer" "$l" "$h" "$a" "$b" "$s" 50304 "$steps" > "$logdir/peer-$name.out" 2>&1 ||
        { echo "peer failed on $name:"; tail -5 "$logdir/peer-$name.out"; exit 1; }
    peer_line=$(grep '^torch-peer' "$logdir/peer-$name.out")
    echo "$name $l $h $a $b $s $ours $peer_line" | awk '{
        split($0, f, " "); tokens = $5 * $6
        for (i = 9; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        sub("%", "", v["MFU"])
        printf "| %s | %dx%dx%d | %dx%d | %.1f | %.0f | %.1f%% | %.1f | %.0f | %.1f%% | %.2f |\n",
            $1, $2, $3, $4, $5, $6, $7, tokens / ($7 / 1000), $8, v["step_ms"], v["tok/s"], v["MFU"], v["step_ms"] / $7 }'
done
echo "# logs: $logdir"
