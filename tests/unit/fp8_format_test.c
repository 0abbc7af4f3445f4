/* fp8_format_test.c: the fp8 emulation of issue 43 (kernels/fp8_format.h, the fp8_quantize and
 * fp8_dequantize ops of the CPU backend, the delayed-scaling recipe of kernels/fp8_recipe.c).
 * Every one of the 256 E4M3 and 256 E5M2 codes decodes to the value the OCP FP8 spec gives
 * (computed here in double from sign, exponent and mantissa fields); encoding is checked at
 * every representable value, at every midpoint between neighbours (ties to even) and one fp32
 * ulp either side, for saturation, NaN, signed zero and subnormals, and against a brute-force
 * nearest-value search on random inputs; the recipe against cases worked by hand from TE's
 * amax_and_scale_update_after_reduction, and per-tensor current scaling against TE's
 * compute_scale_from_amax. */
#include "kernels/fp8_format.h"
#include "kernels/fp8_recipe.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

#include <float.h>
#include <setjmp.h>
#include <stdio.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct spec {
    const char *name;
    int format, exponent_bits, mantissa_bits, bias;
    int ieee_specials; /* 1: E5M2 (inf and NaN at the top exponent); 0: E4M3 (NaN only at S.1111.111) */
    uint8_t max_code;
    double max_value, min_normal, min_subnormal;
} spec;

static const spec E4M3 = {"E4M3", FP8_E4M3, 4, 3, 7, 0, 0x7E, 448.0, 0x1p-6, 0x1p-9};
static const spec E5M2 = {"E5M2", FP8_E5M2, 5, 2, 15, 1, 0x7B, 57344.0, 0x1p-14, 0x1p-16};

/* the OCP spec's value of a code, in double; NaN for the NaN codes */
static double spec_value(const spec *f, unsigned code) {
    unsigned sign = code >> 7, e = (code >> f->mantissa_bits) & ((1u << f->exponent_bits) - 1u);
    unsigned m = code & ((1u << f->mantissa_bits) - 1u), top = (1u << f->exponent_bits) - 1u;
    double s = sign ? -1.0 : 1.0, frac = (double)m / (double)(1u << f->mantissa_bits);
    if (f->ieee_specials && e == top) return m ? NAN : s * INFINITY;
    if (!f->ieee_specials && e == top && m == (1u << f->mantissa_bits) - 1u) return NAN;
    if (e == 0) return s * ldexp(frac, 1 - f->bias);
    return s * ldexp(1.0 + frac, (int)e - f->bias);
}

static int same_float(float a, double b) {
    if (isnan(b)) return isnan(a);
    return (double)a == b && !signbit(a) == !signbit(b);
}

static void check_decode(const spec *f) {
    int bad = 0;
    for (unsigned c = 0; c < 256; c++)
        if (!same_float(fp8_to_float((uint8_t)c, f->format), spec_value(f, c))) {
            if (bad++ < 5) tap_diag("%s code 0x%02X decodes to %g, spec %g", f->name, c,
                                    fp8_to_float((uint8_t)c, f->format), spec_value(f, c));
        }
    tap_ok(bad == 0, "%s: all 256 codes decode to the spec's values (%d wrong)", f->name, bad);
    tap_ok(fp8_to_float(f->max_code, f->format) == f->max_value &&
               fp8_to_float(1u << f->mantissa_bits, f->format) == f->min_normal &&
               fp8_to_float(1, f->format) == f->min_subnormal &&
               fp8_to_float((uint8_t)(0x80 | f->max_code), f->format) == -f->max_value,
           "%s: max %g, min normal %g, min subnormal %g at their codes", f->name, f->max_value,
           f->min_normal, f->min_subnormal);
}

/* the code of x by brute force: the nearest finite value, ties to the even code, saturating */
static uint8_t brute_encode(const spec *f, float x) {
    if (isnan(x)) return FP8_NAN_CODE;
    double ax = fabs((double)x);
    unsigned sign = signbit(x) ? 0x80u : 0u;
    if (ax >= f->max_value) return (uint8_t)(sign | f->max_code);
    unsigned best = 0;
    double best_dist = INFINITY;
    for (unsigned c = 0; c <= f->max_code; c++) {
        double d = fabs(spec_value(f, c) - ax);
        if (d < best_dist || (d == best_dist && (c & 1u) == 0)) best = c, best_dist = d;
    }
    return (uint8_t)(sign | best);
}

static void check_encode(const spec *f) {
    int exact_bad = 0, mid_bad = 0, side_bad = 0;
    for (unsigned c = 0; c <= f->max_code; c++) {
        float v = (float)spec_value(f, c);
        if (fp8_from_float(v, f->format) != c || fp8_from_float(-v, f->format) != (0x80u | c)) exact_bad++;
    }
    tap_ok(exact_bad == 0, "%s: each of the %u finite values (and its negative) encodes to its own code",
           f->name, f->max_code + 1u);
    for (unsigned c = 0; c < f->max_code; c++) {
        double mid_d = (spec_value(f, c) + spec_value(f, c + 1)) / 2;
        float mid = (float)mid_d;
        if ((double)mid != mid_d) { mid_bad++; continue; } /* every midpoint is an fp32 */
        unsigned even = (c & 1u) ? c + 1 : c;
        if (fp8_from_float(mid, f->format) != even || fp8_from_float(-mid, f->format) != (0x80u | even)) {
            if (mid_bad++ < 5) tap_diag("%s: midpoint %g encodes to 0x%02X, want 0x%02X", f->name, mid_d,
                                        fp8_from_float(mid, f->format), even);
        }
        if (fp8_from_float(nextafterf(mid, 0.0f), f->format) != c ||
            fp8_from_float(nextafterf(mid, INFINITY), f->format) != c + 1 ||
            fp8_from_float(-nextafterf(mid, INFINITY), f->format) != (0x80u | (c + 1)))
            side_bad++;
    }
    tap_ok(mid_bad == 0, "%s: all %u midpoints between neighbours round to the even code", f->name, f->max_code);
    tap_ok(side_bad == 0, "%s: one fp32 ulp below a midpoint rounds down, one above rounds up", f->name);

    /* saturation: beyond max (infinity included) becomes +-max; the midpoint to the next
     * (non-finite) step too */
    float beyond[] = {nextafterf((float)f->max_value, INFINITY), (float)f->max_value * 1.0625f,
                      (float)(f->max_value * 1.5), 1e30f, FLT_MAX, INFINITY};
    int sat_bad = 0;
    for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
        if (fp8_from_float(beyond[i], f->format) != f->max_code ||
            fp8_from_float(-beyond[i], f->format) != (0x80u | f->max_code))
            sat_bad++;
    tap_ok(sat_bad == 0, "%s: values beyond %g, infinities included, saturate to +-%g", f->name,
           f->max_value, f->max_value);
    tap_ok(fp8_from_float(NAN, f->format) == 0x7F && fp8_from_float(-NAN, f->format) == 0x7F,
           "%s: NaN (either sign) encodes to the canonical NaN 0x7F", f->name);
    float half_min = (float)(f->min_subnormal / 2);
    tap_ok(fp8_from_float(0.0f, f->format) == 0x00 && fp8_from_float(-0.0f, f->format) == 0x80 &&
               fp8_from_float(half_min, f->format) == 0x00 && fp8_from_float(-half_min, f->format) == 0x80 &&
               fp8_from_float(nextafterf(half_min, 1.0f), f->format) == 0x01 &&
               fp8_from_float(1e-40f, f->format) == 0x00 && fp8_from_float(-1e-40f, f->format) == 0x80,
           "%s: zero keeps its sign; half the smallest subnormal (a tie) rounds to zero, just above it to "
           "the smallest subnormal; fp32 subnormals become signed zero", f->name);
    /* the largest subnormal's upper midpoint rounds up into the smallest normal (a carry) */
    unsigned top_sub = (1u << f->mantissa_bits) - 1u;
    float carry = (float)((spec_value(f, top_sub) + f->min_normal) / 2);
    tap_ok(fp8_from_float(carry, f->format) == (1u << f->mantissa_bits),
           "%s: the midpoint above the largest subnormal rounds to even, the smallest normal", f->name);

    /* random inputs across the whole range against the brute-force search */
    uint64_t state = 0x9E3779B97F4A7C15ull;
    int random_bad = 0, trials = 60000;
    for (int i = 0; i < trials; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(state >> 32);
        int exponent = (int)(r % 40u) - 22;             /* 2^-22 .. 2^17 */
        float x = ldexpf(1.0f + (float)(r >> 9 & 0x7FFFFF) / 8388608.0f, exponent);
        if (r & 1u) x = -x;
        if (fp8_from_float(x, f->format) != brute_encode(f, x)) {
            if (random_bad++ < 5) tap_diag("%s: %a encodes to 0x%02X, nearest is 0x%02X", f->name, x,
                                           fp8_from_float(x, f->format), brute_encode(f, x));
        }
    }
    tap_ok(random_bad == 0, "%s: %d random values (2^-22 .. 2^17) encode to the nearest value (brute force)",
           f->name, trials);
}

static void check_ops(void) {
    const kernel_ops *ops = kernels_cpu();
    float x[] = {0.5f, -3.25f, 100.0f, -250.0f, NAN, 1e-4f, 0.0f, -0.0f, 7.0f};
    size_t n = sizeof x / sizeof x[0];
    uint8_t q[sizeof x / sizeof x[0]];
    float scale = 2.0f, amax = 0.0f, scale_inv = 0.0f, back[sizeof x / sizeof x[0]];
    ops->fp8_quantize(q, &amax, &scale_inv, x, n, &scale, FP8_E4M3);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += q[i] != fp8_e4m3_from_float(x[i] * scale);
    tap_ok(bad == 0 && q[3] == 0xFE && q[4] == 0x7F,
           "fp8_quantize: code of x * scale (-250 * 2 saturates to -448; NaN stays NaN)");
    tap_ok(amax == 250.0f && scale_inv == 0.5f,
           "fp8_quantize: amax is max |x| of the unscaled input (250), NaN passed over; scale_inv 1/scale");
    float larger = 1000.0f;
    ops->fp8_quantize(q, &larger, NULL, x, n, &scale, FP8_E4M3);
    tap_ok(larger == 1000.0f, "fp8_quantize: amax is max(amax, max |x|): a larger recorded amax stays");
    ops->fp8_dequantize(back, q, n, &scale_inv, FP8_E4M3);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += !same_float(back[i], (double)fp8_e4m3_to_float(q[i]) * 0.5);
    tap_ok(bad == 0 && back[0] == 0.5f && back[1] == -3.25f && back[3] == -224.0f && back[8] == 7.0f,
           "fp8_dequantize: value of the code times scale_inv (representable inputs come back exactly)");
    float g[] = {1000.0f, -70000.0f, 3.0f}, s5 = 1.0f, a5 = 0.0f;
    uint8_t q5[3];
    ops->fp8_quantize(q5, &a5, NULL, g, 3, &s5, FP8_E5M2);
    tap_ok(q5[0] == fp8_e5m2_from_float(1000.0f) && q5[1] == 0xFB && a5 == 70000.0f,
           "fp8_quantize E5M2: 1000 rounds, -70000 saturates to -57344, amax 70000");
}

static void check_recipe(void) {
    fp8_amax_compute_algo algo = FP8_AMAX_MOST_RECENT;
    tap_ok(fp8_amax_compute_algo_parse("max", &algo) == 0 && algo == FP8_AMAX_MAX &&
               fp8_amax_compute_algo_parse("most_recent", &algo) == 0 && algo == FP8_AMAX_MOST_RECENT &&
               fp8_amax_compute_algo_parse("mean", &algo) == -1,
           "--fp8-amax-compute-algo: max and most_recent parse, anything else is refused");
    tap_ok(fp8_tensor_format(0, 0) == FP8_E4M3 && fp8_tensor_format(0, 1) == FP8_E4M3 &&
               fp8_tensor_format(1, 0) == FP8_E4M3 && fp8_tensor_format(1, 1) == FP8_E5M2,
           "--fp8-format: e4m3 everywhere; hybrid E4M3 forward, E5M2 gradients");
    tap_ok(fp8_scaled_max(FP8_E4M3, 0) == 448.0f && fp8_scaled_max(FP8_E4M3, 2) == 112.0f &&
               fp8_scaled_max(FP8_E5M2, 1) == 28672.0f,
           "scaled max = fp8 max * 2^-margin (448, margin 2: 112; 57344, margin 1: 28672)");

    /* history [len 4]: slot 0 holds this step's amax 3; older 5, 2, 1 (5 the oldest) */
    float h[4] = {3, 5, 2, 1}, s = 1.0f;
    fp8_delayed_scaling_update(h, 4, 1, &s, FP8_AMAX_MAX, FP8_E4M3, 0);
    tap_ok(h[0] == 0 && h[1] == 2 && h[2] == 1 && h[3] == 3 && s == 448.0f / 5.0f,
           "max: the history rolls to [0, 2, 1, 3]; the scale is 448 / 5 (5, the oldest entry, counts before it leaves)");
    float h2[4] = {3, 5, 2, 1}, s2 = 1.0f;
    fp8_delayed_scaling_update(h2, 4, 1, &s2, FP8_AMAX_MOST_RECENT, FP8_E4M3, 2);
    tap_ok(h2[0] == 0 && h2[3] == 3 && s2 == 112.0f / 3.0f, "most_recent with margin 2: scale 112 / 3");

    /* a run of steps, len 3, max: amaxes 1, 4, 2, 0.5, 0.25 */
    float hr[3] = {0, 0, 0}, sr = 1.0f, amaxes[] = {1, 4, 2, 0.5f, 0.25f}, want[] = {448, 112, 112, 112, 224};
    int roll_bad = 0;
    for (int step = 0; step < 5; step++) {
        hr[0] = amaxes[step];
        fp8_delayed_scaling_update(hr, 3, 1, &sr, FP8_AMAX_MAX, FP8_E4M3, 0);
        if (sr != want[step]) {
            roll_bad++;
            tap_diag("step %d: scale %g, want %g", step, sr, want[step]);
        }
    }
    tap_ok(roll_bad == 0 && hr[0] == 0 && hr[1] == 0.5f && hr[2] == 0.25f,
           "rolling window of 3: scales 448, 112, 112, 112, 224; history ends [0, 0.5, 0.25]");

    float hz[3] = {0, 8, 9}, sz = 7.0f;
    fp8_delayed_scaling_update(hz, 3, 1, &sz, FP8_AMAX_MAX, FP8_E4M3, 0);
    tap_ok(sz == 7.0f && hz[0] == 0 && hz[1] == 8 && hz[2] == 9,
           "amax 0 this step: no roll and the scale stays (TE), whatever the history holds");
    float hi[1] = {INFINITY}, si = 3.0f;
    fp8_delayed_scaling_update(hi, 1, 1, &si, FP8_AMAX_MAX, FP8_E4M3, 0);
    float hn[1] = {NAN}, sn = 5.0f;
    fp8_delayed_scaling_update(hn, 1, 1, &sn, FP8_AMAX_MOST_RECENT, FP8_E4M3, 0);
    tap_ok(si == 3.0f && hi[0] == 0 && sn == 5.0f && hn[0] == 0,
           "an infinite or NaN amax keeps the old scale (the history still rolls)");
    float hm[3] = {NAN, 4, 0}, sm = 1.0f;
    fp8_delayed_scaling_update(hm, 3, 1, &sm, FP8_AMAX_MAX, FP8_E4M3, 0);
    tap_ok(sm == 112.0f && hm[1] == 0 && isnan(hm[2]), "max passes over a NaN as fmaxf does: amax 4, scale 112");
    float ht[1] = {1e-38f}, st = 1.0f;
    fp8_delayed_scaling_update(ht, 1, 1, &st, FP8_AMAX_MAX, FP8_E4M3, 0);
    tap_ok(st == FLT_MAX, "an amax so small the scale overflows gives FLT_MAX");

    /* two scales side by side ([len][num_scales]); the second in E5M2 terms */
    float h2s[2 * 2] = {2, 0, 8, 0}, sc[2] = {1, 1}; /* scale 0: history [2, 8]; scale 1: [0, 0] */
    fp8_delayed_scaling_update(h2s, 2, 2, sc, FP8_AMAX_MAX, FP8_E5M2, 0);
    tap_ok(sc[0] == 57344.0f / 8.0f && sc[1] == 1.0f && h2s[0] == 0 && h2s[2] == 2 && h2s[3] == 0,
           "[len][num_scales] layout: each scale its own column (E5M2: 57344 / 8; an all-zero column stays)");
}

static void check_current_scaling(void) {
    tap_ok(fp8_current_scale(4.0f, FP8_E4M3, 0.0f, 0) == 112.0f && fp8_current_scale(3.0f, FP8_E5M2, 0.0f, 0) == 57344.0f / 3.0f,
           "tensorwise: scale = fp8 max / amax (448 / 4 = 112; 57344 / 3)");
    tap_ok(fp8_current_scale(0.0f, FP8_E4M3, 0.0f, 0) == 1.0f && fp8_current_scale(INFINITY, FP8_E4M3, 0.0f, 0) == 1.0f &&
               fp8_current_scale(NAN, FP8_E4M3, 0.0f, 0) == 1.0f,
           "tensorwise: amax 0, infinite or NaN gives scale 1");
    tap_ok(fp8_current_scale(1e-38f, FP8_E4M3, 0.0f, 0) == FLT_MAX && fp8_current_scale(0.0f, FP8_E4M3, 2.0f, 0) == 224.0f &&
               fp8_current_scale(3.0f, FP8_E4M3, 0.0f, 1) == 128.0f,
           "tensorwise: overflow gives FLT_MAX; epsilon 2 floors amax 0 (224); power of 2: 448 / 3 = 149.3 -> 128");
}

static jmp_buf fatal_jump;
static char fatal_message[256];
static void catch_fatal(const char *file, int line, const char *message) {
    (void)file, (void)line;
    snprintf(fatal_message, sizeof fatal_message, "%s", message);
    longjmp(fatal_jump, 1);
}

static void check_bad_arguments(void) {
    kernel_error_handler previous = kernels_set_error_handler(catch_fatal);
    float x = 1.0f, scale = 1.0f, history[2] = {1, 0};
    uint8_t q;
    int caught = 0;
    fatal_message[0] = 0;
    if (setjmp(fatal_jump) == 0) kernels_cpu()->fp8_quantize(&q, NULL, NULL, &x, 1, &scale, 5);
    else caught = strstr(fatal_message, "format 5") != NULL;
    tap_ok(caught, "fp8_quantize refuses format 5, naming it: %s", fatal_message);
    caught = 0;
    fatal_message[0] = 0;
    if (setjmp(fatal_jump) == 0) fp8_delayed_scaling_update(history, 0, 1, &scale, FP8_AMAX_MAX, FP8_E4M3, 0);
    else caught = strstr(fatal_message, "history length is 0") != NULL;
    tap_ok(caught, "the delayed-scaling update refuses an empty amax history: %s", fatal_message);
    kernels_set_error_handler(previous);
}

int main(void) {
    check_decode(&E4M3);
    check_decode(&E5M2);
    check_encode(&E4M3);
    check_encode(&E5M2);
    check_ops();
    check_recipe();
    check_current_scaling();
    check_bad_arguments();
    return tap_done();
}
