#!/bin/sh
# diagnose_gpu.sh: PAPI's cuda component on the GPU machine, in one call (about a minute): which
# libraries and permissions it finds, whether PAPI 7.2.0 as released and the patched build
# (perf/papi/build_papi_cuda.sh) start and read GPU events, whether per-phase reads give each
# phase its own counts, and pretrain_gpt with --papi-events default. Everything goes to
# $OUT/papi-diag.txt (and stdout); the metrics files next to it.
# Run there after ../shared/device/pack.sh carried (perf/README.md, "Diagnosing on the GPU machine"):
#   bins:   app/pretrain_gpt (built --with-papi=/work/papi-cuda-new), /work/papi-probes/papi_cuda_probe,
#           /work/papi-probes/papi_cuda_probe_72, /work/papi-cuda-new/bin/papi_component_avail,
#           /work/papi-cuda-new/bin/papi_native_avail, /work/papi-cuda-new/bin/papi_command_line
#   extras: /work/papi-probes/papi-debug-lib (PAPI --with-debug, used when the patched probe fails)
#   source .devpack/unpack.sh && sh perf/papi/diagnose_gpu.sh
# (or, from a tree without it, with perf/papi/diagnose_gpu.sh and perf/papi/gpu_figures.py as extras:
#   source .devpack/unpack.sh && sh /tmp/devpack/extra/diagnose_gpu.sh)
# Each step has a time limit and the script goes on after a failure; its exit status is 0.
set -u
OUT=${OUT:-/tmp/papi-diag}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)   # gpu_figures.py is next to this script (in the tree, or both as extras)
extra=${DEVPACK_EXTRA:-/tmp/devpack/extra}

# the old default GPU set (its 5 existing events fit one pass alone each, not together on GH100)
# and the new one (papi_phases.h: one pass on GH100)
OLD_SET=cuda:::dram__bytes_read:stat=sum:device=0,cuda:::dram__bytes_write:stat=sum:device=0,cuda:::sm__cycles_active:stat=sum:device=0,cuda:::sm__pipe_tensor_op_hmma_cycles_active:stat=sum:device=0,cuda:::sm__ops_path_tensor_src_bf16_dst_fp32:stat=sum:device=0
NEW_SET=cuda:::dram__bytes_read:stat=sum:device=0,cuda:::dram__bytes_write:stat=sum:device=0,cuda:::sm__cycles_active:stat=sum:device=0,cuda:::sm__pipe_tensor_cycles_active:stat=sum:device=0,cuda:::sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32:stat=sum:device=0

section() { printf '\n===== %s =====\n' "$*"; }
run() {  # run SECONDS COMMAND...: the command's output and its exit status, cut off after SECONDS
    limit=$1; shift
    echo "\$ $*"
    timeout "$limit" "$@" 2>&1
    echo "[exit status $?]"
}

diagnose() {
    section "machine"
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    echo "user: $(id -un) ($(id -u))"
    grep -i "RmProfilingAdminOnly\|Profil" /proc/driver/nvidia/params 2>&1 | head -3
    echo "CUPTI and perfworks libraries on this machine:"
    for d in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
        ls -l "$d"/libcupti.so* "$d"/libnvperf_host.so* "$d"/libnvidia-ml.so* 2>/dev/null
    done
    python3 -c 'import glob, site; [print(p) for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/*/lib/lib*cupti*") + glob.glob(s + "/nvidia/*/lib/libnvperf_host*")]' 2>/dev/null
    if [ -z "${PAPI_CUDA_ROOT:-}" ]; then
        for d in /usr/local/cuda /usr/local/cuda-13.0; do
            if [ -e "$d/lib64/libcupti.so" ] || [ -e "$d/extras/CUPTI/lib64/libcupti.so" ]; then
                PAPI_CUDA_ROOT=$d
                break
            fi
        done
    fi
    export PAPI_CUDA_ROOT=${PAPI_CUDA_ROOT:-/usr/local/cuda}
    echo "PAPI_CUDA_ROOT=$PAPI_CUDA_ROOT"
    echo "packed: $(ls /tmp/devpack/bin 2>/dev/null | tr '\n' ' ')"

    section "papi_component_avail (patched PAPI)"
    run 60 papi_component_avail

    section "papi_native_avail -e: the events of the old and new default sets (patched PAPI)"
    for metric in dram__bytes_read sm__pipe_tensor_cycles_active sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32 \
                  sm__ops_path_tensor_src_bf16_dst_fp32 sm__pipe_tensor_op_gmma_cycles_active; do
        run 30 papi_native_avail -e "cuda:::$metric:stat=sum:device=0" | sed -n '/^Event name\|^Sorry/,$p' | grep -v '^ *$' | head -8
    done

    section "PAPI 7.2.0 as released (/work/papi-cuda): the old default set (expect: start fails, Unknown error code)"
    if command -v papi_cuda_probe_72 >/dev/null; then
        run 60 papi_cuda_probe_72 "$OLD_SET"
        section "PAPI 7.2.0 as released: the new default set (expect: starts; reads after the first repeat a stale range)"
        run 60 papi_cuda_probe_72 "$NEW_SET"
    else
        echo "papi_cuda_probe_72 was not packed"
    fi

    section "patched PAPI: the old default set (expect: the last event refused with 'multiple passes', the rest count)"
    run 60 papi_cuda_probe "$OLD_SET"
    section "patched PAPI: the new default set (expect: all five count; copy ~ copy again; GEMM tensor ops ~ FLOPs)"
    run 60 papi_cuda_probe "$NEW_SET" > "$OUT/probe-new.txt"
    cat "$OUT/probe-new.txt"
    if ! grep -q "^\[exit status 0\]" "$OUT/probe-new.txt" && [ -d "$extra/papi-debug-lib" ]; then
        section "the patched PAPI failed: again with PAPI's debug build, PAPI_DEBUG=SUBSTRATE (errors and CUPTI calls)"
        LD_LIBRARY_PATH=$extra/papi-debug-lib:${LD_LIBRARY_PATH:-} PAPI_DEBUG=SUBSTRATE timeout 90 papi_cuda_probe "$NEW_SET" 2>&1 |
            grep -E "ERROR|Error|CUPTICALL|PERFWORKSCALL|CUDACALL|PAPI_start|add |cuda component" | tail -150
    fi

    section "papi_command_line (patched PAPI; CPU work only, so the GPU counts are ~0: start/read/stop path)"
    run 60 papi_command_line cuda:::dram__bytes_read:stat=sum:device=0 cuda:::sm__cycles_active:stat=sum:device=0

    section "pretrain_gpt, a small GPT, --papi-events default (counted per phase), then without (the step time)"
    model="--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024
           --vocab-size 32768 --micro-batch-size 4 --global-batch-size 4 --train-iters 30 --log-interval 5
           --eval-iters 0 --lr 1e-4 --lr-warmup-iters 2 --mock-data --device cuda --bf16"
    # shellcheck disable=SC2086 # $model is a list of flags
    run 120 mpiexec -n 1 pretrain_gpt $model --papi-events default --metrics-file "$OUT/papi-small.jsonl" > "$OUT/papi-small.out"
    grep -E "PAPI|error|warning" "$OUT/papi-small.out" | head -12
    tail -30 "$OUT/papi-small.out"
    # shellcheck disable=SC2086
    run 120 mpiexec -n 1 pretrain_gpt $model --metrics-file "$OUT/nopapi-small.jsonl" > "$OUT/nopapi-small.out"
    grep -E " iteration +(25|30)/|error|exit status" "$OUT/nopapi-small.out" | tail -4
    echo "with counting:"
    grep -E " iteration +(25|30)/" "$OUT/papi-small.out" | tail -2
    run 30 python3 "$here/gpu_figures.py" "$OUT/papi-small.jsonl" --gpu H200

    section "pretrain_gpt, a tiny GPT (gpt-tiny's shape), --papi-events default"
    run 60 mpiexec -n 1 pretrain_gpt --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 \
        --max-position-embeddings 64 --vocab-size 256 --micro-batch-size 4 --global-batch-size 16 --mock-data \
        --device cuda --bf16 --train-iters 6 --lr 3e-3 --lr-warmup-iters 2 --log-interval 2 --eval-iters 0 \
        --papi-events default --metrics-file "$OUT/papi-tiny.jsonl" > "$OUT/papi-tiny.out"
    grep -E "PAPI|error" "$OUT/papi-tiny.out" | head -8
    tail -12 "$OUT/papi-tiny.out"
    date -u
}

diagnose 2>&1 | tee "$OUT/papi-diag.txt"
exit 0
