/* attention_bench_old.cuh: the previous (wmma, fp32 score tiles in shared memory) flash attention,
 * kernels/cuda/cuda_attention.cu as of commit ecfa376, kept verbatim below for
 * perf/attention_bench.cu to time next to the new kernels (included there inside a namespace,
 * with its three entry points renamed). Not part of the library. */
/* cuda_attention.cu: causal multi-head flash attention in bf16 (FlashAttention-2 scheme), the
 * GPU counterpart of kernels/cpu/cpu_attention.c.
 *
 * qkv[B,T,H,3,D] bf16 (per head its q, k, v side by side), out[B,T,H,D] bf16, fp32 accumulation.
 * The T x T scores are never stored: the forward keeps a running row max m and row sum l
 * (online softmax) while it walks the key tiles left of the diagonal, and saves per query row
 * lse = m + log(l) (fp32 [B,H,T], natural log of the scaled scores) in the workspace.
 *
 *   s[i,j] = q_i.k_j / sqrt(D) (j <= i),  P = exp(s - lse),  out_i = sum_j P[i,j] keep[i,j]/(1-p) v_j
 *
 * The normalizer l sums the UNDROPPED exponentials: dropout applies after the softmax, as on the
 * CPU. keep[i,j] is philox_keep_attention of element rng.offset + ((b*total_heads + head_start + h)*T + i)*T
 * + j, exactly the CPU backend's counter, so both backends drop the same probabilities.
 *
 * Backward (no atomics, so bitwise reproducible): with Di = rowsum(dO_i o O_i), which equals
 * sum_j P[i,j] dP[i,j] (dP below) because O already carries the dropout mask,
 *   dV_j = sum_i P[i,j] keep/(1-p) dO_i          dP[i,j] = keep/(1-p) dO_i.v_j
 *   dS[i,j] = P[i,j] (dP[i,j] - Di)               (softmax Jacobian)
 *   dK_j = sum_i dS[i,j] q_i / sqrt(D)            dQ_i = sum_j dS[i,j] k_j / sqrt(D)
 * One kernel owns a key tile and walks the query tiles at or below the diagonal (dK, dV); a
 * second owns a query tile and walks the key tiles left of it (dQ), recomputing P and dP.
 *
 * Tiles: 64 query rows x 64 keys, 4 warps per block, each warp owning 16 rows (the M of a wmma
 * 16x16x16 bf16 tensor-core tile). Products (QK^T, dO V^T, PV, P^T dO, dS K, dS^T Q) run on
 * wmma fragments from shared memory; the elementwise softmax work runs on fp32 copies of the
 * score tiles in shared memory, two lanes per row. Accumulators (O, dK, dV, dQ) stay in
 * fragments across the tile loop; a per-row factor (the online-softmax rescale) is applied by
 * loading a 16x16 matrix whose row r holds the factor of row r into a fragment of the same type,
 * whose elements then sit where the accumulator's do, and multiplying element by element.
 * The head dimension is padded with zeros to DP in {32, 64, 80, 96, 128} (any D <= 128). */
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

typedef __nv_bfloat16 nvbf16;

typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::row_major> attn_frag_a;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::row_major> attn_frag_b_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::col_major> attn_frag_b_col;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> attn_frag_acc;

#define ATTN_TILE 64                   /* query rows per tile = keys per tile */
#define ATTN_WARPS 4
#define ATTN_THREADS (ATTN_WARPS * 32)
#define ATTN_WARP_ROWS 16              /* rows of a tile owned by one warp */
#define ATTN_S_LD (ATTN_TILE + 4)      /* leading dimension of fp32 score tiles */
#define ATTN_P_LD (ATTN_TILE + 8)      /* leading dimension of bf16 probability tiles */

static_assert(ATTN_WARPS * ATTN_WARP_ROWS == ATTN_TILE, "each warp owns 16 rows of a tile");
static_assert(ATTN_THREADS == 2 * ATTN_TILE, "row statistics use two threads per row");

static const float attn_log2e = 1.4426950408889634f;
static const float attn_ln2 = 0.6931471805599453f;

/* shared-memory leading dimensions for head dimension DP: bf16 q/k/v/dO tiles, fp32 staging */
#define ATTN_LD(DP) ((DP) + 8)
#define ATTN_O_LD(DP) ((DP) + 4)
#define ATTN_BF16_TILE_BYTES(DP) ((size_t)ATTN_TILE * ATTN_LD(DP) * sizeof(nvbf16))
#define ATTN_S_TILE_BYTES ((size_t)ATTN_TILE * ATTN_S_LD * sizeof(float))
#define ATTN_P_TILE_BYTES ((size_t)ATTN_TILE * ATTN_P_LD * sizeof(nvbf16))
#define ATTN_BCAST_BYTES ((size_t)ATTN_WARPS * 256 * sizeof(float))
#define ATTN_ROW_STAT_BYTES ((size_t)2 * ATTN_TILE * sizeof(float))

/* forward: q, k, v tiles; scores; probabilities; per-warp 16x16 broadcast matrices */
static constexpr size_t attn_forward_smem(int DP) {
    return 3 * ATTN_BF16_TILE_BYTES(DP) + ATTN_S_TILE_BYTES + ATTN_P_TILE_BYTES + ATTN_BCAST_BYTES;
}
/* backward (both kernels): q, dO, k, v tiles; two fp32 tiles; two bf16 tiles; lse and Di */
static constexpr size_t attn_backward_smem(int DP) {
    return 4 * ATTN_BF16_TILE_BYTES(DP) + 2 * ATTN_S_TILE_BYTES + 2 * ATTN_P_TILE_BYTES +
           ATTN_ROW_STAT_BYTES;
}
/* the fp32 output staging (TILE x O_LD) fits in two consecutive bf16 tiles */
static_assert(ATTN_TILE * ATTN_O_LD(32) * 4 <= 2 * ATTN_TILE * ATTN_LD(32) * 2, "staging fits");

static __device__ __forceinline__ unsigned int attn_pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi); /* .x (lo) at the lower address */
    return *reinterpret_cast<unsigned int *>(&pair);
}

/* rows [row0, row0 + TILE) of a row-major [T, row_stride] bf16 matrix, columns [0, D) from src,
 * into a TILE x LD shared tile: zero for rows >= T and for columns [D, DP). All threads. */
template <int DP>
static __device__ void attn_load_tile(nvbf16 *dst, const nvbf16 *src, size_t row_stride,
                                      int row0, int T, int D) {
    const int LD = ATTN_LD(DP);
    if ((D & 7) == 0 && (row_stride & 7) == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
        const int chunks = DP / 8; /* 16-byte pieces per row */
        for (int idx = threadIdx.x; idx < ATTN_TILE * chunks; idx += ATTN_THREADS) {
            int r = idx / chunks, c = (idx - r * chunks) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (row0 + r < T && c < D)
                v = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * row_stride + c);
            *reinterpret_cast<uint4 *>(dst + r * LD + c) = v;
        }
    } else {
        for (int idx = threadIdx.x; idx < ATTN_TILE * DP; idx += ATTN_THREADS) {
            int r = idx / DP, c = idx - r * DP;
            nvbf16 v = __float2bfloat16(0.0f);
            if (row0 + r < T && c < D) v = src[(size_t)(row0 + r) * row_stride + c];
            dst[r * LD + c] = v;
        }
    }
}

/* one warp: its 16 staged fp32 rows (stage, leading dimension O_LD) to bf16 rows
 * [row0, row0 + 16) of dst (rows >= T and columns >= D skipped). */
template <int DP>
static __device__ void attn_store_rows(nvbf16 *dst, size_t row_stride, const float *stage,
                                       int row0, int T, int D, int lane) {
    const int OLD = ATTN_O_LD(DP);
    if ((D & 7) == 0 && (row_stride & 7) == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
        const int chunks = DP / 8;
        for (int idx = lane; idx < ATTN_WARP_ROWS * chunks; idx += 32) {
            int r = idx / chunks, c = (idx - r * chunks) * 8;
            if (row0 + r >= T || c >= D) continue;
            const float *s = stage + r * OLD + c;
            uint4 v;
            v.x = attn_pack_bf16x2(s[0], s[1]);
            v.y = attn_pack_bf16x2(s[2], s[3]);
            v.z = attn_pack_bf16x2(s[4], s[5]);
            v.w = attn_pack_bf16x2(s[6], s[7]);
            *reinterpret_cast<uint4 *>(dst + (size_t)(row0 + r) * row_stride + c) = v;
        }
    } else {
        for (int idx = lane; idx < ATTN_WARP_ROWS * DP; idx += 32) {
            int r = idx / DP, c = idx - r * DP;
            if (row0 + r >= T || c >= D) continue;
            dst[(size_t)(row0 + r) * row_stride + c] = __float2bfloat16(stage[r * OLD + c]);
        }
    }
}

/* one warp: scores[16 x TILE] (fp32, leading dimension S_LD) = a_rows[16 x DP] b_rows^T where
 * b_rows is a TILE x DP bf16 tile (row j holds the vector of column j) */
template <int DP>
static __device__ void attn_warp_abt(float *scores, const nvbf16 *a_rows, const nvbf16 *b_rows) {
    const int LD = ATTN_LD(DP);
#pragma unroll
    for (int nn = 0; nn < ATTN_TILE / 16; nn++) {
        attn_frag_acc acc;
        nvcuda::wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < DP / 16; kk++) {
            attn_frag_a a;
            attn_frag_b_col b;
            nvcuda::wmma::load_matrix_sync(a, a_rows + kk * 16, LD);
            nvcuda::wmma::load_matrix_sync(b, b_rows + nn * 16 * LD + kk * 16, LD);
            nvcuda::wmma::mma_sync(acc, a, b, acc);
        }
        nvcuda::wmma::store_matrix_sync(scores + nn * 16, acc, ATTN_S_LD, nvcuda::wmma::mem_row_major);
    }
}

/* one warp: acc[DP/16] (16 x DP) += a[16 x TILE] (bf16, leading dimension P_LD) b[TILE x DP] */
template <int DP>
static __device__ void attn_warp_ab(attn_frag_acc *acc, const nvbf16 *a, const nvbf16 *b) {
    const int LD = ATTN_LD(DP);
#pragma unroll
    for (int kk = 0; kk < ATTN_TILE / 16; kk++) {
        attn_frag_a fa;
        nvcuda::wmma::load_matrix_sync(fa, a + kk * 16, ATTN_P_LD);
#pragma unroll
        for (int nn = 0; nn < DP / 16; nn++) {
            attn_frag_b_row fb;
            nvcuda::wmma::load_matrix_sync(fb, b + kk * 16 * LD + nn * 16, LD);
            nvcuda::wmma::mma_sync(acc[nn], fa, fb, acc[nn]);
        }
    }
}

/* lse and Di = dO_i . O_i of query rows [row0, row0 + TILE), two threads per row, all threads;
 * do_tile is the staged dO tile, out_rows the global O rows (row stride out_stride) */
template <int DP>
static __device__ void attn_row_stats(float *lse_s, float *di_s, const nvbf16 *do_tile,
                                      const nvbf16 *out_rows, size_t out_stride,
                                      const float *lse_rows, int row0, int T, int D) {
    const int LD = ATTN_LD(DP);
    int r = threadIdx.x >> 1, half = threadIdx.x & 1, row = row0 + r;
    float di = 0.0f;
    if (row < T) {
        const nvbf16 *o = out_rows + (size_t)row * out_stride;
        for (int d = half; d < D; d += 2)
            di += __bfloat162float(do_tile[r * LD + d]) * __bfloat162float(o[d]);
    }
    di += __shfl_xor_sync(0xffffffffu, di, 1);
    if (half == 0) {
        di_s[r] = di;
        lse_s[r] = row < T ? lse_rows[row] : 0.0f;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* forward: block = (query tile, head, batch), 4 warps x 16 query rows */
template <int DP>
static __global__ void __launch_bounds__(ATTN_THREADS)
attention_forward_kernel(nvbf16 *out, float *lse, const nvbf16 *qkv, int T, int H, int D,
                         int head_start, int total_heads, dropout_rng rng) {
    const int LD = ATTN_LD(DP), OLD = ATTN_O_LD(DP), NF = DP / 16;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    nvbf16 *q_s = reinterpret_cast<nvbf16 *>(attn_smem);
    nvbf16 *k_s = q_s + ATTN_TILE * LD;
    nvbf16 *v_s = k_s + ATTN_TILE * LD;
    float *s_s = reinterpret_cast<float *>(v_s + ATTN_TILE * LD);
    nvbf16 *p_s = reinterpret_cast<nvbf16 *>(s_s + ATTN_TILE * ATTN_S_LD);
    float *bcast_s = reinterpret_cast<float *>(p_s + ATTN_TILE * ATTN_P_LD);
    float *stage_s = reinterpret_cast<float *>(k_s); /* after the loop: over k_s and v_s */

    const int qt = gridDim.x - 1 - blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = lane >> 1, half = lane & 1; /* this lane's row in the warp, column parity */
    const int q0 = qt * ATTN_TILE;
    const int row = q0 + warp * ATTN_WARP_ROWS + r; /* query position t1 of this lane */
    const size_t qkv_stride = (size_t)H * 3 * D;
    const nvbf16 *q_base = qkv + (size_t)b * T * qkv_stride + (size_t)h * 3 * D;
    const float scale_log2 = attn_log2e / sqrtf((float)D); /* scores in base-2 units */
    const bool use_dropout = rng.p > 0.0f;
    const float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;
    const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);

    float *s_w = s_s + warp * ATTN_WARP_ROWS * ATTN_S_LD;
    nvbf16 *p_w = p_s + warp * ATTN_WARP_ROWS * ATTN_P_LD;
    float *bcast_w = bcast_s + warp * 256;
    const nvbf16 *q_w = q_s + warp * ATTN_WARP_ROWS * LD;

    attn_load_tile<DP>(q_s, q_base, qkv_stride, q0, T, D);

    attn_frag_acc acc_o[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) nvcuda::wmma::fill_fragment(acc_o[n], 0.0f);
    float m_run = -INFINITY, l_run = 0.0f; /* both lanes of a row hold the same values */

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATTN_TILE;
        __syncthreads(); /* every warp is done with the previous k/v tiles */
        attn_load_tile<DP>(k_s, q_base + D, qkv_stride, k0, T, D);
        attn_load_tile<DP>(v_s, q_base + 2 * D, qkv_stride, k0, T, D);
        __syncthreads();

        attn_warp_abt<DP>(s_w, q_w, k_s);
        __syncwarp();

        /* online softmax of row r over this tile; column k0 <= row is never masked, so the
         * tile max is finite and m_run becomes finite on the first tile */
        float *s_row = s_w + r * ATTN_S_LD;
        float tile_max = -INFINITY;
        for (int c = half; c < ATTN_TILE; c += 2) {
            float s = k0 + c <= row ? s_row[c] * scale_log2 : -INFINITY;
            s_row[c] = s;
            tile_max = fmaxf(tile_max, s);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        const float m_new = fmaxf(m_run, tile_max);
        const float alpha = exp2f(m_run - m_new);
        float row_sum = 0.0f;
        nvbf16 *p_row = p_w + r * ATTN_P_LD;
        for (int c = half; c < ATTN_TILE; c += 2) {
            float p = exp2f(s_row[c] - m_new); /* 0 where masked */
            row_sum += p;
            if (use_dropout && p > 0.0f && row < T) {
                /* (the mask as it is drawn since 2026-11-26: 2 x 2 blocks share a Philox call) */
                if (!philox_keep_attention(rng.seed, rng.stream, rng.offset + head_index * (uint64_t)T * (uint64_t)T, T,
                                           row, k0 + c, rng.p))
                    p = 0.0f;
            }
            p_row[c] = __float2bfloat16(p);
        }
        row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
        l_run = l_run * alpha + row_sum;
        m_run = m_new;
        for (int c = half * 8; c < half * 8 + 8; c++) bcast_w[r * 16 + c] = alpha;
        __syncwarp();

        /* O = O * alpha (per row) + P V */
        attn_frag_acc alpha_frag;
        nvcuda::wmma::load_matrix_sync(alpha_frag, bcast_w, 16, nvcuda::wmma::mem_row_major);
#pragma unroll
        for (int n = 0; n < NF; n++)
#pragma unroll
            for (int i = 0; i < alpha_frag.num_elements; i++) acc_o[n].x[i] *= alpha_frag.x[i];
        attn_warp_ab<DP>(acc_o, p_w, v_s);
    }

    /* O = acc * keep_scale / l (dropout's rescale deferred to here) */
    __syncwarp(); /* every lane has loaded the last alpha fragment */
    const float out_factor = keep_scale / l_run;
    for (int c = half * 8; c < half * 8 + 8; c++) bcast_w[r * 16 + c] = out_factor;
    __syncwarp();
    {
        attn_frag_acc factor_frag;
        nvcuda::wmma::load_matrix_sync(factor_frag, bcast_w, 16, nvcuda::wmma::mem_row_major);
#pragma unroll
        for (int n = 0; n < NF; n++)
#pragma unroll
            for (int i = 0; i < factor_frag.num_elements; i++) acc_o[n].x[i] *= factor_frag.x[i];
    }
    __syncthreads(); /* every warp is done with k_s and v_s: they become the staging area */
    float *stage_w = stage_s + warp * ATTN_WARP_ROWS * OLD;
#pragma unroll
    for (int n = 0; n < NF; n++)
        nvcuda::wmma::store_matrix_sync(stage_w + n * 16, acc_o[n], OLD, nvcuda::wmma::mem_row_major);
    __syncwarp();
    const size_t out_stride = (size_t)H * D;
    attn_store_rows<DP>(out + (size_t)b * T * out_stride + (size_t)h * D, out_stride, stage_w,
                        q0 + warp * ATTN_WARP_ROWS, T, D, lane);
    if (half == 0 && row < T)
        lse[((size_t)b * H + h) * T + row] = (m_run + log2f(l_run)) * attn_ln2;
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dK and dV: block = (key tile, head, batch), 4 warps x 16 keys; walks query tiles
 * from the diagonal down. Scores are computed transposed (keys as rows). */
template <int DP>
static __global__ void __launch_bounds__(ATTN_THREADS)
attention_backward_dkdv_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv,
                               const nvbf16 *out, const float *lse, int T, int H, int D,
                               int head_start, int total_heads, dropout_rng rng) {
    const int LD = ATTN_LD(DP), OLD = ATTN_O_LD(DP), NF = DP / 16;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    nvbf16 *q_s = reinterpret_cast<nvbf16 *>(attn_smem);
    nvbf16 *do_s = q_s + ATTN_TILE * LD;
    nvbf16 *k_s = do_s + ATTN_TILE * LD;
    nvbf16 *v_s = k_s + ATTN_TILE * LD;
    float *st_s = reinterpret_cast<float *>(v_s + ATTN_TILE * LD);   /* S^T: [key][query] */
    float *dpt_s = st_s + ATTN_TILE * ATTN_S_LD;                     /* (dO V^T)^T */
    nvbf16 *pt_s = reinterpret_cast<nvbf16 *>(dpt_s + ATTN_TILE * ATTN_S_LD); /* P^T * keep */
    nvbf16 *dst_s = pt_s + ATTN_TILE * ATTN_P_LD;                    /* dS^T */
    float *lse_s = reinterpret_cast<float *>(dst_s + ATTN_TILE * ATTN_P_LD);
    float *di_s = lse_s + ATTN_TILE;
    float *stage_s = reinterpret_cast<float *>(q_s); /* after the loop: over q_s and do_s */

    const int kt = blockIdx.x; /* longest column walks first */
    const int h = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = lane >> 1, half = lane & 1;
    const int k0 = kt * ATTN_TILE;
    const int key = k0 + warp * ATTN_WARP_ROWS + r; /* key position t2 of this lane */
    const int num_tiles = (T + ATTN_TILE - 1) / ATTN_TILE;
    const size_t qkv_stride = (size_t)H * 3 * D, out_stride = (size_t)H * D;
    const nvbf16 *q_base = qkv + (size_t)b * T * qkv_stride + (size_t)h * 3 * D;
    const nvbf16 *do_base = dout + (size_t)b * T * out_stride + (size_t)h * D;
    const nvbf16 *o_base = out + (size_t)b * T * out_stride + (size_t)h * D;
    const float *lse_rows = lse + ((size_t)b * H + h) * T;
    const float scale = 1.0f / sqrtf((float)D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const bool use_dropout = rng.p > 0.0f;
    const float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;
    const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);

    float *st_w = st_s + warp * ATTN_WARP_ROWS * ATTN_S_LD;
    float *dpt_w = dpt_s + warp * ATTN_WARP_ROWS * ATTN_S_LD;
    nvbf16 *pt_w = pt_s + warp * ATTN_WARP_ROWS * ATTN_P_LD;
    nvbf16 *dst_w = dst_s + warp * ATTN_WARP_ROWS * ATTN_P_LD;

    attn_load_tile<DP>(k_s, q_base + D, qkv_stride, k0, T, D);
    attn_load_tile<DP>(v_s, q_base + 2 * D, qkv_stride, k0, T, D);

    attn_frag_acc acc_dk[NF], acc_dv[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) {
        nvcuda::wmma::fill_fragment(acc_dk[n], 0.0f);
        nvcuda::wmma::fill_fragment(acc_dv[n], 0.0f);
    }

    for (int qt = kt; qt < num_tiles; qt++) {
        const int q0 = qt * ATTN_TILE;
        __syncthreads(); /* every warp is done with the previous q/dO tiles and row stats */
        attn_load_tile<DP>(q_s, q_base, qkv_stride, q0, T, D);
        attn_load_tile<DP>(do_s, do_base, out_stride, q0, T, D);
        __syncthreads();
        attn_row_stats<DP>(lse_s, di_s, do_s, o_base, out_stride, lse_rows, q0, T, D);
        __syncthreads();

        attn_warp_abt<DP>(st_w, k_s + warp * ATTN_WARP_ROWS * LD, q_s);   /* K Q^T */
        attn_warp_abt<DP>(dpt_w, v_s + warp * ATTN_WARP_ROWS * LD, do_s); /* V dO^T */
        __syncwarp();

        const float *st_row = st_w + r * ATTN_S_LD, *dpt_row = dpt_w + r * ATTN_S_LD;
        nvbf16 *pt_row = pt_w + r * ATTN_P_LD, *dst_row = dst_w + r * ATTN_P_LD;
        for (int c = half; c < ATTN_TILE; c += 2) {
            const int query = q0 + c;
            float kept_p = 0.0f, ds = 0.0f;
            if (query < T && key <= query) {
                float p = exp2f(st_row[c] * scale_log2 - lse_s[c] * attn_log2e);
                float dp = dpt_row[c];
                kept_p = p;
                if (use_dropout) {
                    if (philox_keep_attention(rng.seed, rng.stream, rng.offset + head_index * (uint64_t)T * (uint64_t)T,
                                              T, query, key, rng.p)) {
                        dp *= keep_scale;
                    } else {
                        dp = 0.0f;
                        kept_p = 0.0f;
                    }
                }
                ds = p * (dp - di_s[c]);
            }
            pt_row[c] = __float2bfloat16(kept_p);
            dst_row[c] = __float2bfloat16(ds);
        }
        __syncwarp();

        attn_warp_ab<DP>(acc_dv, pt_w, do_s); /* dV += (P keep)^T dO */
        attn_warp_ab<DP>(acc_dk, dst_w, q_s); /* dK += dS^T Q */
    }

#pragma unroll
    for (int n = 0; n < NF; n++)
#pragma unroll
        for (int i = 0; i < acc_dk[n].num_elements; i++) {
            acc_dk[n].x[i] *= scale;
            acc_dv[n].x[i] *= keep_scale;
        }
    __syncthreads(); /* every warp is done with q_s and do_s: they become the staging area */
    float *stage_w = stage_s + warp * ATTN_WARP_ROWS * OLD;
    nvbf16 *dk_base = dqkv + (size_t)b * T * qkv_stride + (size_t)h * 3 * D + D;
#pragma unroll
    for (int n = 0; n < NF; n++)
        nvcuda::wmma::store_matrix_sync(stage_w + n * 16, acc_dk[n], OLD, nvcuda::wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dk_base, qkv_stride, stage_w, k0 + warp * ATTN_WARP_ROWS, T, D, lane);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < NF; n++)
        nvcuda::wmma::store_matrix_sync(stage_w + n * 16, acc_dv[n], OLD, nvcuda::wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dk_base + D, qkv_stride, stage_w, k0 + warp * ATTN_WARP_ROWS, T, D, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dQ: block = (query tile, head, batch), 4 warps x 16 query rows; walks key tiles up
 * to the diagonal, recomputing P and dP. */
template <int DP>
static __global__ void __launch_bounds__(ATTN_THREADS)
attention_backward_dq_kernel(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv,
                             const nvbf16 *out, const float *lse, int T, int H, int D,
                             int head_start, int total_heads, dropout_rng rng) {
    const int LD = ATTN_LD(DP), OLD = ATTN_O_LD(DP), NF = DP / 16;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    nvbf16 *q_s = reinterpret_cast<nvbf16 *>(attn_smem);
    nvbf16 *do_s = q_s + ATTN_TILE * LD;
    nvbf16 *k_s = do_s + ATTN_TILE * LD;
    nvbf16 *v_s = k_s + ATTN_TILE * LD;
    float *s_s = reinterpret_cast<float *>(v_s + ATTN_TILE * LD);
    float *dp_s = s_s + ATTN_TILE * ATTN_S_LD;
    nvbf16 *ds_s = reinterpret_cast<nvbf16 *>(dp_s + ATTN_TILE * ATTN_S_LD);
    /* (a second bf16 tile is reserved after ds_s so both backward kernels share one layout) */
    float *lse_s = reinterpret_cast<float *>(ds_s + 2 * ATTN_TILE * ATTN_P_LD);
    float *di_s = lse_s + ATTN_TILE;
    float *stage_s = reinterpret_cast<float *>(k_s); /* after the loop: over k_s and v_s */

    const int qt = gridDim.x - 1 - blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = lane >> 1, half = lane & 1;
    const int q0 = qt * ATTN_TILE;
    const int row = q0 + warp * ATTN_WARP_ROWS + r; /* query position t1 of this lane */
    const size_t qkv_stride = (size_t)H * 3 * D, out_stride = (size_t)H * D;
    const nvbf16 *q_base = qkv + (size_t)b * T * qkv_stride + (size_t)h * 3 * D;
    const nvbf16 *do_base = dout + (size_t)b * T * out_stride + (size_t)h * D;
    const nvbf16 *o_base = out + (size_t)b * T * out_stride + (size_t)h * D;
    const float *lse_rows = lse + ((size_t)b * H + h) * T;
    const float scale = 1.0f / sqrtf((float)D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const bool use_dropout = rng.p > 0.0f;
    const float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;
    const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);

    float *s_w = s_s + warp * ATTN_WARP_ROWS * ATTN_S_LD;
    float *dp_w = dp_s + warp * ATTN_WARP_ROWS * ATTN_S_LD;
    nvbf16 *ds_w = ds_s + warp * ATTN_WARP_ROWS * ATTN_P_LD;
    const nvbf16 *q_w = q_s + warp * ATTN_WARP_ROWS * LD;
    const nvbf16 *do_w = do_s + warp * ATTN_WARP_ROWS * LD;

    attn_load_tile<DP>(q_s, q_base, qkv_stride, q0, T, D);
    attn_load_tile<DP>(do_s, do_base, out_stride, q0, T, D);
    __syncthreads();
    attn_row_stats<DP>(lse_s, di_s, do_s, o_base, out_stride, lse_rows, q0, T, D);
    __syncthreads();
    const float lse_row = lse_s[warp * ATTN_WARP_ROWS + r] * attn_log2e;
    const float di_row = di_s[warp * ATTN_WARP_ROWS + r];

    attn_frag_acc acc_dq[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) nvcuda::wmma::fill_fragment(acc_dq[n], 0.0f);

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATTN_TILE;
        __syncthreads(); /* every warp is done with the previous k/v tiles */
        attn_load_tile<DP>(k_s, q_base + D, qkv_stride, k0, T, D);
        attn_load_tile<DP>(v_s, q_base + 2 * D, qkv_stride, k0, T, D);
        __syncthreads();

        attn_warp_abt<DP>(s_w, q_w, k_s);   /* Q K^T */
        attn_warp_abt<DP>(dp_w, do_w, v_s); /* dO V^T */
        __syncwarp();

        const float *s_row = s_w + r * ATTN_S_LD, *dp_row = dp_w + r * ATTN_S_LD;
        nvbf16 *ds_row = ds_w + r * ATTN_P_LD;
        for (int c = half; c < ATTN_TILE; c += 2) {
            const int key = k0 + c;
            float ds = 0.0f;
            if (row < T && key <= row) {
                float p = exp2f(s_row[c] * scale_log2 - lse_row);
                float dp = dp_row[c];
                if (use_dropout) {
                    dp = philox_keep_attention(rng.seed, rng.stream, rng.offset + head_index * (uint64_t)T * (uint64_t)T,
                                               T, row, key, rng.p)
                             ? dp * keep_scale : 0.0f;
                }
                ds = p * (dp - di_row);
            }
            ds_row[c] = __float2bfloat16(ds);
        }
        __syncwarp();

        attn_warp_ab<DP>(acc_dq, ds_w, k_s); /* dQ += dS K */
    }

#pragma unroll
    for (int n = 0; n < NF; n++)
#pragma unroll
        for (int i = 0; i < acc_dq[n].num_elements; i++) acc_dq[n].x[i] *= scale;
    __syncthreads(); /* every warp is done with k_s and v_s: they become the staging area */
    float *stage_w = stage_s + warp * ATTN_WARP_ROWS * OLD;
#pragma unroll
    for (int n = 0; n < NF; n++)
        nvcuda::wmma::store_matrix_sync(stage_w + n * 16, acc_dq[n], OLD, nvcuda::wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dqkv + (size_t)b * T * qkv_stride + (size_t)h * 3 * D, qkv_stride,
                        stage_w, q0 + warp * ATTN_WARP_ROWS, T, D, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* host side */

/* the padded head dimension the kernels are instantiated for */
static int attn_padded_head_dim(int D) {
    if (D >= 1 && D <= 32) return 32;
    if (D <= 64) return 64;
    if (D <= 80) return 80;
    if (D <= 96) return 96;
    if (D <= 128) return 128;
    fprintf(stderr, "FATAL at %s:%d: cuda attention supports head dimensions 1..128, got %d\n",
            __FILE__, __LINE__, D);
    abort();
}

template <int DP>
static void attn_forward_launch(nvbf16 *out, float *lse, const nvbf16 *qkv, int B, int T, int H,
                                int D, int head_start, int total_heads, dropout_rng rng) {
    const size_t smem = attn_forward_smem(DP);
    CHECK_CUDA(cudaFuncSetAttribute(attention_forward_kernel<DP>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(ceil_div((size_t)T, ATTN_TILE), (unsigned int)H, (unsigned int)B);
    attention_forward_kernel<DP><<<grid, ATTN_THREADS, smem, compute_stream()>>>(out, lse, qkv, T, H, D, head_start, total_heads, rng);
    CHECK_LAUNCH();
}

template <int DP>
static void attn_backward_launch(nvbf16 *dqkv, const nvbf16 *dout, const nvbf16 *qkv,
                                 const nvbf16 *out, const float *lse, int B, int T, int H, int D,
                                 int head_start, int total_heads, dropout_rng rng) {
    const size_t smem = attn_backward_smem(DP);
    CHECK_CUDA(cudaFuncSetAttribute(attention_backward_dkdv_kernel<DP>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CHECK_CUDA(cudaFuncSetAttribute(attention_backward_dq_kernel<DP>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(ceil_div((size_t)T, ATTN_TILE), (unsigned int)H, (unsigned int)B);
    attention_backward_dkdv_kernel<DP><<<grid, ATTN_THREADS, smem, compute_stream()>>>(dqkv, dout, qkv, out, lse, T, H, D, head_start, total_heads, rng);
    CHECK_LAUNCH();
    attention_backward_dq_kernel<DP><<<grid, ATTN_THREADS, smem, compute_stream()>>>(dqkv, dout, qkv, out, lse, T, H, D, head_start, total_heads, rng);
    CHECK_LAUNCH();
}

extern "C" size_t cuda_attention_workspace_bytes(int B, int T, int H, int D) {
    (void)D;
    return (size_t)B * H * T * sizeof(float);
}

extern "C" void cuda_attention_forward(bf16 *out, void *workspace, const bf16 *qkv, int B, int T,
                                       int H, int D, int head_start, int total_heads,
                                       dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    nvbf16 *o = as_nv(out);
    const nvbf16 *x = as_nv(qkv);
    float *lse = (float *)workspace;
    switch (attn_padded_head_dim(D)) {
    case 32: attn_forward_launch<32>(o, lse, x, B, T, H, D, head_start, total_heads, rng); break;
    case 64: attn_forward_launch<64>(o, lse, x, B, T, H, D, head_start, total_heads, rng); break;
    case 80: attn_forward_launch<80>(o, lse, x, B, T, H, D, head_start, total_heads, rng); break;
    case 96: attn_forward_launch<96>(o, lse, x, B, T, H, D, head_start, total_heads, rng); break;
    default: attn_forward_launch<128>(o, lse, x, B, T, H, D, head_start, total_heads, rng); break;
    }
}

extern "C" void cuda_attention_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                        const bf16 *out, const void *workspace, int B, int T,
                                        int H, int D, int head_start, int total_heads,
                                        dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    nvbf16 *dx = as_nv(dqkv);
    const nvbf16 *dy = as_nv(dout), *x = as_nv(qkv), *y = as_nv(out);
    const float *lse = (const float *)workspace;
    switch (attn_padded_head_dim(D)) {
    case 32: attn_backward_launch<32>(dx, dy, x, y, lse, B, T, H, D, head_start, total_heads, rng); break;
    case 64: attn_backward_launch<64>(dx, dy, x, y, lse, B, T, H, D, head_start, total_heads, rng); break;
    case 80: attn_backward_launch<80>(dx, dy, x, y, lse, B, T, H, D, head_start, total_heads, rng); break;
    case 96: attn_backward_launch<96>(dx, dy, x, y, lse, B, T, H, D, head_start, total_heads, rng); break;
    default: attn_backward_launch<128>(dx, dy, x, y, lse, B, T, H, D, head_start, total_heads, rng); break;
    }
}
