/* cuda_decode_attention.cu: causal attention of new tokens over a bf16 or fp16 (templates on
 * the element type, cuda_kernels_t.cuh) key/value cache
 * (generation), the GPU counterpart of kernels/cpu/cpu_decode_attention.c. Two launches:
 * store the new tokens' keys and values (one head per query group) into the caches
 * [B,max_len,G,D], then one block per (sequence, new token, query head), reading its group's
 * cache in place, computes its scores against keys 0..past+t into shared memory
 * (fp32), the softmax with block reductions, and the weighted sum of values (fp32 accumulation,
 * bf16 output). No atomics: the result does not depend on scheduling. With a sliding window
 * (window_left >= 0, kernels.h's decode_attention) new token t sees keys past+t - window_left ..
 * past+t only, the rest of the cache is not read.
 * A prefill from an empty cache (past 0) of PREFILL_FLASH_MIN tokens or more instead runs the
 * training's causal flash attention (cuda_attention.cu, tensor cores) over the new tokens, whose
 * keys and values are the whole context: a 32 x 131-token prefill otherwise launches 50,304
 * one-query blocks without tensor cores. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"

enum { PREFILL_FLASH_MIN = 16 };

template <typename E>
static __global__ void store_kv_kernel(E *k_cache, E *v_cache,
                                       const E *qkv, int Tq, int H, int G, int D,
                                       int past, int max_len, size_t total) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % (size_t)D);
        size_t rest = i / (size_t)D;
        int g = (int)(rest % (size_t)G);
        rest /= (size_t)G;
        int t = (int)(rest % (size_t)Tq);
        size_t b = rest / (size_t)Tq;
        const E *src = qkv + (b * Tq + t) * (size_t)(H + 2 * G) * D + qkv_key_offset(g, H, G, D);
        size_t dst = ((b * max_len + (size_t)(past + t)) * G + g) * D + d;
        k_cache[dst] = src[d];
        v_cache[dst] = src[D + d];
    }
}

enum { DECODE_THREADS = 128 };

/* max (is_max) or sum of v over the block; every thread gets the result */
static __device__ float block_reduce(float v, bool is_max, float *scratch) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = scratch[0];
    for (int w = 1; w < DECODE_THREADS / 32; w++) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
    return r;
}

template <typename E>
static __global__ void decode_attention_kernel(E *out, const E *k_cache,
                                               const E *v_cache,
                                               const E *qkv, int Tq, int H, int G,
                                               int D, int past, int max_len, int window_left, float scale) {
    extern __shared__ float scores[];
    __shared__ float scratch[DECODE_THREADS / 32];
    int h = blockIdx.x % H;
    int t = (blockIdx.x / H) % Tq;
    size_t b = blockIdx.x / ((unsigned)H * Tq);
    int keys = past + t + 1, g = h / (H / G);
    const int first = window_left >= 0 && past + t > window_left ? past + t - window_left : 0; /* the window's */
    const E *q = qkv + (b * Tq + t) * (size_t)(H + 2 * G) * D + qkv_query_offset(h, H, G, D);
    float local_max = -INFINITY;
    for (int j = first + (int)threadIdx.x; j < keys; j += blockDim.x) {
        const E *k = k_cache + ((b * max_len + j) * G + g) * D;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += to_float(q[d]) * to_float(k[d]);
        scores[j] = dot * scale;
        local_max = fmaxf(local_max, scores[j]);
    }
    float row_max = block_reduce(local_max, true, scratch);
    float local_sum = 0.0f;
    for (int j = first + (int)threadIdx.x; j < keys; j += blockDim.x) {
        float e = __expf(scores[j] - row_max);
        scores[j] = e;
        local_sum += e;
    }
    float inv_sum = 1.0f / block_reduce(local_sum, false, scratch);
    __syncthreads(); /* every score is final before any thread reads them all */
    E *o = out + (b * Tq + t) * (size_t)H * D + (size_t)h * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = first; j < keys; j++)
            acc += scores[j] * to_float(v_cache[((b * max_len + j) * G + g) * D + d]);
        o[d] = from_float<E>(acc * inv_sum);
    }
}

template <typename E>
static void decode_attention_t(E *out, E *k_cache, E *v_cache, const E *qkv, int B, int Tq, int H, int G, int D, int past,
                               int max_len, int window_left) {
    if (past + Tq > max_len)
        KERNELS_FATAL("decode attention: positions up to %d exceed the cache length %d", past + Tq, max_len);
    if (G <= 0 || H % G != 0)
        KERNELS_FATAL("decode attention: %d query heads do not split into %d groups", H, G);
    size_t total = (size_t)B * Tq * G * D;
    if (total == 0) return;
    store_kv_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        k_cache, v_cache, qkv, Tq, H, G, D, past, max_len, total);
    CHECK_LAUNCH();
    if (past == 0 && Tq >= PREFILL_FLASH_MIN && D <= 128) {
        dropout_rng none = {0.0f, 0, 0, 0};
        void *lse = stream_scratch(cuda_attention_workspace_bytes(B, Tq, H, D));
        /* the flash kernels of the same element type (the Hopper path is bf16 only: fp16 takes
         * the mma.sync kernels) */
        if constexpr (is_fp16<E>::value)
            cuda_attention_forward_fp16(reinterpret_cast<fp16 *>(out), lse, reinterpret_cast<const fp16 *>(qkv),
                                        B, Tq, H, G, D, 0, H, window_left, none);
        else
            cuda_attention_forward(reinterpret_cast<bf16 *>(out), lse, reinterpret_cast<const bf16 *>(qkv), B,
                                   Tq, H, G, D, 0, H, window_left, none);
        return;
    }
    size_t shared = sizeof(float) * (size_t)(past + Tq);
    if (shared > 48 * 1024)
        CHECK_CUDA(cudaFuncSetAttribute(decode_attention_kernel<E>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
    unsigned int blocks = (unsigned int)((size_t)B * Tq * H);
    decode_attention_kernel<<<blocks, DECODE_THREADS, shared, compute_stream()>>>(
        out, k_cache, v_cache, qkv, Tq, H, G, D, past, max_len, window_left,
        1.0f / sqrtf((float)D));
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_decode_attention(bf16 *out, bf16 *k_cache, bf16 *v_cache, const bf16 *qkv,
                                      int B, int Tq, int H, int G, int D, int past, int max_len, int window_left) {
    decode_attention_t(as_nv(out), as_nv(k_cache), as_nv(v_cache), as_nv(qkv), B, Tq, H, G, D, past, max_len,
                       window_left);
}

extern "C" void cuda_decode_attention_fp16(fp16 *out, fp16 *k_cache, fp16 *v_cache, const fp16 *qkv,
                                      int B, int Tq, int H, int G, int D, int past, int max_len, int window_left) {
    decode_attention_t(as_half(out), as_half(k_cache), as_half(v_cache), as_half(qkv), B, Tq, H, G, D, past, max_len,
                       window_left);
}
