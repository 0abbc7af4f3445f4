/* cpu_backend.c: the CPU reference backend's operation table (fp32, single-threaded C plus
 * OpenBLAS sgemm). Each entry is defined in the cpu_*.c file of its group. */
#include "cpu_kernels.h"

static const kernel_ops cpu_ops = {
    .name = "cpu",
    .host_memory = 1,

    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy_to_host = cpu_copy_to_host,
    .copy_from_host = cpu_copy_from_host,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,

    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .position_embedding_forward = cpu_position_embedding_forward,
    .position_embedding_backward = cpu_position_embedding_backward,

    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,

    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,

    .attention_workspace_bytes = cpu_attention_workspace_bytes,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,

    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .add = cpu_add,
    .scale = cpu_scale,
    .bias_add = cpu_bias_add,
    .bias_backward = cpu_bias_backward,

    .cross_entropy_max = cpu_cross_entropy_max,
    .cross_entropy_sum_exp = cpu_cross_entropy_sum_exp,
    .cross_entropy_loss_grad = cpu_cross_entropy_loss_grad,

    .adamw_update = cpu_adamw_update,
    .sum_squares = cpu_sum_squares,
};

const kernel_ops *kernels_cpu(void) { return &cpu_ops; }
