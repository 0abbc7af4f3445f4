#!/bin/sh
# tests/unit/wgmma_ptxas_test.sh: every Hopper kernel file that issues wgmma keeps each group's
# products back to back. When code between two wgmma.mma_async touches their registers or
# branches (a runtime branch between the products, a register fence while a group is in flight),
# ptxas injects warpgroup.arrive (info C7519) or serializes the products ("Potential Performance
# Loss"): results stay right and the tensor pipe runs far below its rate, and only ptxas -v says
# so (branch dgelu, 2026-11-27: a diagnostic branch slowed the whole kernel by a quarter). Compiles
# each such file for sm_90a; runs without a GPU; a planted kernel with a branch between its
# products must be caught.
. "${top_srcdir:-.}/tests/lib.sh"

if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
    echo "1..0 # SKIP no CUDA compiler configured"
    exit 0
fi

# ptxas_report FILE: compiles FILE for sm_90a into $WORK/ptxas.txt (ptxas -v); 1 if it does not compile
ptxas_report() {
    "$NVCC" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I"$top_srcdir" -I"${top_builddir:-.}" \
        $CUDA_CFLAGS -Xptxas -v -c "$1" -o "$WORK/ptxas.o" > "$WORK/ptxas.txt" 2>&1
}
LOSSES='warpgroup.arrive is injected|Potential Performance Loss|wgmma[^ ]* .*serializ'

files=$(grep -l 'wgmma.mma_async' "$top_srcdir"/kernels/cuda/*.cu)
[ -n "$files" ]
ok $? "kernel files that issue wgmma found ($(echo $files | wc -w))"
for f in $files; do
    name=${f#"$top_srcdir"/}
    if ptxas_report "$f"; then
        losses=$(grep -cE "$LOSSES" "$WORK/ptxas.txt")
        [ "$losses" -eq 0 ]
        ok $? "$name: no fence injected into, and no serialization of, its wgmma products ($losses ptxas lines)"
        [ "$losses" -eq 0 ] || grep -E "$LOSSES" "$WORK/ptxas.txt" | head -3 | sed 's/^/# /'
    else
        ok 1 "$name compiles for sm_90a"
        sed 's/^/# /' "$WORK/ptxas.txt" | head -5
    fi
done

# the planted kernel: one group of four products with a runtime branch between them
cat > "$WORK/planted.cu" <<'PLANTED'
#include <stdint.h>
static __device__ __forceinline__ void mma(float (&d)[64], uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "r"(1));
#endif
}
__global__ void planted(float *out, uint64_t a, uint64_t b, int steps) {
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    for (int s = 0; s < steps; s++) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            if (steps == 7) break; /* a branch between the products */
            mma(acc, a + s + kk, b + s);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(acc[i])::"memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < 64; i++) asm volatile("" : "+f"(acc[i])::"memory");
    float sum = 0.0f;
    for (int i = 0; i < 64; i++) sum += acc[i];
    out[threadIdx.x] = sum;
}
PLANTED
ptxas_report "$WORK/planted.cu"
ok $? "the planted kernel compiles for sm_90a"
planted=$(grep -cE "$LOSSES" "$WORK/ptxas.txt")
[ "$planted" -gt 0 ]
ok $? "a branch between the products is caught ($planted ptxas lines)"

done_testing
