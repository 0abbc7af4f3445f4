/* cpu_bert_elementwise.c: the elementwise functions of BERT's heads (Megatron-Core's
 * bert_lm_head.py and pooler.py): the exact GeLU of torch.nn.functional.gelu,
 * gelu(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, gelu'(x) = Phi(x) + x phi(x), and tanh,
 * tanh'(x) = 1 - tanh(x)^2 (taken from the forward's output). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_gelu_erf_forward(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void cpu_gelu_erf_backward(float *dx, const float *x, const float *dout, size_t n) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] = dout[i] * (cdf + x[i] * pdf);
    }
}

void cpu_tanh_forward(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = tanhf(x[i]);
}

void cpu_tanh_backward(float *dx, const float *y, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = dout[i] * (1.0f - y[i] * y[i]);
}
