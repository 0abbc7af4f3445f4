/* fp8_quant_bench.cu: times the fp8 quantization kernels (kernels/cuda/cuda_fp8.cu, issue 43)
 * with CUDA events through the library's C entry points (bf16 input, E4M3 codes, delayed
 * scaling's form: the scale read from device memory, the amax recorded), against the device's
 * copy bandwidth measured in the same run (cudaMemcpyAsync device to device: read + write).
 * Shapes: [16384 x 2048] (GPT 1.3B's tokens x hidden at micro-batch 8, seq 2048), [16384 x 8192]
 * (its fc2 input), [8192 x 2048] (its fc1 weight), [2048 x 6144] (its qkv weight transposed).
 *
 * Effective bandwidth = bytes that must move / time:
 *   quantize            read x (2 bytes an element), write the codes (1): 3 bytes an element
 *   quantize_transpose  read x, write the codes and their transpose: 4 bytes an element
 *   quant+transpose     fp8_quantize then fp8_transpose (what the tensorwise path runs; 5 bytes)
 *   gelu/swiglu unfused, fused  the fp8 MLP backward's elementwise pass (bench_mlp), its rows and
 *                       F columns: the bytes an element of [rows, F] that must move as said there
 * and the share of the copy bandwidth. Each line also checks one call's outputs against
 * fp8_quantize followed by fp8_transpose (same codes, same amax) and prints a hash of the codes,
 * so that two builds of the library can be compared bit for bit.
 *
 * Usage: fp8_quant_bench [--iters N]. Build: make perf/fp8_quant_bench (kernels/local.mk). Not a
 * test: prints figures (and "DIFFER" should a fast path disagree with the plain one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/fp8_format.h"

/* the stream the kernels run on: the bench's own, selected in the library (cuda_stream_select) */
static cudaStream_t bench_stream;

#define BENCH_CHECK(call)                                                                    \
    do {                                                                                     \
        cudaError_t bench_err_ = (call);                                                     \
        if (bench_err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                    cudaGetErrorString(bench_err_));                                         \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* bf16 in [-scale, scale] from a hash of the index, every 97th element 1000 times larger
 * (saturating codes) */
static __global__ void bench_fill_kernel(__nv_bfloat16 *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        float v = scale * ((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
        x[i] = __float2bfloat16(i % 97 == 3 ? 1000.0f * v : v);
    }
}

/* FNV-1a over host bytes */
static uint32_t hash_bytes(const unsigned char *p, size_t bytes, uint32_t h) {
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static unsigned char *to_host(const void *d, size_t bytes) {
    unsigned char *h = (unsigned char *)malloc(bytes);
    BENCH_CHECK(cudaStreamSynchronize(bench_stream));
    BENCH_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static int iters = 20;
static cudaEvent_t start_event, stop_event;
static double copy_gbs;

/* microseconds a call of what `run` launches, averaged over `iters` after 3 warm-up calls */
template <typename F>
static double time_us(F run) {
    for (int i = 0; i < 3; i++) run();
    BENCH_CHECK(cudaEventRecord(start_event, bench_stream));
    for (int i = 0; i < iters; i++) run();
    BENCH_CHECK(cudaEventRecord(stop_event, bench_stream));
    BENCH_CHECK(cudaEventSynchronize(stop_event));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_event, stop_event));
    return 1000.0 * ms / iters;
}

static void line(const char *name, int rows, int cols, double us, double bytes, uint32_t hash, int same) {
    double gbs = bytes / us / 1e3;
    printf("%-20s %6d %6d %10.2f %10.1f %6.1f%%   %08x %s\n", name, rows, cols, us, gbs, 100.0 * gbs / copy_gbs, hash,
           same ? "same" : "DIFFER");
    fflush(stdout);
}

static void bench(int rows, int cols) {
    size_t n = (size_t)rows * cols;
    __nv_bfloat16 *x;
    uint8_t *q, *t, *q2, *t2;
    float *scale, *amax, *amax2, *scale_inv;
    BENCH_CHECK(cudaMalloc((void **)&x, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&q, n));
    BENCH_CHECK(cudaMalloc((void **)&t, n));
    BENCH_CHECK(cudaMalloc((void **)&q2, n));
    BENCH_CHECK(cudaMalloc((void **)&t2, n));
    BENCH_CHECK(cudaMalloc((void **)&scale, 4));
    BENCH_CHECK(cudaMalloc((void **)&amax, 4));
    BENCH_CHECK(cudaMalloc((void **)&amax2, 4));
    BENCH_CHECK(cudaMalloc((void **)&scale_inv, 4));
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(x, n, 17u + (uint32_t)rows, 3.0f);
    BENCH_CHECK(cudaGetLastError());
    const float s = 64.0f;
    BENCH_CHECK(cudaMemcpyAsync(scale, &s, 4, cudaMemcpyHostToDevice, bench_stream));
    BENCH_CHECK(cudaMemsetAsync(amax, 0, 4, bench_stream));
    BENCH_CHECK(cudaMemsetAsync(amax2, 0, 4, bench_stream));
    const bf16 *xb = (const bf16 *)x;

    /* the plain path once: quantize, then transpose the codes */
    cuda_fp8_quantize(q, amax, scale_inv, xb, n, scale, FP8_E4M3);
    cuda_fp8_transpose(t, q, rows, cols);
    unsigned char *hq = to_host(q, n), *ht = to_host(t, n), *ha = to_host(amax, 4);
    /* the fused kernel once, against it */
    cuda_fp8_quantize_transpose(q2, t2, amax2, scale_inv, xb, rows, cols, scale, FP8_E4M3);
    unsigned char *hq2 = to_host(q2, n), *ht2 = to_host(t2, n), *ha2 = to_host(amax2, 4);
    int same = !memcmp(hq, hq2, n) && !memcmp(ht, ht2, n) && !memcmp(ha, ha2, 4);
    uint32_t hash_q = hash_bytes(hq, n, 2166136261u), hash_qt = hash_bytes(ht2, n, hash_q);

    double us = time_us([&] { cuda_fp8_quantize(q, amax, scale_inv, xb, n, scale, FP8_E4M3); });
    line("quantize", rows, cols, us, 3.0 * n, hash_q, 1);
    us = time_us([&] { cuda_fp8_quantize_transpose(q2, t2, amax2, scale_inv, xb, rows, cols, scale, FP8_E4M3); });
    line("quantize_transpose", rows, cols, us, 4.0 * n, hash_qt, same);
    us = time_us([&] {
        cuda_fp8_quantize(q, amax, scale_inv, xb, n, scale, FP8_E4M3);
        cuda_fp8_transpose(t, q, rows, cols);
    });
    line("quant+transpose", rows, cols, us, 4.0 * n, hash_bytes(ht, n, hash_q), 1);
    free(hq), free(ht), free(ha), free(hq2), free(ht2), free(ha2);
    cudaFree(x), cudaFree(q), cudaFree(t), cudaFree(q2), cudaFree(t2);
    cudaFree(scale), cudaFree(amax), cudaFree(amax2), cudaFree(scale_inv);
}

/* the fp8 MLP backward's elementwise pass at pre [rows, F] (SwiGLU [rows, 2F]), dact [rows, F]:
 * the unfused passes (activation made again with codes and transpose, its backward with codes and
 * transpose, with a bias bias_backward over the gradient) against cuda_mlp_backward_fp8, which
 * writes only x's transposed codes, the gradient's codes and transpose and the bias gradient.
 * Bytes an element of [rows, F] that must move: GeLU unfused 6 + 8 (+ 2 bias) and fused 2 + 2 + 1
 * + 2 = 7; SwiGLU (gradient [rows, 2F]) unfused 4 + 4 + 14 (+ 4) and fused 4 + 2 + 1 + 4 = 11.
 * The fused line's check: its outputs (codes, transposes, amaxes, bias gradient from zero)
 * against the unfused passes' bit for bit. */
static void bench_mlp(int rows, int F, int swiglu, int bias) {
    size_t n = (size_t)rows * F, G = swiglu ? 2 * (size_t)F : (size_t)F, ng = (size_t)rows * G;
    __nv_bfloat16 *pre, *dact, *x, *dpre;
    uint8_t *xq, *xt[2], *gq[2], *gt[2];
    float *scales, *dbias[2];
    BENCH_CHECK(cudaMalloc((void **)&pre, (swiglu ? 2 : 1) * n * 2));
    BENCH_CHECK(cudaMalloc((void **)&dact, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&x, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&dpre, ng * 2));
    BENCH_CHECK(cudaMalloc((void **)&xq, n));
    for (int j = 0; j < 2; j++) {
        BENCH_CHECK(cudaMalloc((void **)&xt[j], n));
        BENCH_CHECK(cudaMalloc((void **)&gq[j], ng));
        BENCH_CHECK(cudaMalloc((void **)&gt[j], ng));
        BENCH_CHECK(cudaMalloc((void **)&dbias[j], G * 4));
        BENCH_CHECK(cudaMemsetAsync(dbias[j], 0, G * 4, bench_stream));
    }
    BENCH_CHECK(cudaMalloc((void **)&scales, 64 * 4)); /* side j at 32 j: the scales of x and g at 0 and 4, x's amax and scale_inv at 8 and 12, g's at 16 and 20 */
    BENCH_CHECK(cudaMemsetAsync(scales, 0, 64 * 4, bench_stream));
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(pre, (swiglu ? 2 : 1) * n, 29u, 3.0f);
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(dact, n, 31u, 0.05f);
    BENCH_CHECK(cudaGetLastError());
    const float sx = 64.0f, sg = 4096.0f;
    fp8_output qx[2], qg[2];
    for (int j = 0; j < 2; j++) {
        float *base = scales + 32 * j;
        BENCH_CHECK(cudaMemcpyAsync(base, &sx, 4, cudaMemcpyHostToDevice, bench_stream));
        BENCH_CHECK(cudaMemcpyAsync(base + 4, &sg, 4, cudaMemcpyHostToDevice, bench_stream));
        qx[j] = fp8_output{xq, base + 8, base + 12, base, FP8_E4M3};
        qg[j] = fp8_output{gq[j], base + 16, base + 20, base + 4, FP8_E5M2};
    }
    const bf16 *preb = (const bf16 *)pre, *dactb = (const bf16 *)dact;
    auto unfused = [&] {
        if (swiglu) {
            cuda_swiglu_forward_fp8_transpose((bf16 *)x, preb, rows, F, &qx[0], xt[0]);
            cuda_swiglu_backward_fp8((bf16 *)dpre, preb, dactb, rows, F, &qg[0], gt[0]);
        } else {
            cuda_gelu_forward_fp8_transpose((bf16 *)x, preb, rows, F, &qx[0], xt[0]);
            cuda_gelu_backward_fp8((bf16 *)dpre, preb, dactb, rows, F, &qg[0], gt[0]);
        }
        if (bias) cuda_bias_backward(dbias[0], (const bf16 *)dpre, rows, (int)G);
    };
    auto fused = [&] {
        cuda_mlp_backward_fp8((bf16 *)dpre, bias ? dbias[1] : NULL, preb, dactb, rows, F, swiglu, &qx[1], xt[1], &qg[1],
                              gt[1]);
    };
    unfused();
    fused();
    int same = 1;
    const void *pairs[][2] = {{xt[0], xt[1]}, {gq[0], gq[1]}, {gt[0], gt[1]}, {dbias[0], dbias[1]},
                              {scales + 8, scales + 32 + 8}, {scales + 16, scales + 32 + 16}};
    size_t sizes[] = {n, ng, ng, bias ? G * 4 : 0, 4, 4};
    uint32_t hash = 2166136261u;
    for (int p = 0; p < 6; p++) {
        size_t bytes = sizes[p] ? sizes[p] : 1; /* a bias gradient not asked for: compared over 0 bytes */
        unsigned char *a = to_host(pairs[p][0], bytes), *b = to_host(pairs[p][1], bytes);
        same = same && !memcmp(a, b, sizes[p]);
        hash = hash_bytes(b, sizes[p], hash);
        free(a), free(b);
    }
    char name[32];
    double unfused_bytes = swiglu ? 22.0 + (bias ? 4.0 : 0.0) : 14.0 + (bias ? 2.0 : 0.0);
    double fused_bytes = swiglu ? 11.0 : 7.0;
    snprintf(name, sizeof name, "%s%s unfused", swiglu ? "swiglu" : "gelu", bias ? "+bias" : "");
    line(name, rows, F, time_us(unfused), unfused_bytes * n, hash, 1);
    snprintf(name, sizeof name, "%s%s fused", swiglu ? "swiglu" : "gelu", bias ? "+bias" : "");
    line(name, rows, F, time_us(fused), fused_bytes * n, hash, same);
    cudaFree(pre), cudaFree(dact), cudaFree(x), cudaFree(dpre), cudaFree(xq), cudaFree(scales);
    for (int j = 0; j < 2; j++) cudaFree(xt[j]), cudaFree(gq[j]), cudaFree(gt[j]), cudaFree(dbias[j]);
}

/* device-to-device copy of 1 GiB: bytes read + written per second */
static double copy_bandwidth(void) {
    size_t bytes = (size_t)1 << 30;
    void *a, *b;
    BENCH_CHECK(cudaMalloc(&a, bytes));
    BENCH_CHECK(cudaMalloc(&b, bytes));
    BENCH_CHECK(cudaMemsetAsync(a, 1, bytes, bench_stream));
    double us = time_us([&] { BENCH_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, bench_stream)); });
    cudaFree(a), cudaFree(b);
    return 2.0 * (double)bytes / us / 1e3;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--iters N]\n", argv[0]);
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    BENCH_CHECK(cudaStreamCreateWithFlags(&bench_stream, cudaStreamNonBlocking));
    cuda_stream_select(bench_stream);
    BENCH_CHECK(cudaEventCreate(&start_event));
    BENCH_CHECK(cudaEventCreate(&stop_event));
    cudaDeviceProp prop;
    BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
    copy_gbs = copy_bandwidth();
    printf("# fp8_quant_bench on %s, %d iterations per line (bf16 -> E4M3)\n", prop.name, iters);
    printf("# device copy (cudaMemcpy D2D, 1 GiB, read + write): %.1f GB/s\n", copy_gbs);
    printf("%-20s %6s %6s %10s %10s %7s   %-8s %s\n", "kernel", "rows", "cols", "us", "GB/s", "copy", "hash",
           "vs quantize+transpose");
    static const int shapes[][2] = {{16384, 2048}, {16384, 8192}, {8192, 2048}, {2048, 6144}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) bench(shapes[s][0], shapes[s][1]);
    /* the fp8 MLP backward's elementwise pass: GPT 1.3B's [16384 x 8192] (GeLU, fc1 bias) and
     * Llama-3.2-1B's [16384 x 8192] (SwiGLU, no bias) */
    bench_mlp(16384, 8192, 0, 1);
    bench_mlp(16384, 8192, 0, 0);
    bench_mlp(16384, 8192, 1, 0);
    return 0;
}
