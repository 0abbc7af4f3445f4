#!/bin/sh
# fp8_format_gpu_test.sh: kernels/fp8_format.h (the CPU backend's fp8 emulation, issue 43)
# bit-exact with the GPU's saturating fp8 conversion: builds tests/gpu/fp8_format_gpu_check.cu
# with the configured CUDA compiler for sm_90 and runs it (every fp32 bit pattern, both
# formats). Without a GPU (or on one older than sm_89) only its host part runs: the header against
# cuda_fp8.hpp's host reference conversion on every 13th pattern. Skipped without a CUDA compiler.
. "${top_srcdir:-.}/tests/lib.sh"

if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
    echo "1..0 # SKIP no CUDA compiler configured"
    exit 0
fi
if ! "$NVCC" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$top_srcdir" $CUDA_CFLAGS \
        "$top_srcdir/tests/gpu/fp8_format_gpu_check.cu" -o "$WORK/fp8_format_gpu_check" > "$WORK/nvcc.txt" 2>&1; then
    echo "Bail out! tests/gpu/fp8_format_gpu_check.cu does not compile: $(head -3 "$WORK/nvcc.txt")"
    exit 1
fi
"$WORK/fp8_format_gpu_check"
