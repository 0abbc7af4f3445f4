/* cpu_elementwise.c: GeLU (tanh approximation), inverted dropout, add and scale.
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
 * Dropout keeps element i iff philox_keep(seed, stream, offset + i, p) (16 bits of a Philox4x32-10
 * call per element, eight per call, kernels/philox.h) and scales kept values by 1/(1-p); backward
 * regenerates the same mask from the same rng. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

#define GELU_SCALING_FACTOR 0.7978845608028654f /* sqrt(2/pi) */

void cpu_gelu_forward(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}

void cpu_gelu_backward(float *dx, const float *x, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float cube = 0.044715f * xi * xi * xi;
        float tanh_out = tanhf(GELU_SCALING_FACTOR * (xi + cube));
        float sech2 = 1.0f - tanh_out * tanh_out;
        float local_grad = 0.5f * (1.0f + tanh_out) +
                           xi * 0.5f * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * xi * xi);
        dx[i] = local_grad * dout[i];
    }
}

/* out = in * mask / (1 - p); shared by forward and backward (same mask for the same rng) */
static void dropout_apply(float *out, const float *in, size_t n, dropout_rng rng) {
    if (rng.p <= 0.0f) {
        if (out != in) memmove(out, in, n * sizeof(float));
        return;
    }
    float keep_scale = 1.0f / (1.0f - rng.p);
    uint32_t threshold = philox_threshold16(rng.p);
    philox_keep_run run = PHILOX_KEEP_RUN_START;
    for (size_t i = 0; i < n; i++) {
        int keep = philox_keep_run_next(&run, rng.seed, rng.stream, rng.offset + i, threshold);
        out[i] = keep ? in[i] * keep_scale : 0.0f;
    }
}

void cpu_dropout_forward(float *out, const float *x, size_t n, dropout_rng rng) {
    dropout_apply(out, x, n, rng);
}

void cpu_dropout_backward(float *dx, const float *dout, size_t n, dropout_rng rng) {
    dropout_apply(dx, dout, n, rng);
}

/* out = residual + dropout(x + bias), element by element in the unfused order (bias_add, then
 * dropout_forward, then add): the same bits as the three passes */
void cpu_bias_dropout_add(float *out, const float *residual, const float *x, const float *bias, int N, int C,
                          dropout_rng rng) {
    float keep_scale = rng.p > 0.0f ? 1.0f / (1.0f - rng.p) : 1.0f;
    uint32_t threshold = philox_threshold16(rng.p);
    philox_keep_run run = PHILOX_KEEP_RUN_START;
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * (size_t)C + (size_t)c;
            float v = x[i];
            if (bias) v += bias[c];
            if (rng.p > 0.0f)
                v = philox_keep_run_next(&run, rng.seed, rng.stream, rng.offset + i, threshold) ? v * keep_scale : 0.0f;
            out[i] = residual[i] + v;
        }
    }
}

void cpu_add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* starts from block 0's value (not 0.0f + it), so -0 + -0 stays -0 as in MPI's reduction */
void cpu_sum_blocks(float *out, const float *own, const float *received, int ranks, int own_rank, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float sum = own_rank == 0 ? own[i] : received[i];
        for (int k = 1; k < ranks; k++) sum += k == own_rank ? own[i] : received[(size_t)k * n + i];
        out[i] = sum;
    }
}

void cpu_scale(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
