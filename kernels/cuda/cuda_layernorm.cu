/* cuda_layernorm.cu: fused layer norm over rows of bf16 or fp16 x[N,C] (templates on the
 * element type, cuda_kernels_t.cuh) with fp32 statistics, as the CPU
 * reference (kernels/cpu/cpu_layernorm.c):
 *   norm = (x - mean) * rstd,  rstd = 1/sqrt(var + eps) (biased variance),  out = norm*w + b
 *   backward, per row, with g = w*dout:  dx += rstd * (g - mean(g) - norm * mean(g*norm))
 *   dweight += sum over rows of dout*norm,  dbias += sum over rows of dout.
 *
 * Forward: mean and variance are two reductions over the row (variance of x - mean, not
 * E[x^2] - mean^2), then the normalized row is written. Where rows are read with 128-bit accesses
 * (C % 8 == 0, 16-byte aligned pointers) and C <= 2048, one warp owns a row: each lane keeps up to
 * 8 units of 8 columns in registers and the sums are warp shuffles, with no barrier, and a block
 * of 8 warps has 8 rows in flight (GPT-2 124M's [32768, 768] and 1.3B's [16384, 2048]). Otherwise
 * one block per row caches the row in shared memory as bf16 (2C bytes: 24 KiB at C = 12288) and
 * reduces through the block; its threads own units of 8 columns, or 1 where C % 8 != 0.
 *
 * Backward: a fixed number of blocks (a function of N and C only, never of the device), each
 * taking rows blockIdx.x, blockIdx.x + gridDim.x, ...; a thread owns the same columns in every
 * row, so it accumulates dweight/dbias for them without synchronization. Where rows are read with
 * 128-bit accesses and a thread owns at most 4 work units (C <= 16384), the row-cached kernel
 * keeps its units of x and dout in registers between the two passes over the row, loads the next
 * row (1 or 2 units) and the dx row while the current row's sums go through the block, and keeps
 * the dweight/dbias accumulators and the weight in registers; otherwise the row is read twice and
 * the accumulators live in shared memory. Each block writes its partial sums [dweight | dbias],
 * and the last blocks to finish add them in a fixed order (column_sums_by_last_blocks,
 * cuda_common.cuh): no atomics on the sums, bitwise reproducible, no second launch. The per-row
 * and per-column summation orders are the same in both kernels. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_norm_backward.cuh"

/* threads of a row's block: one per work unit, a multiple of 32, at most 512 */
static int row_threads(int units) {
    int threads = (units + 31) / 32 * 32;
    if (threads < 32) threads = 32;
    if (threads > 512) threads = 512;
    return threads;
}

/* dynamic shared memory above the 48 KiB default needs an explicit opt-in per kernel */
static void allow_shared_memory(const void *kernel, size_t bytes, const char *what) {
    if (bytes <= 48 * 1024) return;
    int device = 0, limit = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    CHECK_CUDA(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (bytes > (size_t)limit)
        KERNELS_FATAL("%s needs %zu bytes of shared memory, the device allows %d", what, bytes,
                      limit);
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
}

/* ---- forward ---- */

template <typename E>
static __global__ void layernorm_forward_kernel(E *out, float *mean, float *rstd,
                                                const E *x,
                                                const E *weight,
                                                const E *bias, int C, float eps,
                                                bool vectorized) {
    extern __shared__ __align__(16) unsigned char layernorm_shared[];
    E *row_cache = reinterpret_cast<E *>(layernorm_shared);
    __shared__ float reduce_scratch[32];

    const size_t n = blockIdx.x;
    const E *x_row = x + n * C;
    E *out_row = out + n * C;
    const int width = vectorized ? 8 : 1;
    const int units = C / width;

    /* pass 1: cache the row, sum it */
    float sum = 0.0f;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        if (vectorized) {
            uint4 raw = *reinterpret_cast<const uint4 *>(x_row + 8 * u);
            *reinterpret_cast<uint4 *>(row_cache + 8 * u) = raw;
            float v[8];
            load_x8(v, row_cache + 8 * u);
#pragma unroll
            for (int k = 0; k < 8; k++) sum += v[k];
        } else {
            E raw = x_row[u];
            row_cache[u] = raw;
            sum += to_float(raw);
        }
    }
    const float row_mean = block_sum_f32(sum, reduce_scratch) / (float)C;

    /* pass 2: variance about the mean (each thread rereads only what it cached itself) */
    float squares = 0.0f;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        float v[8];
        if (vectorized) load_x8(v, row_cache + 8 * u);
        else v[0] = to_float(row_cache[u]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (k < width) {
                float d = v[k] - row_mean;
                squares += d * d;
            }
        }
    }
    const float variance = block_sum_f32(squares, reduce_scratch) / (float)C;
    const float row_rstd = 1.0f / sqrtf(variance + eps);

    /* pass 3: normalize, scale, shift */
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        if (vectorized) {
            float v[8], w[8], b[8];
            load_x8(v, row_cache + 8 * u);
            load_x8(w, weight + 8 * u);
            load_x8(b, bias + 8 * u);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = (v[k] - row_mean) * row_rstd * w[k] + b[k];
            store_x8(out_row + 8 * u, v);
        } else {
            float norm = (to_float(row_cache[u]) - row_mean) * row_rstd;
            out_row[u] = from_float<E>(norm * to_float(weight[u]) +
                                             to_float(bias[u]));
        }
    }
    if (threadIdx.x == 0) {
        mean[n] = row_mean;
        rstd[n] = row_rstd;
    }
}

#define LN_WARP_ROWS 8 /* rows (warps) per block of the warp-per-row forward */

/* one warp per row, the row's units u = lane, lane + 32, ... (at most UNITS of them) in registers;
 * with FP8 the fp8 codes of the output too (q, kernels.h's fp8_output; cuda_fp8_out.cuh) */
template <typename E, int UNITS, bool FP8>
static __global__ void __launch_bounds__(32 * LN_WARP_ROWS)
layernorm_forward_warp_kernel(E *out, float *mean, float *rstd, const E *x, const E *weight,
                              const E *bias, int N, int C, float eps, fp8_output q) {
    const int lane = threadIdx.x % 32;
    const size_t n = (size_t)blockIdx.x * LN_WARP_ROWS + threadIdx.x / 32;
    const float fp8_scale = FP8 ? *q.scale : 0.0f;
    float fp8_local = 0.0f;
    if (n < (size_t)N) {
    const int units = C / 8;
    const E *x_row = x + n * C;
    uint4 raw[UNITS];
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        const int u = lane + 32 * i;
        if (u < units) raw[i] = *reinterpret_cast<const uint4 *>(x_row + 8 * u);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        if (lane + 32 * i < units) {
            float v[8];
            load_x8(v, reinterpret_cast<const E *>(&raw[i]));
#pragma unroll
            for (int k = 0; k < 8; k++) sum += v[k];
        }
    }
    const float row_mean = warp_sum_f32(sum) / (float)C;
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        if (lane + 32 * i < units) {
            float v[8];
            load_x8(v, reinterpret_cast<const E *>(&raw[i]));
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float d = v[k] - row_mean;
                squares += d * d;
            }
        }
    }
    const float variance = warp_sum_f32(squares) / (float)C;
    const float row_rstd = 1.0f / sqrtf(variance + eps);
    E *out_row = out + n * C;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        const int u = lane + 32 * i;
        if (u < units) {
            float v[8], w[8], b[8];
            load_x8(v, reinterpret_cast<const E *>(&raw[i]));
            load_x8(w, weight + 8 * u);
            load_x8(b, bias + 8 * u);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = (v[k] - row_mean) * row_rstd * w[k] + b[k];
            store_x8(out_row + 8 * u, v);
            if constexpr (FP8)
                *reinterpret_cast<uint2 *>(q.codes + n * C + 8 * u) = stored_codes8<E>(v, fp8_scale, q.format, &fp8_local);
        }
    }
    if (lane == 0) {
        mean[n] = row_mean;
        rstd[n] = row_rstd;
    }
    }
    if constexpr (FP8) fp8_block_finish(q.amax, q.scale_inv, fp8_local, fp8_scale);
}

/* the forward; with q (not NULL) the fp8 codes of the output too: fused into the warp kernel
 * where it runs, otherwise fp8_quantize after (the same bits) */
template <typename E>
static void layernorm_forward_t(E *out, float *mean, float *rstd, const E *x,
                                       const E *weight, const E *bias, int N, int C,
                                       float eps, const fp8_output *q = NULL) {
    if (N <= 0 || C <= 0) {
        if (q) fp8_quantize_after(x, 0, q);
        return;
    }
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(x) && aligned16(weight) &&
                      aligned16(bias);
    const int units_per_lane = vectorized ? (C / 8 + 31) / 32 : 0;
    if (units_per_lane >= 1 && units_per_lane <= 8) {
        const unsigned int blocks = (unsigned int)(((size_t)N + LN_WARP_ROWS - 1) / LN_WARP_ROWS);
        const bool fused = q && fp8_out_aligned(q);
        const fp8_output none = {NULL, NULL, NULL, NULL, 0};
#define LAYERNORM_WARP(U)                                                                          \
    if (fused)                                                                                     \
        layernorm_forward_warp_kernel<E, U, true><<<blocks, 32 * LN_WARP_ROWS, 0, compute_stream()>>>( \
            out, mean, rstd, x, weight, bias, N, C, eps, *q);                                      \
    else                                                                                           \
        layernorm_forward_warp_kernel<E, U, false><<<blocks, 32 * LN_WARP_ROWS, 0, compute_stream()>>>( \
            out, mean, rstd, x, weight, bias, N, C, eps, none)
        switch (units_per_lane) {
        case 1: LAYERNORM_WARP(1); break;
        case 2: LAYERNORM_WARP(2); break;
        case 3: LAYERNORM_WARP(3); break;
        case 4: LAYERNORM_WARP(4); break;
        case 5: LAYERNORM_WARP(5); break;
        case 6: LAYERNORM_WARP(6); break;
        case 7: LAYERNORM_WARP(7); break;
        default: LAYERNORM_WARP(8); break;
        }
#undef LAYERNORM_WARP
        CHECK_LAUNCH();
        if (q && !fused) fp8_quantize_after(out, (size_t)N * (size_t)C, q);
        return;
    }
    int threads = row_threads(vectorized ? C / 8 : C);
    size_t shared_bytes = ((size_t)C * sizeof(E) + 15) / 16 * 16;
    allow_shared_memory((const void *)layernorm_forward_kernel<E>, shared_bytes,
                        "layernorm_forward");
    layernorm_forward_kernel<<<(unsigned int)N, threads, shared_bytes, compute_stream()>>>(
        out, mean, rstd, x, weight, bias, C, eps, vectorized);
    CHECK_LAUNCH();
    if (q) fp8_quantize_after(out, (size_t)N * (size_t)C, q);
}

/* ---- backward ---- */

/* blocks of the backward: one per 32 rows, at most one per row, and partial sums of at most 4M
 * floats per gradient (16 MiB); a function of N and C only, so results do not depend on the
 * device. 32 rows per block was the fastest of 8 to 62 at both GPT shapes on an H100: more blocks
 * write and re-read more partial sums, fewer keep fewer rows in flight (at [16384, 2048] with the
 * residual bias sums 119 us against 134 for the earlier cap of 1024 blocks; at [32768, 768] the
 * same 1024 blocks as before; perf/results/kernels/layernorm-backward-blocks-h100-2026-11-27.md) */
static int layernorm_backward_blocks(int N, int C) {
    int blocks = (N + 31) / 32;
    int by_memory = (int)((4u << 20) / (unsigned int)C);
    if (by_memory < 1) by_memory = 1;
    if (blocks > by_memory) blocks = by_memory;
    if (blocks > N) blocks = N;
    return blocks;
}

template <typename E>
static __global__ void layernorm_backward_kernel(E *dx, float *dweight, float *dbias,
                                                 float *partials, float *group_sums,
                                                 unsigned int *counters,
                                                 const E *dout,
                                                 const E *x,
                                                 const E *weight, const E *bias,
                                                 const float *mean, const float *rstd, int N,
                                                 int C, bool vectorized, bool from_output, float eps) {
    /* column u * width + k of the accumulators lives at k * units + u: the threads of a warp
     * touch consecutive words (no bank conflicts) */
    extern __shared__ __align__(16) unsigned char layernorm_shared[];
    float *dweight_acc = reinterpret_cast<float *>(layernorm_shared); /* [C] */
    float *dbias_acc = dweight_acc + C;                                /* [C] */
    __shared__ float reduce_scratch[64];

    const int width = vectorized ? 8 : 1;
    const int units = C / width;
    /* a thread only ever touches its own columns: no synchronization around the accumulators */
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (k < width) {
                dweight_acc[k * units + u] = 0.0f;
                dbias_acc[k * units + u] = 0.0f;
            }
        }
    }

    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const E *x_row = x + (size_t)n * C;
        const E *dout_row = dout + (size_t)n * C;
        E *dx_row = dx + (size_t)n * C;
        const float m = from_output ? 0.0f : mean[n], s = rstd[n];
        /* the normalized input: from x, or from the output y = norm * w + b (from_output) */
#define NORM_OF(k) (from_output ? (xv[k] - bv[k]) * norm_weight_reciprocal(wv[k], eps) : (xv[k] - m) * s)

        /* the two row reductions of the dx formula */
        float g_sum = 0.0f, g_norm_sum = 0.0f;
        for (int u = threadIdx.x; u < units; u += blockDim.x) {
            float xv[8], dv[8], wv[8], bv[8] = {0.0f};
            if (vectorized) {
                load_x8(xv, x_row + 8 * u);
                load_x8(dv, dout_row + 8 * u);
                load_x8(wv, weight + 8 * u);
                if (from_output) load_x8(bv, bias + 8 * u);
            } else {
                xv[0] = to_float(x_row[u]);
                dv[0] = to_float(dout_row[u]);
                wv[0] = to_float(weight[u]);
                if (from_output) bv[0] = to_float(bias[u]);
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                if (k < width) {
                    float norm = NORM_OF(k);
                    float g = wv[k] * dv[k];
                    g_sum += g;
                    g_norm_sum += g * norm;
                }
            }
        }
        block_sum2_f32(g_sum, g_norm_sum, reduce_scratch); /* the two sums through one pair of barriers */
        const float g_mean = g_sum / (float)C;
        const float g_norm_mean = g_norm_sum / (float)C;

        /* dx += (g - mean(g) - norm * mean(g*norm)) * rstd; parameter gradients per column */
        for (int u = threadIdx.x; u < units; u += blockDim.x) {
            float xv[8], dv[8], wv[8], bv[8] = {0.0f}, dxv[8];
            if (vectorized) {
                load_x8(xv, x_row + 8 * u);
                load_x8(dv, dout_row + 8 * u);
                load_x8(wv, weight + 8 * u);
                if (from_output) load_x8(bv, bias + 8 * u);
                load_x8(dxv, dx_row + 8 * u);
            } else {
                xv[0] = to_float(x_row[u]);
                dv[0] = to_float(dout_row[u]);
                wv[0] = to_float(weight[u]);
                if (from_output) bv[0] = to_float(bias[u]);
                dxv[0] = to_float(dx_row[u]);
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                if (k < width) {
                    float norm = NORM_OF(k);
                    float g = wv[k] * dv[k];
                    dbias_acc[k * units + u] += dv[k];
                    dweight_acc[k * units + u] += norm * dv[k];
                    dxv[k] += (g - g_mean - norm * g_norm_mean) * s;
                }
            }
            if (vectorized) store_x8(dx_row + 8 * u, dxv);
            else dx_row[u] = from_float<E>(dxv[0]);
        }
#undef NORM_OF
    }

    float *dweight_out = partials + (size_t)blockIdx.x * 2 * C;
    float *dbias_out = dweight_out + C;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (k < width) {
                dweight_out[u * width + k] = dweight_acc[k * units + u];
                dbias_out[u * width + k] = dbias_acc[k * units + u];
            }
        }
    }
    column_sums_by_last_blocks(dweight, dbias, NULL, C, partials, group_sums, counters, blockIdx.x,
                                   gridDim.x, 0, 2 * C, 2 * C, C % 2 == 0, threadIdx.x, blockDim.x);
}

/* from_output: x is the norm's output y, bias its bias (kernels.h, layernorm_backward_from_output) */
template <typename E>
static void layernorm_backward_t(E *dx, float *dweight, float *dbias, float *dx_colsum, const E *dout,
                                        const E *x, const E *weight, const E *bias, const float *mean,
                                        const float *rstd, int N, int C, bool from_output, float eps) {
    if (N <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(dx) && aligned16(dout) && aligned16(x) &&
                      aligned16(weight) && (!from_output || aligned16(bias));
    int threads = row_threads(vectorized ? C / 8 : C);
    int blocks = layernorm_backward_blocks(N, C);
    /* partials[blocks, width] ([dweight | dbias (| dx_colsum)] per block), then group_sums[32, width] */
    const size_t width = (dx_colsum ? 3 : 2) * (size_t)C;
    /* group_sums starts on a 16-byte boundary (the float4 sums; with dx_colsum the shared-memory
     * kernel's rows are 2C wide while its block count times 3C may be odd times 2 mod 4) */
    const size_t partial_floats = ((size_t)blocks * width + 3) & ~(size_t)3;
    float *partials = (float *)stream_scratch((partial_floats + 32 * width) * sizeof(float));
    float *group_sums = partials + partial_floats;
    unsigned int *counters = stream_counters(33);
    int units_per_thread = vectorized ? (C / 8 + threads - 1) / threads : 0;
    if (dx_colsum != NULL &&
        launch_norm_backward_cached<E, true>(units_per_thread, blocks, threads, dx, dweight, dbias, dx_colsum,
                                             partials, group_sums, counters, dout, x, weight, bias, mean, rstd, N,
                                             C, from_output, eps)) {
        CHECK_LAUNCH();
        return;
    }
    if (!launch_norm_backward_cached<E, true>(units_per_thread, blocks, threads, dx, dweight, dbias, NULL, partials,
                                              group_sums, counters, dout, x, weight, bias, mean, rstd, N, C,
                                              from_output, eps)) {
        size_t shared_bytes = 2 * (size_t)C * sizeof(float);
        /* the opt-in counts the static shared memory too (reduce_scratch, the last-block flags):
         * 2C floats of 48 KiB need it */
        allow_shared_memory((const void *)layernorm_backward_kernel<E>,
                            shared_bytes + 64 * sizeof(float) + 16, "layernorm_backward");
        layernorm_backward_kernel<<<blocks, threads, shared_bytes, compute_stream()>>>(
            dx, dweight, dbias, partials, group_sums, counters, dout, x, weight, bias, mean, rstd, N, C,
            vectorized, from_output, eps);
    }
    CHECK_LAUNCH();
    if (dx_colsum != NULL) bias_backward_e(dx_colsum, dx, N, C); /* the column sums as a pass of their own */
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_layernorm_forward(bf16 *out, float *mean, float *rstd, const bf16 *x,
                                       const bf16 *weight, const bf16 *bias, int N, int C,
                                       float eps) {
    layernorm_forward_t(as_nv(out), mean, rstd, as_nv(x), as_nv(weight), as_nv(bias), N, C, eps);
}

extern "C" void cuda_layernorm_forward_fp16(fp16 *out, float *mean, float *rstd, const fp16 *x,
                                       const fp16 *weight, const fp16 *bias, int N, int C,
                                       float eps) {
    layernorm_forward_t(as_half(out), mean, rstd, as_half(x), as_half(weight), as_half(bias), N, C, eps);
}

extern "C" void cuda_layernorm_forward_fp8(bf16 *out, float *mean, float *rstd, const bf16 *x, const bf16 *weight,
                                           const bf16 *bias, int N, int C, float eps, const fp8_output *q) {
    layernorm_forward_t(as_nv(out), mean, rstd, as_nv(x), as_nv(weight), as_nv(bias), N, C, eps, q);
}

extern "C" void cuda_layernorm_forward_fp8_fp16(fp16 *out, float *mean, float *rstd, const fp16 *x,
                                                const fp16 *weight, const fp16 *bias, int N, int C, float eps,
                                                const fp8_output *q) {
    layernorm_forward_t(as_half(out), mean, rstd, as_half(x), as_half(weight), as_half(bias), N, C, eps, q);
}

extern "C" void cuda_layernorm_backward(bf16 *dx, float *dweight, float *dbias, const bf16 *dout,
                                        const bf16 *x, const bf16 *weight, const float *mean,
                                        const float *rstd, int N, int C) {
    layernorm_backward_t(as_nv(dx), dweight, dbias, (float *)NULL, as_nv(dout), as_nv(x), as_nv(weight),
                         (const __nv_bfloat16 *)NULL, mean, rstd, N, C, false, 0.0f);
}

extern "C" void cuda_layernorm_backward_fp16(fp16 *dx, float *dweight, float *dbias, const fp16 *dout,
                                        const fp16 *x, const fp16 *weight, const float *mean,
                                        const float *rstd, int N, int C) {
    layernorm_backward_t(as_half(dx), dweight, dbias, (float *)NULL, as_half(dout), as_half(x), as_half(weight),
                         (const __half *)NULL, mean, rstd, N, C, false, 0.0f);
}

extern "C" void cuda_layernorm_backward_colsum(bf16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                               const bf16 *dout, const bf16 *x, const bf16 *weight, const float *mean,
                                               const float *rstd, int N, int C) {
    layernorm_backward_t(as_nv(dx), dweight, dbias, dx_colsum, as_nv(dout), as_nv(x), as_nv(weight),
                         (const __nv_bfloat16 *)NULL, mean, rstd, N, C, false, 0.0f);
}

extern "C" void cuda_layernorm_backward_colsum_fp16(fp16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                                    const fp16 *dout, const fp16 *x, const fp16 *weight,
                                                    const float *mean, const float *rstd, int N, int C) {
    layernorm_backward_t(as_half(dx), dweight, dbias, dx_colsum, as_half(dout), as_half(x), as_half(weight),
                         (const __half *)NULL, mean, rstd, N, C, false, 0.0f);
}

extern "C" void cuda_layernorm_backward_from_output(bf16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                                    const bf16 *dout, const bf16 *y, const bf16 *weight,
                                                    const bf16 *bias, const float *rstd, int N, int C, float eps) {
    layernorm_backward_t(as_nv(dx), dweight, dbias, dx_colsum, as_nv(dout), as_nv(y), as_nv(weight), as_nv(bias),
                         (const float *)NULL, rstd, N, C, true, eps);
}

extern "C" void cuda_layernorm_backward_from_output_fp16(fp16 *dx, float *dweight, float *dbias, float *dx_colsum,
                                                         const fp16 *dout, const fp16 *y, const fp16 *weight,
                                                         const fp16 *bias, const float *rstd, int N, int C,
                                                         float eps) {
    layernorm_backward_t(as_half(dx), dweight, dbias, dx_colsum, as_half(dout), as_half(y), as_half(weight),
                         as_half(bias), (const float *)NULL, rstd, N, C, true, eps);
}
