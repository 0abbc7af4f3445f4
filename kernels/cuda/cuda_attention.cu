/* cuda_attention.cu: causal multi-head flash attention in bf16 (FlashAttention-2 scheme with the
 * scores kept in registers), the GPU counterpart of kernels/cpu/cpu_attention.c. Every kernel
 * is a template on the 16-bit element type (cuda_kernels_t.cuh): bf16, or fp16 for --fp16, whose
 * products use mma.sync.m16n8k16.f32.f16.f16.f32 (below, "bf16" reads as either); the Hopper
 * wgmma path (cuda_attention_sm90.cu) is bf16 only, so fp16 always runs the kernels here.
 *
 * qkv[B,T,(H+2G)*D] bf16 (H query heads in G groups, kernels.h's layout: per group its query
 * heads, then its key and value head), out[B,T,H,D] bf16, fp32 accumulation. The same kernels
 * with a key-padding mask serve BERT's and T5's bidirectional self-attention (PADDED) and, with
 * the queries q[B,Tq,H*D] and the keys and values kv[B,Tk,H*2D] in tensors of their own, T5's
 * cross-attention (CROSS: Tq queries over Tk keys, the dropout counters numbered over Tq x Tk;
 * below T reads as Tq for queries and Tk for keys). Grouped-query
 * attention reads the group's K and V tiles in place: the forward and dQ kernels of query head h
 * load group h/(H/G)'s keys, and the dK/dV kernel of a group walks the query tiles of each of its
 * heads in turn, summing their contributions in registers (no K/V copies, no atomics).
 * The T x T scores are never stored: the forward keeps a running row max m and row sum l
 * (online softmax) while it walks the key tiles left of the diagonal, and saves per query row
 * lse = m + log(l) (fp32 [B,H,T], natural log of the scaled scores) in the workspace.
 *
 *   s[i,j] = q_i.k_j / sqrt(D) (j <= i),  P = exp(s - lse),  out_i = sum_j P[i,j] keep[i,j]/(1-p) v_j
 *
 * Sliding window (window_left W >= 0, kernels.h: Megatron's --window-size (W, 0)): query i sees
 * keys i - W .. i only. The causal kernels take W as a runtime argument (attn_window(): without a
 * window one larger than any T, so every test below reads the same): the forward and dQ kernels
 * start their key walk at the tile of key q0 - W and the dK/dV kernel ends its query walk at the
 * tile of query k0 + BN - 1 + W, so a layer's work is ~ T x W instead of T^2 / 2; the mask is a
 * per-tile decision (the diagonal tile, or a tile the window's edge crosses), so tiles inside both
 * bounds run unmasked as before. Hopper's wgmma forward and one-pass backward take the window too
 * (cuda_attention_sm90.cu; MTC_ATTENTION_SM90_WINDOW=0 keeps windowed calls here, and the
 * two-pass Hopper backward has none: a window then runs the backward here); the padded and
 * cross-attention kernels have none.
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
 * instead of drawing every element's Philox number a second time. (Hopper runs
 * cuda_attention_sm90.cu's backward instead, after the same row kernel: at head dimension 64
 * and 128 one pass, whose dQ partials of the key tiles go through an fp32 accumulator, added in
 * a fixed order; its two wgmma passes under MTC_ATTENTION_FUSED_BACKWARD=0. With dropout the
 * one pass draws the same keep decisions itself, no bit buffer; the two passes have none, so
 * dropout then runs here. MTC_ATTENTION_SM90_DROPOUT=0 keeps every dropout call, forward and
 * backward, on the kernels of this file: the comparison issue 44 measured.)
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
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_attention_dropout.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"


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
#include "kernels/cuda/cuda_attention_tiles.cuh" /* ATTN_LD, the mma.sync/ldmatrix/cp.async tiles, quad reductions */

/* Dropout: element (i, j) of head `head_index` (= b*total_heads + head_start + h) is kept iff
 * philox_keep_attention(seed, stream, offset + head_index*Tq*Tk, Tk, i, j, p), the CPU backend's
 * draw: 16 bits of the Philox4x32-7 call of its 2 x 4 block of (query, key). A warp draws a tile's
 * calls before using them (cuda_attention_dropout.cuh: each of the four lanes holding a block
 * draws a quarter of the tile's calls and shuffles the decisions to the others). */
static __device__ __forceinline__ attn_drop_rng attn_drop_rng_of(const dropout_rng &rng, uint64_t head_index, int Tq,
                                                                 int Tk) {
    attn_drop_rng d;
    d.seed = rng.seed;
    d.stream = rng.stream;
    d.head_base = rng.offset + head_index * (uint64_t)Tq * (uint64_t)Tk;
    d.Tk = Tk;
    d.threshold = philox_threshold16(rng.p);
    return d;
}
/* a tile of NT n8 groups draws in chunks of at most 8 (one 32-bit word of keep bits each) */
template <int NT>
struct attn_drop_chunk {
    static constexpr int N = NT < 8 ? NT : 8;
    static_assert(NT % N == 0, "a tile of whole chunks");
};

/* the window the kernels take: window_left, or (-1: none) one past any distance of positions */
#define ATTN_NO_WINDOW (1 << 29)
static int attn_window(int window_left, int T) {
    return window_left >= 0 && window_left < T ? window_left : ATTN_NO_WINDOW;
}

/* Where the heads sit. Self-attention (CROSS false) reads q, k and v from one qkv row of
 * (H+2G)*D (kernels.h's grouped layout: qkv_query_offset, qkv_key_offset), Tq = Tk = T.
 * Cross-attention (CROSS: T5's decoder over the encoder, kernels.h's cross_attention_*) reads the
 * queries from q[B,Tq,H*D] and the keys and values from kv[B,Tk,G*2D] (G == H: per head its key,
 * then its value, Megatron-Core's CrossAttention linear_kv), and writes dq and dkv in those
 * layouts. Rows of q (or qkv) are q_stride apart, rows of kv kv_stride apart. */
template <bool CROSS>
static __host__ __device__ __forceinline__ size_t attn_q_stride(int H, int G, int D) {
    return CROSS ? (size_t)H * D : (size_t)(H + 2 * G) * D;
}
template <bool CROSS>
static __host__ __device__ __forceinline__ size_t attn_kv_stride(int H, int G, int D) {
    return CROSS ? (size_t)2 * G * D : (size_t)(H + 2 * G) * D;
}
template <bool CROSS>
static __device__ __forceinline__ size_t attn_q_offset(int h, int H, int G, int D) {
    return CROSS ? (size_t)h * D : qkv_query_offset(h, H, G, D);
}
template <bool CROSS>
static __device__ __forceinline__ size_t attn_k_offset(int group, int H, int G, int D) {
    return CROSS ? (size_t)group * 2 * D : qkv_key_offset(group, H, G, D);
}

/* Keep bits handed from the dK/dV kernel to the dQ kernel (so the backward draws each element
 * once), in the dK/dV kernel's fragment order: per (b*H + h, key block of 16, query block of 8)
 * four 32-bit words, one __ballot_sync of the warp each (keys padded to Tk_pad, queries to Tq_pad). Element (key, query) of a block is
 * word attn_keep_word(query & 1, (key >> 3) & 1), bit attn_keep_bit(key & 7, (query & 7) >> 1),
 * i.e. the lane (g = key & 7, t = (query & 7) / 2) that held it in the dK/dV kernel. */
static __device__ __forceinline__ size_t attn_keep_block(int bh, int key_block, int query_block, int Tk_pad,
                                                         int Tq_pad) {
    return ((size_t)bh * (Tk_pad / 16) + (size_t)key_block) * (size_t)(Tq_pad / 8) + (size_t)query_block;
}
static __device__ __forceinline__ int attn_keep_word(int query_odd, int key_high) {
    return 2 * query_odd + key_high;
}
static __device__ __forceinline__ int attn_keep_bit(int key_low, int query_pair) {
    return 4 * key_low + query_pair;
}

/* The key-padding mask of the bidirectional kernels (PADDED; kernels.h's attention_padded_* and
 * cross_attention_*): valid_row is key_valid + b*Tk, the keys of one sequence. attn_key_extent: one past the last
 * visible key (0 when none), the same in every thread of the block (all of whose threads call
 * it: it synchronizes); key tiles from there on hold no visible key and are not walked.
 * attn_tile_key_bits: one warp's bit mask of the visible keys k0 .. k0 + KEYS - 1 (KEYS <= 64;
 * bit j for key k0 + j; keys past T are not visible), two coalesced loads and ballots. */
template <int THREADS>
static __device__ __forceinline__ int attn_key_extent(const int *valid_row, int T) {
    __shared__ int block_extent;
    if (threadIdx.x == 0) block_extent = 0;
    __syncthreads();
    int extent = 0;
    for (int key = threadIdx.x; key < T; key += THREADS)
        if (valid_row[key] != 0) extent = key + 1;
    extent = __reduce_max_sync(0xffffffffu, (unsigned)extent);
    if ((threadIdx.x & 31) == 0 && extent > 0) atomicMax(&block_extent, extent);
    __syncthreads();
    return block_extent;
}
template <int KEYS>
static __device__ __forceinline__ uint64_t attn_tile_key_bits(const int *valid_row, int k0, int T, int lane) {
    static_assert(KEYS <= 64, "a key tile's mask is one 64-bit word");
    uint64_t bits = 0;
#pragma unroll
    for (int part = 0; part * 32 < KEYS; part++) {
        const int j = 32 * part + lane, key = k0 + j;
        const bool visible = j < KEYS && key < T && __ldg(valid_row + key) != 0;
        bits |= (uint64_t)__ballot_sync(0xffffffffu, visible) << (32 * part);
    }
    return bits;
}

/* ---------------------------------------------------------------------------------------------- */
/* forward: block = (batch x head, query tile of 16 WARPS rows), warp w owns rows 16w..16w+15;
 * walks key tiles of BN keys up to the diagonal. Grid y counts down the query tiles, so the
 * longest rows start first. PADDED (bidirectional, key_valid [B,T]): every query walks the key
 * tiles up to the sequence's last visible key, with the invisible keys masked instead of the
 * later ones; a tile without a visible key is skipped, and a row that sees no key at all gets
 * out 0 and lse +inf (so that the backward's P = exp(s - lse) is 0 on it). CROSS (always PADDED):
 * the queries from q_src [B,Tq,H*D], the keys and values from kv_src [B,Tk,G*2D] (attn_q_offset);
 * otherwise both are qkv and Tq = Tk = T. */
template <int DP, int WARPS, int BN, bool DROPOUT, bool PADDED, bool CROSS, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_FWD_MIN_BLOCKS_64 : 0)
attention_forward_kernel(E *out, float *lse, const E *q_src, const E *kv_src, const int *key_valid, int Tq, int Tk,
                         int H, int G, int D, int head_start, int total_heads, int window, dropout_rng rng, int vec) {
    static_assert(PADDED || !CROSS, "cross-attention takes a key-padding mask");
    constexpr int BM = 16 * WARPS, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    E *q_s = reinterpret_cast<E *>(attn_smem); /* BM x LD */
    E *kv_s = q_s + BM * LD;                         /* [stage 0, 1][K, V] BN x LD */

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t q_stride = attn_q_stride<CROSS>(H, G, D), kv_stride = attn_kv_stride<CROSS>(H, G, D);
    const size_t out_stride = (size_t)H * D;
    const E *q_base = q_src + (size_t)b * Tq * q_stride + attn_q_offset<CROSS>(h, H, G, D);
    const E *k_base = kv_src + (size_t)b * Tk * kv_stride + attn_k_offset<CROSS>(h / (H / G), H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D); /* scores in base-2 units */
    const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);
    const int *valid_row = PADDED ? key_valid + (size_t)b * Tk : NULL;
    const int kt_last = PADDED ? max(attn_key_extent<THREADS>(valid_row, Tk) - 1, 0) / BN
                               : min(q0 + BM - 1, Tq - 1) / BN;
    const int kt_first = PADDED ? 0 : max(q0 - window, 0) / BN; /* the window's first key tile */
    const bool windowed = !PADDED && window < Tq; /* a row may meet a tile wholly before its window */
    const attn_drop_rng drop = attn_drop_rng_of(rng, head_index, Tq, Tk);

    attn_load_tile<DP, BM, THREADS>(q_s, q_base, q_stride, q0, Tq, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + (kt_first & 1) * 2 * BN * LD, k_base, kv_stride, kt_first * BN, Tk, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + (kt_first & 1) * 2 * BN * LD + BN * LD, k_base + D, kv_stride,
                                    kt_first * BN, Tk, D, vec);
    cp_async_commit();

    float o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; /* rows g, g + 8 (raw scores), same in the quad */
    float l_run[2] = {0.0f, 0.0f};           /* this lane's part of the row sums */

    for (int kt = kt_first; kt <= kt_last; kt++) {
        const int k0 = kt * BN;
        const E *k_s = kv_s + (kt & 1) * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (kt < kt_last) { /* prefetch the next K, V tiles into the other stage */
            E *next = kv_s + ((kt + 1) & 1) * 2 * BN * LD;
            attn_load_tile<DP, BN, THREADS>(next, k_base, kv_stride, k0 + BN, Tk, D, vec);
            attn_load_tile<DP, BN, THREADS>(next + BN * LD, k_base + D, kv_stride, k0 + BN, Tk, D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>(); /* this stage (and Q) has landed */
        __syncthreads();

        /* causal: keys k0.. are right of every row of this warp: nothing to do. Otherwise key
         * k0 is at or left of every row (k0 and the warp's first row are multiples of 16), so
         * each row has an unmasked score and the running max becomes finite on the first tile.
         * PADDED: the tile's visible keys (none: nothing to do); a row's max stays -inf until
         * it meets one, and is then taken as 0 in the exponentials (all of them 0 before).
         * Window W: keys k0 + BN - 1 < warp_row0 - W are before every row's window: nothing to
         * do; a tile the window's edge crosses is masked, and a row that sees none of its keys
         * yet keeps max -inf, as PADDED's. */
        const uint64_t key_bits = PADDED ? attn_tile_key_bits<BN>(valid_row, k0, Tk, lane) : 0;
        if (PADDED ? key_bits != 0 : k0 <= warp_row0 + 15 && k0 + BN - 1 >= warp_row0 - window) {
            float s[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            if (PADDED) { /* the key-padding mask */
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (!((key_bits >> (8 * n + 2 * t + (e & 1))) & 1u)) s[n][e] = -INFINITY;
            } else if (k0 + BN - 1 > warp_row0 || k0 < warp_row0 + 15 - window) {
                /* the diagonal or the window's edge crosses this tile: causal and window mask */
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = k0 + 8 * n + 2 * t + (e & 1), row = warp_row0 + g + 8 * (e >> 1);
                        if (key > row || key < row - window) s[n][e] = -INFINITY;
                    }
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
                const float m_use = (PADDED || windowed) && m_new[i] == -INFINITY ? 0.0f : m_new[i];
                alpha[i] = fast_exp2((m_run[i] - m_use) * scale_log2);
                m_run[i] = m_new[i];
                neg_m[i] = -m_use * scale_log2;
                l_run[i] *= alpha[i];
            }
            /* the tile's keep bits: only 2 x 4 blocks with a visible element are drawn */
            constexpr int KC = attn_drop_chunk<NT>::N;
            uint32_t keep[NT / KC] = {};
            if constexpr (DROPOUT) {
#pragma unroll
                for (int c = 0; c < NT / KC; c++)
                    keep[c] = attn_drop_keep_bits<KC, true>(
                        drop, warp_row0, k0 + 8 * KC * c, lane, [&](int query, int key) {
                            return query < Tq && (PADDED ? ((key_bits >> (key - k0)) & 0xfu) != 0 : key <= query + 1);
                        });
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, neg_m[e >> 1]));
                    l_run[e >> 1] += p; /* the normalizer sums undropped probabilities */
                    if (DROPOUT && !((keep[n / KC] >> (4 * (n % KC) + e)) & 1u)) p = 0.0f;
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
        if (PADDED && l == 0.0f) factor[i] = 0.0f; /* no visible key */
        int row = warp_row0 + g + 8 * i;
        if (t == 0 && row < Tq)
            lse[(size_t)bh * Tq + row] = PADDED && l == 0.0f ? INFINITY : (m_run[i] * scale_log2 + log2f(l)) * attn_ln2;
    }
    E *stage = q_s + 16 * warp * LD; /* the warp's own Q rows, read only by this warp */
    attn_stage_rows<DP>(stage, o, factor[0], factor[1], lane);
    attn_store_rows<DP>(out + (size_t)b * Tq * out_stride + (size_t)h * D, out_stride, stage,
                        warp_row0, Tq, D, vec, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, step 0: per row (b, h, t) of the padded [B*H, Tpad] layout, lse2 = lse * log2(e) and
 * Di = dO_t . O_t (zero for t >= T); for the Hopper backward it also zeroes the dQ semaphore of
 * each 64-row tile (dq_sems [B*H, Tpad/64], NULL otherwise) and the tile counter after them, and
 * with head chunks the kv_sem_count dK/dV semaphores (kv_sems; at most B*H*Tpad/128 of them).
 * G = DP / 8 lanes per row, each taking 8 columns (16-byte loads with vec, else a strided walk),
 * then a fixed-order xor-shuffle sum over the G lanes. */
template <int DP, typename E>
static __global__ void attention_backward_rows_kernel(float *lse2, float *di, int *dq_sems, int *kv_sems,
                                                      int kv_sem_count, const E *dout, const E *out, const float *lse,
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
        if (dq_sems != NULL && t % 64 == 0) dq_sems[row / 64] = 0; /* Tpad is a multiple of 64 */
        if (dq_sems != NULL && row == 0) dq_sems[(size_t)B * H * Tpad / 64] = 0; /* the tile counter after them */
        if (row < (size_t)kv_sem_count) kv_sems[row] = 0;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* one stage of the dK/dV kernel: Q and dO rows [q0, q0 + BM) (BM x LD each), then their lse2 and
 * Di (BM floats each) */
template <int DP, int BM, int THREADS, typename E>
static __device__ __forceinline__ void attn_load_query_stage(
    E *stage, const E *q_base, size_t q_stride, const E *do_base,
    size_t out_stride, const float *lse2_rows, const float *di_rows, int q0, int T, int D,
    bool vec) {
    constexpr int LD = ATTN_LD(DP);
    float *stats = reinterpret_cast<float *>(stage + 2 * BM * LD);
    attn_load_tile<DP, BM, THREADS>(stage, q_base, q_stride, q0, T, D, vec);
    attn_load_tile<DP, BM, THREADS>(stage + BM * LD, do_base, out_stride, q0, T, D, vec);
    attn_load_floats<BM, THREADS>(stats, lse2_rows + q0);
    attn_load_floats<BM, THREADS>(stats + BM, di_rows + q0);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dK and dV: block = (batch x query group, key tile of 16 WARPS keys), warp w owns keys
 * 16w..16w+15; for each query head of the group in turn, walks its query tiles of BM rows from
 * the diagonal down, with S^T = K Q^T and dP^T = V dO^T in registers (keys as rows), so dK and
 * dV sum over the group's heads in registers. Grid y counts up the key tiles: the longest walks
 * start first. PADDED: every query tile, the invisible keys masked; a block whose keys are all
 * invisible walks nothing and writes their dK, dV as 0, a warp whose 16 are skips the work.
 * dk_dst receives dK and dV in kv_src's layout (self-attention: dqkv's key and value heads). */
template <int DP, int WARPS, int BM, bool DROPOUT, bool PADDED, bool CROSS, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_DKDV_MIN_BLOCKS_64 : 0)
attention_backward_dkdv_kernel(E *dk_dst, uint32_t *keep_bits, const E *dout, const E *q_src, const E *kv_src,
                               const int *key_valid, const float *lse2, const float *di, int Tq, int Tk,
                               int Tq_pad, int Tk_pad, int H, int G, int D, int head_start, int total_heads,
                               int window, dropout_rng rng, int vec) {
    static_assert(PADDED || !CROSS, "cross-attention takes a key-padding mask");
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
    const size_t q_stride = attn_q_stride<CROSS>(H, G, D), kv_stride = attn_kv_stride<CROSS>(H, G, D);
    const size_t out_stride = (size_t)H * D;
    const E *k_base = kv_src + (size_t)b * Tk * kv_stride + attn_k_offset<CROSS>(group, H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    /* the query tiles from the diagonal to the window's end (query k0 + BN - 1 + W) */
    const int qt_first = PADDED ? 0 : k0 / BM;
    const int qt_last = PADDED ? (Tq - 1) / BM : min(Tq - 1, k0 + BN - 1 + window) / BM;
    const int tiles = qt_last - qt_first + 1;
    /* PADDED: the visible ones of the warp's 16 keys (bit j: key warp_key0 + j) */
    const uint32_t warp_key_bits =
        PADDED ? (uint32_t)attn_tile_key_bits<16>(key_valid + (size_t)b * Tk, warp_key0, Tk, lane) : 0xffffu;
    const bool block_sees = PADDED ? __syncthreads_or(warp_key_bits != 0) != 0 : true;

    /* step it of the walk: query head first_head + it / tiles, query tile qt_first + it % tiles */
    const int first_head = group * per, steps = block_sees ? per * tiles : 0;
#define DKDV_HEAD_POINTERS(h)                                                                      \
    const E *q_base = q_src + (size_t)b * Tq * q_stride + attn_q_offset<CROSS>(h, H, G, D);  \
    const E *do_base = dout + (size_t)b * Tq * out_stride + (size_t)(h) * D;                  \
    const size_t bh = (size_t)b * H + (size_t)(h);                                                 \
    const float *lse2_rows = lse2 + bh * Tq_pad, *di_rows = di + bh * Tq_pad;

    attn_load_tile<DP, BN, THREADS>(k_s, k_base, kv_stride, k0, Tk, D, vec);
    attn_load_tile<DP, BN, THREADS>(v_s, k_base + D, kv_stride, k0, Tk, D, vec);
    {
        DKDV_HEAD_POINTERS(first_head)
        attn_load_query_stage<DP, BM, THREADS>(stages, q_base, q_stride, do_base, out_stride,
                                               lse2_rows, di_rows, qt_first * BM, Tq, D, vec);
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
        const E *q_s = stages + i * STAGE, *do_s = q_s + BM * LD;
        const float *lse2_s = reinterpret_cast<const float *>(do_s + BM * LD), *di_s = lse2_s + BM;
        if (it + 1 < steps) { /* prefetch the next step's query tile into the other stage */
            const int next_h = first_head + (it + 1) / tiles, next_qt = qt_first + (it + 1) % tiles;
            DKDV_HEAD_POINTERS(next_h)
            attn_load_query_stage<DP, BM, THREADS>(stages + (i ^ 1) * STAGE, q_base, q_stride,
                                                   do_base, out_stride, lse2_rows, di_rows,
                                                   next_qt * BM, Tq, D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        /* some query of the tile sees some key of the warp (within the window W: q0 <= key + W) */
        if (PADDED ? warp_key_bits != 0 : q0 + BM - 1 >= warp_key0 && q0 <= warp_key0 + 15 + window) {
            float s[NT][4], dp[NT][4]; /* S^T, dP^T: row = key (g, g + 8), column = query */
            uint32_t my_keep_word = 0;
            warp_gemm_abt<DP, NT>(s, k_s + 16 * warp * LD, q_s, lane);
            warp_gemm_abt<DP, NT>(dp, v_s + 16 * warp * LD, do_s, lane);
            const bool mask = PADDED || warp_key0 + 15 > q0 || q0 + BM > Tq || q0 + BM - 1 > warp_key0 + window;
            const bool key_visible[2] = {((warp_key_bits >> g) & 1u) != 0, ((warp_key_bits >> (g + 8)) & 1u) != 0};
            /* the step's keep bits (keys as rows): only 2 x 4 blocks with a visible element are drawn */
            constexpr int KC = attn_drop_chunk<NT>::N;
            uint32_t keep_tile[NT / KC] = {};
            if constexpr (DROPOUT) {
                const uint64_t head_index = (uint64_t)b * total_heads + (uint64_t)(head_start + h);
                const attn_drop_rng drop = attn_drop_rng_of(rng, head_index, Tq, Tk);
#pragma unroll
                for (int c = 0; c < NT / KC; c++)
                    keep_tile[c] = attn_drop_keep_bits<KC, false>(
                        drop, warp_key0, q0 + 8 * KC * c, lane, [&](int query, int key) {
                            return query < Tq &&
                                   (PADDED ? ((warp_key_bits >> (key - warp_key0)) & 0xfu) != 0 : key <= query + 1);
                        });
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(lse2_s + 8 * n + 2 * t);
                const float2 dd = *reinterpret_cast<const float2 *>(di_s + 8 * n + 2 * t);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = warp_key0 + g + 8 * (e >> 1), query = q0 + 8 * n + 2 * t + (e & 1);
                    const bool visible = PADDED ? key_visible[e >> 1] && query < Tq
                                                : !(mask && (key > query || query >= Tq || query > key + window));
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -((e & 1) ? l2.y : l2.x)));
                    if (!visible) p = 0.0f;
                    float dpv = dp[n][e];
                    float kept_p = p;
                    if (DROPOUT) {
                        const bool keep = visible && ((keep_tile[n / KC] >> (4 * (n % KC) + e)) & 1u);
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
                keep_bits[attn_keep_block(bh, warp_key0 >> 4, q0 >> 3, Tk_pad, Tq_pad) * 4 + lane] =
                    my_keep_word;
            warp_gemm_pv<DP, NT>(dv, s, do_s, lane); /* dV += (P keep)^T dO */
            warp_gemm_pv<DP, NT>(dk, dp, q_s, lane); /* dK += dS^T Q */
        }
        __syncthreads(); /* every warp is done with this stage before it is refilled */
    }

#undef DKDV_HEAD_POINTERS
    if (PADDED && steps == 0) { /* the first stage's copies, never waited for in the walk */
        cp_async_wait<0>();
        __syncthreads();
    }
    /* dK = scale dS^T Q, dV = keep_scale (P keep)^T dO, staged in the warp's own K and V rows */
    const float scale = 1.0f / sqrtf((float)D);
    E *dk_base = dk_dst + (size_t)b * Tk * kv_stride + attn_k_offset<CROSS>(group, H, G, D);
    E *k_stage = k_s + 16 * warp * LD, *v_stage = v_s + 16 * warp * LD;
    attn_stage_rows<DP>(k_stage, dk, scale, scale, lane);
    attn_store_rows<DP>(dk_base, kv_stride, k_stage, warp_key0, Tk, D, vec, lane);
    attn_stage_rows<DP>(v_stage, dv, keep_scale, keep_scale, lane);
    attn_store_rows<DP>(dk_base + D, kv_stride, v_stage, warp_key0, Tk, D, vec, lane);
}

/* ---------------------------------------------------------------------------------------------- */
/* backward, dQ: block = (batch x head, query tile of 16 WARPS rows), warp w owns rows
 * 16w..16w+15; walks key tiles of BN keys up to the diagonal, recomputing S = Q K^T and
 * dP = dO V^T in registers. Grid y counts down the query tiles. PADDED: the key tiles up to the
 * last visible key, the invisible keys masked, a tile without a visible key skipped. dq_dst
 * receives dQ in q_src's layout (self-attention: dqkv's query heads). */
template <int DP, int WARPS, int BN, bool DROPOUT, bool PADDED, bool CROSS, typename E>
static __global__ void __launch_bounds__(WARPS * 32, DP <= 64 && !DROPOUT ? ATTN_DQ_MIN_BLOCKS_64 : 0)
attention_backward_dq_kernel(E *dq_dst, const uint32_t *keep_bits, const E *dout, const E *q_src, const E *kv_src,
                             const int *key_valid, const float *lse2, const float *di, int Tq, int Tk, int Tq_pad,
                             int Tk_pad, int H, int G, int D, int window, dropout_rng rng, int vec) {
    static_assert(PADDED || !CROSS, "cross-attention takes a key-padding mask");
    constexpr int BM = 16 * WARPS, THREADS = 32 * WARPS, LD = ATTN_LD(DP), NT = BN / 8;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    E *q_s = reinterpret_cast<E *>(attn_smem); /* BM x LD */
    E *do_s = q_s + BM * LD;                         /* BM x LD */
    E *kv_s = do_s + BM * LD;                        /* [stage 0, 1][K, V] BN x LD */

    const int bh = blockIdx.x, b = bh / H, h = bh % H;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int warp_row0 = q0 + 16 * warp;
    const size_t q_stride = attn_q_stride<CROSS>(H, G, D), kv_stride = attn_kv_stride<CROSS>(H, G, D);
    const size_t out_stride = (size_t)H * D;
    const E *q_base = q_src + (size_t)b * Tq * q_stride + attn_q_offset<CROSS>(h, H, G, D);
    const E *k_base = kv_src + (size_t)b * Tk * kv_stride + attn_k_offset<CROSS>(h / (H / G), H, G, D);
    const float scale_log2 = attn_log2e / sqrtf((float)D);
    const float keep_scale = DROPOUT ? 1.0f / (1.0f - rng.p) : 1.0f;
    const int *valid_row = PADDED ? key_valid + (size_t)b * Tk : NULL;
    const int kt_last = PADDED ? max(attn_key_extent<THREADS>(valid_row, Tk) - 1, 0) / BN
                               : min(q0 + BM - 1, Tq - 1) / BN;
    const int kt_first = PADDED ? 0 : max(q0 - window, 0) / BN; /* the window's first key tile */

    /* rows g and g + 8 of the warp (padded statistics: no bounds check) */
    const float *lse2_rows = lse2 + (size_t)bh * Tq_pad, *di_rows = di + (size_t)bh * Tq_pad;
    const float row_lse2[2] = {lse2_rows[warp_row0 + g], lse2_rows[warp_row0 + g + 8]};
    const float row_di[2] = {di_rows[warp_row0 + g], di_rows[warp_row0 + g + 8]};

    attn_load_tile<DP, BM, THREADS>(q_s, q_base, q_stride, q0, Tq, D, vec);
    attn_load_tile<DP, BM, THREADS>(do_s, dout + (size_t)b * Tq * out_stride + (size_t)h * D,
                                    out_stride, q0, Tq, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + (kt_first & 1) * 2 * BN * LD, k_base, kv_stride, kt_first * BN, Tk, D, vec);
    attn_load_tile<DP, BN, THREADS>(kv_s + (kt_first & 1) * 2 * BN * LD + BN * LD, k_base + D, kv_stride,
                                    kt_first * BN, Tk, D, vec);
    cp_async_commit();

    float dq[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    for (int kt = kt_first; kt <= kt_last; kt++) {
        const int k0 = kt * BN;
        const E *k_s = kv_s + (kt & 1) * 2 * BN * LD, *v_s = k_s + BN * LD;
        if (kt < kt_last) {
            E *next = kv_s + ((kt + 1) & 1) * 2 * BN * LD;
            attn_load_tile<DP, BN, THREADS>(next, k_base, kv_stride, k0 + BN, Tk, D, vec);
            attn_load_tile<DP, BN, THREADS>(next + BN * LD, k_base + D, kv_stride, k0 + BN, Tk, D, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();

        const uint64_t key_bits = PADDED ? attn_tile_key_bits<BN>(valid_row, k0, Tk, lane) : 0;
        if (PADDED ? key_bits != 0 : k0 <= warp_row0 + 15 && k0 + BN - 1 >= warp_row0 - window) {
            /* keep bits of this lane's elements: for key block k0/16 + n/2 and query block
             * warp_row0/8 + e/2, the words (g & 1)*2 + {0, 1} (the second for odd n) */
            uint2 keep_words[DROPOUT ? NT / 2 : 1][2];
            if (DROPOUT) {
#pragma unroll
                for (int kb = 0; kb < NT / 2; kb++)
#pragma unroll
                    for (int qb = 0; qb < 2; qb++)
                        keep_words[kb][qb] = *reinterpret_cast<const uint2 *>(
                            keep_bits + attn_keep_block(bh, (k0 >> 4) + kb, (warp_row0 >> 3) + qb, Tk_pad, Tq_pad) * 4 +
                            attn_keep_word(g & 1, 0));
            }
            float s[NT][4], dp[NT][4];
            warp_gemm_abt<DP, NT>(s, q_s + 16 * warp * LD, k_s, lane);
            warp_gemm_abt<DP, NT>(dp, do_s + 16 * warp * LD, v_s, lane);
            const bool mask = k0 + BN - 1 > warp_row0 || k0 < warp_row0 + 15 - window; /* diagonal, window edge */
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = warp_row0 + g + 8 * (e >> 1), key = k0 + 8 * n + 2 * t + (e & 1);
                    float p = fast_exp2(fmaf(s[n][e], scale_log2, -row_lse2[e >> 1]));
                    if (PADDED ? !((key_bits >> (key - k0)) & 1u) : mask && (key > row || key < row - window)) p = 0.0f;
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
    attn_store_rows<DP>(dq_dst + (size_t)b * Tq * q_stride + attn_q_offset<CROSS>(h, H, G, D), q_stride, stage,
                        warp_row0, Tq, D, vec, lane);
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

/* PADDED: the bidirectional kernels with the key-padding mask key_valid (NULL otherwise); CROSS:
 * cross-attention, the queries in q [B,Tq,H*D] and the keys and values in kv [B,Tk,G*2D]
 * (self-attention: q = kv = qkv, Tq = Tk) */
template <int DP, bool DROPOUT, bool PADDED, bool CROSS, typename E>
static void attn_forward_launch(E *out, float *lse, const E *q, const E *kv, const int *key_valid, int B, int Tq,
                                int Tk, int H, int G, int D, int head_start, int total_heads, int window,
                                dropout_rng rng) {
    constexpr int WARPS = ATTN_FWD_WARPS, BN = ATTN_FWD_BN;
    static_assert(ATTN_T_PAD % (16 * WARPS) == 0 && BN % 16 == 0, "forward tile shape");
    static_assert(!PADDED || BN <= 64, "the padded kernels mask key tiles of at most 64");
    auto kernel = attention_forward_kernel<DP, WARPS, BN, DROPOUT, PADDED, CROSS, E>;
    const size_t smem = attn_forward_smem(DP, WARPS, BN);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int vec = attn_vector_io(D, out, q) && attn_vector_io(D, kv, kv);
    kernel<<<attn_grid(B, H, Tq, 16 * WARPS), 32 * WARPS, smem, compute_stream()>>>(
        out, lse, q, kv, key_valid, Tq, Tk, H, G, D, head_start, total_heads, window, rng, vec);
    CHECK_LAUNCH();
}

static size_t attn_align_256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* the Hopper backward's fp32 dQ accumulator: a grow-only device buffer of exactly the size asked
 * (stream_scratch's 25% headroom would add a quarter of its 100 to 134 MB to the peak) */
static float *attn_dq_accum(size_t bytes) {
    static void *accum_buffer = NULL;
    static size_t accum_capacity = 0;
    return (float *)grow_device_buffer(&accum_buffer, &accum_capacity, bytes, 0);
}

/* the qkv bias gradient's partials of the Hopper one-pass backward: a grow-only device buffer */
static float *attn_bias_partials(size_t bytes) {
    static void *partials_buffer = NULL;
    static size_t partials_capacity = 0;
    return (float *)grow_device_buffer(&partials_buffer, &partials_capacity, bytes, 0);
}

/* dq and dkv receive the gradients in q's and kv's layouts (self-attention: dq = dkv = dqkv,
 * q = kv = qkv, Tq = Tk); dbias (self-attention only; may be NULL) += dqkv's column sums */
template <int DP, bool DROPOUT, bool PADDED, bool CROSS, typename E>
static void attn_backward_launch(E *dq, E *dkv, float *dbias, const E *dout, const E *q, const E *kv,
                                 const E *out, const int *key_valid, const float *lse, int B, int Tq, int Tk, int H,
                                 int G, int D, int head_start, int total_heads, int window, dropout_rng rng) {
    constexpr int DQ_WARPS = DP <= 64 ? ATTN_DQ_WARPS_64 : ATTN_DQ_WARPS_128, DQ_BN = ATTN_DQ_BN;
    constexpr int KV_WARPS = ATTN_DKDV_WARPS;
    constexpr int KV_BM = DP <= 64 ? ATTN_DKDV_BM_64 : ATTN_DKDV_BM_128;
    static_assert(ATTN_T_PAD % (16 * DQ_WARPS) == 0 && ATTN_T_PAD % KV_BM == 0, "padding");
    static_assert(ATTN_T_PAD % (16 * KV_WARPS) == 0 && ATTN_T_PAD % DQ_BN == 0, "key padding");
    static_assert(DQ_BN % 16 == 0 && KV_BM % 16 == 0, "tiles of whole k-slices");
    static_assert(!PADDED || DQ_BN <= 64, "the padded kernels mask key tiles of at most 64");
    const int Tq_pad = (int)(ceil_div((size_t)Tq, ATTN_T_PAD) * ATTN_T_PAD);
    const int Tk_pad = (int)(ceil_div((size_t)Tk, ATTN_T_PAD) * ATTN_T_PAD);
    const size_t rows = (size_t)B * H * Tq_pad;

    const int vec = attn_vector_io(D, dq, q) && attn_vector_io(D, dout, out) && attn_vector_io(D, dkv, kv);
    bool sm90 = false; /* Hopper's wgmma kernels are bf16 and causal only; dropout in the one pass */
    if constexpr (!is_fp16<E>::value && !PADDED)
        sm90 = vec && cuda_attention_sm90_applies(dq, q, D, rng.p) &&
               (window == ATTN_NO_WINDOW || (cuda_attention_sm90_window() && cuda_attention_sm90_backward_fused(D))) &&
               (!DROPOUT || cuda_attention_sm90_backward_fused(D));
    const bool fused = sm90 && cuda_attention_sm90_backward_fused(D); /* needs semaphores, dQ accumulator */
    /* GQA's head chunks in the one pass (H / G > 1 unless MTC_SM90_BWD_HEAD_SPLIT=0): the dK/dV
     * partials of a key unit (b, group, 128 keys) stored each in a slot of a workspace and
     * summed by the unit's last finisher (a counter per unit) */
    const int head_chunk = fused ? cuda_attention_sm90_backward_head_chunk(H, G) : H / G;
    const size_t kv_units = head_chunk < H / G ? (size_t)B * G * ceil_div((size_t)Tq, 128) : 0;
    const size_t kv_slots = kv_units * (size_t)(H / G / head_chunk); /* one per (unit, chunk) */

    /* in this file's scratch buffer: lse2 and Di, padded; with dropout the keep bits (one per
     * element of the padded Tq x Tk rectangle of every head); for the Hopper backward its dQ
     * semaphores (one int per 64 rows), its tile counter and with head chunks one dK/dV counter
     * per key unit. Its fp32 dQ accumulator [B*H, Tpad, D] has a buffer of its own
     * (B*H*Tpad*D*4 bytes: 100 MB at GPT-2 124M's shape, 134 MB at GPT 1.3B's), followed with
     * head chunks by the chunks' dK/dV partials [key units, chunks, 2*128*D]
     * (B*G*ceil(T/128)*chunks*128*D*8 bytes: with one head a chunk, twice the dQ accumulator,
     * 268 MB at Llama-3.2-1B's heads, B=4 T=4096). */
    const size_t bits_bytes = DROPOUT && !sm90 ? rows * (size_t)Tk_pad / 8 : 0; /* Hopper draws in its pass */
    const size_t sems_bytes = fused ? (rows / 64 + 1 + kv_units) * sizeof(int) : 0; /* and the tile counter */
    const size_t stats_bytes = attn_align_256(2 * rows * sizeof(float));
    char *scratch = (char *)stream_scratch(stats_bytes + bits_bytes + sems_bytes);
    float *lse2 = (float *)scratch, *di = lse2 + rows;
    uint32_t *keep_bits = DROPOUT && !sm90 ? reinterpret_cast<uint32_t *>(scratch + stats_bytes) : NULL;
    int *dq_sems = fused ? reinterpret_cast<int *>(scratch + stats_bytes + bits_bytes) : NULL;
    int *kv_sems = kv_units ? dq_sems + rows / 64 + 1 : NULL;
    float *dq_accum = fused ? attn_dq_accum((rows + kv_slots * 2 * 128) * (size_t)D * sizeof(float)) : NULL;
    float *kv_accum = kv_units ? dq_accum + rows * (size_t)D : NULL;
    attention_backward_rows_kernel<DP><<<ceil_div(rows * (DP / 8), 256), 256, 0, compute_stream()>>>(
        lse2, di, dq_sems, kv_sems, (int)kv_units, dout, out, lse, B, Tq, Tq_pad, H, D, vec);
    CHECK_LAUNCH();
    const int qkv_columns = (H + 2 * G) * D;
    if (sm90) { /* self-attention: T = Tq, dqkv = dq */
        const int T = Tq;
        /* the bias gradient from the one pass's sums of 16 rows: [B * 8 ceil(T/128), columns] */
        const int partial_rows = B * 8 * (int)ceil_div((size_t)T, 128);
        float *partials = fused && dbias ? attn_bias_partials((size_t)partial_rows * qkv_columns * sizeof(float)) : NULL;
        if (partials && ceil_div((size_t)T, 64) * 4 != (size_t)partial_rows / B) /* dQ's last 64 rows unwritten */
            CHECK_CUDA(cudaMemsetAsync(partials, 0, (size_t)partial_rows * qkv_columns * sizeof(float), compute_stream()));
        cuda_attention_sm90_backward(reinterpret_cast<bf16 *>(dq), reinterpret_cast<const bf16 *>(dout),
                                     reinterpret_cast<const bf16 *>(q), lse2, di, dq_accum, dq_sems, kv_accum, kv_sems,
                                     head_chunk, partials, B, T, Tq_pad, H, G, D, head_start, total_heads,
                                     window == ATTN_NO_WINDOW ? -1 : window, rng);
        if (partials) column_sum_accumulate(dbias, partials, partial_rows, qkv_columns);
        else if (dbias) bias_backward_e(dbias, dq, B * T, qkv_columns);
        return;
    }

    auto dkdv = attention_backward_dkdv_kernel<DP, KV_WARPS, KV_BM, DROPOUT, PADDED, CROSS, E>;
    const size_t dkdv_smem = attn_dkdv_smem(DP, KV_WARPS, KV_BM);
    CHECK_CUDA(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)dkdv_smem));
    dkdv<<<attn_grid(B, G, Tk, 16 * KV_WARPS), 32 * KV_WARPS, dkdv_smem, compute_stream()>>>(
        dkv, keep_bits, dout, q, kv, key_valid, lse2, di, Tq, Tk, Tq_pad, Tk_pad, H, G, D, head_start, total_heads,
        window, rng, vec);
    CHECK_LAUNCH();

    auto dq_kernel = attention_backward_dq_kernel<DP, DQ_WARPS, DQ_BN, DROPOUT, PADDED, CROSS, E>;
    const size_t dq_smem = attn_dq_smem(DP, DQ_WARPS, DQ_BN);
    CHECK_CUDA(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem));
    dq_kernel<<<attn_grid(B, H, Tq, 16 * DQ_WARPS), 32 * DQ_WARPS, dq_smem, compute_stream()>>>(
        dq, keep_bits, dout, q, kv, key_valid, lse2, di, Tq, Tk, Tq_pad, Tk_pad, H, G, D, window, rng, vec);
    CHECK_LAUNCH();
    if (dbias && !CROSS) bias_backward_e(dbias, dq, B * Tq, qkv_columns);
}

/* the padded head dimension the kernels are instantiated for */
static int attn_padded_head_dim(int D) {
    if (D >= 1 && D <= 64) return 64;
    if (D <= 128) return 128;
    KERNELS_FATAL("cuda attention supports head dimensions 1..128, got %d", D);
}

/* the instantiation for D and the dropout probability */
template <bool PADDED, bool CROSS, typename E>
static void attn_forward_dispatch(E *out, float *lse, const E *q, const E *kv, const int *key_valid, int B, int Tq,
                                  int Tk, int H, int G, int D, int head_start, int total_heads, int window,
                                  dropout_rng rng) {
    const bool drop = rng.p > 0.0f, dp64 = attn_padded_head_dim(D) == 64;
#define ATTN_FORWARD(DP, DROP) \
    attn_forward_launch<DP, DROP, PADDED, CROSS>(out, lse, q, kv, key_valid, B, Tq, Tk, H, G, D, head_start, total_heads, \
                                                 window, rng)
    if (dp64) drop ? ATTN_FORWARD(64, true) : ATTN_FORWARD(64, false);
    else drop ? ATTN_FORWARD(128, true) : ATTN_FORWARD(128, false);
#undef ATTN_FORWARD
}

template <bool PADDED, bool CROSS, typename E>
static void attn_backward_dispatch(E *dq, E *dkv, float *dbias, const E *dout, const E *q, const E *kv, const E *out,
                                   const int *key_valid, const float *lse, int B, int Tq, int Tk, int H, int G, int D,
                                   int head_start, int total_heads, int window, dropout_rng rng) {
    const bool drop = rng.p > 0.0f, dp64 = attn_padded_head_dim(D) == 64;
#define ATTN_BACKWARD(DP, DROP)                                                                                 \
    attn_backward_launch<DP, DROP, PADDED, CROSS>(dq, dkv, dbias, dout, q, kv, out, key_valid, lse, B, Tq, Tk, H, G, \
                                                  D, head_start, total_heads, window, rng)
    if (dp64) drop ? ATTN_BACKWARD(64, true) : ATTN_BACKWARD(64, false);
    else drop ? ATTN_BACKWARD(128, true) : ATTN_BACKWARD(128, false);
#undef ATTN_BACKWARD
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

/* key_valid NULL: causal attention; else bidirectional with that key-padding mask [B,T] */
template <typename E>
static void attention_forward_t(E *out, void *workspace, const E *qkv, const int *key_valid, int B, int T,
                                int H, int G, int D, int head_start, int total_heads, int window_left,
                                dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    attn_check_groups(H, G);
    float *lse = (float *)workspace;
    const int window = attn_window(window_left, T);
    if constexpr (!is_fp16<E>::value) { /* Hopper (cuda_attention_sm90.cu), bf16 and causal only */
        if (!key_valid && cuda_attention_sm90_applies(out, qkv, D, rng.p) &&
            (window == ATTN_NO_WINDOW || cuda_attention_sm90_window())) {
            cuda_attention_sm90_forward(reinterpret_cast<bf16 *>(out), lse, reinterpret_cast<const bf16 *>(qkv), B, T,
                                        H, G, D, head_start, total_heads, window == ATTN_NO_WINDOW ? -1 : window, rng);
            return;
        }
    }
    if (key_valid)
        attn_forward_dispatch<true, false>(out, lse, qkv, qkv, key_valid, B, T, T, H, G, D, head_start, total_heads,
                                           ATTN_NO_WINDOW, rng);
    else
        attn_forward_dispatch<false, false>(out, lse, qkv, qkv, key_valid, B, T, T, H, G, D, head_start, total_heads,
                                            window, rng);
}

template <typename E>
static void attention_backward_t(E *dqkv, float *dbias, const E *dout, const E *qkv, const E *out,
                                 const int *key_valid, const void *workspace, int B, int T, int H, int G, int D,
                                 int head_start, int total_heads, int window_left, dropout_rng rng) {
    if (B <= 0 || T <= 0 || H <= 0) return;
    attn_check_groups(H, G);
    const float *lse = (const float *)workspace;
    if (key_valid)
        attn_backward_dispatch<true, false>(dqkv, dqkv, dbias, dout, qkv, qkv, out, key_valid, lse, B, T, T, H, G, D,
                                            head_start, total_heads, ATTN_NO_WINDOW, rng);
    else
        attn_backward_dispatch<false, false>(dqkv, dqkv, dbias, dout, qkv, qkv, out, key_valid, lse, B, T, T, H, G, D,
                                             head_start, total_heads, attn_window(window_left, T), rng);
}

/* cross-attention (kernels.h's cross_attention_*): the padded kernels with CROSS; H query heads,
 * each with its own key and value head in kv (G = H). With no keys (Tk 0) every query row sees
 * none: out and dq are 0, as on the CPU. */
template <typename E>
static void cross_attention_forward_t(E *out, void *workspace, const E *q, const E *kv, const int *key_valid, int B,
                                      int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                      dropout_rng rng) {
    if (!key_valid) KERNELS_FATAL("cuda cross-attention: no key-padding mask (key_valid [B,Tk] is required)");
    if (B <= 0 || Tq <= 0 || H <= 0) return;
    if (Tk <= 0) {
        CHECK_CUDA(cudaMemsetAsync(out, 0, (size_t)B * Tq * H * D * sizeof(E), compute_stream()));
        return;
    }
    attn_forward_dispatch<true, true>(out, (float *)workspace, q, kv, key_valid, B, Tq, Tk, H, H, D, head_start,
                                      total_heads, ATTN_NO_WINDOW, rng);
}

template <typename E>
static void cross_attention_backward_t(E *dq, E *dkv, const E *dout, const E *q, const E *kv, const E *out,
                                       const int *key_valid, const void *workspace, int B, int Tq, int Tk, int H, int D,
                                       int head_start, int total_heads, dropout_rng rng) {
    if (!key_valid) KERNELS_FATAL("cuda cross-attention: no key-padding mask (key_valid [B,Tk] is required)");
    if (B <= 0 || H <= 0) return;
    if (Tq <= 0 || Tk <= 0) { /* nothing attends: every gradient 0 */
        if (Tq > 0) CHECK_CUDA(cudaMemsetAsync(dq, 0, (size_t)B * Tq * H * D * sizeof(E), compute_stream()));
        if (Tk > 0) CHECK_CUDA(cudaMemsetAsync(dkv, 0, (size_t)B * Tk * 2 * H * D * sizeof(E), compute_stream()));
        return;
    }
    attn_backward_dispatch<true, true>(dq, dkv, (float *)NULL, dout, q, kv, out, key_valid,
                                       (const float *)workspace, B, Tq, Tk, H, H, D, head_start, total_heads,
                                       ATTN_NO_WINDOW, rng);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_attention_forward(bf16 *out, void *workspace, const bf16 *qkv, int B, int T,
                                       int H, int G, int D, int head_start, int total_heads, int window_left,
                                       dropout_rng rng) {
    attention_forward_t(as_nv(out), workspace, as_nv(qkv), NULL, B, T, H, G, D, head_start, total_heads, window_left,
                        rng);
}

extern "C" void cuda_attention_forward_fp16(fp16 *out, void *workspace, const fp16 *qkv, int B, int T,
                                       int H, int G, int D, int head_start, int total_heads, int window_left,
                                       dropout_rng rng) {
    attention_forward_t(as_half(out), workspace, as_half(qkv), NULL, B, T, H, G, D, head_start, total_heads,
                        window_left, rng);
}

extern "C" void cuda_attention_backward(bf16 *dqkv, float *dbias, const bf16 *dout, const bf16 *qkv,
                                        const bf16 *out, const void *workspace, int B, int T,
                                        int H, int G, int D, int head_start, int total_heads, int window_left,
                                        dropout_rng rng) {
    attention_backward_t(as_nv(dqkv), dbias, as_nv(dout), as_nv(qkv), as_nv(out), NULL, workspace, B, T, H, G, D,
                         head_start, total_heads, window_left, rng);
}

extern "C" void cuda_attention_backward_fp16(fp16 *dqkv, float *dbias, const fp16 *dout, const fp16 *qkv,
                                        const fp16 *out, const void *workspace, int B, int T,
                                        int H, int G, int D, int head_start, int total_heads, int window_left,
                                        dropout_rng rng) {
    attention_backward_t(as_half(dqkv), dbias, as_half(dout), as_half(qkv), as_half(out), NULL, workspace, B, T, H,
                         G, D, head_start, total_heads, window_left, rng);
}

/* bidirectional attention with a key-padding mask (BERT's encoder; kernels.h's attention_padded_*):
 * the kernels above with PADDED, on every GPU (the Hopper wgmma kernels are causal only) */
extern "C" void cuda_attention_padded_forward(bf16 *out, void *workspace, const bf16 *qkv, const int *key_valid,
                                              int B, int T, int H, int G, int D, int head_start, int total_heads,
                                              dropout_rng rng) {
    attention_forward_t(as_nv(out), workspace, as_nv(qkv), key_valid, B, T, H, G, D, head_start, total_heads, -1, rng);
}

extern "C" void cuda_attention_padded_forward_fp16(fp16 *out, void *workspace, const fp16 *qkv, const int *key_valid,
                                                   int B, int T, int H, int G, int D, int head_start,
                                                   int total_heads, dropout_rng rng) {
    attention_forward_t(as_half(out), workspace, as_half(qkv), key_valid, B, T, H, G, D, head_start, total_heads,
                        -1, rng);
}

extern "C" void cuda_attention_padded_backward(bf16 *dqkv, float *dbias, const bf16 *dout, const bf16 *qkv,
                                               const bf16 *out, const int *key_valid, const void *workspace, int B,
                                               int T, int H, int G, int D, int head_start, int total_heads,
                                               dropout_rng rng) {
    attention_backward_t(as_nv(dqkv), dbias, as_nv(dout), as_nv(qkv), as_nv(out), key_valid, workspace, B, T, H, G,
                         D, head_start, total_heads, -1, rng);
}

extern "C" void cuda_attention_padded_backward_fp16(fp16 *dqkv, float *dbias, const fp16 *dout, const fp16 *qkv,
                                                    const fp16 *out, const int *key_valid, const void *workspace,
                                                    int B, int T, int H, int G, int D, int head_start,
                                                    int total_heads, dropout_rng rng) {
    attention_backward_t(as_half(dqkv), dbias, as_half(dout), as_half(qkv), as_half(out), key_valid, workspace, B, T,
                         H, G, D, head_start, total_heads, -1, rng);
}

/* cross-attention (T5's decoder over the encoder output; kernels.h's cross_attention_*): the
 * padded kernels with the queries and the keys and values in tensors of their own */
extern "C" size_t cuda_cross_attention_workspace_bytes(int B, int Tq, int Tk, int H) {
    (void)Tk;
    return (size_t)B * H * Tq * sizeof(float); /* the per-row log-sum-exp */
}

extern "C" void cuda_cross_attention_forward(bf16 *out, void *workspace, const bf16 *q, const bf16 *kv,
                                             const int *key_valid, int B, int Tq, int Tk, int H, int D, int head_start,
                                             int total_heads, dropout_rng rng) {
    cross_attention_forward_t(as_nv(out), workspace, as_nv(q), as_nv(kv), key_valid, B, Tq, Tk, H, D, head_start,
                              total_heads, rng);
}

extern "C" void cuda_cross_attention_forward_fp16(fp16 *out, void *workspace, const fp16 *q, const fp16 *kv,
                                                  const int *key_valid, int B, int Tq, int Tk, int H, int D,
                                                  int head_start, int total_heads, dropout_rng rng) {
    cross_attention_forward_t(as_half(out), workspace, as_half(q), as_half(kv), key_valid, B, Tq, Tk, H, D, head_start,
                              total_heads, rng);
}

extern "C" void cuda_cross_attention_backward(bf16 *dq, bf16 *dkv, const bf16 *dout, const bf16 *q, const bf16 *kv,
                                              const bf16 *out, const int *key_valid, const void *workspace, int B,
                                              int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                              dropout_rng rng) {
    cross_attention_backward_t(as_nv(dq), as_nv(dkv), as_nv(dout), as_nv(q), as_nv(kv), as_nv(out), key_valid,
                               workspace, B, Tq, Tk, H, D, head_start, total_heads, rng);
}

extern "C" void cuda_cross_attention_backward_fp16(fp16 *dq, fp16 *dkv, const fp16 *dout, const fp16 *q,
                                                   const fp16 *kv, const fp16 *out, const int *key_valid,
                                                   const void *workspace, int B, int Tq, int Tk, int H, int D,
                                                   int head_start, int total_heads, dropout_rng rng) {
    cross_attention_backward_t(as_half(dq), as_half(dkv), as_half(dout), as_half(q), as_half(kv), as_half(out),
                               key_valid, workspace, B, Tq, Tk, H, D, head_start, total_heads, rng);
}
