/* attention_bench_old.cuh: the previous attention kernels, kept for perf/attention_bench.cu to time
 * next to the current ones: kernels/cuda/cuda_attention_sm90.cu and kernels/cuda/cuda_attention.cu
 * as of commit 7aacded (Hopper backward in two passes: a dK/dV kernel per key tile and a dQ kernel
 * per query tile, each recomputing S, P, dP and dS), verbatim below but for their #include lines.
 * perf/attention_bench.cu includes this file inside a namespace after the current
 * cuda_attention.cu and renames cuda_attention_workspace_bytes, _forward and _backward; the other
 * C entry points, and the functions whose arguments would also find the current ones, are renamed
 * here (old_...) so that both versions build into one program. Not part of the library. */
#define attn_row_counter old_attn_row_counter
#define attention_forward_t old_attention_forward_t
#define attention_backward_t old_attention_backward_t
#define attn_backward_launch old_attn_backward_launch
#define attn_forward_launch old_attn_forward_launch
#define attention_backward_rows_kernel old_attention_backward_rows_kernel
#define attn_load_query_stage old_attn_load_query_stage
#define attn_load_tile old_attn_load_tile
#define attn_stage_rows old_attn_stage_rows
#define attn_store_rows old_attn_store_rows
#define attn_vector_io old_attn_vector_io
#define warp_gemm_abt old_warp_gemm_abt
#define warp_gemm_pv old_warp_gemm_pv
#define cp_async_16 old_cp_async_16
#define ldmatrix_x4 old_ldmatrix_x4
#define ldmatrix_x4_trans old_ldmatrix_x4_trans
#define smem_u32 old_smem_u32
#define cuda_attention_sm90_available old_cuda_attention_sm90_available
#define cuda_attention_sm90_applies old_cuda_attention_sm90_applies
#define cuda_attention_sm90_forward old_cuda_attention_sm90_forward
#define cuda_attention_sm90_backward old_cuda_attention_sm90_backward
#define cuda_attention_sm90_selftest old_cuda_attention_sm90_selftest
#define cuda_attention_forward_fp16 old_cuda_attention_forward_fp16
#define cuda_attention_backward_fp16 old_cuda_attention_backward_fp16

/* cuda_attention_sm90.cu: the causal flash attention forward on Hopper's warpgroup tensor cores
 * (wgmma, sm_90a), used by cuda_attention.cu's forward where it applies (head dimension 64 or
 * 128, no attention dropout, 16-byte aligned rows, an sm_90 GPU running this file's sm_90a
 * code); the same contract as that forward: qkv[B,T,(H+2G)*D] bf16 in kernels.h's grouped
 * layout, out[B,T,H,D] bf16, lse = m + log(l) (fp32 [B,H,T], natural log of the scaled scores),
 * so cuda_attention.cu's backward runs on its output unchanged.
 *
 * Block: 128 query rows, two warpgroups of 4 warps (64 rows each); it walks key tiles of 128
 * up to the diagonal. Per tile a warpgroup computes its 64 x 128 scores S = Q K^T with 8 (D/16)
 * wgmma.m64n128k16 (both operands from shared memory), runs the online softmax on them in
 * registers, turns P into bf16 A fragments without leaving registers (an accumulator's n8
 * blocks 2k and 2k+1 are exactly the A fragment of k-slice k, as for mma.sync), and adds
 * P V with 8 wgmma.m64nDk16 (A from registers, V from shared memory, transposed).
 *
 * Shared memory tiles (Q, and K and V double-buffered, filled with cp.async while the previous
 * tile is used) use the 128-byte swizzle wgmma reads: a [rows][D] tile is stored as D/64 column
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
 * cuda_attention_sm90_selftest runs the two products alone on one block, so that a wrong
 * layout shows up as "scores wrong" or "P V wrong" in tests/gpu/cuda_attention_test.c. */


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
/* Named barrier 1 staggers the forward's two warpgroups (FlashAttention-3's ping-pong): warpgroup
 * 1 starts a tile's scores only when warpgroup 0's are done, so one warpgroup's softmax runs while
 * the other's products use the tensor cores, instead of both at once (343 -> 363 TFLOP/s at the
 * 1.3B shape; the backward passes measured no gain from it and do not stagger). */
#ifndef SM90_NO_STAGGER /* (perf/attention_bench compares with -DSM90_NO_STAGGER) */
static __device__ __forceinline__ void sm90_stagger_wait(int wg) {
    if (wg == 1) asm volatile("bar.sync 1, 256;\n" ::: "memory");
}
static __device__ __forceinline__ void sm90_stagger_release(int wg) {
    if (wg == 0) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
}
#else
static __device__ __forceinline__ void sm90_stagger_wait(int) {}
static __device__ __forceinline__ void sm90_stagger_release(int) {}
#endif

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
        else wgmma_m64n64k16_ss(acc, da, db, overwrite && kk == 0 ? 0 : 1);
    }
}

/* Issue acc[64 x D] += A B: A as KS k-slices of 16 in registers (A fragments), B the first
 * 16 KS rows of a swizzled B_ROWS x D tile, MN-major (transposed) */
template <int D, int KS, int B_ROWS>
static __device__ __forceinline__ void sm90_issue_ab(float (&acc)[D / 2], const uint32_t (&a)[KS][4], uint32_t b_tile) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        const uint64_t db = sm90_desc(b_tile + (uint32_t)kk * 16 * 128, (uint32_t)B_ROWS * 128, 1024);
        if constexpr (D == 128) wgmma_m64n128k16_rs(acc, a[kk], db, 1);
        else wgmma_m64n64k16_rs(acc, a[kk], db, 1);
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

/* s[64 x BN] = Q[64 rows of warpgroup wg] K^T (all BN keys of the tile) */
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

/* the block's shared memory, rounded up to a 1024-byte boundary */
static __device__ __forceinline__ unsigned char *sm90_smem_base(unsigned char *raw) {
    const uint32_t addr = sm90_smem_addr(raw);
    return raw + ((1024u - (addr & 1023u)) & 1023u);
}
#endif /* SM90_WGMMA */

/* ---------------------------------------------------------------------------------------------- */
/* the forward: block = (batch x head, 128 query rows); grid y counts down so the longest rows
 * start first. Thread (warpgroup wg, warp w in it, lane = 4g + t) holds, per n8 block n of a
 * 64 x N accumulator, rows 64wg + 16w + g (elements 4n, 4n+1) and + 8 (4n+2, 4n+3), columns
 * 8n + 2t, 8n + 2t + 1. */
template <int D, int BN>
static __global__ void __launch_bounds__(SM90_THREADS, BN == 64 ? 2 : 1)
attention_forward_sm90_kernel(nvbf16 *out, float *lse, const nvbf16 *qkv, int T, int H, int G) {
#ifdef SM90_WGMMA
    constexpr int Q_TILE = SM90_BM * D * 2, TILE = BN * D * 2; /* bytes of the Q tile, of a K or V tile */
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t q_tile = sm90_smem_addr(smem), kv_tiles = q_tile + Q_TILE; /* stage s: K, V */

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * SM90_BM;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int row0 = q0 + 64 * wg + 16 * warp; /* this warp's first row */
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const nvbf16 *q_base = qkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D);
    const nvbf16 *k_base = qkv + (size_t)b * T * qkv_stride + qkv_key_offset(h / (H / G), H, G, D);
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const int kt_last = min(q0 + SM90_BM - 1, T - 1) / BN;

    sm90_load_tile<SM90_BM, D>(q_tile, q_base, qkv_stride, q0, T);
    sm90_load_tile<BN, D>(kv_tiles, k_base, qkv_stride, 0, T);
    sm90_load_tile<BN, D>(kv_tiles + TILE, k_base + D, qkv_stride, 0, T);
    sm90_cp_async_commit();

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * BN;
        const uint32_t k_tile = kv_tiles + (uint32_t)(kt & 1) * 2 * TILE, v_tile = k_tile + TILE;
        if (kt < kt_last) {
            const uint32_t next = kv_tiles + (uint32_t)((kt + 1) & 1) * 2 * TILE;
            sm90_load_tile<BN, D>(next, k_base, qkv_stride, k0 + BN, T);
            sm90_load_tile<BN, D>(next + TILE, k_base + D, qkv_stride, k0 + BN, T);
        }
        sm90_cp_async_commit();
        sm90_cp_async_wait<1>();
        fence_proxy_async();
        __syncthreads();

        float s[BN / 2];
        sm90_stagger_wait(wg);
        sm90_scores<D, BN>(s, q_tile, k_tile, wg);
        sm90_stagger_release(wg);
        if (k0 + BN - 1 > row0) { /* the diagonal crosses this warp's rows: causal mask */
#pragma unroll
            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + 8 * n + 2 * t + (e & 1) > row0 + g + 8 * (e >> 1)) s[4 * n + e] = -INFINITY;
        }
        float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int n = 0; n < BN / 8; n++) {
            m_new[0] = fmaxf(m_new[0], fmaxf(s[4 * n], s[4 * n + 1]));
            m_new[1] = fmaxf(m_new[1], fmaxf(s[4 * n + 2], s[4 * n + 3]));
        }
        float alpha[2], neg_m[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            m_new[i] = sm90_quad_max(m_new[i]);
            alpha[i] = sm90_exp2((m_run[i] - m_new[i]) * scale_log2);
            m_run[i] = m_new[i];
            neg_m[i] = -m_new[i] * scale_log2;
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
        uint32_t p[BN / 16][4];
        sm90_pack_a<BN / 16>(p, s);
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[4 * n] *= alpha[0];
            o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1];
            o[4 * n + 3] *= alpha[1];
        }
        sm90_add_pv<D, BN>(o, p, v_tile);
        __syncthreads(); /* both warpgroups are done with this stage before it is refilled */
    }

    nvbf16 *out_base = out + (size_t)b * T * out_stride + (size_t)h * D;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float l = sm90_quad_sum(l_run[i]), factor = 1.0f / l;
        const int row = row0 + g + 8 * i;
        if (row >= T) continue;
        if (t == 0) lse[(size_t)bh * T + row] = (m_run[i] * scale_log2 + log2f(l)) * SM90_LN2;
        nvbf16 *dst = out_base + (size_t)row * out_stride + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + 8 * n) =
                __floats2bfloat162_rn(o[4 * n + 2 * i] * factor, o[4 * n + 2 * i + 1] * factor);
    }
#else
    (void)out; (void)lse; (void)qkv; (void)T; (void)H; (void)G;
#endif
}

/* ---------------------------------------------------------------------------------------------- */
/* the backward (cuda_attention.cu's scheme, no atomics): lse2 = lse log2(e) and Di = dO.O per
 * row come from cuda_attention.cu's row kernel ([B*H, Tpad], zero past T);
 *   P = exp2(s scale_log2 - lse2),  dS = P (dP - Di),  dP = dO V^T
 * One kernel owns 128 keys (two warpgroups of 64) and walks the query tiles of 64 at or below
 * the diagonal, of every head of the key's group in turn: S^T = K Q^T and dP^T = V dO^T (keys as
 * rows), then dV += P^T dO and dK += dS^T Q with P^T and dS^T as register A fragments. A second
 * owns 128 queries and walks the key tiles of 64 left of the diagonal: S = Q K^T, dP = dO V^T,
 * dQ += dS K. A warpgroup whose 64 rows are all masked in a tile skips it (wgmma is issued by
 * whole warpgroups, so the test is per warpgroup). */
#define SM90_BWD_STEP 64 /* query rows (dK/dV) or keys (dQ) per step */
/* bytes of one stage of the dK/dV kernel: Q and dO tiles, then lse2 and Di (64 fp32 each),
 * padded so that the next stage's tiles stay 1024-byte aligned (the swizzle needs it) */
#define SM90_DKDV_STAGE(D) (2 * SM90_BWD_STEP * (D) * 2 + 1024)

#ifdef SM90_WGMMA
/* 64 fp32 of a [., Tpad] statistics row into shared memory (threads 0..15 of the block) */
static __device__ __forceinline__ void sm90_load_stats(uint32_t dst, const float *src) {
    if (threadIdx.x < 16) sm90_cp_async_16(dst + 16 * threadIdx.x, src + 4 * threadIdx.x, true);
}
#endif

/* blocks per SM the backward kernels are compiled for at head dimension 64 (2 caps registers at
 * 128 per thread): the dQ kernel fits without spilling and gains (124M shape's backward 0.715 ->
 * 0.640 ms on an H200); the dK/dV kernel would spill and serialize its wgmma (0.830 ms) */
#ifndef SM90_DKDV_MIN_BLOCKS_64
#define SM90_DKDV_MIN_BLOCKS_64 1
#endif
#ifndef SM90_DQ_MIN_BLOCKS_64
#define SM90_DQ_MIN_BLOCKS_64 2
#endif

template <int D>
static __global__ void __launch_bounds__(SM90_THREADS, D == 64 ? SM90_DKDV_MIN_BLOCKS_64 : 1)
attention_backward_dkdv_sm90_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                    const float *di, int T, int Tpad, int H, int G) {
#ifdef SM90_WGMMA
    constexpr int KV_TILE = 128 * D * 2, Q_TILE = SM90_BWD_STEP * D * 2;
    constexpr int STAGE = SM90_DKDV_STAGE(D); /* Q, dO, lse2, Di; 1024-byte aligned */
    extern __shared__ unsigned char sm90_smem_raw[];
    unsigned char *smem = sm90_smem_base(sm90_smem_raw);
    const uint32_t k_tile = sm90_smem_addr(smem), v_tile = k_tile + KV_TILE, stages = v_tile + KV_TILE;
    const float *stats_smem = reinterpret_cast<const float *>(smem + 2 * KV_TILE);

    const int bg = blockIdx.x, b = bg / G, grp = bg % G, per = H / G;
    const int k0 = blockIdx.y * 128; /* the first key tiles see the most queries: they start first */
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int krow0 = k0 + 64 * wg + 16 * warp; /* this warp's first key */
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const nvbf16 *batch = qkv + (size_t)b * T * qkv_stride;
    const nvbf16 *k_base = batch + qkv_key_offset(grp, H, G, D);
    const float scale_log2 = SM90_LOG2E / sqrtf((float)D);
    const int qt_first = k0 / SM90_BWD_STEP, qt_count = (T + SM90_BWD_STEP - 1) / SM90_BWD_STEP - qt_first;
    const int steps = per * qt_count;

    /* step i: head grp * per + i / qt_count, query tile qt_first + i % qt_count */
    auto load_step = [&](int i) {
        const int h = grp * per + i / qt_count, q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
        const uint32_t stage = stages + (uint32_t)(i & 1) * STAGE;
        sm90_load_tile<SM90_BWD_STEP, D>(stage, batch + qkv_query_offset(h, H, G, D), qkv_stride, q0, T);
        sm90_load_tile<SM90_BWD_STEP, D>(stage + Q_TILE, dout + (size_t)b * T * out_stride + (size_t)h * D,
                                         out_stride, q0, T);
        const size_t row = ((size_t)b * H + (size_t)h) * (size_t)Tpad + (size_t)q0;
        sm90_load_stats(stage + 2 * Q_TILE, lse2 + row);
        sm90_load_stats(stage + 2 * Q_TILE + SM90_BWD_STEP * 4, di + row);
    };
    sm90_load_tile<128, D>(k_tile, k_base, qkv_stride, k0, T);
    sm90_load_tile<128, D>(v_tile, k_base + D, qkv_stride, k0, T);
    load_step(0);
    sm90_cp_async_commit();

    float dk[D / 2], dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++) dk[i] = dv[i] = 0.0f;

    for (int i = 0; i < steps; i++) {
        const int q0 = (qt_first + i % qt_count) * SM90_BWD_STEP;
        const uint32_t q_tile = stages + (uint32_t)(i & 1) * STAGE, do_tile = q_tile + Q_TILE;
        const float *stage_stats = stats_smem + (size_t)(i & 1) * (STAGE / 4) + 2 * Q_TILE / 4;
        if (i + 1 < steps) load_step(i + 1);
        sm90_cp_async_commit();
        sm90_cp_async_wait<1>();
        fence_proxy_async();
        __syncthreads();

        const bool active = q0 + SM90_BWD_STEP - 1 >= k0 + 64 * wg; /* a query of the tile sees a key here */
        float st[32], dpt[32];
        if (active) {
            wgmma_fence();
            sm90_issue_abt<SM90_BWD_STEP, D, 128>(st, k_tile, 64 * wg, q_tile, true);
            sm90_issue_abt<SM90_BWD_STEP, D, 128>(dpt, v_tile, 64 * wg, do_tile, true);
            wgmma_commit();
            wgmma_wait_all();
            fence_registers(st);
            fence_registers(dpt);
        }
        if (active) {
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
            uint32_t frag[4][4];
            sm90_pack_a<4>(frag, st);
            fence_registers(dv);
            wgmma_fence();
            sm90_issue_ab<D, 4, SM90_BWD_STEP>(dv, frag, do_tile);
            wgmma_commit();
            wgmma_wait_all();
            fence_registers(dv);
            fence_fragments(frag);
            sm90_pack_a<4>(frag, dpt);
            fence_registers(dk);
            wgmma_fence();
            sm90_issue_ab<D, 4, SM90_BWD_STEP>(dk, frag, q_tile);
            wgmma_commit();
            wgmma_wait_all();
            fence_registers(dk);
            fence_fragments(frag);
        }
        __syncthreads(); /* every warpgroup is done with this stage before it is refilled */
    }

    const float scale = 1.0f / sqrtf((float)D);
    nvbf16 *dk_base = dqkv + (size_t)b * T * qkv_stride + qkv_key_offset(grp, H, G, D);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int k = krow0 + g + 8 * r;
        if (k >= T) continue;
        nvbf16 *dst = dk_base + (size_t)k * qkv_stride + 2 * t;
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            *reinterpret_cast<__nv_bfloat162 *>(dst + 8 * n) =
                __floats2bfloat162_rn(dk[4 * n + 2 * r] * scale, dk[4 * n + 2 * r + 1] * scale);
            *reinterpret_cast<__nv_bfloat162 *>(dst + D + 8 * n) =
                __floats2bfloat162_rn(dv[4 * n + 2 * r], dv[4 * n + 2 * r + 1]);
        }
    }
#else
    (void)dqkv; (void)dout; (void)qkv; (void)lse2; (void)di; (void)T; (void)Tpad; (void)H; (void)G;
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

/* whether the forward of this call runs here: MTC_ATTENTION_SM90=0 turns the path off */
extern "C" int cuda_attention_sm90_applies(const void *out, const void *qkv, int D, float dropout_p) {
    const char *env = getenv("MTC_ATTENTION_SM90");
    if (env != NULL && strcmp(env, "0") == 0) return 0;
    return (D == 64 || D == 128) && dropout_p == 0.0f && aligned16(out) && aligned16(qkv) &&
           cuda_attention_sm90_available();
}

/* keys per tile of the forward: 128, or 64 at D 64 (two blocks per SM, in smaller steps) */
#ifndef SM90_FWD_BN_64
#define SM90_FWD_BN_64 64
#endif

template <int D>
static void sm90_forward_launch(nvbf16 *out, float *lse, const nvbf16 *qkv, int B, int T, int H, int G) {
    constexpr int BN = D == 64 ? SM90_FWD_BN_64 : 128;
    auto kernel = attention_forward_sm90_kernel<D, BN>;
    const size_t smem = (size_t)SM90_BM * D * 2 + (size_t)4 * BN * D * 2 + 1024;
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned int)(B * H), (unsigned int)ceil_div((size_t)T, SM90_BM));
    kernel<<<grid, SM90_THREADS, smem, compute_stream()>>>(out, lse, qkv, T, H, G);
    CHECK_LAUNCH();
}

extern "C" void cuda_attention_sm90_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H, int G,
                                            int D) {
    if (D == 128) sm90_forward_launch<128>(as_nv(out), lse, as_nv(qkv), B, T, H, G);
    else sm90_forward_launch<64>(as_nv(out), lse, as_nv(qkv), B, T, H, G);
}

template <int D>
static void sm90_backward_launch(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv, const float *lse2,
                                 const float *di, int B, int T, int Tpad, int H, int G) {
    auto dkdv = attention_backward_dkdv_sm90_kernel<D>;
    const size_t dkdv_smem = (size_t)2 * 128 * D * 2 + 2 * (size_t)SM90_DKDV_STAGE(D) + 1024;
    CHECK_CUDA(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem));
    dkdv<<<dim3((unsigned int)(B * G), ceil_div((size_t)T, 128)), SM90_THREADS, dkdv_smem, compute_stream()>>>(
        dqkv, dout, qkv, lse2, di, T, Tpad, H, G);
    CHECK_LAUNCH();
    auto dq = attention_backward_dq_sm90_kernel<D>;
    const size_t dq_smem = (size_t)2 * SM90_BM * D * 2 + (size_t)4 * SM90_BWD_STEP * D * 2 + 1024;
    CHECK_CUDA(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem));
    dq<<<dim3((unsigned int)(B * H), ceil_div((size_t)T, SM90_BM)), SM90_THREADS, dq_smem, compute_stream()>>>(
        dqkv, dout, qkv, lse2, di, T, Tpad, H, G);
    CHECK_LAUNCH();
}

/* the dK/dV and dQ passes after cuda_attention.cu's row kernel (lse2, Di: [B*H, Tpad], Tpad a
 * multiple of 128) */
extern "C" void cuda_attention_sm90_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse2,
                                             const float *di, int B, int T, int Tpad, int H, int G, int D) {
    if (D == 128) sm90_backward_launch<128>(as_nv(dqkv), as_nv(dout), as_nv(qkv), lse2, di, B, T, Tpad, H, G);
    else sm90_backward_launch<64>(as_nv(dqkv), as_nv(dout), as_nv(qkv), lse2, di, B, T, Tpad, H, G);
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

/* cuda_attention.cu: causal multi-head flash attention in bf16 (FlashAttention-2 scheme with the
 * scores kept in registers), the GPU counterpart of kernels/cpu/cpu_attention.c. Every kernel
 * is a template on the 16-bit element type (cuda_kernels_t.cuh): bf16, or fp16 for --fp16, whose
 * products use mma.sync.m16n8k16.f32.f16.f16.f32 (below, "bf16" reads as either); the Hopper
 * wgmma path (cuda_attention_sm90.cu) is bf16 only, so fp16 always runs the kernels here.
 *
 * qkv[B,T,(H+2G)*D] bf16 (H query heads in G groups, kernels.h's layout: per group its query
 * heads, then its key and value head), out[B,T,H,D] bf16, fp32 accumulation. Grouped-query
 * attention reads the group's K and V tiles in place: the forward and dQ kernels of query head h
 * load group h/(H/G)'s keys, and the dK/dV kernel of a group walks the query tiles of each of its
 * heads in turn, summing their contributions in registers (no K/V copies, no atomics).
 * The T x T scores are never stored: the forward keeps a running row max m and row sum l
 * (online softmax) while it walks the key tiles left of the diagonal, and saves per query row
 * lse = m + log(l) (fp32 [B,H,T], natural log of the scaled scores) in the workspace.
 *
 *   s[i,j] = q_i.k_j / sqrt(D) (j <= i),  P = exp(s - lse),  out_i = sum_j P[i,j] keep[i,j]/(1-p) v_j
 *
 * The normalizer l sums the UNDROPPED exponentials: dropout applies after the softmax, as on the
 * CPU. keep[i,j] is philox_keep_attention of element rng.offset + ((b*total_heads + head_start + h)*T + i)*T
 * + j, exactly the CPU backend's counter, so both backends drop the same probabilities. With
 * rng.p == 0 the kernels are instantiated without any dropout code (DROPOUT = false).
 *
 * Backward (no atomics, so bitwise reproducible): with Di = rowsum(dO_i o O_i), which equals
 * sum_j P[i,j] dP[i,j] (dP below) because O already carries the dropout mask,
 *   dV_j = sum_i P[i,j] keep/(1-p) dO_i          dP[i,j] = keep/(1-p) dO_i.v_j
 *   dS[i,j] = P[i,j] (dP[i,j] - Di)               (softmax Jacobian)
 *   dK_j = sum_i dS[i,j] q_i / sqrt(D)            dQ_i = sum_j dS[i,j] k_j / sqrt(D)
 * A small kernel first computes Di and lse*log2(e) per row (zero-padded to a multiple of 128
 * rows) into a scratch buffer; then one kernel owns a key tile and walks the query tiles at or
 * below the diagonal (dK, dV: the scores are computed transposed, keys as rows), and a second
 * owns a query tile and walks the key tiles left of it (dQ), recomputing P and dP. With dropout
 * the dK/dV kernel also leaves its keep decisions as bits in the scratch buffer (one
 * __ballot_sync word per warp and fragment; B*H*T^2/8 bytes), so the dQ kernel reads them
 * instead of drawing every element's Philox number a second time.
 *
 * Tensor cores: every product is mma.sync.m16n8k16 (bf16 in, fp32 accumulate) on one warp's 16
 * rows; a warp never shares its rows, so the score tile, P, dP and dS live in its registers.
 * With g = lane / 4 and t = lane % 4, the fragments hold (PTX ISA, "mma.m16n8k16"):
 *   A 16x16 bf16, 4 regs of 2:  a0 = (g, 2t..2t+1)   a1 = (g+8, 2t..)   a2 = (g, 2t+8..)   a3 = (g+8, 2t+8..)
 *   B 16x8 bf16 (k x n), 2 regs: b0 = (k 2t..2t+1, n g)   b1 = (k 2t+8..2t+9, n g)
 *   C 16x8 fp32, 4 floats:       c0,c1 = (g, 2t..2t+1)   c2,c3 = (g+8, 2t..2t+1)
 * so the C fragments of two neighbouring n8 tiles (columns 16k..16k+7 and 16k+8..16k+15),
 * rounded to bf16 pairs, are exactly the A fragment of k-slice k: a score tile computed by one
 * mma feeds the next mma (P V, dS K, P^T dO, dS^T Q) without leaving registers. Each row's
 * values are spread over the 4 lanes of a quad (same g), so row max and row sum take two
 * xor-shuffles (1, 2).
 *
 * Operands come from shared memory through ldmatrix (8x8 b16 matrices, each of 8 lanes giving
 * one 16-byte row address): a row-major [rows][d] tile gives A fragments directly, B fragments
 * of "A times tile^T" (Q K^T: tile rows are the n index) directly, and B fragments of "A times
 * tile" (P V: tile rows are the k index) with .trans. Tiles are row-major with rows padded by 8
 * bf16 (16 bytes), which keeps every ldmatrix phase free of bank conflicts; they are filled by
 * cp.async 16-byte copies (zero-filled past T and past D), double-buffered so the next tile
 * streams in while the current one is used. The head dimension is padded with zeros to DP = 64
 * or 128 (any D <= 128); a D that is not a multiple of 8 takes a plain-load path. */



/* Tile shapes (rows per block are 16 per warp). The defaults can be overridden at compile time
 * (perf/attention_bench.cu builds variants). BN: keys per step of the forward and dQ kernels;
 * BM: queries per step of the dK/dV kernel. */
#ifndef ATTN_FWD_WARPS
#define ATTN_FWD_WARPS 8
#endif
#ifndef ATTN_FWD_BN
#define ATTN_FWD_BN 64
#endif
#ifndef ATTN_DQ_WARPS_64
#define ATTN_DQ_WARPS_64 8
#endif
#ifndef ATTN_DQ_WARPS_128
#define ATTN_DQ_WARPS_128 4
#endif
#ifndef ATTN_DQ_BN
#define ATTN_DQ_BN 64
#endif
#ifndef ATTN_DKDV_WARPS
#define ATTN_DKDV_WARPS 4
#endif
#ifndef ATTN_DKDV_BM_64
#define ATTN_DKDV_BM_64 32
#endif
#ifndef ATTN_DKDV_BM_128
#define ATTN_DKDV_BM_128 32
#endif

/* blocks per SM the compiler must fit (register budget) at DP = 64; 0 leaves it to ptxas */
#ifndef ATTN_FWD_MIN_BLOCKS_64
#define ATTN_FWD_MIN_BLOCKS_64 2
#endif
#ifndef ATTN_DQ_MIN_BLOCKS_64
#define ATTN_DQ_MIN_BLOCKS_64 0
#endif
#ifndef ATTN_DKDV_MIN_BLOCKS_64
#define ATTN_DKDV_MIN_BLOCKS_64 4
#endif

#define ATTN_T_PAD 128 /* the backward's row statistics are padded to a multiple of this */
#define ATTN_LD(DP) ((DP) + 8) /* shared-memory row length (bf16) of a [rows][DP] tile */

static const float attn_log2e = 1.4426950408889634f;
static const float attn_ln2 = 0.6931471805599453f;

/* ---------------------------------------------------------------------------------------------- */
/* PTX primitives */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i of lane
 * l receives row l/4, elements 2(l%4), 2(l%4)+1 of matrix i (with .trans: of its transpose) */
template <typename E>
static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const E *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
template <typename E>
static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const E *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

/* c (16x8 fp32) += a (16x16 E) b (16x8 E), E bf16 or fp16 (the instruction's operand type) */
template <typename E>
static __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    if constexpr (is_fp16<E>::value)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 16 bytes global -> shared without passing through registers; with valid == false the 16
 * bytes are zero-filled and nothing is read */
static __device__ __forceinline__ void cp_async_16(void *smem, const void *gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
static __device__ __forceinline__ void cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::);
}
/* wait until at most N of this thread's committed groups are still in flight */
template <int N>
static __device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

/* 2^x on the special-function unit (2^-inf = 0) */
static __device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---------------------------------------------------------------------------------------------- */
/* tiles: global <-> shared */

/* rows [row0, row0 + ROWS) of a row-major [T, row_stride] bf16 matrix, columns [0, D), into a
 * ROWS x LD shared tile, zero past T and in columns [D, DP). All THREADS threads of the block
 * call it. With vec (D % 8 == 0, 16-byte aligned rows) the copies are asynchronous cp.async
 * (the caller commits and waits); otherwise plain loads and stores. */
template <int DP, int ROWS, int THREADS, typename E>
static __device__ __forceinline__ void attn_load_tile(E *dst, const E *src,
                                                      size_t row_stride, int row0, int T, int D,
                                                      bool vec) {
    constexpr int LD = ATTN_LD(DP), CHUNKS = DP / 8; /* 16-byte pieces per row */
    if (vec) {
#pragma unroll 1
        for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += THREADS) {
            int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
            bool valid = row0 + r < T && c < D;
            const E *from = valid ? src + (size_t)(row0 + r) * row_stride + c : src;
            cp_async_16(dst + r * LD + c, from, valid);
        }
    } else {
        for (int idx = threadIdx.x; idx < ROWS * DP; idx += THREADS) {
            int r = idx / DP, c = idx % DP;
            E v = from_float<E>(0.0f);
            if (row0 + r < T && c < D) v = src[(size_t)(row0 + r) * row_stride + c];
            dst[r * LD + c] = v;
        }
    }
}

/* N floats (a multiple of 4, 16-byte aligned, always in bounds) into shared memory */
template <int N, int THREADS>
static __device__ __forceinline__ void attn_load_floats(float *dst, const float *src) {
    for (int idx = threadIdx.x; idx < N / 4; idx += THREADS)
        cp_async_16(dst + 4 * idx, src + 4 * idx, true);
}

/* one warp: the fp32 accumulator fragments acc (16 x DP) times the per-row factors (f0 for row g,
 * f1 for row g + 8), rounded to bf16, into the warp's own 16 shared rows `rows` (leading
 * dimension LD) */
template <int DP, typename E>
static __device__ __forceinline__ void attn_stage_rows(E *rows, const float (&acc)[DP / 8][4],
                                                       float f0, float f1, int lane) {
    constexpr int LD = ATTN_LD(DP);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < DP / 8; n++) {
        *reinterpret_cast<uint32_t *>(rows + g * LD + 8 * n + 2 * t) =
            pack_x2<E>(acc[n][0] * f0, acc[n][1] * f0);
        *reinterpret_cast<uint32_t *>(rows + (g + 8) * LD + 8 * n + 2 * t) =
            pack_x2<E>(acc[n][2] * f1, acc[n][3] * f1);
    }
}

/* one warp: its 16 staged shared rows to rows [row0, row0 + 16) of a row-major global bf16
 * matrix (row stride `row_stride`), skipping rows >= T and columns >= D */
template <int DP, typename E>
static __device__ __forceinline__ void attn_store_rows(E *dst, size_t row_stride,
                                                       const E *rows, int row0, int T, int D,
                                                       bool vec, int lane) {
    constexpr int LD = ATTN_LD(DP), CHUNKS = DP / 8;
    __syncwarp();
    if (vec) {
#pragma unroll
        for (int idx = lane; idx < 16 * CHUNKS; idx += 32) {
            int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
            if (row0 + r < T && c < D)
                *reinterpret_cast<uint4 *>(dst + (size_t)(row0 + r) * row_stride + c) =
                    *reinterpret_cast<const uint4 *>(rows + r * LD + c);
        }
    } else {
        for (int idx = lane; idx < 16 * DP; idx += 32) {
            int r = idx / DP, c = idx % DP;
            if (row0 + r < T && c < D) dst[(size_t)(row0 + r) * row_stride + c] = rows[r * LD + c];
        }
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* warp-level products (one warp, 16 rows) */

/* s[16 x 8 NT] = A B^T: A is the warp's 16 rows a_rows[16][DP], B the tile b_rows[8 NT][DP], both
 * row-major in shared memory (Q K^T, dO V^T, K Q^T, V dO^T) */
template <int DP, int NT, typename E>
static __device__ __forceinline__ void warp_gemm_abt(float (&s)[NT][4], const E *a_rows,
                                                     const E *b_rows, int lane) {
    constexpr int LD = ATTN_LD(DP);
#pragma unroll
    for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    /* A: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15); B: (rows 0-7, cols 0-7 | 8-15) then rows 8-15 */
    const E *a_lane = a_rows + (lane & 15) * LD + (lane >> 4) * 8;
    const E *b_lane = b_rows + ((lane & 7) + ((lane >> 4) << 3)) * LD + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++) {
        uint32_t a[4];
        ldmatrix_x4(a, a_lane + 16 * kk);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            ldmatrix_x4(b, b_lane + 16 * np * LD + 16 * kk);
            mma_16816<E>(s[2 * np], a, b[0], b[1]);
            mma_16816<E>(s[2 * np + 1], a, b[2], b[3]);
        }
    }
}

/* o[16 x DP] += P V: P is the 16 x 8 NT score-shaped accumulator p (C fragments, rounded to bf16
 * A fragments in registers), V the tile v_rows[8 NT][DP], row-major in shared memory (P V, dS K,
 * P^T dO, dS^T Q) */
template <int DP, int NT, typename E>
static __device__ __forceinline__ void warp_gemm_pv(float (&o)[DP / 8][4], const float (&p)[NT][4],
                                                    const E *v_rows, int lane) {
    constexpr int LD = ATTN_LD(DP);
    /* .trans matrices: (rows 0-7 | 8-15) x cols 0-7, then the same x cols 8-15 */
    const E *v_lane = v_rows + (lane & 15) * LD + (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t a[4];
        a[0] = pack_x2<E>(p[2 * kk][0], p[2 * kk][1]);
        a[1] = pack_x2<E>(p[2 * kk][2], p[2 * kk][3]);
        a[2] = pack_x2<E>(p[2 * kk + 1][0], p[2 * kk + 1][1]);
        a[3] = pack_x2<E>(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < DP / 16; dp++) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_lane + 16 * kk * LD + 16 * dp);
            mma_16816<E>(o[2 * dp], a, b[0], b[1]);
            mma_16816<E>(o[2 * dp + 1], a, b[2], b[3]);
        }
    }
}

/* Dropout: element (i, j) of head `head_index` (= b*total_heads + head_start + h) is kept iff
 * philox_keep_attention(seed, stream, offset + head_index*T*T, T, i, j, p), the CPU backend's
 * draw: word (i % 2) * 2 + j % 2 of the Philox call at the number of the 2 x 2 block's top-left
 * element. It tests ((x >> 8) + 1) / 2^24 > p on that word x, which is exactly
 * (x >> 8) >= floor(p 2^24) (every step is exact in fp32), the integer test below. A thread's
 * two neighbouring columns (forward: keys j, j+1; backward: queries i, i+1) share one call. The
 * kernels hoist the row part of the counter out of their loops. */
static __device__ __forceinline__ uint32_t attn_drop_threshold(float p) {
    return (uint32_t)floorf(p * 16777216.0f);
}
static __device__ __forceinline__ bool attn_word_keeps(uint32_t word, uint32_t threshold) {
    return (word >> 8) >= threshold;
}
/* offset + (head_index*T + i)*T: the counter of element (i, 0) */
static __device__ __forceinline__ uint64_t attn_row_counter(const dropout_rng &rng,
                                                            uint64_t head_index, int T, int i) {
    return rng.offset + (head_index * (uint64_t)T + (uint64_t)i) * (uint64_t)T;
}

/* Keep bits handed from the dK/dV kernel to the dQ kernel (so the backward draws each element
 * once), in the dK/dV kernel's fragment order: per (b*H + h, key block of 16, query block of 8)
 * four 32-bit words, one __ballot_sync of the warp each. Element (key, query) of a block is
 * word attn_keep_word(query & 1, (key >> 3) & 1), bit attn_keep_bit(key & 7, (query & 7) >> 1),
 * i.e. the lane (g = key & 7, t = (query & 7) / 2) that held it in the dK/dV kernel. */
static __device__ __forceinline__ size_t attn_keep_block(int bh, int key_block, int query_block,
                                                         int Tpad) {
    return ((size_t)bh * (Tpad / 16) + (size_t)key_block) * (size_t)(Tpad / 8) + (size_t)query_block;
}
static __device__ __forceinline__ int attn_keep_word(int query_odd, int key_high) {
    return 2 * query_odd + key_high;
}
static __device__ __forceinline__ int attn_keep_bit(int key_low, int query_pair) {
    return 4 * key_low + query_pair;
}

/* the four lanes of a quad hold one row: combine their values */
static __device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* ---------------------------------------------------------------------------------------------- */
/* forward: block = (batch x head, query tile of 16 WARPS rows), warp w owns rows 16w..16w+15;
 * walks key tiles of BN keys up to the diagonal. Grid y counts down the query tiles, so the
 * longest rows start first. */
template <int DP, int WARPS, int BN, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_FWD_MIN_BLOCKS_64 : 0)
attention_forward_kernel(E *out, float *lse, const E *qkv, int T, int H, int G, int D,
                         int head_start, int total_heads, dropout_rng rng, int vec) {
    constexpr int BM = 16 * WARPS, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    E *q_s = reinterpret_cast<E *>(attn_smem); /* BM x LD */
    E *kv_s = q_s + BM * LD;                         /* [stage 0, 1][K, V] BN x LD */

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const E *q_base = qkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D);
    const E *k_base = qkv + (size_t)b * T * qkv_stride + qkv_key_offset(h / (H / G), H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D); /* scores in base-2 units */
    const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);
    const int kt_last = min(q0 + BM - 1, T - 1) / BN;
    const uint32_t drop_threshold = attn_drop_threshold(rng.p);
    const uint64_t row_counter[2] = {attn_row_counter(rng, head_index, T, warp_row0 + g),
                                     attn_row_counter(rng, head_index, T, warp_row0 + g + 8)};

    attn_load_tile<DP, BM, THREADS>(q_s, q_base, qkv_stride, q0, T, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s, k_base, qkv_stride, 0, T, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + BN * LD, k_base + D, qkv_stride, 0, T, D, vec);
    cp_async_commit();

    float o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; /* rows g, g + 8 (raw scores), same in the quad */
    float l_run[2] = {0.0f, 0.0f};           /* this lane's part of the row sums */

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * BN;
        const E *k_s = kv_s + (kt & 1) * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (kt < kt_last) { /* prefetch the next K, V tiles into the other stage */
            E *next = kv_s + ((kt + 1) & 1) * 2 * BN * LD;
            attn_load_tile<DP, BN, THREADS>(next, k_base, qkv_stride, k0 + BN, T, D, vec);
            attn_load_tile<DP, BN, THREADS>(next + BN * LD, k_base + D, qkv_stride, k0 + BN, T,
                                            D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>(); /* this stage (and Q) has landed */
        __syncthreads();

        /* keys k0.. are right of every row of this warp: nothing to do. Otherwise key k0 is at
         * or left of every row (k0 and the warp's first row are multiples of 16), so each row
         * has an unmasked score and the running max becomes finite on the first tile. */
        if (k0 <= warp_row0 + 15) {
            float s[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            if (k0 + BN - 1 > warp_row0) { /* the diagonal crosses this tile: causal mask */
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (k0 + 8 * n + 2 * t + (e & 1) > warp_row0 + g + 8 * (e >> 1))
                            s[n][e] = -INFINITY;
            }
            /* online softmax: new row max, rescale factor of what was accumulated so far */
            float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
            for (int n = 0; n < NT; n++) {
                m_new[0] = fmaxf(m_new[0], fmaxf(s[n][0], s[n][1]));
                m_new[1] = fmaxf(m_new[1], fmaxf(s[n][2], s[n][3]));
            }
            float alpha[2], neg_m[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                m_new[i] = quad_max(m_new[i]);
                alpha[i] = fast_exp2((m_run[i] - m_new[i]) * scale_log2);
                m_run[i] = m_new[i];
                neg_m[i] = -m_new[i] * scale_log2;
                l_run[i] *= alpha[i];
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                philox_out words = {{0, 0, 0, 0}};
                bool drawn = false;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, neg_m[e >> 1]));
                    l_run[e >> 1] += p; /* the normalizer sums undropped probabilities */
                    if ((e & 1) == 0) drawn = false; /* keys col, col + 1 of a row share a call */
                    const int row = warp_row0 + g + 8 * (e >> 1);
                    if (DROPOUT && p > 0.0f && row < T) {
                        const int col = k0 + 8 * n + 2 * t + (e & 1);
                        if (!drawn) {
                            words = philox4x32(rng.seed, row_counter[e >> 1] - (uint64_t)(row & 1) * (uint64_t)T +
                                                             (uint64_t)(col & ~1), rng.stream);
                            drawn = true;
                        }
                        if (!attn_word_keeps(words.v[philox_attention_word(row, col)], drop_threshold)) p = 0.0f;
                    }
                    s[n][e] = p;
                }
            }
#pragma unroll
            for (int n = 0; n < DP / 8; n++) {
                o[n][0] *= alpha[0];
                o[n][1] *= alpha[0];
                o[n][2] *= alpha[1];
                o[n][3] *= alpha[1];
            }
            warp_gemm_pv<DP, NT>(o, s, v_s, lane);
        }
        __syncthreads(); /* every warp is done with this stage before it is refilled */
    }

    /* out = O keep_scale / l (dropout's 1/(1-p) deferred to here); lse in natural log */
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    float factor[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float l = quad_sum(l_run[i]);
        factor[i] = keep_scale / l;
        int row = warp_row0 + g + 8 * i;
        if (t == 0 && row < T)
            lse[(size_t)bh * T + row] = (m_run[i] * scale_log2 + log2f(l)) * attn_ln2;
    }
    E *stage = q_s + 16 * warp * LD; /* the warp's own Q rows, read only by this warp */
    attn_stage_rows<DP>(stage, o, factor[0], factor[1], lane);
    attn_store_rows<DP>(out + (size_t)b * T * out_stride + (size_t)h * D, out_stride, stage,
                        warp_row0, T, D, vec, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, step 0: per row (b, h, t) of the padded [B*H, Tpad] layout, lse2 = lse * log2(e) and
 * Di = dO_t . O_t (zero for t >= T). G = DP / 8 lanes per row, each taking 8 columns (16-byte
 * loads with vec, else a strided walk), then a fixed-order xor-shuffle sum over the G lanes. */
template <int DP, typename E>
static __global__ void attention_backward_rows_kernel(float *lse2, float *di, const E *dout,
                                                      const E *out, const float *lse,
                                                      int B, int T, int Tpad, int H, int D,
                                                      int vec) {
    constexpr int G = DP / 8;
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int part = threadIdx.x % G;
    const bool valid = row < (size_t)B * H * Tpad; /* no early return: all lanes shuffle */
    const size_t bh = valid ? row / Tpad : 0;
    const int t = valid ? (int)(row % Tpad) : T, b = (int)(bh / H), h = (int)(bh % H);
    float sum = 0.0f;
    if (t < T) {
        const size_t offset = ((size_t)b * T + t) * H * D + (size_t)h * D;
        if (vec) {
            if (part * 8 < D) {
                float x[8], y[8];
                load_x8(x, dout + offset + part * 8);
                load_x8(y, out + offset + part * 8);
#pragma unroll
                for (int i = 0; i < 8; i++) sum += x[i] * y[i];
            }
        } else {
            for (int d = part; d < D; d += G)
                sum += to_float(dout[offset + d]) * to_float(out[offset + d]);
        }
    }
#pragma unroll
    for (int offset = G / 2; offset > 0; offset >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (part == 0 && valid) {
        lse2[row] = t < T ? lse[bh * T + t] * attn_log2e : 0.0f;
        di[row] = sum;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* one stage of the dK/dV kernel: Q and dO rows [q0, q0 + BM) (BM x LD each), then their lse2 and
 * Di (BM floats each) */
template <int DP, int BM, int THREADS, typename E>
static __device__ __forceinline__ void attn_load_query_stage(
    E *stage, const E *q_base, size_t qkv_stride, const E *do_base,
    size_t out_stride, const float *lse2_rows, const float *di_rows, int q0, int T, int D,
    bool vec) {
    constexpr int LD = ATTN_LD(DP);
    float *stats = reinterpret_cast<float *>(stage + 2 * BM * LD);
    attn_load_tile<DP, BM, THREADS>(stage, q_base, qkv_stride, q0, T, D, vec);
    attn_load_tile<DP, BM, THREADS>(stage + BM * LD, do_base, out_stride, q0, T, D, vec);
    attn_load_floats<BM, THREADS>(stats, lse2_rows + q0);
    attn_load_floats<BM, THREADS>(stats + BM, di_rows + q0);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dK and dV: block = (batch x query group, key tile of 16 WARPS keys), warp w owns keys
 * 16w..16w+15; for each query head of the group in turn, walks its query tiles of BM rows from
 * the diagonal down, with S^T = K Q^T and dP^T = V dO^T in registers (keys as rows), so dK and
 * dV sum over the group's heads in registers. Grid y counts up the key tiles: the longest walks
 * start first. */
template <int DP, int WARPS, int BM, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_DKDV_MIN_BLOCKS_64 : 0)
attention_backward_dkdv_kernel(E *dqkv, uint32_t *keep_bits, const E *dout,
                               const E *qkv, const float *lse2, const float *di, int T,
                               int Tpad, int H, int G, int D, int head_start, int total_heads,
                               dropout_rng rng, int vec) {
    constexpr int BN = 16 * WARPS, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BM / 8;
    constexpr int STAGE = 2 * BM * LD + 2 * BM * 2; /* bf16 elements: Q, dO, then lse2, Di */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    E *k_s = reinterpret_cast<E *>(attn_smem); /* BN x LD */
    E *v_s = k_s + BN * LD;                         /* BN x LD */
    E *stages = v_s + BN * LD;                      /* [2][Q BM x LD, dO BM x LD, lse2, Di] */

    const int bg = blockIdx.x, b = bg / G, group = bg % G, per = H / G;
    const int k0 = blockIdx.y * BN;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_key0 = k0 + 16 * warp;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const E *k_base = qkv + (size_t)b * T * qkv_stride + qkv_key_offset(group, H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    const int qt_first = k0 / BM, qt_last = (T - 1) / BM, tiles = qt_last - qt_first + 1;
    const uint32_t drop_threshold = attn_drop_threshold(rng.p);

    /* step it of the walk: query head first_head + it / tiles, query tile qt_first + it % tiles */
    const int first_head = group * per, steps = per * tiles;
#define DKDV_HEAD_POINTERS(h)                                                                      \
    const E *q_base = qkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D);       \
    const E *do_base = dout + (size_t)b * T * out_stride + (size_t)(h) * D;                   \
    const size_t bh = (size_t)b * H + (size_t)(h);                                                 \
    const float *lse2_rows = lse2 + bh * Tpad, *di_rows = di + bh * Tpad;

    attn_load_tile<DP, BN, THREADS>(k_s, k_base, qkv_stride, k0, T, D, vec);
    attn_load_tile<DP, BN, THREADS>(v_s, k_base + D, qkv_stride, k0, T, D, vec);
    {
        DKDV_HEAD_POINTERS(first_head)
        attn_load_query_stage<DP, BM, THREADS>(stages, q_base, qkv_stride, do_base, out_stride,
                                               lse2_rows, di_rows, qt_first * BM, T, D, vec);
    }
    cp_async_commit();

    float dk[DP / 8][4], dv[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    for (int it = 0; it < steps; it++) {
        const int h = first_head + it / tiles, qt = qt_first + it % tiles;
        const int q0 = qt * BM, i = it & 1;
        const size_t bh = (size_t)b * H + (size_t)h;
        const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);
        /* counter of element (i, key) = offset + head_index*T*T + key + i*T */
        const uint64_t key_counter[2] = {attn_row_counter(rng, head_index, T, 0) + warp_key0 + g,
                                         attn_row_counter(rng, head_index, T, 0) + warp_key0 + g + 8};
        const E *q_s = stages + i * STAGE, *do_s = q_s + BM * LD;
        const float *lse2_s = reinterpret_cast<const float *>(do_s + BM * LD), *di_s = lse2_s + BM;
        if (it + 1 < steps) { /* prefetch the next step's query tile into the other stage */
            const int next_h = first_head + (it + 1) / tiles, next_qt = qt_first + (it + 1) % tiles;
            DKDV_HEAD_POINTERS(next_h)
            attn_load_query_stage<DP, BM, THREADS>(stages + (i ^ 1) * STAGE, q_base, qkv_stride,
                                                   do_base, out_stride, lse2_rows, di_rows,
                                                   next_qt * BM, T, D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        if (q0 + BM - 1 >= warp_key0) { /* some query of the tile sees some key of the warp */
            float s[NT][4], dp[NT][4]; /* S^T, dP^T: row = key (g, g + 8), column = query */
            uint32_t my_keep_word = 0;
            warp_gemm_abt<DP, NT>(s, k_s + 16 * warp * LD, q_s, lane);
            warp_gemm_abt<DP, NT>(dp, v_s + 16 * warp * LD, do_s, lane);
            const bool mask = warp_key0 + 15 > q0 || q0 + BM > T;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(lse2_s + 8 * n + 2 * t);
                const float2 dd = *reinterpret_cast<const float2 *>(di_s + 8 * n + 2 * t);
                philox_out words = {{0, 0, 0, 0}};
                bool drawn = false;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if ((e & 1) == 0) drawn = false; /* queries query, query + 1 of a key share a call */
                    const int key = warp_key0 + g + 8 * (e >> 1), query = q0 + 8 * n + 2 * t + (e & 1);
                    const bool visible = !(mask && (key > query || query >= T));
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -((e & 1) ? l2.y : l2.x)));
                    if (!visible) p = 0.0f;
                    float dpv = dp[n][e];
                    float kept_p = p;
                    if (DROPOUT) {
                        bool keep = false;
                        if (visible) {
                            if (!drawn) {
                                words = philox4x32(rng.seed, key_counter[e >> 1] - (uint64_t)(key & 1) +
                                                                 (uint64_t)(query & ~1) * (uint64_t)T, rng.stream);
                                drawn = true;
                            }
                            keep = attn_word_keeps(words.v[philox_attention_word(query, key)], drop_threshold);
                        }
                        dpv = keep ? dpv * keep_scale : 0.0f;
                        kept_p = keep ? p : 0.0f;
                        /* the warp's 32 draws of (n, e) form one word of the keep bits */
                        const uint32_t word = __ballot_sync(0xffffffffu, keep);
                        if (lane == 4 * n + attn_keep_word(e & 1, e >> 1)) my_keep_word = word;
                    }
                    s[n][e] = kept_p;                              /* P keep, for dV */
                    dp[n][e] = p * (dpv - ((e & 1) ? dd.y : dd.x)); /* dS, for dK */
                }
            }
            if (DROPOUT && lane < 4 * NT) /* words of query blocks q0/8 .. q0/8 + NT - 1 */
                keep_bits[attn_keep_block(bh, warp_key0 >> 4, q0 >> 3, Tpad) * 4 + lane] =
                    my_keep_word;
            warp_gemm_pv<DP, NT>(dv, s, do_s, lane); /* dV += (P keep)^T dO */
            warp_gemm_pv<DP, NT>(dk, dp, q_s, lane); /* dK += dS^T Q */
        }
        __syncthreads(); /* every warp is done with this stage before it is refilled */
    }

#undef DKDV_HEAD_POINTERS
    /* dK = scale dS^T Q, dV = keep_scale (P keep)^T dO, staged in the warp's own K and V rows */
    const float scale = 1.0f / sqrtf((float)D);
    E *dk_base = dqkv + (size_t)b * T * qkv_stride + qkv_key_offset(group, H, G, D);
    E *k_stage = k_s + 16 * warp * LD, *v_stage = v_s + 16 * warp * LD;
    attn_stage_rows<DP>(k_stage, dk, scale, scale, lane);
    attn_store_rows<DP>(dk_base, qkv_stride, k_stage, warp_key0, T, D, vec, lane);
    attn_stage_rows<DP>(v_stage, dv, keep_scale, keep_scale, lane);
    attn_store_rows<DP>(dk_base + D, qkv_stride, v_stage, warp_key0, T, D, vec, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dQ: block = (batch x head, query tile of 16 WARPS rows), warp w owns rows
 * 16w..16w+15; walks key tiles of BN keys up to the diagonal, recomputing S = Q K^T and
 * dP = dO V^T in registers. Grid y counts down the query tiles. */
template <int DP, int WARPS, int BN, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_DQ_MIN_BLOCKS_64 : 0)
attention_backward_dq_kernel(E *dqkv, const uint32_t *keep_bits, const E *dout,
                             const E *qkv, const float *lse2, const float *di, int T,
                             int Tpad, int H, int G, int D, dropout_rng rng, int vec) {
    constexpr int BM = 16 * WARPS, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    E *q_s = reinterpret_cast<E *>(attn_smem); /* BM x LD */
    E *do_s = q_s + BM * LD;                         /* BM x LD */
    E *kv_s = do_s + BM * LD;                        /* [stage 0, 1][K, V] BN x LD */

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t qkv_stride = (size_t)(H + 2 * G) * D, out_stride = (size_t)H * D;
    const E *q_base = qkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D);
    const E *k_base = qkv + (size_t)b * T * qkv_stride + qkv_key_offset(h / (H / G), H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    const int kt_last = min(q0 + BM - 1, T - 1) / BN;

    /* rows g and g + 8 of the warp (padded statistics: no bounds check) */
    const float *lse2_rows = lse2 + (size_t)bh * Tpad, *di_rows = di + (size_t)bh * Tpad;
    const float row_lse2[2] = {lse2_rows[warp_row0 + g], lse2_rows[warp_row0 + g + 8]};
    const float row_di[2] = {di_rows[warp_row0 + g], di_rows[warp_row0 + g + 8]};

    attn_load_tile<DP, BM, THREADS>(q_s, q_base, qkv_stride, q0, T, D, vec);
    attn_load_tile<DP, BM, THREADS>(do_s, dout + (size_t)b * T * out_stride + (size_t)h * D,
                                    out_stride, q0, T, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s, k_base, qkv_stride, 0, T, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + BN * LD, k_base + D, qkv_stride, 0, T, D, vec);
    cp_async_commit();

    float dq[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * BN;
        const E *k_s = kv_s + (kt & 1) * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (kt < kt_last) {
            E *next = kv_s + ((kt + 1) & 1) * 2 * BN * LD;
            attn_load_tile<DP, BN, THREADS>(next, k_base, qkv_stride, k0 + BN, T, D, vec);
            attn_load_tile<DP, BN, THREADS>(next + BN * LD, k_base + D, qkv_stride, k0 + BN, T,
                                            D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        if (k0 <= warp_row0 + 15) {
            /* keep bits of this lane's elements: for key block k0/16 + n/2 and query block
             * warp_row0/8 + e/2, the words (g & 1)*2 + {0, 1} (the second for odd n) */
            uint2 keep_words[DROPOUT ? NT / 2 : 1][2];
            if (DROPOUT) {
#pragma unroll
                for (int kb = 0; kb < NT / 2; kb++)
#pragma unroll
                    for (int qb = 0; qb < 2; qb++)
                        keep_words[kb][qb] = *reinterpret_cast<const uint2 *>(
                            keep_bits + attn_keep_block(bh, (k0 >> 4) + kb, (warp_row0 >> 3) + qb, Tpad) * 4 +
                            attn_keep_word(g & 1, 0));
            }
            float s[NT][4], dp[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            warp_gemm_abt<DP, NT>(dp, do_s + 16 * warp * LD, v_s, lane);
            const bool mask = k0 + BN - 1 > warp_row0;
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = warp_row0 + g + 8 * (e >> 1), key = k0 + 8 * n + 2 * t + (e & 1);
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -row_lse2[e >> 1]));
                    if (mask && key > row) p = 0.0f;
                    float dpv = dp[n][e];
                    if (DROPOUT) {
                        const uint2 words = keep_words[n >> 1][e >> 1];
                        const uint32_t word = (n & 1) ? words.y : words.x;
                        const bool keep = (word >> attn_keep_bit(2 * t + (e & 1), g >> 1)) & 1u;
                        dpv = keep ? dpv * keep_scale : 0.0f;
                    }
                    s[n][e] = p * (dpv - row_di[e >> 1]); /* dS */
                }
            warp_gemm_pv<DP, NT>(dq, s, k_s, lane); /* dQ += dS K */
        }
        __syncthreads();
    }

    const float scale = 1.0f / sqrtf((float)D);
    E *stage = q_s + 16 * warp * LD; /* the warp's own Q rows */
    attn_stage_rows<DP>(stage, dq, scale, scale, lane);
    attn_store_rows<DP>(dqkv + (size_t)b * T * qkv_stride + qkv_query_offset(h, H, G, D), qkv_stride, stage,
                        warp_row0, T, D, vec, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* host side */

/* (tiles of 16-bit elements, bf16 or fp16) */
static size_t attn_forward_smem(int DP, int warps, int bn) {
    return ((size_t)16 * warps + 4 * (size_t)bn) * ATTN_LD(DP) * sizeof(uint16_t);
}
static size_t attn_dq_smem(int DP, int warps, int bn) {
    return ((size_t)32 * warps + 4 * (size_t)bn) * ATTN_LD(DP) * sizeof(uint16_t);
}
static size_t attn_dkdv_smem(int DP, int warps, int bm) {
    return ((size_t)32 * warps + 4 * (size_t)bm) * ATTN_LD(DP) * sizeof(uint16_t) +
           4 * (size_t)bm * sizeof(float);
}

/* whether every row of every tensor starts 16-byte aligned (cp.async and 16-byte stores) */
static int attn_vector_io(int D, const void *a, const void *b) {
    return D % 8 == 0 && aligned16(a) && aligned16(b);
}

static dim3 attn_grid(int B, int H, int T, int tile) {
    return dim3((unsigned int)B * (unsigned int)H, ceil_div((size_t)T, (size_t)tile));
}

template <int DP, bool DROPOUT, typename E>
static void attn_forward_launch(E *out, float *lse, const E *qkv, int B, int T, int H,
                                int G, int D, int head_start, int total_heads, dropout_rng rng) {
    constexpr int WARPS = ATTN_FWD_WARPS, BN = ATTN_FWD_BN;
    static_assert(ATTN_T_PAD % (16 * WARPS) == 0 && BN % 16 == 0, "forward tile shape");
    auto kernel = attention_forward_kernel<DP, WARPS, BN, DROPOUT, E>;
    const size_t smem = attn_forward_smem(DP, WARPS, BN);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<attn_grid(B, H, T, 16 * WARPS), 32 * WARPS, smem, compute_stream()>>>(
        out, lse, qkv, T, H, G, D, head_start, total_heads, rng, attn_vector_io(D, out, qkv));
    CHECK_LAUNCH();
}

template <int DP, bool DROPOUT, typename E>
static void attn_backward_launch(E *dqkv, const E *dout, const E *qkv,
                                 const E *out, const float *lse, int B, int T, int H, int G,
                                 int D, int head_start, int total_heads, dropout_rng rng) {
    constexpr int DQ_WARPS = DP <= 64 ? ATTN_DQ_WARPS_64 : ATTN_DQ_WARPS_128, DQ_BN = ATTN_DQ_BN;
    constexpr int KV_WARPS = ATTN_DKDV_WARPS;
    constexpr int KV_BM = DP <= 64 ? ATTN_DKDV_BM_64 : ATTN_DKDV_BM_128;
    static_assert(ATTN_T_PAD % (16 * DQ_WARPS) == 0 && ATTN_T_PAD % KV_BM == 0, "padding");
    static_assert(DQ_BN % 16 == 0 && KV_BM % 16 == 0, "tiles of whole k-slices");
    const int Tpad = (int)(ceil_div((size_t)T, ATTN_T_PAD) * ATTN_T_PAD);
    const size_t rows = (size_t)B * H * Tpad;

    /* in this file's scratch buffer: lse2 and Di, padded; with dropout the keep bits (one per
     * element of the padded T x T square of every head) */
    const size_t bits_bytes = DROPOUT ? rows * (size_t)Tpad / 8 : 0;
    float *lse2 = (float *)stream_scratch(2 * rows * sizeof(float) + bits_bytes), *di = lse2 + rows;
    uint32_t *keep_bits = DROPOUT ? reinterpret_cast<uint32_t *>(di + rows) : NULL;
    const int vec = attn_vector_io(D, dqkv, qkv) && attn_vector_io(D, dout, out);
    attention_backward_rows_kernel<DP><<<ceil_div(rows * (DP / 8), 256), 256, 0, compute_stream()>>>(
        lse2, di, dout, out, lse, B, T, Tpad, H, D, vec);
    CHECK_LAUNCH();
    if constexpr (!is_fp16<E>::value) { /* Hopper's wgmma kernels are bf16 only */
        if (!DROPOUT && vec && cuda_attention_sm90_applies(dqkv, qkv, D, rng.p)) {
            cuda_attention_sm90_backward(reinterpret_cast<bf16 *>(dqkv), reinterpret_cast<const bf16 *>(dout),
                                         reinterpret_cast<const bf16 *>(qkv), lse2, di, B, T, Tpad, H, G, D);
            return;
        }
    }

    auto dkdv = attention_backward_dkdv_kernel<DP, KV_WARPS, KV_BM, DROPOUT, E>;
    const size_t dkdv_smem = attn_dkdv_smem(DP, KV_WARPS, KV_BM);
    CHECK_CUDA(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)dkdv_smem));
    dkdv<<<attn_grid(B, G, T, 16 * KV_WARPS), 32 * KV_WARPS, dkdv_smem, compute_stream()>>>(
        dqkv, keep_bits, dout, qkv, lse2, di, T, Tpad, H, G, D, head_start, total_heads, rng, vec);
    CHECK_LAUNCH();

    auto dq = attention_backward_dq_kernel<DP, DQ_WARPS, DQ_BN, DROPOUT, E>;
    const size_t dq_smem = attn_dq_smem(DP, DQ_WARPS, DQ_BN);
    CHECK_CUDA(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem));
    dq<<<attn_grid(B, H, T, 16 * DQ_WARPS), 32 * DQ_WARPS, dq_smem, compute_stream()>>>(
        dqkv, keep_bits, dout, qkv, lse2, di, T, Tpad, H, G, D, rng, vec);
    CHECK_LAUNCH();
}

/* the padded head dimension the kernels are instantiated for */
static int attn_padded_head_dim(int D) {
    if (D >= 1 && D <= 64) return 64;
    if (D <= 128) return 128;
    KERNELS_FATAL("cuda attention supports head dimensions 1..128, got %d", D);
}

extern "C" size_t cuda_attention_workspace_bytes(int B, int T, int H, int D) {
    (void)D;
    return (size_t)B * H * T * sizeof(float);
}

/* the query heads must fall into whole groups */
static void attn_check_groups(int H, int G) {
    if (G <= 0 || H % G != 0)
        KERNELS_FATAL("cuda attention: %d query heads do not split into %d query groups", H, G);
}

template <typename E>
static void attention_forward_t(E *out, void *workspace, const E *qkv, int B, int T,
                                       int H, int G, int D, int head_start, int total_heads,
                                       dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    attn_check_groups(H, G);
    E *o = out;
    const E *x = qkv;
    float *lse = (float *)workspace;
    if constexpr (!is_fp16<E>::value) { /* Hopper (cuda_attention_sm90.cu), bf16 only */
        if (cuda_attention_sm90_applies(out, qkv, D, rng.p)) {
            cuda_attention_sm90_forward(reinterpret_cast<bf16 *>(out), lse, reinterpret_cast<const bf16 *>(qkv), B, T,
                                        H, G, D);
            return;
        }
    }
    const bool drop = rng.p > 0.0f;
    if (attn_padded_head_dim(D) == 64) {
        if (drop) attn_forward_launch<64, true>(o, lse, x, B, T, H, G, D, head_start, total_heads, rng);
        else attn_forward_launch<64, false>(o, lse, x, B, T, H, G, D, head_start, total_heads, rng);
    } else {
        if (drop) attn_forward_launch<128, true>(o, lse, x, B, T, H, G, D, head_start, total_heads, rng);
        else attn_forward_launch<128, false>(o, lse, x, B, T, H, G, D, head_start, total_heads, rng);
    }
}

template <typename E>
static void attention_backward_t(E *dqkv, const E *dout, const E *qkv,
                                        const E *out, const void *workspace, int B, int T,
                                        int H, int G, int D, int head_start, int total_heads,
                                        dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    attn_check_groups(H, G);
    E *dx = dqkv;
    const E *dy = dout, *x = qkv, *y = out;
    const float *lse = (const float *)workspace;
    const bool drop = rng.p > 0.0f;
    if (attn_padded_head_dim(D) == 64) {
        if (drop) attn_backward_launch<64, true>(dx, dy, x, y, lse, B, T, H, G, D, head_start, total_heads, rng);
        else attn_backward_launch<64, false>(dx, dy, x, y, lse, B, T, H, G, D, head_start, total_heads, rng);
    } else {
        if (drop) attn_backward_launch<128, true>(dx, dy, x, y, lse, B, T, H, G, D, head_start, total_heads, rng);
        else attn_backward_launch<128, false>(dx, dy, x, y, lse, B, T, H, G, D, head_start, total_heads, rng);
    }
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_attention_forward(bf16 *out, void *workspace, const bf16 *qkv, int B, int T,
                                       int H, int G, int D, int head_start, int total_heads,
                                       dropout_rng rng) {
    attention_forward_t(as_nv(out), workspace, as_nv(qkv), B, T, H, G, D, head_start, total_heads, rng);
}

extern "C" void cuda_attention_forward_fp16(fp16 *out, void *workspace, const fp16 *qkv, int B, int T,
                                       int H, int G, int D, int head_start, int total_heads,
                                       dropout_rng rng) {
    attention_forward_t(as_half(out), workspace, as_half(qkv), B, T, H, G, D, head_start, total_heads, rng);
}

extern "C" void cuda_attention_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                        const bf16 *out, const void *workspace, int B, int T,
                                        int H, int G, int D, int head_start, int total_heads,
                                        dropout_rng rng) {
    attention_backward_t(as_nv(dqkv), as_nv(dout), as_nv(qkv), as_nv(out), workspace, B, T, H, G, D, head_start, total_heads, rng);
}

extern "C" void cuda_attention_backward_fp16(fp16 *dqkv, const fp16 *dout, const fp16 *qkv,
                                        const fp16 *out, const void *workspace, int B, int T,
                                        int H, int G, int D, int head_start, int total_heads,
                                        dropout_rng rng) {
    attention_backward_t(as_half(dqkv), as_half(dout), as_half(qkv), as_half(out), workspace, B, T, H, G, D, head_start, total_heads, rng);
}

#undef cuda_attention_sm90_available
#undef cuda_attention_sm90_applies
#undef cuda_attention_sm90_forward
#undef cuda_attention_sm90_backward
#undef cuda_attention_sm90_selftest
#undef cuda_attention_forward_fp16
#undef cuda_attention_backward_fp16
#undef attn_row_counter
#undef attention_forward_t
#undef attention_backward_t
#undef attn_backward_launch
#undef attn_forward_launch
#undef attention_backward_rows_kernel
#undef attn_load_query_stage
#undef attn_load_tile
#undef attn_stage_rows
#undef attn_store_rows
#undef attn_vector_io
#undef warp_gemm_abt
#undef warp_gemm_pv
#undef cp_async_16
#undef ldmatrix_x4
#undef ldmatrix_x4_trans
#undef smem_u32
