/* mlp_gelu.h: the GeLU of a GeLU MLP (dense, shared expert, experts; not SwiGLU), in the form
 * Megatron-Core's MLP computes it. With the bias-GeLU fusion (bias_activation_fusion, Megatron's
 * default when the linear layers have biases) it is bias_gelu_impl, GeLU's tanh approximation:
 * the backends' gelu_forward/gelu_backward and the fused GEMM epilogues (matmul_forward's
 * gelu_out, matmul_backward_gelu). Without it (--no-bias-gelu-fusion, or --disable-bias-linear,
 * which switches the fusion off) it is torch's F.gelu, exact: x Phi(x) with erf
 * (gpt_config.gelu_erf). The exact form runs the plain GEMM and then the elementwise erf GeLU
 * the BERT LM head uses (gelu_erf_forward/backward), so the tanh path is the fused one unchanged. */
#ifndef APP_MODEL_MLP_GELU_H
#define APP_MODEL_MLP_GELU_H

#include "kernels/kernels.h"

#include <stddef.h>

/* out = gelu(x) over n elements, in the MLP's form */
static inline void mlp_gelu_forward(const kernel_ops *ops, int erf, void *out, const void *x, size_t n) {
    if (erf) ops->gelu_erf_forward(out, x, n);
    else ops->gelu_forward(out, x, n);
}

/* dx = dout * gelu'(x) (overwritten; dx may be dout) */
static inline void mlp_gelu_backward(const kernel_ops *ops, int erf, void *dx, const void *x, const void *dout, size_t n) {
    if (erf) ops->gelu_erf_backward(dx, x, dout, n);
    else ops->gelu_backward(dx, x, dout, n);
}

/* kernel_ops.matmul_forward with gelu_out = gelu(out) in the MLP's form (gelu_out NULL: the
 * plain GEMM either way) */
static inline void mlp_matmul_gelu_forward(const kernel_ops *ops, int erf, void *out, void *gelu_out, const void *x,
                                           const void *weight, const void *bias, int N, int IC, int OC) {
    if (!gelu_out || !erf) {
        ops->matmul_forward(out, gelu_out, x, weight, bias, N, IC, OC);
        return;
    }
    ops->matmul_forward(out, NULL, x, weight, bias, N, IC, OC);
    ops->gelu_erf_forward(gelu_out, out, (size_t)N * (size_t)OC);
}

#endif
