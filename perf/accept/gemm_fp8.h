/* gemm_fp8.h: the fp8 (e4m3) GEMM rate through cuBLASLt, for gemm_bench's fp8 lines. */
#ifndef PERF_ACCEPT_GEMM_FP8_H
#define PERF_ACCEPT_GEMM_FP8_H

#include <stddef.h>

/* 1 when the current GPU has fp8 tensor cores (compute capability 8.9 or later); else 0 and why
 * in note (no GPU, an older GPU, no CUDA in this build) */
int gemm_fp8_available(char *note, size_t note_len);

/* D[m,n] = A^T B with e4m3 A [k,m] and B [k,n] (the "TN" layout cuBLASLt's fp8 GEMMs want), bf16
 * D, fp32 accumulation (*fast = 1 when in cuBLASLt's fast-accumulation mode): the median time in
 * seconds of `repeat` timed calls after `warmup`, and the number of 64 sampled output elements
 * off the exact product. Returns 1, or 0 with the reason in note (an allocation or cuBLASLt call
 * that failed, no algorithm that runs for the shape). */
int gemm_fp8_measure(int m, int n, int k, int warmup, int repeat, double *seconds, long long *wrong, int *fast,
                     char *note, size_t note_len);

#endif
