/* cuda_elementwise.cu: 16-bit <-> fp32 conversion, GeLU (tanh approximation), inverted dropout,
 * add, sum_blocks (the rank-ordered sum of --tp-comm-overlap's reduce-scatter), scale, and the
 * bias halves of a linear layer (bias_add, bias_backward, and dropout_bias_backward: the hidden
 * dropout's backward and the bias gradient in one pass), on bf16 or fp16 tensors (templates on
 * the element type E, cuda_kernels_t.cuh).
 *
 * Every map is a grid-stride loop over 8-element groups loaded and stored as one 128-bit access
 * when all pointers are 16-byte aligned, followed by a scalar tail (and a scalar loop when they
 * are not), with the arithmetic in fp32. GeLU and its derivative are the CPU reference formulas
 * (kernels/cpu/cpu_elementwise.c):
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
 * Dropout keeps element i of a call iff philox_keep(seed, stream, offset + i, p), as on the CPU:
 * 16 bits per element, so an 8-element group whose first counter offset + 8 g is a multiple of 8
 * (the model's sites at hidden sizes that are multiples of 8) takes one Philox call (philox_keep8).
 * bias_backward is a two-pass column sum (per-chunk partials, then a fixed-order pass): no
 * atomics, bitwise reproducible. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_gelu.cuh"
#include "kernels/philox.h"

static const int map_threads = 256;

#define GRID_STRIDE_LOOP(i, count)                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(count);     \
         i += (size_t)gridDim.x * blockDim.x)

/* launch geometry of a map over n elements, `vectorized` counting 8-element groups */
static unsigned int map_blocks(size_t n, bool vectorized) {
    return grid_stride_blocks(vectorized ? n / 8 + (n % 8) : n, map_threads);
}

/* ---- conversions ---- */

template <typename E>
static __global__ void float_to_e_kernel(E *out, const float *x, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float4 lo = reinterpret_cast<const float4 *>(x)[2 * g];
        float4 hi = reinterpret_cast<const float4 *>(x)[2 * g + 1];
        float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        store_x8(out + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = from_float<E>(x[i]);
    }
}

template <typename E>
static __global__ void e_to_float_kernel(float *out, const E *x, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_x8(v, x + 8 * g);
        reinterpret_cast<float4 *>(out)[2 * g] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4 *>(out)[2 * g + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = to_float(x[i]);
    }
}

template <typename E>
static void float_to_e(E *out, const float *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    float_to_e_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(out, x, n, vectorized);
    CHECK_LAUNCH();
}

template <typename E>
static void e_to_float(float *out, const E *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    e_to_float_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(out, x, n, vectorized);
    CHECK_LAUNCH();
}

extern "C" void cuda_float_to_bf16(bf16 *out, const float *x, size_t n) { float_to_e(as_nv(out), x, n); }
extern "C" void cuda_bf16_to_float(float *out, const bf16 *x, size_t n) { e_to_float(out, as_nv(x), n); }
extern "C" void cuda_float_to_fp16(fp16 *out, const float *x, size_t n) { float_to_e(as_half(out), x, n); }
extern "C" void cuda_fp16_to_float(float *out, const fp16 *x, size_t n) { e_to_float(out, as_half(x), n); }

/* ---- GeLU ---- */

/* FP8: also the fp8 codes of the output (kernels.h's fp8_output, cuda_fp8_out.cuh): fc2's input
 * in an fp8 layer, and out may then be NULL (only the codes: fc2's input in scratch, which the
 * fp8 GEMM reads as codes and the backward makes again); q unused otherwise */
template <typename E, bool FP8>
static __global__ void gelu_forward_kernel(E *out, const E *x, size_t n, bool vectorized, fp8_output q) {
    float s = 0.0f, local = 0.0f;
    if constexpr (FP8) s = *q.scale;
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_x8(v, x + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = gelu_value(v[k]);
        if (!FP8 || out != nullptr) store_x8(out + 8 * g, v);
        if constexpr (FP8) *reinterpret_cast<uint2 *>(q.codes + 8 * g) = stored_codes8<E>(v, s, q.format, &local);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float v = gelu_value(to_float(x[i]));
        if (!FP8 || out != nullptr) out[i] = from_float<E>(v);
        if constexpr (FP8) q.codes[i] = stored_code<E>(v, s, q.format, &local);
    }
    if constexpr (FP8) fp8_block_finish(q.amax, q.scale_inv, local, s);
}

template <typename E>
static __global__ void gelu_backward_kernel(E *dx, const E *x,
                                            const E *dout, size_t n,
                                            bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float xv[8], dv[8];
        load_x8(xv, x + 8 * g);
        load_x8(dv, dout + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) xv[k] = gelu_grad(xv[k]) * dv[k];
        store_x8(dx + 8 * g, xv);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float local_grad = gelu_grad(to_float(x[i]));
        dx[i] = from_float<E>(local_grad * to_float(dout[i]));
    }
}

/* the backward that also gives the forward's value again (fc2's input, not kept from the forward) */
template <typename E>
static __global__ void gelu_backward_recompute_kernel(E *dx, E *y, const E *x,
                                                      const E *dout, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float xv[8], dv[8], yv[8];
        load_x8(xv, x + 8 * g);
        load_x8(dv, dout + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            yv[k] = gelu_value(xv[k]);
            xv[k] = gelu_grad(xv[k]) * dv[k];
        }
        store_x8(dx + 8 * g, xv);
        store_x8(y + 8 * g, yv);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float xi = to_float(x[i]);
        y[i] = from_float<E>(gelu_value(xi));
        dx[i] = from_float<E>(gelu_grad(xi) * to_float(dout[i]));
    }
}

template <typename E>
static void gelu_backward_recompute_t(E *dx, E *y, const E *x, const E *dout, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(dx) && aligned16(y) && aligned16(x) && aligned16(dout);
    gelu_backward_recompute_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        dx, y, x, dout, n, vectorized);
    CHECK_LAUNCH();
}

template <typename E>
static void gelu_forward_t(E *out, const E *x, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(x);
    gelu_forward_kernel<E, false><<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        out, x, n, vectorized, fp8_output{});
    CHECK_LAUNCH();
}

template <typename E>
static void gelu_forward_fp8_t(E *out, const E *x, size_t n, const fp8_output *q) {
    if (n == 0) {
        fp8_quantize_after(x, 0, q);
        return;
    }
    bool vectorized = aligned16(out) && aligned16(x) && fp8_out_aligned(q);
    gelu_forward_kernel<E, true><<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(out, x, n, vectorized,
                                                                                                  *q);
    CHECK_LAUNCH();
}

template <typename E>
static void gelu_backward_t(E *dx, const E *x, const E *dout, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(dx) && aligned16(x) && aligned16(dout);
    gelu_backward_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        dx, x, dout, n, vectorized);
    CHECK_LAUNCH();
}

/* ---- dropout: out = in * keep / (1 - p), keep drawn at counter offset + i ---- */

template <typename E>
static __global__ void dropout_kernel(E *out, const E *in, size_t n,
                                      uint64_t seed, uint64_t stream, uint64_t offset, uint32_t threshold,
                                      float keep_scale, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_x8(v, in + 8 * g);
        /* one Philox call for the eight (two when offset is not a multiple of 8) */
        const uint32_t keep = philox_keep8(seed, stream, offset + 8 * g, threshold);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (keep >> k) & 1u ? v[k] * keep_scale : 0.0f;
        store_x8(out + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        philox_keep_run run = PHILOX_KEEP_RUN_START;
        int keep = philox_keep_run_next(&run, seed, stream, offset + i, threshold);
        out[i] = from_float<E>(keep ? to_float(in[i]) * keep_scale : 0.0f);
    }
}

template <typename E>
static void dropout_apply(E *out, const E *in, size_t n, dropout_rng rng) {
    if (n == 0) return;
    if (rng.p <= 0.0f) { /* no dropout: a copy (nothing to do in place) */
        if (out != in)
            CHECK_CUDA(cudaMemcpyAsync(out, in, n * sizeof(E), cudaMemcpyDeviceToDevice,
                                       compute_stream()));
        return;
    }
    float keep_scale = 1.0f / (1.0f - rng.p);
    bool vectorized = aligned16(out) && aligned16(in);
    dropout_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        out, in, n, rng.seed, rng.stream, rng.offset, philox_threshold16(rng.p), keep_scale,
        vectorized);
    CHECK_LAUNCH();
}

template <typename E>
static void dropout_forward_t(E *out, const E *x, size_t n, dropout_rng rng) {
    dropout_apply(out, x, n, rng);
}

template <typename E>
static void dropout_backward_t(E *dx, const E *dout, size_t n, dropout_rng rng) {
    dropout_apply(dx, dout, n, rng);
}

/* ---- add, scale ---- */

template <typename E>
static __global__ void add_kernel(E *out, const E *a,
                                  const E *b, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float av[8], bv[8];
        load_x8(av, a + 8 * g);
        load_x8(bv, b + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) av[k] += bv[k];
        store_x8(out + 8 * g, av);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        out[i] = from_float<E>(to_float(a[i]) + to_float(b[i]));
    }
}

template <typename E>
static __global__ void scale_kernel(E *x, float s, size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float v[8];
        load_x8(v, x + 8 * g);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] *= s;
        store_x8(x + 8 * g, v);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        x[i] = from_float<E>(to_float(x[i]) * s);
    }
}

template <typename E>
static void add_t(E *out, const E *a, const E *b, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(a) && aligned16(b);
    add_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        out, a, b, n, vectorized);
    CHECK_LAUNCH();
}

/* sum_blocks: out = sum over ranks k, in rank order, of own (k == own_rank) or received block k */
template <typename E>
static __global__ void sum_blocks_kernel(E *out, const E *own, const E *received, int ranks, int own_rank,
                                         size_t n, bool vectorized) {
    size_t groups = vectorized ? n / 8 : 0;
    GRID_STRIDE_LOOP(g, groups) {
        float acc[8], v[8];
        load_x8(acc, own_rank == 0 ? own + 8 * g : received + 8 * g);
        for (int k = 1; k < ranks; k++) {
            load_x8(v, k == own_rank ? own + 8 * g : received + (size_t)k * n + 8 * g);
#pragma unroll
            for (int e = 0; e < 8; e++) acc[e] += v[e];
        }
        store_x8(out + 8 * g, acc);
    }
    GRID_STRIDE_LOOP(j, n - 8 * groups) {
        size_t i = 8 * groups + j;
        float acc = to_float(own_rank == 0 ? own[i] : received[i]);
        for (int k = 1; k < ranks; k++) acc += to_float(k == own_rank ? own[i] : received[(size_t)k * n + i]);
        out[i] = from_float<E>(acc);
    }
}

template <typename E>
static void sum_blocks_t(E *out, const E *own, const E *received, int ranks, int own_rank, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(out) && aligned16(own) && aligned16(received) && n % 8 == 0;
    sum_blocks_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(
        out, own, received, ranks, own_rank, n, vectorized);
    CHECK_LAUNCH();
}

template <typename E>
static void scale_t(E *x, float s, size_t n) {
    if (n == 0) return;
    bool vectorized = aligned16(x);
    scale_kernel<<<map_blocks(n, vectorized), map_threads, 0, compute_stream()>>>(x, s, n,
                                                                                 vectorized);
    CHECK_LAUNCH();
}

/* ---- bias_add: out[N,C] += bias[C] per row ---- */

template <typename E>
static __global__ void bias_add_kernel(E *out, const E *bias, size_t N,
                                       int C, bool vectorized) {
    size_t n = N * (size_t)C;
    if (vectorized) { /* C % 8 == 0: a group never straddles two rows */
        GRID_STRIDE_LOOP(g, n / 8) {
            int c = (int)((8 * g) % (size_t)C);
            float v[8], b[8];
            load_x8(v, out + 8 * g);
            load_x8(b, bias + c);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] += b[k];
            store_x8(out + 8 * g, v);
        }
    } else {
        GRID_STRIDE_LOOP(i, n) {
            int c = (int)(i % (size_t)C);
            out[i] = from_float<E>(to_float(out[i]) + to_float(bias[c]));
        }
    }
}

template <typename E>
static void bias_add_t(E *out, const E *bias, int N, int C) {
    if (N <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(bias);
    size_t n = (size_t)N * C;
    bias_add_kernel<<<grid_stride_blocks(vectorized ? n / 8 : n, map_threads), map_threads, 0,
                      compute_stream()>>>(out, bias, (size_t)N, C, vectorized);
    CHECK_LAUNCH();
}

/* ---- bias_backward: dbias[C] += column sums of dout[N,C] ----
 * Pass 1: block (32, 8) owns a tile of columns (8 per thread when vectorized, else 1) and a
 * chunk of rows; thread row y sums rows y, y+8, ... of the chunk in order (loading four rows
 * ahead, so that four loads are in flight, then adding them in that order), the 8 sums are added
 * in order, and the block writes partials[chunk, columns]. Pass 2: column_sum_accumulate. The
 * split depends only on N and C, never on the device, so the result is reproducible.
 * dropout_bias_backward runs the same passes over dx = dropout_backward(dout) made on the way
 * (DROP: each load of dout is masked, scaled, rounded to E and stored to dx, and that rounded
 * value is added): the bits of dropout_backward's dx and of bias_backward over it, with one read
 * of the gradient fewer. */

/* the split into chunks of rows and BIAS_THREADS_Y: bias_backward_chunks (cuda_common.cuh, shared
 * with the fp8 MLP backward's fused bias gradient, kernels/cuda/cuda_fp8_mlp.cu) */

/* the dropout of dropout_bias_backward: element i = r C + c of dout at counter offset + i */
struct bias_drop {
    uint64_t seed, stream, offset;
    uint32_t threshold;
    float keep_scale;
};

/* eight elements of row r from column c0 (16-byte aligned): dout's, or under DROP dx's (written) */
template <typename E, bool DROP>
static __device__ __forceinline__ void bias_load8(float v[8], const E *dout, E *dx, size_t at, const bias_drop &d) {
    load_x8(v, dout + at);
    if (DROP) {
        const uint32_t keep = philox_keep8(d.seed, d.stream, d.offset + at, d.threshold);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (keep >> k) & 1u ? v[k] * d.keep_scale : 0.0f;
        store_x8(dx + at, v);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = to_float(from_float<E>(v[k])); /* the stored value */
    }
}
template <typename E, bool DROP>
static __device__ __forceinline__ float bias_load1(const E *dout, E *dx, size_t at, const bias_drop &d) {
    float v = to_float(dout[at]);
    if (DROP) {
        philox_keep_run run = PHILOX_KEEP_RUN_START;
        const E stored = from_float<E>(philox_keep_run_next(&run, d.seed, d.stream, d.offset + at, d.threshold)
                                           ? v * d.keep_scale : 0.0f);
        dx[at] = stored;
        v = to_float(stored);
    }
    return v;
}

template <typename E, bool DROP>
static __global__ void bias_backward_partials_kernel(float *partials,
                                                     const E *dout, int N, int C,
                                                     int rows_per_chunk, bool vectorized, E *dx, bias_drop drop) {
    __shared__ float sums[BIAS_THREADS_Y][32 * 8];
    const int per_thread = vectorized ? 8 : 1;
    int c0 = (blockIdx.x * 32 + threadIdx.x) * per_thread;
    int row_begin = blockIdx.y * rows_per_chunk;
    int row_end = min(N, row_begin + rows_per_chunk);
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (c0 < C) {
        int r = row_begin + threadIdx.y;
        if (vectorized) {
            for (; r + 3 * BIAS_THREADS_Y < row_end; r += 4 * BIAS_THREADS_Y) {
                float v[4][8];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    bias_load8<E, DROP>(v[j], dout, dx, (size_t)(r + j * BIAS_THREADS_Y) * C + c0, drop);
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[k] += v[j][k];
            }
        }
        for (; r < row_end; r += BIAS_THREADS_Y) {
            if (vectorized) {
                float v[8];
                bias_load8<E, DROP>(v, dout, dx, (size_t)r * C + c0, drop);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += v[k];
            } else {
                acc[0] += bias_load1<E, DROP>(dout, dx, (size_t)r * C + c0, drop);
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

/* dbias += column sums of dout, or with dx (dropout_bias_backward) of dx = dropout(dout) */
template <typename E>
static void bias_backward_t(float *dbias, const E *dout, int N, int C, E *dx = NULL, dropout_rng rng = dropout_rng()) {
    if (N <= 0 || C <= 0) return;
    const bool drop = dx != NULL;
    bool vectorized = C % 8 == 0 && aligned16(dout) && (!drop || aligned16(dx));
    int rows_per_chunk = 0, chunks = bias_backward_chunks(N, C, &rows_per_chunk);
    float *partials = (float *)stream_scratch((size_t)chunks * C * sizeof(float));
    int columns_per_block = 32 * (vectorized ? 8 : 1);
    dim3 grid(ceil_div((size_t)C, (size_t)columns_per_block), (unsigned int)chunks);
    if (drop) {
        const bias_drop d = {rng.seed, rng.stream, rng.offset, philox_threshold16(rng.p), 1.0f / (1.0f - rng.p)};
        bias_backward_partials_kernel<E, true><<<grid, dim3(32, BIAS_THREADS_Y), 0, compute_stream()>>>(
            partials, dout, N, C, rows_per_chunk, vectorized, dx, d);
    } else {
        bias_backward_partials_kernel<E, false><<<grid, dim3(32, BIAS_THREADS_Y), 0, compute_stream()>>>(
            partials, dout, N, C, rows_per_chunk, vectorized, (E *)NULL, bias_drop());
    }
    CHECK_LAUNCH();
    column_sum_accumulate(dbias, partials, chunks, C);
}

/* dx = dropout_backward(dout), dbias += column sums of dx, in bias_backward's passes (p > 0;
 * at p <= 0 dropout_backward's copy, then bias_backward) */
template <typename E>
static void dropout_bias_backward_t(E *dx, float *dbias, const E *dout, int N, int C, dropout_rng rng) {
    if (N <= 0 || C <= 0) return;
    if (rng.p <= 0.0f) {
        dropout_apply(dx, dout, (size_t)N * C, rng);
        bias_backward_t(dbias, dx, N, C);
        return;
    }
    bias_backward_t(dbias, dout, N, C, dx, rng);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_gelu_backward_recompute(bf16 *dx, bf16 *y, const bf16 *x, const bf16 *dout, size_t n) {
    gelu_backward_recompute_t(as_nv(dx), as_nv(y), as_nv(x), as_nv(dout), n);
}

extern "C" void cuda_gelu_backward_recompute_fp16(fp16 *dx, fp16 *y, const fp16 *x, const fp16 *dout, size_t n) {
    gelu_backward_recompute_t(as_half(dx), as_half(y), as_half(x), as_half(dout), n);
}

extern "C" void cuda_gelu_forward(bf16 *out, const bf16 *x, size_t n) {
    gelu_forward_t(as_nv(out), as_nv(x), n);
}

extern "C" void cuda_gelu_forward_fp16(fp16 *out, const fp16 *x, size_t n) {
    gelu_forward_t(as_half(out), as_half(x), n);
}

extern "C" void cuda_gelu_forward_fp8(bf16 *out, const bf16 *x, size_t n, const fp8_output *q) {
    gelu_forward_fp8_t(as_nv(out), as_nv(x), n, q);
}

extern "C" void cuda_gelu_forward_fp8_fp16(fp16 *out, const fp16 *x, size_t n, const fp8_output *q) {
    gelu_forward_fp8_t(as_half(out), as_half(x), n, q);
}

extern "C" void cuda_gelu_backward(bf16 *dx, const bf16 *x, const bf16 *dout, size_t n) {
    gelu_backward_t(as_nv(dx), as_nv(x), as_nv(dout), n);
}

extern "C" void cuda_gelu_backward_fp16(fp16 *dx, const fp16 *x, const fp16 *dout, size_t n) {
    gelu_backward_t(as_half(dx), as_half(x), as_half(dout), n);
}

extern "C" void cuda_dropout_forward(bf16 *out, const bf16 *x, size_t n, dropout_rng rng) {
    dropout_forward_t(as_nv(out), as_nv(x), n, rng);
}

extern "C" void cuda_dropout_forward_fp16(fp16 *out, const fp16 *x, size_t n, dropout_rng rng) {
    dropout_forward_t(as_half(out), as_half(x), n, rng);
}

extern "C" void cuda_dropout_backward(bf16 *dx, const bf16 *dout, size_t n, dropout_rng rng) {
    dropout_backward_t(as_nv(dx), as_nv(dout), n, rng);
}

extern "C" void cuda_dropout_backward_fp16(fp16 *dx, const fp16 *dout, size_t n, dropout_rng rng) {
    dropout_backward_t(as_half(dx), as_half(dout), n, rng);
}

extern "C" void cuda_add(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    add_t(as_nv(out), as_nv(a), as_nv(b), n);
}

extern "C" void cuda_add_fp16(fp16 *out, const fp16 *a, const fp16 *b, size_t n) {
    add_t(as_half(out), as_half(a), as_half(b), n);
}

extern "C" void cuda_sum_blocks(bf16 *out, const bf16 *own, const bf16 *received, int ranks, int own_rank, size_t n) {
    sum_blocks_t(as_nv(out), as_nv(own), as_nv(received), ranks, own_rank, n);
}

extern "C" void cuda_sum_blocks_fp16(fp16 *out, const fp16 *own, const fp16 *received, int ranks, int own_rank,
                                     size_t n) {
    sum_blocks_t(as_half(out), as_half(own), as_half(received), ranks, own_rank, n);
}

extern "C" void cuda_scale(bf16 *x, float s, size_t n) {
    scale_t(as_nv(x), s, n);
}

extern "C" void cuda_scale_fp16(fp16 *x, float s, size_t n) {
    scale_t(as_half(x), s, n);
}

extern "C" void cuda_bias_add(bf16 *out, const bf16 *bias, int N, int C) {
    bias_add_t(as_nv(out), as_nv(bias), N, C);
}

extern "C" void cuda_bias_add_fp16(fp16 *out, const fp16 *bias, int N, int C) {
    bias_add_t(as_half(out), as_half(bias), N, C);
}

extern "C" void cuda_bias_backward(float *dbias, const bf16 *dout, int N, int C) {
    bias_backward_t(dbias, as_nv(dout), N, C);
}

extern "C" void cuda_bias_backward_fp16(float *dbias, const fp16 *dout, int N, int C) {
    bias_backward_t(dbias, as_half(dout), N, C);
}

extern "C" void cuda_dropout_bias_backward(bf16 *dx, float *dbias, const bf16 *dout, int N, int C, dropout_rng rng) {
    dropout_bias_backward_t(as_nv(dx), dbias, as_nv(dout), N, C, rng);
}

extern "C" void cuda_dropout_bias_backward_fp16(fp16 *dx, float *dbias, const fp16 *dout, int N, int C,
                                                dropout_rng rng) {
    dropout_bias_backward_t(as_half(dx), dbias, as_half(dout), N, C, rng);
}
