/* cuda_fp8_test.c: the CUDA backend's fp8 quantization (kernels/cuda/cuda_fp8.cu) against the CPU
 * emulation (kernels/cpu/cpu_fp8.c), through the two backends' kernel tables, in E4M3 and E5M2:
 *   - fp8_quantize: the same codes bit for bit as the CPU from the same (compute-dtype) values,
 *     saturation and tiny values included; the amax folded into a prior one exactly (with and
 *     without a NaN element, which it ignores); scale_inv = 1 / scale;
 *   - fp8_dequantize: the CPU's fp32 values rounded once to the compute dtype;
 *   - fp8_amax: exactly the CPU's; sizes from 1 element to 2^20 + 3 (many blocks).
 * Skips (exit 77) without a GPU. */
#include "tests/gpu/cuda_test_util.h"
#include "kernels/fp8_format.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

static const kernel_ops *cpu, *gpu;

/* n values in the compute dtype (as the GPU holds them), spread over the fp8 range with a few
 * beyond it and a few tiny; one NaN at index nan_at when nan_at < n */
static float *values(size_t n, uint64_t seed, size_t nan_at) {
    float *x = (float *)malloc(sizeof(float) * n + 4);
    fill_random(x, n, seed, 1.0f);
    for (size_t i = 0; i < n; i++) {
        if (i % 97 == 3) x[i] *= 1e4f;        /* beyond E4M3's 448 after scaling: saturates */
        else if (i % 89 == 5) x[i] *= 1e-6f;  /* subnormal or zero in fp8 */
        else x[i] *= 40.0f;
    }
    if (nan_at < n) x[nan_at] = NAN;
    void *d = gpu->alloc(gpu->act_bytes * n);
    gpu->copy_from_host_float(d, x, n);
    gpu->copy_to_host_float(x, d, n);
    gpu->release(d);
    return x;
}

static float *device_float(float v) {
    float *d = (float *)gpu->alloc(sizeof(float));
    gpu->copy_from_host(d, &v, sizeof v);
    return d;
}
static float host_float(const float *d) {
    float v;
    TEST_CUDA(cudaDeviceSynchronize());
    gpu->copy_to_host(&v, d, sizeof v);
    return v;
}

static void test_fp8(size_t n, int format, size_t nan_at) {
    const char *name = format == FP8_E5M2 ? "E5M2" : "E4M3";
    float *x = values(n, 7000 + n + (uint64_t)format, nan_at);
    float scale = format == FP8_E5M2 ? 3.7f : 0.8125f, prior_amax = 2.5f;
    uint8_t *want = (uint8_t *)malloc(n + 4), *got = (uint8_t *)malloc(n + 4);
    float want_amax = prior_amax, want_scale_inv = 0.0f;
    cpu->fp8_quantize(want, &want_amax, &want_scale_inv, x, n, &scale, format);

    void *d_x = gpu->alloc(gpu->act_bytes * n);
    gpu->copy_from_host_float(d_x, x, n);
    uint8_t *d_q = (uint8_t *)gpu->alloc(n + 16);
    float *d_amax = device_float(prior_amax), *d_scale = device_float(scale), *d_scale_inv = device_float(0.0f);
    gpu->fp8_quantize(d_q, d_amax, d_scale_inv, d_x, n, d_scale, format);
    TEST_CUDA(cudaDeviceSynchronize());
    gpu->copy_to_host(got, d_q, n);
    tap_ok(!memcmp(got, want, n), "fp8_quantize %s n=%zu%s: the CPU's codes bit for bit", name, n,
           nan_at < n ? " (a NaN element)" : "");
    float amax = host_float(d_amax), scale_inv = host_float(d_scale_inv);
    tap_ok(amax == want_amax && scale_inv == want_scale_inv,
           "fp8_quantize %s n=%zu: amax %.9g (CPU %.9g) folded into 2.5, scale_inv %.9g (CPU %.9g)", name, n, amax,
           want_amax, scale_inv, want_scale_inv);

    /* the way back: the CPU's fp32 values rounded to the compute dtype */
    float *want_back = (float *)malloc(sizeof(float) * n + 4), *got_back = (float *)malloc(sizeof(float) * n + 4);
    cpu->fp8_dequantize(want_back, want, n, &want_scale_inv, format);
    void *d_back = gpu->alloc(gpu->act_bytes * n), *d_want = gpu->alloc(gpu->act_bytes * n);
    gpu->fp8_dequantize(d_back, d_q, n, d_scale_inv, format);
    gpu->copy_from_host_float(d_want, want_back, n); /* rounded to the compute dtype */
    gpu->copy_to_host_float(got_back, d_back, n);
    gpu->copy_to_host_float(want_back, d_want, n);
    tap_ok(!memcmp(got_back, want_back, sizeof(float) * n),
           "fp8_dequantize %s n=%zu: the CPU's values rounded once to the compute dtype", name, n);

    float *d_amax2 = device_float(0.0f), want_amax2 = 0.0f;
    cpu->fp8_amax(&want_amax2, x, n);
    gpu->fp8_amax(d_amax2, d_x, n);
    float amax2 = host_float(d_amax2);
    tap_ok(amax2 == want_amax2, "fp8_amax n=%zu: %.9g, the CPU's %.9g", n, amax2, want_amax2);

    gpu->release(d_x), gpu->release(d_q), gpu->release(d_amax), gpu->release(d_scale), gpu->release(d_scale_inv);
    gpu->release(d_back), gpu->release(d_want), gpu->release(d_amax2);
    free(x), free(want), free(got), free(want_back), free(got_back);
}

int main(void) {
    skip_without_gpu();
    cpu = kernels_cpu();
    gpu = kernels_cuda();
    tap_diag("testing the bf16 backend's fp8 quantization");
    size_t none = (size_t)-1;
    test_fp8(1, FP8_E4M3, none);
    test_fp8(1000, FP8_E4M3, none);
    test_fp8(1000, FP8_E5M2, none);
    test_fp8((1u << 20) + 3, FP8_E4M3, 12345);
    test_fp8((1u << 20) + 3, FP8_E5M2, none);
    return tap_done();
}
