/* cuda_elementwise.cu: bf16 <-> fp32 conversion, GeLU (tanh approximation), inverted dropout,
 * add, scale, and the bias halves of a linear layer (bias_add, bias_backward), on bf16 tensors.
 *
 * Every map is a grid-stride loop over 8-element groups loaded and stored as one 128-bit access
 * when all pointers are 16-byte aligned, followed by a scalar tail (and a scalar loop when they
 * are not), with the arithmetic in fp32. GeLU and its derivative are the CPU reference formulas
 * (kernels/cpu/cpu_elementwise.c):
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
 * Dropout keeps element i of a call iff philox_keep(seed, stream, offset + i, p), as on the CPU.
 * bias_backward is a two-pass column sum (per-chunk partials, then a fixed-order pass): no
 * atomics, bitwise reproducible. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

#define GELU_SCALING_FACTOR 0.7978845608028654f /* sqrt(2/pi) */

static const int map_threads = 256;

#define GRID_STRIDE_LOOP(i, count)                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(count);     \
         i += (size_t)gridDim.x * blockDim.x)

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

/* launch geometry of a map over n elements, `vectorized` counting 8-element groups */
static unsigned int map_blocks(size_t n, bool vectorized) {
    return grid_stride_blocks(vectorized ? n / 8 + (n % 8) : n, map_threads);
}

/* ---- conversions ---- */

static __global__ void float_to_bf16_kernel(__nv_bfloat16 *out, const float *x, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float4 lo = reinterpret_cast<const float4 *>(x)[2 * g];
        float4 hi = reinterpret_cast<const float4 *>(x)[2 * g + 1];
        float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        store_bf16x8(out + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = __float2bfloat16_rn(x[i]);
    }
}

static __global__ void bf16_to_float_kernel(float *out, const __nv_bfloat16 *x, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_bf16x8(v, x + 8 * g);
        reinterpret_cast<float4 *>(out)[2 * g] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4 *>(out)[2 * g + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = __bfloat162float(x[i]);
    }
}

extern "C" void cuda_float_to_bf16(bf16 *out, const float *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    float_to_bf16_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(out), x, n, vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_bf16_to_float(float *out, const bf16 *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    bf16_to_float_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        out, as_nv(x), n, vectorized);
    CHECK_LAUNCH();
}

/* ---- GeLU ---- */

static __global__ void gelu_forward_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *x, size_t n,
                                           bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_bf16x8(v, x + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = gelu_value(v[k]);
        store_bf16x8(out + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = __float2bfloat16_rn(gelu_value(__bfloat162float(x[i])));
    }
}

static __global__ void gelu_backward_kernel(__nv_bfloat16 *dx, const __nv_bfloat16 *x,
                                            const __nv_bfloat16 *dout, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float xv[8], dv[8];
        load_bf16x8(xv, x + 8 * g);
        load_bf16x8(dv, dout + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) xv[k] = gelu_grad(xv[k]) * dv[k];
        store_bf16x8(dx + 8 * g, xv);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float local_grad = gelu_grad(__bfloat162float(x[i]));
        dx[i] = __float2bfloat16_rn(local_grad * __bfloat162float(dout[i]));
    }
}

/* the backward that also gives the forward's value again (fc2's input, not kept from the forward) */
static __global__ void gelu_backward_recompute_kernel(__nv_bfloat16 *dx, __nv_bfloat16 *y, const __nv_bfloat16 *x,
                                                      const __nv_bfloat16 *dout, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float xv[8], dv[8], yv[8];
        load_bf16x8(xv, x + 8 * g);
        load_bf16x8(dv, dout + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            yv[k] = gelu_value(xv[k]);
            xv[k] = gelu_grad(xv[k]) * dv[k];
        }
        store_bf16x8(dx + 8 * g, xv);
        store_bf16x8(y + 8 * g, yv);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float xi = __bfloat162float(x[i]);
        y[i] = __float2bfloat16_rn(gelu_value(xi));
        dx[i] = __float2bfloat16_rn(gelu_grad(xi) * __bfloat162float(dout[i]));
    }
}

extern "C" void cuda_gelu_backward_recompute(bf16 *dx, bf16 *y, const bf16 *x, const bf16 *dout, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(dx) && aligned16(y) && aligned16(x) && aligned16(dout);
    gelu_backward_recompute_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(dx), as_nv(y), as_nv(x), as_nv(dout), n, vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_gelu_forward(bf16 *out, const bf16 *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    gelu_forward_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(out), as_nv(x), n, vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_gelu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(dx) && aligned16(x) && aligned16(dout);
    gelu_backward_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(dx), as_nv(x), as_nv(dout), n, vectorized);
    CHECK_LAUNCH();
}

/* ---- dropout: out = in * keep / (1 - p), keep drawn at counter offset + i ---- */

static __global__ void dropout_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *in, size_t n,
                                      uint64_t seed, uint64_t stream, uint64_t offset, float p,
                                      float keep_scale, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_bf16x8(v, in + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int keep = philox_keep(seed, stream, offset + 8 * g + k, p);
            v[k] = keep ? v[k] * keep_scale : 0.0f;
        }
        store_bf16x8(out + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        int keep = philox_keep(seed, stream, offset + i, p);
        out[i] = __float2bfloat16_rn(keep ? __bfloat162float(in[i]) * keep_scale : 0.0f);
    }
}

static void dropout_apply(bf16 *out, const bf16 *in, size_t n, dropout_rng rng) {
    if (n == 0) return;
    if (rng.p <= 0.0f) { /* no dropout: a copy (nothing to do in place) */
        if (out != in)
            CHECK_CUDA(cudaMemcpyAsync(out, in, n * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                       compute_stream()));
        return;
    }
    float keep_scale = 1.0f / (1.0f - rng.p);
    bool vectorized = aligned16(out) && aligned16(in);
    dropout_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(out), as_nv(in), n, rng.seed, rng.stream, rng.offset, rng.p, keep_scale,
        vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_dropout_forward(bf16 *out, const bf16 *x, size_t n, dropout_rng rng) {
    dropout_apply(out, x, n, rng);
}

extern "C" void cuda_dropout_backward(bf16 *dx, const bf16 *dout, size_t n, dropout_rng rng) {
    dropout_apply(dx, dout, n, rng);
}

/* ---- add, scale ---- */

static __global__ void add_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *a,
                                  const __nv_bfloat16 *b, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float av[8], bv[8];
        load_bf16x8(av, a + 8 * g);
        load_bf16x8(bv, b + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) av[k] += bv[k];
        store_bf16x8(out + 8 * g, av);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
}

static __global__ void scale_kernel(__nv_bfloat16 *x, float s, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_bf16x8(v, x + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] *= s;
        store_bf16x8(x + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
    }
}

extern "C" void cuda_add(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(a) && aligned16(b);
    add_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        as_nv(out), as_nv(a), as_nv(b), n, vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_scale(bf16 *x, float s, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(x);
    scale_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(as_nv(x), s, n,
                                                                                 vectorized);
    CHECK_LAUNCH();
}

/* ---- bias_add: out[N,C] += bias[C] per row ---- */

static __global__ void bias_add_kernel(__nv_bfloat16 *out, const __nv_bfloat16 *bias, size_t N,
                                       int C, bool vectorized) {
    size_t n = N * (size_t)C;
    if (vectorized) { /* C % 8 == 0: a group never straddles two rows */
        GRID_STRIDE_LOOP(g, n / 8) {
            int c = (int)((8 * g) % (size_t)C);
            float v[8], b[8];
            load_bf16x8(v, out + 8 * g);
            load_bf16x8(b, bias + c);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] += b[k];
            store_bf16x8(out + 8 * g, v);
        }
    } else {
        GRID_STRIDE_LOOP(i, n) {
            int c = (int)(i % (size_t)C);
            out[i] = __float2bfloat16_rn(__bfloat162float(out[i]) + __bfloat162float(bias[c]));
        }
    }
}

extern "C" void cuda_bias_add(bf16 *out, const bf16 *bias, int N, int C) {
    if (N <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(bias);
    size_t n = (size_t)N * C;
    bias_add_kernel<<<grid_stride_blocks(vectorized ? n / 8 : n, map_threads), map_threads, 0,
                      compute_stream()>>>(as_nv(out), as_nv(bias), (size_t)N, C, vectorized);
    CHECK_LAUNCH();
}

/* ---- bias_backward: dbias[C] += column sums of dout[N,C] ----
 * Pass 1: block (32, 8) owns a tile of columns (8 per thread when vectorized, else 1) and a
 * chunk of rows; thread row y sums rows y, y+8, ... of the chunk in order, the 8 sums are added
 * in order, and the block writes partials[chunk, columns]. Pass 2: column_sum_accumulate. The
 * split depends only on N and C, never on the device, so the result is reproducible. */

#define BIAS_ROWS_PER_CHUNK 64
#define BIAS_MAX_CHUNKS 256
#define BIAS_THREADS_Y 8

static __global__ void bias_backward_partials_kernel(float *partials,
                                                     const __nv_bfloat16 *dout, int N, int C,
                                                     int rows_per_chunk, bool vectorized) {
    __shared__ float sums[BIAS_THREADS_Y][32 * 8];
    const int per_thread = vectorized ? 8 : 1;
    int c0 = (blockIdx.x * 32 + threadIdx.x) * per_thread;
    int row_begin = blockIdx.y * rows_per_chunk;
    int row_end = min(N, row_begin + rows_per_chunk);
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (c0 < C) {
        for (int r = row_begin + threadIdx.y; r < row_end; r += BIAS_THREADS_Y) {
            const __nv_bfloat16 *row = dout + (size_t)r * C;
            if (vectorized) {
                float v[8];
                load_bf16x8(v, row + c0);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += v[k];
            } else {
                acc[0] += __bfloat162float(row[c0]);
            }
        }
    }
    for (int k = 0; k < per_thread; k++) sums[threadIdx.y][threadIdx.x * per_thread + k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && c0 < C) {
        for (int k = 0; k < per_thread; k++) {
            float total = 0.0f;
            for (int y = 0; y < BIAS_THREADS_Y; y++) total += sums[y][threadIdx.x * per_thread + k];
            partials[(size_t)blockIdx.y * C + c0 + k] = total;
        }
    }
}

extern "C" void cuda_bias_backward(float *dbias, const bf16 *dout, int N, int C) {
    if (N <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(dout);
    int chunks = (int)ceil_div((size_t)N, BIAS_ROWS_PER_CHUNK);
    if (chunks > BIAS_MAX_CHUNKS) chunks = BIAS_MAX_CHUNKS;
    int rows_per_chunk = (int)ceil_div((size_t)N, (size_t)chunks);
    chunks = (int)ceil_div((size_t)N, (size_t)rows_per_chunk);
    float *partials = (float *)stream_scratch((size_t)chunks * C * sizeof(float));
    int columns_per_block = 32 * (vectorized ? 8 : 1);
    dim3 grid(ceil_div((size_t)C, (size_t)columns_per_block), (unsigned int)chunks);
    bias_backward_partials_kernel<<<grid, dim3(32, BIAS_THREADS_Y), 0, compute_stream()>>>(
        partials, as_nv(dout), N, C, rows_per_chunk, vectorized);
    CHECK_LAUNCH();
    column_sum_accumulate(dbias, partials, chunks, C);
}
