/* cuda_adamw.cu: the fused AdamW step on fp32 master weights (writing the bf16 or fp16 working
 * copy of the parameters in the same pass) and the deterministic sum of squares behind the global
 * gradient norm. The update is the CPU reference's (kernels/cpu/cpu_adamw.c):
 *   m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g^2
 *   m_hat = m / (1 - b1^step),  v_hat = v / (1 - b2^step)          (bias correction, step >= 1)
 *   p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)              (decoupled weight decay)
 * evaluated with the same operations in the same order through the round-to-nearest intrinsics
 * (no fused multiply-adds), so the fp32 results equal the CPU's bit for bit.
 * sum_squares: the ranges are cut into fixed 64K-element chunks (independent of the device),
 * one block accumulates each chunk's x^2 in double in a fixed order, and one block adds the chunk
 * partials in order. The multi-tensor forms run one launch over every optimizer range. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

static const int adamw_threads = 256;

static __device__ __forceinline__ float adamw_element(float *m, float *v, float p, float g,
                                                      float lr, float beta1, float beta2,
                                                      float one_minus_beta1,
                                                      float one_minus_beta2, float eps,
                                                      float weight_decay, float bc1, float bc2) {
    float mi = __fadd_rn(__fmul_rn(beta1, *m), __fmul_rn(one_minus_beta1, g));
    float vi = __fadd_rn(__fmul_rn(beta2, *v), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
    *m = mi;
    *v = vi;
    float m_hat = __fdiv_rn(mi, bc1);
    float v_hat = __fdiv_rn(vi, bc2);
    float update = __fadd_rn(__fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), eps)),
                             __fmul_rn(weight_decay, p));
    return __fsub_rn(p, __fmul_rn(lr, update));
}

/* gradient clipping's factor, applied as the CPU applies it (one fp32 product) */
static __device__ __forceinline__ float scaled(float g, float grad_scale) {
    return grad_scale == 1.0f ? g : __fmul_rn(g, grad_scale);
}

/* the update of elements first, first + stride, ... of one tensor (float4 at a time when
 * vectorized) */
template <typename E>
static __device__ __forceinline__ void adamw_tensor(float *master, E *params,
                                                    const float *grads, float *m, float *v,
                                                    size_t n, float grad_scale, float lr,
                                                    float beta1, float beta2, float eps,
                                                    float weight_decay, float bc1, float bc2,
                                                    bool vectorized, size_t first, size_t stride) {
    const float one_minus_beta1 = 1.0f - beta1, one_minus_beta2 = 1.0f - beta2;
    size_t groups = vectorized ? n / 4 : 0;
    for (size_t q = first; q < groups; q += stride) {
        float4 p4 = reinterpret_cast<const float4 *>(master)[q];
        float4 g4 = reinterpret_cast<const float4 *>(grads)[q];
        g4.x = scaled(g4.x, grad_scale);
        g4.y = scaled(g4.y, grad_scale);
        g4.z = scaled(g4.z, grad_scale);
        g4.w = scaled(g4.w, grad_scale);
        float4 m4 = reinterpret_cast<const float4 *>(m)[q];
        float4 v4 = reinterpret_cast<const float4 *>(v)[q];
        p4.x = adamw_element(&m4.x, &v4.x, p4.x, g4.x, lr, beta1, beta2, one_minus_beta1,
                             one_minus_beta2, eps, weight_decay, bc1, bc2);
        p4.y = adamw_element(&m4.y, &v4.y, p4.y, g4.y, lr, beta1, beta2, one_minus_beta1,
                             one_minus_beta2, eps, weight_decay, bc1, bc2);
        p4.z = adamw_element(&m4.z, &v4.z, p4.z, g4.z, lr, beta1, beta2, one_minus_beta1,
                             one_minus_beta2, eps, weight_decay, bc1, bc2);
        p4.w = adamw_element(&m4.w, &v4.w, p4.w, g4.w, lr, beta1, beta2, one_minus_beta1,
                             one_minus_beta2, eps, weight_decay, bc1, bc2);
        reinterpret_cast<float4 *>(master)[q] = p4;
        reinterpret_cast<float4 *>(m)[q] = m4;
        reinterpret_cast<float4 *>(v)[q] = v4;
        if (params != NULL) {
            uint2 packed;
            packed.x = pack_x2<E>(p4.x, p4.y);
            packed.y = pack_x2<E>(p4.z, p4.w);
            reinterpret_cast<uint2 *>(params)[q] = packed;
        }
    }
    for (size_t i = 4 * groups + first; i < n; i += stride) {
        float mi = m[i], vi = v[i];
        float p = adamw_element(&mi, &vi, master[i], scaled(grads[i], grad_scale), lr, beta1, beta2, one_minus_beta1,
                                one_minus_beta2, eps, weight_decay, bc1, bc2);
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        if (params != NULL) params[i] = from_float<E>(p);
    }
}

template <typename E>
static __global__ void adamw_kernel(float *master, E *params, const float *grads,
                                    float *m, float *v, size_t n, float lr, float beta1,
                                    float beta2, float eps, float weight_decay, float bc1,
                                    float bc2, bool vectorized) {
    adamw_tensor(master, params, grads, m, v, n, 1.0f, lr, beta1, beta2, eps, weight_decay, bc1, bc2,
                 vectorized, (size_t)blockIdx.x * blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
}

/* Multi-tensor launches cut every range into chunks of at most RANGE_CHUNK elements (a multiple of
 * 4, so a range's float4 alignment holds in each of its chunks) and give each chunk one block:
 * the work is spread evenly whatever the mix of a 100M-element embedding and 2048-element
 * biases, and the chunking (hence the norm's summation order) depends only on the ranges. */
#define RANGE_CHUNK 65536

/* the update of one chunk's elements by the calling block */
template <typename E>
static __device__ __forceinline__ void adamw_chunk(float *master, E *params, const float *grads, float *m, float *v,
                                                   const tensor_range t, float grad_scale, float lr, float beta1,
                                                   float beta2, float eps, float bc1, float bc2, bool bases_aligned) {
    const bool vectorized = bases_aligned && ((t.state_offset | t.offset) & 3) == 0;
    adamw_tensor(master + t.state_offset, params + t.offset, grads + t.offset, m + t.state_offset,
                 v + t.state_offset, t.length, grad_scale, lr, beta1, beta2, eps, t.weight_decay, bc1, bc2,
                 vectorized, threadIdx.x, blockDim.x);
}

/* one block per chunk */
template <typename E>
static __global__ void adamw_chunks_kernel(float *master, E *params, const float *grads,
                                           float *m, float *v, const tensor_range *chunks,
                                           float grad_scale, float lr, float beta1, float beta2,
                                           float eps, float bc1, float bc2, bool bases_aligned) {
    adamw_chunk(master, params, grads, m, v, chunks[blockIdx.x], grad_scale, lr, beta1, beta2, eps, bc1, bc2,
                bases_aligned);
}

/* at most gridDim.x SMs: block b takes chunks b, b + gridDim.x, ... (each element's update is
 * independent, so the results are those of the kernel above) */
template <typename E>
static __global__ void __launch_bounds__(1024, 1)
adamw_chunks_strided_kernel(float *master, E *params, const float *grads, float *m, float *v,
                            const tensor_range *chunks, int chunk_count, float grad_scale, float lr,
                            float beta1, float beta2, float eps, float bc1, float bc2, bool bases_aligned) {
    for (int c = blockIdx.x; c < chunk_count; c += gridDim.x)
        adamw_chunk(master, params, grads, m, v, chunks[c], grad_scale, lr, beta1, beta2, eps, bc1, bc2,
                    bases_aligned);
}

static int adamw_sm_limit; /* cuda_adamw_set_sm_limit */
extern "C" void cuda_adamw_set_sm_limit(int sms) { adamw_sm_limit = sms > 0 ? sms : 0; }

/* shared memory a strided block asks for (unused): more than half of an SM's, so that two never
 * share one and the blocks take exactly gridDim.x SMs */
#define ADAMW_STRIDED_SMEM (120 * 1024)

/* the chunks of a range table in device memory, rebuilt only when the table changes: the
 * optimizer passes the same two tables (update and norm) every step, one cache slot each */
typedef struct chunk_table {
    const tensor_range *ranges; /* the host table it was built from, and its signature */
    int count, chunks;
    size_t signature, capacity;
    tensor_range *device;
} chunk_table;

#define CHUNK_TABLE_SLOTS 64 /* the optimizer's tables, whole and by model part */

static const tensor_range *device_chunks(const tensor_range *ranges, int count, int *chunk_count) {
    static chunk_table slots[CHUNK_TABLE_SLOTS];
    static int next_victim;
    size_t signature = 0, chunks = 0;
    for (int r = 0; r < count; r++) {
        signature = signature * 31 + ranges[r].offset * 7 + ranges[r].state_offset * 13 + ranges[r].length;
        chunks += (ranges[r].length + RANGE_CHUNK - 1) / RANGE_CHUNK;
    }
    chunk_table *slot = NULL;
    for (int i = 0; i < CHUNK_TABLE_SLOTS && !slot; i++)
        if (slots[i].device && slots[i].ranges == ranges && slots[i].count == count && slots[i].signature == signature)
            slot = &slots[i];
    if (slot) {
        *chunk_count = slot->chunks;
        return slot->device;
    }
    if (chunks > (size_t)INT32_MAX) KERNELS_FATAL("cuda backend: %zu optimizer chunks are too many", chunks);
    slot = &slots[next_victim];
    next_victim = (next_victim + 1) % CHUNK_TABLE_SLOTS;
    if (chunks > slot->capacity) {
        if (slot->device != NULL) CHECK_CUDA(cudaFreeAsync(slot->device, compute_stream()));
        slot->capacity = chunks + chunks / 4 + 16;
        CHECK_CUDA(cudaMallocAsync((void **)&slot->device, sizeof(tensor_range) * slot->capacity, compute_stream()));
    }
    tensor_range *host = (tensor_range *)malloc(sizeof(tensor_range) * (chunks ? chunks : 1));
    if (host == NULL) KERNELS_FATAL("cuda backend: out of host memory for %zu optimizer chunks", chunks);
    size_t k = 0;
    for (int r = 0; r < count; r++)
        for (size_t done = 0; done < ranges[r].length; done += RANGE_CHUNK) {
            size_t length = ranges[r].length - done < RANGE_CHUNK ? ranges[r].length - done : RANGE_CHUNK;
            host[k++] = (tensor_range){ranges[r].offset + done, ranges[r].state_offset + done, length,
                                       ranges[r].weight_decay};
        }
    CHECK_CUDA(cudaMemcpyAsync(slot->device, host, sizeof(tensor_range) * chunks, cudaMemcpyHostToDevice,
                               compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream())); /* once per new table, then host is freed */
    free(host);
    slot->ranges = ranges;
    slot->count = count;
    slot->signature = signature;
    slot->chunks = (int)chunks;
    *chunk_count = (int)chunks;
    return slot->device;
}

template <typename E>
static void adamw_update_ranges_t(float *master, E *params, const float *grads, float *m,
                                         float *v, const tensor_range *ranges, int count, float grad_scale,
                                         float lr, float beta1, float beta2, float eps, int step) {
    if (count == 0) return;
    if (master == NULL) KERNELS_FATAL("cuda backend: adamw_update_ranges needs fp32 master weights");
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    const bool bases_aligned = aligned16(master) && aligned16(m) && aligned16(v) && aligned16(grads) &&
                               ((uintptr_t)params & 7u) == 0;
    int chunks = 0;
    const tensor_range *table = device_chunks(ranges, count, &chunks);
    if (chunks == 0) return;
    if (adamw_sm_limit > 0) {
        static bool attribute_set;
        if (!attribute_set) {
            CHECK_CUDA(cudaFuncSetAttribute(adamw_chunks_strided_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            ADAMW_STRIDED_SMEM));
            attribute_set = true;
        }
        int blocks = adamw_sm_limit < chunks ? adamw_sm_limit : chunks;
        adamw_chunks_strided_kernel<<<(unsigned int)blocks, 1024, ADAMW_STRIDED_SMEM, compute_stream()>>>(
            master, params, grads, m, v, table, chunks, grad_scale, lr, beta1, beta2, eps, bc1, bc2, bases_aligned);
        CHECK_LAUNCH();
        return;
    }
    adamw_chunks_kernel<<<(unsigned int)chunks, adamw_threads, 0, compute_stream()>>>(
        master, params, grads, m, v, table, grad_scale, lr, beta1, beta2, eps, bc1, bc2, bases_aligned);
    CHECK_LAUNCH();
}

template <typename E>
static void adamw_update_t(float *master, E *params, const float *grads, float *m,
                                  float *v, size_t n, float lr, float beta1, float beta2,
                                  float eps, float weight_decay, int step) {
    if (n == 0) return;
    /* bias corrections exactly as the CPU computes them */
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    bool vectorized = aligned16(master) && aligned16(grads) && aligned16(m) && aligned16(v) &&
                      ((uintptr_t)params & 7u) == 0;
    size_t work = vectorized ? n / 4 + n % 4 : n;
    adamw_kernel<<<grid_stride_blocks(work, adamw_threads), adamw_threads, 0, compute_stream()>>>(
        master, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2,
        vectorized);
    CHECK_LAUNCH();
}

/* ---- sum of squares ---- */

#define SUM_SQUARES_THREADS 256

/* one block: thread t adds partials t, t + blockDim.x, ... then the block sum */
static __global__ void sum_squares_final_kernel(double *result, const double *partials,
                                                int count) {
    __shared__ double reduce_scratch[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    double total = block_sum_f64(acc, reduce_scratch);
    if (threadIdx.x == 0) *result = total;
}

/* ---- sum of squares over many ranges ---- */

/* partials[chunk]: one block per chunk (float4 loads where aligned), summed in a fixed order */
static __global__ void sum_squares_chunks_kernel(double *partials, const float *x, const tensor_range *chunks) {
    __shared__ double reduce_scratch[32];
    const tensor_range t = chunks[blockIdx.x];
    const float *xs = x + t.offset;
    double acc = 0.0;
    size_t groups = (t.offset & 3) == 0 && ((uintptr_t)x & 15u) == 0 ? t.length / 4 : 0;
    for (size_t q = threadIdx.x; q < groups; q += blockDim.x) {
        float4 x4 = reinterpret_cast<const float4 *>(xs)[q];
        acc += (double)x4.x * (double)x4.x;
        acc += (double)x4.y * (double)x4.y;
        acc += (double)x4.z * (double)x4.z;
        acc += (double)x4.w * (double)x4.w;
    }
    for (size_t i = 4 * groups + threadIdx.x; i < t.length; i += blockDim.x) acc += (double)xs[i] * (double)xs[i];
    double block_total = block_sum_f64(acc, reduce_scratch);
    if (threadIdx.x == 0) partials[blockIdx.x] = block_total;
}

extern "C" double cuda_sum_squares_ranges(const float *x, const tensor_range *ranges, int count) {
    int chunks = 0;
    const tensor_range *table = count ? device_chunks(ranges, count, &chunks) : NULL;
    if (chunks == 0) return 0.0;
    double *scratch = (double *)stream_scratch(((size_t)chunks + 1) * sizeof(double));
    double *partials = scratch, *result = scratch + chunks;
    sum_squares_chunks_kernel<<<(unsigned int)chunks, SUM_SQUARES_THREADS, 0, compute_stream()>>>(partials, x, table);
    CHECK_LAUNCH();
    sum_squares_final_kernel<<<1, 1024, 0, compute_stream()>>>(result, partials, chunks);
    CHECK_LAUNCH();
    double host_result = 0.0;
    CHECK_CUDA(cudaMemcpyAsync(&host_result, result, sizeof(double), cudaMemcpyDeviceToHost, compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream()));
    return host_result;
}

/* one tensor: the same chunked reduction over a one-range table */
extern "C" double cuda_sum_squares(const float *x, size_t n) {
    tensor_range whole = {0, 0, n, 0.0f};
    return cuda_sum_squares_ranges(x, &whole, 1);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_adamw_update_ranges(float *master, bf16 *params, const float *grads, float *m,
                                         float *v, const tensor_range *ranges, int count, float grad_scale,
                                         float lr, float beta1, float beta2, float eps, int step) {
    adamw_update_ranges_t(master, as_nv(params), grads, m, v, ranges, count, grad_scale, lr, beta1, beta2, eps, step);
}

extern "C" void cuda_adamw_update_ranges_fp16(float *master, fp16 *params, const float *grads, float *m,
                                         float *v, const tensor_range *ranges, int count, float grad_scale,
                                         float lr, float beta1, float beta2, float eps, int step) {
    adamw_update_ranges_t(master, as_half(params), grads, m, v, ranges, count, grad_scale, lr, beta1, beta2, eps, step);
}

extern "C" void cuda_adamw_update(float *master, bf16 *params, const float *grads, float *m,
                                  float *v, size_t n, float lr, float beta1, float beta2,
                                  float eps, float weight_decay, int step) {
    adamw_update_t(master, as_nv(params), grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
}

extern "C" void cuda_adamw_update_fp16(float *master, fp16 *params, const float *grads, float *m,
                                  float *v, size_t n, float lr, float beta1, float beta2,
                                  float eps, float weight_decay, int step) {
    adamw_update_t(master, as_half(params), grads, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
}
