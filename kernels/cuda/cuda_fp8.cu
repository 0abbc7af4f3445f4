/* cuda_fp8.cu: the fp8 quantization operations of the CUDA backend (issue 43; kernels/kernels.h,
 * fp8 emulation), against the CPU reference kernels/cpu/cpu_fp8.c:
 *   quantize     x (compute dtype) times *scale, rounded to E4M3 or E5M2 by the header's
 *                conversion (kernels/fp8_format.h: bit-exact with the GPU's saturating cvt, as
 *                tests/gpu/fp8_format_gpu_test.sh checks), with the input's amax;
 *   dequantize   the codes' values times *scale_inv, rounded once to the compute dtype;
 *   amax         max |x| alone (current scaling);
 *   quantize_transpose  quantize with the codes also written transposed, in one pass (the
 *                backward's fp8 GEMM operands, TE's cast_transpose).
 * The fast paths move 16 bytes a load and (quantize) 16 bytes a store, and the transposed stores
 * are coalesced: consecutive threads write consecutive 16-byte pieces of one transposed row
 * (perf/fp8_quant_bench measures them against the device's copy bandwidth).
 * The amax of a call is a per-block maximum (NaN elements ignored, as fmaxf ignores them) folded
 * into *amax with an integer atomicMax on the float's bits: for non-negative floats the bit order
 * is the value order, and a maximum does not depend on the order it is taken in, so the result
 * is exact and reproducible. Scales live in device memory (the recipe updates them there). */
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_gelu.cuh"
#include "kernels/cuda/cuda_swiglu.cuh"

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

/* ---- the vectorized paths: 8 elements (16 bytes of bf16/fp16) per load, the hardware's
 * two-at-a-time conversion cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (codes8, cuda_fp8_out.cuh: the
 * bits fp8_from_float gives, tests/gpu/fp8_format_gpu_test.sh), 8 or 16 codes per store ---- */

/* 8 elements at x as floats */
template <typename E>
static __device__ __forceinline__ void load8(float *v, const E *x) {
    union {
        uint4 raw;
        E e[8];
    } u;
    u.raw = *reinterpret_cast<const uint4 *>(x);
    for (int j = 0; j < 8; j++) v[j] = to_float(u.e[j]);
}

template <typename E>
static __global__ void fp8_quantize_vec_kernel(uint8_t *out, float *amax, float *scale_inv, const E *x, size_t n8,
                                               const float *scale, int format) {
    float s = *scale, local = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        float v[8];
        load8(v, x + 8 * i);
        reinterpret_cast<uint2 *>(out)[i] = codes8(v, s, format, &local);
    }
    if (amax) block_amax_into(amax, local);
    if (scale_inv && blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
}

/* 16 elements a thread: two 16-byte loads, one 16-byte store of codes (n a multiple of 16, x and
 * out 16-byte aligned); the same codes and amax as the 8-element kernel */
template <typename E>
static __global__ void fp8_quantize_vec16_kernel(uint8_t *out, float *amax, float *scale_inv, const E *x, size_t n16,
                                                 const float *scale, int format) {
    float s = *scale, local = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        float v[8], w[8];
        load8(v, x + 16 * i);
        load8(w, x + 16 * i + 8);
        uint2 lo = codes8(v, s, format, &local), hi = codes8(w, s, format, &local);
        reinterpret_cast<uint4 *>(out)[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
    if (amax) block_amax_into(amax, local);
    if (scale_inv && blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
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
    if (n % 16 == 0 && n > 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)out & 15u) == 0) {
        fp8_quantize_vec16_kernel<E><<<grid_stride_blocks(n / 16, FP8_THREADS), FP8_THREADS, 0, compute_stream()>>>(
            out, amax, scale_inv, x, n / 16, scale, format);
        CHECK_LAUNCH();
        return;
    }
    if (n % 8 == 0 && n > 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)out & 7u) == 0) {
        fp8_quantize_vec_kernel<E><<<grid_stride_blocks(n / 8, FP8_THREADS), FP8_THREADS, 0, compute_stream()>>>(
            out, amax, scale_inv, x, n / 8, scale, format);
        CHECK_LAUNCH();
        return;
    }
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

/* ---- quantize and transpose in one pass (fp8_quantize_transpose): the codes of x [rows, cols]
 * row-major and transposed [cols, rows], as fp8_quantize then fp8_transpose give them. A block
 * quantizes a 64 x 64 tile into shared memory, writing the row-major codes 4 bytes at a time,
 * then writes the tile's columns as rows of the transpose, 4 bytes at a time. ---- */

#define QT_TILE 64

/* 4 codes from the tile row-major or transposed into out at `at`, 4 bytes at once when they fit */
static __device__ void store_codes(uint8_t *out, size_t at, const uint8_t *codes, int count, bool aligned) {
    if (count == 4 && aligned) {
        *reinterpret_cast<uint32_t *>(out + at) = (uint32_t)codes[0] | (uint32_t)codes[1] << 8 |
                                                  (uint32_t)codes[2] << 16 | (uint32_t)codes[3] << 24;
        return;
    }
    for (int j = 0; j < count; j++) out[at + j] = codes[j];
}

template <typename E>
static __global__ void fp8_quantize_transpose_kernel(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv,
                                                     const E *x, int rows, int cols, const float *scale, int format) {
    __shared__ uint8_t tile[QT_TILE][QT_TILE + 4];
    float s = *scale, local = 0.0f;
    int r0 = blockIdx.y * QT_TILE, c0 = blockIdx.x * QT_TILE;
    int lane4 = threadIdx.x % 16, line = threadIdx.x / 16; /* 16 threads x 4 elements per tile row */
    for (int dy = line; dy < QT_TILE; dy += FP8_THREADS / 16) {
        int r = r0 + dy, c = c0 + lane4 * 4;
        uint8_t codes[4] = {0, 0, 0, 0};
        for (int j = 0; j < 4; j++)
            if (r < rows && c + j < cols) {
                float v = to_float(x[(size_t)r * cols + c + j]);
                local = fmaxf(fabsf(v), local);
                codes[j] = fp8_from_float(v * s, format);
            }
        for (int j = 0; j < 4; j++) tile[dy][lane4 * 4 + j] = codes[j];
        if (r < rows && c < cols)
            store_codes(out, (size_t)r * cols + c, codes, min(4, cols - c), cols % 4 == 0);
    }
    __syncthreads();
    for (int dc = line; dc < QT_TILE; dc += FP8_THREADS / 16) {
        int c = c0 + dc, r = r0 + lane4 * 4;
        if (c >= cols || r >= rows) continue;
        uint8_t codes[4];
        for (int j = 0; j < 4; j++) codes[j] = tile[lane4 * 4 + j][dc];
        store_codes(out_t, (size_t)c * rows + r, codes, min(4, rows - r), rows % 4 == 0);
    }
    if (amax) block_amax_into(amax, local);
    if (scale_inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
}

/* the vectorized tile: 128 x 128 elements, 256 threads. Phase 1 (16 tile rows a pass): a thread
 * quantizes 8 consecutive elements of a row (one 16-byte load) and stores their 8 codes (16
 * threads write a row's 128 contiguous bytes) and into the shared tile. Phase 2: a thread takes
 * 4 columns x 16 rows of the tile (16 shared words), transposes them in registers (byte_perm)
 * and writes 4 pieces of 16 bytes, one into each of 4 transposed rows: the 8 threads of a
 * column write its 128 contiguous bytes. rows a multiple of 16, cols of 8; x and out_t 16-byte
 * aligned, out 8-byte aligned. */
#define QT_VEC_TILE 128
#define QT_VEC_PITCH 33 /* words a tile row: 32 + 1 */

/* what the tile kernel quantizes: x itself; or an activation's value it writes first into dx
 * [rows, cols]: dx = gelu'(x) dout (as gelu_backward_kernel), gelu(x) (as gelu_forward_kernel),
 * SwiGLU's gradient [da | du] of x [rows, 2 half] = [a | u] and dout [rows, half] (cols = 2 half,
 * as swiglu_backward_vec_kernel), or swiglu(x) (cols = half, as swiglu_forward_vec_kernel) */
enum { QT_PLAIN, QT_GELU_BACKWARD, QT_GELU_FORWARD, QT_SWIGLU_BACKWARD, QT_SWIGLU_FORWARD };

template <typename E, int MODE>
static __global__ void fp8_quantize_transpose_vec_kernel(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv,
                                                         const E *x, int rows, int cols, const float *scale,
                                                         int format, E *dx, const E *dout, int half) {
    __shared__ uint32_t tile[QT_VEC_TILE * QT_VEC_PITCH];
    float s = *scale, local = 0.0f;
    int r0 = blockIdx.y * QT_VEC_TILE, c0 = blockIdx.x * QT_VEC_TILE;
    int part = threadIdx.x % 16, line = threadIdx.x / 16; /* 16 threads x 8 elements per tile row */
    for (int dy = line; dy < QT_VEC_TILE; dy += FP8_THREADS / 16) {
        int r = r0 + dy, c = c0 + part * 8;
        uint2 codes = make_uint2(0u, 0u);
        if (r < rows && c < cols) {
            size_t at = (size_t)r * cols + c;
            float v[8];
            if constexpr (MODE == QT_GELU_BACKWARD) { /* gelu_backward_kernel's values, stored */
                float d[8];
                load_x8(v, x + at);
                load_x8(d, dout + at);
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = gelu_grad(v[k]) * d[k];
                store_x8(dx + at, v);
                codes = stored_codes8<E>(v, s, format, &local);
            } else if constexpr (MODE == QT_GELU_FORWARD) { /* gelu_forward_kernel's values, stored */
                load_x8(v, x + at);
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = gelu_value(v[k]);
                store_x8(dx + at, v);
                codes = stored_codes8<E>(v, s, format, &local);
            } else if constexpr (MODE == QT_SWIGLU_BACKWARD) { /* da (c < half) or du, stored */
                int f = c < half ? c : c - half;
                float a[8], u[8], d[8];
                load_x8(a, x + (size_t)r * 2 * half + f);
                load_x8(u, x + (size_t)r * 2 * half + half + f);
                load_x8(d, dout + (size_t)r * half + f);
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = c < half ? swiglu_grad_gate(a[k], u[k], d[k]) : swiglu_grad_up(a[k], d[k]);
                store_x8(dx + at, v);
                codes = stored_codes8<E>(v, s, format, &local);
            } else if constexpr (MODE == QT_SWIGLU_FORWARD) { /* swiglu_forward_vec_kernel's values, stored */
                float u[8];
                load_x8(v, x + (size_t)r * 2 * half + c);
                load_x8(u, x + (size_t)r * 2 * half + half + c);
#pragma unroll
                for (int k = 0; k < 8; k++) v[k] = swiglu_value(v[k], u[k]);
                store_x8(dx + at, v);
                codes = stored_codes8<E>(v, s, format, &local);
            } else {
                load8(v, x + at);
                codes = codes8(v, s, format, &local);
            }
            *reinterpret_cast<uint2 *>(out + at) = codes;
        }
        tile[dy * QT_VEC_PITCH + 2 * part] = codes.x;
        tile[dy * QT_VEC_PITCH + 2 * part + 1] = codes.y;
    }
    __syncthreads();
    int piece = threadIdx.x % 8, group = threadIdx.x / 8; /* rows 16 piece .., columns 4 group .. */
    int r = r0 + 16 * piece, c = c0 + 4 * group;
    if (r < rows && c < cols) {
        uint32_t w[16];
        for (int j = 0; j < 16; j++) w[j] = tile[(16 * piece + j) * QT_VEC_PITCH + group];
        /* all 4 columns exist: c is a multiple of 4, cols of 8 */
        store_codes_transposed_16x4(out_t + (size_t)c * rows + r, (size_t)rows, w);
    }
    if (amax) block_amax_into(amax, local);
    if (scale_inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / s;
}

/* whether the vectorized tile kernel takes x [rows, cols] */
static bool qt_vectorizable(const uint8_t *out, const uint8_t *out_t, const void *x, int rows, int cols) {
    return rows % 16 == 0 && cols % 8 == 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)out & 7u) == 0 &&
           ((uintptr_t)out_t & 15u) == 0;
}

template <typename E>
static void fp8_quantize_transpose_t(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const E *x, int rows,
                                     int cols, const float *scale, int format) {
    check_format(format);
    if (rows == 0 || cols == 0) {
        if (scale_inv) fp8_quantize_t(out, NULL, scale_inv, x, 0, scale, format);
        return;
    }
    if (qt_vectorizable(out, out_t, x, rows, cols)) {
        dim3 grid((unsigned)ceil_div(cols, QT_VEC_TILE), (unsigned)ceil_div(rows, QT_VEC_TILE));
        fp8_quantize_transpose_vec_kernel<E, QT_PLAIN><<<grid, FP8_THREADS, 0, compute_stream()>>>(
            out, out_t, amax, scale_inv, x, rows, cols, scale, format, (E *)NULL, (const E *)NULL, 0);
    } else {
        dim3 grid((unsigned)ceil_div(cols, QT_TILE), (unsigned)ceil_div(rows, QT_TILE));
        fp8_quantize_transpose_kernel<E><<<grid, FP8_THREADS, 0, compute_stream()>>>(out, out_t, amax, scale_inv, x,
                                                                                     rows, cols, scale, format);
    }
    CHECK_LAUNCH();
}

/* ---- GeLU fused with quantize-and-transpose (kernels.h's gelu_backward_fp8: fc1's output
 * gradient dx = gelu'(x) dout; gelu_forward_fp8_transpose: fc2's input made again in the
 * backward), written with its codes and their transpose in one pass by the vectorized tile
 * kernel; elsewhere the plain GeLU kernel then fp8_quantize_transpose ---- */

static void gelu_plain(__nv_bfloat16 *dx, const __nv_bfloat16 *x, const __nv_bfloat16 *dout, size_t n) {
    if (dout) cuda_gelu_backward((bf16 *)dx, (const bf16 *)x, (const bf16 *)dout, n);
    else cuda_gelu_forward((bf16 *)dx, (const bf16 *)x, n);
}
static void gelu_plain(__half *dx, const __half *x, const __half *dout, size_t n) {
    if (dout) cuda_gelu_backward_fp16((fp16 *)dx, (const fp16 *)x, (const fp16 *)dout, n);
    else cuda_gelu_forward_fp16((fp16 *)dx, (const fp16 *)x, n);
}

/* dx = gelu'(x) dout (dout not NULL) or gelu(x) (dout NULL), with q's codes of dx and their
 * transpose codes_t */
template <typename E>
static void gelu_fp8_transpose_t(E *dx, const E *x, const E *dout, int rows, int cols, const fp8_output *q,
                                 uint8_t *codes_t) {
    check_format(q->format);
    bool vectorized = rows > 0 && cols > 0 && qt_vectorizable(q->codes, codes_t, x, rows, cols) &&
                      ((uintptr_t)dx & 15u) == 0 && ((uintptr_t)dout & 15u) == 0;
    if (!vectorized) {
        gelu_plain(dx, x, dout, (size_t)rows * (size_t)cols);
        fp8_quantize_transpose_t(q->codes, codes_t, q->amax, q->scale_inv, (const E *)dx, rows, cols, q->scale, q->format);
        return;
    }
    dim3 grid((unsigned)ceil_div(cols, QT_VEC_TILE), (unsigned)ceil_div(rows, QT_VEC_TILE));
    if (dout)
        fp8_quantize_transpose_vec_kernel<E, QT_GELU_BACKWARD><<<grid, FP8_THREADS, 0, compute_stream()>>>(
            q->codes, codes_t, q->amax, q->scale_inv, x, rows, cols, q->scale, q->format, dx, dout, 0);
    else
        fp8_quantize_transpose_vec_kernel<E, QT_GELU_FORWARD><<<grid, FP8_THREADS, 0, compute_stream()>>>(
            q->codes, codes_t, q->amax, q->scale_inv, x, rows, cols, q->scale, q->format, dx, (const E *)NULL, 0);
    CHECK_LAUNCH();
}

/* ---- SwiGLU fused with quantize-and-transpose likewise (kernels.h's swiglu_backward_fp8: fc1's
 * output gradient [da | du] [N, 2F]; swiglu_forward_fp8_transpose: fc2's input [N, F] made again
 * in the backward); elsewhere the plain SwiGLU kernel then fp8_quantize_transpose ---- */

static void swiglu_plain(__nv_bfloat16 *dx, const __nv_bfloat16 *x, const __nv_bfloat16 *dout, int N, int F) {
    if (dout) cuda_swiglu_backward((bf16 *)dx, (const bf16 *)x, (const bf16 *)dout, N, F);
    else cuda_swiglu_forward((bf16 *)dx, (const bf16 *)x, N, F);
}
static void swiglu_plain(__half *dx, const __half *x, const __half *dout, int N, int F) {
    if (dout) cuda_swiglu_backward_fp16((fp16 *)dx, (const fp16 *)x, (const fp16 *)dout, N, F);
    else cuda_swiglu_forward_fp16((fp16 *)dx, (const fp16 *)x, N, F);
}

/* dx [N, 2F] = SwiGLU's gradient (dout [N, F] not NULL) or dx [N, F] = swiglu(x) (dout NULL) of
 * x [N, 2F], with q's codes of dx and their transpose codes_t */
template <typename E>
static void swiglu_fp8_transpose_t(E *dx, const E *x, const E *dout, int N, int F, const fp8_output *q,
                                   uint8_t *codes_t) {
    check_format(q->format);
    int cols = dout ? 2 * F : F;
    bool vectorized = N > 0 && F > 0 && F % 8 == 0 && qt_vectorizable(q->codes, codes_t, x, N, cols) &&
                      ((uintptr_t)dx & 15u) == 0 && ((uintptr_t)dout & 15u) == 0;
    if (!vectorized) {
        swiglu_plain(dx, x, dout, N, F);
        fp8_quantize_transpose_t(q->codes, codes_t, q->amax, q->scale_inv, (const E *)dx, N, cols, q->scale, q->format);
        return;
    }
    dim3 grid((unsigned)ceil_div(cols, QT_VEC_TILE), (unsigned)ceil_div(N, QT_VEC_TILE));
    if (dout)
        fp8_quantize_transpose_vec_kernel<E, QT_SWIGLU_BACKWARD><<<grid, FP8_THREADS, 0, compute_stream()>>>(
            q->codes, codes_t, q->amax, q->scale_inv, x, N, cols, q->scale, q->format, dx, dout, F);
    else
        fp8_quantize_transpose_vec_kernel<E, QT_SWIGLU_FORWARD><<<grid, FP8_THREADS, 0, compute_stream()>>>(
            q->codes, codes_t, q->amax, q->scale_inv, x, N, cols, q->scale, q->format, dx, (const E *)NULL, F);
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
extern "C" void cuda_fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const bf16 *x,
                                            int rows, int cols, const float *scale, int format) {
    fp8_quantize_transpose_t(out, out_t, amax, scale_inv, as_nv(x), rows, cols, scale, format);
}
extern "C" void cuda_fp8_quantize_transpose_fp16(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv,
                                                 const fp16 *x, int rows, int cols, const float *scale, int format) {
    fp8_quantize_transpose_t(out, out_t, amax, scale_inv, as_half(x), rows, cols, scale, format);
}
extern "C" void cuda_gelu_backward_fp8(bf16 *dx, const bf16 *x, const bf16 *dout, int rows, int cols,
                                       const fp8_output *q, uint8_t *codes_t) {
    gelu_fp8_transpose_t(as_nv(dx), as_nv(x), as_nv(dout), rows, cols, q, codes_t);
}
extern "C" void cuda_gelu_backward_fp8_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int rows, int cols,
                                            const fp8_output *q, uint8_t *codes_t) {
    gelu_fp8_transpose_t(as_half(dx), as_half(x), as_half(dout), rows, cols, q, codes_t);
}
extern "C" void cuda_gelu_forward_fp8_transpose(bf16 *out, const bf16 *x, int rows, int cols, const fp8_output *q,
                                                uint8_t *codes_t) {
    gelu_fp8_transpose_t(as_nv(out), as_nv(x), (const __nv_bfloat16 *)NULL, rows, cols, q, codes_t);
}
extern "C" void cuda_gelu_forward_fp8_transpose_fp16(fp16 *out, const fp16 *x, int rows, int cols,
                                                     const fp8_output *q, uint8_t *codes_t) {
    gelu_fp8_transpose_t(as_half(out), as_half(x), (const __half *)NULL, rows, cols, q, codes_t);
}
extern "C" void cuda_swiglu_backward_fp8(bf16 *dx, const bf16 *x, const bf16 *dout, int N, int F, const fp8_output *q,
                                         uint8_t *codes_t) {
    swiglu_fp8_transpose_t(as_nv(dx), as_nv(x), as_nv(dout), N, F, q, codes_t);
}
extern "C" void cuda_swiglu_backward_fp8_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, int N, int F,
                                              const fp8_output *q, uint8_t *codes_t) {
    swiglu_fp8_transpose_t(as_half(dx), as_half(x), as_half(dout), N, F, q, codes_t);
}
extern "C" void cuda_swiglu_forward_fp8_transpose(bf16 *out, const bf16 *x, int N, int F, const fp8_output *q,
                                                  uint8_t *codes_t) {
    swiglu_fp8_transpose_t(as_nv(out), as_nv(x), (const __nv_bfloat16 *)NULL, N, F, q, codes_t);
}
extern "C" void cuda_swiglu_forward_fp8_transpose_fp16(fp16 *out, const fp16 *x, int N, int F, const fp8_output *q,
                                                       uint8_t *codes_t) {
    swiglu_fp8_transpose_t(as_half(out), as_half(x), (const __half *)NULL, N, F, q, codes_t);
}
