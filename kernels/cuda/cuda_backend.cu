/* cuda_backend.cu: the CUDA backend's operation table (kernels_cuda()): the bf16 kernels of
 * cuda_kernels.h behind the kernels.h interface. Compute dtype bf16 (act_bytes 2); parameter
 * gradients, master weights, Adam moments and statistics fp32. Memory is device memory; every
 * operation (allocation zero-fill and copies included) is queued on the compute stream, and
 * copies to or from the host wait for it, so host code sees the results of everything queued
 * before. cuda_context_init(device) must have run first. */
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/cuda_common.cuh"

/* ---- memory ---- */

static void *backend_alloc(size_t bytes) {
    void *ptr = NULL;
    CHECK_CUDA(cudaMalloc(&ptr, bytes ? bytes : 1));
    CHECK_CUDA(cudaMemsetAsync(ptr, 0, bytes ? bytes : 1, compute_stream()));
    kernels_memory_record_alloc(ptr, bytes);
    return ptr;
}

static void backend_release(void *ptr) {
    if (ptr == NULL) return;
    CHECK_CUDA(cudaStreamSynchronize(compute_stream())); /* no queued kernel still uses it */
    CHECK_CUDA(cudaFree(ptr));
    kernels_memory_record_release(ptr);
}

static void backend_zero(void *ptr, size_t bytes) {
    if (bytes) CHECK_CUDA(cudaMemsetAsync(ptr, 0, bytes, compute_stream()));
}

static void backend_copy_to_host(void *host_dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CHECK_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream()));
}

static void backend_copy_from_host(void *dst, const void *host_src, size_t bytes) {
    if (!bytes) return;
    CHECK_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream())); /* the host buffer may be reused now */
}

static void backend_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_stream()));
}

/* host-side bf16 <-> fp32: bf16 is the upper half of the fp32 bits, rounded to nearest even */
static float host_bf16_to_float(bf16 x) {
    uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static bf16 host_float_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (bf16)((bits >> 16) | 0x40u); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (bf16)(bits >> 16);
}

static void backend_copy_to_host_float(float *host_dst, const void *src, size_t n) {
    if (!n) return;
    bf16 *staging = (bf16 *)malloc(sizeof(bf16) * n);
    if (!staging) KERNELS_FATAL("out of host memory staging %zu bf16 values", n);
    backend_copy_to_host(staging, src, sizeof(bf16) * n);
    for (size_t i = 0; i < n; i++) host_dst[i] = host_bf16_to_float(staging[i]);
    free(staging);
}

static void backend_copy_from_host_float(void *dst, const float *host_src, size_t n) {
    if (!n) return;
    bf16 *staging = (bf16 *)malloc(sizeof(bf16) * n);
    if (!staging) KERNELS_FATAL("out of host memory staging %zu bf16 values", n);
    for (size_t i = 0; i < n; i++) staging[i] = host_float_to_bf16(host_src[i]);
    backend_copy_from_host(dst, staging, sizeof(bf16) * n);
    free(staging);
}

static void backend_float_to_act(void *dst, const float *src, size_t n) { cuda_float_to_bf16((bf16 *)dst, src, n); }

/* ---- adapters: compute-dtype pointers are bf16 ---- */

#define BF(p) ((bf16 *)(p))
#define CBF(p) ((const bf16 *)(p))

static void embedding_forward(void *out, const int *tokens, const void *table, int N, int C,
                              int vocab_start, int vocab_rows) {
    cuda_embedding_forward(BF(out), tokens, CBF(table), N, C, vocab_start, vocab_rows);
}
static void embedding_backward(float *dtable, const void *dout, const int *tokens, int N, int C,
                               int vocab_start, int vocab_rows) {
    cuda_embedding_backward(dtable, CBF(dout), tokens, N, C, vocab_start, vocab_rows);
}
static void position_embedding_forward(void *out, const void *wpe, int B, int T, int C, int start) {
    cuda_position_embedding_forward(BF(out), CBF(wpe), B, T, C, start);
}
static void position_embedding_backward(float *dwpe, const void *dout, int B, int T, int C, int start) {
    cuda_position_embedding_backward(dwpe, CBF(dout), B, T, C, start);
}
static void layernorm_forward(void *out, float *mean, float *rstd, const void *x, const void *weight,
                              const void *bias, int N, int C, float eps) {
    cuda_layernorm_forward(BF(out), mean, rstd, CBF(x), CBF(weight), CBF(bias), N, C, eps);
}
static void layernorm_backward(void *dx, float *dweight, float *dbias, const void *dout, const void *x,
                               const void *weight, const float *mean, const float *rstd, int N, int C) {
    cuda_layernorm_backward(BF(dx), dweight, dbias, CBF(dout), CBF(x), CBF(weight), mean, rstd, N, C);
}
static void matmul_forward(void *out, void *gelu_out, const void *x, const void *weight, const void *bias,
                           int N, int IC, int OC) {
    cuda_matmul_forward(BF(out), BF(gelu_out), CBF(x), CBF(weight), CBF(bias), N, IC, OC);
}
static void matmul_forward_residual(void *out, const void *x, const void *weight, const void *bias,
                                    const void *residual, int N, int IC, int OC) {
    cuda_matmul_forward_residual(BF(out), CBF(x), CBF(weight), CBF(bias), CBF(residual), N, IC, OC);
}
static void matmul_backward(void *dx, float *dweight, float *dbias, const void *dout, const void *x,
                            const void *weight, int N, int IC, int OC) {
    cuda_matmul_backward(BF(dx), dweight, dbias, CBF(dout), CBF(x), CBF(weight), N, IC, OC);
}
static void rmsnorm_forward(void *out, float *rstd, const void *x, const void *weight, int N, int C,
                            float eps) {
    cuda_rmsnorm_forward(BF(out), rstd, CBF(x), CBF(weight), N, C, eps);
}
static void rmsnorm_backward(void *dx, float *dweight, const void *dout, const void *x,
                             const void *weight, const float *rstd, int N, int C) {
    cuda_rmsnorm_backward(BF(dx), dweight, CBF(dout), CBF(x), CBF(weight), rstd, N, C);
}
static void rope_forward(void *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    cuda_rope_forward(BF(qkv), B, T, H, G, D, rope);
}
static void rope_backward(void *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    cuda_rope_backward(BF(dqkv), B, T, H, G, D, rope);
}
static void swiglu_forward(void *out, const void *x, int N, int F) { cuda_swiglu_forward(BF(out), CBF(x), N, F); }
static void swiglu_backward(void *dx, const void *x, const void *dout, int N, int F) {
    cuda_swiglu_backward(BF(dx), CBF(x), CBF(dout), N, F);
}
static void attention_forward(void *out, void *workspace, const void *qkv, int B, int T, int H, int G,
                              int D, int head_start, int total_heads, dropout_rng rng) {
    cuda_attention_forward(BF(out), workspace, CBF(qkv), B, T, H, G, D, head_start, total_heads, rng);
}
static void attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out,
                               const void *workspace, int B, int T, int H, int G, int D, int head_start,
                               int total_heads, dropout_rng rng) {
    cuda_attention_backward(BF(dqkv), CBF(dout), CBF(qkv), CBF(out), workspace, B, T, H, G, D, head_start,
                            total_heads, rng);
}
static void decode_attention(void *out, void *k_cache, void *v_cache, const void *qkv, int B, int Tq,
                             int H, int G, int D, int past, int max_len) {
    cuda_decode_attention(BF(out), BF(k_cache), BF(v_cache), CBF(qkv), B, Tq, H, G, D, past, max_len);
}
static void gelu_forward(void *out, const void *x, size_t n) { cuda_gelu_forward(BF(out), CBF(x), n); }
static void matmul_backward_gelu(void *dpre, float *dweight, const void *dout, void *x, const void *pre,
                                 const void *weight, int N, int IC, int OC) {
    cuda_matmul_backward_gelu(BF(dpre), dweight, CBF(dout), BF(x), CBF(pre), CBF(weight), N, IC, OC);
}
static void gelu_backward(void *dx, const void *x, const void *dout, size_t n) {
    cuda_gelu_backward(BF(dx), CBF(x), CBF(dout), n);
}
static void dropout_forward(void *out, const void *x, size_t n, dropout_rng rng) {
    cuda_dropout_forward(BF(out), CBF(x), n, rng);
}
static void dropout_backward(void *dx, const void *dout, size_t n, dropout_rng rng) {
    cuda_dropout_backward(BF(dx), CBF(dout), n, rng);
}
static void add(void *out, const void *a, const void *b, size_t n) { cuda_add(BF(out), CBF(a), CBF(b), n); }
static void scale(void *x, float s, size_t n) { cuda_scale(BF(x), s, n); }
static void bias_add(void *out, const void *bias, int N, int C) { cuda_bias_add(BF(out), CBF(bias), N, C); }
static void bias_dropout_add(void *out, const void *residual, const void *x, const void *bias, int N, int C,
                             dropout_rng rng) {
    cuda_bias_dropout_add(BF(out), CBF(residual), CBF(x), CBF(bias), N, C, rng);
}
static void bias_backward(float *dbias, const void *dout, int N, int C) { cuda_bias_backward(dbias, CBF(dout), N, C); }
static void logits_argmax(float *row_max, int *argmax, const void *logits, int N, int V, int valid) {
    cuda_logits_argmax(row_max, argmax, CBF(logits), N, V, valid);
}
static void cross_entropy_fused(float *losses, void *logits, float *row_max, float *sum_exp, float *target_logit,
                                const int *targets, int N, int V, float grad_scale) {
    cuda_cross_entropy_fused(losses, BF(logits), row_max, sum_exp, target_logit, targets, N, V, grad_scale);
}
static void cross_entropy_max(float *row_max, const void *logits, int N, int V) {
    cuda_cross_entropy_max(row_max, CBF(logits), N, V);
}
static void cross_entropy_sum_exp(float *sum_exp, float *target_logit, const void *logits, const float *row_max,
                                  const int *targets, int N, int V, int vocab_start) {
    cuda_cross_entropy_sum_exp(sum_exp, target_logit, CBF(logits), row_max, targets, N, V, vocab_start);
}
static void cross_entropy_loss_grad(float *losses, void *logits, const float *row_max, const float *sum_exp,
                                    const float *target_logit, const int *targets, int N, int V,
                                    int vocab_start, float grad_scale) {
    cuda_cross_entropy_loss_grad(losses, BF(logits), row_max, sum_exp, target_logit, targets, N, V,
                                 vocab_start, grad_scale);
}
static void adamw_update_ranges(float *master, void *params, const float *grads, float *m, float *v,
                                const tensor_range *ranges, int count, float grad_scale, float lr, float beta1,
                                float beta2, float eps, int step) {
    cuda_adamw_update_ranges(master, BF(params), grads, m, v, ranges, count, grad_scale, lr, beta1, beta2, eps, step);
}

static void adamw_update(float *master, void *params, const float *grads, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
    cuda_adamw_update(master, BF(params), grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
}

/* x *= s over fp32 (gradient clipping) */
static __global__ void scale_float_kernel(float *x, float s, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}
static void scale_float(float *x, float s, size_t n) {
    if (n == 0) return;
    scale_float_kernel<<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>(x, s, n);
    CHECK_LAUNCH();
}

static size_t backend_memory_free(void) {
    size_t free_bytes = 0, total_bytes = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    return free_bytes;
}

static kernel_ops make_cuda_ops(void) {
    kernel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.name = "cuda";
    ops.host_memory = 0;
    ops.act_bytes = sizeof(bf16);
    ops.alloc = backend_alloc;
    ops.release = backend_release;
    ops.zero = backend_zero;
    ops.copy_to_host = backend_copy_to_host;
    ops.copy_from_host = backend_copy_from_host;
    ops.copy = backend_copy;
    ops.synchronize = cuda_synchronize;
    ops.memory_free = backend_memory_free;
    ops.copy_to_host_float = backend_copy_to_host_float;
    ops.copy_from_host_float = backend_copy_from_host_float;
    ops.float_to_act = backend_float_to_act;
    ops.init_normal = cuda_init_normal;
    ops.fill = cuda_fill;
    ops.profiler_range = cuda_profiler_range;
    ops.embedding_forward = embedding_forward;
    ops.embedding_backward = embedding_backward;
    ops.position_embedding_forward = position_embedding_forward;
    ops.position_embedding_backward = position_embedding_backward;
    ops.layernorm_forward = layernorm_forward;
    ops.layernorm_backward = layernorm_backward;
    ops.rmsnorm_forward = rmsnorm_forward;
    ops.rmsnorm_backward = rmsnorm_backward;
    ops.rope_forward = rope_forward;
    ops.rope_backward = rope_backward;
    ops.swiglu_forward = swiglu_forward;
    ops.swiglu_backward = swiglu_backward;
    ops.matmul_forward = matmul_forward;
    ops.matmul_forward_residual = matmul_forward_residual;
    ops.matmul_backward = matmul_backward;
    ops.attention_workspace_bytes = cuda_attention_workspace_bytes;
    ops.attention_forward = attention_forward;
    ops.attention_backward = attention_backward;
    ops.decode_attention = decode_attention;
    ops.gelu_forward = gelu_forward;
    ops.gelu_backward = gelu_backward;
    ops.matmul_backward_gelu = matmul_backward_gelu;
    ops.dropout_forward = dropout_forward;
    ops.dropout_backward = dropout_backward;
    ops.add = add;
    ops.scale = scale;
    ops.scale_float = scale_float;
    ops.bias_add = bias_add;
    ops.bias_dropout_add = bias_dropout_add;
    ops.bias_backward = bias_backward;
    ops.cross_entropy_max = cross_entropy_max;
    ops.logits_argmax = logits_argmax;
    ops.cross_entropy_sum_exp = cross_entropy_sum_exp;
    ops.cross_entropy_loss_grad = cross_entropy_loss_grad;
    ops.cross_entropy_fused = cross_entropy_fused;
    ops.adamw_update = adamw_update;
    ops.sum_squares = cuda_sum_squares;
    ops.adamw_update_ranges = adamw_update_ranges;
    ops.sum_squares_ranges = cuda_sum_squares_ranges;
    return ops;
}

extern "C" const kernel_ops *kernels_cuda(void) {
    static kernel_ops ops;
    static int ready = 0;
    if (!ready) {
        ops = make_cuda_ops();
        ready = 1;
    }
    return &ops;
}
