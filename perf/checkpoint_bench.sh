#!/bin/sh
# checkpoint_bench.sh: save and load bandwidth of distributed checkpoints next to the disk's own
# sequential bandwidth, measured in the same run on the same file system.
#
#   perf/checkpoint_bench.sh [DIR] [RANKS...]      (defaults: a directory under /tmp, ranks 1 2 4)
#
# The model is a GPT of 6 layers, hidden 2048, 16 heads, GPT-2 vocabulary (405M parameters:
# 1.6 GB of fp32 weights; with the Adam moments the checkpoint holds 4.9 GB), trained with tensor
# parallelism over the ranks. Like a training job, which saves every --save-interval for days,
# the figures are steady-state ones: each run saves after each of REPEAT+1 iterations
# (--save-interval 1) and the first save is reported apart as the cold one; loads are repeated
# REPEAT times. Save time runs from the start of the save to the renamed, fsynced file and
# tracker; load time from the tracker read to the last tensor in memory. Page caches are dropped
# before each load and each disk measurement when the script may (root), so loads read the disk.
# The disk's figures come from dd, after one warm-up write, REPEAT times each: a 4 GiB
# sequential write of random data (from a file in /dev/shm, so a disk that compresses zeros gains
# nothing) ending in fdatasync, and reading it back. Medians are compared.
# Environment: MPIEXEC (default mpiexec), REPEAT (default 3), CKPT_BENCH_FLAGS (extra
# pretrain_gpt flags).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d /tmp/ckpt-bench.XXXXXX)}
[ $# -gt 0 ] && shift
ranks=${*:-1 2 4}
mpiexec=${MPIEXEC:-mpiexec}
repeat=${REPEAT:-3}
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1

drop_caches() { sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches || true; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
to_gbs() { case "$2" in GB/s) echo "$1";; MB/s) awk -v v="$1" 'BEGIN {print v / 1000}';; kB/s) awk -v v="$1" 'BEGIN {print v / 1e6}';; *) echo 0;; esac; }

model="--num-layers 6 --hidden-size 2048 --num-attention-heads 16 --seq-length 128
       --max-position-embeddings 1024 --vocab-size 50257 --micro-batch-size 1 --global-batch-size 1
       --lr 1e-4 --mock-data --log-interval 1 --eval-iters 0 ${CKPT_BENCH_FLAGS:-}"

echo "# checkpoint bandwidth, $(date -Is), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# machine: $(uname -n), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); directory $dir on $(df -P "$dir" | awk 'NR==2 {print $1}')"

source=/dev/shm/ckpt-bench-random.$$
head -c $((64 << 20)) /dev/urandom > "$source.block"
for i in $(seq 64); do cat "$source.block"; done > "$source"
rm -f "$source.block"
: > "$dir/dd.write"; : > "$dir/dd.read"
dd if="$source" of="$dir/dd.bin" bs=64M conv=fdatasync 2>/dev/null   # warm-up, like the first save
rm -f "$dir/dd.bin"
for i in $(seq "$repeat"); do
    drop_caches
    to_gbs $(dd if="$source" of="$dir/dd.bin" bs=64M conv=fdatasync 2>&1 | awk '/copied/ {print $(NF-1), $NF}') >> "$dir/dd.write"
    drop_caches
    to_gbs $(dd if="$dir/dd.bin" of=/dev/null bs=64M 2>&1 | awk '/copied/ {print $(NF-1), $NF}') >> "$dir/dd.read"
    rm -f "$dir/dd.bin"
done
rm -f "$source"
disk_write=$(median < "$dir/dd.write")
disk_read=$(median < "$dir/dd.read")
echo "# disk (dd, 4.3 GB of random data, $repeat times): sequential write GB/s $(tr '\n' ' ' < "$dir/dd.write")(median $disk_write), read GB/s $(tr '\n' ' ' < "$dir/dd.read")(median $disk_read)"

printf '| ranks | layout | checkpoint GB | cold save GB/s | save GB/s (median) | save / disk write | load GB/s (median) | load / disk write | load / disk read |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for n in $ranks; do
    rm -rf "$dir/ckpt"
    "$mpiexec" -n "$n" "$top/app/pretrain_gpt" $model --tensor-model-parallel-size "$n" \
        --train-iters $((repeat + 1)) --save-interval 1 --save "$dir/ckpt" \
        > "$dir/save.log" 2>&1 || { echo "save with $n ranks failed:"; tail -5 "$dir/save.log"; exit 1; }
    : > "$dir/load.rates"
    for i in $(seq "$repeat"); do
        drop_caches
        "$mpiexec" -n "$n" "$top/app/pretrain_gpt" $model --tensor-model-parallel-size "$n" \
            --train-iters $((repeat + 1)) --load "$dir/ckpt" > "$dir/load.log" 2>&1 ||
            { echo "load with $n ranks failed:"; tail -5 "$dir/load.log"; exit 1; }
        # "> loaded checkpoint F: iteration I, consumed samples C, X MB of tensors in S s (B GB/s)"
        sed -n 's/.*loaded checkpoint.*, \([0-9.]*\) MB of tensors in \([0-9.]*\) s.*/\1 \2/p' "$dir/load.log" |
            awk '{ print $1 / 1000 / $2 }' >> "$dir/load.rates"
    done
    # "> saved checkpoint at iteration I to F: X MB of tensors in S s (B GB/s)"
    sed -n 's/.*saved checkpoint.*: \([0-9.]*\) MB of tensors in \([0-9.]*\) s.*/\1 \2/p' "$dir/save.log" |
        awk '{ print $1 / 1000, $1 / 1000 / $2 }' > "$dir/save.rates"
    gb=$(awk 'NR == 1 { print $1 }' "$dir/save.rates")
    cold=$(awk 'NR == 1 { print $2 }' "$dir/save.rates")
    save=$(awk 'NR > 1 { print $2 }' "$dir/save.rates" | median)
    load=$(median < "$dir/load.rates")
    echo "# $n ranks: saves GB/s $(awk '{ printf "%.3f ", $2 }' "$dir/save.rates"); loads GB/s $(awk '{ printf "%.3f ", $1 }' "$dir/load.rates")"
    echo "$n $gb $cold $save $load $disk_write $disk_read" | awk '{
        printf "| %d | TP%d | %.2f | %.2f | %.2f | %.0f%% | %.2f | %.0f%% | %.0f%% |\n", $1, $1, $2, $3, $4, 100 * $4 / $6, $5, 100 * $5 / $6, 100 * $5 / $7 }'
done
rm -rf "$dir/ckpt" "$dir/dd.write" "$dir/dd.read" "$dir/save.rates" "$dir/load.rates"
