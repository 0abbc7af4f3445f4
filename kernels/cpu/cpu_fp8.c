/* cpu_fp8.c: the CPU emulation of fp8 quantization (issue 43): a tensor scaled and rounded to
 * E4M3 or E5M2 exactly as the GPU's saturating conversion does (kernels/fp8_format.h), its amax
 * recorded as Transformer Engine's cast records it, and the way back; the amax alone for current
 * (tensorwise) scaling. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/fp8_format.h"

static void check_format(int format) {
    if (format != FP8_E4M3 && format != FP8_E5M2)
        KERNELS_FATAL("fp8_quantize/fp8_dequantize: format %d is neither FP8_E4M3 (0) nor FP8_E5M2 (1)", format);
}

void cpu_fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const float *x, size_t n,
                      const float *scale, int format) {
    check_format(format);
    float s = *scale, local_amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        local_amax = fmaxf(fabsf(x[i]), local_amax); /* fmaxf: a NaN element does not count */
        out[i] = fp8_from_float(x[i] * s, format);
    }
    if (amax) *amax = fmaxf(*amax, local_amax);
    if (scale_inv) *scale_inv = 1.0f / s;
}

void cpu_fp8_dequantize(float *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    check_format(format);
    float s = *scale_inv;
    for (size_t i = 0; i < n; i++) out[i] = fp8_to_float(q[i], format) * s;
}

void cpu_fp8_amax(float *amax, const float *x, size_t n) {
    float local_amax = 0.0f;
    for (size_t i = 0; i < n; i++) local_amax = fmaxf(fabsf(x[i]), local_amax);
    *amax = fmaxf(*amax, local_amax);
}
