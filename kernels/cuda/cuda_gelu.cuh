/* cuda_gelu.cuh: GeLU's tanh approximation and its derivative in fp32 (Megatron's bias_gelu_impl),
 * shared by the elementwise kernels (cuda_elementwise.cu) and the GeLU backward fused with fp8
 * quantize-and-transpose (cuda_fp8.cu), so that both compute the same bits. */
#ifndef CUDA_GELU_CUH
#define CUDA_GELU_CUH

#define GELU_SCALING_FACTOR 0.7978845608028654f /* sqrt(2/pi) */

static __device__ __forceinline__ float gelu_value(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

static __device__ __forceinline__ float gelu_grad(float x) {
    float cube = 0.044715f * x * x * x;
    float tanh_out = tanhf(GELU_SCALING_FACTOR * (x + cube));
    float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) +
           x * 0.5f * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

#endif
