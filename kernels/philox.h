/* philox.h: the counter-based random generator (Philox4x32, Salmon et al., SC'11) behind
 * initialization and dropout: Philox4x32-10 everywhere but the attention probabilities' dropout,
 * which draws from Philox4x32-7 (FlashAttention-2's). A draw is a pure function of (seed,
 * stream, counter): no state is carried between draws, so any rank and any backend computes the
 * same value for the same global element, whatever the parallel layout. Header-only so CUDA
 * kernels can use it too. */
#ifndef PHILOX_H
#define PHILOX_H

#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define PHILOX_FN static __host__ __device__ inline
#else
#define PHILOX_FN static inline
#endif

typedef struct philox_out { uint32_t v[4]; } philox_out;

PHILOX_FN uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* One Philox4x32 round on counter (c0, c1, c2, c3) under key (k0, k1), then the key bump (the
 * bump after the last round is never used). */
typedef struct philox_state { uint32_t c0, c1, c2, c3, k0, k1; } philox_state;
PHILOX_FN philox_state philox_start(uint64_t seed, uint64_t counter_lo, uint64_t counter_hi) {
    philox_state s = {(uint32_t)counter_lo, (uint32_t)(counter_lo >> 32), (uint32_t)counter_hi,
                      (uint32_t)(counter_hi >> 32), (uint32_t)seed, (uint32_t)(seed >> 32)};
    return s;
}
PHILOX_FN void philox_round(philox_state *s) {
    uint32_t hi0, hi1;
    uint32_t lo0 = philox_mulhilo(0xD2511F53u, s->c0, &hi0);
    uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, s->c2, &hi1);
    uint32_t n0 = hi1 ^ s->c1 ^ s->k0, n2 = hi0 ^ s->c3 ^ s->k1;
    s->c0 = n0; s->c1 = lo1; s->c2 = n2; s->c3 = lo0;
    s->k0 += 0x9E3779B9u; s->k1 += 0xBB67AE85u;
}

/* Philox4x32-10 (Random123's default) on counter (counter_lo, counter_hi as 2x64) under key =
 * seed: initialization, the data and the hidden (embedding, attention-output, MLP-output) dropout. */
PHILOX_FN philox_out philox4x32(uint64_t seed, uint64_t counter_lo, uint64_t counter_hi) {
    philox_state s = philox_start(seed, counter_lo, counter_hi);
    for (int round = 0; round < 10; round++) philox_round(&s);
    philox_out out = {{s.c0, s.c1, s.c2, s.c3}};
    return out;
}

/* Philox4x32-7: the same rounds and constants, 7 of them (FlashAttention-2's generator,
 * csrc/flash_attn/src/philox.cuh: six rounds with the key bump, then a seventh; Random123 lists
 * Philox4x32-7 as passing BigCrush, 10 being its safety margin). The attention probabilities'
 * dropout only (philox_keep_attention): their draws run beside the attention kernels' tensor
 * cores, where Philox's multiplies are not hidden, and 7 rounds cost 30% less than 10. */
PHILOX_FN philox_out philox4x32_7(uint64_t seed, uint64_t counter_lo, uint64_t counter_hi) {
    philox_state s = philox_start(seed, counter_lo, counter_hi);
    for (int round = 0; round < 7; round++) philox_round(&s);
    philox_out out = {{s.c0, s.c1, s.c2, s.c3}};
    return out;
}

/* uniform in (0, 1]: never 0, so log() is safe */
PHILOX_FN float philox_uint_to_unit(uint32_t x) { return ((float)(x >> 8) + 1.0f) * (1.0f / 16777216.0f); }

/* uniform in (0, 1] for element `index` of stream `stream` */
PHILOX_FN float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    philox_out r = philox4x32(seed, index, stream);
    return philox_uint_to_unit(r.v[0]);
}

/* standard normal for element `index` of stream `stream` (Box-Muller on two draws, in double
 * so that the CPU and GPU agree to the last bit of the float result far more often). */
PHILOX_FN float philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    philox_out r = philox4x32(seed, index, stream);
    double u1 = ((double)r.v[0] + 1.0) * (1.0 / 4294967296.0);
    double u2 = (double)r.v[1] * (1.0 / 4294967296.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* A 16-bit dropout draw u (uniform on 0 .. 65535) keeps its element iff u >= philox_threshold16(p)
 * = ceil(p 65536) (clamped to [0, 65536]; p 65536 is exact in fp32, so the CPU and the GPU get
 * the same integer), i.e. with probability 1 - ceil(p 65536)/65536 (within 2^-16 of 1 - p, never
 * above it); kept values are scaled by 1/(1 - p) as for every dropout. p <= 0 keeps everything,
 * p >= 1 nothing. */
PHILOX_FN uint32_t philox_threshold16(float p) {
    if (!(p > 0.0f)) return 0u;
    if (p >= 1.0f) return 65536u;
    return (uint32_t)ceilf(p * 65536.0f);
}

/* Hidden dropout (embedding, attention output, MLP output: flat indices): 16 bits per element,
 * eight elements per Philox4x32-10 call. Element `index` of a site takes the call at counter
 * index >> 3, word (index & 7) >> 1 of it, its low 16 bits for even index and its high 16 bits
 * for odd index, and is kept iff that value >= philox_threshold16(p). (The word is selected, not
 * indexed, so that a GPU thread keeps the words in registers whatever the index.) */
PHILOX_FN uint32_t philox_half16(philox_out w, uint64_t index) {
    const unsigned q = (unsigned)(index & 7) >> 1;
    const uint32_t word = q == 0 ? w.v[0] : q == 1 ? w.v[1] : q == 2 ? w.v[2] : w.v[3];
    return (word >> (16 * (unsigned)(index & 1))) & 0xffffu;
}
PHILOX_FN int philox_keep(uint64_t seed, uint64_t stream, uint64_t index, float p) {
    philox_out r = philox4x32(seed, index >> 3, stream);
    return philox_half16(r, index) >= philox_threshold16(p);
}

/* the eight decisions of one call's elements (bit k: element 8 c + k of the call at counter c) */
PHILOX_FN uint32_t philox_keep_bits8(philox_out w, uint32_t threshold) {
    uint32_t bits = 0;
    for (unsigned k = 0; k < 8; k++) bits |= (philox_half16(w, k) >= threshold ? 1u : 0u) << k;
    return bits;
}
/* the decisions of the eight elements first .. first + 7 (bit k: element first + k kept): one
 * Philox call when first is a multiple of 8, two otherwise (the same bits as philox_keep) */
PHILOX_FN uint32_t philox_keep8(uint64_t seed, uint64_t stream, uint64_t first, uint32_t threshold) {
    const unsigned shift = (unsigned)(first & 7);
    uint32_t bits = philox_keep_bits8(philox4x32(seed, first >> 3, stream), threshold) >> shift;
    if (shift != 0)
        bits |= (philox_keep_bits8(philox4x32(seed, (first >> 3) + 1, stream), threshold) << (8 - shift)) & 0xffu;
    return bits;
}

/* consecutive draws of one site, one Philox call per group of eight (the same bits as
 * philox_keep): start from PHILOX_KEEP_RUN_START; threshold = philox_threshold16(p) */
typedef struct philox_keep_run {
    uint64_t group;
    philox_out words;
} philox_keep_run;
#define PHILOX_KEEP_RUN_START {UINT64_MAX, {{0, 0, 0, 0}}}

PHILOX_FN int philox_keep_run_next(philox_keep_run *run, uint64_t seed, uint64_t stream, uint64_t index,
                                   uint32_t threshold) {
    if ((index >> 3) != run->group) {
        run->group = index >> 3;
        run->words = philox4x32(seed, run->group, stream);
    }
    return philox_half16(run->words, index) >= threshold;
}

/* Attention probabilities: 16 bits per element, eight elements per Philox4x32-7 call (the other
 * dropout sites draw Philox4x32-10; every backend draws these from philox4x32_7). Element (i, j)
 * of a head whose element (0, 0) is number `head_base` (element (i, j) is number head_base + i*T + j,
 * T the row length: the number of keys) belongs to the 2 x 4 block of rows i & ~1, (i & ~1) + 1
 * and columns (j & ~3) .. (j & ~3) + 3, and takes the Philox call at the number of that block's
 * top-left element, head_base + (i & ~1)*T + (j & ~3): word (i & 1)*2 + ((j & 3) >> 1) of it,
 * its low 16 bits for even j and its high 16 bits for odd j. So word 0 holds (i0, j0) low and
 * (i0, j0 + 1) high, word 1 (i0, j0 + 2), (i0, j0 + 3), words 2 and 3 the same for row i0 + 1.
 * The element is kept iff that 16-bit value u satisfies u >= philox_threshold16(p), as for the
 * hidden dropout. A GPU thread holding two neighbouring keys of a query (forward) or two
 * neighbouring queries of a key (backward) shares its call with the three other threads of the
 * block (kernels/cuda/cuda_attention_dropout.cuh). */
PHILOX_FN uint64_t philox_attention_counter(uint64_t head_base, int T, int i, int j) {
    return head_base + (uint64_t)(i & ~1) * (uint64_t)T + (uint64_t)(j & ~3);
}
PHILOX_FN int philox_attention_word(int i, int j) { return (i & 1) * 2 + ((j & 3) >> 1); }
/* the 16-bit value of column j from its word */
PHILOX_FN uint32_t philox_attention_half(uint32_t word, int j) { return (j & 1) ? word >> 16 : word & 0xffffu; }
PHILOX_FN int philox_keep_attention(uint64_t seed, uint64_t stream, uint64_t head_base, int T, int i, int j,
                                    float p) {
    philox_out r = philox4x32_7(seed, philox_attention_counter(head_base, T, i, j), stream);
    return philox_attention_half(r.v[philox_attention_word(i, j)], j) >= philox_threshold16(p);
}

/* 64-bit FNV-1a of a string, then mixed: turns a parameter name into a stream id */
PHILOX_FN uint64_t philox_stream_of_name(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) { h ^= (uint8_t)*name; h *= 1099511628211ull; }
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33;
    return h;
}

/* combine small integers (iteration, micro-batch, layer, site) into one stream id */
PHILOX_FN uint64_t philox_stream_mix(uint64_t a, uint64_t b) {
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
    h ^= h >> 31; h *= 0xbf58476d1ce4e5b9ull; h ^= h >> 27;
    return h;
}

#endif /* PHILOX_H */
