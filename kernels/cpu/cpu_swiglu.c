/* cpu_swiglu.c: SwiGLU, Megatron's --swiglu activation, on x[N,2F] rows [gate | up]:
 *   out = silu(a) * u,  silu(a) = a s,  s = sigmoid(a),  silu'(a) = s (1 + a (1 - s))
 *   da = dout * u * silu'(a),  du = dout * silu(a)
 * and both in one pass (the backward with the forward's output made again, which may overwrite
 * dout). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_swiglu_forward(float *out, const float *x, int N, int F) {
    for (int n = 0; n < N; n++) {
        const float *gate = x + (size_t)n * 2 * F, *up = gate + F;
        float *out_n = out + (size_t)n * F;
        for (int f = 0; f < F; f++) {
            float a = gate[f];
            out_n[f] = a / (1.0f + expf(-a)) * up[f];
        }
    }
}

void cpu_swiglu_backward(float *dx, const float *x, const float *dout, int N, int F) {
    for (int n = 0; n < N; n++) {
        const float *gate = x + (size_t)n * 2 * F, *up = gate + F;
        const float *dout_n = dout + (size_t)n * F;
        float *dgate = dx + (size_t)n * 2 * F, *dup = dgate + F;
        for (int f = 0; f < F; f++) {
            float a = gate[f], s = 1.0f / (1.0f + expf(-a));
            dgate[f] = dout_n[f] * up[f] * s * (1.0f + a * (1.0f - s));
            dup[f] = dout_n[f] * a * s;
        }
    }
}

void cpu_swiglu_backward_remake(float *dx, float *out, const float *x, const float *dout, int N, int F) {
    for (int n = 0; n < N; n++) {
        const float *gate = x + (size_t)n * 2 * F, *up = gate + F;
        const float *dout_n = dout + (size_t)n * F;
        float *dgate = dx + (size_t)n * 2 * F, *dup = dgate + F, *out_n = out + (size_t)n * F;
        for (int f = 0; f < F; f++) {
            float a = gate[f], e = expf(-a), s = 1.0f / (1.0f + e), d = dout_n[f];
            dgate[f] = d * up[f] * s * (1.0f + a * (1.0f - s));
            dup[f] = d * a * s;
            out_n[f] = a / (1.0f + e) * up[f]; /* cpu_swiglu_forward's expression */
        }
    }
}
