/* cuda_attention_tiles.cuh: the warp-level flash-attention building blocks of cuda_attention.cu
 * (mma.sync.m16n8k16 on bf16 or fp16 with fp32 accumulation, ldmatrix fragments, cp.async tiles
 * with rows padded by 8 elements, quad reductions of a row's 4 lanes), for the ring-attention
 * kernels of cuda_attention_block.cu and for cuda_attention.cu itself (see its header comment for
 * the fragment layouts). Device code only. */
#ifndef CUDA_ATTENTION_TILES_CUH
#define CUDA_ATTENTION_TILES_CUH

#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"

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
/* the four lanes of a quad hold one row: combine their values */
static __device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}


#endif /* CUDA_ATTENTION_TILES_CUH */
