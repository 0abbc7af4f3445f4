/* cuda_attention_block.cu: ring attention's pieces for context parallelism on the GPU, the CUDA
 * counterparts of kernels/cpu/cpu_attention_block.c (kernels.h, "ring attention over blocks"):
 * the attention of a rank's query rows over one block of packed keys and values with its
 * log-sum-exp, the merge of two partial results, the block's backward from the merged output,
 * the key/value packing and the column-block reshuffles of --cp-comm-type a2a. Templates on the
 * compute dtype E (bf16, fp16: cuda_kernels_t.cuh), fp32 accumulation.
 *
 * Positions are global (attention_span: one or two pieces per sequence), so the causal mask
 * (key visible iff pos(key) <= pos(query)) and the dropout mask are those of one rank holding the
 * whole sequence; the keep decision of probability (query pq, key pk) of head (b, head_start + h)
 * is philox_keep_attention(seed, stream, offset + (b total_heads + head_start + h) T^2, T, pq, pk)
 * with T = spec.total_T, the CPU's own test, so both backends drop the same probabilities.
 *
 * The attention kernels are cuda_attention.cu's flash attention (FlashAttention-2 on
 * mma.sync.m16n8k16 tensor-core tiles, cuda_attention_tiles.cuh; head dimension padded to 64 or
 * 128) with the queries in qkv[B,Tq,(H+2G)D] and the keys and values in kv[B,Tk,G,2D]:
 *   forward (block = 128 query rows of one head, walking key tiles of 64): online softmax over the
 *     block's visible keys; out = O / l (kept probabilities times 1/(1-p)), lse = m + log l; a row
 *     that sees no key gets out 0 and lse -inf;
 *   backward (given the merged out and lse): a row kernel first writes lse log2(e) (+inf for rows
 *     that see nothing, and for the padding: their probabilities become 0) and
 *     delta = dout . out per row; then dK, dV (block = 64 keys of one query group, walking the
 *     query tiles of 32 of each of its heads) and dQ (block = 64 query rows, walking key tiles
 *     of 64)
 *     recompute P = exp(s - lse), dP = keep/(1-p) dout.v, dS = P (dP - delta) and ADD
 *     dS q / sqrt(D), P keep/(1-p) dout, dS k / sqrt(D) to dkv and dqkv's query heads (the ring
 *     sums over blocks). No atomics: bitwise reproducible.
 * The mask is applied by global position: a tile (or a warp's 16 rows of it) that no query sees
 * is skipped, one every query sees whole takes no mask, others are masked element by element.
 * With a sliding window (spec.windowed, window_left W >= 0) a key is visible only at positions
 * pq - W .. (pq when causal): block_window() gives W (a huge value without one, so the same tests
 * serve), the tile tests take the window's lower bound too (whole tiles before the window are
 * skipped: a block's work ~ its rows x W), and a block no query sees at all (the ring's far
 * blocks) walks nothing and gives out 0, lse -inf, gradients untouched.
 * Dropout draws one Philox4x32-7 call per kept-or-not element (no pair sharing yet). */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_attention_block.cuh"
#include "kernels/cuda/cuda_attention_tiles.cuh"
#include "kernels/philox.h"

/* warps per block (16 rows each: queries of the forward and dQ kernels, keys of dK/dV) and the
 * blocks per SM the compiler must fit (the forward's as cuda_attention.cu's) */
#define FORWARD_WARPS 8
#define FORWARD_MIN_BLOCKS_64 2   /* at head dimension 64 without dropout */
#define DQ_WARPS(DP) 4
#define DKDV_WARPS 4
#define KEY_TILE 64                   /* keys per step of the forward and dQ kernels */
#define QUERY_TILE 32                 /* queries per step of the dK/dV kernel */
#define STATS_PAD 128                 /* row statistics padded to a multiple of this (>= every tile) */
#define MAX_D 128

/* position of row t of a span (pieces <= 2, t < pieces * piece_length) */
static __device__ __forceinline__ int span_position(const attention_span &s, int t) {
    return t < s.piece_length ? s.start[0] + t : s.start[1] + (t - s.piece_length);
}

/* the lowest and highest positions of rows [a, b] of a span (a <= b; each piece increases) */
static __device__ __forceinline__ void span_range(const attention_span &s, int a, int b, int &lo, int &hi) {
    int pa = span_position(s, a), pb = span_position(s, b);
    if (a < s.piece_length && b >= s.piece_length) {
        lo = min(pa, s.start[1]);
        hi = max(s.start[0] + s.piece_length - 1, pb);
    } else {
        lo = pa;
        hi = pb;
    }
}

static __host__ __device__ __forceinline__ int span_rows(const attention_span &s) { return s.pieces * s.piece_length; }

/* the dropout counter of element (0, 0) of head h of sequence b */
static __device__ __forceinline__ uint64_t head_counter(const dropout_rng &rng, const attention_block_spec &spec,
                                                        int b, int h) {
    uint64_t T = (uint64_t)spec.total_T;
    return rng.offset + ((uint64_t)b * (uint64_t)spec.total_heads + (uint64_t)(spec.head_start + h)) * T * T;
}

/* whether probability (pq, pk) is kept (the CPU's philox_keep_attention) */
static __device__ __forceinline__ bool keeps(const dropout_rng &rng, uint64_t head_base, int total_T, int pq, int pk) {
    return philox_keep_attention(rng.seed, rng.stream, head_base, total_T, pq, pk, rng.p) != 0;
}

/* one warp: dst rows [row0, row0 + 16) += f * acc (the fp32 fragments of 16 x DP), skipping rows
 * >= rows and columns >= D (fragment element e of tile n: row g + 8 (e / 2), column 8n + 2t + e % 2) */
template <int DP, typename E>
static __device__ __forceinline__ void add_rows(E *dst, size_t stride, const float (&acc)[DP / 8][4], float f,
                                                int row0, int rows, int D, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < DP / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = row0 + g + 8 * (e >> 1), col = 8 * n + 2 * t + (e & 1);
            if (row < rows && col < D) {
                E *at = dst + (size_t)row * stride + col;
                *at = from_float<E>(to_float(*at) + f * acc[n][e]);
            }
        }
}

/* the sliding window W (a query at pq sees keys from pq - W): spec.window_left, or without a
 * window one larger than any distance of positions (so pq - W never excludes a key) */
#define NO_WINDOW (INT_MAX / 4)
static __host__ __device__ __forceinline__ int block_window(const attention_block_spec &spec) {
    return spec.windowed && spec.window_left >= 0 ? spec.window_left : NO_WINDOW;
}

/* a query tile [q_begin, q_end) that some key of positions key_lo .. key_hi may be seen by
 * (causal: a query at or after key_lo; window W: one at or before key_hi + W) */
static __device__ __forceinline__ bool queries_reach(const attention_block_spec &spec, int q_begin, int q_end,
                                                     int key_lo, int key_hi) {
    int lo, hi;
    span_range(spec.q, q_begin, q_end - 1, lo, hi);
    return (!spec.causal || hi >= key_lo) && lo <= key_hi + block_window(spec);
}

/* the first step at or after `from` (step: query head from / tiles, query tile from % tiles) whose
 * queries some key of the block (positions from key_lo) meets */
static __device__ __forceinline__ int next_query_step(const attention_block_spec &spec, int from, int steps, int tiles,
                                                      int tile, int Tq, int key_lo, int key_hi) {
    int step = from;
    while (step < steps &&
           !queries_reach(spec, (step % tiles) * tile, min((step % tiles) * tile + tile, Tq), key_lo, key_hi))
        step++;
    return step;
}

/* a key tile [k_begin, k_end) some query of positions query_lo .. query_hi may see (causal: a key
 * at or before query_hi; window W: one at or after query_lo - W) */
static __device__ __forceinline__ bool keys_reach(const attention_block_spec &spec, int k_begin, int k_end,
                                                  int query_lo, int query_hi) {
    int lo, hi;
    span_range(spec.k, k_begin, k_end - 1, lo, hi);
    return (!spec.causal || lo <= query_hi) && hi >= query_lo - block_window(spec);
}

/* the first key tile at or after `from` that some query of the block (positions query_lo ..
 * query_hi) sees */
static __device__ __forceinline__ int next_key_tile(const attention_block_spec &spec, int from, int key_tiles, int tile,
                                                    int Tk, int query_lo, int query_hi) {
    int kt = from;
    while (kt < key_tiles && !keys_reach(spec, kt * tile, min(kt * tile + tile, Tk), query_lo, query_hi)) kt++;
    return kt;
}

/* ---- forward: block = (b h, 16 WARPS query rows), warp w owns rows 16w..16w+15; key tiles of 64 (those
 * no row of the block sees skipped) ---- */
template <int DP, int WARPS, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(32 * WARPS, DP <= 64 && !DROPOUT ? FORWARD_MIN_BLOCKS_64 : 0)
block_forward_kernel(E *out, float *lse, const E *qkv, const E *kv, int H, int G, int D, attention_block_spec spec,
                     dropout_rng rng, int vec) {
    constexpr int BM = 16 * WARPS, BN = KEY_TILE, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char block_smem[];
    E *q_s = reinterpret_cast<E *>(block_smem); /* BM x LD */
    E *kv_s = q_s + BM * LD;                     /* [stage 0, 1][K, V] BN x LD */

    const int Tq = span_rows(spec.q), Tk = span_rows(spec.k);
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = blockIdx.y * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const E *q_base = qkv + (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D);
    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)(h / (H / G)) * 2 * D;
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;
    const int key_tiles = (Tk + BN - 1) / BN;
    const int W = block_window(spec);

    int row_pos[2]; /* positions of this lane's rows g, g + 8; -1 past Tq */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int row = warp_row0 + g + 8 * i;
        row_pos[i] = row < Tq ? span_position(spec.q, row) : -1;
    }
    const bool warp_rows = warp_row0 < Tq, warp_whole = warp_row0 + 15 < Tq;
    int warp_lo = 0, warp_hi = -1;
    if (warp_rows) span_range(spec.q, warp_row0, min(warp_row0 + 15, Tq - 1), warp_lo, warp_hi);

    int block_lo, block_hi; /* the block has rows: q0 < Tq */
    span_range(spec.q, q0, min(q0 + BM, Tq) - 1, block_lo, block_hi);
    int kt = next_key_tile(spec, 0, key_tiles, BN, Tk, block_lo, block_hi), buffer = 0;
    attn_load_tile<DP, BM, THREADS>(q_s, q_base, C3, q0, Tq, D, vec);
    if (kt < key_tiles) {
        attn_load_tile<DP, BN, THREADS>(kv_s, k_base, KV, kt * BN, Tk, D, vec);
        attn_load_tile<DP, BN, THREADS>(kv_s + BN * LD, k_base + D, KV, kt * BN, Tk, D, vec);
    }
    cp_async_commit();

    float o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; /* raw scores, the same in a quad */
    float l_run[2] = {0.0f, 0.0f};           /* this lane's part of the row sums */

    while (kt < key_tiles) { /* the key tiles some row of the block sees */
        const int k0 = kt * BN, k_end = min(k0 + BN, Tk);
        const int next = next_key_tile(spec, kt + 1, key_tiles, BN, Tk, block_lo, block_hi);
        const E *k_s = kv_s + buffer * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (next < key_tiles) {
            E *into = kv_s + (buffer ^ 1) * 2 * BN * LD;
            attn_load_tile<DP, BN, THREADS>(into, k_base, KV, next * BN, Tk, D, vec);
            attn_load_tile<DP, BN, THREADS>(into + BN * LD, k_base + D, KV, next * BN, Tk, D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        int key_lo, key_hi;
        span_range(spec.k, k0, k_end - 1, key_lo, key_hi);
        /* some row of the warp sees some key */
        if (warp_rows && (!spec.causal || key_lo <= warp_hi) && key_hi >= warp_lo - W) {
            const bool whole = warp_whole && k_end - k0 == BN && (!spec.causal || key_hi <= warp_lo) &&
                               key_lo >= warp_hi - W;
            float s[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            if (!whole) {
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int col = k0 + 8 * n + 2 * t + (e & 1), pq = row_pos[e >> 1];
                        const int pk = col < Tk ? span_position(spec.k, col) : 0;
                        const bool visible = pq >= 0 && col < Tk && (!spec.causal || pk <= pq) && pk >= pq - W;
                        if (!visible) s[n][e] = -INFINITY;
                    }
            }
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
                if (m_new[i] == -INFINITY) { /* the row has seen no key yet: nothing to rescale */
                    alpha[i] = 1.0f;
                    neg_m[i] = 0.0f;
                } else {
                    alpha[i] = fast_exp2((m_run[i] - m_new[i]) * scale_log2);
                    neg_m[i] = -m_new[i] * scale_log2;
                }
                m_run[i] = m_new[i];
                l_run[i] *= alpha[i];
            }
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, neg_m[e >> 1]));
                    l_run[e >> 1] += p; /* the normalizer sums undropped probabilities */
                    if (DROPOUT && p > 0.0f) { /* p > 0: a visible element */
                        const int col = k0 + 8 * n + 2 * t + (e & 1);
                        if (!keeps(rng, head_base, spec.total_T, row_pos[e >> 1], span_position(spec.k, col))) p = 0.0f;
                    }
                    s[n][e] = p;
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
        kt = next;
        buffer ^= 1;
    }
    /* a block no query of which sees a key (causal, or the window's far blocks) never waited for
     * its Q copy: it must land before the rows below reuse q_s */
    cp_async_wait<0>();
    __syncthreads();

    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    float factor[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float l = quad_sum(l_run[i]);
        const int row = warp_row0 + g + 8 * i;
        factor[i] = l > 0.0f ? keep_scale / l : 0.0f;
        if (t == 0 && row < Tq)
            lse[(size_t)bh * Tq + row] = l > 0.0f ? (m_run[i] * scale_log2 + log2f(l)) * attn_ln2 : -INFINITY;
    }
    E *stage = q_s + 16 * warp * LD; /* the warp's own Q rows, read only by this warp */
    attn_stage_rows<DP>(stage, o, factor[0], factor[1], lane);
    attn_store_rows<DP>(out + (size_t)b * Tq * HD + (size_t)h * D, HD, stage, warp_row0, Tq, D, vec, lane);
}

/* ---- backward, row statistics: one warp per row (b h, t) of the padded [B H, Tpad] layout ---- */
template <typename E>
static __global__ void block_rows_kernel(float *lse2, float *delta, const E *dout, const E *out, const float *lse,
                                         int B, int Tq, int Tpad, int H, int D) {
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * H * Tpad) return; /* whole warps leave together */
    const size_t bh = row / Tpad;
    const int t = (int)(row % Tpad), b = (int)(bh / H), h = (int)(bh % H);
    float sum = 0.0f;
    if (t < Tq) {
        const size_t at = (((size_t)b * Tq + t) * H + h) * D;
        for (int d = lane; d < D; d += 32) sum += to_float(dout[at + d]) * to_float(out[at + d]);
    }
    sum = warp_sum_f32(sum);
    if (lane == 0) {
        const float l = t < Tq ? lse[bh * Tq + t] : -INFINITY;
        lse2[row] = l == -INFINITY ? INFINITY : l * attn_log2e; /* +inf: every probability of the row is 0 */
        delta[row] = sum;
    }
}

/* ---- backward, dK and dV: block = (b g, 16 WARPS keys), warp w owns keys 16w..16w+15; for each query
 * head of group g, the query tiles of 32 (those that see no key of the block skipped) ---- */
template <int DP, int WARPS, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(32 * WARPS)
block_backward_dkdv_kernel(E *dkv, const E *dout, const E *qkv, const E *kv, const float *lse2, const float *delta,
                           int Tpad, int H, int G, int D, attention_block_spec spec, dropout_rng rng, int vec) {
    constexpr int BN = 16 * WARPS, BM = QUERY_TILE, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BM / 8;
    constexpr int STAGE = 2 * BM * LD + 2 * BM * 2; /* E elements: Q, dO, then lse2 and delta (fp32) */
    extern __shared__ __align__(128) unsigned char block_smem[];
    E *k_s = reinterpret_cast<E *>(block_smem); /* BN x LD */
    E *v_s = k_s + BN * LD;                      /* BN x LD */
    E *stages = v_s + BN * LD;                   /* [2][Q BM x LD, dO BM x LD, lse2 BM, delta BM] */

    const int Tq = span_rows(spec.q), Tk = span_rows(spec.k);
    const int bg = blockIdx.x, b = bg / G, group = bg % G, per = H / G;
    const int k0 = blockIdx.y * BN, k_end = min(k0 + BN, Tk);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_key0 = k0 + 16 * warp;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)group * 2 * D;
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    const int tiles = (Tq + BM - 1) / BM, steps = per * tiles;
    const int W = block_window(spec);

    int key_pos[2]; /* this lane's keys g, g + 8; -1 past Tk */
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int key = warp_key0 + g + 8 * i;
        key_pos[i] = key < Tk ? span_position(spec.k, key) : -1;
    }
    int block_lo, block_hi, warp_lo = 0, warp_hi = -1;
    span_range(spec.k, k0, k_end - 1, block_lo, block_hi);
    const bool warp_keys = warp_key0 < Tk, warp_whole = warp_key0 + 15 < Tk;
    if (warp_keys) span_range(spec.k, warp_key0, min(warp_key0 + 15, Tk - 1), warp_lo, warp_hi);

#define DKDV_STAGE_LOAD(step, into)                                                                                   \
    do {                                                                                                              \
        const int h_ = group * per + (step) / tiles, q_ = ((step) % tiles) * BM;                                      \
        const size_t bh_ = (size_t)b * H + (size_t)h_;                                                                \
        E *stage_ = (into);                                                                                           \
        attn_load_tile<DP, BM, THREADS>(stage_, qkv + (size_t)b * Tq * C3 + qkv_query_offset(h_, H, G, D), C3, q_,    \
                                        Tq, D, vec);                                                                  \
        attn_load_tile<DP, BM, THREADS>(stage_ + BM * LD, dout + (size_t)b * Tq * HD + (size_t)h_ * D, HD, q_, Tq, D, \
                                        vec);                                                                         \
        float *stats_ = reinterpret_cast<float *>(stage_ + 2 * BM * LD);                                              \
        attn_load_floats<BM, THREADS>(stats_, lse2 + bh_ * Tpad + q_);                                                \
        attn_load_floats<BM, THREADS>(stats_ + BM, delta + bh_ * Tpad + q_);                                          \
    } while (0)
    int it = next_query_step(spec, 0, steps, tiles, BM, Tq, block_lo, block_hi), buffer = 0;
    attn_load_tile<DP, BN, THREADS>(k_s, k_base, KV, k0, Tk, D, vec);
    attn_load_tile<DP, BN, THREADS>(v_s, k_base + D, KV, k0, Tk, D, vec);
    if (it < steps) DKDV_STAGE_LOAD(it, stages);
    cp_async_commit();

    float dk[DP / 8][4], dv[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    while (it < steps) {
        const int h = group * per + it / tiles, q0 = (it % tiles) * BM, q_end = min(q0 + BM, Tq);
        const int next = next_query_step(spec, it + 1, steps, tiles, BM, Tq, block_lo, block_hi);
        const E *q_s = stages + buffer * STAGE, *do_s = q_s + BM * LD;
        const float *lse2_s = reinterpret_cast<const float *>(do_s + BM * LD), *delta_s = lse2_s + BM;
        if (next < steps) DKDV_STAGE_LOAD(next, stages + (buffer ^ 1) * STAGE);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        int q_lo, q_hi;
        span_range(spec.q, q0, q_end - 1, q_lo, q_hi);
        /* some query of the tile sees some key of the warp */
        if (warp_keys && (!spec.causal || q_hi >= warp_lo) && q_lo <= warp_hi + W) {
            const bool whole = warp_whole && q_end - q0 == BM && (!spec.causal || q_lo >= warp_hi) &&
                               q_hi <= warp_lo + W;
            const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;
            float s[NT][4], dp[NT][4]; /* S^T, dP^T: row = key (g, g + 8), column = query */
            warp_gemm_abt<DP, NT>(s, k_s + 16 * warp * LD, q_s, lane);
            warp_gemm_abt<DP, NT>(dp, v_s + 16 * warp * LD, do_s, lane);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(lse2_s + 8 * n + 2 * t);
                const float2 dd = *reinterpret_cast<const float2 *>(delta_s + 8 * n + 2 * t);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int query = q0 + 8 * n + 2 * t + (e & 1), pk = key_pos[e >> 1];
                    /* rows past Tq and rows that see nothing have lse2 +inf: p = 0 */
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -((e & 1) ? l2.y : l2.x)));
                    if (!whole) {
                        const int pq = query < Tq ? span_position(spec.q, query) : 0;
                        const bool visible = pk >= 0 && query < Tq && (!spec.causal || pk <= pq) && pk >= pq - W;
                        if (!visible) p = 0.0f;
                    }
                    float dpv = dp[n][e], kept_p = p;
                    if (DROPOUT) {
                        const bool keep = p > 0.0f && keeps(rng, head_base, spec.total_T, span_position(spec.q, query), pk);
                        dpv = keep ? dpv * keep_scale : 0.0f;
                        kept_p = keep ? p : 0.0f;
                    }
                    s[n][e] = kept_p;                                  /* P keep, for dV */
                    dp[n][e] = p * (dpv - ((e & 1) ? dd.y : dd.x));    /* dS, for dK */
                }
            }
            warp_gemm_pv<DP, NT>(dv, s, do_s, lane); /* dV += (P keep)^T dO */
            warp_gemm_pv<DP, NT>(dk, dp, q_s, lane); /* dK += dS^T Q */
        }
        __syncthreads(); /* every warp is done with this stage before it is refilled */
        it = next;
        buffer ^= 1;
    }
#undef DKDV_STAGE_LOAD

    E *dk_base = dkv + (size_t)b * Tk * KV + (size_t)group * 2 * D;
    add_rows<DP>(dk_base, KV, dk, 1.0f / sqrtf((float)D), warp_key0, Tk, D, lane);
    add_rows<DP>(dk_base + D, KV, dv, keep_scale, warp_key0, Tk, D, lane);
}

/* ---- backward, dQ: block = (b h, 16 WARPS query rows), warp w owns rows 16w..16w+15; key tiles of 64
 * (those no query of the block sees skipped) ---- */
template <int DP, int WARPS, bool DROPOUT, typename E>
static __global__ void __launch_bounds__(32 * WARPS)
block_backward_dq_kernel(E *dqkv, const E *dout, const E *qkv, const E *kv, const float *lse2, const float *delta,
                         int Tpad, int H, int G, int D, attention_block_spec spec, dropout_rng rng, int vec) {
    constexpr int BM = 16 * WARPS, BN = KEY_TILE, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char block_smem[];
    E *q_s = reinterpret_cast<E *>(block_smem); /* BM x LD */
    E *do_s = q_s + BM * LD;                     /* BM x LD */
    E *kv_s = do_s + BM * LD;                    /* [stage 0, 1][K, V] BN x LD */

    const int Tq = span_rows(spec.q), Tk = span_rows(spec.k);
    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = blockIdx.y * BM, q_end = min(q0 + BM, Tq);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const E *q_base = qkv + (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D);
    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)(h / (H / G)) * 2 * D;
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;
    const int key_tiles = (Tk + BN - 1) / BN;
    const int W = block_window(spec);

    /* rows g and g + 8 of the warp (padded statistics: no bounds check) */
    const float *lse2_rows = lse2 + (size_t)bh * Tpad, *delta_rows = delta + (size_t)bh * Tpad;
    const float row_lse2[2] = {lse2_rows[warp_row0 + g], lse2_rows[warp_row0 + g + 8]};
    const float row_delta[2] = {delta_rows[warp_row0 + g], delta_rows[warp_row0 + g + 8]};
    int row_pos[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int row = warp_row0 + g + 8 * i;
        row_pos[i] = row < Tq ? span_position(spec.q, row) : -1;
    }
    int block_lo, block_hi, warp_lo = 0, warp_hi = -1;
    span_range(spec.q, q0, q_end - 1, block_lo, block_hi); /* the block has rows: q0 < Tq */
    const bool warp_rows = warp_row0 < Tq, warp_whole = warp_row0 + 15 < Tq;
    if (warp_rows) span_range(spec.q, warp_row0, min(warp_row0 + 15, Tq - 1), warp_lo, warp_hi);

#define DQ_TILE_LOAD(tile, into)                                                                                      \
    do {                                                                                                              \
        attn_load_tile<DP, BN, THREADS>((into), k_base, KV, (tile) * BN, Tk, D, vec);                                \
        attn_load_tile<DP, BN, THREADS>((into) + BN * LD, k_base + D, KV, (tile) * BN, Tk, D, vec);                  \
    } while (0)

    int kt = next_key_tile(spec, 0, key_tiles, BN, Tk, block_lo, block_hi), buffer = 0;
    attn_load_tile<DP, BM, THREADS>(q_s, q_base, C3, q0, Tq, D, vec);
    attn_load_tile<DP, BM, THREADS>(do_s, dout + (size_t)b * Tq * HD + (size_t)h * D, HD, q0, Tq, D, vec);
    if (kt < key_tiles) DQ_TILE_LOAD(kt, kv_s);
    cp_async_commit();

    float dq[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    while (kt < key_tiles) {
        const int k0 = kt * BN, k_end = min(k0 + BN, Tk);
        const int next = next_key_tile(spec, kt + 1, key_tiles, BN, Tk, block_lo, block_hi);
        const E *k_s = kv_s + buffer * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (next < key_tiles) DQ_TILE_LOAD(next, kv_s + (buffer ^ 1) * 2 * BN * LD);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        int key_lo, key_hi;
        span_range(spec.k, k0, k_end - 1, key_lo, key_hi);
        if (warp_rows && (!spec.causal || key_lo <= warp_hi) && key_hi >= warp_lo - W) {
            const bool whole = warp_whole && k_end - k0 == BN && (!spec.causal || key_hi <= warp_lo) &&
                               key_lo >= warp_hi - W;
            float s[NT][4], dp[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            warp_gemm_abt<DP, NT>(dp, do_s + 16 * warp * LD, v_s, lane);
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + 8 * n + 2 * t + (e & 1), pq = row_pos[e >> 1];
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -row_lse2[e >> 1]));
                    if (!whole) {
                        const int pk = key < Tk ? span_position(spec.k, key) : 0;
                        const bool visible = pq >= 0 && key < Tk && (!spec.causal || pk <= pq) && pk >= pq - W;
                        if (!visible) p = 0.0f;
                    }
                    float dpv = dp[n][e];
                    if (DROPOUT) {
                        const bool keep = p > 0.0f && keeps(rng, head_base, spec.total_T, pq, span_position(spec.k, key));
                        dpv = keep ? dpv * keep_scale : 0.0f;
                    }
                    s[n][e] = p * (dpv - row_delta[e >> 1]); /* dS */
                }
            warp_gemm_pv<DP, NT>(dq, s, k_s, lane); /* dQ += dS K */
        }
        __syncthreads();
        kt = next;
        buffer ^= 1;
    }
#undef DQ_TILE_LOAD

    add_rows<DP>(dqkv + (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D), C3, dq, 1.0f / sqrtf((float)D),
                 warp_row0, Tq, D, lane);
}

/* ---- merge: one warp per (b, t, h) row ---- */

template <typename E>
static __global__ void merge_kernel(E *out, float *lse, const E *block_out, const float *block_lse, int B, int T,
                                    int H, int D) {
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * T * H) return; /* whole warps leave together */
    const int h = (int)(row % H), t = (int)(row / H % T), b = (int)(row / H / T);
    const size_t lse_at = ((size_t)b * H + h) * T + t;
    const float la = lse[lse_at], lb = block_lse[lse_at];
    if (lb == -INFINITY) return; /* the block adds nothing to this row */
    const float m = fmaxf(la, lb);
    const float merged = m + logf(expf(la - m) + expf(lb - m));
    const float wa = expf(la - merged), wb = expf(lb - merged);
    E *o = out + row * D; /* ((b T + t) H + h) D */
    const E *bo = block_out + row * D;
    for (int d = lane; d < D; d += 32) o[d] = from_float<E>(to_float(o[d]) * wa + to_float(bo[d]) * wb);
    __syncwarp(); /* every lane has read lse before it changes */
    if (lane == 0) lse[lse_at] = merged;
}

/* ---- copies ---- */

/* kv[r][g][0:2D] <-> qkv[r][key offset of g : + 2D] (to_kv: pack, else unpack) */
template <typename E, bool TO_KV>
static __global__ void kv_copy_kernel(E *dst, const E *src, int rows, int H, int G, int D) {
    const size_t n = (size_t)rows * G * 2 * D;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / KV, within = i % KV;
        int g = (int)(within / (2 * D)), e = (int)(within % (2 * D));
        size_t packed = i, in_qkv = r * C3 + qkv_key_offset(g, H, G, D) + e;
        if (TO_KV) dst[packed] = src[in_qkv];
        else dst[in_qkv] = src[packed];
    }
}

/* out[k][r][c] = in[r][k width + c] (TO_BLOCKS), or the inverse */
template <typename E, bool TO_BLOCKS>
static __global__ void column_blocks_kernel(E *out, const E *in, int rows, int blocks, int width) {
    const size_t n = (size_t)rows * blocks * width;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t c = i % width, r = i / width % rows, k = i / width / rows; /* i = (k rows + r) width + c */
        size_t columns = (r * blocks + k) * width + c;
        if (TO_BLOCKS) out[i] = in[columns];
        else out[columns] = in[i];
    }
}

/* ---- host entry points ---- */

/* dynamic shared memory above 48 KB must be allowed per kernel */
template <typename K>
static void allow_shared(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <typename E>
static void kv_pack(void *kv, const void *qkv, int rows, int H, int G, int D) {
    size_t n = (size_t)rows * G * 2 * D;
    if (n == 0) return;
    kv_copy_kernel<E, true><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>((E *)kv, (const E *)qkv, rows, H,
                                                                                       G, D);
    CHECK_LAUNCH();
}

template <typename E>
static void kv_unpack(void *dqkv, const void *dkv, int rows, int H, int G, int D) {
    size_t n = (size_t)rows * G * 2 * D;
    if (n == 0) return;
    kv_copy_kernel<E, false><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>((E *)dqkv, (const E *)dkv, rows,
                                                                                        H, G, D);
    CHECK_LAUNCH();
}

/* the padded head dimension the kernels are instantiated for */
static int padded_head_dim(const char *op, int D) {
    if (D >= 1 && D <= 64) return 64;
    if (D <= MAX_D) return 128;
    KERNELS_FATAL("cuda %s supports head dimensions 1..%d, got %d", op, MAX_D, D);
}

static void check_groups(const char *op, int H, int G) {
    if (G <= 0 || H % G != 0) KERNELS_FATAL("cuda %s: %d query heads do not split into %d query groups", op, H, G);
}

/* whether every tensor's rows start 16-byte aligned (cp.async and 16-byte stores) */
static int vector_io(int D, const void *a, const void *b, const void *c) {
    return D % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
}

template <int DP, bool DROPOUT, typename E>
static void forward_launch(E *out, float *lse, const E *qkv, const E *kv, int B, int H, int G, int D,
                           attention_block_spec spec, dropout_rng rng) {
    constexpr int WARPS = FORWARD_WARPS;
    auto kernel = block_forward_kernel<DP, WARPS, DROPOUT, E>;
    const size_t smem = (16 * (size_t)WARPS + 4 * (size_t)KEY_TILE) * ATTN_LD(DP) * sizeof(E);
    allow_shared(kernel, smem);
    dim3 grid((unsigned)(B * H), ceil_div((size_t)span_rows(spec.q), 16 * WARPS));
    kernel<<<grid, 32 * WARPS, smem, compute_stream()>>>(out, lse, qkv, kv, H, G, D, spec, rng,
                                                               vector_io(D, out, qkv, kv));
    CHECK_LAUNCH();
}

template <typename E>
static void block_forward(void *out, float *lse, const void *qkv, const void *kv, int B, int H, int G, int D,
                          attention_block_spec spec, dropout_rng rng) {
    int DP = padded_head_dim("attention_block_forward", D);
    check_groups("attention_block_forward", H, G);
    if ((size_t)B * H * span_rows(spec.q) == 0) return;
    E *o = (E *)out;
    const E *x = (const E *)qkv, *y = (const E *)kv;
    const bool drop = rng.p > 0.0f;
    if (DP == 64) {
        if (drop) forward_launch<64, true>(o, lse, x, y, B, H, G, D, spec, rng);
        else forward_launch<64, false>(o, lse, x, y, B, H, G, D, spec, rng);
    } else {
        if (drop) forward_launch<128, true>(o, lse, x, y, B, H, G, D, spec, rng);
        else forward_launch<128, false>(o, lse, x, y, B, H, G, D, spec, rng);
    }
}

template <typename E>
static void merge(void *out, float *lse, const void *block_out, const float *block_lse, int B, int T, int H, int D) {
    size_t rows = (size_t)B * T * H;
    if (rows == 0) return;
    merge_kernel<E><<<ceil_div(rows * 32, 256), 256, 0, compute_stream()>>>((E *)out, lse, (const E *)block_out,
                                                                            block_lse, B, T, H, D);
    CHECK_LAUNCH();
}

template <int DP, bool DROPOUT, typename E>
static void backward_launch(E *dqkv, E *dkv, const E *dout, const E *qkv, const E *kv, const float *lse2,
                            const float *delta, int Tpad, int B, int H, int G, int D, attention_block_spec spec,
                            dropout_rng rng) {
    const int vec = vector_io(D, dqkv, qkv, kv) && aligned16(dkv) && aligned16(dout);
    const size_t LD = ATTN_LD(DP);
    constexpr int KW = DKDV_WARPS, QW = DQ_WARPS(DP);
    auto dkdv = block_backward_dkdv_kernel<DP, KW, DROPOUT, E>;
    const size_t dkdv_smem = (32 * (size_t)KW + 4 * (size_t)QUERY_TILE) * LD * sizeof(E) +
                             4 * (size_t)QUERY_TILE * sizeof(float);
    allow_shared(dkdv, dkdv_smem);
    dim3 dkdv_grid((unsigned)(B * G), ceil_div((size_t)span_rows(spec.k), 16 * KW));
    dkdv<<<dkdv_grid, 32 * KW, dkdv_smem, compute_stream()>>>(dkv, dout, qkv, kv, lse2, delta, Tpad, H, G, D,
                                                                       spec, rng, vec);
    CHECK_LAUNCH();
    auto dq = block_backward_dq_kernel<DP, QW, DROPOUT, E>;
    const size_t dq_smem = (32 * (size_t)QW + 4 * (size_t)KEY_TILE) * LD * sizeof(E);
    allow_shared(dq, dq_smem);
    dim3 dq_grid((unsigned)(B * H), ceil_div((size_t)span_rows(spec.q), 16 * QW));
    dq<<<dq_grid, 32 * QW, dq_smem, compute_stream()>>>(dqkv, dout, qkv, kv, lse2, delta, Tpad, H, G, D, spec,
                                                                 rng, vec);
    CHECK_LAUNCH();
}

template <typename E>
static void block_backward(void *dqkv, void *dkv, const void *dout, const void *qkv, const void *kv, const void *out,
                           const float *lse, int B, int H, int G, int D, attention_block_spec spec, dropout_rng rng) {
    int DP = padded_head_dim("attention_block_backward", D);
    check_groups("attention_block_backward", H, G);
    int Tq = span_rows(spec.q), Tk = span_rows(spec.k);
    if ((size_t)B * H * Tq == 0 || Tk == 0) return;
    int Tpad = (Tq + STATS_PAD - 1) / STATS_PAD * STATS_PAD;
    size_t rows = (size_t)B * H * Tpad;
    float *lse2 = (float *)stream_scratch(2 * sizeof(float) * rows), *delta = lse2 + rows;
    block_rows_kernel<E><<<ceil_div(rows * 32, 256), 256, 0, compute_stream()>>>(lse2, delta, (const E *)dout,
                                                                                 (const E *)out, lse, B, Tq, Tpad, H, D);
    CHECK_LAUNCH();
    E *dx = (E *)dqkv, *dy = (E *)dkv;
    const E *go = (const E *)dout, *x = (const E *)qkv, *y = (const E *)kv;
    const bool drop = rng.p > 0.0f;
    if (DP == 64) {
        if (drop) backward_launch<64, true>(dx, dy, go, x, y, lse2, delta, Tpad, B, H, G, D, spec, rng);
        else backward_launch<64, false>(dx, dy, go, x, y, lse2, delta, Tpad, B, H, G, D, spec, rng);
    } else {
        if (drop) backward_launch<128, true>(dx, dy, go, x, y, lse2, delta, Tpad, B, H, G, D, spec, rng);
        else backward_launch<128, false>(dx, dy, go, x, y, lse2, delta, Tpad, B, H, G, D, spec, rng);
    }
}

template <typename E>
static void columns_to_blocks(void *out, const void *in, int rows, int blocks, int width) {
    size_t n = (size_t)rows * blocks * width;
    if (n == 0) return;
    column_blocks_kernel<E, true><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>((E *)out, (const E *)in,
                                                                                             rows, blocks, width);
    CHECK_LAUNCH();
}

template <typename E>
static void blocks_to_columns(void *out, const void *in, int rows, int blocks, int width) {
    size_t n = (size_t)rows * blocks * width;
    if (n == 0) return;
    column_blocks_kernel<E, false><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>((E *)out, (const E *)in,
                                                                                              rows, blocks, width);
    CHECK_LAUNCH();
}

template <typename E>
void cuda_attention_block_fill_ops(kernel_ops *ops) {
    ops->attention_kv_pack = kv_pack<E>;
    ops->attention_kv_unpack = kv_unpack<E>;
    ops->attention_block_forward = block_forward<E>;
    ops->attention_merge = merge<E>;
    ops->attention_block_backward = block_backward<E>;
    ops->columns_to_blocks = columns_to_blocks<E>;
    ops->blocks_to_columns = blocks_to_columns<E>;
}

template void cuda_attention_block_fill_ops<__nv_bfloat16>(kernel_ops *ops);
template void cuda_attention_block_fill_ops<__half>(kernel_ops *ops);
