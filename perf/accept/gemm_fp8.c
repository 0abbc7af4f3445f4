/* gemm_fp8.c: the fp8 GEMM rate of the acceptance suite's GEMM check (gemm_bench.c): cuBLASLt
 * directly (the kernel interface has no fp8 matmul), e4m3 inputs with per-tensor scales of 1,
 * fp32 accumulation, in cuBLASLt's fast-accumulation mode where it has an algorithm that runs (as
 * Transformer Engine runs fp8 forward GEMMs), bf16 output. cuBLASLt's fp8 GEMMs want the "TN" layout: A transposed (k x m,
 * column-major, leading dimension k) and B not (k x n), so D[m,n] = A^T B with both operands
 * k-contiguous. Inputs are multiples of 1/8 in [-1, 1), exact in e4m3, so the reference (a dot
 * product in doubles) is exact before the output's bf16 rounding. */
#include "config.h"

#include "perf/accept/gemm_fp8.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* the e4m3 byte of j/8 for -8 <= j < 8 (normal numbers or zero: exact) */
static uint8_t e4m3_of_eighths(int j) {
    if (j == 0) return 0;
    uint8_t sign = j < 0 ? 0x80 : 0;
    int a = j < 0 ? -j : j, e = 0;   /* a/8 = (a / 2^e) * 2^(e - 3), a / 2^e in [1, 2) */
    while ((a >> (e + 1)) > 0) e++;
    int mantissa = ((a << 3) >> e) - 8; /* three bits of (a / 2^e - 1) */
    return (uint8_t)(sign | ((e - 3 + 7) << 3) | mantissa);
}

/* a reproducible integer in [-8, 8) for element i of operand `which` */
static int eighths(uint64_t which, size_t i) {
    uint64_t z = which * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 7;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (int)(z >> 60) - 8;
}

static float float_of_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int fail(char *note, size_t note_len, const char *what, int code) {
    snprintf(note, note_len, "%s failed (%d)", what, code);
    return 0;
}

#define TRY_CUDA(call, what)                                                  \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) { ok = fail(note, note_len, what, (int)e_); goto done; } \
    } while (0)
#define TRY_LT(call, what)                                                    \
    do {                                                                      \
        cublasStatus_t s_ = (call);                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) { ok = fail(note, note_len, what, (int)s_); goto done; } \
    } while (0)

int gemm_fp8_available(char *note, size_t note_len) {
    int device = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        snprintf(note, note_len, "no GPU");
        return 0;
    }
    if (prop.major * 10 + prop.minor < 89) {
        snprintf(note, note_len, "%s (compute capability %d.%d) has no fp8 tensor cores (8.9 and later)", prop.name,
                 prop.major, prop.minor);
        return 0;
    }
    return 1;
}

int gemm_fp8_measure(int m, int n, int k, int warmup, int repeat, double *seconds, long long *wrong, int *fast,
                     char *note, size_t note_len) {
    int ok = 1;
    *fast = 0;
    size_t a_bytes = (size_t)k * m, b_bytes = (size_t)k * n, d_elems = (size_t)m * n;
    uint8_t *host_a = malloc(a_bytes), *host_b = malloc(b_bytes);
    void *a = NULL, *b = NULL, *d = NULL, *workspace = NULL;
    float *a_scale = NULL, *b_scale = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    cudaStream_t stream = NULL;
    cublasLtHandle_t handle = NULL;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t a_layout = NULL, b_layout = NULL, d_layout = NULL;
    cublasLtMatmulPreference_t preference = NULL;
    float *times = malloc(sizeof(float) * (size_t)(repeat > 0 ? repeat : 1));
    const size_t workspace_bytes = 32u << 20;
    *seconds = 0;
    *wrong = 0;
    if (!host_a || !host_b || !times) { ok = fail(note, note_len, "host allocation", 0); goto done; }
    /* A^T is [m,k] row-major = A [k,m] column-major: element (row r of D, j) at r*k + j */
    for (size_t i = 0; i < a_bytes; i++) host_a[i] = e4m3_of_eighths(eighths(1, i));
    for (size_t i = 0; i < b_bytes; i++) host_b[i] = e4m3_of_eighths(eighths(2, i));
    TRY_CUDA(cudaMalloc(&a, a_bytes), "cudaMalloc");
    TRY_CUDA(cudaMalloc(&b, b_bytes), "cudaMalloc");
    TRY_CUDA(cudaMalloc(&d, d_elems * 2), "cudaMalloc");
    TRY_CUDA(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc");
    /* each scale in its own allocation: cuBLASLt 13.1 refuses (NOT_SUPPORTED at launch, with no
     * log line) a scale pointer that is only 4-byte aligned, such as the second float of one array */
    TRY_CUDA(cudaMalloc((void **)&a_scale, sizeof(float)), "cudaMalloc");
    TRY_CUDA(cudaMalloc((void **)&b_scale, sizeof(float)), "cudaMalloc");
    const float one = 1.0f;
    TRY_CUDA(cudaMemcpy(a, host_a, a_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    TRY_CUDA(cudaMemcpy(b, host_b, b_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    TRY_CUDA(cudaMemcpy(a_scale, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy");
    TRY_CUDA(cudaMemcpy(b_scale, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy");

    TRY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    TRY_LT(cublasLtCreate(&handle), "cublasLtCreate");
    TRY_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    TRY_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa), "TRANSA");
    TRY_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb), "TRANSB");
    TRY_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale),
           "A_SCALE_POINTER");
    TRY_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale),
           "B_SCALE_POINTER");
    TRY_LT(cublasLtMatrixLayoutCreate(&a_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)m, k), "layout A");
    TRY_LT(cublasLtMatrixLayoutCreate(&b_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)n, k), "layout B");
    TRY_LT(cublasLtMatrixLayoutCreate(&d_layout, CUDA_R_16BF, (uint64_t)m, (uint64_t)n, m), "layout D");
    TRY_LT(cublasLtMatmulPreferenceCreate(&preference), "preference");
    uint64_t max_workspace = workspace_bytes;
    TRY_LT(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                sizeof max_workspace), "workspace preference");
    /* the heuristic's candidates in order, first with fast accumulation, then without: the first
     * that runs is timed (the heuristic does not promise that its first choice runs) */
    enum { CANDIDATES = 8 };
    cublasLtMatmulHeuristicResult_t results[CANDIDATES], *result = NULL;
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int8_t fast_accum = 1; fast_accum >= 0 && !result; fast_accum--) {
        TRY_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum),
               "FAST_ACCUM");
        int returned = 0;
        cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc, a_layout, b_layout, d_layout, d_layout,
                                                               preference, CANDIDATES, results, &returned);
        if (status != CUBLAS_STATUS_SUCCESS) { last = status; continue; }
        for (int i = 0; i < returned && !result; i++) {
            if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
            last = cublasLtMatmul(handle, desc, &alpha, a, a_layout, b, b_layout, &beta, d, d_layout, d, d_layout,
                                  &results[i].algo, workspace, workspace_bytes, stream);
            if (last == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream) == cudaSuccess) {
                result = &results[i];
                *fast = fast_accum;
            }
        }
    }
    if (!result) {
        snprintf(note, note_len, "no cuBLASLt fp8 algorithm ran for %dx%dx%d (last status %d)", m, n, k, (int)last);
        ok = 0;
        goto done;
    }
    TRY_CUDA(cudaEventCreate(&start), "cudaEventCreate");
    TRY_CUDA(cudaEventCreate(&stop), "cudaEventCreate");
    for (int r = -warmup; r < repeat; r++) {
        TRY_CUDA(cudaEventRecord(start, stream), "cudaEventRecord");
        TRY_LT(cublasLtMatmul(handle, desc, &alpha, a, a_layout, b, b_layout, &beta, d, d_layout, d, d_layout,
                              &result->algo, workspace, workspace_bytes, stream), "cublasLtMatmul");
        TRY_CUDA(cudaEventRecord(stop, stream), "cudaEventRecord");
        TRY_CUDA(cudaEventSynchronize(stop), "cudaEventSynchronize");
        if (r >= 0) TRY_CUDA(cudaEventElapsedTime(&times[r], start, stop), "cudaEventElapsedTime");
    }
    for (int i = 1; i < repeat; i++)  /* insertion sort: the median */
        for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
            float t = times[j];
            times[j] = times[j - 1];
            times[j - 1] = t;
        }
    *seconds = times[repeat / 2] * 1e-3;
    /* 64 sampled elements against the exact dot product (bf16 output: 2^-8 relative, plus fast
     * accumulation's coarser partial sums) */
    for (int q = 0; q < 64; q++) {
        size_t row = (size_t)(eighths(777, (size_t)q) + 8) * (size_t)m / 16, col = (size_t)(eighths(778, (size_t)q) + 8) * (size_t)n / 16;
        if (q == 0) row = 0, col = 0;
        if (q == 1) row = (size_t)m - 1, col = (size_t)n - 1;
        uint16_t got16;
        TRY_CUDA(cudaMemcpy(&got16, (char *)d + 2 * (row + col * (size_t)m), 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
        double ref = 0, abs_sum = 0;
        for (int j = 0; j < k; j++) {
            double p = (eighths(1, row * (size_t)k + (size_t)j) / 8.0) * (eighths(2, col * (size_t)k + (size_t)j) / 8.0);
            ref += p;
            abs_sum += fabs(p);
        }
        double tol = 8e-3 * fabs(ref) + 1e-3 * abs_sum + 1e-6;
        if (!(fabs(float_of_bf16(got16) - ref) <= tol)) (*wrong)++;
    }
done:
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (a_layout) cublasLtMatrixLayoutDestroy(a_layout);
    if (b_layout) cublasLtMatrixLayoutDestroy(b_layout);
    if (d_layout) cublasLtMatrixLayoutDestroy(d_layout);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
    if (stream) cudaStreamDestroy(stream);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    cudaFree(workspace);
    cudaFree(a_scale);
    cudaFree(b_scale);
    free(host_a);
    free(host_b);
    free(times);
    return ok;
}

#else /* no CUDA in this build */

int gemm_fp8_available(char *note, size_t note_len) {
    snprintf(note, note_len, "this build has no CUDA backend");
    return 0;
}

int gemm_fp8_measure(int m, int n, int k, int warmup, int repeat, double *seconds, long long *wrong, int *fast,
                     char *note, size_t note_len) {
    (void)m; (void)n; (void)k; (void)warmup; (void)repeat;
    *fast = 0;
    *seconds = 0;
    *wrong = 0;
    return gemm_fp8_available(note, note_len);
}

#endif
