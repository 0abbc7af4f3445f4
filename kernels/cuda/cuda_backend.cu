/* cuda_backend.cu: the CUDA backend's operation tables: kernels_cuda(), the bf16 kernels of
 * cuda_kernels.h behind the kernels.h interface (compute dtype bf16, act_bytes 2), and
 * kernels_cuda_fp16(), the same with their fp16 instantiations (compute dtype fp16, --fp16);
 * parameter gradients, master weights, Adam moments and statistics fp32 in both. Memory is device memory; every
 * operation (allocation zero-fill and copies included) is queued on the compute stream, and
 * copies to or from the host wait for it, so host code sees the results of everything queued
 * before. cuda_context_init(device) must have run first. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_attention_block.cuh"
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

/* the side stream and events of zero_beside/zero_join, made on first use */
static cudaStream_t zero_stream;
static cudaEvent_t zero_queued, zero_done;
static int zero_pending;

static void backend_zero_beside(void *ptr, size_t bytes) {
    if (!zero_stream) {
        CHECK_CUDA(cudaStreamCreateWithFlags(&zero_stream, cudaStreamNonBlocking));
        CHECK_CUDA(cudaEventCreateWithFlags(&zero_queued, cudaEventDisableTiming));
        CHECK_CUDA(cudaEventCreateWithFlags(&zero_done, cudaEventDisableTiming));
    }
    if (!bytes) return;
    CHECK_CUDA(cudaEventRecord(zero_queued, compute_stream()));  /* after every reader so far */
    CHECK_CUDA(cudaStreamWaitEvent(zero_stream, zero_queued, 0));
    CHECK_CUDA(cudaMemsetAsync(ptr, 0, bytes, zero_stream));
    CHECK_CUDA(cudaEventRecord(zero_done, zero_stream));
    zero_pending = 1;
}

static void backend_zero_join(void) {
    if (!zero_pending) return;
    CHECK_CUDA(cudaStreamWaitEvent(compute_stream(), zero_done, 0));
    zero_pending = 0;
}

static void *backend_host_pinned_alloc(size_t bytes) {
    void *p = NULL;
    CHECK_CUDA(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
    return p;
}
static void backend_host_pinned_release(void *p) {
    if (p) CHECK_CUDA(cudaFreeHost(p));
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
static float host_to_float(bf16 x, const __nv_bfloat16 *) {
    uint32_t bits = (uint32_t)x << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static bf16 host_from_float(float f, const __nv_bfloat16 *) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (bf16)((bits >> 16) | 0x40u); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (bf16)(bits >> 16);
}

/* host-side fp16 <-> fp32 through cuda_fp16.h's host conversions (round to nearest even;
 * beyond 65504 to infinity, as on the device) */
static float host_to_float(fp16 x, const __half *) {
    __half_raw raw;
    raw.x = x;
    return __half2float(__half(raw));
}

static fp16 host_from_float(float f, const __half *) {
    __half_raw raw = __half_raw(__float2half_rn(f));
    return raw.x;
}

template <typename E>
static void backend_copy_to_host_float(float *host_dst, const void *src, size_t n) {
    if (!n) return;
    uint16_t *staging = (uint16_t *)malloc(sizeof(uint16_t) * n);
    if (!staging) KERNELS_FATAL("out of host memory staging %zu 16-bit values", n);
    backend_copy_to_host(staging, src, sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++) host_dst[i] = host_to_float(staging[i], (const E *)NULL);
    free(staging);
}

template <typename E>
static void backend_copy_from_host_float(void *dst, const float *host_src, size_t n) {
    if (!n) return;
    uint16_t *staging = (uint16_t *)malloc(sizeof(uint16_t) * n);
    if (!staging) KERNELS_FATAL("out of host memory staging %zu 16-bit values", n);
    for (size_t i = 0; i < n; i++) staging[i] = host_from_float(host_src[i], (const E *)NULL);
    backend_copy_from_host(dst, staging, sizeof(uint16_t) * n);
    free(staging);
}

/* ---- adapters: compute-dtype pointers are bf16 (kernels_cuda) or fp16 (kernels_cuda_fp16) ----
 * CUDA_ADAPTERS(NAME, S, T, FLOAT_TO_T, TO_FLOAT) defines struct NAME whose members call the cuda_X##S entry
 * points of cuda_kernels.h (S empty: bf16; S _fp16: fp16) with the compute-dtype pointers as T. */

#define CUDA_ADAPTERS(NAME, S, T, FLOAT_TO_T, TO_FLOAT)                                                                    \
struct NAME {                                                                                                    \
static void float_to_act(void *dst, const float *src, size_t n) { FLOAT_TO_T((T *)dst, src, n); }               \
static void act_to_float(float *dst, const void *src, size_t n) { TO_FLOAT(dst, (const T *)src, n); }           \
static void gather_rows(void *out, const void *x, const int *rows, int M, int C) {                              \
    cuda_gather_rows##S((T *)out, (const T *)x, rows, M, C);                                                     \
}                                                                                                                \
static void moe_combine(void *out, const void *y, const int *slot_row, const float *weight, int N, int k, int C) { \
    cuda_moe_combine##S((T *)out, (const T *)y, slot_row, weight, N, k, C);                                      \
}                                                                                                                \
static void moe_combine_backward(void *dy, float *dweight, const void *dout, const void *y, const int *slot_row, \
                                 const float *weight, int N, int k, int C) {                                     \
    cuda_moe_combine_backward##S((T *)dy, dweight, (const T *)dout, (const T *)y, slot_row, weight, N, k, C);     \
}                                                                                                                \
static void moe_uncombine(void *dx, const void *dxp, const int *slot_row, int N, int k, int C) {                \
    cuda_moe_uncombine##S((T *)dx, (const T *)dxp, slot_row, N, k, C);                                           \
}                                                                                                                \
static void uniform_jitter(void *out, const void *x, size_t n, float eps, dropout_rng rng) {                    \
    cuda_uniform_jitter##S((T *)out, (const T *)x, n, eps, rng);                                                 \
}                                                                                                                \
static void fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const void *x, size_t n, const float *scale,  \
                         int format) {                                                                           \
    cuda_fp8_quantize##S(out, amax, scale_inv, (const T *)x, n, scale, format);                                  \
}                                                                                                                \
static void fp8_dequantize(void *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {          \
    cuda_fp8_dequantize##S((T *)out, q, n, scale_inv, format);                                                   \
}                                                                                                                \
static void fp8_amax(float *amax, const void *x, size_t n) { cuda_fp8_amax##S(amax, (const T *)x, n); }         \
static void layernorm_forward_fp8(void *out, float *mean, float *rstd, const void *x, const void *weight,       \
                                  const void *bias, int N, int C, float eps, const fp8_output *q) {              \
    cuda_layernorm_forward_fp8##S((T *)out, mean, rstd, (const T *)x, (const T *)weight, (const T *)bias, N, C,  \
                                  eps, q);                                                                       \
}                                                                                                                \
static void rmsnorm_forward_fp8(void *out, float *rstd, const void *x, const void *weight, int N, int C,         \
                                float eps, const fp8_output *q) {                                                \
    cuda_rmsnorm_forward_fp8##S((T *)out, rstd, (const T *)x, (const T *)weight, N, C, eps, q);                  \
}                                                                                                                \
static void gelu_forward_fp8(void *out, const void *x, size_t n, const fp8_output *q) {                         \
    cuda_gelu_forward_fp8##S((T *)out, (const T *)x, n, q);                                                      \
}                                                                                                                \
static void swiglu_forward_fp8(void *out, const void *x, int N, int F, const fp8_output *q) {                   \
    cuda_swiglu_forward_fp8##S((T *)out, (const T *)x, N, F, q);                                                 \
}                                                                                                                \
static void gelu_backward_fp8(void *dx, const void *x, const void *dout, int rows, int cols, const fp8_output *q, \
                              uint8_t *codes_t) {                                                                \
    cuda_gelu_backward_fp8##S((T *)dx, (const T *)x, (const T *)dout, rows, cols, q, codes_t);                   \
}                                                                                                                \
static void gelu_forward_fp8_transpose(void *out, const void *x, int rows, int cols, const fp8_output *q,        \
                                       uint8_t *codes_t) {                                                       \
    cuda_gelu_forward_fp8_transpose##S((T *)out, (const T *)x, rows, cols, q, codes_t);                          \
}                                                                                                                \
static void swiglu_backward_fp8(void *dx, const void *x, const void *dout, int N, int F, const fp8_output *q,   \
                                uint8_t *codes_t) {                                                              \
    cuda_swiglu_backward_fp8##S((T *)dx, (const T *)x, (const T *)dout, N, F, q, codes_t);                       \
}                                                                                                                \
static void swiglu_forward_fp8_transpose(void *out, const void *x, int N, int F, const fp8_output *q,            \
                                         uint8_t *codes_t) {                                                     \
    cuda_swiglu_forward_fp8_transpose##S((T *)out, (const T *)x, N, F, q, codes_t);                              \
}                                                                                                                \
static void mlp_backward_fp8(void *dpre, float *dbias, const void *pre, const void *dact, int rows, int F,       \
                             int swiglu, const fp8_output *qa, uint8_t *act_t, const fp8_output *qg,           \
                             uint8_t *grad_t) {                                                                \
    cuda_mlp_backward_fp8##S((T *)dpre, dbias, (const T *)pre, (const T *)dact, rows, F, swiglu, qa, act_t, qg,   \
                             grad_t);                                                                          \
}                                                                                                                \
static void fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const void *x,   \
                                   int rows, int cols, const float *scale, int format) {                         \
    cuda_fp8_quantize_transpose##S(out, out_t, amax, scale_inv, (const T *)x, rows, cols, scale, format);        \
}                                                                                                                \
static void fp8_gemm(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,      \
                     const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols) {     \
    cuda_fp8_gemm##S(out, accumulate, x, x_format, x_scale_inv, w, w_format, w_scale_inv, rows, K, cols);        \
}                                                                                                                \
static void fp8_linear_forward(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,          \
                               const float *w_scale_inv, const void *bias, const void *residual, int N, int IC,  \
                               int OC) {                                                                         \
    cuda_fp8_linear_forward##S(out, x, x_scale_inv, w, w_scale_inv, bias, residual, N, IC, OC);                  \
}                                                                                                                \
static void grouped_matmul_forward(void *out, const void *x, const void *const *weight, const int *rows,        \
                                   int groups, int IC, int OC) {                                                 \
    cuda_grouped_matmul_forward##S((T *)out, (const T *)x, weight, rows, groups, IC, OC);                        \
}                                                                                                                \
static void grouped_matmul_backward(void *dx, float *const *dweight, const void *dout, const void *x,           \
                                    const void *const *weight, const int *rows, int groups, int IC, int OC) {    \
    cuda_grouped_matmul_backward##S((T *)dx, dweight, (const T *)dout, (const T *)x, weight, rows, groups, IC, OC); \
}                                                                                                                \
static void init_normal(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream, float std,       \
                        uint64_t first, size_t n) {                                                              \
    cuda_init_normal##S(dst, fp32_dst, map, seed, stream, std, first, n);                                        \
}                                                                                                                \
static void fill(void *dst, int fp32_dst, float value, size_t n) { cuda_fill##S(dst, fp32_dst, value, n); }     \
static void embedding_forward(void *out, const int *tokens, const void *table, int N, int C, int vocab_start,   \
                              int vocab_rows) {                                                                  \
    cuda_embedding_forward##S((T *)out, tokens, (const T *)table, N, C, vocab_start, vocab_rows);                \
}                                                                                                                \
static void embedding_backward(float *dtable, const void *dout, const int *tokens, int N, int C,                \
                               int vocab_start, int vocab_rows) {                                                \
    cuda_embedding_backward##S(dtable, (const T *)dout, tokens, N, C, vocab_start, vocab_rows);                  \
}                                                                                                                \
static void position_embedding_forward(void *out, const void *wpe, int B, int T_, int C, int start) {           \
    cuda_position_embedding_forward##S((T *)out, (const T *)wpe, B, T_, C, start);                               \
}                                                                                                                \
static void position_embedding_backward(float *dwpe, const void *dout, int B, int T_, int C, int start) {       \
    cuda_position_embedding_backward##S(dwpe, (const T *)dout, B, T_, C, start);                                 \
}                                                                                                                \
static void layernorm_forward(void *out, float *mean, float *rstd, const void *x, const void *weight,           \
                              const void *bias, int N, int C, float eps) {                                       \
    cuda_layernorm_forward##S((T *)out, mean, rstd, (const T *)x, (const T *)weight, (const T *)bias, N, C, eps); \
}                                                                                                                \
static void layernorm_backward(void *dx, float *dweight, float *dbias, float *dx_colsum, const void *dout,     \
                               const void *x, const void *weight, const float *mean, const float *rstd, int N,  \
                               int C) {                                                                          \
    cuda_layernorm_backward_colsum##S((T *)dx, dweight, dbias, dx_colsum, (const T *)dout, (const T *)x,         \
                                      (const T *)weight, mean, rstd, N, C);                                      \
}                                                                                                                \
static void layernorm_backward_from_output(void *dx, float *dweight, float *dbias, float *dx_colsum,          \
                                           const void *dout, const void *y, const void *weight, const void *bias, \
                                           const float *rstd, int N, int C, float eps) {                         \
    cuda_layernorm_backward_from_output##S((T *)dx, dweight, dbias, dx_colsum, (const T *)dout, (const T *)y,    \
                                           (const T *)weight, (const T *)bias, rstd, N, C, eps);                 \
}                                                                                                                \
static void matmul_forward(void *out, void *gelu_out, const void *x, const void *weight, const void *bias,      \
                           int N, int IC, int OC) {                                                              \
    cuda_matmul_forward##S((T *)out, (T *)gelu_out, (const T *)x, (const T *)weight, (const T *)bias, N, IC, OC); \
}                                                                                                                \
static void matmul_backward(void *dx, float *dweight, float *dbias, const void *dout, const void *x,            \
                            const void *weight, int N, int IC, int OC) {                                         \
    cuda_matmul_backward##S((T *)dx, dweight, dbias, (const T *)dout, (const T *)x, (const T *)weight, N, IC, OC); \
}                                                                                                                \
static void matmul_backward_weight_overwrite(float *dweight, const void *dout, const void *x, int N, int IC,   \
                                             int OC) {                                                           \
    cuda_matmul_backward_weight_overwrite##S(dweight, (const T *)dout, (const T *)x, N, IC, OC);                 \
}                                                                                                                \
static void matmul_backward_gelu(void *dpre, float *dweight, const void *dout, void *x, const void *pre,         \
                                 const void *weight, int N, int IC, int OC, int x_kept) {                        \
    cuda_matmul_backward_gelu##S((T *)dpre, dweight, (const T *)dout, (T *)x, (const T *)pre, (const T *)weight,  \
                                 N, IC, OC, x_kept);                                                             \
}                                                                                                                \
static void rmsnorm_forward(void *out, float *rstd, const void *x, const void *weight, int N, int C, float eps) { \
    cuda_rmsnorm_forward##S((T *)out, rstd, (const T *)x, (const T *)weight, N, C, eps);                          \
}                                                                                                                \
static void rmsnorm_backward(void *dx, float *dweight, const void *dout, const void *x, const void *weight,      \
                             const float *rstd, int N, int C) {                                                  \
    cuda_rmsnorm_backward##S((T *)dx, dweight, (const T *)dout, (const T *)x, (const T *)weight, rstd, N, C);     \
}                                                                                                                \
static void rmsnorm_backward_from_output(void *dx, float *dweight, const void *dout, const void *y,             \
                                         const void *weight, const float *rstd, int N, int C, float eps) {       \
    cuda_rmsnorm_backward_from_output##S((T *)dx, dweight, (const T *)dout, (const T *)y, (const T *)weight,      \
                                         rstd, N, C, eps);                                                       \
}                                                                                                                \
static void rope_forward(void *qkv, int B, int T_, int H, int G, int D, rope_spec rope) {                       \
    cuda_rope_forward##S((T *)qkv, B, T_, H, G, D, rope);                                                        \
}                                                                                                                \
static void rope_backward(void *dqkv, int B, int T_, int H, int G, int D, rope_spec rope) {                     \
    cuda_rope_backward##S((T *)dqkv, B, T_, H, G, D, rope);                                                      \
}                                                                                                                \
static void swiglu_forward(void *out, const void *x, int N, int F) {                                            \
    cuda_swiglu_forward##S((T *)out, (const T *)x, N, F);                                                        \
}                                                                                                                \
static void swiglu_backward(void *dx, const void *x, const void *dout, int N, int F) {                          \
    cuda_swiglu_backward##S((T *)dx, (const T *)x, (const T *)dout, N, F);                                       \
}                                                                                                                \
static void swiglu_backward_remake(void *dx, void *out, const void *x, const void *dout, int N, int F) {        \
    cuda_swiglu_backward_remake##S((T *)dx, (T *)out, (const T *)x, (const T *)dout, N, F);                      \
}                                                                                                                \
static void attention_forward(void *out, void *workspace, const void *qkv, int B, int T_, int H, int G, int D,  \
                              int head_start, int total_heads, int window_left, dropout_rng rng) {               \
    cuda_attention_forward##S((T *)out, workspace, (const T *)qkv, B, T_, H, G, D, head_start, total_heads,       \
                              window_left, rng);                                                                 \
}                                                                                                                \
static void attention_backward(void *dqkv, float *dbias, const void *dout, const void *qkv, const void *out,     \
                               const void *workspace, int B, int T_, int H, int G, int D, int head_start,         \
                               int total_heads, int window_left, dropout_rng rng) {                              \
    cuda_attention_backward##S((T *)dqkv, dbias, (const T *)dout, (const T *)qkv, (const T *)out, workspace, B, \
                               T_, H, G, D, head_start, total_heads, window_left, rng);                          \
}                                                                                                                \
static void attention_padded_forward(void *out, void *workspace, const void *qkv, const int *key_valid, int B,  \
                                     int T_, int H, int G, int D, int head_start, int total_heads,               \
                                     dropout_rng rng) {                                                          \
    cuda_attention_padded_forward##S((T *)out, workspace, (const T *)qkv, key_valid, B, T_, H, G, D, head_start, \
                                     total_heads, rng);                                                          \
}                                                                                                                \
static void attention_padded_backward(void *dqkv, float *dbias, const void *dout, const void *qkv,               \
                                      const void *out, const int *key_valid, const void *workspace, int B,       \
                                      int T_, int H, int G, int D, int head_start, int total_heads,              \
                                      dropout_rng rng) {                                                         \
    cuda_attention_padded_backward##S((T *)dqkv, dbias, (const T *)dout, (const T *)qkv, (const T *)out,         \
                                      key_valid, workspace, B, T_, H, G, D, head_start, total_heads, rng);       \
}                                                                                                                \
static void cross_attention_forward(void *out, void *workspace, const void *q, const void *kv,                  \
                                    const int *key_valid, int B, int Tq, int Tk, int H, int D, int head_start,   \
                                    int total_heads, dropout_rng rng) {                                          \
    cuda_cross_attention_forward##S((T *)out, workspace, (const T *)q, (const T *)kv, key_valid, B, Tq, Tk, H, D, \
                                    head_start, total_heads, rng);                                               \
}                                                                                                                \
static void cross_attention_backward(void *dq, void *dkv, const void *dout, const void *q, const void *kv,       \
                                     const void *out, const int *key_valid, const void *workspace, int B, int Tq, \
                                     int Tk, int H, int D, int head_start, int total_heads, dropout_rng rng) {    \
    cuda_cross_attention_backward##S((T *)dq, (T *)dkv, (const T *)dout, (const T *)q, (const T *)kv,            \
                                     (const T *)out, key_valid, workspace, B, Tq, Tk, H, D, head_start,          \
                                     total_heads, rng);                                                          \
}                                                                                                                \
static void gelu_erf_forward(void *out, const void *x, size_t n) {                                              \
    cuda_gelu_erf_forward##S((T *)out, (const T *)x, n);                                                         \
}                                                                                                                \
static void gelu_erf_backward(void *dx, const void *x, const void *dout, size_t n) {                            \
    cuda_gelu_erf_backward##S((T *)dx, (const T *)x, (const T *)dout, n);                                        \
}                                                                                                                \
static void tanh_forward(void *out, const void *x, size_t n) { cuda_tanh_forward##S((T *)out, (const T *)x, n); } \
static void tanh_backward(void *dx, const void *y, const void *dout, size_t n) {                                \
    cuda_tanh_backward##S((T *)dx, (const T *)y, (const T *)dout, n);                                            \
}                                                                                                                \
static void decode_attention(void *out, void *k_cache, void *v_cache, const void *qkv, int B, int Tq, int H,    \
                             int G, int D, int past, int max_len, int window_left) {                             \
    cuda_decode_attention##S((T *)out, (T *)k_cache, (T *)v_cache, (const T *)qkv, B, Tq, H, G, D, past,          \
                             max_len, window_left);                                                              \
}                                                                                                                \
static void gelu_forward(void *out, const void *x, size_t n) { cuda_gelu_forward##S((T *)out, (const T *)x, n); } \
static void gelu_backward(void *dx, const void *x, const void *dout, size_t n) {                                \
    cuda_gelu_backward##S((T *)dx, (const T *)x, (const T *)dout, n);                                            \
}                                                                                                                \
static void dropout_forward(void *out, const void *x, size_t n, dropout_rng rng) {                              \
    cuda_dropout_forward##S((T *)out, (const T *)x, n, rng);                                                     \
}                                                                                                                \
static void dropout_backward(void *dx, const void *dout, size_t n, dropout_rng rng) {                           \
    cuda_dropout_backward##S((T *)dx, (const T *)dout, n, rng);                                                  \
}                                                                                                                \
static void add(void *out, const void *a, const void *b, size_t n) {                                            \
    cuda_add##S((T *)out, (const T *)a, (const T *)b, n);                                                        \
}                                                                                                                \
static void sum_blocks(void *out, const void *own, const void *received, int ranks, int own_rank, size_t n) {    \
    cuda_sum_blocks##S((T *)out, (const T *)own, (const T *)received, ranks, own_rank, n);                        \
}                                                                                                                \
static void scale(void *x, float s, size_t n) { cuda_scale##S((T *)x, s, n); }                                  \
static void bias_add(void *out, const void *bias, int N, int C) {                                               \
    cuda_bias_add##S((T *)out, (const T *)bias, N, C);                                                           \
}                                                                                                                \
static void bias_backward(float *dbias, const void *dout, int N, int C) {                                       \
    cuda_bias_backward##S(dbias, (const T *)dout, N, C);                                                         \
}                                                                                                                \
static void dropout_bias_backward(void *dx, float *dbias, const void *dout, int N, int C, dropout_rng rng) {     \
    cuda_dropout_bias_backward##S((T *)dx, dbias, (const T *)dout, N, C, rng);                                   \
}                                                                                                                \
static void logits_argmax(float *row_max, int *argmax, const void *logits, int N, int V, int valid) {           \
    cuda_logits_argmax##S(row_max, argmax, (const T *)logits, N, V, valid);                                      \
}                                                                                                                \
static void cross_entropy_max(float *row_max, const void *logits, int N, int V) {                               \
    cuda_cross_entropy_max##S(row_max, (const T *)logits, N, V);                                                 \
}                                                                                                                \
static void cross_entropy_sum_exp(float *sum_exp, float *target_logit, const void *logits,                      \
                                  const float *row_max, const int *targets, int N, int V, int vocab_start) {     \
    cuda_cross_entropy_sum_exp##S(sum_exp, target_logit, (const T *)logits, row_max, targets, N, V, vocab_start); \
}                                                                                                                \
static void cross_entropy_loss_grad(float *losses, void *logits, const float *row_max, const float *sum_exp,    \
                                    const float *target_logit, const int *targets, int N, int V,                 \
                                    int vocab_start, float grad_scale) {                                         \
    cuda_cross_entropy_loss_grad##S(losses, (T *)logits, row_max, sum_exp, target_logit, targets, N, V,          \
                                    vocab_start, grad_scale);                                                    \
}                                                                                                                \
static void adamw_update_ranges(float *master, void *params, const float *grads, float *m, float *v,            \
                                const tensor_range *ranges, int count, float grad_scale, float lr, float beta1,  \
                                float beta2, float eps, int step) {                                              \
    cuda_adamw_update_ranges##S(master, (T *)params, grads, m, v, ranges, count, grad_scale, lr, beta1, beta2,   \
                                eps, step);                                                                      \
}                                                                                                                \
static void matmul_forward_residual(void *out, const void *x, const void *weight, const void *bias,              \
                                    const void *residual, int N, int IC, int OC) {                               \
    cuda_matmul_forward_residual##S((T *)out, (const T *)x, (const T *)weight, (const T *)bias,                  \
                                    (const T *)residual, N, IC, OC);                                             \
}                                                                                                                \
static void bias_dropout_add(void *out, const void *residual, const void *x, const void *bias, int N, int C,     \
                             dropout_rng rng) {                                                                  \
    cuda_bias_dropout_add##S((T *)out, (const T *)residual, (const T *)x, (const T *)bias, N, C, rng);           \
}                                                                                                                \
static void cross_entropy_fused(float *losses, void *logits, float *row_max, float *sum_exp,                    \
                                float *target_logit, const int *targets, int N, int V, float grad_scale) {       \
    cuda_cross_entropy_fused##S(losses, (T *)logits, row_max, sum_exp, target_logit, targets, N, V, grad_scale); \
}                                                                                                                \
static void adamw_update(float *master, void *params, const float *grads, float *m, float *v, size_t n,         \
                         float lr, float beta1, float beta2, float eps, float weight_decay, int step) {           \
    cuda_adamw_update##S(master, (T *)params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);         \
}                                                                                                                \
};

CUDA_ADAPTERS(bf16_adapters, , bf16, cuda_float_to_bf16, cuda_bf16_to_float)
CUDA_ADAPTERS(fp16_adapters, _fp16, fp16, cuda_float_to_fp16, cuda_fp16_to_float)

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

/* the table of one compute dtype: A the adapters, E the element type */
template <typename A, typename E>
static kernel_ops make_cuda_ops(int act_dtype) {
    kernel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.name = "cuda";
    ops.host_memory = 0;
    ops.act_bytes = sizeof(E);
    ops.act_dtype = act_dtype;
    ops.attention_window = 1; /* every attention kernel takes window_left (and the CP blocks spec.windowed) */
    ops.alloc = backend_alloc;
    ops.release = backend_release;
    ops.zero = backend_zero;
    ops.zero_beside = backend_zero_beside;
    ops.zero_join = backend_zero_join;
    ops.copy_to_host = backend_copy_to_host;
    ops.host_pinned_alloc = backend_host_pinned_alloc;
    ops.host_pinned_release = backend_host_pinned_release;
    ops.copy_from_host = backend_copy_from_host;
    ops.copy = backend_copy;
    ops.synchronize = cuda_synchronize;
    ops.memory_free = backend_memory_free;
    ops.copy_to_host_float = backend_copy_to_host_float<E>;
    ops.copy_from_host_float = backend_copy_from_host_float<E>;
    ops.float_to_act = A::float_to_act;
    ops.act_to_float = A::act_to_float;
    ops.init_normal = A::init_normal;
    ops.fill = A::fill;
    ops.profiler_range = cuda_profiler_range;
    ops.embedding_forward = A::embedding_forward;
    ops.embedding_backward = A::embedding_backward;
    ops.position_embedding_forward = A::position_embedding_forward;
    ops.position_embedding_backward = A::position_embedding_backward;
    ops.layernorm_forward = A::layernorm_forward;
    ops.layernorm_backward = A::layernorm_backward;
    ops.layernorm_backward_from_output = A::layernorm_backward_from_output;
    ops.rmsnorm_forward = A::rmsnorm_forward;
    ops.rmsnorm_backward = A::rmsnorm_backward;
    ops.rmsnorm_backward_from_output = A::rmsnorm_backward_from_output;
    ops.rope_forward = A::rope_forward;
    ops.rope_backward = A::rope_backward;
    ops.swiglu_forward = A::swiglu_forward;
    ops.swiglu_backward = A::swiglu_backward;
    ops.swiglu_backward_remake = A::swiglu_backward_remake;
    ops.matmul_forward = A::matmul_forward;
    ops.matmul_backward = A::matmul_backward;
    ops.grouped_matmul_forward = A::grouped_matmul_forward;
    ops.grouped_matmul_backward = A::grouped_matmul_backward;
    ops.matmul_rows_vary = cuda_matmul_rows_vary;
    ops.matmul_backward_weight_overwrite = A::matmul_backward_weight_overwrite;
    ops.attention_workspace_bytes = cuda_attention_workspace_bytes;
    ops.attention_forward = A::attention_forward;
    ops.attention_backward = A::attention_backward;
    ops.decode_attention = A::decode_attention;
    ops.attention_padded_forward = A::attention_padded_forward; /* BERT's encoder and heads */
    ops.attention_padded_backward = A::attention_padded_backward;
    ops.cross_attention_workspace_bytes = cuda_cross_attention_workspace_bytes; /* T5's decoder */
    ops.cross_attention_forward = A::cross_attention_forward;
    ops.cross_attention_backward = A::cross_attention_backward;
    ops.gelu_erf_forward = A::gelu_erf_forward;
    ops.gelu_erf_backward = A::gelu_erf_backward;
    ops.tanh_forward = A::tanh_forward;
    ops.tanh_backward = A::tanh_backward;
    ops.gelu_forward = A::gelu_forward;
    ops.gelu_backward = A::gelu_backward;
    ops.matmul_backward_gelu = A::matmul_backward_gelu;
    ops.dropout_forward = A::dropout_forward;
    ops.dropout_backward = A::dropout_backward;
    ops.add = A::add;
    ops.sum_blocks = A::sum_blocks;
    ops.scale = A::scale;
    ops.scale_float = scale_float;
    ops.matmul_forward_residual = A::matmul_forward_residual;
    ops.bias_dropout_add = A::bias_dropout_add;
    ops.cross_entropy_fused = A::cross_entropy_fused;
    ops.bias_add = A::bias_add;
    ops.bias_backward = A::bias_backward;
    /* MTC_DROPOUT_BIAS_FUSED=0: the model runs dropout_backward and bias_backward apart (the same
     * bits; for timing comparisons) */
    const char *fused_env = getenv("MTC_DROPOUT_BIAS_FUSED");
    ops.dropout_bias_backward = fused_env != NULL && strcmp(fused_env, "0") == 0 ? NULL : A::dropout_bias_backward;
    ops.cross_entropy_max = A::cross_entropy_max;
    ops.logits_argmax = A::logits_argmax;
    ops.cross_entropy_sum_exp = A::cross_entropy_sum_exp;
    ops.cross_entropy_loss_grad = A::cross_entropy_loss_grad;
    ops.adamw_update = A::adamw_update;
    ops.sum_squares = cuda_sum_squares;
    ops.adamw_update_ranges = A::adamw_update_ranges;
    ops.sum_squares_ranges = cuda_sum_squares_ranges;
    ops.add_float = cuda_add_float;
    ops.sum_squares_pieces = cuda_sum_squares_pieces;
    ops.moe_route_forward = cuda_moe_route_forward;
    ops.moe_permutation = cuda_moe_permutation;
    ops.moe_route_backward = cuda_moe_route_backward;
    ops.gather_rows = A::gather_rows;
    ops.moe_combine = A::moe_combine;
    ops.moe_combine_backward = A::moe_combine_backward;
    ops.moe_uncombine = A::moe_uncombine;
    ops.uniform_jitter = A::uniform_jitter;
    ops.fp8_quantize = A::fp8_quantize;
    ops.fp8_dequantize = A::fp8_dequantize;
    ops.fp8_amax = A::fp8_amax;
    ops.fp8_quantize_transpose = A::fp8_quantize_transpose;
    ops.layernorm_forward_fp8 = A::layernorm_forward_fp8;
    ops.rmsnorm_forward_fp8 = A::rmsnorm_forward_fp8;
    ops.gelu_forward_fp8 = A::gelu_forward_fp8;
    ops.swiglu_forward_fp8 = A::swiglu_forward_fp8;
    ops.gelu_backward_fp8 = A::gelu_backward_fp8;
    ops.gelu_forward_fp8_transpose = A::gelu_forward_fp8_transpose;
    ops.swiglu_backward_fp8 = A::swiglu_backward_fp8;
    ops.swiglu_forward_fp8_transpose = A::swiglu_forward_fp8_transpose;
    ops.mlp_backward_fp8 = A::mlp_backward_fp8;
    ops.fp8_gemm = A::fp8_gemm;
    ops.fp8_linear_forward = A::fp8_linear_forward;
    ops.fp8_transpose = cuda_fp8_transpose;
    cuda_attention_block_fill_ops<E>(&ops); /* context parallelism's ring attention */
    return ops;
}

extern "C" const kernel_ops *kernels_cuda(void) {
    static kernel_ops ops;
    static int ready = 0;
    if (!ready) {
        ops = make_cuda_ops<bf16_adapters, __nv_bfloat16>(KERNEL_BF16);
        ready = 1;
    }
    return &ops;
}

extern "C" const kernel_ops *kernels_cuda_fp16(void) {
    static kernel_ops ops;
    static int ready = 0;
    if (!ready) {
        ops = make_cuda_ops<fp16_adapters, __half>(KERNEL_FP16);
        ready = 1;
    }
    return &ops;
}
