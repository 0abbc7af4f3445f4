/* cuda_swiglu.cu: SwiGLU on bf16 or fp16 x[N,2F] rows [gate | up] (templates on the element
 * type, cuda_kernels_t.cuh), as the CPU reference
 * (kernels/cpu/cpu_swiglu.c): out = silu(a) * u; backward da = dout * u * s (1 + a (1 - s)),
 * du = dout * a s with s = sigmoid(a), computed in fp32 from the bf16 inputs. Rows whose F is a
 * multiple of 8 (16-byte aligned) go through 128-bit loads and stores, a block row of threads per
 * 8 x blockDim columns and the rows over the grid's y (no integer division per element: the
 * flat loop's 64-bit divide made a 32768 x 2816 forward 315 us on an H200); others through the
 * flat loop. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_swiglu.cuh"

#define SWIGLU_VEC_THREADS 128

/* FP8: also the fp8 codes of the output (kernels.h's fp8_output, cuda_fp8_out.cuh): fc2's input
 * in an fp8 layer; q unused otherwise */
template <typename E, bool FP8>
static __global__ void swiglu_forward_vec_kernel(E *out, const E *x, int N, int F, fp8_output q) {
    float s = 0.0f, local = 0.0f;
    if constexpr (FP8) s = *q.scale;
    int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (c < F) {
        for (int n = blockIdx.y; n < N; n += gridDim.y) {
            float a[8], u[8], o[8];
            load_x8(a, x + (size_t)n * 2 * F + c);
            load_x8(u, x + (size_t)n * 2 * F + F + c);
#pragma unroll
            for (int i = 0; i < 8; i++) o[i] = swiglu_value(a[i], u[i]);
            store_x8(out + (size_t)n * F + c, o);
            if constexpr (FP8)
                *reinterpret_cast<uint2 *>(q.codes + (size_t)n * F + c) = stored_codes8<E>(o, s, q.format, &local);
        }
    }
    if constexpr (FP8) fp8_block_finish(q.amax, q.scale_inv, local, s);
}

/* REMAKE: also out = swiglu(x), stored after this thread's dout is read (out may alias dout) */
template <typename E, bool REMAKE>
static __global__ void swiglu_backward_vec_kernel(E *dx, E *out, const E *x, const E *dout, int N, int F) {
    int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (c >= F) return;
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        float a[8], u[8], d[8], da[8], du[8];
        load_x8(a, x + (size_t)n * 2 * F + c);
        load_x8(u, x + (size_t)n * 2 * F + F + c);
        load_x8(d, dout + (size_t)n * F + c);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            da[i] = swiglu_grad_gate(a[i], u[i], d[i]);
            du[i] = swiglu_grad_up(a[i], d[i]);
        }
        store_x8(dx + (size_t)n * 2 * F + c, da);
        store_x8(dx + (size_t)n * 2 * F + F + c, du);
        if constexpr (REMAKE) {
#pragma unroll
            for (int i = 0; i < 8; i++) d[i] = swiglu_value(a[i], u[i]);
            store_x8(out + (size_t)n * F + c, d);
        }
    }
}

/* the vectorized kernels' grid: columns in x, rows in y (at most 65535, looped beyond) */
static dim3 swiglu_vec_grid(int N, int F) {
    return dim3(ceil_div((size_t)F / 8, SWIGLU_VEC_THREADS), (unsigned int)(N < 65535 ? N : 65535));
}

template <typename E>
static bool swiglu_vectorizable(const E *a, const E *b, int F) {
    return F % 8 == 0 && aligned16(a) && aligned16(b);
}

template <typename E>
static __global__ void swiglu_forward_kernel(E *out, const E *x, int F,
                                             size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = to_float(x[n * 2 * F + f]), u = to_float(x[n * 2 * F + F + f]);
        out[idx] = from_float<E>(swiglu_value(a, u));
    }
}

template <typename E>
static __global__ void swiglu_backward_kernel(E *dx, const E *x,
                                              const E *dout, int F, size_t total) {
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, f = idx % F;
        const float a = to_float(x[n * 2 * F + f]), u = to_float(x[n * 2 * F + F + f]);
        const float d = to_float(dout[idx]);
        dx[n * 2 * F + f] = from_float<E>(swiglu_grad_gate(a, u, d));
        dx[n * 2 * F + F + f] = from_float<E>(swiglu_grad_up(a, d));
    }
}

template <typename E>
static void swiglu_forward_t(E *out, const E *x, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    if (swiglu_vectorizable(out, x, F)) {
        swiglu_forward_vec_kernel<E, false><<<swiglu_vec_grid(N, F), SWIGLU_VEC_THREADS, 0, compute_stream()>>>(out, x, N, F,
                                                                                                     fp8_output{});
        CHECK_LAUNCH();
        return;
    }
    swiglu_forward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        out, x, F, total);
    CHECK_LAUNCH();
}

/* the forward with the fp8 codes of its output: fused where the vectorized kernel runs (its rows
 * over fewer blocks, so that fewer fold their amax), otherwise fp8_quantize after */
template <typename E>
static void swiglu_forward_fp8_t(E *out, const E *x, int N, int F, const fp8_output *q) {
    const size_t total = (size_t)N * F;
    if (total == 0 || !swiglu_vectorizable(out, x, F) || !fp8_out_aligned(q)) {
        swiglu_forward_t(out, x, N, F);
        fp8_quantize_after(out, total, q);
        return;
    }
    dim3 grid = swiglu_vec_grid(N, F);
    unsigned int rows = (unsigned int)device_sm_count() * 16 / grid.x;
    if (rows < 1) rows = 1;
    if (rows < grid.y) grid.y = rows;
    swiglu_forward_vec_kernel<E, true><<<grid, SWIGLU_VEC_THREADS, 0, compute_stream()>>>(out, x, N, F, *q);
    CHECK_LAUNCH();
}

template <typename E>
static void swiglu_backward_t(E *dx, const E *x, const E *dout, int N, int F) {
    const size_t total = (size_t)N * F;
    if (total == 0) return;
    if (swiglu_vectorizable(dx, x, F) && aligned16(dout)) {
        swiglu_backward_vec_kernel<E, false><<<swiglu_vec_grid(N, F), SWIGLU_VEC_THREADS, 0, compute_stream()>>>(
            dx, (E *)NULL, x, dout, N, F);
        CHECK_LAUNCH();
        return;
    }
    swiglu_backward_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        dx, x, dout, F, total);
    CHECK_LAUNCH();
}

/* the backward and the forward's output again in one pass where the vectorized kernel runs
 * (fc2's input for its weight gradient: 12 bytes an element instead of 16); elsewhere the two
 * kernels in turn (the backward first: out may alias dout) */
template <typename E>
static void swiglu_backward_remake_t(E *dx, E *out, const E *x, const E *dout, int N, int F) {
    if ((size_t)N * F == 0) return;
    if (swiglu_vectorizable(dx, x, F) && aligned16(dout) && aligned16(out)) {
        swiglu_backward_vec_kernel<E, true><<<swiglu_vec_grid(N, F), SWIGLU_VEC_THREADS, 0, compute_stream()>>>(
            dx, out, x, dout, N, F);
        CHECK_LAUNCH();
        return;
    }
    swiglu_backward_t(dx, x, dout, N, F);
    swiglu_forward_t(out, x, N, F);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_swiglu_forward(bf16 *out, const bf16 *x, int N, int F) {
    swiglu_forward_t(as_nv(out), as_nv(x), N, F);
}

extern "C" void cuda_swiglu_forward_fp8(bf16 *out, const bf16 *x, int N, int F, const fp8_output *q) {
    swiglu_forward_fp8_t(as_nv(out), as_nv(x), N, F, q);
}

extern "C" void cuda_swiglu_forward_fp8_fp16(fp16 *out, const fp16 *x, int N, int F, const fp8_output *q) {
    swiglu_forward_fp8_t(as_half(out), as_half(x), N, F, q);
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

extern "C" void cuda_swiglu_backward_remake(bf16 *dx, bf16 *out, const bf16 *x, const bf16 *dout, int N, int F) {
    swiglu_backward_remake_t(as_nv(dx), as_nv(out), as_nv(x), as_nv(dout), N, F);
}

extern "C" void cuda_swiglu_backward_remake_fp16(fp16 *dx, fp16 *out, const fp16 *x, const fp16 *dout, int N, int F) {
    swiglu_backward_remake_t(as_half(dx), as_half(out), as_half(x), as_half(dout), N, F);
}
