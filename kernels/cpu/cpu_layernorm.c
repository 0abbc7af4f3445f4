/* cpu_layernorm.c: layer norm over the last dimension of x[N,C]:
 *   norm = (x - mean) * rstd,  rstd = 1/sqrt(var + eps) (biased variance),  out = norm*w + b.
 * Backward, per row, with g = w*dout (the gradient w.r.t. norm):
 *   dnorm_i/dx_j = rstd * (delta_ij - 1/C - norm_i*norm_j/C)   (differentiate mean and rstd)
 *   => dx_j = rstd * (g_j - mean(g) - norm_j * mean(g*norm))
 * and dweight += dout*norm, dbias += dout summed over rows. Row statistics use double
 * accumulators (more accurate than llm.c's float sums, same formulas). The backward from the
 * output (--memory-efficient-layer-norm) takes norm = (y - bias) * (1 / w') instead, w' the weight
 * clamped in magnitude to at least eps, as Apex's memory-efficient kernel does. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                           const float *weight, const float *bias, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += x_n[c];
        double m = sum / C;
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x_n[c] - m;
            var += d * d;
        }
        var /= C;
        float s = (float)(1.0 / sqrt(var + (double)eps));
        float mf = (float)m;
        float *out_n = out + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float norm = (x_n[c] - mf) * s;
            out_n[c] = norm * weight[c] + bias[c];
        }
        mean[n] = mf;
        rstd[n] = s;
    }
}

/* the backward from the saved input x (mean and rstd) or, with bias_of_output, from the output
 * y = norm * weight + bias (norm = (y - bias) * cpu_norm_weight_reciprocal(weight, eps)) */
static void layernorm_backward_rows(float *dx, float *dweight, float *dbias, const float *dout,
                                    const float *saved, const float *weight, const float *bias_of_output,
                                    const float *mean, const float *rstd, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *dout_n = dout + (size_t)n * C;
        const float *s_n = saved + (size_t)n * C;
        float *dx_n = dx + (size_t)n * C;
        float m = bias_of_output ? 0.0f : mean[n], s = rstd[n];
#define NORM_OF(c) (bias_of_output ? (s_n[c] - bias_of_output[c]) * cpu_norm_weight_reciprocal(weight[c], eps) \
                                   : (s_n[c] - m) * s)

        /* the two row reductions of the dx formula */
        double g_mean = 0.0, g_norm_mean = 0.0;
        for (int c = 0; c < C; c++) {
            float norm = NORM_OF(c);
            float g = weight[c] * dout_n[c];
            g_mean += g;
            g_norm_mean += (double)g * norm;
        }
        float gm = (float)(g_mean / C), gnm = (float)(g_norm_mean / C);

        for (int c = 0; c < C; c++) {
            float norm = NORM_OF(c);
            float g = weight[c] * dout_n[c];
            dbias[c] += dout_n[c];
            dweight[c] += norm * dout_n[c];
            dx_n[c] += (g - gm - norm * gnm) * s;
        }
#undef NORM_OF
    }
}

void cpu_layernorm_backward(float *dx, float *dweight, float *dbias, const float *dout,
                            const float *x, const float *weight, const float *mean,
                            const float *rstd, int N, int C) {
    layernorm_backward_rows(dx, dweight, dbias, dout, x, weight, NULL, mean, rstd, N, C, 0.0f);
}

void cpu_layernorm_backward_from_output(float *dx, float *dweight, float *dbias, const float *dout,
                                        const float *y, const float *weight, const float *bias,
                                        const float *rstd, int N, int C, float eps) {
    layernorm_backward_rows(dx, dweight, dbias, dout, y, weight, bias, NULL, rstd, N, C, eps);
}
