/* cuda_swiglu.cu: SwiGLU on bf16 or fp16 x[N,2F] rows [gate | up] (templates on the element
 * type, cuda_kernels_t.cuh), as the CPU reference
 * (kernels/cpu/cpu_swiglu.c): out = silu(a) * u; backward da = dout * u * s (1 + a (1 - s)),
 * du = dout * a s with s = sigmoid(a), computed in fp32 from the bf16 inputs. */
#include "kernels/cuda/cuda_common.cuh"

template <typename E>
static __global__ void swiglu_forward_kernel(E *out, const E *x, int F,
                                             size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = to_float(x[n * 2 * F + f]), u = to_float(x[n * 2 * F + F + f]);
        out[idx] = from_float<E>(a / (1.0f + expf(-a)) * u);
    }
}

template <typename E>
static __global__ void swiglu_backward_kernel(E *dx, const E *x,
                                              const E *dout, int F, size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = to_float(x[n * 2 * F + f]), u = to_float(x[n * 2 * F + F + f]);
        const float d = to_float(dout[idx]), s = 1.0f / (1.0f + expf(-a));
        dx[n * 2 * F + f] = from_float<E>(d * u * s * (1.0f + a * (1.0f - s)));
        dx[n * 2 * F + F + f] = from_float<E>(d * a * s);
    }
}

template <typename E>
static void swiglu_forward_t(E *out, const E *x, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    swiglu_forward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        out, x, F, total);
    CHECK_LAUNCH();
}

template <typename E>
static void swiglu_backward_t(E *dx, const E *x, const E *dout, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    swiglu_backward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        dx, x, dout, F, total);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_swiglu_forward(bf16 *out, const bf16 *x, int N, int F) {
    swiglu_forward_t(as_nv(out), as_nv(x), N, F);
}

extern "C" void cuda_swiglu_forward_fp16(fp16 *out, const fp16 *x, int N, int F) {
    swiglu_forward_t(as_half(out), as_half(x), N, F);
}

extern "C" void cuda_swiglu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, int N, int F) {
    swiglu_backward_t(as_nv(dx), as_nv(x), as_nv(dout), N, F);
}

extern "C" void cuda_swiglu_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int N, int F) {
    swiglu_backward_t(as_half(dx), as_half(x), as_half(dout), N, F);
}
