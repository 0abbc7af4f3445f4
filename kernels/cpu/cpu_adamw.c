/* cpu_adamw.c: fused AdamW step (Loshchilov & Hutter; PyTorch/Megatron form) and the sum of
 * squares used for the global gradient norm (and --deterministic-mode's: sum_squares_pieces'
 * fixed tree, kernels.h).
 *   m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g^2
 *   m_hat = m / (1 - b1^step),  v_hat = v / (1 - b2^step)          (bias correction, step >= 1)
 *   p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)              (decoupled weight decay) */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* grad_scale multiplies each gradient first (clipping); 1 leaves it as it is */
static void adamw_scaled(float *params, const float *grads, float grad_scale, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    for (size_t i = 0; i < n; i++) {
        float g = grad_scale == 1.0f ? grads[i] : grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float m_hat = mi / bc1;
        float v_hat = vi / bc2;
        params[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * params[i]);
    }
}

void cpu_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int step) {
    adamw_scaled(params, grads, 1.0f, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
}

/* the masters are the fp32 params (master NULL) or their own buffer; params then get a copy */
void cpu_adamw_update_ranges(float *master, void *params, const float *grads, float *m, float *v,
                             const tensor_range *ranges, int count, float grad_scale, float lr, float beta1,
                             float beta2, float eps, int step) {
    for (int r = 0; r < count; r++) {
        const tensor_range *t = &ranges[r];
        float *p = master ? master + t->state_offset : (float *)params + t->offset;
        adamw_scaled(p, grads + t->offset, grad_scale, m + t->state_offset, v + t->state_offset, t->length, lr,
                     beta1, beta2, eps, t->weight_decay, step);
        if (master) memcpy((float *)params + t->offset, p, sizeof(float) * t->length);
    }
}

double cpu_sum_squares_ranges(const float *x, const tensor_range *ranges, int count) {
    double sum = 0.0;
    for (int r = 0; r < count; r++) sum += cpu_sum_squares(x + ranges[r].offset, ranges[r].length);
    return sum;
}

double cpu_sum_squares(const float *x, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    return sum;
}

/* one chunk of kernel_ops.sum_squares_pieces' tree: the lanes' sequential sums, then halving */
static double sum_squares_tree_chunk(const float *x, size_t n) {
    double lanes[SUM_SQUARES_TREE_LANES];
    for (size_t t = 0; t < SUM_SQUARES_TREE_LANES; t++) {
        double acc = 0.0;
        for (size_t i = t; i < n; i += SUM_SQUARES_TREE_LANES) acc += (double)x[i] * (double)x[i];
        lanes[t] = acc;
    }
    for (size_t s = SUM_SQUARES_TREE_LANES / 2; s >= 1; s /= 2)
        for (size_t t = 0; t < s; t++) lanes[t] = lanes[t] + lanes[t + s];
    return lanes[0];
}

void cpu_sum_squares_pieces(double *sums, const float *x, const tensor_range *pieces, int count) {
    for (int p = 0; p < count; p++) {
        const float *xs = x + pieces[p].offset;
        size_t n = pieces[p].length;
        double total = 0.0;
        for (size_t at = 0; at < n; at += SUM_SQUARES_TREE_CHUNK)
            total += sum_squares_tree_chunk(xs + at, n - at < SUM_SQUARES_TREE_CHUNK ? n - at : SUM_SQUARES_TREE_CHUNK);
        sums[p] = total;
    }
}

void cpu_add_float(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
