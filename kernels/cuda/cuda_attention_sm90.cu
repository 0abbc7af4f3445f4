/* cuda_attention_sm90.cu: the causal flash attention forward and backward on Hopper's warpgroup
 * tensor cores (wgmma, sm_90a), used by cuda_attention.cu where they apply (head dimension 64 or
 * 128, 16-byte aligned rows, an sm_90 GPU running this file's sm_90a code); the same contract as
 * its mma.sync kernels: qkv[B,T,(H+2G)*D] bf16 in kernels.h's grouped layout, out[B,T,H,D] bf16,
 * lse = m + log(l) (fp32 [B,H,T], natural log of the scaled scores).
 *
 * Attention dropout (issue 44) runs inside the warp-specialized forward and one-pass backward
 * (template DROPOUT; p = 0 instantiates them without any dropout code: their SASS is byte for
 * byte that of the kernels before), with the mma.sync kernels' semantics and keep decisions
 * ("attention dropout" below): the forward's l sums the undropped P, the dropped P feeds P V,
 * 1/(1-p) scales out at the end; the backward draws each element's decision again (no bit
 * buffer), dV += (P keep)^T dO (times 1/(1-p) when stored), dS = P (dP keep/(1-p) - Di) with
 * cuda_attention.cu's Di = dO.O (O already dropped and scaled), so dK and dQ see the mask
 * through dS. MTC_ATTENTION_SM90_DROPOUT=0 sends dropout back to the mma.sync kernels; the
 * two-pass backward (MTC_ATTENTION_FUSED_BACKWARD=0) has no dropout, cuda_attention.cu then
 * runs the mma.sync backward. The backward at head dimension 64 and 128 is one pass (dK, dV and dQ from one
 * computation of P and dS per tile pair, five products), with dQ's partials summed in a fixed
 * order: see "the backward" below for the arithmetic and "the warp-specialized backward" for the
 * kernel that runs it (a TMA producer, mbarrier rings, a dQ-writing warp, a persistent grid; at
 * GPT-2 124M's shape on an H100 0.535 ms against 0.635 for the two passes). The two passes
 * (dK/dV, then dQ, recomputing P and dS: "the two-pass backward") run under
 * MTC_ATTENTION_FUSED_BACKWARD=0.
 *
 * Sliding-window attention (window_left >= 0, --window-size): the forward's key walk of a
 * query block starts at the tile of key q0 - window (producer and consumers count the same
 * tiles), and sm90_online_softmax masks where the window's edge crosses a warp's rows; the
 * one-pass backward's key tile walks the query steps up to its last key + window
 * (sm90_qt_count), masks P^T where the edge crosses a warp's step (sm90_window_mask), and a
 * query step's dQ partials come from its diagonal key tile down to sm90_kt_low, the last one
 * writing dQ (key tile 0 without a window). The two-pass backward has no window (cuda_attention.cu
 * runs the mma.sync backward then); MTC_ATTENTION_SM90_WINDOW=0 keeps every windowed call there.
 *
 * The forward (FlashAttention-3's structure: "the warp-specialized forward" below) works on
 * tiles of 128 query rows with two consumer warpgroups of 4 warps (64 rows each) and a producer
 * warpgroup that loads Q, K and V with the tensor memory accelerator into a ring of buffers
 * guarded by mbarriers; the grid is persistent. It walks key tiles of 128 up to the diagonal.
 * Per tile a consumer warpgroup computes its 64 x 128 scores S = Q K^T with D/16
 * wgmma.m64n128k16 (both operands from shared memory), runs the online softmax on them in
 * registers, turns P into bf16 A fragments without leaving registers (an accumulator's n8
 * blocks 2k and 2k+1 are exactly the A fragment of k-slice k, as for mma.sync), and adds
 * P V with 8 wgmma.m64nDk16 (A from registers, V from shared memory, transposed), the P V of
 * one tile running under the softmax of the next.
 *
 * Shared memory tiles (the forward's written by the tensor memory accelerator, the backward's
 * with cp.async) use the 128-byte swizzle wgmma reads: a [rows][D] tile is stored as D/64 column
 * blocks of 64 bf16 (128 bytes per row); in a block row r starts at r * 128 and its 16-byte
 * chunk c sits at chunk position c ^ (r % 8); blocks are 1024-byte aligned. As wgmma operands:
 *  - Q and K are "K-major" (the reduction dimension d is contiguous): descriptor stride (SBO)
 *    1024 bytes between 8-row groups; k-slice kk starts 32 bytes further inside its block.
 *  - V in P V is "MN-major" (its n dimension d is contiguous): SBO 1024 bytes between groups
 *    of 8 keys, LBO (rows x 128 bytes) between 64-wide column blocks; k-slice kk (16 keys)
 *    starts kk * 2048 bytes in.
 * A matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address >> 4,
 * 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 swizzle mode (1 = 128 bytes).
 *
 * The backward's dQ = dS K reads both operands MN-major from shared memory: dS^T stored as
 * [128 keys][64 queries] (one 64-wide block, k-slices of 16 keys 2048 bytes apart) and K as V
 * above (A transposed, B transposed: the instruction's trans-a and trans-b set).
 *
 * cuda_attention_sm90_selftest runs the two products alone on one block, so that a wrong
 * layout shows up as "scores wrong" or "P V wrong" in tests/gpu/cuda_attention_test.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* CUtensorMap (types only: the encoder comes through the runtime) */

#include "kernels/cuda/cuda_attention_dropout.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

typedef __nv_bfloat16 nvbf16;

#define SM90_BM 128      /* query rows per block */
#define SM90_BN 128      /* keys per tile */
#define SM90_THREADS 256 /* two warpgroups */

/* the wgmma code exists only in the sm_90a image; elsewhere the kernels are empty and the
 * probe reports 0, so the host never launches them */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90_WGMMA 1
#endif

#define SM90_LOG2E 1.4426950408889634f
#define SM90_LN2 0.6931471805599453f

/* ---------------------------------------------------------------------------------------------- */
/* Attention dropout (DROPOUT; cuda_attention.cu's semantics and numbering, so that the keep
 * decisions are the CPU's and the mma.sync kernels'): element (i, j) of head head_index = b *
 * total_heads + head_start + h is kept iff philox_keep_attention(seed, stream, head_base, T, i, j,
 * p) (head_base = rng.offset + head_index T T): 16 bits of the Philox4x32-7 call of its 2 x 4 block of
 * (query, key), compared with philox_threshold16(p). The accumulator fragments of
 * wgmma.m64nNk16 (PTX ISA, "wgmma" register fragments for D) are those of mma.m16n8k16 per warp:
 * value 4n + e of lane 4g + t of warp w is row 16w + g + 8 (e >> 1), column 8n + 2t + (e & 1), so
 * cuda_attention_dropout.cuh's draw serves both kernels: the four lanes holding a 2 x 4 block
 * (forward: rows g, g ^ 1 and key pairs t, t ^ 1; backward, keys as rows: keys g .. g ^ 3 of one
 * query pair) each draw a quarter of a tile's calls and exchange the decisions by shuffles. */
struct sm90_dropout_args {
    uint64_t seed, stream, offset; /* dropout_rng's */
    uint32_t threshold;            /* philox_threshold16(p) */
    float keep_scale;              /* 1 / (1 - p) */
    int head_start, total_heads;
};
static sm90_dropout_args sm90_dropout_of(dropout_rng rng, int head_start, int total_heads) {
    sm90_dropout_args a;
    a.seed = rng.seed;
    a.stream = rng.stream;
    a.offset = rng.offset;
    a.threshold = philox_threshold16(rng.p);
    a.keep_scale = rng.p > 0.0f ? 1.0f / (1.0f - rng.p) : 1.0f;
    a.head_start = head_start;
    a.total_heads = total_heads;
    return a;
}
/* ---------------------------------------------------------------------------------------------- */
/* PTX primitives (compiled for sm_90a only) */
#ifdef SM90_WGMMA

static __device__ __forceinline__ uint32_t sm90_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* a 128-byte-swizzled operand starting at shared address addr */
static __device__ __forceinline__ uint64_t sm90_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | ((uint64_t)1 << 62);
}

static __device__ __forceinline__ void wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wgmma_wait_all(void) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* shared-memory writes of the generic proxy (cp.async, st.shared) made visible to wgmma */
static __device__ __forceinline__ void fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* tells the compiler that the registers may change here (around asynchronous wgmma: an
 * accumulator is not read before its wait, an A fragment's registers are not reused before) */
template <int N>
static __device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int KS>
static __device__ __forceinline__ void fence_fragments(uint32_t (&a)[KS][4]) {
#pragma unroll
    for (int i = 0; i < KS; i++)
        asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
}

/* d[64 x 64] (+)= A[64 x 16] B[16 x 64], A and B from shared memory through descriptors, both
 * K-major (no transpose); scale_d 0 overwrites d */
static __device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                          int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* d[64 x 64] = A[64 x 16] B[16 x 64] as above, d only written (its old values are not inputs, so
 * that no register moves for them land between asynchronous products in flight) */
static __device__ __forceinline__ void wgmma_m64n64k16_ss_first(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(0));
}

/* d[64 x 64] (+)= A[64 x 16] B[16 x 64], A from registers (A fragments, one warp per 16 rows), B
 * from shared memory K-major (as K in Q K^T: no transpose); the _first form overwrites d and
 * only writes it (no register moves for old values between products in flight) */
static __device__ __forceinline__ void wgmma_m64n64k16_rs_kmajor(float (&d)[32], const uint32_t (&a)[4],
                                                                 uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
static __device__ __forceinline__ void wgmma_m64n64k16_rs_kmajor_first(float (&d)[32], const uint32_t (&a)[4],
                                                                       uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(0));
}

/* d[64 x 128] (+)= A[64 x 16] B[16 x 128], A and B from shared memory through descriptors, both
 * K-major (no transpose); scale_d 0 overwrites d */
static __device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                          int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* d[64 x 64] += A[64 x 16] B[16 x 64], A from registers (mma.m16n8k16's A fragments, one warp per
 * 16 rows), B from shared memory MN-major (transposed: its 64 columns are contiguous) */
static __device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                          int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

/* d[64 x 128] += A[64 x 16] B[16 x 128], A from registers (mma.m16n8k16's A fragments, one warp per
 * 16 rows), B from shared memory MN-major (transposed: its 128 columns are contiguous) */
static __device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                          int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

static __device__ __forceinline__ void sm90_cp_async_16(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
static __device__ __forceinline__ void sm90_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void sm90_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

static __device__ __forceinline__ float sm90_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ uint32_t sm90_pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&pair);
}
static __device__ __forceinline__ float sm90_quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float sm90_quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* the counter of element (0, 0) of query head h of batch b */
static __device__ __forceinline__ uint64_t sm90_head_base(const sm90_dropout_args &drop, int b, int h, int T) {
    const uint64_t head_index = (uint64_t)b * (uint64_t)drop.total_heads + (uint64_t)(drop.head_start + h);
    return drop.offset + head_index * (uint64_t)T * (uint64_t)T;
}
/* the draws of head_base's head (T keys per row) */
static __device__ __forceinline__ attn_drop_rng sm90_drop_rng(const sm90_dropout_args &drop, uint64_t head_base,
                                                              int T) {
    attn_drop_rng r;
    r.seed = drop.seed;
    r.stream = drop.stream;
    r.head_base = head_base;
    r.Tk = T;
    r.threshold = drop.threshold;
    return r;
}

/* The forward's keep bits of a warp's 16 x 64 piece of P (rows row0 + g (+8), keys k0 + 8n + 2t
 * (+1); bit 4n + e): only blocks with a visible element (a key <= a query, the query inside the
 * sequence) draw; the others hold zeros or rows never stored. */
static __device__ __forceinline__ uint32_t sm90_keep_bits_forward(const sm90_dropout_args &drop, uint64_t head_base,
                                                                  int k0, int row0, int lane, int T) {
    return attn_drop_keep_bits<8, true>(sm90_drop_rng(drop, head_base, T), row0, k0, lane,
                                        [&](int query, int key) { return query < T && key <= query + 1; });
}

/* The forward's dropout on a warp's P (64 x BN accumulator, after sm90_online_softmax summed the
 * undropped values into l): P[i, j] = 0 where (i, j) is dropped */
template <int BN>
static __device__ __forceinline__ void sm90_drop_forward(float (&s)[BN / 2], const sm90_dropout_args &drop,
                                                         uint64_t head_base, int k0, int row0, int g, int t, int T) {
    static_assert(BN / 2 <= 64, "a thread's keep bits of a tile in two words");
#pragma unroll
    for (int half = 0; half < BN / 64; half++) {
        /* n8 groups [8 half, 8 half + 8): bits 4 (n - 8 half) + e */
        const uint32_t keep = sm90_keep_bits_forward(drop, head_base, k0 + 64 * half, row0, 4 * g + t, T);
#pragma unroll
        for (int e = 0; e < 32; e++)
            if (!((keep >> e) & 1u)) s[32 * half + e] = 0.0f;
    }
}

/* The backward's keep bits of a warp's 64-query step of S^T (keys as rows: lane 4g + t holds
 * keys krow0 + g (+8), queries q0 + 8n + 2t (+1); bit 4n + e). Only blocks with a visible element
 * (a query >= a key, the query inside the sequence) draw (elsewhere P is 0). */
static __device__ __forceinline__ uint32_t sm90_keep_bits_backward(const sm90_dropout_args &drop, uint64_t head_base,
                                                                   int q0, int krow0, int g, int t, int T) {
    return attn_drop_keep_bits<8, false>(sm90_drop_rng(drop, head_base, T), krow0, q0, 4 * g + t,
                                         [&](int query, int key) { return query < T && key <= query + 1; });
}

/* ---------------------------------------------------------------------------------------------- */
/* tiles and products */

/* rows [row0, row0 + ROWS) of a row-major bf16 matrix (row stride `stride` elements), columns
 * [0, D), into the swizzled tile at shared address dst (zero past T); asynchronous: the caller
 * commits and waits */
template <int ROWS, int D>
static __device__ __forceinline__ void sm90_load_tile(uint32_t dst, const nvbf16 *base, size_t stride, int row0,
                                                      int T) {
    constexpr int CHUNKS = D / 8; /* 16-byte chunks per row */
    static_assert(ROWS * CHUNKS % SM90_THREADS == 0, "whole rounds of copies");
#pragma unroll
    for (int k = 0; k < ROWS * CHUNKS / SM90_THREADS; k++) {
        const int i = k * SM90_THREADS + (int)threadIdx.x, r = i / CHUNKS, c = i % CHUNKS;
        const bool valid = row0 + r < T;
        const nvbf16 *src = base + (size_t)(valid ? row0 + r : 0) * stride + (size_t)c * 8;
        sm90_cp_async_16(dst + (uint32_t)((c / 8) * ROWS * 128 + r * 128 + (((c % 8) ^ (r & 7)) << 4)), src, valid);
    }
}

/* Issue (the caller fences, commits and waits) acc[64 x N] (+)= A B^T over D: A is rows
 * [a_row0, a_row0 + 64) of a swizzled A_ROWS x D tile, B all N rows of a swizzled N x D tile,
 * both K-major; scale_d 0 on the first k-slice when overwrite. */
template <int N, int D, int A_ROWS>
static __device__ __forceinline__ void sm90_issue_abt(float (&acc)[N / 2], uint32_t a_tile, int a_row0,
                                                      uint32_t b_tile, bool overwrite) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint64_t da = sm90_desc(a_tile + (uint32_t)((kk / 4) * A_ROWS * 128 + a_row0 * 128 + (kk % 4) * 32), 16, 1024);
        const uint64_t db = sm90_desc(b_tile + (uint32_t)((kk / 4) * N * 128 + (kk % 4) * 32), 16, 1024);
        if constexpr (N == 128) wgmma_m64n128k16_ss(acc, da, db, overwrite && kk == 0 ? 0 : 1);
        else if (overwrite && kk == 0) wgmma_m64n64k16_ss_first(acc, da, db);
        else wgmma_m64n64k16_ss(acc, da, db, 1);
    }
}

/* Issue acc[64 x D] += A B: A as KS k-slices of 16 in registers (A fragments), B the first
 * 16 KS rows of a swizzled B_ROWS x D tile, MN-major (transposed) */
template <int D, int KS, int B_ROWS>
static __device__ __forceinline__ void sm90_issue_ab(float (&acc)[D / 2], const uint32_t (&a)[KS][4], uint32_t b_tile,
                                                     bool overwrite = false) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        const uint64_t db = sm90_desc(b_tile + (uint32_t)kk * 16 * 128, (uint32_t)B_ROWS * 128, 1024);
        if constexpr (D == 128) wgmma_m64n128k16_rs(acc, a[kk], db, overwrite && kk == 0 ? 0 : 1);
        else wgmma_m64n64k16_rs(acc, a[kk], db, overwrite && kk == 0 ? 0 : 1);
    }
}

/* Issue acc[64 x 64] = A B^T over D = 16 KS: A in registers (KS A fragments), B the 64 rows of a
 * swizzled 64 x D tile, K-major */
template <int KS>
static __device__ __forceinline__ void sm90_issue_rbt(float (&acc)[32], const uint32_t (&a)[KS][4], uint32_t b_tile) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        const uint64_t db = sm90_desc(b_tile + (uint32_t)((kk / 4) * 64 * 128 + (kk % 4) * 32), 16, 1024);
        if (kk == 0) wgmma_m64n64k16_rs_kmajor_first(acc, a[kk], db);
        else wgmma_m64n64k16_rs_kmajor(acc, a[kk], db);
    }
}

/* a warp's A fragments of rows [row0, row0 + 16) of a swizzled ROWS x 16 KS tile (generic
 * pointer): register j of slice kk is row row0 + g + 8 (j & 1), columns 16 kk + 8 (j >> 1) + 2t, +1 */
template <int KS, int ROWS>
static __device__ __forceinline__ void sm90_read_a(uint32_t (&a)[KS][4], const unsigned char *tile, int row0, int g,
                                                   int t) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = row0 + g + 8 * (j & 1), c = 16 * kk + 8 * (j >> 1) + 2 * t;
            a[kk][j] = *reinterpret_cast<const uint32_t *>(tile + (c / 64) * ROWS * 128 + r * 128 +
                                                           ((((c % 64) / 8) ^ (r & 7)) << 4) + (c % 8) * 2);
        }
}

/* an fp32 accumulator (64 x 16 KS) -> bf16 A fragments of its KS k-slices: n8 blocks 2kk and
 * 2kk + 1 hold exactly the A fragment of slice kk */
template <int KS>
static __device__ __forceinline__ void sm90_pack_a(uint32_t (&a)[KS][4], const float (&acc)[KS * 8]) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        a[kk][0] = sm90_pack_bf16x2(acc[8 * kk + 0], acc[8 * kk + 1]);
        a[kk][1] = sm90_pack_bf16x2(acc[8 * kk + 2], acc[8 * kk + 3]);
        a[kk][2] = sm90_pack_bf16x2(acc[8 * kk + 4], acc[8 * kk + 5]);
        a[kk][3] = sm90_pack_bf16x2(acc[8 * kk + 6], acc[8 * kk + 7]);
    }
}

/* (the self-test's products, synchronous) s[64 x BN] = Q[64 rows of warpgroup wg] K^T (all BN
 * keys of the tile) */
template <int D, int BN>
static __device__ __forceinline__ void sm90_scores(float (&s)[BN / 2], uint32_t q_tile, uint32_t k_tile, int wg) {
    wgmma_fence();
    sm90_issue_abt<BN, D, SM90_BM>(s, q_tile, 64 * wg, k_tile, true);
    wgmma_commit();
    wgmma_wait_all();
    fence_registers(s);
}

/* o[64 x D] += P[64 x BN] V[BN keys x D] */
template <int D, int BN>
static __device__ __forceinline__ void sm90_add_pv(float (&o)[D / 2], uint32_t (&p)[BN / 16][4], uint32_t v_tile) {
    fence_registers(o);
    wgmma_fence();
    sm90_issue_ab<D, BN / 16, BN>(o, p, v_tile);
    wgmma_commit();
    wgmma_wait_all();
    fence_registers(o);
    fence_fragments(p);
}

/* One step of the online softmax over a 64 x BN score tile in registers (keys k0 ...; this
 * warp's rows start at row0; lane = 4g + t): mask keys past the row where the diagonal crosses
 * the warp's rows, raise the running row max m_run, return the factor alpha = exp2((m_old -
 * m_new) scale_log2) by which l_run (already scaled here) and O must shrink, and turn s into
 * P = exp2(s scale_log2 - m_new scale_log2), adding its row sums to this thread's l_run.
 * A sliding window (window < T: the row at r sees keys r - window .. r) masks the keys before
 * it where its edge crosses the warp's rows; a row none of whose keys the tile shows then keeps
 * max -inf (taken as 0 in the exponentials, all of them 0). Without one window is larger than
 * any distance and windowed false: the tests fold away to the causal ones. */
template <int BN>
static __device__ __forceinline__ void sm90_online_softmax(float (&s)[BN / 2], float (&m_run)[2], float (&l_run)[2],
                                                           float (&alpha)[2], int k0, int row0, int g, int t,
                                                           float scale_log2, int window, bool windowed) {
    if (k0 + BN - 1 > row0 || k0 < row0 + 15 - window) { /* the diagonal or the window's edge crosses */
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + 8 * n + 2 * t + (e & 1), row = row0 + g + 8 * (e >> 1);
                if (key > row || key < row - window) s[4 * n + e] = -INFINITY;
            }
    }
    float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int n = 0; n < BN / 8; n++) {
        m_new[0] = fmaxf(m_new[0], fmaxf(s[4 * n], s[4 * n + 1]));
        m_new[1] = fmaxf(m_new[1], fmaxf(s[4 * n + 2], s[4 * n + 3]));
    }
    float neg_m[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        m_new[i] = sm90_quad_max(m_new[i]);
        const float m_use = windowed && m_new[i] == -INFINITY ? 0.0f : m_new[i];
        alpha[i] = sm90_exp2((m_run[i] - m_use) * scale_log2);
        m_run[i] = m_new[i];
        neg_m[i] = -m_use * scale_log2;
        l_run[i] *= alpha[i];
    }
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float p = sm90_exp2(fmaf(s[4 * n + e], scale_log2, neg_m[e >> 1]));
            l_run[e >> 1] += p;
            s[4 * n + e] = p;
        }
}

/* the block's shared memory, rounded up to a 1024-byte boundary */
static __device__ __forceinline__ unsigned char *sm90_smem_base(unsigned char *raw) {
    const uint32_t addr = sm90_smem_addr(raw);
    return raw + ((1024u - (addr & 1023u)) & 1023u);
}

/* the forward's end for this thread's two rows (row0 + g, + 8): out = O / l in bf16 (out_base:
 * the head's column 0 of row 0, rows out_stride apart) and lse = m + log(l) (lse_base: the
 * head's row 0), l summed over the quad first; rows past T are not written. DROPOUT: out = O
 * keep_scale / l (dropout's 1 / (1 - p) deferred to here, as in cuda_attention.cu) */
template <int D, bool DROPOUT>
static __device__ __forceinline__ void sm90_store_forward(nvbf16 *out_base, float *lse_base, const float (&o)[D / 2],
                                                          const float (&m_run)[2], const float (&l_run)[2], int row0,
                                                          int g, int t, int T, size_t out_stride, float scale_log2,
                                                          float keep_scale) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float l = sm90_quad_sum(l_run[i]), factor = DROPOUT ? keep_scale / l : 1.0f / l;
        const int row = row0 + g + 8 * i;
        if (row >= T) continue;
        /* m scale_log2 rounded before the add, as the kernels before computed it */
        if (t == 0) lse_base[row] = (__fmul_rn(m_run[i], scale_log2) + log2f(l)) * SM90_LN2;
        nvbf16 *dst = out_base + (size_t)row * out_stride + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + 8 * n) =
                __floats2bfloat162_rn(o[4 * n + 2 * i] * factor, o[4 * n + 2 * i + 1] * factor);
    }
}

/* mbarriers (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier") and the
 * tensor memory accelerator, for the warp-specialized forward: a barrier completes a phase when
 * its count of arrivals and its expected transaction bytes are both in; a waiter names the parity
 * of the phase it waits for (0 for the first completion, 1 for the second, ...) */
static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* one arrival that also expects `bytes` more transaction bytes in this phase */
static __device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
/* a box of 64 columns x 64 rows at (col, row, batch) of the tensor map (128-byte swizzle) into
 * shared memory at dst (1024-byte aligned); rows past the tensor's end arrive as zeros, and all
 * 8192 bytes count on bar */
static __device__ __forceinline__ void sm90_tma_box(uint32_t dst, const CUtensorMap *map, int col, int row, int batch,
                                                    uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(batch), "r"(bar)
        : "memory");
}
/* rows [row0, row0 + ROWS) x columns [col0, col0 + D) of batch b into the swizzled tile at dst:
 * ROWS / 64 x D / 64 boxes, column block cb at dst + cb ROWS 128 as sm90_load_tile lays it */
template <int ROWS, int D>
static __device__ __forceinline__ void sm90_tma_tile(uint32_t dst, const CUtensorMap *map, int col0, int row0, int b,
                                                     uint32_t bar) {
#pragma unroll
    for (int cb = 0; cb < D / 64; cb++)
#pragma unroll
        for (int rb = 0; rb < ROWS / 64; rb++)
            sm90_tma_box(dst + (uint32_t)(cb * ROWS * 128 + rb * 64 * 128), map, col0 + 64 * cb, row0 + 64 * rb, b, bar);
}
template <int N>
static __device__ __forceinline__ void wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
#endif /* SM90_WGMMA */

/* ---------------------------------------------------------------------------------------------- */
/* The warp-specialized forward (FlashAttention-3's structure). A work tile is (batch x head, BM =
 * 64 NC query rows); the grid is persistent (one block per SM, sm90_forward_ws_launch) and block
 * k takes tiles k, then 2 grid - 1 - k, 2 grid + k, ... (a snake over rounds of `grid` tiles).
 * Tiles are numbered head by head, longest query block first within a head: the blocks at work
 * at one time share few heads' K and V, which then stay in L2 (numbered query block first across
 * heads, each round read a K/V for every head and the forward ran from DRAM: 0.43 against 0.30
 * ms at the 1.3B shape), and the snake gives each block about the same number of key tiles.
 *
 * NC + 1 warpgroups: warpgroups 0 .. NC-1 compute 64 rows each, warpgroup NC only loads. One
 * thread of it brings, tile after tile, Q and then for every key tile K and V with the tensor
 * memory accelerator (one tensor map over qkv [B][T][(H+2G)D], boxes of 64 x 64 in the 128-byte
 * swizzle above; rows past T arrive as zeros) into a ring of STAGES (K, V) buffers: k_full[s] /
 * v_full[s] complete when the bytes have landed, k_empty[s] / v_empty[s] when every consumer warp
 * is done with them (K after its scores, V after its P V), and the producer refills a buffer only
 * then; likewise q_full / q_empty for Q, so the next tile's Q and first K/V load while the
 * consumers finish a tile. setmaxnreg moves registers from the producer (40, or 32 with three
 * consumers) to the consumers (232, or 160).
 *
 * A consumer warpgroup pipelines its two products (FlashAttention-3's intra-warpgroup overlap):
 * with P of tile j-1 in registers it issues S_j = Q K_j^T, then O += P_{j-1} V_{j-1}, both
 * asynchronously; waits for S_j alone and runs its softmax while P V runs on the tensor cores;
 * then waits for P V, scales O by the new alpha and packs P_j for the next round. The arithmetic
 * is that of the synchronous order (O_j = alpha_j O_{j-1} + P_j V_j, the product added onto the
 * scaled O) in the same order: O is scaled by alpha_j at the end of round j and P_j V_j added in
 * round j + 1 onto that.
 * The consumers take turns issuing (FlashAttention-3's ping-pong; named barriers 1 .. NC, round
 * robin: warpgroup w waits on barrier 1 + w before issuing its products and then opens
 * 1 + (w+1) % NC), so that one warpgroup's softmax overlaps the others' products instead of all
 * competing at once (0.276 -> 0.260 ms at the 1.3B shape on an H100).
 *
 * On an H100 (perf/attention_bench) this forward takes 0.169 ms at B=32 T=1024 H=12 D=64 and
 * 0.260 ms at B=8 T=2048 H=16 D=128 (305 and 528 TFLOP/s), against 0.217 and 0.439 ms for the
 * two-warpgroup cp.async kernel it replaced. Of that, the tile order gave most at D=128 (the
 * same kernel with a block per tile in (head, query block) order: 0.295 ms), the persistent grid
 * the rest. At D=128 out and lse are bit for bit those of that kernel; at D=64 (which had tiles
 * of 64 keys) the summation order differs. Tried and left out: doing only the first half of the
 * diagonal tile's products where a warpgroup's rows end before its middle (branches around the
 * products: 0.349 instead of 0.264 ms). */
#ifdef SM90_WGMMA
template <int NC>
static __device__ __forceinline__ void sm90_turn_wait(int wg) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory");
}
template <int NC>
static __device__ __forceinline__ void sm90_turn_pass(int wg) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (wg + 1) % NC) : "memory");
}
/* the tile block `block` of `grid` works on in round r (snake order; may be past the last) */
static __device__ __forceinline__ int sm90_ws_tile(int r, int block, int grid) {
    return r * grid + ((r & 1) ? grid - 1 - block : block);
}
#endif

/* shared memory of the warp-specialized forward: the Q tile, STAGES (K, V) tile pairs, then the
 * mbarriers (q_full, q_empty, then per stage k_full, v_full, k_empty, v_empty), plus the
 * 1024-byte alignment slack */
#define SM90_WS_SMEM(D, BN, NC, STAGES) \
    ((size_t)64 * (NC) * (D) * 2 + (size_t)(STAGES) * 2 * (BN) * (D) * 2 + 8 * (2 + 4 * (STAGES)) + 1024)

template <int D, int BN, int NC, int STAGES, bool DROPOUT>
static __global__ void __launch_bounds__(128 * (NC + 1), 1)
attention_forward_ws_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, nvbf16 *out, float *lse, int B, int T,
                                 int H, int G, int window, const sm90_dropout_args drop) {
#ifdef SM90_WGMMA
    constexpr int BM = 64 * NC, Q_TILE = BM * D * 2, TILE = BN * D * 2; /* bytes */
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t q_tile = sm90_smem_addr(smem), kv_tiles = q_tile + Q_TILE; /* stage s: K, V */
    const uint32_t q_full = kv_tiles + STAGES * 2 * TILE, q_empty = q_full + 8, stage_bars = q_full + 16;
#define SM90_K_FULL(s) (stage_bars + 32 * (uint32_t)(s))
#define SM90_V_FULL(s) (stage_bars + 32 * (uint32_t)(s) + 8)
#define SM90_K_EMPTY(s) (stage_bars + 32 * (uint32_t)(s) + 16)
#define SM90_V_EMPTY(s) (stage_bars + 32 * (uint32_t)(s) + 24)

    const int q_blocks = (T + BM - 1) / BM, tiles = B * H * q_blocks;
    const int block = (int)blockIdx.x, grid = (int)gridDim.x;
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        mbar_init(q_empty, 4 * NC); /* one arrival per consumer warp */
        for (int s = 0; s < STAGES; s++) {
            mbar_init(SM90_K_FULL(s), 1);
            mbar_init(SM90_V_FULL(s), 1);
            mbar_init(SM90_K_EMPTY(s), 4 * NC);
            mbar_init(SM90_V_EMPTY(s), 4 * NC);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == NC) { /* the producer */
        if constexpr (NC == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        else asm volatile("setmaxnreg.dec.sync.aligned.u32 32;\n" ::: "memory");
        if (threadIdx.x == 128 * NC) {
            int loaded = 0; /* K/V tiles loaded so far: ring stage loaded % STAGES, round loaded / STAGES */
            for (int r = 0, tile; (tile = sm90_ws_tile(r, block, grid)) < tiles; r++) {
                const int bh = tile / q_blocks, b = bh / H, h = bh % H;
                const int q0 = (q_blocks - 1 - tile % q_blocks) * BM, kt_last = min(q0 + BM - 1, T - 1) / BN;
                const int kt_first = max(q0 - window, 0) / BN; /* the sliding window's first key tile */
                const int q_col = (int)qkv_query_offset(h, H, G, D), k_col = (int)qkv_key_offset(h / (H / G), H, G, D);
                if (r > 0) mbar_wait(q_empty, (uint32_t)(r - 1) & 1);
                mbar_arrive_expect_tx(q_full, Q_TILE);
                sm90_tma_tile<BM, D>(q_tile, &qkv_map, q_col, q0, b, q_full);
                for (int kt = kt_first; kt <= kt_last; kt++, loaded++) {
                    const int s = loaded % STAGES;
                    const uint32_t k_tile = kv_tiles + (uint32_t)s * 2 * TILE, refill = ((loaded / STAGES) & 1) ^ 1;
                    if (loaded >= STAGES) mbar_wait(SM90_K_EMPTY(s), refill);
                    mbar_arrive_expect_tx(SM90_K_FULL(s), TILE);
                    sm90_tma_tile<BN, D>(k_tile, &qkv_map, k_col, kt * BN, b, SM90_K_FULL(s));
                    if (loaded >= STAGES) mbar_wait(SM90_V_EMPTY(s), refill);
                    mbar_arrive_expect_tx(SM90_V_FULL(s), TILE);
                    sm90_tma_tile<BN, D>(k_tile + TILE, &qkv_map, k_col + D, kt * BN, b, SM90_V_FULL(s));
                }
            }
        }
        return;
    }

    /* a consumer */
    if constexpr (NC == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n" ::: "memory");
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const size_t out_stride = (size_t)H * D;
    const bool windowed = window < T;
    if (wg == NC - 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory"); /* warpgroup 0 first */
    int used = 0; /* K/V tiles consumed so far (as `loaded` above) */
    for (int r = 0, tile; (tile = sm90_ws_tile(r, block, grid)) < tiles; r++) {
        const int bh = tile / q_blocks, b = bh / H, h = bh % H;
        const int q0 = (q_blocks - 1 - tile % q_blocks) * BM, kt_last = min(q0 + BM - 1, T - 1) / BN;
        const int kt_first = max(q0 - window, 0) / BN; /* the sliding window's first key tile */
        const int row0 = q0 + 64 * wg + 16 * warp; /* this warp's first row */
        const bool last_tile = sm90_ws_tile(r + 1, block, grid) >= tiles;
        const uint64_t head_base = DROPOUT ? sm90_head_base(drop, b, h, T) : 0;
        float o[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
        float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}, alpha[2];

        /* round 0: S_0 and its softmax */
        float s[BN / 2];
        uint32_t p[BN / 16][4];
        mbar_wait(q_full, (uint32_t)r & 1);
        mbar_wait(SM90_K_FULL(used % STAGES), (uint32_t)(used / STAGES) & 1);
        sm90_turn_wait<NC>(wg);
        wgmma_fence();
        sm90_issue_abt<BN, D, BM>(s, q_tile, 64 * wg, kv_tiles + (uint32_t)(used % STAGES) * 2 * TILE, true);
        wgmma_commit();
        sm90_turn_pass<NC>(wg);
        wgmma_wait<0>();
        fence_registers(s);
        if (lane == 0) {
            mbar_arrive(SM90_K_EMPTY(used % STAGES));
            if (kt_last == kt_first) mbar_arrive(q_empty);
        }
        sm90_online_softmax<BN>(s, m_run, l_run, alpha, kt_first * BN, row0, g, t, scale_log2, window, windowed);
        if constexpr (DROPOUT) sm90_drop_forward<BN>(s, drop, head_base, kt_first * BN, row0, g, t, T);
        sm90_pack_a<BN / 16>(p, s);

        /* round kt: S_kt, and P_{kt-1} V_{kt-1} under S_kt's softmax */
        for (int kt = kt_first + 1; kt <= kt_last; kt++) {
            const int s_now = (used + 1) % STAGES, s_prev = used % STAGES;
            mbar_wait(SM90_K_FULL(s_now), (uint32_t)((used + 1) / STAGES) & 1);
            mbar_wait(SM90_V_FULL(s_prev), (uint32_t)(used / STAGES) & 1);
            sm90_turn_wait<NC>(wg);
            wgmma_fence();
            sm90_issue_abt<BN, D, BM>(s, q_tile, 64 * wg, kv_tiles + (uint32_t)s_now * 2 * TILE, true);
            wgmma_commit();
            sm90_issue_ab<D, BN / 16, BN>(o, p, kv_tiles + (uint32_t)s_prev * 2 * TILE + TILE);
            wgmma_commit();
            sm90_turn_pass<NC>(wg);
            wgmma_wait<1>(); /* S_kt */
            fence_registers(s);
            if (lane == 0) {
                mbar_arrive(SM90_K_EMPTY(s_now));
                if (kt == kt_last) mbar_arrive(q_empty);
            }
            sm90_online_softmax<BN>(s, m_run, l_run, alpha, kt * BN, row0, g, t, scale_log2, window, windowed);
            /* dropout after the softmax's sums, still under P V */
            if constexpr (DROPOUT) sm90_drop_forward<BN>(s, drop, head_base, kt * BN, row0, g, t, T);
            wgmma_wait<0>(); /* P V */
            fence_registers(o);
            fence_fragments(p);
            if (lane == 0) mbar_arrive(SM90_V_EMPTY(s_prev));
            used++;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[4 * n] *= alpha[0];
                o[4 * n + 1] *= alpha[0];
                o[4 * n + 2] *= alpha[1];
                o[4 * n + 3] *= alpha[1];
            }
            sm90_pack_a<BN / 16>(p, s);
        }

        /* the last P V */
        mbar_wait(SM90_V_FULL(used % STAGES), (uint32_t)(used / STAGES) & 1);
        sm90_turn_wait<NC>(wg);
        wgmma_fence();
        sm90_issue_ab<D, BN / 16, BN>(o, p, kv_tiles + (uint32_t)(used % STAGES) * 2 * TILE + TILE);
        wgmma_commit();
        /* the round robin's very last pass would never be waited for */
        if (!(last_tile && wg == NC - 1)) sm90_turn_pass<NC>(wg);
        wgmma_wait<0>();
        fence_registers(o);
        fence_fragments(p);
        if (lane == 0) mbar_arrive(SM90_V_EMPTY(used % STAGES));
        used++;
        sm90_store_forward<D, DROPOUT>(out + (size_t)b * T * out_stride + (size_t)h * D, lse + (size_t)bh * T, o,
                                       m_run, l_run, row0, g, t, T, out_stride, scale_log2, drop.keep_scale);
    }
#undef SM90_K_FULL
#undef SM90_V_FULL
#undef SM90_K_EMPTY
#undef SM90_V_EMPTY
#else
    (void)qkv_map; (void)out; (void)lse; (void)B; (void)T; (void)H; (void)G; (void)window; (void)drop;
#endif
}

/* ---------------------------------------------------------------------------------------------- */
/* the backward: lse2 = lse log2(e) and Di = dO.O per row come from cuda_attention.cu's row kernel
 * ([B*H, Tpad], zero past T; it also zeroes the dQ semaphores below);
 *   P = exp2(s scale_log2 - lse2),  dS = P (dP - Di),  dP = dO V^T
 * One pass (FlashAttention-2/3's, five products; the kernel is "the warp-specialized backward"
 * below) owns 128 keys (two warpgroups of 64) and walks the query tiles of 64 at or below the
 * diagonal, of every head of the key's group in turn: S^T = K Q^T and dP^T = V dO^T (keys as
 * rows), then dV += P^T dO and dK += dS^T Q with P^T and dS^T as register A fragments (dK and dV
 * stay in registers to the end). dS^T also goes to shared memory as bf16 ([128 keys][64
 * queries], 128-byte swizzle), from where the partial dQ_mn = dS K of this (query tile m, key
 * tile n) pair is one more product: A = dS read "MN-major" (transposed: its 64 query rows are
 * contiguous), B = the K tile read MN-major as V is in the forward's P V. Warpgroup w computes
 * the columns [wD/2, wD/2 + D/2) over all 128 keys, so each thread keeps D / 4 values. Every
 * product is issued without a branch (ptxas answers wgmma in divergent paths by serializing
 * every wgmma of the kernel): in a diagonal tile the upper warpgroup's keys are all masked and
 * its P and dS come out zero.
 *
 * Deterministic dQ (FlashAttention-3's scheme, no floating-point atomics in a free order): the
 * partials of query tile m are summed in an fp32 workspace dq_accum (one 64 x D tile per (b*H+h,
 * m), stored thread-major: value e of thread i at e*256 + i, so that every access is coalesced),
 * in a fixed order, descending key tile n = m/2, m/2 - 1, ..., 0, kept by an int semaphore per
 * tile that counts the partials already added. The first (the diagonal's tile) writes its tile
 * with a bulk copy, the following ones wait for their turn and add theirs with a bulk reduce
 * (cp.reduce.async.bulk .add.f32), the last (key tile 0) reads the sum, adds its own partial and
 * writes dQ as bf16 (scaled) into dqkv: no zeroing of dq_accum and no conversion pass. Partials
 * are staged in shared memory and sent out by one thread while the tensor cores go on. Key
 * tiles of one (batch, group) are taken next to each other, largest first, so a tile only ever
 * waits for tiles taken before it (no deadlock) and the (b, h) rows of dq_accum in flight stay
 * in L2. (An earlier kernel ran this pass without warp specialization, one block per key tile:
 * 1.131 ms at the 1.3B shape and 0.713 at 124M's on an H100, against 0.92 and 0.535 for the
 * warp-specialized one; removed once that one had replaced it at both head dimensions.) */
#define SM90_BWD_STEP 64 /* query rows per step */
/* bytes of one stage: Q and dO tiles, then lse2 and Di (64 fp32 each), padded so that the next
 * stage's tiles stay 1024-byte aligned (the swizzle needs it) */
#define SM90_BWD_STAGE(D) (2 * SM90_BWD_STEP * (D) * 2 + 1024)
#define SM90_DQ_TILE(D) (SM90_BWD_STEP * (D)) /* fp32 values of one dq_accum tile */

#ifdef SM90_WGMMA
/* 64 fp32 of a [., Tpad] statistics row into shared memory (threads 0..15 of the block) */
static __device__ __forceinline__ void sm90_load_stats(uint32_t dst, const float *src) {
    if (threadIdx.x < 16) sm90_cp_async_16(dst + 16 * threadIdx.x, src + 4 * threadIdx.x, true);
}

/* d[64 x 64] (+)= A[64 x 16] B[16 x 64], both from shared memory MN-major (transposed: A's 64
 * rows, B's 64 columns contiguous); scale_d 0 overwrites d */
static __device__ __forceinline__ void wgmma_m64n64k16_ss_tt(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                             int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* The dK/dV step's softmax gradient, in place on a warp's fragments of S^T and dP^T (keys as
 * rows): P^T = exp2(S^T scale log2(e) - lse2) (0 above the diagonal and past T) into st, dS^T =
 * P^T (dP^T - Di) into dpt, with the step's lse2 and Di (64 each) from shared memory; the lane
 * holds keys krow0 + g (+8) and queries q0 + 8n + 2t (+1) */
static __device__ __forceinline__ void sm90_probs_and_ds(float (&st)[32], float (&dpt)[32], const float *stage_stats,
                                                         int q0, int krow0, int g, int t, int T, float scale_log2) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 l2 = *reinterpret_cast<const float2 *>(stage_stats + 8 * n + 2 * t);
        const float2 d2 = *reinterpret_cast<const float2 *>(stage_stats + SM90_BWD_STEP + 8 * n + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int q = q0 + 8 * n + 2 * t + (e & 1), k = krow0 + g + 8 * (e >> 1);
            const float p = (q < k || q >= T) ? 0.0f : sm90_exp2(fmaf(st[4 * n + e], scale_log2, -((e & 1) ? l2.y : l2.x)));
            st[4 * n + e] = p;
            dpt[4 * n + e] = p * (dpt[4 * n + e] - ((e & 1) ? d2.y : d2.x));
        }
    }
}

/* a thread's 16 query statistics of a step (lse2 at stats, Di at stats + SM90_BWD_STEP): columns
 * 8n + 2t and + 1 of the S^T / dP^T fragments, as pairs */
static __device__ __forceinline__ void sm90_step_stats(float2 (&pairs)[8], const float *stats, int t) {
#pragma unroll
    for (int n = 0; n < 8; n++) pairs[n] = *reinterpret_cast<const float2 *>(stats + 8 * n + 2 * t);
}

/* sm90_probs_and_ds in two halves (the same operations), so that the first runs under dP^T's
 * product: P^T into st, then dS^T = P^T (dP^T - Di) into dpt (their statistics in registers) */
static __device__ __forceinline__ void sm90_probs(float (&st)[32], const float2 (&lse_pairs)[8], int q0, int krow0,
                                                  int g, int t, int T, float scale_log2) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 l2 = lse_pairs[n];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int q = q0 + 8 * n + 2 * t + (e & 1), k = krow0 + g + 8 * (e >> 1);
            st[4 * n + e] = (q < k || q >= T) ? 0.0f : sm90_exp2(fmaf(st[4 * n + e], scale_log2, -((e & 1) ? l2.y : l2.x)));
        }
    }
}
/* the sliding window on P^T (after sm90_probs): queries past key + window get P 0; called only
 * where the window's edge crosses the warp's step (a warp-uniform test outside) */
static __device__ __forceinline__ void sm90_window_mask(float (&st)[32], int q0, int krow0, int g, int t, int window) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int q = q0 + 8 * n + 2 * t + (e & 1), k = krow0 + g + 8 * (e >> 1);
            if (q - k > window) st[4 * n + e] = 0.0f;
        }
}
static __device__ __forceinline__ void sm90_ds(float (&dpt)[32], const float (&st)[32], const float2 (&di_pairs)[8]) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 d2 = di_pairs[n];
#pragma unroll
        for (int e = 0; e < 4; e++) dpt[4 * n + e] = st[4 * n + e] * (dpt[4 * n + e] - ((e & 1) ? d2.y : d2.x));
    }
}

/* the Q, dO, lse2 and Di of one dK/dV step (query head h, 64 queries from q0) into a stage:
 * the two [64][D] tiles, then 64 lse2 and 64 Di (cp.async, committed by the caller) */
template <int D>
static __device__ __forceinline__ void sm90_load_bwd_step(uint32_t stage, const nvbf16 *qkv, const nvbf16 *dout,
                                                          const float *lse2, const float *di, int b, int h, int q0,
                                                          int T, int Tpad, int H, int G) {
    constexpr uint32_t Q_TILE = SM90_BWD_STEP * D * 2;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    sm90_load_tile<SM90_BWD_STEP, D>(stage, qkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D),
                                     qkv_stride, q0, T);
    sm90_load_tile<SM90_BWD_STEP, D>(stage + Q_TILE, dout + (size_t)b * T * out_stride + (size_t)h * D, out_stride,
                                     q0, T);
    const size_t row = ((size_t)b * H + (size_t)h) * (size_t)Tpad + (size_t)q0;
    sm90_load_stats(stage + 2 * Q_TILE, lse2 + row);
    sm90_load_stats(stage + 2 * Q_TILE + SM90_BWD_STEP * 4, di + row);
}

/* The qkv bias gradient's partial sums (cuda_attention_sm90_backward's dbias): a warp's
 * accumulator fragment holds 16 rows (row g and g + 8 of lane 4g + t) of N pairs of columns
 * (8n + 2t, +1 for pair n). Adds the two rows (those inside the sequence), then the eight lanes of
 * each t (xor 4, 8, 16: a fixed order), and lanes 0-3 store scale times the 16-row sums at
 * row[8n], row[8n + 1]. The fragment is consumed. */
template <int N, int V>
static __device__ __forceinline__ void sm90_bias_rows(float *row, float (&frag)[V], bool row0_in, bool row1_in,
                                                      float scale, int g) {
    static_assert(V >= 4 * N, "a fragment of N column pairs");
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float v = (row0_in ? frag[4 * n + c] : 0.0f) + (row1_in ? frag[4 * n + 2 + c] : 0.0f);
            v += __shfl_xor_sync(0xffffffffu, v, 4);
            v += __shfl_xor_sync(0xffffffffu, v, 8);
            v += __shfl_xor_sync(0xffffffffu, v, 16);
            frag[4 * n + c] = v;
        }
    if (g == 0)
#pragma unroll
        for (int n = 0; n < N; n++)
            *reinterpret_cast<float2 *>(row + 8 * n) = make_float2(frag[4 * n] * scale, frag[4 * n + 1] * scale);
}

/* a lane's dK (times scale) and dV rows into dqkv as bf16: keys key and key + 8 of group grp,
 * columns 8n + 2t (+1) of its accumulator fragments; keys from T on are not written. DROPOUT: dV
 * times keep_scale (the 1 / (1 - p) of P's kept values, deferred to here) */
template <int D, bool DROPOUT = false>
static __device__ __forceinline__ void sm90_store_dkdv(nvbf16 *dqkv, const float (&dk)[D / 2], const float (&dv)[D / 2],
                                                       float scale, int b, int grp, int key, int t, int T, int H,
                                                       int G, float keep_scale = 1.0f) {
    const size_t qkv_stride = (size_t)(H + 2 * G) * D;
    nvbf16 *dk_base = dqkv + (size_t)b * T * qkv_stride + qkv_key_offset(grp, H, G, D);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int k = key + 8 * r;
        if (k >= T) continue;
        nvbf16 *dst = dk_base + (size_t)k * qkv_stride + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            *reinterpret_cast<__nv_bfloat162 *>(dst + 8 * n) =
                __floats2bfloat162_rn(dk[4 * n + 2 * r] * scale, dk[4 * n + 2 * r + 1] * scale);
            if constexpr (DROPOUT)
                *reinterpret_cast<__nv_bfloat162 *>(dst + D + 8 * n) =
                    __floats2bfloat162_rn(dv[4 * n + 2 * r] * keep_scale, dv[4 * n + 2 * r + 1] * keep_scale);
            else
                *reinterpret_cast<__nv_bfloat162 *>(dst + D + 8 * n) =
                    __floats2bfloat162_rn(dv[4 * n + 2 * r], dv[4 * n + 2 * r + 1]);
        }
    }
}

/* Issue acc[64 queries x 64] = dS[64 x KS*16 keys from key 16 ks0] K[those keys, columns
 * [64 cb, 64 cb + 64)]: dS^T from its [128][64] swizzled tile, K from the 128 x D tile */
template <int KS>
static __device__ __forceinline__ void sm90_issue_dq(float (&acc)[32], uint32_t ds_tile, uint32_t k_tile, int ks0,
                                                     int cb) {
    const uint32_t a0 = ds_tile + (uint32_t)ks0 * 2048, b0 = k_tile + (uint32_t)cb * 128 * 128 + (uint32_t)ks0 * 2048;
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
        wgmma_m64n64k16_ss_tt(acc, sm90_desc(a0 + ks * 2048, 128 * 128, 1024), sm90_desc(b0 + ks * 2048, 128 * 128, 1024),
                              ks == 0 ? 0 : 1);
}

/* d[64 x 32] (+)= A[64 x 16] B[16 x 32], both from shared memory MN-major (transposed), as
 * wgmma_m64n64k16_ss_tt with half the columns */
static __device__ __forceinline__ void wgmma_m64n32k16_ss_tt(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                                             int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* Issue acc[64 queries x 32] = dS[64 x 128 keys] K[128 keys, columns [32 half, 32 half + 32)] at
 * D 64: dS^T from its [128][64] swizzled tile, K from the 128 x 64 tile (one 64-wide block; the
 * half's columns start 64 bytes into each 128-byte row, the swizzle being a function of the
 * address as for the K-major k-slices 32 bytes apart) */
static __device__ __forceinline__ void sm90_issue_dq_half(float (&acc)[16], uint32_t ds_tile, uint32_t k_tile,
                                                          int half) {
    const uint32_t b0 = k_tile + (uint32_t)half * 64;
#pragma unroll
    for (int ks = 0; ks < 8; ks++)
        wgmma_m64n32k16_ss_tt(acc, sm90_desc(ds_tile + ks * 2048, 128 * 128, 1024), sm90_desc(b0 + ks * 2048, 128 * 128, 1024),
                              ks == 0 ? 0 : 1);
}

/* the dQ semaphores: spin (one thread) until the count reaches want; release one more */
static __device__ __forceinline__ void sm90_sem_wait(const int *sem, int want) {
    int seen;
    for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(sem) : "memory");
        if (seen >= want) break;
        __nanosleep(64);
    }
    asm volatile("fence.proxy.async.global;\n" ::: "memory"); /* the bulk reduce comes after */
}
/* the bulk operation of the previous step is complete: its writes are visible, then the count */
static __device__ __forceinline__ void sm90_sem_release(int *sem) {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(sem) : "memory");
}
static __device__ __forceinline__ void sm90_bulk_store(float *dst, uint32_t src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void sm90_bulk_reduce_add(float *dst, uint32_t src, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void sm90_bulk_commit(void) {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
#endif

/* ---------------------------------------------------------------------------------------------- */
/* The warp-specialized backward at head dimension 64 and 128 (FlashAttention-3's structure; the
 * arithmetic and the fixed dQ order of "the backward" above: runs are bitwise identical). A
 * work tile is (batch x group, 128 keys); the grid is persistent (one block per SM) and takes
 * tiles in order from a counter (atomicAdd; zeroed by the row kernel with the semaphores).
 * Tiles are numbered group by group, within a group the last key tile first: dQ's partials are summed from the diagonal's key tile down to
 * key tile 0, so a tile only ever waits for tiles taken before it by running blocks (no
 * deadlock), and key tile n reaches a query tile about two steps after key tile n + 1 did. (A
 * static snake over rounds of `grid` tiles, as the forward's, balanced the steps as well but let
 * blocks drift apart, so that key tiles waited for their turns: 1.300 ms at the 1.3B shape on
 * an H100 against 0.940 taking tiles in order.)
 *
 * Three warpgroups. Warpgroups 0 and 1 compute (64 keys each, setmaxnreg 240): per step of 64
 * queries S^T, dP^T, then dV += P^T dO, dK += dS^T Q and the partial dQ = dS K, as above, with
 * one named barrier between the two only (dS^T's shared tile complete; two such tiles, used in
 * turn). Warpgroup 2 (setmaxnreg 24): one thread takes the next tile, hands its number to the others (a slot
 * written before kv_full completes) and loads with the tensor memory accelerator its K and V
 * (kv_full / kv_empty: refilled when the tile's last step is done) and, step after step, Q, dO
 * (a tensor map over dout [B][T][H D]) and lse2, Di (bulk copies of 256 bytes) into a ring of
 * two stages (full / empty mbarriers, released by each consumer warp when its products are
 * done); one thread of its second warp sends the staged dQ partials out (dq_full / dq_empty per
 * staging buffer, whose header names the tile and step): waits for the tile's turn on its
 * semaphore, issues the bulk copy or reduce-add, frees the buffer when the bulk operation has
 * read it and releases the semaphore when it is complete. The consumers thus never wait for a
 * semaphore except in key tile 0, which adds its partial to the sum itself and writes dQ as bf16.
 *
 * Within a step, S^T and dP^T are two groups: P^T and the issue of dV's product run under
 * dP^T's product; in key tile 0 the first half of the others' dQ sum is loaded under the dQ
 * product. The step's 16 lse2 a thread needs are read from shared memory into registers before
 * the products are issued, and its 16 Di before P^T: read after the waits, as they were, the loads
 * queued behind the products' operand reads (Nsight Compute put 5% of the consumers' stall
 * samples on the first use of lse2). 0.931-0.944 -> 0.896-0.908 ms at GPT 1.3B's shape on H100s,
 * D 64 unchanged, for 36 bytes of spills at D 128; both sets before the products (60 bytes of
 * spills) 0.928-0.931; the second half of key tile 0's dQ sum loaded before the first half's
 * stores, 96 bytes (not run). perf/results/kernels/attention-backward-stats-h100-2026-11-27.md.
 *
 * On an H100 (perf/attention_bench, B=8 T=2048 H=16 D=128, causal) 0.923 and 0.931 ms (372
 * and 369 TFLOP/s) against 1.131 and 1.134 ms for the earlier one-pass kernel, in the same run (one dS^T
 * tile and a second barrier per step: 0.929 and 0.936 there; without the two overlaps of the
 * paragraph above 0.933-0.947 ms in another run; with the split alone 0.960, within the
 * noise). Tried and left out: keeping a step's dQ product in flight under the next step's S^T and dP^T (its 32
 * accumulators live beside theirs and dK, dV: 140 bytes of spills, 1.295 ms); taking the next
 * tile before the current one's K and V are released (0.943 ms).
 *
 * At D 64 the same kernel (K, V tiles of 128 x 64, 130 KB of shared memory), but dQ = dS K is 64
 * queries x 64 columns: warpgroup w computes columns [32w, 32w + 32) over all 128 keys (eight
 * m64n32k16, B = K read MN-major from 64 bytes into its 128-byte rows; the 128-byte swizzle is a
 * function of the address, as for the K-major k-slices 32 bytes apart), so each thread again
 * holds D / 4 values and no halves need summing. On H100s (perf/attention_bench, B=32 T=1024
 * H=12 D=64, causal, three runs on three cards): 0.535, 0.535, 0.533 ms (about 241 TFLOP/s)
 * against 0.635, 0.636, 0.633 for the two passes in the same runs (main's bench 0.630, 0.634,
 * 0.632), and 0.713 for the earlier one-pass kernel. Tried and left out at D 64: four Q/dO
 * stages (0.533, 0.535: no gain); the dQ writer keeping one partial in flight, releasing its
 * semaphore after issuing the next (and before any wait that might depend on it): 0.547 at D 64,
 * 0.951 against 0.924 at D 128; skipping the causal mask in warps wholly below the diagonal
 * (warp-uniform branch): 0.539 against 0.534 (D 128: 0.920-0.925 against 0.927-0.934, noise);
 * issuing the next step's S^T and dP^T behind the dQ product (loop peeled so that the wait
 * counts are static): ptxas serializes every wgmma of the kernel (C7514), not run.
 *
 * The 128-query step (template STEP 128, D 64 only; MTC_SM90_BWD_STEP=128, see
 * cuda_attention_sm90_backward_step). At D 64 a 64 x 128 step has little tensor work (about 1280
 * clocks of the five products) against its fixed costs (mbarrier waits, the named barrier, the
 * statistics, the dQ staging and semaphore turn, the latency of each dependent product), so a
 * step of 128 queries (FlashAttention-3's kBlockM at hdim 64) halves those per FLOP and gives
 * each ss-wgmma of S^T and dP^T an n of 128 (m64n128k16: the same A bytes per twice the work).
 * Per warpgroup (64 keys) S^T and dP^T are 64 x 128 (64 fp32 each per thread); P^T is computed
 * under dP^T's product, then dS^T, then both are packed (eight k-slices each); dV += P^T dO is
 * issued, dS^T stored, dK += dS^T Q issued (the 64-query step's overlap of dV's product with
 * dP^T's would keep P^T's fragments beside S^T and dP^T: 224 live values). dS^T goes to one [128 keys][128
 * queries] tile (two 64-query blocks, 32 KB, the size of the two tiles of the 64-query step;
 * the staging buffers grow to 2 x 32 KB: 195 KB of shared memory) guarded by a second named
 * barrier before its stores (the other warpgroup's dQ product of the step before has read it).
 * dQ = dS K: warpgroup w computes its query block w (64 queries) x all 64 columns over the 128
 * keys (eight m64n64k16, as at D 128). dq_accum tiles are 128 x 64 (same workspace), the
 * semaphores the first half of dq_sems, the fixed order unchanged (key tile qt down to
 * sm90_kt_low). The causal mask runs only on steps that meet the diagonal (qt == kt), T or the
 * window's edge: below the diagonal every element of a 128-query step is visible (a block- or
 * warp-uniform branch; the exponential of a masked element may be inf, the mask replaces it).
 * Dropout draws the two 64-query halves' keep words per step. ptxas -v: 168 registers per thread
 * at launch (240 after setmaxnreg), 8 bytes of spills (with and without dropout). The default
 * at D 64 since its first run (one H200, perf/attention_bench --groups 8, Llama-3.2-1B's heads
 * H=32 G=8): B=4 T=4096 1.957 against 2.436 ms (351 against 282 TFLOP/s, 1.24x), B=1 T=16384
 * 7.36 against 9.48 ms (1.29x), dropout 0.1 at 4096 1.11x; dq, dk, dv the same as the 64-query
 * step's; perf/results/kernels/attention-backward-d64-h200-2026-11-30.md.
 *
 * GQA's head chunks (issue 44; H / G = per > 1). A tile walking every query head of its group
 * made the grid end on a long tile: dQ's order makes each group's key tile 0 (per x T / STEP
 * steps, the most) its last, and the other SMs idled while it ran (one H200, 64-query step,
 * Llama-3.2-1B's heads: 2.403 ms with 8 groups against 2.102 with 32 at B=4 T=4096, 9.70 against
 * 7.72 at B=1 T=16384; the same FLOPs). A work tile is now (batch, group, key tile, head chunk):
 * head_chunk query heads (1 where per > 1, cuda_attention_sm90_backward_head_chunk;
 * MTC_SM90_BWD_HEAD_SPLIT=0 keeps whole groups, head_chunk = per, one chunk: the kernel as
 * before, bitwise), so the longest tile is per times shorter. Tiles are numbered by key unit
 * (batch, group, key tile: the order above), within a unit by chunk, so that a unit's chunks
 * are taken one after another and run side by side (the same steps each). Each chunk computes
 * its heads' partial dK and dV of the unit's 128 keys and stores them, in fp32, in its own slot
 * of kv_accum (a [2 * 128 * D] tile per (unit, chunk), i.e. per work tile, thread-major: a
 * consumer thread's dK and dV fragments interleaved), then arrives on the unit's counter
 * (kv_sems, zeroed by the row kernel with dQ's semaphores; one atomic add, acq_rel, that
 * returns the count before it). The chunk that sees chunks - 1 is the last to finish: it reads
 * every slot and sums them in chunk order, ((p0 + p1) + p2) + ..., its own read back as stored
 * (in registers where it is chunk 0), so the bits do not depend on which chunk finished last;
 * then it writes dK and dV as bf16 and the bias partials, as the whole-group tile did. The
 * others go on to their next tile at once: no chunk waits for another (an earlier version
 * chained them, chunk c waiting for c - 1's sum: 2.06 ms against 1.99 whole at B=4 T=4096 on
 * one H200, 4096 chunk tiles paying some 5-9 us each). The consumers do this themselves after
 * the step loop (plain loads and stores; named barrier 3 between the stores and the one
 * thread's arrival, and again after it wrote whether the chunk is the last to a shared word):
 * only dK and dV are live there, and the producer loads the next tile's K, V and first steps
 * meanwhile. No chunk waits, so the chunks add nothing to the no-deadlock argument. dQ is
 * unchanged: each head's dQ partials come from the tiles of its own chunk, in descending key
 * tile order as before (bitwise the same dq); dK and dV differ from the whole-group tiles' by
 * fp32 reassociation (each chunk's products start at 0), deterministically. kv_accum is
 * chunks x 2G/H of dq_accum's size (twice it with one head a chunk; cuda_attention.cu allocates
 * it after it). ptxas -v spills as before (D 128 36 bytes, 48 with dropout; D 64 at the
 * 128-query step 8 and 24, at the 64-query step 0 and 0, 16 before). Not yet measured (no GPU
 * where this was written): perf/attention_bench --groups 8 times it against
 * MTC_SM90_BWD_HEAD_SPLIT=0. */
#define SM90_WSB_STAGES 2
#define SM90_WSB_THREADS 384

/* The sliding window (window < T; without one window is 1 << 29, and these give the causal
 * walks): key tile kt (128 keys) meets the query steps 2 kt .. (kt 128 + 127 + window) / 64, and
 * query step qt is met by key tiles qt / 2 (its diagonal: the partial stored first) down to
 * sm90_kt_low(qt) (the last partial, which writes dQ: key tile 0 without a window). Both sides
 * count the same tiles, so the semaphores' order (descending key tile) and the no-deadlock
 * argument below hold as before. */
#ifdef SM90_WGMMA
template <int STEP>
static __device__ __forceinline__ int sm90_qt_count(int kt, int q_tiles, int window) {
    return min(q_tiles, (kt * 128 + 127 + window) / STEP + 1) - kt * (128 / STEP);
}
template <int STEP>
static __device__ __forceinline__ int sm90_kt_low(int qt, int window) {
    return max(qt * STEP - window, 0) / 128;
}
/* work tile number -> (batch, group, key tile, head chunk) and its key unit (b, grp, key tile):
 * units group by group, within a group the last key tile first; a unit's chunks consecutive
 * ("GQA's head chunks" above; chunks == 1 without them) */
struct sm90_bwd_tile {
    int b, grp, kt, chunk, unit;
};
static __device__ __forceinline__ sm90_bwd_tile sm90_bwd_decode(int tile, int key_tiles, int chunks, int G) {
    sm90_bwd_tile w;
    w.unit = tile / chunks;
    w.chunk = tile - w.unit * chunks;
    const int bg = w.unit / key_tiles;
    w.b = bg / G;
    w.grp = bg % G;
    w.kt = key_tiles - 1 - w.unit % key_tiles;
    return w;
}
/* a chunk's dK/dV partial stored (every consumer thread's stores, then fenced, before this one
 * thread's arrival): the unit's count before it; the chunk that sees chunks - 1 is the last,
 * and its acquire makes the others' partials visible to it (then to its threads, by the barrier) */
static __device__ __forceinline__ int sm90_kv_arrive(int *sem) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(old) : "l"(sem) : "memory");
    return old;
}
#endif

/* K, V, the stages' Q and dO, two dS^T tiles, two dQ staging tiles, the stages' lse2 and Di (64
 * fp32 each), the mbarriers (kv_full, kv_empty, per stage
 * full and empty, per staging tile dq_full and dq_empty), 32 bytes of words (the tile slots, the
 * dQ headers, head chunks' last-finisher flag), the alignment slack */
static size_t sm90_backward_ws_smem_bytes(int D, int stages, int step) {
    return (size_t)2 * 128 * D * 2 + stages * (size_t)2 * step * D * 2 + 2 * 128 * 64 * 2 +
           (size_t)step * D * 4 * 2 + stages * 2 * step * 4 + 8 * (2 + 2 * stages + 4) + 32 + 1024;
}

#ifdef SM90_WGMMA
/* bytes bytes from global src to shared dst (16-byte aligned, a multiple of 16), counted on bar */
static __device__ __forceinline__ void sm90_bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
static __device__ __forceinline__ void sm90_named_sync(int id) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
/* the last finisher's sum of a unit's dK/dV partials, ((p0 + p1) + p2) + ..., into x and y (a
 * consumer thread's dK and dV fragments, holding chunk's partial as stored; p: their first
 * values in chunk 0's slot, interleaved x, y, x ... SM90_THREADS apart; the slots 2 N
 * SM90_THREADS apart). HOLD: chunk's own partial taken from the registers at its index, the
 * sum of the chunks before it in two more arrays (D 64); else (D 128, where those arrays
 * spilled some 400 bytes) read back from its slot. The same bits either way, and whoever is
 * last: an fp32 sum in chunk order of the same values (a + b is b + a). */
template <bool HOLD, int N>
static __device__ __forceinline__ void sm90_kv_sum(float (&x)[N], float (&y)[N], const float *p, int chunk, int chunks) {
    const size_t slot = 2 * N * SM90_THREADS;
    int c = 1; /* the next chunk to add */
    if (chunk != 0) {
        if constexpr (HOLD) {
            float a[N], b[N];
#pragma unroll
            for (int e = 0; e < N; e++) {
                a[e] = __ldcg(p + 2 * e * SM90_THREADS);
                b[e] = __ldcg(p + (2 * e + 1) * SM90_THREADS);
            }
#pragma unroll 1
            for (; c < chunk; c++) {
#pragma unroll
                for (int e = 0; e < N; e++) {
                    a[e] += __ldcg(p + c * slot + 2 * e * SM90_THREADS);
                    b[e] += __ldcg(p + c * slot + (2 * e + 1) * SM90_THREADS);
                }
            }
#pragma unroll
            for (int e = 0; e < N; e++) {
                x[e] = a[e] + x[e];
                y[e] = b[e] + y[e];
            }
            c = chunk + 1;
        } else {
#pragma unroll
            for (int e = 0; e < N; e++) {
                x[e] = __ldcg(p + 2 * e * SM90_THREADS);
                y[e] = __ldcg(p + (2 * e + 1) * SM90_THREADS);
            }
        }
    }
#pragma unroll 1
    for (; c < chunks; c++) {
#pragma unroll
        for (int e = 0; e < N; e++) {
            x[e] += __ldcg(p + c * slot + 2 * e * SM90_THREADS);
            y[e] += __ldcg(p + c * slot + (2 * e + 1) * SM90_THREADS);
        }
    }
}

/* The 128-query step (STEP 128, D 64; "the 128-query step" below): a lane's S^T and dP^T
 * fragments (64 keys x 128 queries per warpgroup) hold keys krow0 + g (+8) and queries q0 + 8n +
 * 2t (+1), n < 16, value 4n + e. P^T = exp2(S^T scale log2(e) - lse2) without any mask (lse at
 * the stage's 128 lse2 in shared memory): sm90_mask128 follows where the step needs one */
static __device__ __forceinline__ void sm90_probs128(float (&st)[64], const float *lse, int t, float scale_log2) {
#pragma unroll
    for (int n = 0; n < 16; n++) {
        const float2 l2 = *reinterpret_cast<const float2 *>(lse + 8 * n + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; e++)
            st[4 * n + e] = sm90_exp2(fmaf(st[4 * n + e], scale_log2, -((e & 1) ? l2.y : l2.x)));
    }
}
/* P^T 0 above the diagonal, for queries from T on and past the window (the values it replaces
 * may be inf: a select, no product) */
static __device__ __forceinline__ void sm90_mask128(float (&st)[64], int q0, int krow0, int g, int t, int T,
                                                    int window) {
#pragma unroll
    for (int n = 0; n < 16; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int q = q0 + 8 * n + 2 * t + (e & 1), k = krow0 + g + 8 * (e >> 1);
            if (q < k || q >= T || q - k > window) st[4 * n + e] = 0.0f;
        }
}
/* dS^T = P^T (dP^T - Di) into dpt (di at the stage's 128 Di in shared memory) */
static __device__ __forceinline__ void sm90_ds128(float (&dpt)[64], const float (&st)[64], const float *di, int t) {
#pragma unroll
    for (int n = 0; n < 16; n++) {
        const float2 d2 = *reinterpret_cast<const float2 *>(di + 8 * n + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; e++) dpt[4 * n + e] = st[4 * n + e] * (dpt[4 * n + e] - ((e & 1) ? d2.y : d2.x));
    }
}
#endif

template <int D, int STAGES, bool DROPOUT, int STEP>
static __global__ void __launch_bounds__(SM90_WSB_THREADS, 1)
attention_backward_ws_sm90_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap dout_map,
                                  nvbf16 *dqkv, float *dq_accum, int *dq_sems, int *tile_counter, const float *lse2,
                                  const float *di, float *bias_partials, float *kv_accum, int *kv_sems, int B,
                                  int T, int Tpad, int H, int G, int head_chunk, int chunks, int window,
                                  const sm90_dropout_args drop) {
#ifdef SM90_WGMMA
    static_assert(D == 128 || D == 64, "the warp-specialized backward is for head dimension 64 or 128");
    static_assert(STEP == SM90_BWD_STEP || (STEP == 128 && D == 64), "128-query steps at D 64 only");
    constexpr int KV_TILE = 128 * D * 2, Q_TILE = STEP * D * 2;
    constexpr int STAGE = 2 * Q_TILE, STATS = 2 * STEP * 4; /* Q and dO; lse2 and Di */
    /* D / 4 per thread (STEP 64), 32 (STEP 128) */
    constexpr int DQ_TILE = STEP * D, DQ_VALUES = DQ_TILE / SM90_THREADS;
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t k_tile = sm90_smem_addr(smem), v_tile = k_tile + KV_TILE, stages = v_tile + KV_TILE;
    const uint32_t ds_tiles = stages + STAGES * STAGE, dq_stage = ds_tiles + 2 * 128 * 64 * 2;
    const uint32_t stats = dq_stage + 2 * DQ_TILE * 4, kv_full = stats + STAGES * STATS, kv_empty = kv_full + 8;
#define SM90_FULL(s) (kv_full + 16 + 16 * (uint32_t)(s))
#define SM90_EMPTY(s) (kv_full + 24 + 16 * (uint32_t)(s))
#define SM90_DQ_FULL(j) (kv_full + 16 + 16 * STAGES + 16 * (uint32_t)(j))
#define SM90_DQ_EMPTY(j) (kv_full + 24 + 16 * STAGES + 16 * (uint32_t)(j))
    float *dq_stage_ptr = reinterpret_cast<float *>(smem + (dq_stage - k_tile));
    /* after the mbarriers: the tile of round r (slot r & 1, written by the loader before kv_full
     * completes), and per staging buffer the (tile, step) of the partial in it (-1: no more) */
    volatile int *tile_slot = reinterpret_cast<volatile int *>(smem + (kv_full - k_tile) + 8 * (2 + 2 * STAGES + 4));
    volatile int *dq_header = tile_slot + 2; /* buffer j: tile at 2j, step at 2j + 1 */
    volatile int *kv_last = tile_slot + 6; /* head chunks: whether this tile's chunk is its unit's last */

    /* head_chunk query heads per work tile (H / G: the group's all), chunks = H / G / head_chunk
     * per key unit (a parameter: computed here, it took a register through the steps, 4 bytes
     * more spills at D 128 and at D 64 without dropout) */
    const int per = H / G, key_tiles = (T + 127) / 128, tiles = B * G * key_tiles * chunks;
    const int q_tiles = (T + STEP - 1) / STEP, tiles_per_row = Tpad / STEP;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        mbar_init(kv_empty, 8); /* one arrival per consumer warp */
        for (int s = 0; s < STAGES; s++) {
            mbar_init(SM90_FULL(s), 1);
            mbar_init(SM90_EMPTY(s), 8);
        }
        for (int j = 0; j < 2; j++) {
            mbar_init(SM90_DQ_FULL(j), 2 * 128); /* every consumer thread after its stores */
            mbar_init(SM90_DQ_EMPTY(j), 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 2) { /* the producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (warp == 0 && lane == 0) { /* loads */
            int loaded = 0;
            for (int r = 0;; r++) {
                if (r > 0) mbar_wait(kv_empty, (uint32_t)(r - 1) & 1);
                const int tile = atomicAdd(tile_counter, 1);
                tile_slot[r & 1] = tile;
                if (tile >= tiles) { /* the consumers stop */
                    mbar_arrive(kv_full);
                    break;
                }
                const sm90_bwd_tile w = sm90_bwd_decode(tile, key_tiles, chunks, G);
                const int b = w.b, grp = w.grp, k0 = w.kt * 128, h0 = grp * per + w.chunk * head_chunk;
                const int qt_first = k0 / STEP, qt_count = sm90_qt_count<STEP>(w.kt, q_tiles, window);
                const int steps = head_chunk * qt_count;
                const int k_col = (int)qkv_key_offset(grp, H, G, D);
                mbar_arrive_expect_tx(kv_full, 2 * KV_TILE);
                sm90_tma_tile<128, D>(k_tile, &qkv_map, k_col, k0, b, kv_full);
                sm90_tma_tile<128, D>(v_tile, &qkv_map, k_col + D, k0, b, kv_full);
                for (int i = 0; i < steps; i++, loaded++) {
                    const int s = loaded % STAGES, h = h0 + i / qt_count;
                    const int q0 = (qt_first + i % qt_count) * STEP;
                    const uint32_t stage = stages + (uint32_t)s * STAGE;
                    if (loaded >= STAGES) mbar_wait(SM90_EMPTY(s), ((uint32_t)(loaded / STAGES) & 1) ^ 1);
                    mbar_arrive_expect_tx(SM90_FULL(s), 2 * Q_TILE + 2 * STEP * 4);
                    sm90_tma_tile<STEP, D>(stage, &qkv_map, (int)qkv_query_offset(h, H, G, D), q0, b, SM90_FULL(s));
                    sm90_tma_tile<STEP, D>(stage + Q_TILE, &dout_map, h * D, q0, b, SM90_FULL(s));
                    const size_t row = ((size_t)b * H + (size_t)h) * (size_t)Tpad + (size_t)q0;
                    const uint32_t stage_stats = stats + (uint32_t)s * STATS;
                    sm90_bulk_load(stage_stats, lse2 + row, STEP * 4, SM90_FULL(s));
                    sm90_bulk_load(stage_stats + STEP * 4, di + row, STEP * 4, SM90_FULL(s));
                }
            }
        } else if (warp == 1 && lane == 0) { /* dQ's partials out (key tiles above the query step's lowest) */
            for (int flushed = 0;; flushed++) {
                    const int buf = flushed & 1;
                    mbar_wait(SM90_DQ_FULL(buf), (uint32_t)(flushed / 2) & 1);
                    const int tile = dq_header[2 * buf], j = dq_header[2 * buf + 1];
                    if (tile < 0) break;
                    const sm90_bwd_tile w = sm90_bwd_decode(tile, key_tiles, chunks, G);
                    const int b = w.b, kt = w.kt;
                    const int qt_first = kt * (128 / STEP), qt_count = sm90_qt_count<STEP>(kt, q_tiles, window);
                    const int h = w.grp * per + w.chunk * head_chunk + j / qt_count, qt = qt_first + j % qt_count;
                    const int kt_first = qt * STEP / 128;
                    const size_t tile_index = ((size_t)b * H + (size_t)h) * (size_t)tiles_per_row + (size_t)qt;
                    float *acc = dq_accum + tile_index * DQ_TILE;
                    int *sem = dq_sems + tile_index;
                    const uint32_t src = dq_stage + (uint32_t)buf * DQ_TILE * 4;
                    if (kt == kt_first) {
                        sm90_bulk_store(acc, src, DQ_TILE * 4);
                    } else {
                        sm90_sem_wait(sem, kt_first - kt);
                        sm90_bulk_reduce_add(acc, src, DQ_TILE * 4);
                    }
                    sm90_bulk_commit();
                    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                    mbar_arrive(SM90_DQ_EMPTY(buf));
                    sm90_sem_release(sem);
            }
        }
        return;
    }

    /* a consumer */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int g = lane / 4, t = lane % 4;
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D), scale = 1.0f / sqrtf((float)D);
    const size_t qkv_stride = (size_t)(H + 2 * G) * D;
    const float *stats_smem = reinterpret_cast<const float *>(smem + (stats - k_tile));
    int used = 0, flushed = 0; /* steps consumed, partials staged (as the producer counts them) */
    for (int r = 0;; r++) {
        mbar_wait(kv_full, (uint32_t)r & 1);
        const int tile = tile_slot[r & 1];
        if (tile >= tiles) break;
        /* (decoded again after the steps, from the slot: fewer values live through them) */
        const sm90_bwd_tile w = sm90_bwd_decode(tile, key_tiles, chunks, G);
        const int b = w.b, kt = w.kt, h0 = w.grp * per + w.chunk * head_chunk;
        const int k0 = kt * 128, krow0 = k0 + 64 * wg + 16 * warp; /* this warp's first key */
        const int qt_first = kt * (128 / STEP), qt_count = sm90_qt_count<STEP>(kt, q_tiles, window);
        const int steps = head_chunk * qt_count;
        float dk[D / 2], dv[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; i++) dk[i] = dv[i] = 0.0f;
        for (int i = 0; i < steps; i++, used++) {
            const int s = used % STAGES, qt = qt_first + i % qt_count, q0 = qt * STEP;
            const uint32_t q_tile = stages + (uint32_t)s * STAGE, do_tile = q_tile + Q_TILE;
            const float *stage_stats = stats_smem + (size_t)s * (STATS / 4);
            uint32_t frag_p[STEP / 16][4], frag[STEP / 16][4]; /* A operands of dV's and dK's products */
            float dq[DQ_VALUES];
            if constexpr (STEP == 64) {
                /* dS^T alternates between two tiles: the one written here was last read by the dQ
                 * products of two steps ago, which both warpgroups waited for before the named
                 * barrier of the step between */
                const uint32_t ds_tile = ds_tiles + (uint32_t)(used & 1) * 128 * 64 * 2;
                mbar_wait(SM90_FULL(s), (uint32_t)(used / STAGES) & 1);
                /* the step's statistics into registers before the products: read after them, the
                 * loads wait behind the products' operand reads of shared memory */
                float2 lse_pairs[8], di_pairs[8];
                sm90_step_stats(lse_pairs, stage_stats, t);

                /* S^T, then dP^T in its own group: P^T and dV's product run under dP^T's */
                float st[32], dpt[32];
                wgmma_fence();
                sm90_issue_abt<SM90_BWD_STEP, D, 128>(st, k_tile, 64 * wg, q_tile, true);
                wgmma_commit();
                sm90_issue_abt<SM90_BWD_STEP, D, 128>(dpt, v_tile, 64 * wg, do_tile, true);
                wgmma_commit();
                /* dropout: the step's keep decisions, drawn while S^T and dP^T are computed */
                uint32_t keep = 0;
                if constexpr (DROPOUT)
                    keep = sm90_keep_bits_backward(drop, sm90_head_base(drop, b, h0 + i / qt_count, T), q0, krow0, g,
                                                   t, T);
                wgmma_wait<1>();
                fence_registers(st);
                sm90_step_stats(di_pairs, stage_stats + SM90_BWD_STEP, t); /* in flight under P^T and dP^T's wait */
                sm90_probs(st, lse_pairs, q0, krow0, g, t, T, scale_log2);
                if (q0 + SM90_BWD_STEP - 1 > krow0 + window) sm90_window_mask(st, q0, krow0, g, t, window);
                if constexpr (DROPOUT) { /* dV += (P keep)^T dO; keep_scale when dV is stored */
                    float kept[32];
    #pragma unroll
                    for (int e = 0; e < 32; e++) kept[e] = (keep >> e) & 1u ? st[e] : 0.0f;
                    sm90_pack_a<4>(frag_p, kept);
                } else {
                    sm90_pack_a<4>(frag_p, st);
                }
                fence_registers(dv);
                wgmma_fence();
                sm90_issue_ab<D, 4, SM90_BWD_STEP>(dv, frag_p, do_tile);
                wgmma_commit();
                wgmma_wait<1>(); /* dP^T (dV's product runs on) */
                fence_registers(dpt);
                if constexpr (DROPOUT) /* dP through the mask: dP keep / (1 - p) */
    #pragma unroll
                    for (int e = 0; e < 32; e++) dpt[e] = (keep >> e) & 1u ? dpt[e] * drop.keep_scale : 0.0f;
                sm90_ds(dpt, st, di_pairs);
                sm90_pack_a<4>(frag, dpt);
                unsigned char *ds_rows = smem + (ds_tile - k_tile) + (size_t)(64 * wg + 16 * warp + g) * 128;
    #pragma unroll
                for (int kk = 0; kk < 4; kk++)
    #pragma unroll
                    for (int j = 0; j < 4; j++)
                        *reinterpret_cast<uint32_t *>(ds_rows + (j & 1) * 8 * 128 + (((2 * kk + (j >> 1)) ^ g) << 4) +
                                                      4 * t) = frag[kk][j];
                fence_registers(dk);
                wgmma_fence();
                sm90_issue_ab<D, 4, SM90_BWD_STEP>(dk, frag, q_tile);
                wgmma_commit();
                fence_proxy_async(); /* dS^T written by st.shared, read by wgmma */
                sm90_named_sync(1);

                wgmma_fence();
                if constexpr (D == 128) sm90_issue_dq<8>(dq, ds_tile, k_tile, 0, wg);
                else sm90_issue_dq_half(dq, ds_tile, k_tile, wg);
                wgmma_commit();
            } else { /* the 128-query step (D 64) */
                mbar_wait(SM90_FULL(s), (uint32_t)(used / STAGES) & 1);
                float st[64], dpt[64];
                wgmma_fence();
                sm90_issue_abt<STEP, D, 128>(st, k_tile, 64 * wg, q_tile, true);
                wgmma_commit();
                sm90_issue_abt<STEP, D, 128>(dpt, v_tile, 64 * wg, do_tile, true);
                wgmma_commit();
                /* dropout: the keep decisions of the two 64-query halves (values 0-31, 32-63) */
                uint32_t keep[2] = {0u, 0u};
                if constexpr (DROPOUT) {
                    const uint64_t head_base = sm90_head_base(drop, b, h0 + i / qt_count, T);
                    keep[0] = sm90_keep_bits_backward(drop, head_base, q0, krow0, g, t, T);
                    keep[1] = sm90_keep_bits_backward(drop, head_base, q0 + 64, krow0, g, t, T);
                }
                wgmma_wait<1>();
                fence_registers(st);
                sm90_probs128(st, stage_stats, t, scale_log2); /* under dP^T's product */
                /* the mask only where the step meets the diagonal, T or the window's edge (block-
                 * or warp-uniform): below the diagonal every element is visible */
                if (qt == kt || q0 + STEP > T || q0 + STEP - 1 > krow0 + window)
                    sm90_mask128(st, q0, krow0, g, t, T, window);
                wgmma_wait<0>();
                fence_registers(dpt);
                if constexpr (DROPOUT) { /* dP through the mask: dP keep / (1 - p) */
#pragma unroll
                    for (int e = 0; e < 64; e++)
                        dpt[e] = (keep[e / 32] >> (e % 32)) & 1u ? dpt[e] * drop.keep_scale : 0.0f;
                }
                sm90_ds128(dpt, st, stage_stats + STEP, t);
                if constexpr (DROPOUT) { /* dV += (P keep)^T dO; keep_scale when dV is stored */
#pragma unroll
                    for (int e = 0; e < 64; e++)
                        if (!((keep[e / 32] >> (e % 32)) & 1u)) st[e] = 0.0f;
                }
                sm90_pack_a<8>(frag_p, st);
                sm90_pack_a<8>(frag, dpt);
                fence_registers(dv);
                wgmma_fence();
                sm90_issue_ab<D, 8, STEP>(dv, frag_p, do_tile);
                wgmma_commit();
                /* dS^T into its tile before dK's product is issued (an A fragment in flight may
                 * not be read). One dS^T tile: the other warpgroup's dQ product of the previous
                 * step has read it */
                sm90_named_sync(2);
                unsigned char *ds_rows = smem + (ds_tiles - k_tile) + (size_t)(64 * wg + 16 * warp + g) * 128;
#pragma unroll
                for (int kk = 0; kk < 8; kk++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        *reinterpret_cast<uint32_t *>(ds_rows + (kk / 4) * 128 * 128 + (j & 1) * 8 * 128 +
                                                      (((2 * (kk % 4) + (j >> 1)) ^ g) << 4) + 4 * t) = frag[kk][j];
                fence_registers(dk);
                wgmma_fence();
                sm90_issue_ab<D, 8, STEP>(dk, frag, q_tile);
                wgmma_commit();
                fence_proxy_async(); /* dS^T written by st.shared, read by wgmma */
                sm90_named_sync(1);
                /* dQ of the warpgroup's 64 queries (dS^T's query block wg), all 64 columns */
                wgmma_fence();
                sm90_issue_dq<8>(dq, ds_tiles + (uint32_t)wg * 128 * 128, k_tile, 0, 0);
                wgmma_commit();
            }

            /* the step's last key tile (0 without a window): the first half of the others' sum
             * loads under the product */
            const int h = h0 + i / qt_count, kt_first = qt * STEP / 128, kt_low = sm90_kt_low<STEP>(qt, window);
            const size_t tile_index = ((size_t)b * H + (size_t)h) * (size_t)tiles_per_row + (size_t)qt;
            const float *acc = dq_accum + tile_index * DQ_TILE + threadIdx.x;
            float early[16];
            if (kt == kt_low && kt_first > kt_low) {
                if (lane == 0) sm90_sem_wait(dq_sems + tile_index, kt_first - kt_low);
                __syncwarp();
#pragma unroll
                for (int e = 0; e < 16; e++) early[e] = __ldcg(acc + e * SM90_THREADS);
            }
            wgmma_wait_all();
            fence_registers(dv);
            fence_fragments(frag_p);
            fence_registers(dk);
            fence_fragments(frag);
            fence_registers(dq);
            if (lane == 0) {
                mbar_arrive(SM90_EMPTY(s)); /* Q, dO and the statistics read */
                if (i == steps - 1) mbar_arrive(kv_empty); /* K and V too */
            }
            if (kt > kt_low) { /* staged thread-major for the producer's bulk operation */
                const int buf = flushed & 1;
                if (flushed >= 2) mbar_wait(SM90_DQ_EMPTY(buf), ((uint32_t)(flushed / 2) & 1) ^ 1);
                float *stage_out = dq_stage_ptr + buf * DQ_TILE + threadIdx.x;
#pragma unroll
                for (int e = 0; e < DQ_VALUES; e++) stage_out[e * SM90_THREADS] = dq[e];
                if (threadIdx.x == 0) {
                    dq_header[2 * buf] = tile;
                    dq_header[2 * buf + 1] = i;
                }
                fence_proxy_async(); /* read by the bulk copy */
                mbar_arrive(SM90_DQ_FULL(buf));
                flushed++;
            } else { /* the last partial: the sum of the others plus this one, as bf16 into dqkv */
                /* the warpgroup's dQ: STEP 64 all queries, columns [wg D / 2, + D / 2); STEP 128
                 * queries [q0 + 64 wg, + 64), all columns */
                const int qrow0 = STEP == 128 ? q0 + 64 * wg : q0, col0 = STEP == 128 ? 0 : wg * (D / 2);
                nvbf16 *dq_base = dqkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D) + col0 + 2 * t;
#pragma unroll
                for (int half = 0; half < DQ_VALUES / 16; half++) {
                    float sum[16];
#pragma unroll
                    for (int e = 0; e < 16; e++)
                        sum[e] = kt_first == kt_low ? dq[16 * half + e]
                                 : (half == 0 ? early[e] : __ldcg(acc + (16 * half + e) * SM90_THREADS)) +
                                       dq[16 * half + e];
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const int q = qrow0 + 16 * warp + g + 8 * rr;
                        if (q >= T) continue;
#pragma unroll
                        for (int n = 0; n < 4; n++)
                            *reinterpret_cast<__nv_bfloat162 *>(dq_base + (size_t)q * qkv_stride + 8 * (4 * half + n)) =
                                __floats2bfloat162_rn(sum[4 * n + 2 * rr] * scale, sum[4 * n + 2 * rr + 1] * scale);
                    }
                    if (bias_partials != nullptr) { /* this warp's 16 query rows of the wg's columns */
                        const int q = qrow0 + 16 * warp + g;
                        float *row = bias_partials + ((size_t)b * (key_tiles * 8) + (size_t)(qrow0 / 16 + warp)) * qkv_stride +
                                     qkv_query_offset(h, H, G, D) + col0 + 8 * (4 * half) + 2 * t;
                        sm90_bias_rows<4>(row, sum, q < T, q + 8 < T, scale, g);
                    }
                }
            }
        }
        const sm90_bwd_tile w_end = sm90_bwd_decode(tile_slot[r & 1], key_tiles, chunks, G);
        const int grp = w_end.grp;
        if (chunks > 1) { /* the unit's partials summed in chunk order by its last finisher ("GQA's head chunks") */
            /* this chunk's slot: (unit, chunk) is the tile number */
            float *slot = kv_accum + ((size_t)w_end.unit * chunks + w_end.chunk) * (2 * 128 * D) + threadIdx.x;
#pragma unroll
            for (int e = 0; e < D / 2; e++) {
                __stcg(slot + (2 * e) * SM90_THREADS, dk[e]);
                __stcg(slot + (2 * e + 1) * SM90_THREADS, dv[e]);
            }
            __threadfence();
            sm90_named_sync(3); /* all 256 threads' partials stored before the one arrival */
            /* which of the 256 is told through a spare word after dq_header (a barrier that
             * reduced the flag, bar.red.or, spilled some 100 bytes more at D 64 and 128) */
            if (threadIdx.x == 0) kv_last[0] = sm90_kv_arrive(kv_sems + w_end.unit) == chunks - 1;
            sm90_named_sync(3);
            if (!kv_last[0]) continue; /* another chunk sums */
            /* the last: dK, dV = ((p0 + p1) + p2) ..., the same bits whoever it is */
            const float *p = slot - (size_t)w_end.chunk * (2 * 128 * D);
            sm90_kv_sum<D == 64>(dk, dv, p, w_end.chunk, chunks);
        }
        sm90_store_dkdv<D, DROPOUT>(dqkv, dk, dv, scale, b, grp, krow0 + g, t, T, H, G, drop.keep_scale);
        if (bias_partials != nullptr) { /* this warp's 16 keys, all columns of K and V */
            float *row = bias_partials + ((size_t)b * (key_tiles * 8) + (size_t)(krow0 / 16)) * qkv_stride +
                         qkv_key_offset(grp, H, G, D) + 2 * t;
            sm90_bias_rows<D / 8>(row, dk, krow0 + g < T, krow0 + g + 8 < T, scale, g);
            sm90_bias_rows<D / 8>(row + D, dv, krow0 + g < T, krow0 + g + 8 < T, DROPOUT ? drop.keep_scale : 1.0f, g);
        }
    }
    /* no more partials: the dQ warp stops */
    const int buf = flushed & 1;
    if (flushed >= 2) mbar_wait(SM90_DQ_EMPTY(buf), ((uint32_t)(flushed / 2) & 1) ^ 1);
    if (threadIdx.x == 0) dq_header[2 * buf] = -1;
    mbar_arrive(SM90_DQ_FULL(buf));
#undef SM90_FULL
#undef SM90_EMPTY
#undef SM90_DQ_FULL
#undef SM90_DQ_EMPTY
#else
    (void)qkv_map; (void)dout_map; (void)dqkv; (void)dq_accum; (void)dq_sems; (void)tile_counter; (void)lse2; (void)di; (void)B; (void)T;
    (void)Tpad; (void)H; (void)G; (void)bias_partials; (void)kv_accum; (void)kv_sems; (void)head_chunk; (void)chunks; (void)window;
    (void)drop;
#endif
}

/* ---------------------------------------------------------------------------------------------- */
/* the two-pass backward, under MTC_ATTENTION_FUSED_BACKWARD=0 (perf/attention_bench's "old"),
 * the default at head dimension 64 until the warp-specialized kernel above (it measured faster
 * than the earlier one-pass kernel: GPT-2 124M's shape on an H100, 0.671 against 0.717 ms
 * with the row kernel; 0.635 against the warp-specialized kernel's 0.535 now). One kernel
 * owns 128 keys (two warpgroups of 64) and walks the query tiles of 64 at or below the diagonal,
 * of every head of the key's group in turn: S^T = K Q^T and dP^T = V dO^T (keys as rows), then
 * dV += P^T dO and dK += dS^T Q with P^T and dS^T as register A fragments. A second owns 128
 * queries and walks the key tiles of 64 left of the diagonal: S = Q K^T, dP = dO V^T, dQ += dS K,
 * no atomics. In the dQ kernel a warpgroup whose 64 rows are all masked in a tile skips it; the
 * dK/dV kernels issue every product without a branch and let a step's dV and dK products run
 * under the next step's barrier and S^T, dP^T (three Q/dO stages). At D 64 the dK/dV kernel is
 * persistent (attention_backward_dkdv_persistent_sm90_kernel: the next tile's K, V and first
 * step load during a tile's last step) and keeps its K and V rows in registers (A fragments of
 * S^T and dP^T, which then read only Q and dO from shared memory). Measured on an H100 at
 * 124M's shape (B=32 T=1024 H=12 D=64, attention_bench, main's kernels in the same run):
 * 0.670 -> 0.669 ms (dV/dK under the next step), -> 0.665 (K, V in registers), -> 0.633
 * (persistent); at D 128 the two passes 1.27 -> 1.21 ms. Tried and left out (same H100, 124M
 * shape): the warpgroups taking turns issuing (the forward's ping-pong) in the dK/dV kernel
 * 0.668 against 0.669, in the dQ kernel (then without branches) 0.685, in the earlier one-pass kernel at
 * D 128 1.158 against 1.139; Q and dO rows of the dQ kernel in registers (one block per SM,
 * else it spills) 0.740 against 0.665; the dQ kernel's dQ product issued with the next tile's
 * S and dP (three K/V stages): spills at two blocks per SM. */
/* blocks per SM the backward kernels are compiled for at head dimension 64 (2 caps registers at
 * 128 per thread): the dQ kernel fits without spilling and gains (124M shape's backward 0.715 ->
 * 0.640 ms on an H200); the dK/dV kernel would spill and serialize its wgmma (0.830 ms) */
#ifndef SM90_DKDV_MIN_BLOCKS_64
#define SM90_DKDV_MIN_BLOCKS_64 1
#endif
#ifndef SM90_DQ_MIN_BLOCKS_64
#define SM90_DQ_MIN_BLOCKS_64 2
#endif
/* stages of the dK/dV kernel's Q/dO ring: three, so that a step's dV and dK products can run
 * on under the next step's barrier and first products */
#define SM90_BWD_PIPE_STAGES 3

#ifdef SM90_WGMMA
/* The rest of a dK/dV step once its S^T and dP^T products are issued (by the caller, after
 * wgmma_fence): commit and wait (which also covers the previous step's dV and dK), P^T and dS^T
 * from them, then dV += P^T dO and dK += dS^T Q issued (overwriting at the first step) and left
 * running into the next step. Shared by the two dK/dV kernels. */
template <int D>
static __device__ __forceinline__ void sm90_dkdv_step_products(float (&st)[32], float (&dpt)[32], float (&dv)[D / 2],
                                                               float (&dk)[D / 2], uint32_t (&frag_p)[4][4],
                                                               uint32_t (&frag_ds)[4][4], const float *stage_stats,
                                                               uint32_t q_tile, uint32_t do_tile, int q0, int krow0,
                                                               int g, int t, int T, float scale_log2, bool first) {
    wgmma_commit();
    wgmma_wait_all(); /* (and the previous step's dV and dK) */
    fence_registers(dv);
    fence_registers(dk);
    fence_fragments(frag_p);
    fence_fragments(frag_ds);
    fence_registers(st);
    fence_registers(dpt);
    sm90_probs_and_ds(st, dpt, stage_stats, q0, krow0, g, t, T, scale_log2);
    sm90_pack_a<4>(frag_p, st);
    wgmma_fence();
    sm90_issue_ab<D, 4, SM90_BWD_STEP>(dv, frag_p, do_tile, first);
    sm90_pack_a<4>(frag_ds, dpt);
    wgmma_fence();
    sm90_issue_ab<D, 4, SM90_BWD_STEP>(dk, frag_ds, q_tile, first);
    wgmma_commit();
}

/* the last step's dV and dK products are complete */
template <int D>
static __device__ __forceinline__ void sm90_dkdv_drain(float (&dv)[D / 2], float (&dk)[D / 2], uint32_t (&frag_p)[4][4],
                                                       uint32_t (&frag_ds)[4][4]) {
    wgmma_wait_all();
    fence_registers(dv);
    fence_registers(dk);
    fence_fragments(frag_p);
    fence_fragments(frag_ds);
}
#endif /* SM90_WGMMA */

template <int D>
static __global__ void __launch_bounds__(SM90_THREADS, D == 64 ? SM90_DKDV_MIN_BLOCKS_64 : 1)
attention_backward_dkdv_sm90_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                    const float *di, int T, int Tpad, int H, int G) {
#ifdef SM90_WGMMA
    constexpr int KV_TILE = 128 * D * 2, Q_TILE = SM90_BWD_STEP * D * 2;
    constexpr int STAGE = SM90_BWD_STAGE(D); /* Q, dO, lse2, Di; 1024-byte aligned */
    constexpr int STAGES = SM90_BWD_PIPE_STAGES;
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t k_tile = sm90_smem_addr(smem), v_tile = k_tile + KV_TILE, stages = v_tile + KV_TILE;
    const float *stats_smem = reinterpret_cast<const float *>(smem + 2 * KV_TILE);

    const int bg = blockIdx.x, b = bg / G, grp = bg % G, per = H / G;
    const int k0 = blockIdx.y * 128; /* the first key tiles see the most queries: they start first */
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int krow0 = k0 + 64 * wg + 16 * warp; /* this warp's first key */
    const size_t qkv_stride = (size_t)(H + 2 * G) * D;
    const nvbf16 *batch = qkv + (size_t)b * T * qkv_stride;
    const nvbf16 *k_base = batch + qkv_key_offset(grp, H, G, D);
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const int qt_first = k0 / SM90_BWD_STEP, qt_count = (T + SM90_BWD_STEP - 1) / SM90_BWD_STEP - qt_first;
    const int steps = per * qt_count;

    /* step i: head grp * per + i / qt_count, query tile qt_first + i % qt_count, stage i % STAGES */
    auto load_step = [&](int i) {
        const int h = grp * per + i / qt_count, q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
        sm90_load_bwd_step<D>(stages + (uint32_t)(i % STAGES) * STAGE, qkv, dout, lse2, di, b, h, q0, T, Tpad, H, G);
    };
    sm90_load_tile<128, D>(k_tile, k_base, qkv_stride, k0, T);
    sm90_load_tile<128, D>(v_tile, k_base + D, qkv_stride, k0, T);
    load_step(0);
    sm90_cp_async_commit();

    /* dK and dV are overwritten by step 0's products (scale-d 0): no zeroing instructions, which
     * ptxas would count inside the products' pipeline stage and serialize them for */
    float dk[D / 2], dv[D / 2];
    uint32_t frag_p[4][4], frag_ds[4][4]; /* A operands of the step's dV and dK products, in flight */

    /* Step i's dV and dK products run on while the warpgroups meet at the next step's barrier and
     * issue its S^T and dP^T (the wait after those covers them too). Stage i % STAGES is then
     * still read after step i: the load of step i + 1 is issued after the barrier of step i, by
     * which both warpgroups have waited for the products of step i - 1, the last readers of
     * stage (i + 1) % STAGES when STAGES is 3. */
    for (int i = 0; i < steps; i++) {
        const int q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
        const uint32_t q_tile = stages + (uint32_t)(i % STAGES) * STAGE, do_tile = q_tile + Q_TILE;
        const float *stage_stats = stats_smem + (size_t)(i % STAGES) * (STAGE / 4) + 2 * Q_TILE / 4;
        sm90_cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads();
        if (i + 1 < steps) load_step(i + 1);
        sm90_cp_async_commit();

        /* no branch around the products (ptxas serializes wgmma in a pipeline stage that spans
         * divergent paths): a warpgroup whose keys are all right of the tile's queries (the first
         * tile of a head, upper warpgroup) computes zeros, P and dS being masked */
        float st[32], dpt[32];
        wgmma_fence();
        sm90_issue_abt<SM90_BWD_STEP, D, 128>(st, k_tile, 64 * wg, q_tile, true);
        sm90_issue_abt<SM90_BWD_STEP, D, 128>(dpt, v_tile, 64 * wg, do_tile, true);
        sm90_dkdv_step_products<D>(st, dpt, dv, dk, frag_p, frag_ds, stage_stats, q_tile, do_tile, q0, krow0, g, t, T,
                                scale_log2, i == 0);
    }
    sm90_dkdv_drain<D>(dv, dk, frag_p, frag_ds);

    const float scale = 1.0f / sqrtf((float)D);
    sm90_store_dkdv<D>(dqkv, dk, dv, scale, b, grp, krow0 + g, t, T, H, G);
#else
    (void)dqkv; (void)dout; (void)qkv; (void)lse2; (void)di; (void)T; (void)Tpad; (void)H; (void)G;
#endif
}

/* The dK/dV kernel with a persistent grid (one block per SM; block k takes tiles k, 2 grid - 1 -
 * k, ... as the forward, tile = key tile x (B G) + batch x group, the longest first): the next
 * tile's K and V (two buffers) and first Q/dO step load during the last step of the one before,
 * so no block starts from an empty pipeline; at D 64 (where it is used: at 128 the two K/V
 * buffers would not fit beside the stages) the warp's K and V rows are read into registers at a
 * tile's first step. Otherwise the kernel above (124M's shape on an H100: 0.665 -> 0.633 ms). */
template <int D>
static __global__ void __launch_bounds__(SM90_THREADS, 1)
attention_backward_dkdv_persistent_sm90_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                               const float *di, int B, int T, int Tpad, int H, int G) {
#ifdef SM90_WGMMA
    constexpr int KV_TILE = 128 * D * 2, Q_TILE = SM90_BWD_STEP * D * 2;
    constexpr int STAGE = SM90_BWD_STAGE(D); /* Q, dO, lse2, Di; 1024-byte aligned */
    constexpr int STAGES = SM90_BWD_PIPE_STAGES;
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    /* K/V buffer j: K at kv0 + 2 j KV_TILE, V after it; then the stages */
    const uint32_t kv0 = sm90_smem_addr(smem), stages = kv0 + 4 * KV_TILE;
    const float *stats_smem = reinterpret_cast<const float *>(smem + 4 * KV_TILE);

    const int per = H / G, bgs = B * G, key_tiles = (T + 127) / 128, tiles = bgs * key_tiles;
    const int block = (int)blockIdx.x, grid = (int)gridDim.x;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D;
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const int q_tiles = (T + SM90_BWD_STEP - 1) / SM90_BWD_STEP;

    /* tile -> (b, grp, k0, first query tile, query tiles per head) */
    auto tile_b = [&](int tile) { return (tile % bgs) / G; };
    auto tile_grp = [&](int tile) { return (tile % bgs) % G; };
    auto tile_k0 = [&](int tile) { return (tile / bgs) * 128; };
    auto load_kv = [&](int tile, int buf) {
        const nvbf16 *k_base = qkv + (size_t)tile_b(tile) * T * qkv_stride + qkv_key_offset(tile_grp(tile), H, G, D);
        const uint32_t k_dst = kv0 + (uint32_t)buf * 2 * KV_TILE;
        sm90_load_tile<128, D>(k_dst, k_base, qkv_stride, tile_k0(tile), T);
        sm90_load_tile<128, D>(k_dst + KV_TILE, k_base + D, qkv_stride, tile_k0(tile), T);
    };
    auto load_step = [&](int tile, int i, int gstep) {
        const int qt_first = tile_k0(tile) / SM90_BWD_STEP, qt_count = q_tiles - qt_first;
        const int h = tile_grp(tile) * per + i / qt_count, q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
        sm90_load_bwd_step<D>(stages + (uint32_t)(gstep % STAGES) * STAGE, qkv, dout, lse2, di, tile_b(tile), h, q0,
                              T, Tpad, H, G);
    };

    int tile = sm90_ws_tile(0, block, grid); /* < tiles: grid <= tiles */
    load_kv(tile, 0);
    load_step(tile, 0, 0);
    sm90_cp_async_commit();

    float dk[D / 2], dv[D / 2];
    uint32_t frag_p[4][4], frag_ds[4][4];
    uint32_t k_frag[D == 64 ? 4 : 1][4], v_frag[D == 64 ? 4 : 1][4];
    int gstep = 0;
    for (int r = 0; tile < tiles; r++) {
        const int b = tile_b(tile), grp = tile_grp(tile), k0 = tile_k0(tile);
        const int qt_first = k0 / SM90_BWD_STEP, qt_count = q_tiles - qt_first, steps = per * qt_count;
        const int krow0 = k0 + 64 * wg + 16 * warp;
        const uint32_t k_tile = kv0 + (uint32_t)(r & 1) * 2 * KV_TILE, v_tile = k_tile + KV_TILE;
        const int next_tile = sm90_ws_tile(r + 1, block, grid);
        for (int i = 0; i < steps; i++, gstep++) {
            const int q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
            const uint32_t q_tile = stages + (uint32_t)(gstep % STAGES) * STAGE, do_tile = q_tile + Q_TILE;
            const float *stage_stats = stats_smem + (size_t)(gstep % STAGES) * (STAGE / 4) + 2 * Q_TILE / 4;
            sm90_cp_async_wait<0>();
            fence_proxy_async();
            __syncthreads();
            if constexpr (D == 64) {
                if (i == 0) {
                    const unsigned char *kv = smem + (size_t)(r & 1) * 2 * KV_TILE;
                    sm90_read_a<4, 128>(k_frag, kv, 64 * wg + 16 * warp, g, t);
                    sm90_read_a<4, 128>(v_frag, kv + KV_TILE, 64 * wg + 16 * warp, g, t);
                }
            }
            if (i + 1 < steps) {
                load_step(tile, i + 1, gstep + 1);
            } else if (next_tile < tiles) {
                load_kv(next_tile, (r + 1) & 1);
                load_step(next_tile, 0, gstep + 1);
            }
            sm90_cp_async_commit();

            float st[32], dpt[32];
            wgmma_fence();
            if constexpr (D == 64) {
                sm90_issue_rbt<4>(st, k_frag, q_tile);
                sm90_issue_rbt<4>(dpt, v_frag, do_tile);
            } else {
                sm90_issue_abt<SM90_BWD_STEP, D, 128>(st, k_tile, 64 * wg, q_tile, true);
                sm90_issue_abt<SM90_BWD_STEP, D, 128>(dpt, v_tile, 64 * wg, do_tile, true);
            }
            sm90_dkdv_step_products<D>(st, dpt, dv, dk, frag_p, frag_ds, stage_stats, q_tile, do_tile, q0, krow0, g, t,
                                    T, scale_log2, i == 0);
        }
        sm90_dkdv_drain<D>(dv, dk, frag_p, frag_ds);
        sm90_store_dkdv<D>(dqkv, dk, dv, 1.0f / sqrtf((float)D), b, grp, krow0 + g, t, T, H, G);
        tile = next_tile;
    }
#else
    (void)dqkv; (void)dout; (void)qkv; (void)lse2; (void)di; (void)B; (void)T; (void)Tpad; (void)H; (void)G;
#endif
}

template <int D>
static __global__ void __launch_bounds__(SM90_THREADS, D == 64 ? SM90_DQ_MIN_BLOCKS_64 : 1)
attention_backward_dq_sm90_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                  const float *di, int T, int Tpad, int H, int G) {
#ifdef SM90_WGMMA
    constexpr int Q_TILE = SM90_BM * D * 2, K_TILE = SM90_BWD_STEP * D * 2;
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t q_tile = sm90_smem_addr(smem), do_tile = q_tile + Q_TILE, stages = do_tile + Q_TILE;

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * SM90_BM;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int row0 = q0 + 64 * wg + 16 * warp;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const nvbf16 *batch = qkv + (size_t)b * T * qkv_stride;
    const nvbf16 *k_base = batch + qkv_key_offset(h / (H / G), H, G, D);
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const float *lse2_rows = lse2 + (size_t)bh * Tpad, *di_rows = di + (size_t)bh * Tpad;
    const float row_lse2[2] = {lse2_rows[row0 + g], lse2_rows[row0 + g + 8]};
    const float row_di[2] = {di_rows[row0 + g], di_rows[row0 + g + 8]};
    const int kt_last = min(q0 + SM90_BM - 1, T - 1) / SM90_BWD_STEP;

    sm90_load_tile<SM90_BM, D>(q_tile, batch + qkv_query_offset(h, H, G, D), qkv_stride, q0, T);
    sm90_load_tile<SM90_BM, D>(do_tile, dout + (size_t)b * T * out_stride + (size_t)h * D, out_stride, q0, T);
    sm90_load_tile<SM90_BWD_STEP, D>(stages, k_base, qkv_stride, 0, T);
    sm90_load_tile<SM90_BWD_STEP, D>(stages + K_TILE, k_base + D, qkv_stride, 0, T);
    sm90_cp_async_commit();

    float dq[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) dq[i] = 0.0f;

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * SM90_BWD_STEP;
        const uint32_t k_tile = stages + (uint32_t)(kt & 1) * 2 * K_TILE, v_tile = k_tile + K_TILE;
        if (kt < kt_last) {
            const uint32_t next = stages + (uint32_t)((kt + 1) & 1) * 2 * K_TILE;
            sm90_load_tile<SM90_BWD_STEP, D>(next, k_base, qkv_stride, k0 + SM90_BWD_STEP, T);
            sm90_load_tile<SM90_BWD_STEP, D>(next + K_TILE, k_base + D, qkv_stride, k0 + SM90_BWD_STEP, T);
        }
        sm90_cp_async_commit();
        sm90_cp_async_wait<1>();
        fence_proxy_async();
        __syncthreads();

        const bool active = k0 <= q0 + 64 * wg + 63; /* a key of the tile is left of a row here */
        float sc[32], dp[32];
        if (active) {
            wgmma_fence();
            sm90_issue_abt<SM90_BWD_STEP, D, SM90_BM>(sc, q_tile, 64 * wg, k_tile, true);
            sm90_issue_abt<SM90_BWD_STEP, D, SM90_BM>(dp, do_tile, 64 * wg, v_tile, true);
            wgmma_commit();
            wgmma_wait_all();
            fence_registers(sc);
            fence_registers(dp);
        }
        if (active) {
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int k = k0 + 8 * n + 2 * t + (e & 1), q = row0 + g + 8 * (e >> 1);
                    const float p = k > q ? 0.0f : sm90_exp2(fmaf(sc[4 * n + e], scale_log2, -row_lse2[e >> 1]));
                    dp[4 * n + e] = p * (dp[4 * n + e] - row_di[e >> 1]);
                }
            uint32_t frag[4][4];
            sm90_pack_a<4>(frag, dp);
            fence_registers(dq);
            wgmma_fence();
            sm90_issue_ab<D, 4, SM90_BWD_STEP>(dq, frag, k_tile);
            wgmma_commit();
            wgmma_wait_all();
            fence_registers(dq);
            fence_fragments(frag);
        }
        __syncthreads();
    }

    const float scale = 1.0f / sqrtf((float)D);
    nvbf16 *dq_base = dqkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int q = row0 + g + 8 * r;
        if (q >= T) continue;
        nvbf16 *dst = dq_base + (size_t)q * qkv_stride + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + 8 * n) =
                __floats2bfloat162_rn(dq[4 * n + 2 * r] * scale, dq[4 * n + 2 * r + 1] * scale);
    }
#else
    (void)dqkv; (void)dout; (void)qkv; (void)lse2; (void)di; (void)T; (void)Tpad; (void)H; (void)G;
#endif
}

/* the self-test's block: q, k [128][D] and v [128][D] bf16 (row-major); s_out [128][128] = Q K^T
 * and o_out [128][D] = bf16(Q K^T) V, fp32 */
template <int D>
static __global__ void __launch_bounds__(SM90_THREADS, 1)
attention_sm90_selftest_kernel(float *s_out, float *o_out, const nvbf16 *q, const nvbf16 *k, const nvbf16 *v) {
#ifdef SM90_WGMMA
    constexpr int TILE = SM90_BM * D * 2;
    extern __shared__ unsigned char sm90_smem_raw[];
    const uint32_t q_tile = sm90_smem_addr(sm90_smem_base(sm90_smem_raw)), k_tile = q_tile + TILE,
                   v_tile = k_tile + TILE;
    sm90_load_tile<SM90_BM, D>(q_tile, q, D, 0, SM90_BM);
    sm90_load_tile<SM90_BN, D>(k_tile, k, D, 0, SM90_BN);
    sm90_load_tile<SM90_BN, D>(v_tile, v, D, 0, SM90_BN);
    sm90_cp_async_commit();
    sm90_cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4, row0 = 64 * wg + 16 * warp;
    float s[64], o[D / 2];
    sm90_scores<D, 128>(s, q_tile, k_tile, wg);
    uint32_t p[8][4];
    sm90_pack_a<8>(p, s);
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
    sm90_add_pv<D, 128>(o, p, v_tile);
#pragma unroll
    for (int n = 0; n < 16; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            s_out[(size_t)(row0 + g + 8 * (e >> 1)) * SM90_BN + 8 * n + 2 * t + (e & 1)] = s[4 * n + e];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o_out[(size_t)(row0 + g + 8 * (e >> 1)) * D + 8 * n + 2 * t + (e & 1)] = o[4 * n + e];
#else
    (void)s_out; (void)o_out; (void)q; (void)k; (void)v;
#endif
}

static __global__ void attention_sm90_probe_kernel(int *has_wgmma) {
#ifdef SM90_WGMMA
    *has_wgmma = 1;
#else
    *has_wgmma = 0;
#endif
}

/* ---------------------------------------------------------------------------------------------- */
/* host side */

static size_t sm90_smem_bytes(int D) { return (size_t)5 * SM90_BM * D * 2 + 1024; }

/* 1 when the current device is an sm_90 GPU and runs this file's sm_90a code (asked once) */
extern "C" int cuda_attention_sm90_available(void) {
    static int available = -1;
    if (available >= 0) return available;
    int device = 0, major = 0, minor = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    available = 0;
    if (major == 9 && minor == 0) {
        int *flag = NULL, host_flag = 0;
        CHECK_CUDA(cudaMalloc(&flag, sizeof(int)));
        attention_sm90_probe_kernel<<<1, 1>>>(flag);
        CHECK_LAUNCH();
        CHECK_CUDA(cudaMemcpy(&host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaFree(flag));
        available = host_flag;
    }
    return available;
}

/* whether the forward of this call runs here: MTC_ATTENTION_SM90=0 turns the path off, and
 * MTC_ATTENTION_SM90_DROPOUT=0 turns it off for attention dropout (p > 0) only, so that the
 * mma.sync kernels run those calls as before (for comparisons) */
extern "C" int cuda_attention_sm90_applies(const void *out, const void *qkv, int D, float dropout_p) {
    const char *env = getenv("MTC_ATTENTION_SM90");
    if (env != NULL && strcmp(env, "0") == 0) return 0;
    if (dropout_p > 0.0f) {
        const char *drop_env = getenv("MTC_ATTENTION_SM90_DROPOUT");
        if (drop_env != NULL && strcmp(drop_env, "0") == 0) return 0;
    }
    return (D == 64 || D == 128) && dropout_p >= 0.0f && dropout_p < 1.0f && aligned16(out) && aligned16(qkv) &&
           cuda_attention_sm90_available();
}

/* the tensor maps the warp-specialized kernels load through: qkv as [B][T][(H+2G)D] (or dout as
 * [B][T][H D]) bf16, boxes of 64 columns x 64 rows, 128-byte swizzle, zeros past T. cuTensorMapEncodeTiled
 * comes from the driver through the runtime (no -lcuda). */
typedef CUresult (*sm90_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                         const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                         CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);
static CUtensorMap sm90_rows_tensor_map(const nvbf16 *base, int B, int T, size_t columns) {
    static sm90_encode_tiled_fn encode = NULL;
    if (encode == NULL) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess || fn == NULL)
            KERNELS_FATAL("cuTensorMapEncodeTiled: the driver does not provide it");
        encode = (sm90_encode_tiled_fn)fn;
    }
    const cuuint64_t dims[3] = {(cuuint64_t)columns, (cuuint64_t)T, (cuuint64_t)B};
    const cuuint64_t strides[2] = {(cuuint64_t)columns * 2, (cuuint64_t)columns * 2 * (cuuint64_t)T}; /* bytes */
    const cuuint32_t box[3] = {64, 64, 1}, element_strides[3] = {1, 1, 1};
    CUtensorMap map;
    const CUresult result = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)base, dims, strides, box,
                                   element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (result != CUDA_SUCCESS)
        KERNELS_FATAL("cuTensorMapEncodeTiled: error %d (B=%d T=%d columns=%zu)", (int)result, B, T, columns);
    return map;
}
static CUtensorMap sm90_qkv_tensor_map(const nvbf16 *qkv, int B, int T, int H, int G, int D) {
    return sm90_rows_tensor_map(qkv, B, T, (size_t)(H + 2 * G) * (size_t)D);
}

/* the number of SMs of the current device (asked once) */
static int sm90_sm_count(void) {
    static int count = 0;
    if (count == 0) {
        int device = 0;
        CHECK_CUDA(cudaGetDevice(&device));
        CHECK_CUDA(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    }
    return count;
}

/* the warp-specialized forward's shape: 128 keys per tile, two consumer warpgroups (128 query
 * rows per tile), two (K, V) stages. Measured on an H100 against these (ms at B=32 T=1024 H=12
 * D=64 / B=8 T=2048 H=16 D=128): three consumers (192 rows, 160 registers) 0.189 / -, three
 * stages - / 0.266, no ping-pong 0.171 / 0.276, 64 keys per tile 0.197 / -, this 0.169 / 0.260 */
#define SM90_WS_BN 128
#define SM90_WS_CONSUMERS 2
#define SM90_WS_STAGES 2

/* persistent: one block per SM, or per tile where there are fewer tiles */
template <int D, bool DROPOUT>
static void sm90_forward_ws_launch(nvbf16 *out, float *lse, const nvbf16 *qkv, int B, int T, int H, int G,
                                   int window, const sm90_dropout_args &drop) {
    auto kernel = attention_forward_ws_sm90_kernel<D, SM90_WS_BN, SM90_WS_CONSUMERS, SM90_WS_STAGES, DROPOUT>;
    const size_t smem = SM90_WS_SMEM(D, SM90_WS_BN, SM90_WS_CONSUMERS, SM90_WS_STAGES);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const CUtensorMap map = sm90_qkv_tensor_map(qkv, B, T, H, G, D);
    const size_t tiles = (size_t)B * H * ceil_div((size_t)T, (size_t)64 * SM90_WS_CONSUMERS);
    const size_t grid = tiles < (size_t)sm90_sm_count() ? tiles : (size_t)sm90_sm_count();
    kernel<<<(unsigned int)grid, 128 * (SM90_WS_CONSUMERS + 1), smem, compute_stream()>>>(map, out, lse, B, T, H, G,
                                                                                         window, drop);
    CHECK_LAUNCH();
}

extern "C" void cuda_attention_sm90_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H, int G,
                                            int D, int head_start, int total_heads, int window_left, dropout_rng rng) {
    const sm90_dropout_args drop = sm90_dropout_of(rng, head_start, total_heads);
    const bool dropout = rng.p > 0.0f;
    /* the kernel's window: window_left, or one past every distance (the unwindowed tests) */
    const int window = window_left >= 0 && window_left < T ? window_left : 1 << 29;
    if (D == 128) {
        if (dropout) sm90_forward_ws_launch<128, true>(as_nv(out), lse, as_nv(qkv), B, T, H, G, window, drop);
        else sm90_forward_ws_launch<128, false>(as_nv(out), lse, as_nv(qkv), B, T, H, G, window, drop);
    } else {
        if (dropout) sm90_forward_ws_launch<64, true>(as_nv(out), lse, as_nv(qkv), B, T, H, G, window, drop);
        else sm90_forward_ws_launch<64, false>(as_nv(out), lse, as_nv(qkv), B, T, H, G, window, drop);
    }
}

/* the warp-specialized backward (D 64 or 128) after cuda_attention.cu's row kernel (lse2, Di:
 * [B*H, Tpad], Tpad a multiple of 128; dq_sems [B*H, Tpad/64] and the tile counter after them
 * zeroed by it, and kv_sems; dq_accum [B*H, Tpad, D] fp32, any contents, 16-byte aligned; with
 * head chunks (head_chunk < H / G) kv_accum [B*G*ceil(T/128), H/G/head_chunk, 2*128*D] fp32, any contents):
 * persistent, one block per SM or per tile where there are fewer tiles */
template <int D, int STAGES, bool DROPOUT, int STEP>
static void sm90_backward_ws_launch(nvbf16 *dqkv, float *dq_accum, int *dq_sems, float *kv_accum, int *kv_sems,
                                    const nvbf16 *dout, const nvbf16 *qkv, const float *lse2, const float *di,
                                    float *bias_partials, int B, int T, int Tpad, int H, int G, int head_chunk,
                                    int window, const sm90_dropout_args &drop) {
    auto kernel = attention_backward_ws_sm90_kernel<D, STAGES, DROPOUT, STEP>;
    const size_t smem = sm90_backward_ws_smem_bytes(D, STAGES, STEP);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const CUtensorMap qkv_map = sm90_qkv_tensor_map(qkv, B, T, H, G, D);
    const CUtensorMap dout_map = sm90_rows_tensor_map(dout, B, T, (size_t)H * D);
    const size_t tiles = (size_t)B * G * ceil_div((size_t)T, 128) * (size_t)(H / G / head_chunk);
    const size_t grid = tiles < (size_t)sm90_sm_count() ? tiles : (size_t)sm90_sm_count();
    /* zeroed with the semaphores (dq_sems [B*H, Tpad/64]; 128-query steps use the first half) */
    int *tile_counter = dq_sems + (size_t)B * H * Tpad / SM90_BWD_STEP;
    kernel<<<(unsigned int)grid, SM90_WSB_THREADS, smem, compute_stream()>>>(
        qkv_map, dout_map, dqkv, dq_accum, dq_sems, tile_counter, lse2, di, bias_partials, kv_accum, kv_sems, B, T,
        Tpad, H, G, head_chunk, H / G / head_chunk, window, drop);
    CHECK_LAUNCH();
}

/* the dK/dV and dQ passes (the same inputs, no dQ accumulator) */
template <int D>
static void sm90_backward_two_pass(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                   const float *di, int B, int T, int Tpad, int H, int G) {
    if constexpr (D == 64) { /* persistent (at D 128 its two K/V buffers would not fit) */
        auto dkdv = attention_backward_dkdv_persistent_sm90_kernel<D>;
        const size_t dkdv_smem = (size_t)4 * 128 * D * 2 + SM90_BWD_PIPE_STAGES * (size_t)SM90_BWD_STAGE(D) + 1024;
        CHECK_CUDA(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem));
        const size_t tiles = (size_t)B * G * ceil_div((size_t)T, 128);
        const size_t grid = tiles < (size_t)sm90_sm_count() ? tiles : (size_t)sm90_sm_count();
        dkdv<<<(unsigned int)grid, SM90_THREADS, dkdv_smem, compute_stream()>>>(dqkv, dout, qkv, lse2, di, B, T, Tpad,
                                                                               H, G);
    } else {
        auto dkdv = attention_backward_dkdv_sm90_kernel<D>;
        const size_t dkdv_smem = (size_t)2 * 128 * D * 2 + SM90_BWD_PIPE_STAGES * (size_t)SM90_BWD_STAGE(D) + 1024;
        CHECK_CUDA(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem));
        dkdv<<<dim3((unsigned int)(B * G), ceil_div((size_t)T, 128)), SM90_THREADS, dkdv_smem, compute_stream()>>>(
            dqkv, dout, qkv, lse2, di, T, Tpad, H, G);
    }
    CHECK_LAUNCH();
    auto dq = attention_backward_dq_sm90_kernel<D>;
    const size_t dq_smem = (size_t)2 * SM90_BM * D * 2 + (size_t)4 * SM90_BWD_STEP * D * 2 + 1024;
    CHECK_CUDA(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem));
    dq<<<dim3((unsigned int)(B * H), ceil_div((size_t)T, SM90_BM)), SM90_THREADS, dq_smem, compute_stream()>>>(
        dqkv, dout, qkv, lse2, di, T, Tpad, H, G);
    CHECK_LAUNCH();
}

/* whether the backward of head dimension D is a one-pass kernel (it needs dq_accum and dq_sems):
 * by default (the warp-specialized kernel, D 64 and 128); MTC_ATTENTION_FUSED_BACKWARD=0 takes
 * the two passes (perf/attention_bench times the two against each other so) */
/* whether sliding-window calls take the wgmma kernels (forward and one-pass backward); 0 under
 * MTC_ATTENTION_SM90_WINDOW=0, which keeps them on the mma.sync kernels (a comparison, and a way
 * around) */
extern "C" int cuda_attention_sm90_window(void) {
    const char *env = getenv("MTC_ATTENTION_SM90_WINDOW");
    return !(env != NULL && strcmp(env, "0") == 0);
}

/* the query rows per step of the one-pass backward at head dimension 64: 128 ("the 128-query
 * step") or 64 (the kernel as at D 128), MTC_SM90_BWD_STEP=64 or 128 choosing; the default
 * SM90_BWD_STEP_64_DEFAULT (D 128 always steps 64) */
#ifndef SM90_BWD_STEP_64_DEFAULT
#define SM90_BWD_STEP_64_DEFAULT 128
#endif
extern "C" int cuda_attention_sm90_backward_step(int D) {
    if (D != 64) return SM90_BWD_STEP;
    const char *env = getenv("MTC_SM90_BWD_STEP");
    if (env != NULL && strcmp(env, "128") == 0) return 128;
    if (env != NULL && strcmp(env, "64") == 0) return 64;
    return SM90_BWD_STEP_64_DEFAULT;
}

/* the query heads per work tile of the one-pass backward ("GQA's head chunks" above): 1 where a
 * group has several (H / G > 1), unless MTC_SM90_BWD_HEAD_SPLIT=0; else H / G (whole groups).
 * Head chunks need kv_accum and kv_sems (cuda_attention_sm90_backward). On an H200 the chunks
 * win at every shape measured (perf/results/kernels/attention-backward-d64-h200-2026-11-30.md):
 * H=32 G=8 D=64 B=4 T=4096 1.80 against 2.00 ms, B=2 T=8192 1.15x, B=1 T=16384 1.16-1.18x; D 128
 * H=32 G=8 B=1 T=8192 1.35-1.42x, H=8 G=2 B=8 T=2048 1.43x. (The first version chained the sums,
 * each chunk waiting for the one before it: slower than whole groups at B=4 T=4096.) */
extern "C" int cuda_attention_sm90_backward_head_chunk(int H, int G) {
    const int per = H / G;
    const char *env = getenv("MTC_SM90_BWD_HEAD_SPLIT");
    if (per <= 1 || (env != NULL && strcmp(env, "0") == 0)) return per;
    return 1;
}

extern "C" int cuda_attention_sm90_backward_fused(int D) {
    (void)D;
    const char *env = getenv("MTC_ATTENTION_FUSED_BACKWARD");
    return !(env != NULL && strcmp(env, "0") == 0);
}

extern "C" void cuda_attention_sm90_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse2,
                                             const float *di, float *dq_accum, int *dq_sems, float *kv_accum,
                                             int *kv_sems, int head_chunk, float *bias_partials, int B, int T,
                                             int Tpad, int H, int G, int D, int head_start, int total_heads,
                                             int window_left, dropout_rng rng) {
    const int fused = cuda_attention_sm90_backward_fused(D);
    if (fused && (head_chunk <= 0 || (H / G) % head_chunk != 0 ||
                  (head_chunk < H / G && (kv_accum == NULL || kv_sems == NULL))))
        KERNELS_FATAL("cuda_attention_sm90_backward: head chunks of %d of %d heads need whole chunks, kv_accum "
                      "and kv_sems", head_chunk, H / G);
    const int window = window_left >= 0 && window_left < T ? window_left : 1 << 29; /* as the forward's */
    if (!fused && window_left >= 0 && window_left < T)
        KERNELS_FATAL("cuda_attention_sm90_backward: a sliding window needs the one-pass backward "
                      "(MTC_ATTENTION_FUSED_BACKWARD=0 runs it on the mma.sync kernels)");
    if (!fused && bias_partials != NULL)
        KERNELS_FATAL("cuda_attention_sm90_backward: bias partials need the one-pass backward");
    const bool dropout = rng.p > 0.0f;
    if (!fused && dropout)
        KERNELS_FATAL("cuda_attention_sm90_backward: attention dropout needs the one-pass backward "
                      "(MTC_ATTENTION_FUSED_BACKWARD=0 runs it on the mma.sync kernels)");
    const sm90_dropout_args drop = sm90_dropout_of(rng, head_start, total_heads);
#define SM90_BACKWARD_WS(DIM, DROP, STEP)                                                                         \
    sm90_backward_ws_launch<DIM, SM90_WSB_STAGES, DROP, STEP>(as_nv(dqkv), dq_accum, dq_sems, kv_accum, kv_sems,     \
                                                              as_nv(dout), as_nv(qkv), lse2, di, bias_partials, B, T, \
                                                              Tpad, H, G, head_chunk, window, drop)
    if (fused && D == 64 && cuda_attention_sm90_backward_step(64) == 128) {
        if (dropout) SM90_BACKWARD_WS(64, true, 128);
        else SM90_BACKWARD_WS(64, false, 128);
    } else if (fused && D == 64) {
        if (dropout) SM90_BACKWARD_WS(64, true, 64);
        else SM90_BACKWARD_WS(64, false, 64);
    } else if (fused) {
        if (dropout) SM90_BACKWARD_WS(128, true, 64);
        else SM90_BACKWARD_WS(128, false, 64);
    } else if (D == 128) {
        sm90_backward_two_pass<128>(as_nv(dqkv), as_nv(dout), as_nv(qkv), lse2, di, B, T, Tpad, H, G);
    } else {
        sm90_backward_two_pass<64>(as_nv(dqkv), as_nv(dout), as_nv(qkv), lse2, di, B, T, Tpad, H, G);
    }
#undef SM90_BACKWARD_WS
}

/* runs the two products on device copies of q, k, v (host [128][D] floats, rounded to bf16
 * here) and returns the largest |error| of S = Q K^T and of O = bf16(S) V against double
 * references on the host; -1 when the GPU has no sm_90a code */
extern "C" int cuda_attention_sm90_selftest(int D, const float *q, const float *k,
                                            const float *v, double *s_error, double *o_error) {
    if (!cuda_attention_sm90_available() || (D != 64 && D != 128)) return -1;
    const size_t n = (size_t)SM90_BM * D;
    nvbf16 *host = (nvbf16 *)malloc(3 * n * sizeof(nvbf16));
    float *s = (float *)malloc((size_t)SM90_BM * SM90_BN * sizeof(float)), *o = (float *)malloc(n * sizeof(float));
    if (!host || !s || !o) KERNELS_FATAL("cuda_attention_sm90_selftest: out of host memory");
    for (size_t i = 0; i < n; i++) {
        host[i] = __float2bfloat16_rn(q[i]);
        host[n + i] = __float2bfloat16_rn(k[i]);
        host[2 * n + i] = __float2bfloat16_rn(v[i]);
    }
    nvbf16 *d_in = NULL;
    float *d_s = NULL, *d_o = NULL;
    CHECK_CUDA(cudaMalloc(&d_in, 3 * n * sizeof(nvbf16)));
    CHECK_CUDA(cudaMalloc(&d_s, (size_t)SM90_BM * SM90_BN * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_o, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(d_in, host, 3 * n * sizeof(nvbf16), cudaMemcpyHostToDevice));
    auto kernel = D == 128 ? attention_sm90_selftest_kernel<128> : attention_sm90_selftest_kernel<64>;
    const size_t smem = sm90_smem_bytes(D);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<1, SM90_THREADS, smem>>>(d_s, d_o, d_in, d_in + n, d_in + 2 * n);
    CHECK_LAUNCH();
    CHECK_CUDA(cudaMemcpy(s, d_s, (size_t)SM90_BM * SM90_BN * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(o, d_o, n * sizeof(float), cudaMemcpyDeviceToHost));
    double s_err = 0.0, o_err = 0.0;
    for (int i = 0; i < SM90_BM; i++) {
        for (int j = 0; j < SM90_BN; j++) {
            double want = 0.0;
            for (int c = 0; c < D; c++)
                want += (double)__bfloat162float(host[(size_t)i * D + c]) * (double)__bfloat162float(host[n + (size_t)j * D + c]);
            s_err = fmax(s_err, fabs(want - (double)s[(size_t)i * SM90_BN + j]));
        }
        for (int c = 0; c < D; c++) {
            double want = 0.0;
            for (int j = 0; j < SM90_BN; j++) /* P is the GPU's own scores rounded to bf16 */
                want += (double)__bfloat162float(__float2bfloat16_rn(s[(size_t)i * SM90_BN + j])) *
                        (double)__bfloat162float(host[2 * n + (size_t)j * D + c]);
            o_err = fmax(o_err, fabs(want - (double)o[(size_t)i * D + c]));
        }
    }
    *s_error = s_err;
    *o_error = o_err;
    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_s));
    CHECK_CUDA(cudaFree(d_o));
    free(host);
    free(s);
    free(o);
    return 0;
}
