/* cuda_init.cu: parameter initialization on the device, the same values the CPU backend computes
 * (kernels/cpu/cpu_init.c): element i of a shard is std * philox_normal at its global position
 * (Box-Muller in double, as kernels/philox.h computes it on both sides), then rounded to bf16 or
 * fp16 for the compute copy or kept in fp32 for the master weights. Initializing 1.3B parameters
 * this way takes milliseconds where the host loop took minutes. */
#include <cuda_profiler_api.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/philox.h"

template <typename E>
static __global__ void init_normal_kernel(void *dst, int fp32_dst, shard_map map, uint64_t seed,
                                          uint64_t stream, float std, uint64_t first, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float value = std * philox_normal(seed, stream, shard_global_index(&map, first + i));
        if (fp32_dst) ((float *)dst)[i] = value;
        else ((E *)dst)[i] = from_float<E>(value);
    }
}

template <typename E>
static __global__ void fill_kernel(void *dst, int fp32_dst, float value, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if (fp32_dst) ((float *)dst)[i] = value;
        else ((E *)dst)[i] = from_float<E>(value);
    }
}

template <typename E>
static void init_normal_t(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream, float std,
                          uint64_t first, size_t n) {
    if (n == 0) return;
    init_normal_kernel<E><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>(dst, fp32_dst, map, seed,
                                                                                 stream, std, first, n);
    CHECK_LAUNCH();
}

template <typename E>
static void fill_t(void *dst, int fp32_dst, float value, size_t n) {
    if (n == 0) return;
    fill_kernel<E><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>(dst, fp32_dst, value, n);
    CHECK_LAUNCH();
}

/* the compute copy in bf16 (cuda_init_normal, cuda_fill) or fp16 (the _fp16 forms) */
extern "C" void cuda_init_normal(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream,
                                 float std, uint64_t first, size_t n) {
    init_normal_t<__nv_bfloat16>(dst, fp32_dst, map, seed, stream, std, first, n);
}
extern "C" void cuda_init_normal_fp16(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream,
                                      float std, uint64_t first, size_t n) {
    init_normal_t<__half>(dst, fp32_dst, map, seed, stream, std, first, n);
}
extern "C" void cuda_fill(void *dst, int fp32_dst, float value, size_t n) {
    fill_t<__nv_bfloat16>(dst, fp32_dst, value, n);
}
extern "C" void cuda_fill_fp16(void *dst, int fp32_dst, float value, size_t n) { fill_t<__half>(dst, fp32_dst, value, n); }

extern "C" void cuda_profiler_range(int on) {
    CHECK_CUDA(cudaStreamSynchronize(compute_stream()));
    CHECK_CUDA(on ? cudaProfilerStart() : cudaProfilerStop());
}
