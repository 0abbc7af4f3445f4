/* fp8_recipe.c: Transformer Engine's delayed-scaling update of fp8 scales from an amax history
 * (the semantics are in fp8_recipe.h). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/fp8_recipe.h"
#include "kernels/kernels.h"

int fp8_amax_compute_algo_parse(const char *name, fp8_amax_compute_algo *algo) {
    if (strcmp(name, "max") == 0) *algo = FP8_AMAX_MAX;
    else if (strcmp(name, "most_recent") == 0) *algo = FP8_AMAX_MOST_RECENT;
    else return -1;
    return 0;
}

int fp8_tensor_format(int hybrid, int is_gradient) { return hybrid && is_gradient ? FP8_E5M2 : FP8_E4M3; }

float fp8_scaled_max(int format, int margin) { return ldexpf(fp8_max_of(format), -margin); }

float fp8_current_scale(float amax, int format, float epsilon, int force_pow_2) {
    if (amax < epsilon) amax = epsilon; /* false for a NaN amax */
    if (isinf(amax) || amax == 0.0f || isnan(amax)) return 1.0f;
    float scale = fp8_max_of(format) / amax;
    if (isinf(scale)) scale = FLT_MAX;
    if (force_pow_2) scale = fp8_bits_float(fp8_float_bits(scale) & 0xFF800000u);
    return scale;
}

void fp8_delayed_scaling_update(float *history, size_t history_len, size_t num_scales, float *scale,
                                fp8_amax_compute_algo algo, int format, int margin) {
    if (history_len == 0) KERNELS_FATAL("fp8_delayed_scaling_update: the amax history length is 0");
    if (format != FP8_E4M3 && format != FP8_E5M2)
        KERNELS_FATAL("fp8_delayed_scaling_update: format %d is neither FP8_E4M3 (0) nor FP8_E5M2 (1)", format);
    if (algo != FP8_AMAX_MAX && algo != FP8_AMAX_MOST_RECENT)
        KERNELS_FATAL("fp8_delayed_scaling_update: amax compute algo %d is neither max (0) nor most_recent (1)",
                      (int)algo);
    float scaled_max = fp8_scaled_max(format, margin);
    for (size_t s = 0; s < num_scales; s++) {
        float last = history[s];
        if (last == 0.0f) continue; /* TE: no roll, amax 0, the scale stays */
        float amax = 0.0f;
        for (size_t i = 0; i < history_len; i++) {
            float a = i + 1 < history_len ? history[(i + 1) * num_scales + s] : last;
            amax = fmaxf(amax, a);
            history[i * num_scales + s] = i > 0 ? a : 0.0f;
        }
        if (algo == FP8_AMAX_MOST_RECENT) amax = last;
        float new_scale = isfinite(amax) && amax > 0.0f ? scaled_max / amax : scale[s];
        if (isinf(new_scale)) new_scale = FLT_MAX;
        scale[s] = new_scale;
    }
}
