#!/bin/sh
# profile_kernels.sh: where a GPU training step's time goes, kernel by kernel. Runs one
# pretrain_gpt under Nsight Compute with --profile (cudaProfilerStart/Stop around iterations
# [--profile-step-start, --profile-step-end)), reading only each kernel's duration (one pass, no
# replay, clocks left alone), then prints perf/kernel_table.py's table: kernels grouped by name
# and by phase, calls, total ms per step, share of the step. ncu runs kernels one at a time, so
# the sum is the GPU busy time without overlap; compare it with the step time of an unprofiled
# run to see the host gaps, minding the clock: kernels run alone here near the boost clock, a
# training step at the power cap (perf/results/training/power-cap-h100-2026-11-26.md: ~1620 vs 1980 MHz).
#   perf/profile_kernels.sh OUT.csv STEPS -- [pretrain_gpt flags...]
# STEPS: how many iterations are captured (from iteration 10, after warm-up). Needs ncu on PATH.
set -eu
[ $# -ge 3 ] && [ "$3" = "--" ] || { echo "usage: $0 OUT.csv STEPS -- pretrain_gpt flags..." >&2; exit 2; }
out=$1 steps=$2
shift 3
command -v ncu >/dev/null || { echo "profile_kernels.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 2; }
: "${PRETRAIN_GPT:=pretrain_gpt}" "${MPIEXEC:=mpiexec}"
start=10
end=$((start + steps))
$MPIEXEC -n 1 ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \
    --csv --print-units base --log-file "$out" \
    "$PRETRAIN_GPT" "$@" --train-iters $((end + 1)) --eval-iters 0 \
    --profile --profile-step-start $start --profile-step-end $end >"$out.log" 2>&1 ||
    { tail -20 "$out.log" >&2; exit 1; }
python3 "$(dirname "$0")/kernel_table.py" "$out" --steps "$steps"
