/* cpu_backend.c: the CPU reference backend's operation table (fp32, single-threaded C plus
 * OpenBLAS sgemm). Each operation is defined with fp32 pointers in the cpu_*.c file of its
 * group; the adapters here give them the table's compute-dtype (`void *`) signatures. On this
 * backend the compute dtype is fp32, so parameters are their own master weights. */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

static void copy_to_host_float(float *host_dst, const void *src, size_t n) {
    cpu_copy_to_host(host_dst, src, sizeof(float) * n);
}
static void copy_from_host_float(void *dst, const float *host_src, size_t n) {
    cpu_copy_from_host(dst, host_src, sizeof(float) * n);
}
static void float_to_act(void *dst, const float *src, size_t n) {
    if (dst != (const void *)src) cpu_copy(dst, src, sizeof(float) * n);
}
static void act_to_float(float *dst, const void *src, size_t n) {
    if ((const void *)dst != src) cpu_copy(dst, src, sizeof(float) * n);
}

static void embedding_forward(void *out, const int *tokens, const void *table, int N, int C,
                              int vocab_start, int vocab_rows) {
    cpu_embedding_forward(out, tokens, table, N, C, vocab_start, vocab_rows);
}
static void embedding_backward(float *dtable, const void *dout, const int *tokens, int N, int C,
                               int vocab_start, int vocab_rows) {
    cpu_embedding_backward(dtable, dout, tokens, N, C, vocab_start, vocab_rows);
}
static void position_embedding_forward(void *out, const void *wpe, int B, int T, int C,
                                       int position_start) {
    cpu_position_embedding_forward(out, wpe, B, T, C, position_start);
}
static void position_embedding_backward(float *dwpe, const void *dout, int B, int T, int C,
                                        int position_start) {
    cpu_position_embedding_backward(dwpe, dout, B, T, C, position_start);
}

static void layernorm_forward(void *out, float *mean, float *rstd, const void *x,
                              const void *weight, const void *bias, int N, int C, float eps) {
    cpu_layernorm_forward(out, mean, rstd, x, weight, bias, N, C, eps);
}
static void layernorm_backward(void *dx, float *dweight, float *dbias, float *dx_colsum, const void *dout,
                               const void *x, const void *weight, const float *mean,
                               const float *rstd, int N, int C) {
    cpu_layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, N, C);
    if (dx_colsum) cpu_bias_backward(dx_colsum, dx, N, C);
}
static void layernorm_backward_from_output(void *dx, float *dweight, float *dbias, float *dx_colsum,
                                           const void *dout, const void *y, const void *weight, const void *bias,
                                           const float *rstd, int N, int C, float eps) {
    cpu_layernorm_backward_from_output(dx, dweight, dbias, dout, y, weight, bias, rstd, N, C, eps);
    if (dx_colsum) cpu_bias_backward(dx_colsum, dx, N, C);
}

/* the GeLU "epilogue" is a separate pass here */
static void matmul_forward(void *out, void *gelu_out, const void *x, const void *weight,
                           const void *bias, int N, int IC, int OC) {
    cpu_matmul_forward(out, x, weight, bias, N, IC, OC);
    if (gelu_out) cpu_gelu_forward(gelu_out, out, (size_t)N * (size_t)OC);
}
static void matmul_forward_residual(void *out, const void *x, const void *weight, const void *bias,
                                    const void *residual, int N, int IC, int OC) {
    cpu_matmul_forward(out, x, weight, NULL, N, IC, OC);
    if (bias) cpu_bias_add(out, bias, N, OC);
    cpu_add(out, residual, out, (size_t)N * (size_t)OC);
}
static void matmul_backward(void *dx, float *dweight, float *dbias, const void *dout,
                            const void *x, const void *weight, int N, int IC, int OC) {
    cpu_matmul_backward(dx, dweight, dbias, dout, x, weight, N, IC, OC);
}

static void grouped_matmul_forward(void *out, const void *x, const void *const *weight, const int *rows, int groups,
                                   int IC, int OC) {
    for (int g = 0; g < groups; g++) {
        int n = rows[g + 1] - rows[g];
        if (n > 0)
            cpu_matmul_forward((float *)out + (size_t)rows[g] * OC, (const float *)x + (size_t)rows[g] * IC, weight[g],
                               NULL, n, IC, OC);
    }
}
static void grouped_matmul_backward(void *dx, float *const *dweight, const void *dout, const void *x,
                                    const void *const *weight, const int *rows, int groups, int IC, int OC) {
    for (int g = 0; g < groups; g++) {
        int n = rows[g + 1] - rows[g];
        if (n > 0)
            cpu_matmul_backward(dx ? (float *)dx + (size_t)rows[g] * IC : NULL, dweight ? dweight[g] : NULL, NULL,
                                (const float *)dout + (size_t)rows[g] * OC, (const float *)x + (size_t)rows[g] * IC,
                                weight[g], n, IC, OC);
    }
}

static void matmul_backward_weight_overwrite(float *dweight, const void *dout, const void *x, int N, int IC,
                                             int OC) {
    if (OC > 0 && IC > 0) memset(dweight, 0, sizeof(float) * (size_t)OC * (size_t)IC);
    cpu_matmul_backward(NULL, dweight, NULL, dout, x, NULL, N, IC, OC);
}

static void rmsnorm_forward(void *out, float *rstd, const void *x, const void *weight, int N, int C,
                            float eps) {
    cpu_rmsnorm_forward(out, rstd, x, weight, N, C, eps);
}
static void rmsnorm_backward(void *dx, float *dweight, const void *dout, const void *x,
                             const void *weight, const float *rstd, int N, int C) {
    cpu_rmsnorm_backward(dx, dweight, dout, x, weight, rstd, N, C);
}
static void rmsnorm_backward_from_output(void *dx, float *dweight, const void *dout, const void *y,
                                         const void *weight, const float *rstd, int N, int C, float eps) {
    cpu_rmsnorm_backward_from_output(dx, dweight, dout, y, weight, rstd, N, C, eps);
}
static void rope_forward(void *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    cpu_rope_forward(qkv, B, T, H, G, D, rope);
}
static void rope_backward(void *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    cpu_rope_backward(dqkv, B, T, H, G, D, rope);
}
static void swiglu_forward(void *out, const void *x, int N, int F) { cpu_swiglu_forward(out, x, N, F); }
static void moe_permutation(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E) {
    cpu_moe_permutation(rows, slot_row, row_token, expert, M, k, E);
}
static void gather_rows(void *out, const void *x, const int *rows, int M, int C) { cpu_gather_rows(out, x, rows, M, C); }
static void fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const void *x, size_t n,
                         const float *scale, int format) {
    cpu_fp8_quantize(out, amax, scale_inv, x, n, scale, format);
}
static void fp8_dequantize(void *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    cpu_fp8_dequantize(out, q, n, scale_inv, format);
}
static void fp8_amax(float *amax, const void *x, size_t n) { cpu_fp8_amax(amax, x, n); }
static void fp8_gemm(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                     const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols) {
    cpu_fp8_gemm(out, accumulate, x, x_format, x_scale_inv, w, w_format, w_scale_inv, rows, K, cols);
}
static void fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const void *x,
                                   int rows, int cols, const float *scale, int format) {
    cpu_fp8_quantize_transpose(out, out_t, amax, scale_inv, x, rows, cols, scale, format);
}
static void fp8_linear_forward(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                               const float *w_scale_inv, const void *bias, const void *residual, int N, int IC,
                               int OC) {
    cpu_fp8_linear_forward(out, x, x_scale_inv, w, w_scale_inv, bias, residual, N, IC, OC);
}
static void moe_combine(void *out, const void *y, const int *slot_row, const float *weight, int N, int k, int C) {
    cpu_moe_combine(out, y, slot_row, weight, N, k, C);
}
static void moe_combine_backward(void *dy, float *dweight, const void *dout, const void *y, const int *slot_row,
                                 const float *weight, int N, int k, int C) {
    cpu_moe_combine_backward(dy, dweight, dout, y, slot_row, weight, N, k, C);
}
static void moe_uncombine(void *dx, const void *dxp, const int *slot_row, int N, int k, int C) {
    cpu_moe_uncombine(dx, dxp, slot_row, N, k, C);
}
static void uniform_jitter(void *out, const void *x, size_t n, float eps, dropout_rng rng) {
    cpu_uniform_jitter(out, x, n, eps, rng);
}
static void swiglu_backward(void *dx, const void *x, const void *dout, int N, int F) {
    cpu_swiglu_backward(dx, x, dout, N, F);
}
static void swiglu_backward_remake(void *dx, void *out, const void *x, const void *dout, int N, int F) {
    cpu_swiglu_backward_remake(dx, out, x, dout, N, F);
}

static void attention_forward(void *out, void *workspace, const void *qkv, int B, int T, int H,
                              int G, int D, int head_start, int total_heads, int window_left, dropout_rng rng) {
    cpu_attention_forward(out, workspace, qkv, B, T, H, G, D, head_start, total_heads, window_left, rng);
}
/* the CPU backward keeps the probabilities in its workspace and does not need out; the qkv bias
 * gradient is a pass over dqkv */
static void attention_backward(void *dqkv, float *dbias, const void *dout, const void *qkv, const void *out,
                               const void *workspace, int B, int T, int H, int G, int D,
                               int head_start, int total_heads, int window_left, dropout_rng rng) {
    (void)out;
    cpu_attention_backward(dqkv, dout, qkv, workspace, B, T, H, G, D, head_start, total_heads, window_left, rng);
    if (dbias) cpu_bias_backward(dbias, dqkv, B * T, (H + 2 * G) * D);
}

static void columns_to_blocks(void *out, const void *in, int rows, int blocks, int width) {
    cpu_columns_to_blocks(out, in, rows, blocks, width);
}
static void blocks_to_columns(void *out, const void *in, int rows, int blocks, int width) {
    cpu_blocks_to_columns(out, in, rows, blocks, width);
}
static void attention_padded_forward(void *out, void *workspace, const void *qkv, const int *key_valid,
                                     int B, int T, int H, int G, int D, int head_start, int total_heads,
                                     dropout_rng rng) {
    cpu_attention_padded_forward(out, workspace, qkv, key_valid, B, T, H, G, D, head_start, total_heads, rng);
}
/* as attention_backward: out is not needed, the bias gradient is a pass over dqkv */
static void attention_padded_backward(void *dqkv, float *dbias, const void *dout, const void *qkv, const void *out,
                                      const int *key_valid, const void *workspace, int B, int T, int H, int G,
                                      int D, int head_start, int total_heads, dropout_rng rng) {
    (void)out;
    cpu_attention_padded_backward(dqkv, dout, qkv, key_valid, workspace, B, T, H, G, D, head_start,
                                  total_heads, rng);
    if (dbias) cpu_bias_backward(dbias, dqkv, B * T, (H + 2 * G) * D);
}
static void attention_bias_forward(void *out, void *workspace, const void *qkv, const int *key_valid,
                                   const float *bias, int causal, int B, int T, int H, int G, int D,
                                   int head_start, int total_heads, dropout_rng rng) {
    cpu_attention_bias_forward(out, workspace, qkv, key_valid, bias, causal, B, T, H, G, D, head_start, total_heads,
                               rng);
}
static void attention_bias_backward(void *dqkv, float *dbias, float *dscore_bias, const void *dout,
                                    const void *qkv, const int *key_valid, int causal, const void *workspace,
                                    int B, int T, int H, int G, int D, int head_start, int total_heads,
                                    dropout_rng rng) {
    cpu_attention_bias_backward(dqkv, dscore_bias, dout, qkv, key_valid, causal, workspace, B, T, H, G, D,
                                head_start, total_heads, rng);
    if (dbias) cpu_bias_backward(dbias, dqkv, B * T, (H + 2 * G) * D);
}
static void cross_attention_forward(void *out, void *workspace, const void *q, const void *kv, const int *key_valid,
                                    int B, int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                    dropout_rng rng) {
    cpu_cross_attention_forward(out, workspace, q, kv, key_valid, B, Tq, Tk, H, D, head_start, total_heads, rng);
}
static void cross_attention_backward(void *dq, void *dkv, const void *dout, const void *q, const void *kv,
                                     const void *out, const int *key_valid, const void *workspace, int B, int Tq,
                                     int Tk, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    (void)out; /* the workspace keeps the probabilities */
    cpu_cross_attention_backward(dq, dkv, dout, q, kv, key_valid, workspace, B, Tq, Tk, H, D, head_start,
                                 total_heads, rng);
}
static void attention_kv_pack(void *kv, const void *qkv, int rows, int H, int G, int D) {
    cpu_attention_kv_pack(kv, qkv, rows, H, G, D);
}
static void attention_kv_unpack(void *dqkv, const void *dkv, int rows, int H, int G, int D) {
    cpu_attention_kv_unpack(dqkv, dkv, rows, H, G, D);
}
static void attention_block_forward(void *out, float *lse, const void *qkv, const void *kv, int B, int H, int G, int D,
                                    attention_block_spec spec, dropout_rng rng) {
    cpu_attention_block_forward(out, lse, qkv, kv, B, H, G, D, spec, rng);
}
static void attention_merge(void *out, float *lse, const void *block_out, const float *block_lse, int B, int T, int H,
                            int D) {
    cpu_attention_merge(out, lse, block_out, block_lse, B, T, H, D);
}
static void attention_block_backward(void *dqkv, void *dkv, const void *dout, const void *qkv, const void *kv,
                                     const void *out, const float *lse, int B, int H, int G, int D,
                                     attention_block_spec spec, dropout_rng rng) {
    cpu_attention_block_backward(dqkv, dkv, dout, qkv, kv, out, lse, B, H, G, D, spec, rng);
}

static void decode_attention(void *out, void *k_cache, void *v_cache, const void *qkv, int B,
                             int Tq, int H, int G, int D, int past, int max_len, int window_left) {
    cpu_decode_attention(out, k_cache, v_cache, qkv, B, Tq, H, G, D, past, max_len, window_left);
}

static void gelu_forward(void *out, const void *x, size_t n) { cpu_gelu_forward(out, x, n); }
static void matmul_backward_gelu(void *dpre, float *dweight, const void *dout, void *x, const void *pre,
                                 const void *weight, int N, int IC, int OC, int x_kept) {
    if (x_kept) cpu_matmul_backward(NULL, dweight, NULL, dout, x, weight, N, IC, OC);  /* before dpre overwrites x */
    cpu_matmul_backward(dpre, NULL, NULL, dout, NULL, weight, N, IC, OC);
    cpu_gelu_backward(dpre, pre, dpre, (size_t)N * (size_t)IC);
    if (x_kept) return;
    cpu_gelu_forward(x, pre, (size_t)N * (size_t)IC);  /* the forward's value, bit for bit */
    cpu_matmul_backward(NULL, dweight, NULL, dout, x, weight, N, IC, OC);
}
static void gelu_erf_forward(void *out, const void *x, size_t n) { cpu_gelu_erf_forward(out, x, n); }
static void gelu_erf_backward(void *dx, const void *x, const void *dout, size_t n) {
    cpu_gelu_erf_backward(dx, x, dout, n);
}
static void tanh_forward(void *out, const void *x, size_t n) { cpu_tanh_forward(out, x, n); }
static void tanh_backward(void *dx, const void *y, const void *dout, size_t n) { cpu_tanh_backward(dx, y, dout, n); }
static void gelu_backward(void *dx, const void *x, const void *dout, size_t n) {
    cpu_gelu_backward(dx, x, dout, n);
}
static void dropout_forward(void *out, const void *x, size_t n, dropout_rng rng) {
    cpu_dropout_forward(out, x, n, rng);
}
static void dropout_backward(void *dx, const void *dout, size_t n, dropout_rng rng) {
    cpu_dropout_backward(dx, dout, n, rng);
}
static void add(void *out, const void *a, const void *b, size_t n) { cpu_add(out, a, b, n); }
static void sum_blocks(void *out, const void *own, const void *received, int ranks, int own_rank, size_t n) {
    cpu_sum_blocks(out, own, received, ranks, own_rank, n);
}
static void scale(void *x, float s, size_t n) { cpu_scale(x, s, n); }
static void bias_add(void *out, const void *bias, int N, int C) { cpu_bias_add(out, bias, N, C); }
static void bias_dropout_add(void *out, const void *residual, const void *x, const void *bias, int N, int C,
                             dropout_rng rng) {
    cpu_bias_dropout_add(out, residual, x, bias, N, C, rng);
}
static void bias_backward(float *dbias, const void *dout, int N, int C) {
    cpu_bias_backward(dbias, dout, N, C);
}
/* dropout_backward, then bias_backward over its result: the bits of the two ops */
static void dropout_bias_backward(void *dx, float *dbias, const void *dout, int N, int C, dropout_rng rng) {
    cpu_dropout_backward(dx, dout, (size_t)N * (size_t)C, rng);
    cpu_bias_backward(dbias, dx, N, C);
}

static void cross_entropy_fused(float *losses, void *logits, float *row_max, float *sum_exp, float *target_logit,
                                const int *targets, int N, int V, float grad_scale) {
    cpu_cross_entropy_max(row_max, logits, N, V);
    cpu_cross_entropy_sum_exp(sum_exp, target_logit, logits, row_max, targets, N, V, 0);
    cpu_cross_entropy_loss_grad(losses, logits, row_max, sum_exp, target_logit, targets, N, V, 0, grad_scale);
}
static void cross_entropy_max(float *row_max, const void *logits, int N, int V) {
    cpu_cross_entropy_max(row_max, logits, N, V);
}
static void logits_argmax(float *row_max, int *argmax, const void *logits, int N, int V, int valid) {
    cpu_logits_argmax(row_max, argmax, logits, N, V, valid);
}
static void cross_entropy_sum_exp(float *sum_exp, float *target_logit, const void *logits,
                                  const float *row_max, const int *targets, int N, int V,
                                  int vocab_start) {
    cpu_cross_entropy_sum_exp(sum_exp, target_logit, logits, row_max, targets, N, V, vocab_start);
}
static void cross_entropy_loss_grad(float *losses, void *logits, const float *row_max,
                                    const float *sum_exp, const float *target_logit,
                                    const int *targets, int N, int V, int vocab_start,
                                    float grad_scale) {
    cpu_cross_entropy_loss_grad(losses, logits, row_max, sum_exp, target_logit, targets, N, V,
                                vocab_start, grad_scale);
}

/* params normally aliases master here; a separate fp32 copy is refreshed after the step */
static void adamw_update(float *master, void *params, const float *grads, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step) {
    cpu_adamw_update(master, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    if (params && params != (void *)master) memcpy(params, master, sizeof(float) * n);
}

static const kernel_ops cpu_ops = {
    .name = "cpu",
    .host_memory = 1,
    .attention_window = 1,
    .act_bytes = sizeof(float),
    .act_dtype = KERNEL_FP32,

    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy_to_host = cpu_copy_to_host,
    .copy_from_host = cpu_copy_from_host,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .copy_to_host_float = copy_to_host_float,
    .copy_from_host_float = copy_from_host_float,
    .float_to_act = float_to_act,
    .act_to_float = act_to_float,
    .init_normal = cpu_init_normal,
    .fill = cpu_fill,

    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .position_embedding_forward = position_embedding_forward,
    .position_embedding_backward = position_embedding_backward,

    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .layernorm_backward_from_output = layernorm_backward_from_output,

    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .rmsnorm_backward_from_output = rmsnorm_backward_from_output,

    .matmul_forward = matmul_forward,
    .matmul_forward_residual = matmul_forward_residual,
    .matmul_backward = matmul_backward,
    .grouped_matmul_forward = grouped_matmul_forward,
    .grouped_matmul_backward = grouped_matmul_backward,
    .matmul_backward_weight_overwrite = matmul_backward_weight_overwrite,
    .matmul_backward_gelu = matmul_backward_gelu,

    .rope_forward = rope_forward,
    .rope_backward = rope_backward,

    .attention_workspace_bytes = cpu_attention_workspace_bytes,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .decode_attention = decode_attention,
    .attention_padded_forward = attention_padded_forward,
    .attention_padded_backward = attention_padded_backward,
    .attention_bias_forward = attention_bias_forward,
    .attention_bias_backward = attention_bias_backward,
    .cross_attention_workspace_bytes = cpu_cross_attention_workspace_bytes,
    .cross_attention_forward = cross_attention_forward,
    .cross_attention_backward = cross_attention_backward,
    .attention_kv_pack = attention_kv_pack,
    .attention_kv_unpack = attention_kv_unpack,
    .attention_block_forward = attention_block_forward,
    .attention_merge = attention_merge,
    .attention_block_backward = attention_block_backward,
    .columns_to_blocks = columns_to_blocks,
    .blocks_to_columns = blocks_to_columns,

    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .gelu_erf_forward = gelu_erf_forward,
    .gelu_erf_backward = gelu_erf_backward,
    .tanh_forward = tanh_forward,
    .tanh_backward = tanh_backward,
    .moe_route_forward = cpu_moe_route_forward,
    .moe_route_backward = cpu_moe_route_backward,
    .moe_permutation = moe_permutation,
    .gather_rows = gather_rows,
    .moe_combine = moe_combine,
    .moe_combine_backward = moe_combine_backward,
    .moe_uncombine = moe_uncombine,
    .uniform_jitter = uniform_jitter,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .swiglu_backward_remake = swiglu_backward_remake,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .add = add,
    .sum_blocks = sum_blocks,
    .scale = scale,
    .scale_float = cpu_scale,
    .bias_add = bias_add,
    .bias_dropout_add = bias_dropout_add,
    .bias_backward = bias_backward,
    .dropout_bias_backward = dropout_bias_backward,

    .cross_entropy_max = cross_entropy_max,
    .logits_argmax = logits_argmax,
    .cross_entropy_sum_exp = cross_entropy_sum_exp,
    .cross_entropy_loss_grad = cross_entropy_loss_grad,
    .cross_entropy_fused = cross_entropy_fused,

    .fp8_quantize = fp8_quantize,
    .fp8_dequantize = fp8_dequantize,
    .fp8_amax = fp8_amax,
    /* the fp8 GEMMs on codes (cpu_fp8_gemm.c): fp8_linear.c takes them only with MTC_FP8_NATIVE=1
     * here (the emulation stays the CPU's default); the fused producers (*_fp8) stay NULL */
    .fp8_gemm = fp8_gemm,
    .fp8_transpose = cpu_fp8_transpose,
    .fp8_quantize_transpose = fp8_quantize_transpose,
    .fp8_linear_forward = fp8_linear_forward,

    .adamw_update = adamw_update,
    .sum_squares = cpu_sum_squares,
    .adamw_update_ranges = cpu_adamw_update_ranges,
    .sum_squares_ranges = cpu_sum_squares_ranges,
    .add_float = cpu_add_float,
    .sum_squares_pieces = cpu_sum_squares_pieces,
};

const kernel_ops *kernels_cpu(void) { return &cpu_ops; }
