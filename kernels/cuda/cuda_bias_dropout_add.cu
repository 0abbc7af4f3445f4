/* cuda_bias_dropout_add.cu: Megatron's bias-dropout-add, the join of a row-parallel linear
 * layer's output with the residual stream, in one pass over bf16 or fp16 tensors (templates on
 * the element type, cuda_kernels_t.cuh):
 *   out[n,c] = residual[n,c] + dropout(x[n,c] + bias[c])
 * where element i = n*C + c keeps iff philox_keep(seed, stream, offset + i, p) and is scaled by
 * 1/(1-p), the mask of dropout_forward over the same rows (kernels/philox.h: 16 bits per
 * element, one Philox call per 8-element group when offset is a multiple of 8, philox_keep8). The arithmetic is
 * fp32 with one rounding to bf16 (fp16) at the end; the unfused bias_add, dropout_forward and
 * add (three passes, three roundings) stay for the backward's needs. One read of
 * x and of the residual, one write, instead of three reads and writes more. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

#define BDA_THREADS 256

static __device__ __forceinline__ float bda_value(float x, float bias, float residual, bool dropout, bool keep,
                                                  float keep_scale) {
    float v = x + bias;
    if (dropout) v = keep ? v * keep_scale : 0.0f;
    return residual + v;
}

template <typename E>
static __global__ void bias_dropout_add_kernel(E *out, const E *residual,
                                               const E *x, const E *bias, size_t n,
                                               int C, uint64_t seed, uint64_t stream, uint64_t offset,
                                               uint32_t threshold, float keep_scale, bool vectorized) {
    const bool dropout = threshold > 0u;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t groups = vectorized ? n / 8 : 0; /* C % 8 == 0: a group never crosses a row */
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        float xv[8], rv[8], bv[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ov[8];
        load_x8(xv, x + 8 * g);
        load_x8(rv, residual + 8 * g);
        if (bias != NULL) load_x8(bv, bias + (8 * g) % (size_t)C);
        /* one Philox call for the eight (two when offset is not a multiple of 8) */
        const uint32_t keep = dropout ? philox_keep8(seed, stream, offset + 8 * g, threshold) : 0xffu;
#pragma unroll
        for (int k = 0; k < 8; k++) ov[k] = bda_value(xv[k], bv[k], rv[k], dropout, (keep >> k) & 1u, keep_scale);
        store_x8(out + 8 * g, ov);
    }
    for (size_t i = 8 * groups + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float b = bias != NULL ? to_float(bias[i % (size_t)C]) : 0.0f;
        philox_keep_run run = PHILOX_KEEP_RUN_START;
        const bool keep = dropout && philox_keep_run_next(&run, seed, stream, offset + i, threshold);
        out[i] = from_float<E>(bda_value(to_float(x[i]), b, to_float(residual[i]), dropout, keep, keep_scale));
    }
}

template <typename E>
static void bias_dropout_add_t(E *out, const E *residual, const E *x, const E *bias, int N,
                                      int C, dropout_rng rng) {
    if (N <= 0 || C <= 0) return;
    size_t n = (size_t)N * C;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(residual) && aligned16(x) &&
                      (bias == NULL || aligned16(bias));
    float p = rng.p > 0.0f ? rng.p : 0.0f;
    float keep_scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    bias_dropout_add_kernel<<<grid_stride_blocks(vectorized ? n / 8 + n % 8 : n, BDA_THREADS), BDA_THREADS, 0,
                              compute_stream()>>>(out, residual, x, bias, n, C,
                                                  rng.seed, rng.stream, rng.offset, philox_threshold16(p), keep_scale,
                                                  vectorized);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_bias_dropout_add(bf16 *out, const bf16 *residual, const bf16 *x, const bf16 *bias, int N,
                                      int C, dropout_rng rng) {
    bias_dropout_add_t(as_nv(out), as_nv(residual), as_nv(x), as_nv(bias), N, C, rng);
}

extern "C" void cuda_bias_dropout_add_fp16(fp16 *out, const fp16 *residual, const fp16 *x, const fp16 *bias, int N,
                                      int C, dropout_rng rng) {
    bias_dropout_add_t(as_half(out), as_half(residual), as_half(x), as_half(bias), N, C, rng);
}
