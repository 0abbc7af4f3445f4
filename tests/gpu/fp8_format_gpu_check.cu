/* fp8_format_gpu_check.cu: kernels/fp8_format.h against the GPU's own fp8 conversion
 * (cvt.rn.satfinite.{e4m3,e5m2}x2.f32 through __nv_cvt_float_to_fp8, what Transformer Engine's
 * casts compile to on Hopper) for every one of the 2^32 fp32 bit patterns, in both formats, and
 * the header's decoding against the hardware's fp8 -> half conversion for all 256 codes of each.
 * The header runs in the same kernel as device code, so this also checks that it compiles and
 * behaves the same under nvcc. Before the GPU part (and without a GPU) the header's host build
 * is compared with cuda_fp8.hpp's host reference conversion on every 13th bit pattern. Prints
 * TAP; run by tests/gpu/fp8_format_gpu_test.sh. */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdio.h>

#include "kernels/fp8_format.h"

struct mismatch_log {
    unsigned long long count[2];
    unsigned first_bits[2][4];
    unsigned char got[2][4], want[2][4];
};

__global__ void encode_all(mismatch_log *log, unsigned long long start) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = start + blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < start + (1ull << 30); i += stride) {
        unsigned bits = (unsigned)i;
        float x = __uint_as_float(bits);
        for (int format = 0; format < 2; format++) {
            unsigned char hw = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, format == FP8_E5M2 ? __NV_E5M2 : __NV_E4M3);
            unsigned char mine = fp8_from_float(x, format);
            if (hw != mine) {
                unsigned long long k = atomicAdd(&log->count[format], 1ull);
                if (k < 4) {
                    log->first_bits[format][k] = bits;
                    log->got[format][k] = mine;
                    log->want[format][k] = hw;
                }
            }
        }
    }
}

__global__ void decode_all(int *bad) {
    unsigned c = threadIdx.x;
    for (int format = 0; format < 2; format++) {
        __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, format == FP8_E5M2 ? __NV_E5M2 : __NV_E4M3);
        float hw = __half2float(__half(h)), mine = fp8_to_float((uint8_t)c, format);
        int same = (isnan(hw) && isnan(mine)) || (__float_as_uint(hw) == __float_as_uint(mine));
        if (!same) atomicAdd(&bad[format], 1);
    }
}

/* the host build of the header against cuda_fp8.hpp's host (reference) conversion */
static int host_check(int tests) {
    unsigned long long differ[2] = {0, 0}, checked = 0;
    for (unsigned long long i = 0; i < (1ull << 32); i += 13, checked++) {
        float x;
        unsigned bits = (unsigned)i;
        memcpy(&x, &bits, sizeof x);
        for (int format = 0; format < 2; format++)
            differ[format] += __nv_cvt_float_to_fp8(x, __NV_SATFINITE, format == FP8_E5M2 ? __NV_E5M2 : __NV_E4M3) !=
                              fp8_from_float(x, format);
    }
    printf("%sok %d - host: fp8_from_float agrees with cuda_fp8.hpp's reference on %llu fp32 patterns "
           "(every 13th; %llu E4M3 and %llu E5M2 differ)\n", differ[0] + differ[1] ? "not " : "", tests + 1,
           checked, differ[0], differ[1]);
    return differ[0] + differ[1] != 0;
}

int main(void) {
    int n = 0, tests = 0, failed = 0;
    failed += host_check(tests++);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("ok %d # SKIP no GPU for the hardware comparison\n1..%d\n", tests + 1, tests + 1);
        return failed ? 1 : 0;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    if (prop.major * 10 + prop.minor < 89) {
        printf("ok %d # SKIP %s (sm_%d%d) has no fp8 conversion\n1..%d\n", tests + 1, prop.name, prop.major,
               prop.minor, tests + 1);
        return failed ? 1 : 0;
    }
    mismatch_log *log;
    int *bad;
    cudaMallocManaged(&log, sizeof *log);
    cudaMallocManaged(&bad, 2 * sizeof(int));
    memset(log, 0, sizeof *log);
    bad[0] = bad[1] = 0;
    for (unsigned long long start = 0; start < (1ull << 32); start += 1ull << 30)
        encode_all<<<prop.multiProcessorCount * 8, 256>>>(log, start);
    decode_all<<<1, 256>>>(bad);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("Bail out! %s\n", cudaGetErrorString(err)); return 1; }
    for (int format = 0; format < 2; format++) {
        const char *name = format == FP8_E5M2 ? "E5M2" : "E4M3";
        int ok = log->count[format] == 0;
        failed += !ok;
        printf("%sok %d - %s: fp8_from_float gives the hardware's code for all 2^32 fp32 bit patterns (%llu differ)\n",
               ok ? "" : "not ", ++tests, name, log->count[format]);
        for (unsigned long long k = 0; k < log->count[format] && k < 4; k++)
            printf("# 0x%08X: header 0x%02X, hardware 0x%02X\n", log->first_bits[format][k], log->got[format][k],
                   log->want[format][k]);
        ok = bad[format] == 0;
        failed += !ok;
        printf("%sok %d - %s: fp8_to_float gives the hardware's value for all 256 codes (%d differ)\n",
               ok ? "" : "not ", ++tests, name, bad[format]);
    }
    printf("1..%d\n", tests);
    return failed ? 1 : 0;
}
