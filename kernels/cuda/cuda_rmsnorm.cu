/* cuda_rmsnorm.cu: RMSNorm over rows of bf16 or fp16 x[N,C] (templates on the element type,
 * cuda_kernels_t.cuh) with an fp32 statistic, as the CPU reference
 * (kernels/cpu/cpu_rmsnorm.c):
 *   rstd = 1/sqrt(mean(x^2) + eps),  out = x * rstd * w
 *   backward, per row, with g = w*dout:  dx += rstd * (g - norm * mean(g*norm)),  norm = x*rstd
 *   dweight += sum over rows of dout*norm.
 * Forward: one warp per row with 128-bit accesses and the row in registers where C % 8 == 0,
 * C <= 2048 and the pointers are 16-byte aligned (as LayerNorm's warp kernel: the block-per-row
 * kernel with scalar loads reached about a quarter of the DRAM bandwidth at [16384, 1024] on an
 * H200, 58.7 us; perf/results/kernels, MoE profile of 2026-11-29); otherwise one block per row,
 * one block reduction. Backward: a fixed number of blocks (a
 * function of N and C only), each taking rows blockIdx.x, blockIdx.x + gridDim.x, ...; a thread
 * owns the same columns in every row and accumulates their dweight. Where C % 8 == 0, the
 * pointers are 16-byte aligned and a thread owns at most 4 units of 8 columns, the row-cached
 * kernel of cuda_norm_backward.cuh runs (128-bit accesses, the row kept in registers between its
 * two passes, the next row loaded ahead); otherwise a scalar kernel with the accumulators in
 * shared memory. The per-block partials are added in a fixed order by the last blocks to finish
 * (column_sums_by_last_blocks, cuda_common.cuh): no atomics on the sums, bitwise reproducible. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_norm_backward.cuh"

static int rms_threads(int C) {
    int threads = (C + 31) / 32 * 32;
    if (threads < 32) threads = 32;
    if (threads > 512) threads = 512;
    return threads;
}

template <typename E>
static __global__ void rmsnorm_forward_kernel(E *out, float *rstd,
                                              const E *x,
                                              const E *weight, int C, float eps) {
    __shared__ float reduce_scratch[32];
    const size_t n = blockIdx.x;
    const E *x_row = x + n * C;
    E *out_row = out + n * C;
    float squares = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float v = to_float(x_row[c]);
        squares += v * v;
    }
    const float s = rsqrtf(block_sum_f32(squares, reduce_scratch) / (float)C + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        out_row[c] = from_float<E>(to_float(x_row[c]) * s * to_float(weight[c]));
    if (threadIdx.x == 0) rstd[n] = s;
}

#define RMS_WARP_ROWS 8 /* rows (warps) per block of the warp-per-row forward */

/* one warp per row, the row's units of 8 columns u = lane, lane + 32, ... (at most UNITS of
 * them) in registers between the sum of squares and the output */
template <typename E, int UNITS, bool FP8>
static __global__ void __launch_bounds__(32 * RMS_WARP_ROWS)
rmsnorm_forward_warp_kernel(E *out, float *rstd, const E *x, const E *weight, int N, int C, float eps, fp8_output q) {
    const int lane = threadIdx.x % 32;
    const size_t n = (size_t)blockIdx.x * RMS_WARP_ROWS + threadIdx.x / 32;
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
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        if (lane + 32 * i < units) {
            float v[8];
            load_x8(v, reinterpret_cast<const E *>(&raw[i]));
#pragma unroll
            for (int k = 0; k < 8; k++) squares += v[k] * v[k];
        }
    }
    const float s = rsqrtf(warp_sum_f32(squares) / (float)C + eps);
    E *out_row = out + n * C;
#pragma unroll
    for (int i = 0; i < UNITS; i++) {
        const int u = lane + 32 * i;
        if (u < units) {
            float v[8], w[8];
            load_x8(v, reinterpret_cast<const E *>(&raw[i]));
            load_x8(w, weight + 8 * u);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = v[k] * s * w[k];
            store_x8(out_row + 8 * u, v);
            if constexpr (FP8)
                *reinterpret_cast<uint2 *>(q.codes + n * C + 8 * u) = stored_codes8<E>(v, fp8_scale, q.format, &fp8_local);
        }
    }
    if (lane == 0) rstd[n] = s;
    }
    if constexpr (FP8) fp8_block_finish(q.amax, q.scale_inv, fp8_local, fp8_scale);
}

/* the forward; with q (not NULL) the fp8 codes of the output too: fused into the warp kernel
 * where it runs, otherwise fp8_quantize after (the same bits) */
template <typename E>
static void rmsnorm_forward_t(E *out, float *rstd, const E *x, const E *weight,
                                     int N, int C, float eps, const fp8_output *q = NULL) {
    if (N <= 0 || C <= 0) {
        if (q) fp8_quantize_after(x, 0, q);
        return;
    }
    const int units_per_lane = C % 8 == 0 && aligned16(out) && aligned16(x) && aligned16(weight) ? (C / 8 + 31) / 32 : 0;
    if (units_per_lane >= 1 && units_per_lane <= 8) {
        const unsigned int blocks = (unsigned int)(((size_t)N + RMS_WARP_ROWS - 1) / RMS_WARP_ROWS);
        const bool fused = q && fp8_out_aligned(q);
        const fp8_output none = {NULL, NULL, NULL, NULL, 0};
#define RMSNORM_WARP(U)                                                                            \
    if (fused)                                                                                     \
        rmsnorm_forward_warp_kernel<E, U, true><<<blocks, 32 * RMS_WARP_ROWS, 0, compute_stream()>>>( \
            out, rstd, x, weight, N, C, eps, *q);                                                  \
    else                                                                                           \
        rmsnorm_forward_warp_kernel<E, U, false><<<blocks, 32 * RMS_WARP_ROWS, 0, compute_stream()>>>( \
            out, rstd, x, weight, N, C, eps, none)
        switch (units_per_lane) {
        case 1: RMSNORM_WARP(1); break;
        case 2: RMSNORM_WARP(2); break;
        case 3: RMSNORM_WARP(3); break;
        case 4: RMSNORM_WARP(4); break;
        case 5: RMSNORM_WARP(5); break;
        case 6: RMSNORM_WARP(6); break;
        case 7: RMSNORM_WARP(7); break;
        default: RMSNORM_WARP(8); break;
        }
#undef RMSNORM_WARP
        CHECK_LAUNCH();
        if (q && !fused) fp8_quantize_after(out, (size_t)N * (size_t)C, q);
        return;
    }
    rmsnorm_forward_kernel<<<(unsigned int)N, rms_threads(C), 0, compute_stream()>>>(
        out, rstd, x, weight, C, eps);
    CHECK_LAUNCH();
    if (q) fp8_quantize_after(out, (size_t)N * (size_t)C, q);
}

/* blocks of the backward: one per 32 rows (as the LayerNorm's), at most one per row, partials of
 * at most 4M floats; a function of N and C only. At [16384, 2048] on an H100 106.7 us at the
 * earlier cap of 1024 blocks, 100.2-101.4 at 32 rows per block (16 rows: 106.6, 64 rows: 113.6);
 * at [32768, 768] the same 1024 blocks as before
 * (perf/results/kernels/layernorm-backward-blocks-h100-2026-11-27.md) */
static int rmsnorm_backward_blocks(int N, int C) {
    int blocks = (N + 31) / 32;
    int by_memory = (int)((4u << 20) / (unsigned int)C);
    if (by_memory < 1) by_memory = 1;
    if (blocks > by_memory) blocks = by_memory;
    if (blocks > N) blocks = N;
    return blocks;
}

template <typename E>
static __global__ void rmsnorm_backward_kernel(E *dx, float *dweight, float *partials,
                                               float *group_sums, unsigned int *counters,
                                               const E *dout,
                                               const E *x,
                                               const E *weight, const float *rstd,
                                               int N, int C, bool from_output, float eps) {
    extern __shared__ __align__(16) unsigned char rmsnorm_shared[];
    float *dweight_acc = reinterpret_cast<float *>(rmsnorm_shared); /* [C] */
    __shared__ float reduce_scratch[32];
    for (int c = threadIdx.x; c < C; c += blockDim.x) dweight_acc[c] = 0.0f;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const E *x_row = x + (size_t)n * C, *dout_row = dout + (size_t)n * C;
        E *dx_row = dx + (size_t)n * C;
        const float s = rstd[n];
        /* the normalized input: from x, or from the output y = norm * w (from_output) */
#define NORM_OF(c) (from_output ? to_float(x_row[c]) * norm_weight_reciprocal(to_float(weight[c]), eps) : to_float(x_row[c]) * s)
        float g_norm = 0.0f;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            g_norm += to_float(weight[c]) * to_float(dout_row[c]) * NORM_OF(c);
        const float g_norm_mean = block_sum_f32(g_norm, reduce_scratch) / (float)C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float norm = NORM_OF(c), d = to_float(dout_row[c]);
            dweight_acc[c] += norm * d;
            const float g = to_float(weight[c]) * d;
            dx_row[c] = from_float<E>(to_float(dx_row[c]) + (g - norm * g_norm_mean) * s);
        }
#undef NORM_OF
    }
    float *dweight_out = partials + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dweight_out[c] = dweight_acc[c];
    column_sums_by_last_blocks(dweight, NULL, NULL, C, partials, group_sums, counters, blockIdx.x,
                                   gridDim.x, 0, C, C, C % 4 == 0, threadIdx.x, blockDim.x);
}

/* from_output: x is the norm's output y (kernels.h, rmsnorm_backward_from_output) */
template <typename E>
static void rmsnorm_backward_t(E *dx, float *dweight, const E *dout, const E *x,
                                      const E *weight, const float *rstd, int N, int C, bool from_output,
                                      float eps) {
    if (N <= 0 || C <= 0) return;
    const int blocks = rmsnorm_backward_blocks(N, C);
    /* partials[blocks, C], then group_sums[32, C] */
    float *partials = (float *)stream_scratch(((size_t)blocks + 32) * C * sizeof(float));
    float *group_sums = partials + (size_t)blocks * C;
    unsigned int *counters = stream_counters(33);
    const bool vectorized = C % 8 == 0 && aligned16(dx) && aligned16(dout) && aligned16(x) &&
                            aligned16(weight);
    const int threads = vectorized ? rms_threads(C / 8) : rms_threads(C);
    const int units_per_thread = vectorized ? (C / 8 + threads - 1) / threads : 0;
    if (!launch_norm_backward_cached<E, false>(units_per_thread, blocks, threads, dx, dweight, NULL, NULL, partials,
                                               group_sums, counters, dout, x, weight, NULL, NULL, rstd, N, C,
                                               from_output, eps)) {
        const size_t shared_bytes = (size_t)C * sizeof(float);
        /* reduce_scratch, the last-block flags */
        const size_t static_bytes = 32 * sizeof(float) + 16;
        if (shared_bytes + static_bytes > 48 * 1024) {
            int device = 0, limit = 0;
            CHECK_CUDA(cudaGetDevice(&device));
            CHECK_CUDA(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
            if (shared_bytes + static_bytes > (size_t)limit)
                KERNELS_FATAL("rmsnorm_backward needs %zu bytes of shared memory, the device allows %d",
                              shared_bytes + static_bytes, limit);
            CHECK_CUDA(cudaFuncSetAttribute((const void *)rmsnorm_backward_kernel<E>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)shared_bytes));
        }
        const int threads = rms_threads(C); /* one column per thread here */
        rmsnorm_backward_kernel<<<blocks, threads, shared_bytes, compute_stream()>>>(
            dx, dweight, partials, group_sums, counters, dout, x, weight, rstd, N, C, from_output, eps);
    }
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_rmsnorm_forward(bf16 *out, float *rstd, const bf16 *x, const bf16 *weight,
                                     int N, int C, float eps) {
    rmsnorm_forward_t(as_nv(out), rstd, as_nv(x), as_nv(weight), N, C, eps);
}

extern "C" void cuda_rmsnorm_forward_fp8(bf16 *out, float *rstd, const bf16 *x, const bf16 *weight, int N, int C,
                                         float eps, const fp8_output *q) {
    rmsnorm_forward_t(as_nv(out), rstd, as_nv(x), as_nv(weight), N, C, eps, q);
}

extern "C" void cuda_rmsnorm_forward_fp8_fp16(fp16 *out, float *rstd, const fp16 *x, const fp16 *weight, int N, int C,
                                              float eps, const fp8_output *q) {
    rmsnorm_forward_t(as_half(out), rstd, as_half(x), as_half(weight), N, C, eps, q);
}

extern "C" void cuda_rmsnorm_forward_fp16(fp16 *out, float *rstd, const fp16 *x, const fp16 *weight,
                                     int N, int C, float eps) {
    rmsnorm_forward_t(as_half(out), rstd, as_half(x), as_half(weight), N, C, eps);
}

extern "C" void cuda_rmsnorm_backward(bf16 *dx, float *dweight, const bf16 *dout, const bf16 *x,
                                      const bf16 *weight, const float *rstd, int N, int C) {
    rmsnorm_backward_t(as_nv(dx), dweight, as_nv(dout), as_nv(x), as_nv(weight), rstd, N, C, false, 0.0f);
}

extern "C" void cuda_rmsnorm_backward_from_output(bf16 *dx, float *dweight, const bf16 *dout, const bf16 *y,
                                                  const bf16 *weight, const float *rstd, int N, int C, float eps) {
    rmsnorm_backward_t(as_nv(dx), dweight, as_nv(dout), as_nv(y), as_nv(weight), rstd, N, C, true, eps);
}

extern "C" void cuda_rmsnorm_backward_fp16(fp16 *dx, float *dweight, const fp16 *dout, const fp16 *x,
                                      const fp16 *weight, const float *rstd, int N, int C) {
    rmsnorm_backward_t(as_half(dx), dweight, as_half(dout), as_half(x), as_half(weight), rstd, N, C, false, 0.0f);
}

extern "C" void cuda_rmsnorm_backward_from_output_fp16(fp16 *dx, float *dweight, const fp16 *dout, const fp16 *y,
                                                       const fp16 *weight, const float *rstd, int N, int C,
                                                       float eps) {
    rmsnorm_backward_t(as_half(dx), dweight, as_half(dout), as_half(y), as_half(weight), rstd, N, C, true, eps);
}
