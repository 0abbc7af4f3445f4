/* cuda_common.cuh: what every CUDA kernel file shares: bf16 views of the C storage type (fp16
 * views and the 16-bit element templates are in cuda_kernels_t.cuh, included here), the compute
 * stream, launch-size arithmetic, the checks after a launch, block sums and the fixed-order
 * column sums of per-block partials (a second launch, or finished inside the producing kernel).
 * Device code only; C code includes cuda_kernels.h instead. */
#ifndef CUDA_COMMON_CUH
#define CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_kernels_t.cuh"

/* the C storage type and CUDA's bf16 have the same bits */
static inline __nv_bfloat16 *as_nv(bf16 *p) { return reinterpret_cast<__nv_bfloat16 *>(p); }
static inline const __nv_bfloat16 *as_nv(const bf16 *p) {
    return reinterpret_cast<const __nv_bfloat16 *>(p);
}

static inline cudaStream_t compute_stream(void) { return (cudaStream_t)cuda_stream(); }

/* lanes: side streams for independent GEMMs (cuda_context.cu) */
enum { CUDA_LANES_MAX = 4 };
void cuda_lane_fork(int lanes);
void cuda_lane_select(int lane);
void cuda_lane_join(int lanes);

static inline unsigned int ceil_div(size_t a, size_t b) { return (unsigned int)((a + b - 1) / b); }

/* after every launch: a bad configuration is reported at its call site, not at the next sync */
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())


/* ---- shared by the elementwise, embedding, layer norm, matmul and AdamW kernels ---- */

/* a failing cuBLASLt call is named with its status, file and line and reported through
 * kernels_fatal, like CHECK_CUDA (expand only in files that include <cublasLt.h>) */
#define CHECK_CUBLAS(call)                                                                 \
    do {                                                                                   \
        cublasStatus_t cublas_status_ = (call);                                            \
        if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                       \
            kernels_fatal(__FILE__, __LINE__, "%s failed: %s (status %d)", #call,          \
                          cublasLtGetStatusString(cublas_status_), (int)cublas_status_);   \
    } while (0)

/* whether a pointer allows 128-bit (8 x bf16 or fp16, 4 x fp32) loads and stores */
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* number of SMs of the current device (grid sizes of grid-stride loops; never used where it
 * would change a reduction order) */
static inline int device_sm_count(void) {
    static int sm_count = 0;
    if (sm_count == 0) {
        int device = 0;
        CHECK_CUDA(cudaGetDevice(&device));
        CHECK_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
        if (sm_count <= 0) sm_count = 1;
    }
    return sm_count;
}

/* blocks for a grid-stride loop over `work` items: enough to fill the GPU, not more */
static inline unsigned int grid_stride_blocks(size_t work, int threads) {
    size_t blocks = (work + (size_t)threads - 1) / (size_t)threads;
    size_t cap = (size_t)device_sm_count() * 16;
    if (blocks > cap) blocks = cap;
    return blocks ? (unsigned int)blocks : 1u;
}

/* a grow-only device buffer (*buffer, *capacity bytes) holding at least `bytes`: when it grows
 * it is (re)allocated with `extra` bytes more, in stream order on the compute stream, so kernels
 * still using the old buffer finish before it is released; its contents do not survive growth */
static inline void *grow_device_buffer(void **buffer, size_t *capacity, size_t bytes, size_t extra) {
    if (bytes > *capacity) {
        if (*buffer != NULL) CHECK_CUDA(cudaFreeAsync(*buffer, compute_stream()));
        CHECK_CUDA(cudaMallocAsync(buffer, bytes + extra, compute_stream()));
        *capacity = bytes + extra;
    }
    return *buffer;
}

/* a grow-only device scratch buffer (one per .cu file), with a quarter of headroom; its contents
 * do not survive from one call to the next */
static inline void *stream_scratch(size_t bytes) {
    static void *scratch_buffer = NULL;
    static size_t scratch_capacity = 0;
    return grow_device_buffer(&scratch_buffer, &scratch_capacity, bytes, bytes / 4 + 256);
}

/* butterfly sums over a full warp: every lane ends with the same, order-fixed value */
static __device__ __forceinline__ float warp_sum_f32(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
static __device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/* sum over a 1-D block whose size is a multiple of 32 (at most 1024), returned to every thread
 * in a fixed order (warps, then warp totals); shared32 is __shared__ scratch of 32 values that
 * may be reused right after the call */
static __device__ __forceinline__ float block_sum_f32(float v, float *shared32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum_f32(v);
    __syncthreads(); /* an earlier call's readers are done with shared32 */
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    return warp_sum_f32(lane < warps ? shared32[lane] : 0.0f);
}
/* two block sums at once, each with block_sum_f32's order and bits, through one pair of barriers
 * (shared64: 64 floats) */
static __device__ __forceinline__ void block_sum2_f32(float &a, float &b, float *shared64) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    a = warp_sum_f32(a);
    b = warp_sum_f32(b);
    __syncthreads(); /* an earlier call's readers are done with shared64 */
    if (lane == 0) {
        shared64[warp] = a;
        shared64[32 + warp] = b;
    }
    __syncthreads();
    a = warp_sum_f32(lane < warps ? shared64[lane] : 0.0f);
    b = warp_sum_f32(lane < warps ? shared64[32 + lane] : 0.0f);
}
static __device__ __forceinline__ double block_sum_f64(double v, double *shared32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum_f64(v);
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    return warp_sum_f64(lane < warps ? shared32[lane] : 0.0);
}


/* ---- fixed-order column sums of per-block partials, finished by the last blocks ----
 * A reduction over rows (the layer-norm and RMSNorm parameter gradients) has its blocks write
 * partial sums partials[rows, width] (row = the block's share of the rows); the sum over rows is
 * then finished inside the same kernel, in the order of the separate column_sum_accumulate pass
 * (below; a 32 x 32 block per 32 columns: thread y sums rows y, y+32, ... in order, then the
 * 32 sums are added in order y = 0..31), so the bits are the same:
 *   level 1: the last block to finish among the rows r = y (mod 32) (an atomic counter per y,
 *            bookkeeping only) adds those rows in order into group_sums[y, columns];
 *   level 2: the last of the (at most 32) level-1 blocks adds group_sums[0..31] in order into
 *            out (out0 for columns below split, out1 from split on, out2 from 2 split on).
 * Counters: 33 per column range (zero between launches: each is reset by its last user); the
 * partials are read with __ldcg, past the (incoherent) L1. Call with every thread of the block
 * (thread tid of nthreads) after the block's partial row is written; no barrier may follow. */
static __device__ __forceinline__ void finish_one_column(float *out0, float *out1, float *out2, int split,
                                                         int c, float total) {
    if (c < split) out0[c] += total;
    else if (c < 2 * split) out1[c - split] += total;
    else out2[c - 2 * split] += total;
}

static __device__ void column_sums_by_last_blocks(float *out0, float *out1, float *out2, int split,
                                                  const float *partials, float *group_sums,
                                                  unsigned int *counters, int row, int rows,
                                                  int col_begin, int col_end, int width,
                                                  bool vectorized, int tid, int nthreads) {
    __shared__ int last_block;
    const int y = row & 31;
    const int groups = rows < 32 ? rows : 32;
    __threadfence(); /* this block's partial row is visible before the counter says so */
    __syncthreads();
    if (tid == 0) {
        const unsigned int members = (unsigned int)((rows - y + 31) / 32);
        const bool last = atomicAdd(&counters[y], 1u) == members - 1;
        if (last) counters[y] = 0;
        last_block = last;
    }
    __syncthreads();
    if (!last_block) return;
    __threadfence();

    /* level 1: group_sums[y, c] = rows y, y+32, ... in order, 8 (float4) or 16 loads in flight */
    if (vectorized) { /* col_begin, col_end and width multiples of 4 */
        for (int c = col_begin + 4 * tid; c < col_end; c += 4 * nthreads) {
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            int r = y;
            for (; r + 7 * 32 < rows; r += 8 * 32) {
                float4 v[8];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[j] = __ldcg(reinterpret_cast<const float4 *>(partials + (size_t)(r + 32 * j) * width + c));
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    acc.x += v[j].x; acc.y += v[j].y; acc.z += v[j].z; acc.w += v[j].w;
                }
            }
            for (; r < rows; r += 32) {
                float4 v = __ldcg(reinterpret_cast<const float4 *>(partials + (size_t)r * width + c));
                acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
            }
            __stcg(reinterpret_cast<float4 *>(group_sums + (size_t)y * width + c), acc);
        }
    } else {
        for (int c = col_begin + tid; c < col_end; c += nthreads) {
            float acc = 0.0f;
            int r = y;
            for (; r + 15 * 32 < rows; r += 16 * 32) {
                float v[16];
#pragma unroll
                for (int j = 0; j < 16; j++) v[j] = __ldcg(partials + (size_t)(r + 32 * j) * width + c);
#pragma unroll
                for (int j = 0; j < 16; j++) acc += v[j];
            }
            for (; r < rows; r += 32) acc += __ldcg(partials + (size_t)r * width + c);
            __stcg(group_sums + (size_t)y * width + c, acc);
        }
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const bool last = atomicAdd(&counters[32], 1u) == (unsigned int)groups - 1;
        if (last) counters[32] = 0;
        last_block = last;
    }
    __syncthreads();
    if (!last_block) return;
    __threadfence();

    /* level 2: out += group_sums[0..groups-1] in order (the empty groups of rows < 32 added
     * +0.0f in the old pass, which changes no sum that starts from +0.0f) */
    if (vectorized) {
        for (int c = col_begin + 4 * tid; c < col_end; c += 4 * nthreads) {
            float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            int g = 0;
            for (; g + 7 < groups; g += 8) {
                float4 v[8];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    v[j] = __ldcg(reinterpret_cast<const float4 *>(group_sums + (size_t)(g + j) * width + c));
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    total.x += v[j].x; total.y += v[j].y; total.z += v[j].z; total.w += v[j].w;
                }
            }
            for (; g < groups; g++) {
                float4 v = __ldcg(reinterpret_cast<const float4 *>(group_sums + (size_t)g * width + c));
                total.x += v.x; total.y += v.y; total.z += v.z; total.w += v.w;
            }
            finish_one_column(out0, out1, out2, split, c, total.x);
            finish_one_column(out0, out1, out2, split, c + 1, total.y);
            finish_one_column(out0, out1, out2, split, c + 2, total.z);
            finish_one_column(out0, out1, out2, split, c + 3, total.w);
        }
    } else {
        for (int c = col_begin + tid; c < col_end; c += nthreads) {
            float total = 0.0f;
            int g = 0;
            for (; g + 15 < groups; g += 16) {
                float v[16];
#pragma unroll
                for (int j = 0; j < 16; j++) v[j] = __ldcg(group_sums + (size_t)(g + j) * width + c);
#pragma unroll
                for (int j = 0; j < 16; j++) total += v[j];
            }
            for (; g < groups; g++) total += __ldcg(group_sums + (size_t)g * width + c);
            finish_one_column(out0, out1, out2, split, c, total);
        }
    }
}

/* zeroed unsigned counters for column_sums_by_last_blocks, grow-only, one array per .cu file
 * (every launch leaves them zero again); zeroed in stream order when (re)allocated */
static inline unsigned int *stream_counters(size_t count) {
    static void *counter_buffer = NULL;
    static size_t counter_capacity = 0;
    size_t bytes = count * sizeof(unsigned int);
    if (bytes > counter_capacity) {
        grow_device_buffer(&counter_buffer, &counter_capacity, bytes, 0);
        CHECK_CUDA(cudaMemsetAsync(counter_buffer, 0, counter_capacity, compute_stream()));
    }
    return (unsigned int *)counter_buffer;
}

/* out[c] += sum_r partials[r * C + c] for a fp32 matrix partials[rows, C] of per-block partial
 * sums: the second, fixed-order pass of the column reductions (bias, layer-norm and embedding
 * gradients). Launch with grid ceil(C/32), block (32, 32): thread (x, y) sums rows y, y+32, ...
 * of column 32*blockIdx.x + x in order, then row y = 0 adds the 32 sums in order. */
static __global__ void column_sum_accumulate_kernel(float *out, const float *partials, int rows,
                                                    int C) {
    __shared__ float sums[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int r = threadIdx.y; r < rows; r += 32) acc += partials[(size_t)r * C + c];
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float total = 0.0f;
        for (int y = 0; y < 32; y++) total += sums[y][threadIdx.x];
        out[c] += total;
    }
}
/* bias_backward's split of dout [N, C] (cuda_elementwise.cu): chunks of rows_per_chunk rows (the
 * last maybe fewer), each summed by BIAS_THREADS_Y row sums (thread row y: rows y, y + 8, ... of
 * the chunk, in order) added in order y = 0, 1, ...; then column_sum_accumulate over the chunks.
 * At most 128 chunks, 64 from 2048 columns on: fewer partial rows to write and add again once
 * the columns alone fill the GPU (on an H100, at [16384, 8192] 105.3 us with 256 chunks, 100.0
 * with 64; at [32768, 2304] 64.5 against 59; at [32768, 768] 26.0 against 25.3 with 128;
 * perf/results/kernels/layernorm-backward-blocks-h100-2026-11-27.md). A function of N and C only,
 * never of the device, so the sums are reproducible; the fp8 MLP backward's fused bias gradient
 * (cuda_fp8_mlp.cu) sums in this same order for the same bits. Returns the number of chunks. */
#define BIAS_ROWS_PER_CHUNK 64
#define BIAS_MAX_CHUNKS(C) ((C) >= 2048 ? 64 : 128)
#define BIAS_THREADS_Y 8
static inline int bias_backward_chunks(int N, int C, int *rows_per_chunk) {
    int chunks = (int)ceil_div((size_t)N, BIAS_ROWS_PER_CHUNK);
    if (chunks > BIAS_MAX_CHUNKS(C)) chunks = BIAS_MAX_CHUNKS(C);
    *rows_per_chunk = (int)ceil_div((size_t)N, (size_t)chunks);
    return (int)ceil_div((size_t)N, (size_t)*rows_per_chunk);
}

/* dbias[C] += the column sums of dout[N,C] (cuda_elementwise.cu's bias gradient), per element type */
static inline void bias_backward_e(float *dbias, const __nv_bfloat16 *dout, int N, int C) {
    cuda_bias_backward(dbias, reinterpret_cast<const bf16 *>(dout), N, C);
}
static inline void bias_backward_e(float *dbias, const __half *dout, int N, int C) {
    cuda_bias_backward_fp16(dbias, reinterpret_cast<const fp16 *>(dout), N, C);
}

static inline void column_sum_accumulate(float *out, const float *partials, int rows, int C) {
    if (C <= 0) return;
    column_sum_accumulate_kernel<<<ceil_div((size_t)C, 32), dim3(32, 32), 0, compute_stream()>>>(
        out, partials, rows, C);
    CHECK_LAUNCH();
}

#endif /* CUDA_COMMON_CUH */
