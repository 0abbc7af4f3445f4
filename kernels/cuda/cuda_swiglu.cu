/* cuda_swiglu.cu: SwiGLU on bf16 x[N,2F] rows [gate | up], as the CPU reference
 * (kernels/cpu/cpu_swiglu.c): out = silu(a) * u; backward da = dout * u * s (1 + a (1 - s)),
 * du = dout * a s with s = sigmoid(a), computed in fp32 from the bf16 inputs. */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void swiglu_forward_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *x, int F,
                                             size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = __bfloat162float(x[n * 2 * F + f]), u = __bfloat162float(x[n * 2 * F + F + f]);
        out[idx] = __float2bfloat16_rn(a / (1.0f + expf(-a)) * u);
    }
}

static __global__ void swiglu_backward_kernel(__nv_bfloat16 *dx, const __nv_bfloat16 *x,
                                              const __nv_bfloat16 *dout, int F, size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = __bfloat162float(x[n * 2 * F + f]), u = __bfloat162float(x[n * 2 * F + F + f]);
        const float d = __bfloat162float(dout[idx]), s = 1.0f / (1.0f + expf(-a));
        dx[n * 2 * F + f] = __float2bfloat16_rn(d * u * s * (1.0f + a * (1.0f - s)));
        dx[n * 2 * F + F + f] = __float2bfloat16_rn(d * a * s);
    }
}

extern "C" void cuda_swiglu_forward(bf16 *out, const bf16 *x, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    swiglu_forward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        as_nv(out), as_nv(x), F, total);
    CHECK_LAUNCH();
}

extern "C" void cuda_swiglu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    swiglu_backward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        as_nv(dx), as_nv(x), as_nv(dout), F, total);
    CHECK_LAUNCH();
}
