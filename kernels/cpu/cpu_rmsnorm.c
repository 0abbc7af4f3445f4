/* cpu_rmsnorm.c: RMSNorm over the last dimension of x[N,C] (Megatron's --normalization RMSNorm):
 *   rstd = 1/sqrt(mean(x^2) + eps),  norm = x * rstd,  out = norm * w   (no bias, no centring)
 * Backward, per row, with g = w*dout: d rstd / d x_j = -rstd^3 x_j / C, so
 *   dx_j = rstd * g_j - x_j rstd^3 mean(g*x) = rstd * (g_j - norm_j * mean(g*norm))
 * and dweight += dout*norm. The row statistic uses a double accumulator. From the output
 * (--memory-efficient-layer-norm): norm = y * (1 / w'), w' the weight clamped as cpu_layernorm.c says. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *weight, int N, int C,
                         float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_n = x + (size_t)n * C;
        double sum_sq = 0.0;
        for (int c = 0; c < C; c++) sum_sq += (double)x_n[c] * x_n[c];
        float s = (float)(1.0 / sqrt(sum_sq / C + (double)eps));
        float *out_n = out + (size_t)n * C;
        for (int c = 0; c < C; c++) out_n[c] = x_n[c] * s * weight[c];
        rstd[n] = s;
    }
}

/* the backward from the saved input x or, with from_output, from the output y = norm * weight
 * (norm = y * cpu_norm_weight_reciprocal(weight, eps)) */
static void rmsnorm_backward_rows(float *dx, float *dweight, const float *dout, const float *saved,
                                  const float *weight, const float *rstd, int N, int C, int from_output,
                                  float eps) {
    for (int n = 0; n < N; n++) {
        const float *dout_n = dout + (size_t)n * C;
        const float *s_n = saved + (size_t)n * C;
        float *dx_n = dx + (size_t)n * C;
        float s = rstd[n];
#define NORM_OF(c) (from_output ? s_n[c] * cpu_norm_weight_reciprocal(weight[c], eps) : s_n[c] * s)
        double g_norm_mean = 0.0;
        for (int c = 0; c < C; c++) g_norm_mean += (double)weight[c] * dout_n[c] * NORM_OF(c);
        float gnm = (float)(g_norm_mean / C);
        for (int c = 0; c < C; c++) {
            float norm = NORM_OF(c);
            dweight[c] += norm * dout_n[c];
            dx_n[c] += (weight[c] * dout_n[c] - norm * gnm) * s;
        }
#undef NORM_OF
    }
}

void cpu_rmsnorm_backward(float *dx, float *dweight, const float *dout, const float *x,
                          const float *weight, const float *rstd, int N, int C) {
    rmsnorm_backward_rows(dx, dweight, dout, x, weight, rstd, N, C, 0, 0.0f);
}

void cpu_rmsnorm_backward_from_output(float *dx, float *dweight, const float *dout, const float *y,
                                      const float *weight, const float *rstd, int N, int C, float eps) {
    rmsnorm_backward_rows(dx, dweight, dout, y, weight, rstd, N, C, 1, eps);
}
