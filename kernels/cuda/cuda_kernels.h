/* cuda_kernels.h: the CUDA kernels of the bf16 and fp16 backends, callable from C.
 *
 * These are the GPU counterparts of the operations in kernels/kernels.h, in the mixed precision
 * Megatron trains with: parameters and activations (and activation gradients) in bf16 (or fp16:
 * the cuda_X_fp16 forms at the end),
 * parameter gradients, master weights, Adam moments and per-row statistics in fp32, fp32
 * accumulation everywhere. The backend table (kernels_cuda(), built on these) adapts them to the
 * kernel interface; the tests in tests/cuda_*_test.c check each one against the CPU reference.
 *
 * Conventions are those of kernels/kernels.h (row-major, N = B*T rows, weights [out, in],
 * forward overwrites, parameter gradients accumulate, vocab_start/vocab_rows for
 * vocab-parallel tensors, dropout masks from kernels/philox.h indexed exactly as the CPU
 * backend indexes them). Every pointer is device memory; every kernel runs on the backend's
 * current stream (cuda_stream()); nothing synchronizes unless it says so. No floating-point
 * atomics anywhere: every reduction has a fixed order, so results are bitwise reproducible. */
#ifndef CUDA_KERNELS_H
#define CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bf16 storage: the upper 16 bits of an IEEE fp32 (same bits as __nv_bfloat16) */
typedef uint16_t bf16;
/* fp16 storage: IEEE binary16 (same bits as __half), the compute dtype of --fp16 */
typedef uint16_t fp16;

/* ---- context (cuda_context.cu) ---- */
void cuda_context_init(int device);   /* select the device, create stream and cuBLASLt handle */
void *cuda_stream(void);              /* the stream launches go to now, as a cudaStream_t */
void *cuda_stream_select(void *stream); /* launches go to stream (NULL: the compute stream); the
                                         * one before is returned */
void cuda_synchronize(void);          /* wait for the compute stream */

/* ---- conversions and elementwise (cuda_elementwise.cu) ---- */
void cuda_float_to_bf16(bf16 *out, const float *x, size_t n);        /* round to nearest even */

/* ---- initialization and profiling (cuda_init.cu) ---- */
void cuda_init_normal(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream,
                      float std, uint64_t first, size_t n);
void cuda_fill(void *dst, int fp32_dst, float value, size_t n);
void cuda_profiler_range(int on); /* cudaProfilerStart (1) / cudaProfilerStop (0) */
void cuda_bf16_to_float(float *out, const bf16 *x, size_t n);
void cuda_gelu_forward(bf16 *out, const bf16 *x, size_t n);           /* tanh approximation */
void cuda_gelu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, size_t n);
/* dx = gelu'(x) dout and y = gelu(x) in one pass (dx may be dout) */
void cuda_gelu_backward_recompute(bf16 *dx, bf16 *y, const bf16 *x, const bf16 *dout, size_t n);
void cuda_dropout_forward(bf16 *out, const bf16 *x, size_t n, dropout_rng rng);
void cuda_dropout_backward(bf16 *dx, const bf16 *dout, size_t n, dropout_rng rng);
void cuda_add(bf16 *out, const bf16 *a, const bf16 *b, size_t n);
void cuda_sum_blocks(bf16 *out, const bf16 *own, const bf16 *received, int ranks, int own_rank, size_t n);
/* out[N,C] = residual + dropout(x + bias) in one pass (cuda_bias_dropout_add.cu; bias may be NULL) */
void cuda_bias_dropout_add(bf16 *out, const bf16 *residual, const bf16 *x, const bf16 *bias, int N, int C,
                           dropout_rng rng);
void cuda_scale(bf16 *x, float s, size_t n);
void cuda_bias_add(bf16 *out, const bf16 *bias, int N, int C);
void cuda_bias_backward(float *dbias, const bf16 *dout, int N, int C);  /* dbias += colsum */
/* dx = dropout_backward(dout), dbias += colsum(dx) in bias_backward's passes (the bits of the two) */
void cuda_dropout_bias_backward(bf16 *dx, float *dbias, const bf16 *dout, int N, int C, dropout_rng rng);

/* ---- embeddings (cuda_embedding.cu) ---- */
void cuda_embedding_forward(bf16 *out, const int *tokens, const bf16 *table, int N, int C,
                            int vocab_start, int vocab_rows);
void cuda_embedding_backward(float *dtable, const bf16 *dout, const int *tokens, int N, int C,
                             int vocab_start, int vocab_rows);
void cuda_position_embedding_forward(bf16 *out, const bf16 *wpe, int B, int T, int C,
                                     int position_start);
void cuda_position_embedding_backward(float *dwpe, const bf16 *dout, int B, int T, int C,
                                      int position_start);

/* ---- layer norm (cuda_layernorm.cu) ---- */
void cuda_layernorm_forward(bf16 *out, float *mean, float *rstd, const bf16 *x,
                            const bf16 *weight, const bf16 *bias, int N, int C, float eps);
/* dx += (accumulates, bf16), dweight += and dbias += (fp32) */
void cuda_layernorm_backward(bf16 *dx, float *dweight, float *dbias, const bf16 *dout,
                             const bf16 *x, const bf16 *weight, const float *mean,
                             const float *rstd, int N, int C);
/* the same, and dx_colsum += the column sums of the updated dx as stored (fp32; in the kernel's
 * pass where the row layout allows, else a pass of its own) */
void cuda_layernorm_backward_colsum(bf16 *dx, float *dweight, float *dbias, float *dx_colsum, const bf16 *dout,
                                    const bf16 *x, const bf16 *weight, const float *mean, const float *rstd, int N,
                                    int C);
/* the same from the norm's output y (kernels.h, layernorm_backward_from_output; dx_colsum may be NULL) */
void cuda_layernorm_backward_from_output(bf16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                         const bf16 *dout, const bf16 *y, const bf16 *weight, const bf16 *bias,
                                         const float *rstd, int N, int C, float eps);

/* ---- RMSNorm (cuda_rmsnorm.cu) ---- */
void cuda_rmsnorm_forward(bf16 *out, float *rstd, const bf16 *x, const bf16 *weight, int N, int C,
                          float eps);
/* dx += (accumulates, bf16), dweight += (fp32) */
void cuda_rmsnorm_backward(bf16 *dx, float *dweight, const bf16 *dout, const bf16 *x,
                           const bf16 *weight, const float *rstd, int N, int C);
/* the same from the norm's output y (kernels.h, rmsnorm_backward_from_output) */
void cuda_rmsnorm_backward_from_output(bf16 *dx, float *dweight, const bf16 *dout, const bf16 *y,
                                       const bf16 *weight, const float *rstd, int N, int C, float eps);

/* ---- rotary position embeddings, in place on q and k heads (cuda_rope.cu) ---- */
void cuda_rope_forward(bf16 *qkv, int B, int T, int H, int G, int D, rope_spec rope);
void cuda_rope_backward(bf16 *dqkv, int B, int T, int H, int G, int D, rope_spec rope);

/* ---- grouped GEMMs over row blocks, planned per size bucket (cuda_matmul.cu; kernels.h) ---- */
void cuda_grouped_matmul_forward(bf16 *out, const bf16 *x, const void *const *weight, const int *rows, int groups,
                                 int IC, int OC);
void cuda_grouped_matmul_backward(bf16 *dx, float *const *dweight, const bf16 *dout, const bf16 *x,
                                  const void *const *weight, const int *rows, int groups, int IC, int OC);
/* kernels.h's matmul_rows_vary (one switch for both compute dtypes) */
void cuda_matmul_rows_vary(int on);

/* ---- mixture of experts (cuda_moe.cu): the router in fp32, dispatch in the compute dtype ---- */
void cuda_moe_route_forward(int *expert, float *weight, float *stats, const float *logits, int N,
                            moe_router_spec spec, int with_losses);
void cuda_moe_route_backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                             moe_router_spec spec, float loss_scale);
void cuda_moe_permutation(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E);
void cuda_gather_rows(bf16 *out, const bf16 *x, const int *rows, int M, int C);
void cuda_moe_combine(bf16 *out, const bf16 *y, const int *slot_row, const float *weight, int N, int k, int C);
void cuda_moe_combine_backward(bf16 *dy, float *dweight, const bf16 *dout, const bf16 *y, const int *slot_row,
                               const float *weight, int N, int k, int C);
void cuda_moe_uncombine(bf16 *dx, const bf16 *dxp, const int *slot_row, int N, int k, int C);
void cuda_uniform_jitter(bf16 *out, const bf16 *x, size_t n, float eps, dropout_rng rng);
/* fp8 quantization (cuda_fp8.cu; kernels.h's fp8 ops) */
void cuda_fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const bf16 *x, size_t n, const float *scale,
                       int format);
void cuda_fp8_dequantize(bf16 *out, const uint8_t *q, size_t n, const float *scale_inv, int format);
void cuda_fp8_amax(float *amax, const bf16 *x, size_t n);
/* the fp8 producers (kernels.h's *_fp8 ops: the plain op that also writes the fp8 codes of its output) */
void cuda_layernorm_forward_fp8(bf16 *out, float *mean, float *rstd, const bf16 *x, const bf16 *weight,
                                const bf16 *bias, int N, int C, float eps, const fp8_output *q);
void cuda_rmsnorm_forward_fp8(bf16 *out, float *rstd, const bf16 *x, const bf16 *weight, int N, int C, float eps,
                              const fp8_output *q);
void cuda_gelu_forward_fp8(bf16 *out, const bf16 *x, size_t n, const fp8_output *q);
void cuda_swiglu_forward_fp8(bf16 *out, const bf16 *x, int N, int F, const fp8_output *q);
void cuda_gelu_backward_fp8(bf16 *dx, const bf16 *x, const bf16 *dout, int rows, int cols, const fp8_output *q,
                            uint8_t *codes_t);
void cuda_gelu_forward_fp8_transpose(bf16 *out, const bf16 *x, int rows, int cols, const fp8_output *q,
                                     uint8_t *codes_t);
void cuda_swiglu_backward_fp8(bf16 *dx, const bf16 *x, const bf16 *dout, int N, int F, const fp8_output *q,
                              uint8_t *codes_t);
void cuda_swiglu_forward_fp8_transpose(bf16 *out, const bf16 *x, int N, int F, const fp8_output *q, uint8_t *codes_t);
/* the fp8 MLP backward's elementwise pass in one kernel (cuda_fp8_mlp.cu; kernels.h's mlp_backward_fp8) */
void cuda_mlp_backward_fp8(bf16 *dpre, float *dbias, const bf16 *pre, const bf16 *dact, int rows, int F, int swiglu,
                           const fp8_output *qa, uint8_t *act_t, const fp8_output *qg, uint8_t *grad_t);
void cuda_fp8_gemm(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                   const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols);
void cuda_fp8_transpose(uint8_t *out, const uint8_t *in, int rows, int cols);
void cuda_fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const bf16 *x, int rows,
                                 int cols, const float *scale, int format);
void cuda_fp8_linear_forward(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                             const float *w_scale_inv, const void *bias, const void *residual, int N, int IC, int OC);

/* ---- SwiGLU on [gate | up] rows (cuda_swiglu.cu) ---- */
void cuda_swiglu_forward(bf16 *out, const bf16 *x, int N, int F);
void cuda_swiglu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, int N, int F);
void cuda_swiglu_backward_remake(bf16 *dx, bf16 *out, const bf16 *x, const bf16 *dout, int N, int F);

/* ---- linear layers through cuBLASLt (cuda_matmul.cu) ---- */
void cuda_matmul_set_tuning(int on);  /* GEMM algorithm tuning on first use (kernels.h) */
int cuda_matmul_tuned_problems(void); /* problems whose algorithms tuning has timed so far */
void cuda_matmul_set_sm_count_target(int sms); /* GEMMs planned from now on aim at sms SMs (0: all) */
/* out[N,OC] = x[N,IC] W[OC,IC]^T + bias (bias may be NULL). With gelu_out non-NULL the GeLU
 * epilogue also writes gelu_out = gelu(out) (out keeps the pre-activation for the backward). */
void cuda_matmul_forward(bf16 *out, bf16 *gelu_out, const bf16 *x, const bf16 *weight,
                         const bf16 *bias, int N, int IC, int OC);
/* out[N,OC] = residual + x W^T + bias (bias may be NULL; out aliases neither x nor residual) */
void cuda_matmul_forward_residual(bf16 *out, const bf16 *x, const bf16 *weight, const bf16 *bias,
                                  const bf16 *residual, int N, int IC, int OC);
/* dx[N,IC] = dout W (overwritten, bf16; skipped when NULL); dweight[OC,IC] += dout^T x (fp32;
 * skipped when NULL); dbias[OC] += colsum(dout) (fp32; skipped when NULL). */
void cuda_matmul_backward(bf16 *dx, float *dweight, float *dbias, const bf16 *dout,
                          const bf16 *x, const bf16 *weight, int N, int IC, int OC);
/* dweight[OC,IC] = dout^T x (fp32, beta 0: what dweight held is not read) */
void cuda_matmul_backward_weight_overwrite(float *dweight, const bf16 *dout, const bf16 *x, int N, int IC, int OC);
/* fc2's backward (kernels.h): dpre = (dout W) gelu'(pre) and dweight += dout^T x, where x is
 * scratch that receives gelu(pre) again (x_kept 0) or the kept gelu(pre), read before dpre (which
 * may be x) is written (x_kept 1) */
void cuda_matmul_backward_gelu(bf16 *dpre, float *dweight, const bf16 *dout, bf16 *x,
                               const bf16 *pre, const bf16 *weight, int N, int IC, int OC, int x_kept);

/* ---- causal flash attention (cuda_attention.cu) ---- */
/* qkv[B,T,(H+2G)*D] bf16 (G query groups, kernels.h's layout) -> out[B,T,H,D] bf16; tiles in
 * shared memory with an online softmax, the T x T scores never stored; K/V read in place. The workspace holds the per-row log-sum-exp (fp32 [B,H,T]) the
 * backward needs. Dropout on the probabilities uses the CPU backend's counters. window_left >= 0:
 * sliding-window attention (kernels.h's attention_forward; -1 none), the key tiles outside the
 * window skipped. */
size_t cuda_attention_workspace_bytes(int B, int T, int H, int D);
void cuda_attention_forward(bf16 *out, void *workspace, const bf16 *qkv, int B, int T, int H,
                            int G, int D, int head_start, int total_heads, int window_left, dropout_rng rng);
/* dqkv overwritten; deterministic (bitwise: mma.sync without atomics, dK/dV and dQ in separate
 * passes; Hopper in one pass, dQ's partials added in an order semaphores fix). dbias (may be NULL)
 * += the column sums of dqkv (the qkv bias gradient): Hopper's one pass sums its fp32 results per
 * 16 rows as it writes them, then one fixed-order pass; elsewhere a pass over dqkv. */
void cuda_attention_backward(bf16 *dqkv, float *dbias, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                             const void *workspace, int B, int T, int H, int G, int D,
                             int head_start, int total_heads, int window_left, dropout_rng rng);
/* bidirectional attention with a key-padding mask (BERT's encoder, kernels.h's attention_padded_*;
 * key_valid [B,T] int32, 0 for a padding key): the same kernels with the invisible keys masked
 * instead of the later ones (the mma.sync kernels on every GPU); a query row that sees no key
 * gets out 0 and dq 0; dk and dv of an invisible key are 0; the workspace and dbias as above */
void cuda_attention_padded_forward(bf16 *out, void *workspace, const bf16 *qkv, const int *key_valid, int B, int T,
                                   int H, int G, int D, int head_start, int total_heads, dropout_rng rng);
void cuda_attention_padded_backward(bf16 *dqkv, float *dbias, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                                    const int *key_valid, const void *workspace, int B, int T, int H, int G, int D,
                                    int head_start, int total_heads, dropout_rng rng);
/* cross-attention with a key-padding mask (T5's decoder over the encoder, kernels.h's
 * cross_attention_*): q[B,Tq,H*D] over kv[B,Tk,H*2D] (per head its key then its value), key_valid
 * [B,Tk]; the padded kernels above with the queries and keys in tensors of their own, the dropout
 * mask numbered over Tq x Tk as on the CPU; the workspace holds lse (fp32 [B,H,Tq]); backward
 * overwrites dq and dkv and takes the forward's out */
size_t cuda_cross_attention_workspace_bytes(int B, int Tq, int Tk, int H);
void cuda_cross_attention_forward(bf16 *out, void *workspace, const bf16 *q, const bf16 *kv, const int *key_valid,
                                  int B, int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                  dropout_rng rng);
void cuda_cross_attention_backward(bf16 *dq, bf16 *dkv, const bf16 *dout, const bf16 *q, const bf16 *kv,
                                   const bf16 *out, const int *key_valid, const void *workspace, int B, int Tq, int Tk,
                                   int H, int D, int head_start, int total_heads, dropout_rng rng);

/* ---- BERT's heads (cuda_bert_elementwise.cu): the exact GeLU x Phi(x) and tanh, backward
 * dx = dout f' (dx may alias dout), tanh's from its output y ---- */
void cuda_gelu_erf_forward(bf16 *out, const bf16 *x, size_t n);
void cuda_gelu_erf_backward(bf16 *dx, const bf16 *x, const bf16 *dout, size_t n);
void cuda_tanh_forward(bf16 *out, const bf16 *x, size_t n);
void cuda_tanh_backward(bf16 *dx, const bf16 *y, const bf16 *dout, size_t n);

/* ---- the forward on Hopper's wgmma (cuda_attention_sm90.cu), taken by cuda_attention_forward
 * where it applies: D 64 or 128, 16-byte aligned, an sm_90 GPU running sm_90a code, and
 * MTC_ATTENTION_SM90 is not "0"; with attention dropout (dropout_p > 0, the mma.sync kernels'
 * keep decisions: head b * total_heads + head_start + h) unless MTC_ATTENTION_SM90_DROPOUT is
 * "0". lse is the workspace's fp32 [B,H,T]. */
int cuda_attention_sm90_available(void);
int cuda_attention_sm90_applies(const void *out, const void *qkv, int D, float dropout_p);
void cuda_attention_sm90_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H, int G, int D,
                                 int head_start, int total_heads, int window_left, dropout_rng rng);
/* the backward in one pass, dK, dV and dQ (where the forward applies and dout is 16-byte
 * aligned), after cuda_attention.cu's row kernel wrote lse2 = lse log2(e) and Di ([B*H, Tpad])
 * and zeroed dq_sems ([B*H, Tpad/64] ints, then one more: the D 128 kernel's tile counter);
 * dq_accum is fp32 [B*H, Tpad, D] scratch. head_chunk: query heads per work tile, dividing H / G
 * (cuda_attention_sm90_backward_head_chunk; H / G: whole groups); below H / G (the one-pass kernel)
 * kv_accum is fp32 [B*G*ceil(T/128), H/G/head_chunk, 2*128*D] scratch (a slot per key unit and
 * chunk) and kv_sems B*G*ceil(T/128) zeroed ints
 * (NULL otherwise). With bias_partials (the one-pass kernel only; NULL
 * otherwise) it also writes, for every 16 rows of every sequence, their fp32 sums per column of
 * dqkv: bias_partials[B * ceil(T/128) * 8, (H+2G)*D], row b * ceil(T/128) * 8 + t/16; rows past
 * the sequence's 16-row blocks are left as they were (the caller zeroes them). */
void cuda_attention_sm90_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse2,
                                  const float *di, float *dq_accum, int *dq_sems, float *kv_accum, int *kv_sems,
                                  int head_chunk, float *bias_partials, int B, int T, int Tpad, int H, int G, int D,
                                  int head_start, int total_heads, int window_left, dropout_rng rng);
/* 1 where that backward is the one-pass kernel (D 64 and 128, unless MTC_ATTENTION_FUSED_BACKWARD=0),
 * which needs dq_accum and dq_sems and can sum the bias partials; otherwise it runs the two-pass
 * dK/dV and dQ kernels and takes NULL for all three. Attention dropout (rng.p > 0) runs in the
 * one-pass kernel only (the caller takes the mma.sync backward where this is 0). */
int cuda_attention_sm90_backward_fused(int D);
/* the query rows per step of that one-pass backward: 64 at D 128; at D 64 128 under
 * MTC_SM90_BWD_STEP=128, 64 under MTC_SM90_BWD_STEP=64, else the build's default (128) */
int cuda_attention_sm90_backward_step(int D);
/* the query heads per work tile of that one-pass backward (GQA's head chunks: a group's heads
 * split over work tiles whose dK/dV partials are summed in a fixed order): 1 where H / G > 1,
 * unless MTC_SM90_BWD_HEAD_SPLIT=0 (then, and for H == G, H / G: one tile walks the whole group) */
int cuda_attention_sm90_backward_head_chunk(int H, int G);
/* 1 unless MTC_ATTENTION_SM90_WINDOW=0: sliding-window calls (window_left >= 0 and < T) take the
 * wgmma forward and the one-pass backward above (the two-pass one has no window); 0 keeps them
 * on the mma.sync kernels */
int cuda_attention_sm90_window(void);
/* the two products of one block alone against double references (tests); -1 without sm_90a */
int cuda_attention_sm90_selftest(int D, const float *q, const float *k, const float *v,
                                 double *s_error, double *o_error);

/* ---- attention over a key/value cache (cuda_decode_attention.cu) ---- */
void cuda_decode_attention(bf16 *out, bf16 *k_cache, bf16 *v_cache, const bf16 *qkv, int B, int Tq,
                           int H, int G, int D, int past, int max_len, int window_left);

/* ---- vocab-parallel cross entropy over bf16 logits (cuda_cross_entropy.cu) ----
 * The three passes of kernels.h; the third computes the loss and overwrites the bf16 logits
 * with (softmax - onehot) * grad_scale in the same pass. Statistics are fp32. */
void cuda_cross_entropy_max(float *row_max, const bf16 *logits, int N, int V);
/* the three passes at once for an unsplit vocabulary (vocab_start 0), each row read once */
void cuda_cross_entropy_fused(float *losses, bf16 *logits, float *row_max, float *sum_exp,
                              float *target_logit, const int *targets, int N, int V, float grad_scale);
/* greedy decoding: per row the largest of the first `valid` columns and its column (lowest on ties) */
void cuda_logits_argmax(float *row_max, int *argmax, const bf16 *logits, int N, int V, int valid);
void cuda_cross_entropy_sum_exp(float *sum_exp, float *target_logit, const bf16 *logits,
                                const float *row_max, const int *targets, int N, int V,
                                int vocab_start);
void cuda_cross_entropy_loss_grad(float *losses, bf16 *logits, const float *row_max,
                                  const float *sum_exp, const float *target_logit,
                                  const int *targets, int N, int V, int vocab_start,
                                  float grad_scale);

/* ---- optimizer (cuda_adamw.cu) ---- */
/* AdamW on fp32 masters (as kernels.h), then params_bf16 = bf16(master) in the same pass
 * (params_bf16 may be NULL). */
void cuda_adamw_update(float *master, bf16 *params_bf16, const float *grads, float *m, float *v,
                       size_t n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, int step);
/* sum of squares of fp32 x in a fixed order (block partials, then one ordered pass); blocks
 * until the result is on the host */
double cuda_sum_squares(const float *x, size_t n);
void cuda_adamw_update_ranges(float *master, bf16 *params, const float *grads, float *m, float *v,
                              const tensor_range *ranges, int count, float grad_scale, float lr,
                              float beta1, float beta2, float eps, int step);
double cuda_sum_squares_ranges(const float *x, const tensor_range *ranges, int count);
/* later AdamW launches over ranges take at most sms SMs (one block of 1024 threads on each,
 * looping over the chunks), leaving the rest to a concurrent stream; 0: one block per chunk */
void cuda_adamw_set_sm_limit(int sms);

/* ---- --deterministic-mode's fixed tree (cuda_fixed_tree.cu; kernels.h's add_float and
 * sum_squares_pieces, the CPU's bits) ---- */
void cuda_add_float(float *out, const float *a, const float *b, size_t n);
/* sums is host memory; blocks until it is written */
void cuda_sum_squares_pieces(double *sums, const float *x, const tensor_range *pieces, int count);

/* ---- the same kernels on fp16 (IEEE half) tensors: the fp16 backend (kernels_cuda_fp16(),
 * --fp16). Each cuda_X_fp16 is cuda_X instantiated for __half instead of __nv_bfloat16 (one
 * template per kernel, cuda_kernels_t.cuh); fp32 parts (gradients, masters, statistics) are the
 * same. The Hopper wgmma attention is bf16 only: the fp16 attention always runs the mma.sync
 * kernels. ---- */
void cuda_float_to_fp16(fp16 *out, const float *x, size_t n);        /* round to nearest even */
void cuda_fp16_to_float(float *out, const fp16 *x, size_t n);
void cuda_init_normal_fp16(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream,
                           float std, uint64_t first, size_t n);
void cuda_fill_fp16(void *dst, int fp32_dst, float value, size_t n);
void cuda_gelu_forward_fp16(fp16 *out, const fp16 *x, size_t n);
void cuda_gelu_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, size_t n);
void cuda_gelu_backward_recompute_fp16(fp16 *dx, fp16 *y, const fp16 *x, const fp16 *dout, size_t n);
void cuda_dropout_forward_fp16(fp16 *out, const fp16 *x, size_t n, dropout_rng rng);
void cuda_dropout_backward_fp16(fp16 *dx, const fp16 *dout, size_t n, dropout_rng rng);
void cuda_add_fp16(fp16 *out, const fp16 *a, const fp16 *b, size_t n);
void cuda_sum_blocks_fp16(fp16 *out, const fp16 *own, const fp16 *received, int ranks, int own_rank, size_t n);
void cuda_scale_fp16(fp16 *x, float s, size_t n);
void cuda_bias_add_fp16(fp16 *out, const fp16 *bias, int N, int C);
void cuda_bias_backward_fp16(float *dbias, const fp16 *dout, int N, int C);
void cuda_dropout_bias_backward_fp16(fp16 *dx, float *dbias, const fp16 *dout, int N, int C, dropout_rng rng);
void cuda_embedding_forward_fp16(fp16 *out, const int *tokens, const fp16 *table, int N, int C,
                                 int vocab_start, int vocab_rows);
void cuda_embedding_backward_fp16(float *dtable, const fp16 *dout, const int *tokens, int N, int C,
                                  int vocab_start, int vocab_rows);
void cuda_position_embedding_forward_fp16(fp16 *out, const fp16 *wpe, int B, int T, int C,
                                          int position_start);
void cuda_position_embedding_backward_fp16(float *dwpe, const fp16 *dout, int B, int T, int C,
                                           int position_start);
void cuda_layernorm_forward_fp16(fp16 *out, float *mean, float *rstd, const fp16 *x,
                                 const fp16 *weight, const fp16 *bias, int N, int C, float eps);
void cuda_layernorm_backward_fp16(fp16 *dx, float *dweight, float *dbias, const fp16 *dout,
                                  const fp16 *x, const fp16 *weight, const float *mean,
                                  const float *rstd, int N, int C);
void cuda_layernorm_backward_colsum_fp16(fp16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                         const fp16 *dout, const fp16 *x, const fp16 *weight, const float *mean,
                                         const float *rstd, int N, int C);
void cuda_layernorm_backward_from_output_fp16(fp16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                              const fp16 *dout, const fp16 *y, const fp16 *weight,
                                              const fp16 *bias, const float *rstd, int N, int C, float eps);
void cuda_rmsnorm_forward_fp16(fp16 *out, float *rstd, const fp16 *x, const fp16 *weight, int N,
                               int C, float eps);
void cuda_rmsnorm_backward_fp16(fp16 *dx, float *dweight, const fp16 *dout, const fp16 *x,
                                const fp16 *weight, const float *rstd, int N, int C);
void cuda_rmsnorm_backward_from_output_fp16(fp16 *dx, float *dweight, const fp16 *dout, const fp16 *y,
                                            const fp16 *weight, const float *rstd, int N, int C, float eps);
void cuda_rope_forward_fp16(fp16 *qkv, int B, int T, int H, int G, int D, rope_spec rope);
void cuda_rope_backward_fp16(fp16 *dqkv, int B, int T, int H, int G, int D, rope_spec rope);
void cuda_swiglu_forward_fp16(fp16 *out, const fp16 *x, int N, int F);
void cuda_swiglu_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int N, int F);
void cuda_swiglu_backward_remake_fp16(fp16 *dx, fp16 *out, const fp16 *x, const fp16 *dout, int N, int F);
void cuda_matmul_forward_fp16(fp16 *out, fp16 *gelu_out, const fp16 *x, const fp16 *weight,
                              const fp16 *bias, int N, int IC, int OC);
void cuda_matmul_backward_fp16(fp16 *dx, float *dweight, float *dbias, const fp16 *dout,
                               const fp16 *x, const fp16 *weight, int N, int IC, int OC);
void cuda_matmul_backward_weight_overwrite_fp16(float *dweight, const fp16 *dout, const fp16 *x, int N, int IC,
                                                int OC);
void cuda_matmul_backward_gelu_fp16(fp16 *dpre, float *dweight, const fp16 *dout, fp16 *x,
                                    const fp16 *pre, const fp16 *weight, int N, int IC, int OC, int x_kept);
void cuda_attention_forward_fp16(fp16 *out, void *workspace, const fp16 *qkv, int B, int T, int H,
                                 int G, int D, int head_start, int total_heads, int window_left, dropout_rng rng);
void cuda_attention_backward_fp16(fp16 *dqkv, float *dbias, const fp16 *dout, const fp16 *qkv, const fp16 *out,
                                  const void *workspace, int B, int T, int H, int G, int D,
                                  int head_start, int total_heads, int window_left, dropout_rng rng);
void cuda_attention_padded_forward_fp16(fp16 *out, void *workspace, const fp16 *qkv, const int *key_valid, int B,
                                        int T, int H, int G, int D, int head_start, int total_heads, dropout_rng rng);
void cuda_attention_padded_backward_fp16(fp16 *dqkv, float *dbias, const fp16 *dout, const fp16 *qkv,
                                         const fp16 *out, const int *key_valid, const void *workspace, int B, int T,
                                         int H, int G, int D, int head_start, int total_heads, dropout_rng rng);
void cuda_cross_attention_forward_fp16(fp16 *out, void *workspace, const fp16 *q, const fp16 *kv, const int *key_valid,
                                       int B, int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                       dropout_rng rng);
void cuda_cross_attention_backward_fp16(fp16 *dq, fp16 *dkv, const fp16 *dout, const fp16 *q, const fp16 *kv,
                                        const fp16 *out, const int *key_valid, const void *workspace, int B, int Tq,
                                        int Tk, int H, int D, int head_start, int total_heads, dropout_rng rng);
void cuda_gelu_erf_forward_fp16(fp16 *out, const fp16 *x, size_t n);
void cuda_gelu_erf_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, size_t n);
void cuda_tanh_forward_fp16(fp16 *out, const fp16 *x, size_t n);
void cuda_tanh_backward_fp16(fp16 *dx, const fp16 *y, const fp16 *dout, size_t n);
void cuda_decode_attention_fp16(fp16 *out, fp16 *k_cache, fp16 *v_cache, const fp16 *qkv, int B,
                                int Tq, int H, int G, int D, int past, int max_len, int window_left);
void cuda_cross_entropy_max_fp16(float *row_max, const fp16 *logits, int N, int V);
void cuda_logits_argmax_fp16(float *row_max, int *argmax, const fp16 *logits, int N, int V,
                             int valid);
void cuda_cross_entropy_sum_exp_fp16(float *sum_exp, float *target_logit, const fp16 *logits,
                                     const float *row_max, const int *targets, int N, int V,
                                     int vocab_start);
void cuda_cross_entropy_loss_grad_fp16(float *losses, fp16 *logits, const float *row_max,
                                       const float *sum_exp, const float *target_logit,
                                       const int *targets, int N, int V, int vocab_start,
                                       float grad_scale);
void cuda_bias_dropout_add_fp16(fp16 *out, const fp16 *residual, const fp16 *x, const fp16 *bias, int N,
                                int C, dropout_rng rng);
void cuda_matmul_forward_residual_fp16(fp16 *out, const fp16 *x, const fp16 *weight, const fp16 *bias,
                                       const fp16 *residual, int N, int IC, int OC);
void cuda_cross_entropy_fused_fp16(float *losses, fp16 *logits, float *row_max, float *sum_exp,
                                   float *target_logit, const int *targets, int N, int V,
                                   float grad_scale);
void cuda_adamw_update_fp16(float *master, fp16 *params, const float *grads, float *m, float *v,
                            size_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, int step);
void cuda_adamw_update_ranges_fp16(float *master, fp16 *params, const float *grads, float *m,
                                   float *v, const tensor_range *ranges, int count,
                                   float grad_scale, float lr, float beta1, float beta2, float eps,
                                   int step);

void cuda_gather_rows_fp16(fp16 *out, const fp16 *x, const int *rows, int M, int C);
void cuda_moe_combine_fp16(fp16 *out, const fp16 *y, const int *slot_row, const float *weight, int N, int k, int C);
void cuda_moe_combine_backward_fp16(fp16 *dy, float *dweight, const fp16 *dout, const fp16 *y, const int *slot_row,
                                    const float *weight, int N, int k, int C);
void cuda_moe_uncombine_fp16(fp16 *dx, const fp16 *dxp, const int *slot_row, int N, int k, int C);
void cuda_uniform_jitter_fp16(fp16 *out, const fp16 *x, size_t n, float eps, dropout_rng rng);
void cuda_fp8_quantize_fp16(uint8_t *out, float *amax, float *scale_inv, const fp16 *x, size_t n, const float *scale,
                            int format);
void cuda_fp8_dequantize_fp16(fp16 *out, const uint8_t *q, size_t n, const float *scale_inv, int format);
void cuda_fp8_amax_fp16(float *amax, const fp16 *x, size_t n);
void cuda_layernorm_forward_fp8_fp16(fp16 *out, float *mean, float *rstd, const fp16 *x, const fp16 *weight,
                                     const fp16 *bias, int N, int C, float eps, const fp8_output *q);
void cuda_rmsnorm_forward_fp8_fp16(fp16 *out, float *rstd, const fp16 *x, const fp16 *weight, int N, int C,
                                   float eps, const fp8_output *q);
void cuda_gelu_forward_fp8_fp16(fp16 *out, const fp16 *x, size_t n, const fp8_output *q);
void cuda_swiglu_forward_fp8_fp16(fp16 *out, const fp16 *x, int N, int F, const fp8_output *q);
void cuda_gelu_backward_fp8_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int rows, int cols, const fp8_output *q,
                                 uint8_t *codes_t);
void cuda_gelu_forward_fp8_transpose_fp16(fp16 *out, const fp16 *x, int rows, int cols, const fp8_output *q,
                                          uint8_t *codes_t);
void cuda_swiglu_backward_fp8_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int N, int F, const fp8_output *q,
                                   uint8_t *codes_t);
void cuda_swiglu_forward_fp8_transpose_fp16(fp16 *out, const fp16 *x, int N, int F, const fp8_output *q,
                                            uint8_t *codes_t);
void cuda_mlp_backward_fp8_fp16(fp16 *dpre, float *dbias, const fp16 *pre, const fp16 *dact, int rows, int F,
                                int swiglu, const fp8_output *qa, uint8_t *act_t, const fp8_output *qg,
                                uint8_t *grad_t);
void cuda_fp8_quantize_transpose_fp16(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const fp16 *x,
                                      int rows, int cols, const float *scale, int format);
void cuda_fp8_gemm_fp16(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                        const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols);
void cuda_fp8_linear_forward_fp16(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                                  const float *w_scale_inv, const void *bias, const void *residual, int N, int IC,
                                  int OC);
void cuda_grouped_matmul_forward_fp16(fp16 *out, const fp16 *x, const void *const *weight, const int *rows,
                                      int groups, int IC, int OC);
void cuda_grouped_matmul_backward_fp16(fp16 *dx, float *const *dweight, const fp16 *dout, const fp16 *x,
                                       const void *const *weight, const int *rows, int groups, int IC, int OC);

#ifdef __cplusplus
}
#endif

#endif /* CUDA_KERNELS_H */
