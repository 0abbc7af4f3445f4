/* cuda_fp16_map.h: turns a bf16 GPU kernel test into the same test of the fp16 kernels. The
 * -DTEST_FP16 builds of cuda_kernels_test.c, cuda_attention_test.c and
 * cuda_decode_attention_test.c (tests/local.mk: the *_fp16_test programs) include it through
 * cuda_test_util.h: every bf16 entry point of cuda_kernels.h becomes its cuda_X_fp16 twin,
 * kernels_cuda() becomes kernels_cuda_fp16(), and the host rounding the tests apply to their
 * inputs and outputs (host_to_bf16, host_from_bf16) becomes IEEE half's. Both storage types are
 * uint16_t, so the tests' bf16 buffers hold fp16 bits unchanged. ACT_TOL is the relative error
 * allowed to 16-bit outputs: fp16 keeps 11 significant bits where bf16 keeps 8. */
#ifndef CUDA_FP16_MAP_H
#define CUDA_FP16_MAP_H

#define TEST_DTYPE_NAME "fp16"
#define TEST_ACT_DTYPE KERNEL_FP16
#define ACT_TOL 2e-3

#define host_to_bf16 host_to_fp16
#define host_from_bf16 host_from_fp16

#define kernels_cuda kernels_cuda_fp16
#define cuda_float_to_bf16 cuda_float_to_fp16
#define cuda_bf16_to_float cuda_fp16_to_float
#define cuda_init_normal cuda_init_normal_fp16
#define cuda_fill cuda_fill_fp16
#define cuda_gelu_forward cuda_gelu_forward_fp16
#define cuda_gelu_backward cuda_gelu_backward_fp16
#define cuda_gelu_backward_recompute cuda_gelu_backward_recompute_fp16
#define cuda_dropout_forward cuda_dropout_forward_fp16
#define cuda_dropout_backward cuda_dropout_backward_fp16
#define cuda_add cuda_add_fp16
#define cuda_scale cuda_scale_fp16
#define cuda_bias_add cuda_bias_add_fp16
#define cuda_bias_backward cuda_bias_backward_fp16
#define cuda_dropout_bias_backward cuda_dropout_bias_backward_fp16
#define cuda_embedding_forward cuda_embedding_forward_fp16
#define cuda_embedding_backward cuda_embedding_backward_fp16
#define cuda_position_embedding_forward cuda_position_embedding_forward_fp16
#define cuda_position_embedding_backward cuda_position_embedding_backward_fp16
#define cuda_layernorm_forward cuda_layernorm_forward_fp16
#define cuda_layernorm_backward cuda_layernorm_backward_fp16
#define cuda_rmsnorm_forward cuda_rmsnorm_forward_fp16
#define cuda_rmsnorm_backward cuda_rmsnorm_backward_fp16
#define cuda_rope_forward cuda_rope_forward_fp16
#define cuda_rope_backward cuda_rope_backward_fp16
#define cuda_swiglu_forward cuda_swiglu_forward_fp16
#define cuda_swiglu_backward cuda_swiglu_backward_fp16
#define cuda_swiglu_backward_remake cuda_swiglu_backward_remake_fp16
#define cuda_matmul_forward cuda_matmul_forward_fp16
#define cuda_matmul_backward cuda_matmul_backward_fp16
#define cuda_matmul_backward_gelu cuda_matmul_backward_gelu_fp16
#define cuda_sum_blocks cuda_sum_blocks_fp16
#define cuda_layernorm_backward_colsum cuda_layernorm_backward_colsum_fp16
#define cuda_layernorm_backward_from_output cuda_layernorm_backward_from_output_fp16
#define cuda_rmsnorm_backward_from_output cuda_rmsnorm_backward_from_output_fp16
#define cuda_matmul_backward_weight_overwrite cuda_matmul_backward_weight_overwrite_fp16
#define cuda_attention_forward cuda_attention_forward_fp16
#define cuda_attention_backward cuda_attention_backward_fp16
#define cuda_cross_attention_forward cuda_cross_attention_forward_fp16
#define cuda_cross_attention_backward cuda_cross_attention_backward_fp16
#define cuda_decode_attention cuda_decode_attention_fp16
#define cuda_cross_entropy_max cuda_cross_entropy_max_fp16
#define cuda_logits_argmax cuda_logits_argmax_fp16
#define cuda_cross_entropy_sum_exp cuda_cross_entropy_sum_exp_fp16
#define cuda_cross_entropy_loss_grad cuda_cross_entropy_loss_grad_fp16
#define cuda_bias_dropout_add cuda_bias_dropout_add_fp16
#define cuda_matmul_forward_residual cuda_matmul_forward_residual_fp16
#define cuda_cross_entropy_fused cuda_cross_entropy_fused_fp16
#define cuda_adamw_update cuda_adamw_update_fp16
#define cuda_adamw_update_ranges cuda_adamw_update_ranges_fp16

#endif /* CUDA_FP16_MAP_H */
