/* cuda_fp8_out.cuh: fp8 codes written by the kernel that makes a tensor (issue 43: the producers
 * of an fp8 linear's operand, kernels.h's fp8_output; and cuda_fp8.cu's quantization itself).
 * A producer's codes are bit for bit fp8_quantize's of what it stored: each value rounded to the
 * compute dtype first, then times *scale, converted by the hardware's saturating
 * cvt.rn.satfinite (the bits fp8_from_float gives: tests/gpu/fp8_format_gpu_test.sh); the amax
 * is the max of |stored value| (NaN ignored, as fmaxf ignores it), folded per block into *amax
 * with an integer atomicMax on the float's bits: for non-negative floats the bit order is the
 * value order, and a maximum does not depend on the order it is taken in, so the result is
 * exact and reproducible whatever the grid. */
#ifndef CUDA_FP8_OUT_CUH
#define CUDA_FP8_OUT_CUH

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/fp8_format.h"

#include <cuda_fp8.h>

/* the codes of a and b, a in the low byte */
static __device__ __forceinline__ uint32_t fp8x2_of(float a, float b, int format) {
    return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, format == FP8_E5M2 ? __NV_E5M2 : __NV_E4M3);
}

/* the codes of v[0..8) * s, packed low byte first; |v| folded into *local (NaN ignored) */
static __device__ __forceinline__ uint2 codes8(const float *v, float s, int format, float *local) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 8; j++) *local = fmaxf(fabsf(v[j]), *local);
#pragma unroll
    for (int j = 0; j < 4; j++) w[j] = fp8x2_of(v[2 * j] * s, v[2 * j + 1] * s, format);
    return make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
}

/* the codes of 8 values as E stores them (each rounded to E first) */
template <typename E>
static __device__ __forceinline__ uint2 stored_codes8(const float *v, float s, int format, float *local) {
    float r[8];
#pragma unroll
    for (int j = 0; j < 8; j++) r[j] = to_float(from_float<E>(v[j]));
    return codes8(r, s, format, local);
}

/* the code of one value as E stores it */
template <typename E>
static __device__ __forceinline__ uint8_t stored_code(float v, float s, int format, float *local) {
    float r = to_float(from_float<E>(v));
    *local = fmaxf(fabsf(r), *local);
    return fp8_from_float(r * s, format);
}

/* folds the block's largest |x| (each thread's `local`) into *amax (skipped when NULL) and,
 * from block 0, *scale_inv = 1 / s (skipped when NULL). Every thread of the block calls it;
 * blockDim.x a multiple of 32, at most 1024. */
static __device__ void fp8_block_finish(float *amax, float *scale_inv, float local, float s) {
    __shared__ float warp_max[32];
    if (scale_inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
    if (!amax) return;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) local = fmaxf(local, __shfl_xor_sync(0xffffffffu, local, offset));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = local;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = 0.0f;
        for (int w = 0; w < (int)(blockDim.x / 32); w++) m = fmaxf(m, warp_max[w]);
        atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(m)); /* m >= 0, not NaN */
    }
}

/* a thread's 16 rows x 4 columns of codes (w[j]: row j's 4 bytes) transposed in registers
 * (byte_perm) and stored as 4 x 16 bytes: column k's 16 rows at dst + k ld (the transposed
 * stores of fp8_quantize_transpose_vec_kernel and the fp8 MLP backward) */
static __device__ __forceinline__ void store_codes_transposed_16x4(uint8_t *dst, size_t ld, const uint32_t (&w)[16]) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const unsigned pick = (unsigned)k | (unsigned)(k + 4) << 4; /* byte k of the first, of the second */
        uint32_t q[4];
#pragma unroll
        for (int m = 0; m < 4; m++)
            q[m] = __byte_perm(__byte_perm(w[4 * m], w[4 * m + 1], pick), __byte_perm(w[4 * m + 2], w[4 * m + 3], pick),
                               0x5410);
        *reinterpret_cast<uint4 *>(dst + (size_t)k * ld) = make_uint4(q[0], q[1], q[2], q[3]);
    }
}

/* the fallback of a producer whose fused path does not apply: fp8_quantize of what it stored */
static inline void fp8_quantize_after(const __nv_bfloat16 *x, size_t n, const fp8_output *q) {
    cuda_fp8_quantize(q->codes, q->amax, q->scale_inv, reinterpret_cast<const bf16 *>(x), n, q->scale, q->format);
}
static inline void fp8_quantize_after(const __half *x, size_t n, const fp8_output *q) {
    cuda_fp8_quantize_fp16(q->codes, q->amax, q->scale_inv, reinterpret_cast<const fp16 *>(x), n, q->scale, q->format);
}

/* whether a producer's fused path can write q's codes 8 at a time */
static inline bool fp8_out_aligned(const fp8_output *q) { return ((uintptr_t)q->codes & 7u) == 0; }

#endif
