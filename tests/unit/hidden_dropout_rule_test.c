/* hidden_dropout_rule_test.c: the hidden (embedding, attention-output, MLP-output) dropout's
 * numbering (kernels/philox.h, philox_keep), which the CPU kernels and the CUDA dropout and
 * bias-dropout-add kernels follow (tests/gpu/cuda_kernels_test compares the GPU masks with the
 * same rule): element `index` of a site takes the Philox4x32-10 call at counter floor(index / 8),
 * word floor((index mod 8) / 2), the low 16 bits for even index and the high 16 for odd, and is
 * kept iff that value >= ceil(65536 p). Checked here: the 16-bit values of a few elements,
 * computed outside this code base from the round function, pinned; philox_keep, the run cache
 * (philox_keep_run_next) and the eight-at-once draw (philox_keep8, every alignment) against the
 * rule decoded from raw words; the CPU backend's dropout and bias-dropout-add masks against it;
 * the keep fraction over 1M elements within 0.3% of 1 - p. Integer arithmetic decides every
 * verdict but the values of the CPU kernels' kept elements (x / (1 - p), one fp32 rounding). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"

#define SEED 0x243f6a8885a308d3ull
#define STREAM 0x13198a2e03707344ull

/* the rule, from the raw words (division and remainder, no bit tricks) */
static int keep_by_rule(uint64_t index, float p) {
    const philox_out w = philox4x32(SEED, index / 8, STREAM);
    const uint32_t word = w.v[(index % 8) / 2];
    const uint32_t value = index % 2 == 0 ? word % 65536u : word / 65536u;
    return value >= (uint32_t)ceil((double)p * 65536.0);
}

/* the 16-bit values of a few elements under (SEED, STREAM), computed by hand from Philox4x32-10's
 * round function (a separate Python transcription, checked against Random123's known answers):
 * element i is kept at p = u / 65536 and dropped at p = (u + 1) / 65536 */
static void test_pinned(void) {
    const struct { uint64_t index; uint32_t u; } pinned[] = {
        {0, 52799}, {1, 43553}, {2, 62188}, {7, 6602}, {8, 30205}, {13, 46121}, {1000001, 27721},
    };
    for (size_t k = 0; k < sizeof pinned / sizeof pinned[0]; k++) {
        const uint64_t i = pinned[k].index;
        const float at = (float)pinned[k].u / 65536.0f, above = (float)(pinned[k].u + 1) / 65536.0f;
        tap_ok(philox_keep(SEED, STREAM, i, at) && !philox_keep(SEED, STREAM, i, above),
               "element %llu: its 16-bit value is %u (kept at p = %u/65536, dropped at %u/65536)",
               (unsigned long long)i, pinned[k].u, pinned[k].u, pinned[k].u + 1);
    }
    /* element 7 (6602) sits just above p = 0.1's threshold 6554: kept; at p = 0.101 (6620) dropped */
    tap_ok(philox_keep(SEED, STREAM, 7, 0.1f) && !philox_keep(SEED, STREAM, 7, 0.101f),
           "element 7 is kept at p = 0.1 (6602 >= 6554) and dropped at p = 0.101 (threshold 6620)");
}

/* philox_keep, the run cache and the eight-at-once draw against the rule */
static void test_rule(void) {
    const float ps[] = {0.1f, 0.5f, 0.03f, 0.0f, 1.0f};
    size_t wrong_keep = 0, wrong_run = 0, wrong8 = 0, total = 0;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const float p = ps[k];
        const uint32_t threshold = philox_threshold16(p);
        philox_keep_run run = PHILOX_KEEP_RUN_START;
        for (uint64_t i = 999990; i < 1000990; i++) {
            const int want = keep_by_rule(i, p);
            wrong_keep += philox_keep(SEED, STREAM, i, p) != want;
            wrong_run += philox_keep_run_next(&run, SEED, STREAM, i, threshold) != want;
            const uint32_t bits = philox_keep8(SEED, STREAM, i, threshold); /* i .. i + 7, every i % 8 */
            for (uint64_t e = 0; e < 8; e++) wrong8 += ((bits >> e) & 1u) != (uint32_t)keep_by_rule(i + e, p);
            wrong8 += (bits >> 8) != 0;
            total++;
        }
    }
    tap_ok(wrong_keep == 0, "philox_keep is the rule on %zu draws (%zu wrong)", total, wrong_keep);
    tap_ok(wrong_run == 0, "philox_keep_run_next gives philox_keep's bits (%zu wrong)", wrong_run);
    tap_ok(wrong8 == 0, "philox_keep8 gives the eight decisions at every alignment of its first element (%zu wrong)",
           wrong8);
    /* the call at counter c holds elements 8c .. 8c + 7: no two elements share a 16-bit half */
    const philox_out w = philox4x32(SEED, 125000, STREAM); /* elements 1000000 .. 1000007 */
    int shared = 0;
    for (uint64_t e = 0; e < 8; e++) shared += philox_half16(w, 1000000 + e) != (w.v[e / 2] >> (16 * (e % 2)) & 0xffffu);
    tap_ok(shared == 0, "element 8c + e takes half e %% 2 of word e / 2 of call c");
}

/* keep fraction over 1M elements within 0.3% of 1 - p (sd of the fraction ~3e-4 at p = 0.1) */
static void test_fraction(void) {
    const float ps[] = {0.1f, 0.5f};
    const size_t n = 1u << 20;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        const uint32_t threshold = philox_threshold16(ps[k]);
        philox_keep_run run = PHILOX_KEEP_RUN_START;
        size_t kept = 0;
        for (uint64_t i = 0; i < n; i++) kept += (size_t)philox_keep_run_next(&run, SEED, STREAM, 4096 + i, threshold);
        const double frac = (double)kept / (double)n, want = 1.0 - (double)ps[k];
        tap_ok(fabs(frac - want) < 0.003 * want, "p = %.2f keeps %.5f of %zu elements (want %.5f within 0.3%%)",
               (double)ps[k], frac, n, want);
    }
}

/* the CPU backend's dropout and bias-dropout-add draw the rule's mask, at offsets of every residue */
static void test_cpu_kernels(void) {
    const int N = 7, C = 13; /* C odd: rows start at every residue mod 8 */
    const size_t n = (size_t)N * C;
    float *x = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float)), *bias = malloc(C * sizeof(float));
    float *out = malloc(n * sizeof(float)), *bda = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = 1.0f + (float)(i % 5);
        res[i] = 100.0f + (float)i;
    }
    for (int c = 0; c < C; c++) bias[c] = 0.5f;
    size_t wrong = 0, dropped = 0;
    for (uint64_t offset = 1000; offset < 1008; offset++) {
        dropout_rng rng = {0.3f, SEED, STREAM, offset};
        cpu_dropout_forward(out, x, n, rng);
        cpu_bias_dropout_add(bda, res, x, bias, N, C, rng);
        for (size_t i = 0; i < n; i++) {
            const int keep = keep_by_rule(offset + i, 0.3f);
            dropped += !keep;
            wrong += (out[i] != 0.0f) != keep;
            wrong += keep ? out[i] != x[i] * (1.0f / 0.7f) : 0;
            wrong += (bda[i] != res[i]) != keep; /* a dropped element is the residual exactly */
        }
    }
    tap_ok(wrong == 0 && dropped > 0,
           "cpu dropout_forward and bias_dropout_add draw the rule's mask at offsets 1000 .. 1007 (%zu dropped, %zu wrong)",
           dropped, wrong);
    free(x); free(res); free(bias); free(out); free(bda);
}

int main(void) {
    test_pinned();
    test_rule();
    test_fraction();
    test_cpu_kernels();
    return tap_done();
}
