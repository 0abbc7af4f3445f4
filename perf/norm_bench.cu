/* norm_bench.cu: times the memory-bound kernels of the norms and the bias gradient with CUDA
 * events, through the library's C entry points (bf16): LayerNorm forward and backward, RMSNorm
 * backward, bias backward, at the shapes of GPT-2 124M (tokens N = 32768, C = 768; bias widths
 * 768, 3072, 2304) and GPT 1.3B (N = 16384, C = 2048; bias widths 2048, 8192, 6144).
 *
 * Effective bandwidth = bytes that must move / time:
 *   layernorm_forward  read x, write out: 4NC bytes (+ weight, bias, mean, rstd)
 *   layernorm_backward read x, dout, dx, write dx: 8NC (+ weight, mean, rstd, dweight, dbias);
 *   layernorm_bwd_colsum the same with the column sums of dx (dx_colsum, as training calls it)
 *   rmsnorm_backward   the same without mean and dbias
 *   *_from_output      the same from the norm's output y instead of x (--memory-efficient-layer-norm;
 *                      the LayerNorm's with the column sums, as training calls it)
 *   bias_backward      read dout: 2NC (+ dbias)
 * Each line also prints a hash of the outputs of one call on fixed inputs (dx from a fixed
 * start, dweight/dbias from zero), so that two builds of the library can be compared bit for bit.
 *
 * Usage: norm_bench [--iters N]. Build: make perf/norm_bench (kernels/local.mk). Not a test:
 * prints figures only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"

/* the bench owns the stream the kernels run on (the library's kernels ask cuda_stream()) */
static cudaStream_t bench_stream;
extern "C" void *cuda_stream(void) { return (void *)bench_stream; }

#define BENCH_CHECK(call)                                                                    \
    do {                                                                                     \
        cudaError_t bench_err_ = (call);                                                     \
        if (bench_err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                    cudaGetErrorString(bench_err_));                                         \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* uniform bf16 in [offset - scale, offset + scale] from a hash of the index */
static __global__ void bench_fill_kernel(__nv_bfloat16 *x, size_t n, uint32_t seed, float scale,
                                         float offset) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        x[i] = __float2bfloat16(offset + scale * ((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f));
    }
}
static void fill(void *x, size_t n, uint32_t seed, float scale, float offset) {
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>((__nv_bfloat16 *)x, n, seed, scale, offset);
    BENCH_CHECK(cudaGetLastError());
}

/* FNV-1a over device bytes */
static uint32_t device_hash(const void *p, size_t bytes, uint32_t h) {
    unsigned char *host = (unsigned char *)malloc(bytes);
    BENCH_CHECK(cudaStreamSynchronize(bench_stream));
    BENCH_CHECK(cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++) h = (h ^ host[i]) * 16777619u;
    free(host);
    return h;
}

static int iters = 20;
static cudaEvent_t start_event, stop_event;

enum which { LN_FWD, LN_BWD, LN_BWD_SUM, RMS_BWD, BIAS_BWD, LN_BWD_OUT, RMS_BWD_OUT };
static const char *names[] = {"layernorm_forward", "layernorm_backward", "layernorm_bwd_colsum", "rmsnorm_backward",
                              "bias_backward", "ln_bwd_from_output", "rms_bwd_from_output"};

static void launch(enum which kind, bf16 *out, bf16 *dx, float *mean, float *rstd, float *dw,
                   float *db, const bf16 *x, const bf16 *dout, const bf16 *w, const bf16 *b,
                   int N, int C) {
    switch (kind) {
    case LN_FWD: cuda_layernorm_forward(out, mean, rstd, x, w, b, N, C, 1e-5f); break;
    case LN_BWD: cuda_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C); break;
    case LN_BWD_SUM: cuda_layernorm_backward_colsum(dx, dw, db, db + C, dout, x, w, mean, rstd, N, C); break;
    case RMS_BWD: cuda_rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C); break;
    case BIAS_BWD: cuda_bias_backward(db, dout, N, C); break;
    case LN_BWD_OUT: cuda_layernorm_backward_from_output(dx, dw, db, db + C, dout, out, w, b, rstd, N, C, 1e-5f); break;
    case RMS_BWD_OUT: cuda_rmsnorm_backward_from_output(dx, dw, dout, out, w, rstd, N, C, 1e-5f); break;
    }
}

static void bench(enum which kind, int N, int C) {
    size_t n = (size_t)N * C;
    bf16 *x, *dout, *dx, *out, *w, *b;
    float *mean, *rstd, *dw, *db;
    BENCH_CHECK(cudaMalloc((void **)&x, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&dout, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&dx, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&out, n * 2));
    BENCH_CHECK(cudaMalloc((void **)&w, (size_t)C * 2));
    BENCH_CHECK(cudaMalloc((void **)&b, (size_t)C * 2));
    BENCH_CHECK(cudaMalloc((void **)&mean, (size_t)N * 4));
    BENCH_CHECK(cudaMalloc((void **)&rstd, (size_t)N * 4));
    BENCH_CHECK(cudaMalloc((void **)&dw, (size_t)C * 4));
    BENCH_CHECK(cudaMalloc((void **)&db, (size_t)C * 8)); /* dbias, then dx_colsum */
    fill(x, n, 1, 2.0f, 0.5f);
    fill(dout, n, 2, 1.0f, 0.0f);
    fill(dx, n, 3, 1.0f, 0.0f);
    fill(w, (size_t)C, 4, 0.5f, 1.0f);
    fill(b, (size_t)C, 5, 0.5f, 0.0f);
    BENCH_CHECK(cudaMemsetAsync(dw, 0, (size_t)C * 4, bench_stream));
    BENCH_CHECK(cudaMemsetAsync(db, 0, (size_t)C * 8, bench_stream));
    if (kind == RMS_BWD || kind == RMS_BWD_OUT) cuda_rmsnorm_forward(out, rstd, x, w, N, C, 1e-5f);
    else cuda_layernorm_forward(out, mean, rstd, x, w, b, N, C, 1e-5f);

    /* one call on fixed inputs: the hash of what it wrote */
    launch(kind, out, dx, mean, rstd, dw, db, x, dout, w, b, N, C);
    uint32_t h = 2166136261u;
    switch (kind) {
    case LN_FWD: h = device_hash(out, n * 2, h); break;
    case LN_BWD:
    case LN_BWD_SUM:
    case LN_BWD_OUT:
        h = device_hash(dx, n * 2, h);
        h = device_hash(dw, (size_t)C * 4, h);
        h = device_hash(db, (size_t)C * (kind == LN_BWD ? 4 : 8), h);
        break;
    case RMS_BWD:
    case RMS_BWD_OUT:
        h = device_hash(dx, n * 2, h);
        h = device_hash(dw, (size_t)C * 4, h);
        break;
    case BIAS_BWD: h = device_hash(db, (size_t)C * 4, h); break;
    }

    for (int i = 0; i < 3; i++) launch(kind, out, dx, mean, rstd, dw, db, x, dout, w, b, N, C);
    BENCH_CHECK(cudaEventRecord(start_event, bench_stream));
    for (int i = 0; i < iters; i++) launch(kind, out, dx, mean, rstd, dw, db, x, dout, w, b, N, C);
    BENCH_CHECK(cudaEventRecord(stop_event, bench_stream));
    BENCH_CHECK(cudaEventSynchronize(stop_event));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_event, stop_event));
    double us = 1000.0 * ms / iters;
    double bytes = 0.0;
    switch (kind) {
    case LN_FWD: bytes = 4.0 * n + 4.0 * C + 8.0 * N; break;
    case LN_BWD: bytes = 8.0 * n + 2.0 * C + 8.0 * N + 16.0 * C; break;
    case LN_BWD_SUM: bytes = 8.0 * n + 2.0 * C + 8.0 * N + 24.0 * C; break;
    case LN_BWD_OUT: bytes = 8.0 * n + 4.0 * C + 4.0 * N + 24.0 * C; break;
    case RMS_BWD:
    case RMS_BWD_OUT: bytes = 8.0 * n + 2.0 * C + 4.0 * N + 8.0 * C; break;
    case BIAS_BWD: bytes = 2.0 * n + 8.0 * C; break;
    }
    printf("%-20s %6d %6d %10.2f %10.1f   %08x\n", names[kind], N, C, us, bytes / us / 1e3, h);
    fflush(stdout);
    cudaFree(x); cudaFree(dout); cudaFree(dx); cudaFree(out); cudaFree(w); cudaFree(b);
    cudaFree(mean); cudaFree(rstd); cudaFree(dw); cudaFree(db);
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
    BENCH_CHECK(cudaEventCreate(&start_event));
    BENCH_CHECK(cudaEventCreate(&stop_event));
    cudaDeviceProp prop;
    BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# norm_bench on %s, %d iterations per line (bf16)\n", prop.name, iters);
    printf("%-20s %6s %6s %10s %10s   %s\n", "kernel", "N", "C", "us", "GB/s", "hash");
    static const struct { int N, C, bias[3]; } shapes[] = {
        {32768, 768, {768, 3072, 2304}},    /* GPT-2 124M */
        {16384, 2048, {2048, 8192, 6144}},  /* GPT 1.3B */
    };
    for (int s = 0; s < 2; s++) {
        int N = shapes[s].N, C = shapes[s].C;
        bench(LN_FWD, N, C);
        bench(LN_BWD, N, C);
        bench(LN_BWD_SUM, N, C);
        bench(LN_BWD_OUT, N, C);
        bench(RMS_BWD, N, C);
        bench(RMS_BWD_OUT, N, C);
        for (int k = 0; k < 3; k++) bench(BIAS_BWD, N, shapes[s].bias[k]);
    }
    return 0;
}
