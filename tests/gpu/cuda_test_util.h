/* cuda_test_util.h: what the GPU kernel tests share: skip (exit 77) without a GPU, device buffers
 * filled from host arrays, outputs poisoned with NaN before each run (so an element a kernel
 * fails to write is caught), host bf16 and fp16 rounding identical to the device's, and the
 * relative error max|got - want| / max|want| used against the CPU reference. Built with
 * -DTEST_FP16, the bf16 names mean fp16 (cuda_fp16_map.h). */
#ifndef CUDA_TEST_UTIL_H
#define CUDA_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "tests/tap.h"

int cuda_device_count(void);
const kernel_ops *kernels_cuda(void);      /* kernels.h declares them under HAVE_CUDA */
const kernel_ops *kernels_cuda_fp16(void);

#define TEST_CUDA(call)                                                                    \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* no GPU: say so in TAP and exit 77, which automake counts as SKIP */
static inline void skip_without_gpu(void) {
    if (cuda_device_count() == 0) {
        printf("1..0 # SKIP no CUDA device\n");
        exit(77);
    }
    cuda_context_init(0);
}

/* host float -> bf16, round to nearest even (NaN kept NaN) */
static inline bf16 host_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}
static inline float host_from_bf16(bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* host float -> fp16 (IEEE binary16), round to nearest even as __float2half_rn: NaN stays NaN,
 * from 65520 up infinity, below 2^-14 the subnormals (multiples of 2^-24) */
static inline uint16_t host_to_fp16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t magnitude = u & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (magnitude < 0x38800000u) { /* |x| * 2^24, rounded to an integer (nearest even) */
        float scaled;
        memcpy(&scaled, &magnitude, 4);
        return (uint16_t)(sign | (uint16_t)rintf(scaled * 16777216.0f));
    }
    magnitude += 0xfffu + ((magnitude >> 13) & 1u); /* round the 13 dropped bits */
    return (uint16_t)(sign | (uint16_t)((magnitude - 0x38000000u) >> 13)); /* exponent 127 -> 15 */
}
static inline float host_from_fp16(uint16_t h) {
    uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, u;
    float x;
    if (exponent == 0) {
        x = ldexpf((float)mantissa, -24);
    } else {
        u = (exponent == 31 ? 0x7f800000u : (exponent + 112u) << 23) | (mantissa << 13);
        memcpy(&x, &u, 4);
    }
    return (h & 0x8000u) ? -x : x;
}

/* the -DTEST_FP16 builds test the fp16 kernels: every name below then means its fp16 twin */
#ifdef TEST_FP16
#include "tests/gpu/cuda_fp16_map.h"
#else
#define TEST_DTYPE_NAME "bf16"
#define TEST_ACT_DTYPE KERNEL_BF16
#define ACT_TOL 1e-2
#endif

/* deterministic uniform values in [-scale, scale) */
static inline void fill_random(float *x, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = scale * (2.0f * (float)((s >> 40) & 0xffffff) / 16777216.0f - 1.0f);
    }
}
/* round a host array to bf16 (fp16 with TEST_FP16) precision in place (so the CPU reference sees the GPU's inputs) */
static inline void round_to_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = host_from_bf16(host_to_bf16(x[i]));
}

static inline void *device_alloc(size_t bytes) {
    void *p = NULL;
    TEST_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
/* NaN in every bf16 and fp32 element (0xFF bytes) */
static inline void poison(void *p, size_t bytes) { TEST_CUDA(cudaMemset(p, 0xff, bytes)); }

/* device bf16 copy of a host float array */
static inline bf16 *upload_bf16(const float *x, size_t n) {
    bf16 *h = (bf16 *)malloc(n * sizeof(bf16) + 1), *d = (bf16 *)device_alloc(n * sizeof(bf16));
    for (size_t i = 0; i < n; i++) h[i] = host_to_bf16(x[i]);
    TEST_CUDA(cudaMemcpy(d, h, n * sizeof(bf16), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
    free(h);
    return d;
}
static inline float *upload_float(const float *x, size_t n) {
    float *d = (float *)device_alloc(n * sizeof(float));
    TEST_CUDA(cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
    return d;
}
static inline int *upload_int(const int *x, size_t n) {
    int *d = (int *)device_alloc(n * sizeof(int));
    TEST_CUDA(cudaMemcpy(d, x, n * sizeof(int), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
    return d;
}
/* host float copy of a device bf16 array (malloc'ed; caller frees) */
static inline float *download_bf16(const bf16 *d, size_t n) {
    bf16 *h = (bf16 *)malloc(n * sizeof(bf16) + 1);
    float *x = (float *)malloc(n * sizeof(float) + 1);
    TEST_CUDA(cudaDeviceSynchronize());
    TEST_CUDA(cudaMemcpy(h, d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) x[i] = host_from_bf16(h[i]);
    free(h);
    return x;
}
static inline float *download_float(const float *d, size_t n) {
    float *x = (float *)malloc(n * sizeof(float) + 1);
    TEST_CUDA(cudaDeviceSynchronize());
    TEST_CUDA(cudaMemcpy(x, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return x;
}

/* max|got - want| / max|want|; any NaN in got (an unwritten, poisoned element) gives +inf */
static inline double relative_error(const float *got, const float *want, size_t n) {
    double max_diff = 0.0, max_want = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isinf(got[i])) return INFINITY;
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > max_diff) max_diff = d;
        if (fabs((double)want[i]) > max_want) max_want = fabs((double)want[i]);
    }
    return max_want > 0.0 ? max_diff / max_want : max_diff;
}

/* one TAP line with a diagnostic of the measured error */
static inline void expect_below(double err, double tol, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tap_diag("%s: relative error %.3g (tolerance %.0e)", what, err, tol);
    tap_ok(err < tol, "%s", what);
}

#endif /* CUDA_TEST_UTIL_H */
