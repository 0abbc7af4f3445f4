/* philox_attention_test.c: the attention dropout's numbering (kernels/philox.h,
 * philox_keep_attention), which the CPU kernels, the mma.sync and the Hopper wgmma kernels all
 * follow (the GPU tests compare their decisions with it element for element): decoded here from
 * raw Philox4x32-10 words, written out independently (division and remainder, no bit tricks):
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
    const philox_out w = philox4x32(SEED, counter, STREAM);
    const uint32_t word = w.v[2 * (i % 2) + (j % 4) / 2];
    const uint32_t value = j % 2 == 0 ? word % 65536u : word / 65536u;
    return value >= threshold;
}

static void test_threshold(void) {
    const struct { float p; uint32_t want; } cases[] = {
        {0.0f, 0u}, {0.1f, 6554u}, {0.25f, 16384u}, {0.5f, 32768u}, {0.9f, 58983u},
        {1e-6f, 1u}, {1.0f, 65536u}, {-0.5f, 0u}, {1.5f, 65536u},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const uint32_t got = philox_attention_threshold(cases[k].p);
        if (got != cases[k].want) {
            tap_diag("threshold(%g) = %u, want %u", (double)cases[k].p, got, cases[k].want);
            bad++;
        }
    }
    tap_ok(bad == 0, "philox_attention_threshold is ceil(65536 p) clamped to [0, 65536] (0.1: 6554)");
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
            const uint32_t threshold = philox_attention_threshold(ps[k]);
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
        const double q = philox_attention_threshold(p) / 65536.0; /* drop probability */
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
    const uint64_t want = 0xaddfbfe7fb16dff7ull;
    tap_ok(bits == want, "pinned decisions (seed 1234, stream 77, head_base 4096, T 16, p 0.25): %016llx, want %016llx",
           (unsigned long long)bits, (unsigned long long)want);
}

int main(void) {
    test_threshold();
    test_rule();
    test_blocks();
    test_rates();
    test_pinned();
    return tap_done();
}
