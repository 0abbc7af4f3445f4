/* cuda_bert_elementwise.cu: the elementwise functions of BERT's heads on the GPU (Megatron-Core's
 * bert_lm_head.py and pooler.py), the counterparts of kernels/cpu/cpu_bert_elementwise.c with
 * its formulas in fp32, one rounding to the compute dtype (bf16 or fp16) per output:
 *   gelu(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2,   gelu'(x) = Phi(x) + x phi(x)
 *   tanh'(x) = 1 - tanh(x)^2, taken from the forward's output y.
 * The backwards overwrite dx, which may alias dout (each element is read before it is written
 * by the same thread). These run on the LM head's masked rows and the pooler's [CLS] rows, a
 * small part of a step, so a plain grid-stride loop serves. */
#include "kernels/cuda/cuda_common.cuh"

static const int bert_map_threads = 256;

static __device__ __forceinline__ float gelu_erf_value(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static __device__ __forceinline__ float gelu_erf_grad(float x) {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

#define BERT_GRID_STRIDE_LOOP(i, n)                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                 \
         i += (size_t)gridDim.x * blockDim.x)

template <typename E>
static __global__ void gelu_erf_forward_kernel(E *out, const E *x, size_t n) {
    BERT_GRID_STRIDE_LOOP(i, n) out[i] = from_float<E>(gelu_erf_value(to_float(x[i])));
}

template <typename E>
static __global__ void gelu_erf_backward_kernel(E *dx, const E *x, const E *dout, size_t n) {
    BERT_GRID_STRIDE_LOOP(i, n) dx[i] = from_float<E>(to_float(dout[i]) * gelu_erf_grad(to_float(x[i])));
}

template <typename E>
static __global__ void tanh_forward_kernel(E *out, const E *x, size_t n) {
    BERT_GRID_STRIDE_LOOP(i, n) out[i] = from_float<E>(tanhf(to_float(x[i])));
}

template <typename E>
static __global__ void tanh_backward_kernel(E *dx, const E *y, const E *dout, size_t n) {
    BERT_GRID_STRIDE_LOOP(i, n) {
        const float yi = to_float(y[i]);
        dx[i] = from_float<E>(to_float(dout[i]) * (1.0f - yi * yi));
    }
}

template <typename E>
static void gelu_erf_forward_t(E *out, const E *x, size_t n) {
    if (n == 0) return;
    gelu_erf_forward_kernel<<<grid_stride_blocks(n, bert_map_threads), bert_map_threads, 0, compute_stream()>>>(
        out, x, n);
    CHECK_LAUNCH();
}

template <typename E>
static void gelu_erf_backward_t(E *dx, const E *x, const E *dout, size_t n) {
    if (n == 0) return;
    gelu_erf_backward_kernel<<<grid_stride_blocks(n, bert_map_threads), bert_map_threads, 0, compute_stream()>>>(
        dx, x, dout, n);
    CHECK_LAUNCH();
}

template <typename E>
static void tanh_forward_t(E *out, const E *x, size_t n) {
    if (n == 0) return;
    tanh_forward_kernel<<<grid_stride_blocks(n, bert_map_threads), bert_map_threads, 0, compute_stream()>>>(out, x,
                                                                                                            n);
    CHECK_LAUNCH();
}

template <typename E>
static void tanh_backward_t(E *dx, const E *y, const E *dout, size_t n) {
    if (n == 0) return;
    tanh_backward_kernel<<<grid_stride_blocks(n, bert_map_threads), bert_map_threads, 0, compute_stream()>>>(
        dx, y, dout, n);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_gelu_erf_forward(bf16 *out, const bf16 *x, size_t n) { gelu_erf_forward_t(as_nv(out), as_nv(x), n); }
extern "C" void cuda_gelu_erf_forward_fp16(fp16 *out, const fp16 *x, size_t n) {
    gelu_erf_forward_t(as_half(out), as_half(x), n);
}
extern "C" void cuda_gelu_erf_backward(bf16 *dx, const bf16 *x, const bf16 *dout, size_t n) {
    gelu_erf_backward_t(as_nv(dx), as_nv(x), as_nv(dout), n);
}
extern "C" void cuda_gelu_erf_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, size_t n) {
    gelu_erf_backward_t(as_half(dx), as_half(x), as_half(dout), n);
}
extern "C" void cuda_tanh_forward(bf16 *out, const bf16 *x, size_t n) { tanh_forward_t(as_nv(out), as_nv(x), n); }
extern "C" void cuda_tanh_forward_fp16(fp16 *out, const fp16 *x, size_t n) { tanh_forward_t(as_half(out), as_half(x), n); }
extern "C" void cuda_tanh_backward(bf16 *dx, const bf16 *y, const bf16 *dout, size_t n) {
    tanh_backward_t(as_nv(dx), as_nv(y), as_nv(dout), n);
}
extern "C" void cuda_tanh_backward_fp16(fp16 *dx, const fp16 *y, const fp16 *dout, size_t n) {
    tanh_backward_t(as_half(dx), as_half(y), as_half(dout), n);
}
