/* cuda_swiglu.cuh: SwiGLU's value and gradients in fp32 (out = silu(a) u; da = d u s (1 + a (1 - s)),
 * du = d a s with s = sigmoid(a)), shared by the SwiGLU kernels (cuda_swiglu.cu) and the SwiGLU
 * fused with fp8 quantize-and-transpose (cuda_fp8.cu), so that both compute the same bits. */
#ifndef CUDA_SWIGLU_CUH
#define CUDA_SWIGLU_CUH

static __device__ __forceinline__ float swiglu_value(float a, float u) { return a / (1.0f + expf(-a)) * u; }

static __device__ __forceinline__ float swiglu_grad_gate(float a, float u, float d) {
    const float s = 1.0f / (1.0f + expf(-a));
    return d * u * s * (1.0f + a * (1.0f - s));
}

static __device__ __forceinline__ float swiglu_grad_up(float a, float d) {
    const float s = 1.0f / (1.0f + expf(-a));
    return d * a * s;
}

#endif
