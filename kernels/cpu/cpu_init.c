/* cpu_init.c: parameter initialization on the CPU backend (fp32 everywhere): normal values from
 * the counter-based generator at each element's global position, and constant fills. The CUDA
 * backend's cuda_init.cu computes the same values on the device. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

void cpu_init_normal(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream, float std,
                     uint64_t first, size_t n) {
    (void)fp32_dst; /* the compute dtype is fp32 */
    float *out = dst;
    for (size_t i = 0; i < n; i++) out[i] = std * philox_normal(seed, stream, shard_global_index(&map, first + i));
}

void cpu_fill(void *dst, int fp32_dst, float value, size_t n) {
    (void)fp32_dst;
    float *out = dst;
    for (size_t i = 0; i < n; i++) out[i] = value;
}
