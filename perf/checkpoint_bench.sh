#!/bin/sh
# checkpoint_bench.sh: save and load bandwidth of distributed checkpoints next to the disk's own
# sequential bandwidth, measured in the same run on the same file system.
#
#   perf/checkpoint_bench.sh [DIR] [RANKS...]      (defaults: a directory under /tmp, ranks 1 2 4)
#
# The model is a GPT of 6 layers, hidden 2048, 16 heads, GPT-2 vocabulary (405M parameters:
# 1.6 GB of fp32 weights; with the Adam moments the checkpoint holds 4.9 GB), trained for one
# iteration with tensor parallelism over the ranks, saved, then loaded. Save time runs from the
# start of the save to the renamed, fsynced file and tracker; load time from the tracker read to
# the last tensor in memory. Page caches are dropped before each load and each disk read when
# the script may (root), so loads read the disk. The disk's figures come from dd: a 4 GiB
# sequential write ending in fdatasync, and reading it back.
# Environment: MPIEXEC (default mpiexec), CKPT_BENCH_FLAGS (extra pretrain_gpt flags).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d /tmp/ckpt-bench.XXXXXX)}
[ $# -gt 0 ] && shift
ranks=${*:-1 2 4}
mpiexec=${MPIEXEC:-mpiexec}
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1

drop_caches() { sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches || true; }

model="--num-layers 6 --hidden-size 2048 --num-attention-heads 16 --seq-length 128
       --max-position-embeddings 1024 --vocab-size 50257 --micro-batch-size 1 --global-batch-size 1
       --train-iters 1 --lr 1e-4 --mock-data --log-interval 1 --eval-iters 0 ${CKPT_BENCH_FLAGS:-}"

echo "# checkpoint bandwidth, $(date -Is), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# machine: $(uname -n), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); directory $dir on $(df -P "$dir" | awk 'NR==2 {print $1}')"

drop_caches
write=$(dd if=/dev/zero of="$dir/dd.bin" bs=64M count=64 conv=fdatasync 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
drop_caches
read=$(dd if="$dir/dd.bin" of=/dev/null bs=64M 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
rm -f "$dir/dd.bin"
echo "# disk (dd, 4.3 GB): sequential write $write, read $read"
to_gbs() { case "$2" in GB/s) echo "$1";; MB/s) awk -v v="$1" 'BEGIN {print v / 1000}';; kB/s) awk -v v="$1" 'BEGIN {print v / 1e6}';; *) echo 0;; esac; }
disk_write=$(to_gbs $write)
disk_read=$(to_gbs $read)

printf '| ranks | layout | checkpoint GB | save s | save GB/s | save / disk write | load s | load GB/s | load / disk read |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for n in $ranks; do
    rm -rf "$dir/ckpt"
    "$mpiexec" -n "$n" "$top/app/pretrain_gpt" $model --tensor-model-parallel-size "$n" --save "$dir/ckpt" \
        > "$dir/save.log" 2>&1 || { echo "save with $n ranks failed:"; tail -5 "$dir/save.log"; exit 1; }
    drop_caches
    "$mpiexec" -n "$n" "$top/app/pretrain_gpt" $model --tensor-model-parallel-size "$n" --load "$dir/ckpt" \
        > "$dir/load.log" 2>&1 || { echo "load with $n ranks failed:"; tail -5 "$dir/load.log"; exit 1; }
    # "> saved checkpoint at iteration 1 to F: X MB of tensors in S s (B GB/s)"
    save=$(sed -n 's/.*saved checkpoint.*: \([0-9.]*\) MB of tensors in \([0-9.]*\) s.*/\1 \2/p' "$dir/save.log")
    load=$(sed -n 's/.*loaded checkpoint.*, \([0-9.]*\) MB of tensors in \([0-9.]*\) s.*/\1 \2/p' "$dir/load.log")
    echo "$n $save $load $disk_write $disk_read" | awk '{
        gb = $2 / 1000; sbw = gb / $3; lbw = ($4 / 1000) / $5
        printf "| %d | TP%d | %.2f | %.2f | %.2f | %.0f%% | %.2f | %.2f | %.0f%% |\n", $1, $1, gb, $3, sbw, 100 * sbw / $6, $5, lbw, 100 * lbw / $7 }'
done
rm -rf "$dir/ckpt"
