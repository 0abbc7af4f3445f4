/* cuda_attention_block.cu: ring attention's pieces for context parallelism on the GPU, the CUDA
 * counterparts of kernels/cpu/cpu_attention_block.c (kernels.h, "ring attention over blocks"):
 * the attention of a rank's query rows over one block of packed keys and values with its
 * log-sum-exp, the merge of two partial results, the block's backward from the merged output,
 * the key/value packing and the column-block reshuffles of --cp-comm-type a2a. Templates on the
 * compute dtype E (bf16, fp16: cuda_kernels_t.cuh), fp32 arithmetic.
 *
 * Positions are global (attention_span: one or two pieces per sequence), so the causal mask
 * (key visible iff pos(key) <= pos(query)) and the dropout mask are those of one rank holding the
 * whole sequence; the keep decision of probability (query pq, key pk) of head (b, head_start + h)
 * is philox_keep_attention(seed, stream, offset + (b total_heads + head_start + h) T^2, T, pq, pk)
 * with T = spec.total_T, the CPU's draw, so both backends drop the same probabilities.
 *
 * The kernels are flash attention in SIMT fp32 (no tensor cores yet): a block of 4 warps owns 16
 * query rows of one head (forward, dQ) or 16 key rows of one query group (dK, dV); tiles of 32
 * rows of the other side stream through shared memory in fp32, lane j of a warp computes the
 * score of the tile's row j (rows padded to an odd length: conflict-free), and the output rows
 * are accumulated with lane l owning head channels l, l + 32, l + 64, l + 96 (D <= 128).
 *   forward: online softmax (running max m and sum l of the UNDROPPED exponentials), out = O/l
 *            with the kept probabilities scaled by 1/(1-p), lse = m + log l; no visible key:
 *            out 0, lse -inf
 *   backward (given the merged out, lse): delta = dout.out per row (a first kernel), then
 *            P = exp(s - lse), dP = keep/(1-p) dout.v, dS = P (dP - delta) / sqrt(D),
 *            dq += dS k (a kernel per query tile), dk += dS q and dv += P keep/(1-p) dout
 *            (a kernel per key tile walking the group's query heads): no atomics, so the
 *            results are bitwise reproducible. */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_attention_block.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

#define BLOCK_WARPS 4
#define BLOCK_THREADS (32 * BLOCK_WARPS)
#define ROWS_PER_WARP 4                         /* rows a warp owns (query rows, or key rows) */
#define OWN_ROWS (BLOCK_WARPS * ROWS_PER_WARP)  /* rows a block owns */
#define TILE 32                                 /* rows of the streamed side per step */
#define MAX_D 128
#define CHANNELS (MAX_D / 32)                   /* head channels per lane */

/* odd shared-memory row length: lane j reading row j's channel d hits bank (j LD + d) % 32, all
 * different */
static inline int odd_stride(int D) { return D | 1; }

/* global position of row t of a sequence in a span */
static __device__ __forceinline__ int span_position(const attention_span &s, int t) {
    return s.start[t / s.piece_length] + t % s.piece_length;
}

static __device__ __forceinline__ float warp_max_f32(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

/* the keep factor of probability (b, h, pq, pk): 1/(1-p) or 0 (the CPU's dropout_factor) */
static __device__ __forceinline__ float keep_factor(const dropout_rng &rng, uint64_t head_base, int total_T, int pq,
                                                    int pk) {
    return philox_keep_attention(rng.seed, rng.stream, head_base, total_T, pq, pk, rng.p) ? 1.0f / (1.0f - rng.p)
                                                                                           : 0.0f;
}

/* the dropout counter of element (0, 0) of head h of sequence b */
static __device__ __forceinline__ uint64_t head_counter(const dropout_rng &rng, const attention_block_spec &spec,
                                                        int b, int h) {
    uint64_t T = (uint64_t)spec.total_T;
    return rng.offset + ((uint64_t)b * (uint64_t)spec.total_heads + (uint64_t)(spec.head_start + h)) * T * T;
}

/* rows [row0, row0 + count) of a row-major E matrix (row stride `stride`, D channels from
 * `src`) into shared fp32 rows of length ld; rows past `rows` become zeros. Every thread of the
 * block calls it. */
template <typename E>
static __device__ __forceinline__ void load_rows(float *dst, int ld, const E *src, size_t stride, int row0, int count,
                                                 int rows, int D) {
    for (int idx = threadIdx.x; idx < count * D; idx += blockDim.x) {
        int r = idx / D, d = idx % D;
        dst[r * ld + d] = row0 + r < rows ? to_float(src[(size_t)(row0 + r) * stride + d]) : 0.0f;
    }
}

/* ---- forward ---- */

/* block = (b h, 16 query rows); warp w owns rows 4w..4w+3 of them */
template <typename E, bool DROPOUT>
static __global__ void __launch_bounds__(BLOCK_THREADS)
block_forward_kernel(E *out, float *lse, const E *qkv, const E *kv, int H, int G, int D, attention_block_spec spec,
                     dropout_rng rng) {
    extern __shared__ float smem[];
    const int ld = D | 1;
    float *q_s = smem;                  /* OWN_ROWS x D */
    float *k_s = q_s + OWN_ROWS * D;    /* TILE x ld */
    float *v_s = k_s + TILE * ld;       /* TILE x D */
    const int Tq = spec.q.pieces * spec.q.piece_length, Tk = spec.k.pieces * spec.k.piece_length;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, g = h / (H / G);
    const int row0 = blockIdx.y * OWN_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const float scale = rsqrtf((float)D);
    const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;

    load_rows(q_s, D, qkv + (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D), C3, row0, OWN_ROWS, Tq, D);

    float o[ROWS_PER_WARP][CHANNELS], m_run[ROWS_PER_WARP], l_run[ROWS_PER_WARP];
    int pq[ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        m_run[r] = -INFINITY;
        l_run[r] = 0.0f;
        int t1 = row0 + warp * ROWS_PER_WARP + r;
        pq[r] = t1 < Tq ? span_position(spec.q, t1) : -1;
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) o[r][c] = 0.0f;
    }
    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)g * 2 * D;
    for (int k0 = 0; k0 < Tk; k0 += TILE) {
        __syncthreads(); /* the previous tile is used up */
        load_rows(k_s, ld, k_base, KV, k0, TILE, Tk, D);
        load_rows(v_s, D, k_base + D, KV, k0, TILE, Tk, D);
        __syncthreads();
        const int t2 = k0 + lane;
        const int pk = t2 < Tk ? span_position(spec.k, t2) : 0;
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const bool visible = pq[r] >= 0 && t2 < Tk && (!spec.causal || pk <= pq[r]);
            if (!__any_sync(0xffffffffu, visible)) continue;
            const float *q = q_s + (warp * ROWS_PER_WARP + r) * D;
            float s = -INFINITY;
            if (visible) {
                float dot = 0.0f;
                for (int d = 0; d < D; d++) dot += q[d] * k_s[lane * ld + d];
                s = dot * scale;
            }
            const float m_new = fmaxf(m_run[r], warp_max_f32(s));
            const float alpha = expf(m_run[r] - m_new); /* m_run -inf: 0 */
            const float p = visible ? expf(s - m_new) : 0.0f;
            l_run[r] = l_run[r] * alpha + warp_sum_f32(p);
            m_run[r] = m_new;
            float kept = p;
            if (DROPOUT && visible && keep_factor(rng, head_base, spec.total_T, pq[r], pk) == 0.0f) kept = 0.0f;
#pragma unroll
            for (int c = 0; c < CHANNELS; c++) o[r][c] *= alpha;
            for (int j = 0; j < TILE; j++) {
                const float pj = __shfl_sync(0xffffffffu, kept, j);
                if (pj == 0.0f) continue; /* the same for every lane */
#pragma unroll
                for (int c = 0; c < CHANNELS; c++) {
                    int d = lane + 32 * c;
                    if (d < D) o[r][c] += pj * v_s[j * D + d];
                }
            }
        }
    }
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        int t1 = row0 + warp * ROWS_PER_WARP + r;
        if (t1 >= Tq) continue;
        bool seen = l_run[r] > 0.0f;
        float factor = seen ? keep_scale / l_run[r] : 0.0f;
        E *row = out + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) {
            int d = lane + 32 * c;
            if (d < D) row[d] = from_float<E>(o[r][c] * factor);
        }
        if (lane == 0) lse[(size_t)bh * Tq + t1] = seen ? m_run[r] + logf(l_run[r]) : -INFINITY;
    }
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

/* ---- backward ---- */

/* delta[(b H + h) Tq + t] = dout . out of the row; one warp per row */
template <typename E>
static __global__ void delta_kernel(float *delta, const E *dout, const E *out, int B, int Tq, int H, int D) {
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; /* (b Tq + t) H + h */
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * Tq * H) return;
    const int h = (int)(row % H), t = (int)(row / H % Tq), b = (int)(row / H / Tq);
    float sum = 0.0f;
    for (int d = lane; d < D; d += 32) sum += to_float(dout[row * D + d]) * to_float(out[row * D + d]);
    sum = warp_sum_f32(sum);
    if (lane == 0) delta[((size_t)b * H + h) * Tq + t] = sum;
}

/* dq: block = (b h, 16 query rows), walking the key tiles */
template <typename E, bool DROPOUT>
static __global__ void __launch_bounds__(BLOCK_THREADS)
block_backward_dq_kernel(E *dqkv, const E *dout, const E *qkv, const E *kv, const float *lse, const float *delta,
                         int H, int G, int D, attention_block_spec spec, dropout_rng rng) {
    extern __shared__ float smem[];
    const int ld = D | 1;
    float *q_s = smem;                  /* OWN_ROWS x D */
    float *do_s = q_s + OWN_ROWS * D;   /* OWN_ROWS x D */
    float *k_s = do_s + OWN_ROWS * D;   /* TILE x ld */
    float *v_s = k_s + TILE * ld;       /* TILE x ld */
    const int Tq = spec.q.pieces * spec.q.piece_length, Tk = spec.k.pieces * spec.k.piece_length;
    const int bh = blockIdx.x, b = bh / H, h = bh % H, g = h / (H / G);
    const int row0 = blockIdx.y * OWN_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const float scale = rsqrtf((float)D);
    const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;

    const size_t q_offset = (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D);
    load_rows(q_s, D, qkv + q_offset, C3, row0, OWN_ROWS, Tq, D);
    load_rows(do_s, D, dout + (size_t)b * Tq * HD + (size_t)h * D, HD, row0, OWN_ROWS, Tq, D);

    float dq[ROWS_PER_WARP][CHANNELS], row_lse[ROWS_PER_WARP], row_delta[ROWS_PER_WARP];
    int pq[ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        int t1 = row0 + warp * ROWS_PER_WARP + r;
        row_lse[r] = t1 < Tq ? lse[(size_t)bh * Tq + t1] : -INFINITY;
        row_delta[r] = t1 < Tq ? delta[(size_t)bh * Tq + t1] : 0.0f;
        pq[r] = t1 < Tq && row_lse[r] != -INFINITY ? span_position(spec.q, t1) : -1; /* -1: nothing to do */
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) dq[r][c] = 0.0f;
    }
    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)g * 2 * D;
    for (int k0 = 0; k0 < Tk; k0 += TILE) {
        __syncthreads();
        load_rows(k_s, ld, k_base, KV, k0, TILE, Tk, D);
        load_rows(v_s, ld, k_base + D, KV, k0, TILE, Tk, D);
        __syncthreads();
        const int t2 = k0 + lane;
        const int pk = t2 < Tk ? span_position(spec.k, t2) : 0;
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const bool visible = pq[r] >= 0 && t2 < Tk && (!spec.causal || pk <= pq[r]);
            if (!__any_sync(0xffffffffu, visible)) continue;
            const float *q = q_s + (warp * ROWS_PER_WARP + r) * D, *dO = do_s + (warp * ROWS_PER_WARP + r) * D;
            float ds = 0.0f;
            if (visible) {
                float dot = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; d++) {
                    dot += q[d] * k_s[lane * ld + d];
                    dp += dO[d] * v_s[lane * ld + d];
                }
                float prob = expf(dot * scale - row_lse[r]);
                float m = DROPOUT ? keep_factor(rng, head_base, spec.total_T, pq[r], pk) : 1.0f;
                ds = prob * (m * dp - row_delta[r]) * scale;
            }
            for (int j = 0; j < TILE; j++) {
                const float dsj = __shfl_sync(0xffffffffu, ds, j);
                if (dsj == 0.0f) continue;
#pragma unroll
                for (int c = 0; c < CHANNELS; c++) {
                    int d = lane + 32 * c;
                    if (d < D) dq[r][c] += dsj * k_s[j * ld + d];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        int t1 = row0 + warp * ROWS_PER_WARP + r;
        if (pq[r] < 0) continue; /* past Tq or a row that sees nothing: untouched */
        E *row = dqkv + q_offset + (size_t)t1 * C3;
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) {
            int d = lane + 32 * c;
            if (d < D) row[d] = from_float<E>(to_float(row[d]) + dq[r][c]);
        }
    }
}

/* dk, dv: block = (b g, 16 key rows), walking the query tiles of each query head of group g */
template <typename E, bool DROPOUT>
static __global__ void __launch_bounds__(BLOCK_THREADS)
block_backward_dkdv_kernel(E *dkv, const E *dout, const E *qkv, const E *kv, const float *lse, const float *delta,
                           int H, int G, int D, attention_block_spec spec, dropout_rng rng) {
    extern __shared__ float smem[];
    const int ld = D | 1;
    float *k_s = smem;                    /* OWN_ROWS x D */
    float *v_s = k_s + OWN_ROWS * D;      /* OWN_ROWS x D */
    float *q_s = v_s + OWN_ROWS * D;      /* TILE x ld */
    float *do_s = q_s + TILE * ld;        /* TILE x ld */
    float *lse_s = do_s + TILE * ld;      /* TILE */
    float *delta_s = lse_s + TILE;        /* TILE */
    const int Tq = spec.q.pieces * spec.q.piece_length, Tk = spec.k.pieces * spec.k.piece_length;
    const int bg = blockIdx.x, b = bg / G, g = bg % G, per = H / G;
    const int row0 = blockIdx.y * OWN_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    const float scale = rsqrtf((float)D);

    const E *k_base = kv + (size_t)b * Tk * KV + (size_t)g * 2 * D;
    load_rows(k_s, D, k_base, KV, row0, OWN_ROWS, Tk, D);
    load_rows(v_s, D, k_base + D, KV, row0, OWN_ROWS, Tk, D);

    float dk[ROWS_PER_WARP][CHANNELS], dv[ROWS_PER_WARP][CHANNELS];
    int pk[ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        int t2 = row0 + warp * ROWS_PER_WARP + r;
        pk[r] = t2 < Tk ? span_position(spec.k, t2) : -1;
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) dk[r][c] = dv[r][c] = 0.0f;
    }
    for (int h = g * per; h < (g + 1) * per; h++) {
        const uint64_t head_base = DROPOUT ? head_counter(rng, spec, b, h) : 0;
        const E *q_base = qkv + (size_t)b * Tq * C3 + qkv_query_offset(h, H, G, D);
        const E *do_base = dout + (size_t)b * Tq * HD + (size_t)h * D;
        const float *lse_h = lse + ((size_t)b * H + h) * Tq, *delta_h = delta + ((size_t)b * H + h) * Tq;
        for (int q0 = 0; q0 < Tq; q0 += TILE) {
            __syncthreads();
            load_rows(q_s, ld, q_base, C3, q0, TILE, Tq, D);
            load_rows(do_s, ld, do_base, HD, q0, TILE, Tq, D);
            if (threadIdx.x < TILE) {
                int t1 = q0 + threadIdx.x;
                lse_s[threadIdx.x] = t1 < Tq ? lse_h[t1] : -INFINITY;
                delta_s[threadIdx.x] = t1 < Tq ? delta_h[t1] : 0.0f;
            }
            __syncthreads();
            const int t1 = q0 + lane;
            const float row_lse = lse_s[lane];
            /* a query row past Tq or one that sees no key anywhere (lse -inf) contributes nothing */
            const int pq = t1 < Tq && row_lse != -INFINITY ? span_position(spec.q, t1) : -1;
#pragma unroll
            for (int r = 0; r < ROWS_PER_WARP; r++) {
                const bool visible = pq >= 0 && pk[r] >= 0 && (!spec.causal || pk[r] <= pq);
                if (!__any_sync(0xffffffffu, visible)) continue;
                const float *k = k_s + (warp * ROWS_PER_WARP + r) * D, *v = v_s + (warp * ROWS_PER_WARP + r) * D;
                float ds = 0.0f, pm = 0.0f;
                if (visible) {
                    float dot = 0.0f, dp = 0.0f;
                    for (int d = 0; d < D; d++) {
                        dot += q_s[lane * ld + d] * k[d];
                        dp += do_s[lane * ld + d] * v[d];
                    }
                    float prob = expf(dot * scale - row_lse);
                    float m = DROPOUT ? keep_factor(rng, head_base, spec.total_T, pq, pk[r]) : 1.0f;
                    ds = prob * (m * dp - delta_s[lane]) * scale;
                    pm = prob * m;
                }
                for (int i = 0; i < TILE; i++) {
                    const float dsi = __shfl_sync(0xffffffffu, ds, i), pmi = __shfl_sync(0xffffffffu, pm, i);
                    if (dsi == 0.0f && pmi == 0.0f) continue;
#pragma unroll
                    for (int c = 0; c < CHANNELS; c++) {
                        int d = lane + 32 * c;
                        if (d < D) {
                            dk[r][c] += dsi * q_s[i * ld + d];
                            dv[r][c] += pmi * do_s[i * ld + d];
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
        if (pk[r] < 0) continue;
        int t2 = row0 + warp * ROWS_PER_WARP + r;
        E *row = dkv + (size_t)b * Tk * KV + (size_t)t2 * KV + (size_t)g * 2 * D;
#pragma unroll
        for (int c = 0; c < CHANNELS; c++) {
            int d = lane + 32 * c;
            if (d < D) {
                row[d] = from_float<E>(to_float(row[d]) + dk[r][c]);
                row[D + d] = from_float<E>(to_float(row[D + d]) + dv[r][c]);
            }
        }
    }
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

static void check_head_dim(const char *op, int D) {
    if (D < 1 || D > MAX_D) KERNELS_FATAL("cuda %s supports head dimensions 1..%d, got %d", op, MAX_D, D);
}

/* dynamic shared memory above 48 KB must be allowed per kernel */
template <typename K>
static void allow_shared(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static int span_rows(const attention_span &s) { return s.pieces * s.piece_length; }

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

template <typename E>
static void block_forward(void *out, float *lse, const void *qkv, const void *kv, int B, int H, int G, int D,
                          attention_block_spec spec, dropout_rng rng) {
    check_head_dim("attention_block_forward", D);
    int Tq = span_rows(spec.q);
    if ((size_t)B * H * Tq == 0) return;
    size_t smem = sizeof(float) * ((size_t)OWN_ROWS * D + (size_t)TILE * odd_stride(D) + (size_t)TILE * D);
    dim3 grid((unsigned)(B * H), ceil_div((size_t)Tq, OWN_ROWS));
    if (rng.p > 0.0f) {
        allow_shared(block_forward_kernel<E, true>, smem);
        block_forward_kernel<E, true><<<grid, BLOCK_THREADS, smem, compute_stream()>>>(
            (E *)out, lse, (const E *)qkv, (const E *)kv, H, G, D, spec, rng);
    } else {
        allow_shared(block_forward_kernel<E, false>, smem);
        block_forward_kernel<E, false><<<grid, BLOCK_THREADS, smem, compute_stream()>>>(
            (E *)out, lse, (const E *)qkv, (const E *)kv, H, G, D, spec, rng);
    }
    CHECK_LAUNCH();
}

template <typename E>
static void merge(void *out, float *lse, const void *block_out, const float *block_lse, int B, int T, int H, int D) {
    size_t rows = (size_t)B * T * H;
    if (rows == 0) return;
    merge_kernel<E><<<ceil_div(rows * 32, 256), 256, 0, compute_stream()>>>((E *)out, lse, (const E *)block_out,
                                                                            block_lse, B, T, H, D);
    CHECK_LAUNCH();
}

template <typename E>
static void block_backward(void *dqkv, void *dkv, const void *dout, const void *qkv, const void *kv, const void *out,
                           const float *lse, int B, int H, int G, int D, attention_block_spec spec, dropout_rng rng) {
    check_head_dim("attention_block_backward", D);
    int Tq = span_rows(spec.q), Tk = span_rows(spec.k);
    if ((size_t)B * H * Tq == 0 || Tk == 0) return;
    size_t rows = (size_t)B * Tq * H;
    float *delta = (float *)stream_scratch(sizeof(float) * rows);
    delta_kernel<E><<<ceil_div(rows * 32, 256), 256, 0, compute_stream()>>>(delta, (const E *)dout, (const E *)out, B,
                                                                            Tq, H, D);
    CHECK_LAUNCH();
    const int ld = odd_stride(D);
    size_t dq_smem = sizeof(float) * (2 * (size_t)OWN_ROWS * D + 2 * (size_t)TILE * ld);
    size_t dkdv_smem = sizeof(float) * (2 * (size_t)OWN_ROWS * D + 2 * (size_t)TILE * ld + 2 * TILE);
    dim3 dq_grid((unsigned)(B * H), ceil_div((size_t)Tq, OWN_ROWS));
    dim3 dkdv_grid((unsigned)(B * G), ceil_div((size_t)Tk, OWN_ROWS));
#define LAUNCH_BACKWARD(DROPOUT)                                                                                      \
    do {                                                                                                              \
        allow_shared(block_backward_dq_kernel<E, DROPOUT>, dq_smem);                                                  \
        block_backward_dq_kernel<E, DROPOUT><<<dq_grid, BLOCK_THREADS, dq_smem, compute_stream()>>>(                 \
            (E *)dqkv, (const E *)dout, (const E *)qkv, (const E *)kv, lse, delta, H, G, D, spec, rng);               \
        CHECK_LAUNCH();                                                                                               \
        allow_shared(block_backward_dkdv_kernel<E, DROPOUT>, dkdv_smem);                                              \
        block_backward_dkdv_kernel<E, DROPOUT><<<dkdv_grid, BLOCK_THREADS, dkdv_smem, compute_stream()>>>(           \
            (E *)dkv, (const E *)dout, (const E *)qkv, (const E *)kv, lse, delta, H, G, D, spec, rng);                \
        CHECK_LAUNCH();                                                                                               \
    } while (0)
    if (rng.p > 0.0f) LAUNCH_BACKWARD(true);
    else LAUNCH_BACKWARD(false);
#undef LAUNCH_BACKWARD
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
