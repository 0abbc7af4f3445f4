#!/bin/sh
# tests/unit/fp16_map_test.sh: the fp16 builds of the GPU kernel tests (tests/gpu/cuda_fp16_map.h)
# test the fp16 kernels. Every cuda_X entry point that the bf16 test sources call and that has an
# fp16 twin cuda_X_fp16 in kernels/cuda/cuda_kernels.h must be mapped to it: the two storage types
# are both 16-bit integers, so an unmapped call compiles and runs the bf16 kernel on fp16 data
# (sum_blocks, 2026-11-27: 8 false failures seen only on a GPU). Runs without a GPU; a planted
# unmapped call must be caught.
. "${top_srcdir:-.}/tests/lib.sh"

unmapped() {  # MAP SOURCES...: prints each cuda_X called in SOURCES with a _fp16 twin and no mapping
    map=$1; shift
    grep -ho 'cuda_[a-z0-9_]*(' "$@" | sed 's/($//' | sort -u | while read -r f; do
        case $f in *_fp16) continue ;; esac
        grep -q "^void ${f}_fp16(\|^[a-z_ ]*\*\? *${f}_fp16(" "$top_srcdir/kernels/cuda/cuda_kernels.h" || continue
        grep -q "^#define $f ${f}_fp16\$" "$map" || echo "$f"
    done
}

SOURCES="$top_srcdir/tests/gpu/cuda_kernels_test.c $top_srcdir/tests/gpu/cuda_attention_test.c
         $top_srcdir/tests/gpu/cuda_decode_attention_test.c"
missing=$(unmapped "$top_srcdir/tests/gpu/cuda_fp16_map.h" $SOURCES)
[ -z "$missing" ]
ok $? "every bf16 kernel the GPU tests call is mapped to its fp16 twin in cuda_fp16_map.h${missing:+ \
(unmapped: $missing)}"

grep -v "^#define cuda_sum_blocks " "$top_srcdir/tests/gpu/cuda_fp16_map.h" > "$WORK/map.h"
planted=$(unmapped "$WORK/map.h" $SOURCES)
[ "$planted" = "cuda_sum_blocks" ]
ok $? "a map without cuda_sum_blocks is caught (found: ${planted:-nothing})"

done_testing
