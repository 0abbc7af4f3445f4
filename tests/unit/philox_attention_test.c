/* philox_attention_test.c: the attention dropout's numbering (kernels/philox.h,
 * philox_keep_attention), which the CPU kernels, the mma.sync and the Hopper wgmma kernels all
 * follow (the GPU tests compare their decisions with it element for element): decoded here from
 * raw Philox4x32-7 words (FlashAttention-2's generator: 7 rounds, pinned against Random123's
 * known answers and a round function written out here, and unlike 10 rounds), written out
 * independently (division and remainder, no bit tricks):
 * element (i, j) of a head with T keys per row takes the call at head_base + 2 floor(i / 2) T +
 * 4 floor(j / 4), word 2 (i mod 2) + floor((j mod 4) / 2), the low 16 bits for even j and the high
 * 16 for odd j, and is kept iff that value >= ceil(65536 p). Then: every 2 x 4 block has a call
 * of its own and uses each of its eight 16-bit halves once (eight elements per call), the
 * threshold's exact values, and the keep rates (and the independence of neighbours) against the
 * binomial spread. Integer arithmetic only: no verdict depends on the CPU or BLAS. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/philox.h"
#include "tests/tap.h"

#define SEED 0x243f6a8885a308d3ull
#define STREAM 0x13198a2e03707344ull

/* the decision by the documented rule, from the raw words */
static int keep_by_rule(uint64_t head_base, int T, int i, int j, uint32_t threshold) {
    const uint64_t counter = head_base + (uint64_t)(2 * (i / 2)) * (uint64_t)T + (uint64_t)(4 * (j / 4));
    const philox_out w = philox4x32_7(SEED, counter, STREAM);
    const uint32_t word = w.v[2 * (i % 2) + (j % 4) / 2];
    const uint32_t value = j % 2 == 0 ? word % 65536u : word / 65536u;
    return value >= threshold;
}

/* Philox4x32 by the paper's round function, written out on its own: the counter (c0, c1, c2, c3)
 * becomes (mulhi(B, c2) ^ c1 ^ k0, B c2, mulhi(A, c0) ^ c3 ^ k1, A c0) with A = 0xD2511F53,
 * B = 0xCD9E8D57; the key adds (0x9E3779B9, 0xBB67AE85) between rounds */
static void philox_by_hand(uint32_t c[4], uint32_t k0, uint32_t k1, int rounds) {
    for (int r = 0; r < rounds; r++) {
        const uint64_t a = 0xD2511F53ull * c[0], b = 0xCD9E8D57ull * c[2];
        const uint32_t n[4] = {(uint32_t)(b / 4294967296ull) ^ c[1] ^ k0, (uint32_t)(b % 4294967296ull),
                               (uint32_t)(a / 4294967296ull) ^ c[3] ^ k1, (uint32_t)(a % 4294967296ull)};
        memcpy(c, n, sizeof n);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

static int same(philox_out got, const uint32_t want[4]) {
    return got.v[0] == want[0] && got.v[1] == want[1] && got.v[2] == want[2] && got.v[3] == want[3];
}

/* the attention's generator is Philox4x32-7: Random123's known answers (kat_vectors, "philox4x32
 * 7" and "10" on counter 0, all ones, and the digits of pi), with philox4x32_7's arguments packed
 * as counter_lo = c0 + 2^32 c1, counter_hi = c2 + 2^32 c3, seed = k0 + 2^32 k1 */
static void test_rounds(void) {
    const struct { uint32_t c[4], k[2], want7[4], want10[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u},
         {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
         {0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u}, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
         {0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}, {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    int bad7 = 0, bad10 = 0, differ = 1;
    for (size_t n = 0; n < sizeof kat / sizeof kat[0]; n++) {
        const uint64_t lo = kat[n].c[0] | (uint64_t)kat[n].c[1] << 32, hi = kat[n].c[2] | (uint64_t)kat[n].c[3] << 32;
        const uint64_t seed = kat[n].k[0] | (uint64_t)kat[n].k[1] << 32;
        bad7 += !same(philox4x32_7(seed, lo, hi), kat[n].want7);
        bad10 += !same(philox4x32(seed, lo, hi), kat[n].want10);
        differ &= !same(philox4x32_7(seed, lo, hi), kat[n].want10);
    }
    tap_ok(bad7 == 0, "philox4x32_7 gives Random123's Philox4x32-7 known answers (%d of 3 wrong)", bad7);
    tap_ok(bad10 == 0 && differ, "philox4x32 stays Philox4x32-10 (%d of 3 wrong), and 7 rounds differ from it", bad10);
    /* and against the round function written out above, on counters of the attention's kind */
    int wrong = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        const uint64_t counter = 1000003ull + 2654435761ull * i;
        uint32_t c[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), (uint32_t)STREAM, (uint32_t)(STREAM >> 32)};
        philox_by_hand(c, (uint32_t)SEED, (uint32_t)(SEED >> 32), 7);
        wrong += !same(philox4x32_7(SEED, counter, STREAM), c);
    }
    tap_ok(wrong == 0, "philox4x32_7 is seven rounds of the round function on 1000 counters (%d wrong)", wrong);
    /* philox_keep_attention draws from the 7-round words: the element (0, 0) of head_base 0 keeps
     * iff the low half of word 0 of philox4x32_7(seed, 0, stream) is >= the threshold */
    uint32_t c[4] = {0, 0, (uint32_t)STREAM, (uint32_t)(STREAM >> 32)};
    philox_by_hand(c, (uint32_t)SEED, (uint32_t)(SEED >> 32), 7);
    const float p = (float)(c[0] % 65536u) / 65536.0f; /* its own value: kept at p, dropped just above */
    tap_ok(philox_keep_attention(SEED, STREAM, 0, 4, 0, 0, p) &&
               !philox_keep_attention(SEED, STREAM, 0, 4, 0, 0, p + 1.0f / 65536.0f),
           "element (0, 0) is decided by the low 16 bits (%u) of the 7-round call's word 0", c[0] % 65536u);
}

static void test_threshold(void) {
    const struct { float p; uint32_t want; } cases[] = {
        {0.0f, 0u}, {0.1f, 6554u}, {0.25f, 16384u}, {0.5f, 32768u}, {0.9f, 58983u},
        {1e-6f, 1u}, {1.0f, 65536u}, {-0.5f, 0u}, {1.5f, 65536u},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const uint32_t got = philox_threshold16(cases[k].p);
        if (got != cases[k].want) {
            tap_diag("threshold(%g) = %u, want %u", (double)cases[k].p, got, cases[k].want);
            bad++;
        }
    }
    tap_ok(bad == 0, "philox_threshold16 is ceil(65536 p) clamped to [0, 65536] (0.1: 6554)");
    /* p = 0 keeps everything, p = 1 nothing (a 16-bit value is at most 65535) */
    int all = 1, none = 1;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 11; j++) {
            all &= philox_keep_attention(SEED, STREAM, 5, 11, i, j, 0.0f);
            none &= !philox_keep_attention(SEED, STREAM, 5, 11, i, j, 1.0f);
        }
    tap_ok(all && none, "p = 0 keeps every element, p = 1 none");
}

/* philox_keep_attention against the rule, every element of a few heads (row lengths of every
 * residue mod 4, odd row counts) */
static void test_rule(void) {
    const int shapes[][2] = {{1, 1}, {3, 2}, {5, 3}, {7, 5}, {9, 8}, {4, 13}, {11, 130}, {130, 130}};
    const float ps[] = {0.1f, 0.5f, 0.03f};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], T = shapes[s][1];
        size_t wrong = 0, total = 0;
        for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
            const uint32_t threshold = philox_threshold16(ps[k]);
            for (uint64_t head = 0; head < 3; head++) {
                const uint64_t head_base = 1000003ull + head * (uint64_t)rows * (uint64_t)T;
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < T; j++) {
                        wrong += philox_keep_attention(SEED, STREAM, head_base, T, i, j, ps[k]) !=
                                 keep_by_rule(head_base, T, i, j, threshold);
                        total++;
                    }
            }
        }
        tap_ok(wrong == 0, "%d x %d heads: philox_keep_attention is the 2 x 4 rule on every element (%zu of %zu wrong)",
               rows, T, wrong, total);
    }
}

/* each 2 x 4 block has its own call (no two blocks, of one head or of neighbouring heads, share a
 * counter) and its eight elements use the eight 16-bit halves of it once each */
static void test_blocks(void) {
    const int rows = 10, T = 14, heads = 3; /* T % 4 == 2: partial blocks at the row ends */
    const int brows = (rows + 1) / 2, bcols = (T + 3) / 4;
    const size_t n_counters = (size_t)heads * rows * T;
    int *owner = malloc(n_counters * sizeof(int)); /* block id + 1 of counter c, 0 unused */
    unsigned char *halves = calloc((size_t)heads * brows * bcols, 1);
    memset(owner, 0, n_counters * sizeof(int));
    int clash = 0, reused_half = 0;
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < T; j++) {
                const uint64_t c = philox_attention_counter((uint64_t)h * rows * T, T, i, j);
                const int block = (h * brows + i / 2) * bcols + j / 4;
                if (c >= n_counters || (owner[c] != 0 && owner[c] != block + 1)) clash++;
                else owner[c] = block + 1;
                const int half = 2 * philox_attention_word(i, j) + (j & 1); /* 0..7 */
                if (halves[block] & (1u << half)) reused_half++;
                halves[block] |= (unsigned char)(1u << half);
            }
    size_t used = 0;
    for (size_t c = 0; c < n_counters; c++) used += owner[c] != 0;
    tap_ok(clash == 0 && used == (size_t)heads * brows * bcols,
           "one call per 2 x 4 block: %zu calls for %d heads of %d x %d (%d shared between blocks)", used, heads, rows,
           T, clash);
    tap_ok(reused_half == 0, "a block's elements take distinct 16-bit halves of its call");
    /* a full block spends all eight: words 0, 1 on row i, 2, 3 on row i + 1, low half even j */
    tap_ok(philox_attention_word(4, 8) == 0 && philox_attention_word(4, 10) == 1 && philox_attention_word(5, 9) == 2 &&
               philox_attention_word(5, 11) == 3 && philox_attention_half(0x89abcdefu, 8) == 0xcdefu &&
               philox_attention_half(0x89abcdefu, 9) == 0x89abu,
           "words: (i even, j mod 4 < 2) 0, (even, >= 2) 1, (odd, < 2) 2, (odd, >= 2) 3; low half for even j");
    free(owner);
    free(halves);
}

/* keep rates within 5 binomial standard deviations of 1 - ceil(65536 p) / 65536, and the two
 * halves of a word (j, j + 1) and the two rows of a block independent: both dropped at rate q^2 */
static void test_rates(void) {
    const int T = 1024;
    const float ps[] = {0.1f, 0.5f};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const float p = ps[k];
        const double q = philox_threshold16(p) / 65536.0; /* drop probability */
        long dropped = 0, pairs = 0, both_cols = 0, both_rows = 0;
        for (int i = 0; i < T; i += 2)
            for (int j = 0; j < T; j += 2) {
                const int a = !philox_keep_attention(SEED, STREAM, 0, T, i, j, p);
                const int b = !philox_keep_attention(SEED, STREAM, 0, T, i, j + 1, p);
                const int c = !philox_keep_attention(SEED, STREAM, 0, T, i + 1, j, p);
                const int d = !philox_keep_attention(SEED, STREAM, 0, T, i + 1, j + 1, p);
                dropped += a + b + c + d;
                both_cols += a && b;
                both_rows += a && c;
                pairs++;
            }
        const double n = 4.0 * pairs, rate = dropped / n, sd = sqrt(q * (1.0 - q) / n);
        tap_ok(fabs(rate - q) < 5.0 * sd, "p = %.2f: drop rate %.5f over %.0f elements, want %.5f +- %.5f", (double)p,
               rate, n, q, 5.0 * sd);
        const double q2 = q * q, sd2 = sqrt(q2 * (1.0 - q2) / pairs);
        tap_ok(fabs(both_cols / (double)pairs - q2) < 5.0 * sd2 && fabs(both_rows / (double)pairs - q2) < 5.0 * sd2,
               "p = %.2f: neighbours independent: both of (j, j + 1) dropped %.5f, of (i, i + 1) %.5f, want %.5f",
               (double)p, both_cols / (double)pairs, both_rows / (double)pairs, q2);
    }
}

/* the decisions of one fixed 4 x 16 piece, pinned: a change of the numbering (which changes every
 * training run with attention dropout) must show up here and be made on purpose */
static void test_pinned(void) {
    uint64_t bits = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++)
            bits |= (uint64_t)philox_keep_attention(1234u, 77u, 4096u, 16, i, j, 0.25f) << (16 * i + j);
    const uint64_t want = 0xefd9fef78bfdff5bull; /* Philox4x32-7 (10 rounds gave 0xaddfbfe7fb16dff7) */
    tap_ok(bits == want, "pinned decisions (seed 1234, stream 77, head_base 4096, T 16, p 0.25): %016llx, want %016llx",
           (unsigned long long)bits, (unsigned long long)want);
}

int main(void) {
    test_rounds();
    test_threshold();
    test_rule();
    test_blocks();
    test_rates();
    test_pinned();
    return tap_done();
}
