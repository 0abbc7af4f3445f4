/* cuda_bert_kernels_test.c: the CUDA kernels BERT adds, through the backend's table
 * (kernels_cuda(): bf16), against the fp32 CPU reference (kernels_cpu()). Built with -DTEST_FP16
 * (cuda_bert_kernels_fp16_test) it tests kernels_cuda_fp16() instead (tests/gpu/cuda_fp16_map.h).
 *  - attention_padded_forward/backward (bidirectional attention with a key-padding mask,
 *    kernels/cuda/cuda_attention.cu's flash kernels with the mask): out and dq, dk, dv within
 *    ACT_TOL (bf16 1e-2, fp16 2e-3: the causal attention's tolerances in cuda_attention_test) of
 *    the CPU's, with and without dropout (the same Philox mask), multi-head, grouped-query and a
 *    tensor-parallel slice of heads, T on and off the tiles, D padded and unvectorized. Each
 *    micro-batch mixes the four kinds of sequence: all keys visible, padding at the end (BERT's),
 *    padding scattered, and no visible key at all; the last gives out 0 and dqkv 0 exactly, and a
 *    padding key's dk and dv are exactly 0. Changing a padding key's k and v leaves out bitwise
 *    unchanged; a rerun gives the same bits; the qkv bias gradient is dqkv's column sums.
 *  - gelu_erf (the exact GeLU) and tanh, forward and backward (in place, as the heads call it).
 * Inputs are rounded to the 16-bit dtype first, so the CPU sees what the GPU sees; GPU outputs are
 * poisoned with NaN before every run. Exits 77 (SKIP) where there is no CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/cuda_test_util.h"
#include "tests/gpu/attention_test_util.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

/* sequence b's kind of padding: 0 every key visible, 1 the last ~40% padding (BERT's), 2 every
 * third key padding, 3 no visible key */
static int key_is_valid(int b, int t, int T) {
    switch (b % 4) {
    case 0: return 1;
    case 1: return t < (T * 3 + 4) / 5;
    case 2: return t % 3 != 1;
    default: return 0;
    }
}

static void test_padded_attention(int B, int T, int H, int G, int D, int head_start, int total_heads, float p) {
    const kernel_ops *cpu = kernels_cpu(), *gpu = kernels_cuda();
    const size_t rows = (size_t)B * T, n_qkv = rows * (H + 2 * G) * D, n_out = rows * H * D;
    const int columns = (H + 2 * G) * D;
    const uint64_t seed = 5000u + 7u * B + 13u * T + 17u * H + 19u * D + 23u * G + (p > 0.0f ? 1u : 0u);
    dropout_rng rng = {p, 4321u, 0xbe570000u + (uint64_t)T, 99u};
    char shape[160];
    snprintf(shape, sizeof shape, "padded attention B=%d T=%d H=%d G=%d D=%d heads %d+%d/%d p=%.2f", B, T, H, G, D,
             head_start, H, total_heads, (double)p);

    int *valid = host_alloc(rows * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) valid[(size_t)b * T + t] = key_is_valid(b, t, T);
    float *qkv = host_alloc(n_qkv * sizeof(float)), *dout = host_alloc(n_out * sizeof(float));
    fill_random(qkv, n_qkv, seed, 2.0f); /* scores of spread ~1.3: far from a uniform softmax */
    round_to_bf16(qkv, n_qkv);
    fill_random(dout, n_out, seed + 1, 1.0f);
    round_to_bf16(dout, n_out);

    /* CPU reference */
    float *out_ref = host_alloc(n_out * sizeof(float)), *dqkv_ref = host_alloc(n_qkv * sizeof(float));
    void *ws_ref = host_alloc(cpu->attention_workspace_bytes(B, T, H, D));
    cpu->attention_padded_forward(out_ref, ws_ref, qkv, valid, B, T, H, G, D, head_start, total_heads, rng);
    cpu->attention_padded_backward(dqkv_ref, NULL, dout, qkv, out_ref, valid, ws_ref, B, T, H, G, D, head_start,
                                   total_heads, rng);

    /* GPU forward */
    bf16 *d_qkv = upload_bf16(qkv, n_qkv), *d_dout = upload_bf16(dout, n_out);
    int *d_valid = upload_int(valid, rows);
    bf16 *d_out = device_alloc(n_out * sizeof(bf16)), *d_dqkv = device_alloc(n_qkv * sizeof(bf16));
    const size_t ws_bytes = gpu->attention_workspace_bytes(B, T, H, D);
    void *d_ws = device_alloc(ws_bytes);
    poison(d_out, n_out * sizeof(bf16));
    poison(d_ws, ws_bytes);
    device_sync();
    gpu->attention_padded_forward(d_out, d_ws, d_qkv, d_valid, B, T, H, G, D, head_start, total_heads, rng);
    float *out = download_bf16(d_out, n_out);
    double err = relative_error(out, out_ref, n_out);
    tap_diag("%s: out relative error %.3e", shape, err);
    tap_ok(err < ACT_TOL, "%s: forward", shape);
    int empty_zero = 1; /* sequences with no visible key: out exactly 0 */
    for (int b = 3; b < B; b += 4)
        for (size_t i = (size_t)b * T * H * D; i < (size_t)(b + 1) * T * H * D; i++)
            if (out[i] != 0.0f) empty_zero = 0;
    if (B > 3) tap_ok(empty_zero, "%s: a sequence without a visible key gets out 0", shape);

    bf16 *raw1 = host_alloc(n_qkv * sizeof(bf16)), *raw2 = host_alloc(n_qkv * sizeof(bf16));
    download_raw(raw1, d_out, n_out * sizeof(bf16));
    /* a padding key's k and v moved far: out keeps its bits (and a rerun gives them) */
    float *qkv_moved = host_alloc(n_qkv * sizeof(float));
    memcpy(qkv_moved, qkv, n_qkv * sizeof(float));
    for (size_t r = 0; r < rows; r++)
        if (!valid[r])
            for (int g = 0; g < G; g++)
                for (int j = 0; j < 2 * D; j++) qkv_moved[r * columns + qkv_key_offset(g, H, G, D) + j] += 3.0f;
    round_to_bf16(qkv_moved, n_qkv);
    bf16 *d_qkv_moved = upload_bf16(qkv_moved, n_qkv);
    void *d_ws2 = device_alloc(ws_bytes);
    poison(d_out, n_out * sizeof(bf16));
    device_sync();
    gpu->attention_padded_forward(d_out, d_ws2, d_qkv_moved, d_valid, B, T, H, G, D, head_start, total_heads, rng);
    download_raw(raw2, d_out, n_out * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_out * sizeof(bf16)) == 0, "%s: padding keys' k and v changed, out bitwise unchanged",
           shape);
    poison(d_out, n_out * sizeof(bf16));
    device_sync();
    gpu->attention_padded_forward(d_out, d_ws, d_qkv, d_valid, B, T, H, G, D, head_start, total_heads, rng);
    download_raw(raw2, d_out, n_out * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_out * sizeof(bf16)) == 0, "%s: forward rerun bitwise identical", shape);

    /* GPU backward, part by part, the qkv bias gradient added into a start of 0.5 */
    float *bias_start = host_alloc((size_t)columns * sizeof(float));
    for (int j = 0; j < columns; j++) bias_start[j] = 0.5f;
    float *d_dbias = upload_float(bias_start, (size_t)columns);
    poison(d_dqkv, n_qkv * sizeof(bf16));
    device_sync();
    gpu->attention_padded_backward(d_dqkv, d_dbias, d_dout, d_qkv, d_out, d_valid, d_ws, B, T, H, G, D, head_start,
                                   total_heads, rng);
    float *dqkv = download_bf16(d_dqkv, n_qkv);
    float *got = host_alloc(n_qkv * sizeof(float)), *want = host_alloc(n_qkv * sizeof(float));
    const char *part_name[3] = {"dq", "dk", "dv"};
    for (int part = 0; part < 3; part++) {
        size_t n_part = gather_part(got, dqkv, rows, H, G, D, part);
        gather_part(want, dqkv_ref, rows, H, G, D, part);
        err = relative_error(got, want, n_part);
        tap_diag("%s: %s relative error %.3e", shape, part_name[part], err);
        tap_ok(err < ACT_TOL, "%s: backward %s", shape, part_name[part]);
    }
    int exact_zeros = 1; /* padding keys' dk, dv and a keyless sequence's dq: exactly 0 */
    for (size_t r = 0; r < rows; r++) {
        int b = (int)(r / (size_t)T);
        for (int j = 0; j < columns; j++) {
            int in_query = (j / D) % (H / G + 2) < H / G;
            if ((!valid[r] && !in_query) || (b % 4 == 3 && in_query))
                if (dqkv[r * columns + j] != 0.0f) exact_zeros = 0;
        }
    }
    tap_ok(exact_zeros, "%s: padding keys' dk and dv%s exactly 0", shape,
           B > 3 ? ", and the dq of a sequence without a visible key," : "");
    /* the bias gradient: the column sums of the GPU's own dqkv (in double) */
    float *dbias = download_float(d_dbias, (size_t)columns);
    double worst = 0.0;
    for (int j = 0; j < columns; j++) {
        double sum = bias_start[j], mass = 1e-30;
        for (size_t r = 0; r < rows; r++) {
            sum += dqkv[r * columns + j];
            mass += fabs(dqkv[r * columns + j]);
        }
        /* a column of (near) zeros (T = 1: one key per query, so dq = dk = 0 up to rounding) is
         * held to 4e-6 absolute: its mass is no scale */
        double e = isfinite(dbias[j]) ? fabs(dbias[j] - sum) / fmax(mass, 1e-3) : INFINITY;
        if (e > worst) worst = e;
    }
    tap_diag("%s: bias gradient error %.3e of the column's mass", shape, worst);
    tap_ok(worst < 4e-3, "%s: qkv bias gradient (dqkv's column sums)", shape);

    download_raw(raw1, d_dqkv, n_qkv * sizeof(bf16));
    poison(d_dqkv, n_qkv * sizeof(bf16));
    device_sync();
    gpu->attention_padded_backward(d_dqkv, NULL, d_dout, d_qkv, d_out, d_valid, d_ws, B, T, H, G, D, head_start,
                                   total_heads, rng);
    download_raw(raw2, d_dqkv, n_qkv * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_qkv * sizeof(bf16)) == 0, "%s: backward rerun bitwise identical", shape);

    TEST_CUDA(cudaFree(d_qkv));
    TEST_CUDA(cudaFree(d_qkv_moved));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_valid));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dqkv));
    TEST_CUDA(cudaFree(d_ws));
    TEST_CUDA(cudaFree(d_ws2));
    TEST_CUDA(cudaFree(d_dbias));
    free(valid); free(qkv); free(dout); free(out_ref); free(dqkv_ref); free(ws_ref); free(out); free(raw1);
    free(raw2); free(qkv_moved); free(bias_start); free(dqkv); free(got); free(want); free(dbias);
}

/* gelu_erf and tanh, forward and backward (dx over dout, as bert_heads.c calls them) */
static void test_heads_elementwise(size_t n) {
    const kernel_ops *cpu = kernels_cpu(), *gpu = kernels_cuda();
    float *x = host_alloc(n * sizeof(float)), *dout = host_alloc(n * sizeof(float));
    fill_random(x, n, 606u + n, 4.0f);
    round_to_bf16(x, n);
    fill_random(dout, n, 707u + n, 1.0f);
    round_to_bf16(dout, n);
    float *want = host_alloc(n * sizeof(float)), *want_dx = host_alloc(n * sizeof(float));
    bf16 *d_x = upload_bf16(x, n), *d_out = device_alloc(n * sizeof(bf16));

    for (int f = 0; f < 2; f++) { /* 0: gelu_erf, 1: tanh */
        const char *name = f == 0 ? "gelu_erf" : "tanh";
        poison(d_out, n * sizeof(bf16));
        device_sync();
        if (f == 0) gpu->gelu_erf_forward(d_out, d_x, n), cpu->gelu_erf_forward(want, x, n);
        else gpu->tanh_forward(d_out, d_x, n), cpu->tanh_forward(want, x, n);
        float *y = download_bf16(d_out, n);
        double err = relative_error(y, want, n);
        tap_diag("%s n=%zu: forward relative error %.3e", name, n, err);
        tap_ok(err < ACT_TOL, "%s n=%zu: forward", name, n);
        /* backward in place over dout; tanh's from the GPU's own output (the CPU's from the same
         * rounded values) */
        bf16 *d_dx = upload_bf16(dout, n);
        if (f == 0) {
            gpu->gelu_erf_backward(d_dx, d_x, d_dx, n);
            memcpy(want_dx, dout, n * sizeof(float));
            cpu->gelu_erf_backward(want_dx, x, want_dx, n);
        } else {
            gpu->tanh_backward(d_dx, d_out, d_dx, n);
            memcpy(want_dx, dout, n * sizeof(float));
            cpu->tanh_backward(want_dx, y, want_dx, n);
        }
        float *dx = download_bf16(d_dx, n);
        err = relative_error(dx, want_dx, n);
        tap_diag("%s n=%zu: backward relative error %.3e", name, n, err);
        tap_ok(err < ACT_TOL, "%s n=%zu: backward (dx over dout)", name, n);
        TEST_CUDA(cudaFree(d_dx));
        free(y); free(dx);
    }
    TEST_CUDA(cudaFree(d_x));
    TEST_CUDA(cudaFree(d_out));
    free(x); free(dout); free(want); free(want_dx);
}

int main(void) {
    skip_without_gpu();
    tap_diag("testing the %s kernels", TEST_DTYPE_NAME);
    const kernel_ops *gpu = kernels_cuda();
    int has_ops = gpu->attention_padded_forward && gpu->attention_padded_backward && gpu->gelu_erf_forward &&
                  gpu->gelu_erf_backward && gpu->tanh_forward && gpu->tanh_backward;
    tap_ok(has_ops, "the CUDA table has BERT's ops (padded attention, gelu_erf, tanh)");
    if (!has_ops) return tap_done();

    /* T below, at and across the 64- and 128-row tiles; D 20 the unvectorized path, 40, 80, 96
     * the zero padding to 64 or 128; 512 x 64 BERT-base's and -large's head shape */
    static const int shapes[][4] = {
        {4, 1, 2, 32}, {4, 7, 3, 64}, {4, 100, 2, 80}, {4, 50, 2, 20}, {4, 257, 4, 64},
        {4, 130, 2, 96}, {8, 333, 3, 40}, {4, 512, 4, 64}, {4, 300, 2, 128},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        test_padded_attention(s[0], s[1], s[2], s[2], s[3], 0, s[2], 0.0f);
        test_padded_attention(s[0], s[1], s[2], s[2], s[3], 0, s[2], 0.1f);
    }
    /* local heads 2..5 of 8 (tensor parallelism): the dropout mask follows the global head */
    test_padded_attention(4, 257, 4, 4, 64, 2, 8, 0.1f);
    /* grouped-query attention: dk, dv summed over a group's heads */
    test_padded_attention(4, 300, 8, 2, 64, 0, 8, 0.0f);
    test_padded_attention(4, 257, 4, 2, 64, 4, 16, 0.1f);
    test_padded_attention(4, 130, 3, 1, 128, 0, 3, 0.1f);

    test_heads_elementwise(1000);
    test_heads_elementwise(4099);

    tap_diag("%d passed, %d failed", tap_count - tap_failed, tap_failed);
    return tap_done();
}
