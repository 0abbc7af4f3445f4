#!/bin/sh
# build_probes.sh: build the PAPI/CUPTI diagnostics of perf/papi into OUT (default /work/papi-probes),
# for perf/papi/diagnose_gpu.sh on the GPU machine (carried there by ../shared/device/pack.sh):
#   papi_cuda_probe      perf/papi/papi_cuda_probe.cu against the patched PAPI (--papi, default
#                        /work/papi-cuda-new: perf/papi/build_papi_cuda.sh), rpath to its lib
#   papi_cuda_probe_72   the same against PAPI 7.2.0 as released (--papi72, default /work/papi-cuda),
#                        when that is installed: to show the failure the patch removes
#   papi-debug-lib/      the patched PAPI built --with-debug (--papi-debug, default
#                        /work/papi-cuda-new-debug), when installed: with PAPI_DEBUG=SUBSTRATE it
#                        prints the cuda component's CUPTI and perfworks calls and their errors
#   nvpw_passes          perf/papi/nvpw_passes.c (host-side perfworks: metric names and pass
#                        counts for a chip, no GPU needed)
# Usage: perf/papi/build_probes.sh [--out DIR] [--papi DIR] [--papi72 DIR] [--papi-debug DIR] [--cuda DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=/work/papi-probes
papi=/work/papi-cuda-new
papi72=/work/papi-cuda
papi_debug=/work/papi-cuda-new-debug
cuda=/usr/local/cuda
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift 2 ;;
    --papi) papi=$2; shift 2 ;;
    --papi72) papi72=$2; shift 2 ;;
    --papi-debug) papi_debug=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    *) echo "build_probes.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
die() { echo "build_probes.sh: error: $*" >&2; exit 1; }
[ -f "$papi/include/papi.h" ] || die "no PAPI in $papi (perf/papi/build_papi_cuda.sh --prefix $papi)"
[ -x "$cuda/bin/nvcc" ] || die "no nvcc in $cuda/bin (--cuda DIR)"
mkdir -p "$out"

probe() {  # probe NAME PAPI_PREFIX
    "$cuda/bin/nvcc" -O2 -arch=sm_90 -o "$out/$1" "$here/papi_cuda_probe.cu" -I"$2/include" \
        -L"$2/lib" -lpapi -lcublas -Xlinker -rpath -Xlinker "$2/lib"
    echo "build_probes.sh: $out/$1 (PAPI in $2)"
}
probe papi_cuda_probe "$papi"
if [ -f "$papi72/include/papi.h" ]; then probe papi_cuda_probe_72 "$papi72"; fi
if [ -f "$papi_debug/lib/libpapi.so" ]; then
    rm -rf "$out/papi-debug-lib" && mkdir -p "$out/papi-debug-lib"
    for lib in "$papi_debug"/lib/libpapi.so.*.*.*.* "$papi_debug"/lib/libpfm.so.*.*.*; do
        soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
        cp -L "$lib" "$out/papi-debug-lib/$soname"
    done
    echo "build_probes.sh: $out/papi-debug-lib (PAPI built --with-debug: $(ls "$out/papi-debug-lib" | tr '\n' ' '))"
fi
gcc -std=c11 -O2 -Wall -Wextra -o "$out/nvpw_passes" "$here/nvpw_passes.c" -I"$cuda/include" -L"$cuda/lib64" -lnvperf_host \
    -Wl,-rpath,"$cuda/lib64"
echo "build_probes.sh: $out/nvpw_passes"
