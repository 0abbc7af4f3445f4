#!/bin/sh
# strong_scaling.sh: data-parallel strong scaling of one model on 1..N GPUs of a node: the same
# global batch, split over more GPUs (data parallelism with the distributed optimizer and both
# overlaps), one GPU per rank. Prints tokens/s, TFLOP/s per GPU, MFU and the scaling efficiency
# (tokens/s on n GPUs over n times the 1-GPU figure), the median iteration after the first
# WARMUP ones.
#
#   perf/strong_scaling.sh [GPUS...]          (default: 1 2 4 8, those the node has)
#
# Environment: MODEL (pretrain_gpt flags of the model; default GPT 1.3B: 24 layers, hidden 2048,
# 16 heads, sequence 2048, micro-batch 8, global batch 64), ITERS (default 12), WARMUP (default 4),
# PRETRAIN_GPT (default: pretrain_gpt on PATH, else app/pretrain_gpt), MPIEXEC (default mpiexec),
# EXTRA (more flags), LOGDIR (default a temporary directory), COMMIT (printed where there is no .git).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
pretrain=${PRETRAIN_GPT:-$(command -v pretrain_gpt || echo "$top/app/pretrain_gpt")}
mpiexec=${MPIEXEC:-mpiexec}
iters=${ITERS:-12}
warmup=${WARMUP:-4}
logdir=${LOGDIR:-$(mktemp -d /tmp/strong-scaling.XXXXXX)}
model=${MODEL:-"--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
    --max-position-embeddings 2048 --vocab-size 50304 --micro-batch-size 8 --global-batch-size 64"}
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpus=${*:-1 2 4 8}
mkdir -p "$logdir"

echo "# strong scaling, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
echo "# node: $have x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "# model: $(echo $model) ${EXTRA:-}"
printf '| GPUs | layout | ms/iteration | tokens/s | TFLOP/s/GPU | MFU | scaling efficiency |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
base=""
for n in $gpus; do
    [ "$n" -le "$have" ] || { echo "# $n GPUs: skipped, the node has $have"; continue; }
    log="$logdir/dp$n"
    "$mpiexec" -n "$n" "$pretrain" --device cuda $model --train-iters "$iters" --lr 1e-4 --mock-data \
        --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-iters 0 \
        --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
        --metrics-file "$log.jsonl" ${EXTRA:-} > "$log.out" 2>&1 ||
        { echo "$n GPUs failed:"; tail -5 "$log.out"; exit 1; }
    # the median iteration after the warm-up: ms, tokens/s, TFLOP/s per GPU, MFU
    row=$(grep '"split": "train"' "$log.jsonl" | sed -n "$((warmup + 1)),\$p" |
        sed 's/.*"elapsed_ms_per_iteration": \([0-9.]*\), "tokens_per_second": \([0-9.]*\), "tflops_per_gpu": \([0-9.]*\), "mfu": \([0-9.e-]*\).*/\1 \2 \3 \4/' |
        sort -n | awk '{ r[NR] = $0 } END { print r[int((NR + 1) / 2)] }')
    [ -n "$base" ] || base=$(echo "$row" | awk '{ print $2 }')
    echo "$n $row $base" | awk '{ printf "| %d | DP%d | %.1f | %.0f | %.1f | %.1f%% | %.1f%% |\n",
        $1, $1, $2, $3, $4, 100 * $5, 100 * $3 / ($1 * $6) }'
done
echo "# logs: $logdir"
