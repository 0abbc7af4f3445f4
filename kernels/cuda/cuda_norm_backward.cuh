/* cuda_norm_backward.cuh: the row-cached backward shared by the layer norm (LAYERNORM true,
 * cuda_layernorm.cu) and RMSNorm (false, cuda_rmsnorm.cu), for rows of C % 8 == 0 columns read
 * with 128-bit accesses (16-byte aligned pointers). Per row n, with g = w*dout:
 *   layer norm: norm = (x - mean) * rstd, dx += rstd * (g - mean(g) - norm * mean(g*norm)),
 *               dweight += dout*norm, dbias += dout;
 *   RMSNorm:    norm = x * rstd,          dx += rstd * (g - norm * mean(g*norm)), dweight += dout*norm.
 * FROM_OUTPUT (--memory-efficient-layer-norm): x is the norm's output y = norm * w + b, and
 * norm = (y - b) * (1 / w') (RMSNorm: y * (1 / w')), w' = w clamped in magnitude to at least eps,
 * as Apex's memory-efficient kernels; mean is not read. The reciprocal is the hardware's, per
 * element, and the bias comes from the cache in each row: IEEE divisions, or the reciprocals and
 * the bias kept in registers, made the one- and two-unit forms spill (the first try made the GPT
 * 1.3B step 3% slower than reading x); now they compile to the registers of the forms from x,
 * 7% slower than them at [16384, 2048] (the reciprocals taken once into shared memory instead:
 * slower still; perf/results/training/memory-efficient-layernorm-h100-2026-11-27.md).
 * Blocks take rows blockIdx.x, blockIdx.x + gridDim.x, ... (gridDim.x a function of N and C
 * only); a thread owns UNITS = ceil(C / 8 / blockDim.x) <= 4 units of 8 columns (unit
 * u = threadIdx.x + i * blockDim.x) in every row and keeps them in registers between the row's
 * two passes, as it keeps the weight and its dweight/dbias accumulators. PREFETCH: the next row's
 * units are loaded before the current row's block sum (so a block has two rows in flight); the
 * dx row is loaded before it too. SUM (layer norm only): also dx_colsum += the column sums of
 * the updated dx as stored (rounded), the gradient of a bias added to the residual stream at this
 * point, which then needs no pass of its own. Each block writes partials[blockIdx.x, width]
 * (width = 3C: [dweight | dbias | dx_colsum], 2C: [dweight | dbias], or C: [dweight]) and the
 * last blocks add them in a fixed order into dweight, dbias and dx_colsum: the two levels of
 * column_sums_by_last_blocks (cuda_common.cuh), where no block waits for another (a variant
 * whose last blocks waited for all others measured 6 us faster at [16384, 2048] on an H100, but
 * CUDA does not promise that such waiting ends); partials
 * holds gridDim.x rows, group_sums 32 rows of width floats, counters 33 zeroed words. */
#ifndef CUDA_NORM_BACKWARD_CUH
#define CUDA_NORM_BACKWARD_CUH

#include "kernels/cuda/cuda_common.cuh"

/* 1 / w', w' a norm weight clamped in magnitude to at least eps (Apex's clamp_by_magnitude; the
 * CPU's cpu_norm_weight_reciprocal): the factor that turns a norm's output back into its
 * normalized input, by the hardware reciprocal (within an ulp of the CPU's; |w'| >= eps keeps
 * it away from denormals) */
static __device__ __forceinline__ float norm_weight_reciprocal(float w, float eps) {
    const float clamped = w >= 0.0f ? (w < eps ? eps : w) : (w > -eps ? -eps : w);
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(clamped));
    return r;
}

/* bv = the bias of unit u (8 columns) when the backward works from a layer norm's output (LOAD),
 * else zeros; read through the cache in every row, so that registers stay free for the rows in
 * flight */
template <typename E, bool LOAD>
static __device__ __forceinline__ void load_output_bias8(float (&bv)[8], const E *bias, unsigned int u) {
    if (LOAD) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4 *>(bias + 8 * u));
        load_x8(bv, reinterpret_cast<const E *>(&raw));
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) bv[k] = 0.0f;
    }
}

template <typename E, int UNITS, bool PREFETCH, bool LAYERNORM, bool SUM, bool FROM_OUTPUT>
static __global__ void __launch_bounds__(512, UNITS == 1 ? 2 : 1) /* UNITS 1: <= 64 registers */
norm_backward_cached_kernel(E *dx, float *dweight, float *dbias, float *dx_colsum, float *partials,
                                 float *group_sums, unsigned int *counters, const E *dout,
                                 const E *x, const E *weight, const E *bias, const float *mean,
                                 const float *rstd, int N, int C, float eps) {
    __shared__ float reduce_scratch[64];
    const int units = C / 8;
    /* 16-bit values stay packed in registers and are widened where used */
    float dweight_acc[UNITS][8], dbias_acc[UNITS][8], dsum_acc[SUM ? UNITS : 1][8];
    uint4 w_raw[UNITS], x_raw[UNITS], dout_raw[UNITS], next_x[UNITS], next_dout[UNITS], dx_raw[UNITS];
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        const int u = threadIdx.x + i * blockDim.x;
#pragma unroll
        for (int k = 0; k < 8; k++) dweight_acc[i][k] = dbias_acc[i][k] = dsum_acc[SUM ? i : 0][k] = 0.0f;
        w_raw[i] = x_raw[i] = dout_raw[i] = next_x[i] = next_dout[i] = dx_raw[i] = zero;
        if (u < units) w_raw[i] = *reinterpret_cast<const uint4 *>(weight + 8 * u);
    }
    int n = blockIdx.x;
    if (PREFETCH && n < N) {
#pragma unroll
        for (int i = 0; i < UNITS; i++) {
            const int u = threadIdx.x + i * blockDim.x;
            if (u < units) {
                next_x[i] = *reinterpret_cast<const uint4 *>(x + (size_t)n * C + 8 * u);
                next_dout[i] = *reinterpret_cast<const uint4 *>(dout + (size_t)n * C + 8 * u);
            }
        }
    }
    for (; n < N; n += gridDim.x) {
        const size_t row = (size_t)n * C;
        const int following = n + gridDim.x;
#pragma unroll
        for (int i = 0; i < UNITS; i++) {
            const int u = threadIdx.x + i * blockDim.x;
            if (PREFETCH) {
                x_raw[i] = next_x[i];
                dout_raw[i] = next_dout[i];
                if (u < units && following < N) {
                    next_x[i] = *reinterpret_cast<const uint4 *>(x + (size_t)following * C + 8 * u);
                    next_dout[i] = *reinterpret_cast<const uint4 *>(dout + (size_t)following * C + 8 * u);
                }
            } else if (u < units) {
                x_raw[i] = *reinterpret_cast<const uint4 *>(x + row + 8 * u);
                dout_raw[i] = *reinterpret_cast<const uint4 *>(dout + row + 8 * u);
            }
            if (u < units) dx_raw[i] = *reinterpret_cast<const uint4 *>(dx + row + 8 * u);
        }
        const float m = LAYERNORM && !FROM_OUTPUT ? mean[n] : 0.0f, s = rstd[n];
        /* the normalized input: from x, or from the output y = norm * w + b (--memory-efficient-layer-norm) */
#define NORM_OF(xk, rk, bk) (FROM_OUTPUT ? ((xk) - (bk)) * (rk) : LAYERNORM ? ((xk) - m) * s : (xk) * s)

        /* the two row reductions of the dx formula */
        float g_sum = 0.0f, g_norm_sum = 0.0f;
#pragma unroll
        for (int i = 0; i < UNITS; i++) {
            if (threadIdx.x + i * blockDim.x < units) {
                float xv[8], dv[8], wv[8], bv[8];
                load_x8(xv, reinterpret_cast<const E *>(&x_raw[i]));
                load_x8(dv, reinterpret_cast<const E *>(&dout_raw[i]));
                load_x8(wv, reinterpret_cast<const E *>(&w_raw[i]));
                load_output_bias8<E, FROM_OUTPUT && LAYERNORM>(bv, bias, threadIdx.x + i * blockDim.x);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float norm = NORM_OF(xv[k], norm_weight_reciprocal(wv[k], eps), bv[k]);
                    float g = wv[k] * dv[k];
                    if (LAYERNORM) g_sum += g;
                    g_norm_sum += g * norm;
                }
            }
        }
        if (LAYERNORM) block_sum2_f32(g_sum, g_norm_sum, reduce_scratch);
        else g_norm_sum = block_sum_f32(g_norm_sum, reduce_scratch);
        const float g_mean = g_sum / (float)C;
        const float g_norm_mean = g_norm_sum / (float)C;

        /* dx += (g - mean(g) - norm * mean(g*norm)) * rstd; parameter gradients per column */
#pragma unroll
        for (int i = 0; i < UNITS; i++) {
            const int u = threadIdx.x + i * blockDim.x;
            if (u < units) {
                float xv[8], dv[8], wv[8], bv[8], dxv[8];
                load_x8(xv, reinterpret_cast<const E *>(&x_raw[i]));
                load_x8(dv, reinterpret_cast<const E *>(&dout_raw[i]));
                load_x8(wv, reinterpret_cast<const E *>(&w_raw[i]));
                load_output_bias8<E, FROM_OUTPUT && LAYERNORM>(bv, bias, threadIdx.x + i * blockDim.x);
                load_x8(dxv, reinterpret_cast<const E *>(&dx_raw[i]));
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float norm = NORM_OF(xv[k], norm_weight_reciprocal(wv[k], eps), bv[k]);
                    float g = wv[k] * dv[k];
                    if (LAYERNORM) dbias_acc[i][k] += dv[k];
                    dweight_acc[i][k] += norm * dv[k];
                    if (LAYERNORM) dxv[k] += (g - g_mean - norm * g_norm_mean) * s;
                    else dxv[k] += (g - norm * g_norm_mean) * s;
                }
                store_x8(dx + row + 8 * u, dxv);
                if (SUM) {
#pragma unroll
                    for (int k = 0; k < 8; k++) dsum_acc[SUM ? i : 0][k] += to_float(from_float<E>(dxv[k]));
                }
            }
        }
    }

#undef NORM_OF

    const int width = SUM ? 3 * C : LAYERNORM ? 2 * C : C; /* [dweight | dbias | dx_colsum] per block */
    float *dweight_out = partials + (size_t)blockIdx.x * width;
    float *dbias_out = dweight_out + C, *dsum_out = dbias_out + C;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        const int u = threadIdx.x + i * blockDim.x;
        if (u < units) {
            *reinterpret_cast<float4 *>(dweight_out + 8 * u) =
                make_float4(dweight_acc[i][0], dweight_acc[i][1], dweight_acc[i][2], dweight_acc[i][3]);
            *reinterpret_cast<float4 *>(dweight_out + 8 * u + 4) =
                make_float4(dweight_acc[i][4], dweight_acc[i][5], dweight_acc[i][6], dweight_acc[i][7]);
            if (LAYERNORM) {
                *reinterpret_cast<float4 *>(dbias_out + 8 * u) =
                    make_float4(dbias_acc[i][0], dbias_acc[i][1], dbias_acc[i][2], dbias_acc[i][3]);
                *reinterpret_cast<float4 *>(dbias_out + 8 * u + 4) =
                    make_float4(dbias_acc[i][4], dbias_acc[i][5], dbias_acc[i][6], dbias_acc[i][7]);
            }
            if (SUM) {
                const int j = SUM ? i : 0;
                *reinterpret_cast<float4 *>(dsum_out + 8 * u) =
                    make_float4(dsum_acc[j][0], dsum_acc[j][1], dsum_acc[j][2], dsum_acc[j][3]);
                *reinterpret_cast<float4 *>(dsum_out + 8 * u + 4) =
                    make_float4(dsum_acc[j][4], dsum_acc[j][5], dsum_acc[j][6], dsum_acc[j][7]);
            }
        }
    }
    column_sums_by_last_blocks(dweight, dbias, dx_colsum, C, partials, group_sums, counters, blockIdx.x,
                                   gridDim.x, 0, width, width, true, threadIdx.x, blockDim.x);
}

/* launch the kernel for a row of units_per_thread units per thread, 1 to 4 (prefetching the next
 * row at 1 and 2, where the registers allow it); false for any other count (0: rows not
 * vectorized), which the caller's shared-memory kernel takes. With dx_colsum (layer norm only)
 * the SUM form, at 1 and 2 units (false beyond: the caller sums the columns in a pass of its
 * own); partials then hold 3C floats per block. With from_output x is the norm's output y and
 * bias its bias (layer norm; NULL for RMSNorm), mean unused. */
template <typename E, bool LAYERNORM>
static bool launch_norm_backward_cached(int units_per_thread, int blocks, int threads, E *dx, float *dweight,
                                        float *dbias, float *dx_colsum, float *partials, float *group_sums,
                                        unsigned int *counters, const E *dout, const E *x, const E *weight,
                                        const E *bias, const float *mean, const float *rstd, int N, int C,
                                        bool from_output, float eps) {
#define NORM_BACKWARD_CACHED(U, P, S, F)                                                              \
    norm_backward_cached_kernel<E, U, P, LAYERNORM, S, F><<<blocks, threads, 0, compute_stream()>>>(  \
        dx, dweight, dbias, dx_colsum, partials, group_sums, counters, dout, x, weight, bias, mean, rstd, N, C, eps)
#define NORM_BACKWARD_CACHED_BOTH(U, P, S)                                                            \
    do {                                                                                              \
        if (from_output) NORM_BACKWARD_CACHED(U, P, S, true);                                         \
        else NORM_BACKWARD_CACHED(U, P, S, false);                                                    \
    } while (0)
    if (dx_colsum != NULL) {
        if (!LAYERNORM) return false;
        switch (units_per_thread) {
        case 1: NORM_BACKWARD_CACHED_BOTH(1, true, LAYERNORM); return true;
        case 2: NORM_BACKWARD_CACHED_BOTH(2, true, LAYERNORM); return true;
        default: return false;
        }
    }
    switch (units_per_thread) {
    case 1: NORM_BACKWARD_CACHED_BOTH(1, true, false); return true;
    case 2: NORM_BACKWARD_CACHED_BOTH(2, true, false); return true;
    case 3: NORM_BACKWARD_CACHED_BOTH(3, false, false); return true;
    case 4: NORM_BACKWARD_CACHED_BOTH(4, false, false); return true;
    default: return false;
    }
#undef NORM_BACKWARD_CACHED_BOTH
#undef NORM_BACKWARD_CACHED
}

#endif /* CUDA_NORM_BACKWARD_CUH */
