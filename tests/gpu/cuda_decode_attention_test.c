/* cuda_decode_attention_test.c: the bf16 CUDA attention over a key/value cache (generation,
 * fp16 when built with -DTEST_FP16 as cuda_decode_attention_fp16_test: tests/gpu/cuda_fp16_map.h;
 * kernels/cuda/cuda_decode_attention.cu) against the fp32 CPU reference
 * (kernels/cpu/cpu_decode_attention.c): a prefill of several positions, then one position at a
 * time, for several shapes (head sizes 64 and 128, grouped-query attention, caches longer than
 * 48 KB of scores). Inputs
 * are rounded to bf16 first; outputs and caches are poisoned with NaN before the run, so an
 * element left unwritten fails. Outputs agree to a relative error under 1e-2 (2e-3 in fp16), the cached keys
 * and values exactly. Sliding windows (window_left >= 0, --window-size) take the same comparison
 * with the CPU's window, in the one-at-a-time kernel and in the flash-attention prefill. Exits 77 (SKIP) where there is no CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/cuda_test_util.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

static void test_decode(int B, int T, int H, int G, int D, int prefill, int window_left) {
    const kernel_ops *cpu = kernels_cpu();
    size_t C3 = (size_t)(H + 2 * G) * D, HD = (size_t)H * D, n_qkv = (size_t)B * T * C3, n_out = (size_t)B * T * HD;
    size_t n_cache = (size_t)B * T * G * D;
    float *qkv = malloc(n_qkv * sizeof(float));
    fill_random(qkv, n_qkv, 1000u + (uint64_t)T + (uint64_t)D, 2.0f);
    round_to_bf16(qkv, n_qkv);
    float *step = malloc(n_qkv * sizeof(float)), *want = malloc(n_out * sizeof(float));
    float *got = malloc(n_out * sizeof(float)), *out_cpu = malloc(n_out * sizeof(float));
    float *k_cpu = calloc(n_cache, sizeof(float)), *v_cpu = calloc(n_cache, sizeof(float));
    bf16 *k_gpu = device_alloc(n_cache * sizeof(bf16)), *v_gpu = device_alloc(n_cache * sizeof(bf16));
    bf16 *out_gpu = device_alloc(n_out * sizeof(bf16));
    poison(k_gpu, n_cache * sizeof(bf16));
    poison(v_gpu, n_cache * sizeof(bf16));
    for (int past = 0; past < T; past = past == 0 ? prefill : past + 1) {
        int Tq = past == 0 ? prefill : 1;
        for (int b = 0; b < B; b++)
            memcpy(step + (size_t)b * Tq * C3, qkv + ((size_t)b * T + past) * C3, sizeof(float) * Tq * C3);
        cpu->decode_attention(out_cpu, k_cpu, v_cpu, step, B, Tq, H, G, D, past, T, window_left);
        bf16 *step_gpu = upload_bf16(step, (size_t)B * Tq * C3);
        poison(out_gpu, (size_t)B * Tq * HD * sizeof(bf16));
        TEST_CUDA(cudaDeviceSynchronize());
        cuda_decode_attention(out_gpu, k_gpu, v_gpu, step_gpu, B, Tq, H, G, D, past, T, window_left);
        TEST_CUDA(cudaDeviceSynchronize());
        float *out_step = download_bf16(out_gpu, (size_t)B * Tq * HD);
        for (int b = 0; b < B; b++) {
            memcpy(want + ((size_t)b * T + past) * HD, out_cpu + (size_t)b * Tq * HD, sizeof(float) * Tq * HD);
            memcpy(got + ((size_t)b * T + past) * HD, out_step + (size_t)b * Tq * HD, sizeof(float) * Tq * HD);
        }
        free(out_step);
        TEST_CUDA(cudaFree(step_gpu));
    }
    double err = relative_error(got, want, n_out);
    tap_ok(err < ACT_TOL,
           "decode attention B=%d T=%d H=%d G=%d D=%d window %d (prefill %d, then one at a time): relative error %.2e",
           B, T, H, G, D, window_left, prefill, err);
    float *k_got = download_bf16(k_gpu, n_cache), *v_got = download_bf16(v_gpu, n_cache);
    int exact = 1;
    for (size_t i = 0; i < n_cache; i++) exact &= k_got[i] == k_cpu[i] && v_got[i] == v_cpu[i];
    tap_ok(exact, "B=%d T=%d H=%d G=%d D=%d: the cached keys and values are the inputs' exactly", B, T, H, G, D);
    free(k_got); free(v_got);
    TEST_CUDA(cudaFree(k_gpu)); TEST_CUDA(cudaFree(v_gpu)); TEST_CUDA(cudaFree(out_gpu));
    free(qkv); free(step); free(want); free(got); free(out_cpu); free(k_cpu); free(v_cpu);
}

int main(void) {
    skip_without_gpu();
    test_decode(2, 40, 4, 4, 64, 17, -1);
    test_decode(3, 33, 2, 2, 128, 1, -1);
    test_decode(2, 29, 8, 2, 64, 5, -1);  /* grouped-query: 4 query heads per key/value head */
    test_decode(3, 70, 8, 2, 128, 40, -1); /* a prefill long enough for the flash-attention path, D 128, GQA */
    test_decode(2, 50, 3, 3, 80, 49, -1);  /* ... and a head dimension the flash kernel pads (80 -> 128) */
    test_decode(1, 12300, 1, 1, 64, 12290, -1); /* 12300 fp32 scores: beyond the default 48 KB of shared memory */
    /* sliding windows: one token at a time (W 0, 5), a flash prefill with the window inside it
     * (W 16 of 40 tokens, GQA), and a long cache read only near its end */
    test_decode(2, 40, 4, 4, 64, 1, 0);
    test_decode(2, 29, 8, 2, 64, 5, 5);
    test_decode(3, 70, 8, 2, 128, 40, 16);
    test_decode(1, 3000, 1, 1, 64, 2990, 100);
    return tap_done();
}
