/* cpu_kernels.h: the fp32 reference CPU backend's operations (internal; model code goes through
 * the kernel_ops table from kernels_cpu()). Every function implements the kernels.h entry of the
 * same name without the cpu_ prefix; the semantics are documented there. */
#ifndef CPU_KERNELS_H
#define CPU_KERNELS_H

#include <stddef.h>
#include "kernels/kernels.h"

/* cpu_memory.c */
void *cpu_alloc(size_t bytes);
void cpu_release(void *ptr);
void cpu_zero(void *ptr, size_t bytes);
void cpu_init_normal(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream, float std,
                     uint64_t first, size_t n);
void cpu_fill(void *dst, int fp32_dst, float value, size_t n);
void cpu_copy_to_host(void *host_dst, const void *src, size_t bytes);
void cpu_copy_from_host(void *dst, const void *host_src, size_t bytes);
void cpu_copy(void *dst, const void *src, size_t bytes);
void cpu_synchronize(void);

/* cpu_embedding.c */
void cpu_embedding_forward(float *out, const int *tokens, const float *table, int N, int C,
                           int vocab_start, int vocab_rows);
void cpu_embedding_backward(float *dtable, const float *dout, const int *tokens, int N, int C,
                            int vocab_start, int vocab_rows);
void cpu_position_embedding_forward(float *out, const float *wpe, int B, int T, int C,
                                    int position_start);
void cpu_position_embedding_backward(float *dwpe, const float *dout, int B, int T, int C,
                                     int position_start);

/* cpu_layernorm.c */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                           const float *weight, const float *bias, int N, int C, float eps);
void cpu_layernorm_backward(float *dx, float *dweight, float *dbias, const float *dout,
                            const float *x, const float *weight, const float *mean,
                            const float *rstd, int N, int C);
void cpu_layernorm_backward_from_output(float *dx, float *dweight, float *dbias, const float *dout,
                                        const float *y, const float *weight, const float *bias,
                                        const float *rstd, int N, int C, float eps);
/* 1 / w', w' a norm weight clamped in magnitude to at least eps (Apex's clamp_by_magnitude): the
 * factor that turns a norm's output back into its normalized input (the CUDA kernels take the
 * hardware reciprocal, within an ulp of this one) */
static inline float cpu_norm_weight_reciprocal(float w, float eps) {
    float clamped = w >= 0.0f ? (w < eps ? eps : w) : (w > -eps ? -eps : w);
    return 1.0f / clamped;
}

/* cpu_rmsnorm.c */
void cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *weight, int N, int C,
                         float eps);
void cpu_rmsnorm_backward(float *dx, float *dweight, const float *dout, const float *x,
                          const float *weight, const float *rstd, int N, int C);
void cpu_rmsnorm_backward_from_output(float *dx, float *dweight, const float *dout, const float *y,
                                      const float *weight, const float *rstd, int N, int C, float eps);

/* cpu_rope.c */
void cpu_rope_forward(float *qkv, int B, int T, int H, int G, int D, rope_spec rope);
void cpu_rope_backward(float *dqkv, int B, int T, int H, int G, int D, rope_spec rope);

/* cpu_fp8.c */
void cpu_fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const float *x, size_t n,
                      const float *scale, int format);
void cpu_fp8_dequantize(float *out, const uint8_t *q, size_t n, const float *scale_inv, int format);
void cpu_fp8_amax(float *amax, const float *x, size_t n);
/* cpu_fp8_gemm.c */
void cpu_fp8_gemm(float *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                  const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols);
void cpu_fp8_linear_forward(float *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                            const float *w_scale_inv, const float *bias, const float *residual, int N, int IC, int OC);
void cpu_fp8_transpose(uint8_t *out, const uint8_t *in, int rows, int cols);
void cpu_fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const float *x, int rows,
                                int cols, const float *scale, int format);
/* cpu_moe.c */
void cpu_moe_route_forward(int *expert, float *weight, float *stats, const float *logits, int N,
                           moe_router_spec spec, int with_losses);
void cpu_moe_route_backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                            moe_router_spec spec, float loss_scale);
/* capacity dropping of routed choices (host arrays), as moe_route_forward does it */
void cpu_moe_drop_over_capacity(int *expert, float *weight, int N, moe_router_spec spec);
void cpu_moe_permutation(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E);
void cpu_gather_rows(float *out, const float *x, const int *rows, int M, int C);
void cpu_moe_combine(float *out, const float *y, const int *slot_row, const float *weight, int N, int k, int C);
void cpu_moe_combine_backward(float *dy, float *dweight, const float *dout, const float *y, const int *slot_row,
                              const float *weight, int N, int k, int C);
void cpu_moe_uncombine(float *dx, const float *dxp, const int *slot_row, int N, int k, int C);
void cpu_uniform_jitter(float *out, const float *x, size_t n, float eps, dropout_rng rng);

/* cpu_swiglu.c */
void cpu_swiglu_forward(float *out, const float *x, int N, int F);
void cpu_swiglu_backward(float *dx, const float *x, const float *dout, int N, int F);
void cpu_swiglu_backward_remake(float *dx, float *out, const float *x, const float *dout, int N, int F);

/* cpu_matmul.c */
void cpu_matmul_forward(float *out, const float *x, const float *weight, const float *bias,
                        int N, int IC, int OC);
void cpu_matmul_backward(float *dx, float *dweight, float *dbias, const float *dout,
                         const float *x, const float *weight, int N, int IC, int OC);

/* cpu_attention.c */
size_t cpu_attention_workspace_bytes(int B, int T, int H, int D);
void cpu_attention_forward(float *out, void *workspace, const float *qkv, int B, int T, int H,
                           int G, int D, int head_start, int total_heads, int window_left, dropout_rng rng);
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                            const void *workspace, int B, int T, int H, int G, int D,
                            int head_start, int total_heads, int window_left, dropout_rng rng);

/* cpu_attention_padded.c (BERT: bidirectional, key-padding mask) */
void cpu_attention_padded_forward(float *out, void *workspace, const float *qkv,
                                  const int *key_valid, int B, int T, int H, int G, int D,
                                  int head_start, int total_heads, dropout_rng rng);
void cpu_attention_padded_backward(float *dqkv, const float *dout, const float *qkv,
                                   const int *key_valid, const void *workspace, int B, int T,
                                   int H, int G, int D, int head_start, int total_heads,
                                   dropout_rng rng);
/* (T5's relative position bias: self-attention with an additive score bias [H,T,T], padded or causal) */
void cpu_attention_bias_forward(float *out, void *workspace, const float *qkv, const int *key_valid,
                                const float *bias, int causal, int B, int T, int H, int G, int D,
                                int head_start, int total_heads, dropout_rng rng);
void cpu_attention_bias_backward(float *dqkv, float *dscore_bias, const float *dout, const float *qkv,
                                 const int *key_valid, int causal, const void *workspace, int B, int T,
                                 int H, int G, int D, int head_start, int total_heads, dropout_rng rng);
/* (T5's cross-attention: q[B,Tq,H*D] over kv[B,Tk,H*2D], kernels.h's cross_attention_*) */
size_t cpu_cross_attention_workspace_bytes(int B, int Tq, int Tk, int H);
void cpu_cross_attention_forward(float *out, void *workspace, const float *q, const float *kv,
                                 const int *key_valid, int B, int Tq, int Tk, int H, int D,
                                 int head_start, int total_heads, dropout_rng rng);
void cpu_cross_attention_backward(float *dq, float *dkv, const float *dout, const float *q,
                                  const float *kv, const int *key_valid, const void *workspace,
                                  int B, int Tq, int Tk, int H, int D, int head_start,
                                  int total_heads, dropout_rng rng);

/* cpu_attention_block.c (context parallelism's ring attention) */
void cpu_columns_to_blocks(float *out, const float *in, int rows, int blocks, int width);
void cpu_blocks_to_columns(float *out, const float *in, int rows, int blocks, int width);
void cpu_attention_kv_pack(float *kv, const float *qkv, int rows, int H, int G, int D);
void cpu_attention_kv_unpack(float *dqkv, const float *dkv, int rows, int H, int G, int D);
void cpu_attention_block_forward(float *out, float *lse, const float *qkv, const float *kv, int B, int H, int G,
                                 int D, attention_block_spec spec, dropout_rng rng);
void cpu_attention_merge(float *out, float *lse, const float *block_out, const float *block_lse, int B, int T, int H,
                         int D);
void cpu_attention_block_backward(float *dqkv, float *dkv, const float *dout, const float *qkv, const float *kv,
                                  const float *out, const float *lse, int B, int H, int G, int D,
                                  attention_block_spec spec, dropout_rng rng);

/* cpu_decode_attention.c */
void cpu_decode_attention(float *out, float *k_cache, float *v_cache, const float *qkv, int B,
                          int Tq, int H, int G, int D, int past, int max_len, int window_left);

/* cpu_elementwise.c */
void cpu_gelu_forward(float *out, const float *x, size_t n);
void cpu_gelu_backward(float *dx, const float *x, const float *dout, size_t n);
/* cpu_bert_elementwise.c */
void cpu_gelu_erf_forward(float *out, const float *x, size_t n);
void cpu_gelu_erf_backward(float *dx, const float *x, const float *dout, size_t n);
void cpu_tanh_forward(float *out, const float *x, size_t n);
void cpu_tanh_backward(float *dx, const float *y, const float *dout, size_t n);
void cpu_dropout_forward(float *out, const float *x, size_t n, dropout_rng rng);
void cpu_dropout_backward(float *dx, const float *dout, size_t n, dropout_rng rng);
void cpu_add(float *out, const float *a, const float *b, size_t n);
void cpu_sum_blocks(float *out, const float *own, const float *received, int ranks, int own_rank, size_t n);
void cpu_bias_dropout_add(float *out, const float *residual, const float *x, const float *bias, int N, int C,
                          dropout_rng rng);
void cpu_scale(float *x, float s, size_t n);
void cpu_bias_add(float *out, const float *bias, int N, int C);
void cpu_bias_backward(float *dbias, const float *dout, int N, int C);

/* cpu_cross_entropy.c (and the greedy decoder's row argmax) */
void cpu_logits_argmax(float *row_max, int *argmax, const float *logits, int N, int V, int valid);
void cpu_cross_entropy_max(float *row_max, const float *logits, int N, int V);
void cpu_cross_entropy_sum_exp(float *sum_exp, float *target_logit, const float *logits,
                               const float *row_max, const int *targets, int N, int V,
                               int vocab_start);
void cpu_cross_entropy_loss_grad(float *losses, float *logits, const float *row_max,
                                 const float *sum_exp, const float *target_logit,
                                 const int *targets, int N, int V, int vocab_start,
                                 float grad_scale);

/* cpu_adamw.c */
void cpu_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int step);
double cpu_sum_squares(const float *x, size_t n);
void cpu_sum_squares_pieces(double *sums, const float *x, const tensor_range *pieces, int count);
void cpu_add_float(float *out, const float *a, const float *b, size_t n);
void cpu_adamw_update_ranges(float *master, void *params, const float *grads, float *m, float *v,
                             const tensor_range *ranges, int count, float grad_scale, float lr, float beta1,
                             float beta2, float eps, int step);
double cpu_sum_squares_ranges(const float *x, const tensor_range *ranges, int count);

#endif /* CPU_KERNELS_H */
