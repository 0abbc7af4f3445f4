/* cuda_attention_dropout.cuh: the attention dropout's keep decisions for one warp's tile of
 * scores, shared by the mma.sync kernels (cuda_attention.cu) and the Hopper wgmma kernels
 * (cuda_attention_sm90.cu). The numbering is kernels/philox.h's (philox_keep_attention, the
 * CPU's): one Philox4x32-7 call per 2 x 4 block of (query, key) elements, 16 bits per element, kept iff
 * that value is >= philox_threshold16(p).
 *
 * The tile is an accumulator in the mma.m16n8k16 layout (also wgmma's, per warp): lane 4g + t
 * holds value 4n + e at row row0 + g + 8 (e >> 1), column col0 + 8n + 2t + (e & 1), n < NT.
 *   forward (QUERY_ROWS: rows are queries, columns keys): a block (queries r, r + 1; keys c .. c + 3)
 *     lies in lanes lane ^ {0, 1, 4, 5} (g, g ^ 1 for the rows; t, t ^ 1 for the key pairs);
 *   backward (!QUERY_ROWS: S^T, rows are keys, columns queries): a block (queries q, q + 1; keys
 *     k .. k + 3) lies in lanes lane ^ {0, 4, 8, 12} (one column pair t, keys g .. g ^ 3).
 * Either way the four lanes of a block hold the same 2 NT blocks of the tile (block (n, i): n8
 * group n, row half i), and lane `quarter` s of them (forward 2 (g & 1) + (t & 1), backward
 * g & 3) draws the blocks 2n + i = s (mod 4): NT / 2 calls per lane, a quarter of the tile's
 * calls each, an eighth of its elements. From each call a lane keeps its own two decisions and
 * sends each partner theirs (three xor-shuffles per tile): a lane's two values of block (n, i)
 * are bits 4n + 2i (column even) and 4n + 2i + 1. Its word in the call: forward, rows r + (s >> 1)
 * and keys c + 2 (s & 1), + 1 are word s, low and high half; backward, key k + s of query q is
 * word s >> 1, half s & 1, of query q + 1 word 2 + (s >> 1), the same half. A lane keeps its
 * calls' decisions in one register (a byte per call) while it draws, and sorts them out after.
 *
 * Only blocks for which visible(first query, first key) is true are drawn (the others' bits are 0):
 * the callers pass their mask (causal, key padding, sequence end), which need only say whether
 * some element of the 2 x 4 block can be nonzero. All 32 lanes must call (shuffles). */
#ifndef CUDA_ATTENTION_DROPOUT_CUH
#define CUDA_ATTENTION_DROPOUT_CUH

#include <stdint.h>

#include "kernels/philox.h"

/* where one head's draws come from */
struct attn_drop_rng {
    uint64_t seed, stream;
    uint64_t head_base; /* the counter of element (0, 0) of the head */
    int Tk;             /* keys per query row of the numbering */
    uint32_t threshold; /* philox_threshold16(p) */
};

static __device__ __forceinline__ uint32_t attn_drop_keeps(uint32_t value16, uint32_t threshold) {
    return value16 >= threshold ? 1u : 0u;
}
/* one call's eight decisions as a byte: bits 2d, 2d + 1 for the lane of quarter d (its values
 * 4n + 2i, 4n + 2i + 1 of the block: even column, odd column) */
template <bool QUERY_ROWS>
static __device__ __forceinline__ uint32_t attn_drop_byte(const philox_out &w, uint32_t threshold) {
    uint32_t byte = 0;
#pragma unroll
    for (int d = 0; d < 4; d++) {
        /* forward: word d, low then high half; backward: words d >> 1 (query q) and 2 + (d >> 1)
         * (query q + 1), half d & 1 of each */
        const uint32_t a = QUERY_ROWS ? w.v[d] & 0xffffu : (w.v[d >> 1] >> (16 * (d & 1))) & 0xffffu;
        const uint32_t b = QUERY_ROWS ? w.v[d] >> 16 : (w.v[2 + (d >> 1)] >> (16 * (d & 1))) & 0xffffu;
        byte |= (attn_drop_keeps(a, threshold) | attn_drop_keeps(b, threshold) << 1) << (2 * d);
    }
    return byte;
}

/* keep bits of the warp's 16 x 8NT tile (bit 4n + e: value 4n + e kept); row0 and col0 are
 * multiples of 8; visible(query, key) as above. Lane s's m-th call is block 4m + s, whose values
 * sit at bits 4n + 2i = 8m + 2s of every lane of the block: the calls' bytes packed as byte m of
 * one word, the bits for quarter d are (word >> 2d) & 0x03030303 moved to 2s. */
template <int NT, bool QUERY_ROWS, typename Visible>
static __device__ __forceinline__ uint32_t attn_drop_keep_bits(const attn_drop_rng &rng, int row0, int col0, int lane,
                                                               Visible visible) {
    static_assert(NT % 2 == 0 && NT >= 2 && NT <= 8, "a tile of 2, 4, 6 or 8 n8 groups: its bits in one word");
    const int g = lane >> 2, t = lane & 3;
    const int s = QUERY_ROWS ? 2 * (g & 1) + (t & 1) : (g & 3);
    uint32_t drawn = 0; /* byte m: the decisions of this lane's m-th call */
#pragma unroll
    for (int m = 0; m < NT / 2; m++) {
        const int block = 4 * m + s, n = block >> 1, i = block & 1;
        /* the block's first query and key */
        const int query = QUERY_ROWS ? row0 + (g & ~1) + 8 * i : col0 + 8 * n + 2 * t;
        const int key = QUERY_ROWS ? col0 + 8 * n + 4 * (t >> 1) : row0 + (g & ~3) + 8 * i;
        if (visible(query, key)) {
            const philox_out w = philox4x32_7(
                rng.seed, rng.head_base + (uint64_t)query * (uint64_t)rng.Tk + (uint64_t)key, rng.stream);
            drawn |= attn_drop_byte<QUERY_ROWS>(w, rng.threshold) << (8 * m);
        }
    }
    /* for the lane of quarter s ^ x: its two bits of each of this lane's calls, at 8m + 2s */
    uint32_t to[4];
#pragma unroll
    for (int x = 0; x < 4; x++) to[x] = ((drawn >> (2 * (s ^ x))) & 0x03030303u) << (2 * s);
    /* the lane of quarter s ^ x is lane ^ (forward: 1, 4, 5; backward: 4, 8, 12 for x = 1, 2, 3) */
    return to[0] | __shfl_xor_sync(0xffffffffu, to[1], QUERY_ROWS ? 1 : 4) |
           __shfl_xor_sync(0xffffffffu, to[2], QUERY_ROWS ? 4 : 8) |
           __shfl_xor_sync(0xffffffffu, to[3], QUERY_ROWS ? 5 : 12);
}

#endif /* CUDA_ATTENTION_DROPOUT_CUH */
