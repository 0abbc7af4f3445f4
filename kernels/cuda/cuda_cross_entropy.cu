/* cuda_cross_entropy.cu: vocab-parallel softmax cross-entropy over bf16 or fp16 logits[N,V]
 * (templates on the element type, cuda_kernels_t.cuh), the GPU
 * counterpart of kernels/cpu/cpu_cross_entropy.c, in its three passes (the caller all-reduces
 * across tensor-parallel ranks between them):
 *   1. row_max = max_v logits
 *   2. sum_exp = sum_v exp(logits - row_max); target_logit = logits[target - vocab_start] when the
 *      target is a local column, else 0
 *   3. loss = log(sum_exp) + row_max - target_logit; the logits are overwritten with
 *      (softmax - onehot(target)) * grad_scale, softmax_v = exp(logits_v - row_max) / sum_exp.
 * Targets are not special-cased (a negative or out-of-range id is simply not local), as on the CPU.
 * One block per row. A row starts wherever n*V puts it (V may be odd), so each row is read as a
 * scalar head up to the first 16-byte boundary, a body of 8-wide vectors and a scalar tail.
 * Reductions are per-thread sums in a fixed order, then warp shuffles and a fixed pass over the
 * warp partials: bitwise reproducible, no atomics. */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.cuh"

#define CE_THREADS 256
#define CE_WARPS (CE_THREADS / 32)

/* elements before the first 16-byte boundary of a row (16-bit rows are 2-byte aligned) */
template <typename E>
static __device__ __forceinline__ int ce_head_length(const E *row, int V) {
    int head = (int)(((16u - (unsigned int)(reinterpret_cast<uintptr_t>(row) & 15u)) & 15u) / 2u);
    return head < V ? head : V;
}

/* block-wide max / sum (all CE_THREADS threads call; every thread gets the result) */
static __device__ float ce_block_max(float v) {
    __shared__ float warp_part[CE_WARPS];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < CE_WARPS ? warp_part[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

static __device__ float ce_block_sum(float v) {
    __shared__ float warp_part[CE_WARPS];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < CE_WARPS ? warp_part[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) result = v;
    }
    __syncthreads();
    return result;
}

/* The three passes over one row, as block-wide device functions (all CE_THREADS threads call;
 * reductions return the result to every thread). The kernels below run them on a row in global
 * memory; the fused kernel on a copy staged in shared memory at the same 16-byte phase, so every
 * thread sees the same elements in the same order and the results are the same bits. */
template <typename E>
static __device__ float ce_row_max(const E *row, int V) {
    const int head = ce_head_length(row, V), num_vec = (V - head) / 8;
    const uint4 *vec = reinterpret_cast<const uint4 *>(row + head);
    float m = -INFINITY;
    for (int i = threadIdx.x; i < head; i += CE_THREADS) m = fmaxf(m, to_float(row[i]));
    for (int i = threadIdx.x; i < num_vec; i += CE_THREADS) {
        float f[8];
        load_x8(f, reinterpret_cast<const E *>(&vec[i]));
        for (int e = 0; e < 8; e++) m = fmaxf(m, f[e]);
    }
    for (int i = head + num_vec * 8 + threadIdx.x; i < V; i += CE_THREADS)
        m = fmaxf(m, to_float(row[i]));
    return ce_block_max(m);
}

template <typename E>
static __device__ float ce_row_sum_exp(const E *row, int V, float m) {
    const int head = ce_head_length(row, V), num_vec = (V - head) / 8;
    const uint4 *vec = reinterpret_cast<const uint4 *>(row + head);
    float s = 0.0f;
    for (int i = threadIdx.x; i < head; i += CE_THREADS) s += expf(to_float(row[i]) - m);
    for (int i = threadIdx.x; i < num_vec; i += CE_THREADS) {
        float f[8];
        load_x8(f, reinterpret_cast<const E *>(&vec[i]));
        for (int e = 0; e < 8; e++) s += expf(f[e] - m);
    }
    for (int i = head + num_vec * 8 + threadIdx.x; i < V; i += CE_THREADS)
        s += expf(to_float(row[i]) - m);
    return ce_block_sum(s);
}

/* out[v] = (softmax_v - onehot(t)) * grad_scale from in (out and in at the same 16-byte phase) */
template <typename E>
static __device__ void ce_row_grad(E *out, const E *in, int V, float m, float inv_sum, int t,
                                   float grad_scale) {
    const int head = ce_head_length(in, V), num_vec = (V - head) / 8;
    const uint4 *vin = reinterpret_cast<const uint4 *>(in + head);
    uint4 *vout = reinterpret_cast<uint4 *>(out + head);
    for (int i = threadIdx.x; i < head; i += CE_THREADS) {
        float prob = expf(to_float(in[i]) - m) * inv_sum;
        out[i] = from_float<E>((prob - (i == t ? 1.0f : 0.0f)) * grad_scale);
    }
    for (int i = threadIdx.x; i < num_vec; i += CE_THREADS) {
        float f[8];
        load_x8(f, reinterpret_cast<const E *>(&vin[i]));
        const int v0 = head + i * 8;
        for (int e = 0; e < 8; e++) {
            float prob = expf(f[e] - m) * inv_sum;
            f[e] = (prob - (v0 + e == t ? 1.0f : 0.0f)) * grad_scale;
        }
        uint4 u;
        u.x = pack_x2<E>(f[0], f[1]);
        u.y = pack_x2<E>(f[2], f[3]);
        u.z = pack_x2<E>(f[4], f[5]);
        u.w = pack_x2<E>(f[6], f[7]);
        vout[i] = u;
    }
    for (int i = head + num_vec * 8 + threadIdx.x; i < V; i += CE_THREADS) {
        float prob = expf(to_float(in[i]) - m) * inv_sum;
        out[i] = from_float<E>((prob - (i == t ? 1.0f : 0.0f)) * grad_scale);
    }
}

template <typename E>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_max_kernel(float *row_max, const E *logits, int V) {
    float m = ce_row_max(logits + (size_t)blockIdx.x * V, V);
    if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <typename E>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_sum_exp_kernel(float *sum_exp, float *target_logit, const E *logits,
                             const float *row_max, const int *targets, int V, int vocab_start) {
    const int n = blockIdx.x;
    const E *row = logits + (size_t)n * V;
    float s = ce_row_sum_exp(row, V, row_max[n]);
    if (threadIdx.x == 0) {
        sum_exp[n] = s;
        const int t = targets[n] - vocab_start;
        target_logit[n] = (t >= 0 && t < V) ? to_float(row[t]) : 0.0f;
    }
}

template <typename E>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_loss_grad_kernel(float *losses, E *logits, const float *row_max,
                               const float *sum_exp, const float *target_logit,
                               const int *targets, int V, int vocab_start, float grad_scale) {
    const int n = blockIdx.x;
    E *row = logits + (size_t)n * V;
    const float m = row_max[n], s = sum_exp[n];
    if (threadIdx.x == 0) losses[n] = logf(s) + m - target_logit[n];
    ce_row_grad(row, row, V, m, 1.0f / s, targets[n] - vocab_start, grad_scale);
}

/* all three passes on a row read from DRAM once: the row is copied (cp.async, 16 bytes at a
 * time) into shared memory at its own 16-byte phase, reduced twice there, and the gradient
 * written over the logits. One read and one write of the row instead of three reads and a
 * write; the same bits as the three kernels. */
template <typename E>
static __global__ void __launch_bounds__(CE_THREADS)
cross_entropy_fused_kernel(float *losses, E *logits, float *row_max, float *sum_exp,
                           float *target_logit, const int *targets, int V, float grad_scale) {
    extern __shared__ uint4 ce_stage[];
    const int n = blockIdx.x;
    E *row = logits + (size_t)n * V;
    const int phase = (int)((reinterpret_cast<uintptr_t>(row) & 15u) / 2u);
    E *srow = reinterpret_cast<E *>(ce_stage) + phase;
    const int head = ce_head_length(row, V), num_vec = (V - head) / 8;
    const uint4 *gvec = reinterpret_cast<const uint4 *>(row + head);
    uint4 *svec = reinterpret_cast<uint4 *>(srow + head);
    for (int i = threadIdx.x; i < num_vec; i += CE_THREADS) {
        unsigned int dst = (unsigned int)__cvta_generic_to_shared(svec + i);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gvec + i));
    }
    for (int i = threadIdx.x; i < head; i += CE_THREADS) srow[i] = row[i];
    for (int i = head + num_vec * 8 + threadIdx.x; i < V; i += CE_THREADS) srow[i] = row[i];
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    const float m = ce_row_max(srow, V);
    const float s = ce_row_sum_exp(srow, V, m);
    const int t = targets[n];
    if (threadIdx.x == 0) {
        const float target = (t >= 0 && t < V) ? to_float(srow[t]) : 0.0f;
        row_max[n] = m;
        sum_exp[n] = s;
        target_logit[n] = target;
        losses[n] = logf(s) + m - target;
    }
    ce_row_grad(row, srow, V, m, 1.0f / s, t, grad_scale);
}

/* one block per row: each thread keeps its best (value, column), lowest column on ties, then a
 * block reduction with the same rule; NaN never wins a comparison, as on the host */
static __device__ __forceinline__ void better(float &value, int &column, float v, int c) {
    if (v > value || (v == value && c < column)) { value = v; column = c; }
}

template <typename E>
static __global__ void __launch_bounds__(CE_THREADS)
logits_argmax_kernel(float *row_max, int *argmax, const E *logits, int V, int valid) {
    const E *row = logits + (size_t)blockIdx.x * V;
    float value = -INFINITY;
    int column = valid > 0 ? 0 : -1;
    if (valid > 0) value = to_float(row[0]);
    for (int i = threadIdx.x; i < valid; i += CE_THREADS) better(value, column, to_float(row[i]), i);
    __shared__ float values[CE_THREADS];
    __shared__ int columns[CE_THREADS];
    values[threadIdx.x] = value;
    columns[threadIdx.x] = column;
    __syncthreads();
    for (int stride = CE_THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            float v = values[threadIdx.x];
            int c = columns[threadIdx.x];
            better(v, c, values[threadIdx.x + stride], columns[threadIdx.x + stride]);
            values[threadIdx.x] = v;
            columns[threadIdx.x] = c;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        row_max[blockIdx.x] = values[0];
        argmax[blockIdx.x] = columns[0];
    }
}

template <typename E>
static void logits_argmax_t(float *row_max, int *argmax, const E *logits, int N, int V, int valid) {
    if (N <= 0) return;
    logits_argmax_kernel<<<N, CE_THREADS, 0, compute_stream()>>>(row_max, argmax, logits, V, valid);
    CHECK_LAUNCH();
}

template <typename E>
static void cross_entropy_max_t(float *row_max, const E *logits, int N, int V) {
    if (N <= 0) return;
    cross_entropy_max_kernel<<<N, CE_THREADS, 0, compute_stream()>>>(row_max, logits, V);
    CHECK_LAUNCH();
}

template <typename E>
static void cross_entropy_sum_exp_t(float *sum_exp, float *target_logit, const E *logits,
                                           const float *row_max, const int *targets, int N, int V,
                                           int vocab_start) {
    if (N <= 0) return;
    cross_entropy_sum_exp_kernel<<<N, CE_THREADS, 0, compute_stream()>>>(sum_exp, target_logit, logits, row_max, targets, V, vocab_start);
    CHECK_LAUNCH();
}

template <typename E>
static void cross_entropy_loss_grad_t(float *losses, E *logits, const float *row_max,
                                             const float *sum_exp, const float *target_logit,
                                             const int *targets, int N, int V, int vocab_start,
                                             float grad_scale) {
    if (N <= 0) return;
    cross_entropy_loss_grad_kernel<<<N, CE_THREADS, 0, compute_stream()>>>(losses, logits, row_max, sum_exp, target_logit, targets, V, vocab_start, grad_scale);
    CHECK_LAUNCH();
}

/* the largest row the fused kernel stages (shared memory per block, within the 227 KiB an H100
 * or H200 block may have; beyond it the three kernels run) */
#define CE_FUSED_MAX_BYTES (200 * 1024)

template <typename E>
static void cross_entropy_fused_t(float *losses, E *logits, float *row_max, float *sum_exp,
                                         float *target_logit, const int *targets, int N, int V,
                                         float grad_scale) {
    if (N <= 0) return;
    const size_t stage_bytes = (size_t)V * sizeof(E) + 16;
    static size_t granted = 0; /* the dynamic shared memory the kernel (of this E) was allowed so far */
    int device = 0, optin = 0;
    if (stage_bytes > granted && stage_bytes <= CE_FUSED_MAX_BYTES) {
        CHECK_CUDA(cudaGetDevice(&device));
        CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
        if (stage_bytes <= (size_t)optin) {
            CHECK_CUDA(cudaFuncSetAttribute(cross_entropy_fused_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)stage_bytes));
            granted = stage_bytes;
        }
    }
    if (stage_bytes > granted) { /* too wide a row: the three passes */
        cross_entropy_max_t(row_max, logits, N, V);
        cross_entropy_sum_exp_t(sum_exp, target_logit, logits, row_max, targets, N, V, 0);
        cross_entropy_loss_grad_t(losses, logits, row_max, sum_exp, target_logit, targets, N, V, 0, grad_scale);
        return;
    }
    cross_entropy_fused_kernel<<<N, CE_THREADS, stage_bytes, compute_stream()>>>(
        losses, logits, row_max, sum_exp, target_logit, targets, V, grad_scale);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_logits_argmax(float *row_max, int *argmax, const bf16 *logits, int N, int V, int valid) {
    logits_argmax_t(row_max, argmax, as_nv(logits), N, V, valid);
}

extern "C" void cuda_logits_argmax_fp16(float *row_max, int *argmax, const fp16 *logits, int N, int V, int valid) {
    logits_argmax_t(row_max, argmax, as_half(logits), N, V, valid);
}

extern "C" void cuda_cross_entropy_max(float *row_max, const bf16 *logits, int N, int V) {
    cross_entropy_max_t(row_max, as_nv(logits), N, V);
}

extern "C" void cuda_cross_entropy_max_fp16(float *row_max, const fp16 *logits, int N, int V) {
    cross_entropy_max_t(row_max, as_half(logits), N, V);
}

extern "C" void cuda_cross_entropy_sum_exp(float *sum_exp, float *target_logit, const bf16 *logits,
                                           const float *row_max, const int *targets, int N, int V,
                                           int vocab_start) {
    cross_entropy_sum_exp_t(sum_exp, target_logit, as_nv(logits), row_max, targets, N, V, vocab_start);
}

extern "C" void cuda_cross_entropy_sum_exp_fp16(float *sum_exp, float *target_logit, const fp16 *logits,
                                           const float *row_max, const int *targets, int N, int V,
                                           int vocab_start) {
    cross_entropy_sum_exp_t(sum_exp, target_logit, as_half(logits), row_max, targets, N, V, vocab_start);
}

extern "C" void cuda_cross_entropy_loss_grad(float *losses, bf16 *logits, const float *row_max,
                                             const float *sum_exp, const float *target_logit,
                                             const int *targets, int N, int V, int vocab_start,
                                             float grad_scale) {
    cross_entropy_loss_grad_t(losses, as_nv(logits), row_max, sum_exp, target_logit, targets, N, V, vocab_start, grad_scale);
}

extern "C" void cuda_cross_entropy_loss_grad_fp16(float *losses, fp16 *logits, const float *row_max,
                                             const float *sum_exp, const float *target_logit,
                                             const int *targets, int N, int V, int vocab_start,
                                             float grad_scale) {
    cross_entropy_loss_grad_t(losses, as_half(logits), row_max, sum_exp, target_logit, targets, N, V, vocab_start, grad_scale);
}

extern "C" void cuda_cross_entropy_fused(float *losses, bf16 *logits, float *row_max, float *sum_exp,
                                         float *target_logit, const int *targets, int N, int V,
                                         float grad_scale) {
    cross_entropy_fused_t(losses, as_nv(logits), row_max, sum_exp, target_logit, targets, N, V, grad_scale);
}

extern "C" void cuda_cross_entropy_fused_fp16(float *losses, fp16 *logits, float *row_max, float *sum_exp,
                                         float *target_logit, const int *targets, int N, int V,
                                         float grad_scale) {
    cross_entropy_fused_t(losses, as_half(logits), row_max, sum_exp, target_logit, targets, N, V, grad_scale);
}
