/* cuda_fp8.cu: the fp8 quantization operations of the CUDA backend (issue 43; kernels/kernels.h,
 * fp8 emulation), against the CPU reference kernels/cpu/cpu_fp8.c:
 *   quantize     x (compute dtype) times *scale, rounded to E4M3 or E5M2 by the header's
 *                conversion (kernels/fp8_format.h: bit-exact with the GPU's saturating cvt, as
 *                tests/gpu/fp8_format_gpu_test.sh checks), with the input's amax;
 *   dequantize   the codes' values times *scale_inv, rounded once to the compute dtype;
 *   amax         max |x| alone (current scaling).
 * The amax of a call is a per-block maximum (NaN elements ignored, as fmaxf ignores them) folded
 * into *amax with an integer atomicMax on the float's bits: for non-negative floats the bit order
 * is the value order, and a maximum does not depend on the order it is taken in, so the result
 * is exact and reproducible. Scales live in device memory (the recipe updates them there). */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/fp8_format.h"

#define FP8_THREADS 256

static void check_format(int format) {
    if (format != FP8_E4M3 && format != FP8_E5M2)
        kernels_fatal(__FILE__, __LINE__, "fp8_quantize/fp8_dequantize: format %d is neither FP8_E4M3 (0) nor FP8_E5M2 (1)",
                      format);
}

/* folds this block's largest |x| (each thread's `local`) into *amax */
static __device__ void block_amax_into(float *amax, float local) {
    __shared__ float warp_max[FP8_THREADS / 32];
    for (int offset = 16; offset > 0; offset >>= 1) local = fmaxf(local, __shfl_xor_sync(0xffffffffu, local, offset));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = local;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = 0.0f;
        for (int w = 0; w < FP8_THREADS / 32; w++) m = fmaxf(m, warp_max[w]);
        atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(m)); /* m >= 0, not NaN */
    }
}

template <typename E>
static __global__ void fp8_quantize_kernel(uint8_t *out, float *amax, float *scale_inv, const E *x, size_t n,
                                           const float *scale, int format) {
    float s = *scale, local = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = to_float(x[i]);
        local = fmaxf(fabsf(v), local);
        out[i] = fp8_from_float(v * s, format);
    }
    if (amax) block_amax_into(amax, local);
    if (scale_inv && blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
}

template <typename E>
static __global__ void fp8_dequantize_kernel(E *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    float s = *scale_inv;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = from_float<E>(fp8_to_float(q[i], format) * s);
}

template <typename E>
static __global__ void fp8_amax_kernel(float *amax, const E *x, size_t n) {
    float local = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        local = fmaxf(fabsf(to_float(x[i])), local);
    block_amax_into(amax, local);
}

template <typename E>
static void fp8_quantize_t(uint8_t *out, float *amax, float *scale_inv, const E *x, size_t n, const float *scale,
                           int format) {
    check_format(format);
    if (n == 0 && !scale_inv) return;
    fp8_quantize_kernel<E><<<n ? grid_stride_blocks(n, FP8_THREADS) : 1, FP8_THREADS, 0, compute_stream()>>>(
        out, amax, scale_inv, x, n, scale, format);
    CHECK_LAUNCH();
}

template <typename E>
static void fp8_dequantize_t(E *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    check_format(format);
    if (n == 0) return;
    fp8_dequantize_kernel<E><<<grid_stride_blocks(n, FP8_THREADS), FP8_THREADS, 0, compute_stream()>>>(out, q, n,
                                                                                                      scale_inv, format);
    CHECK_LAUNCH();
}

template <typename E>
static void fp8_amax_t(float *amax, const E *x, size_t n) {
    if (n == 0) return;
    fp8_amax_kernel<E><<<grid_stride_blocks(n, FP8_THREADS), FP8_THREADS, 0, compute_stream()>>>(amax, x, n);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_fp8_quantize(uint8_t *out, float *amax, float *scale_inv, const bf16 *x, size_t n,
                                  const float *scale, int format) {
    fp8_quantize_t(out, amax, scale_inv, as_nv(x), n, scale, format);
}
extern "C" void cuda_fp8_quantize_fp16(uint8_t *out, float *amax, float *scale_inv, const fp16 *x, size_t n,
                                       const float *scale, int format) {
    fp8_quantize_t(out, amax, scale_inv, as_half(x), n, scale, format);
}
extern "C" void cuda_fp8_dequantize(bf16 *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    fp8_dequantize_t(as_nv(out), q, n, scale_inv, format);
}
extern "C" void cuda_fp8_dequantize_fp16(fp16 *out, const uint8_t *q, size_t n, const float *scale_inv, int format) {
    fp8_dequantize_t(as_half(out), q, n, scale_inv, format);
}
extern "C" void cuda_fp8_amax(float *amax, const bf16 *x, size_t n) { fp8_amax_t(amax, as_nv(x), n); }
extern "C" void cuda_fp8_amax_fp16(float *amax, const fp16 *x, size_t n) { fp8_amax_t(amax, as_half(x), n); }
