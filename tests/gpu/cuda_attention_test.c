/* cuda_attention_test.c: the bf16 CUDA flash attention (forward, backward; multi-head and
 * grouped-query) and vocab-parallel
 * cross entropy (three passes) against the fp32 CPU reference (kernels_cpu()). Built with
 * -DTEST_FP16 (cuda_attention_fp16_test) it tests the fp16 instantiations instead
 * (tests/gpu/cuda_fp16_map.h: fp16 rounding, 16-bit outputs within 2e-3; the wgmma self-test,
 * bf16 only, is left out).
 *
 * Inputs are rounded to bf16 first, so the CPU sees exactly what the GPU sees; GPU outputs are
 * poisoned with NaN before every run, so an element a kernel forgets to write fails the
 * comparison. bf16 outputs must agree to a relative error (max|got - want| / max|want|) under
 * 1e-2; fp32 statistics computed from identical inputs must agree to 1e-5 (row max and target
 * logit exactly). The attention backward must be bitwise reproducible: the mma.sync one has no
 * atomics; the Hopper one sums dQ's partials of the key tiles in an order its semaphores fix,
 * which test_backward_reruns checks at shapes where a free order would show (with and without
 * dropout). Attention dropout runs on both paths (the Hopper wgmma kernels draw it inside their
 * passes since issue 44): besides the outputs and gradients against the CPU, test_dropout_mask
 * reads the keep decisions of the forward and of the backward back out of the outputs and dV
 * and compares them with the CPU's, element for element (philox_keep_attention: a Philox4x32-7
 * call per 2 x 4 block of (query, key), 16 bits per element, whose four GPU lanes each draw a
 * quarter of a tile's calls; tests/unit/philox_attention_test decodes the rule from the raw words).
 * Sliding-window attention (window_left >= 0, --window-size) runs the same comparisons
 * (test_attention_window) with the CPU's window, and also checks the forward's per-row
 * log-sum-exp (the workspace's fp32 [B,H,T]) against one computed in double over the window; at
 * window 0 dq and dk are 0 up to rounding (each query sees itself alone), checked as at most
 * ACT_TOL of dv's scale. The Hopper one-pass backward at D 64 runs both its step sizes
 * (MTC_SM90_BWD_STEP=128 and 64) on a set of its own (GQA, dropout, windows, bias, reruns).
 * Its GQA head chunks (the default where H / G > 1: every grouped shape above runs them) are also
 * compared with whole-group tiles (MTC_SM90_BWD_HEAD_SPLIT=0) on the same inputs
 * (test_head_chunks: dq bitwise, dk and dv within fp32 reassociation).
 * Exits 77 (SKIP) where there is no CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/cuda_test_util.h"
#include "tests/gpu/attention_test_util.h"
#include "kernels/kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"

/* The qkv bias gradient (dbias += column sums of dqkv) against the sums of the GPU's own bf16 dqkv
 * in double. Hopper's one pass sums its fp32 values before their rounding to bf16, so a column may
 * differ by at most 2^-8 of its mass (the sum of |values|; each rounding to bf16 moves a value by
 * at most 2^-8 of itself; 1.9e-3 was the largest seen on an H100): the bound is 4e-3. A 16-row
 * block missed or counted twice moves a column by far more at these shapes (at most 128 blocks
 * per sequence). With noise_columns (sliding window 0: dq and dk are 0 up to rounding, so their
 * columns hold rounding noise) each column's error is measured against the largest column's mass
 * (dv's), as the dq and dk checks measure theirs against dv's scale. */
static void check_bias_gradient(const char *shape, const float *d_dbias, const float *start, const float *dqkv,
                                size_t rows, int columns, int noise_columns) {
    float *got = host_alloc((size_t)columns * sizeof(float));
    double *sum = host_alloc((size_t)columns * sizeof(double)), *mass = host_alloc((size_t)columns * sizeof(double));
    download_raw(got, d_dbias, (size_t)columns * sizeof(float));
    double worst = 0.0, largest = 0.0;
    int finite = 1;
    for (int j = 0; j < columns; j++) {
        sum[j] = start[j], mass[j] = 0.0;
        for (size_t r = 0; r < rows; r++) {
            sum[j] += dqkv[r * (size_t)columns + (size_t)j];
            mass[j] += fabs(dqkv[r * (size_t)columns + (size_t)j]);
        }
        largest = fmax(largest, mass[j]);
    }
    for (int j = 0; j < columns; j++) {
        if (!isfinite(got[j])) finite = 0;
        worst = fmax(worst, fabs((double)got[j] - sum[j]) / ((noise_columns ? largest : mass[j]) + 1e-30));
    }
    free(sum);
    free(mass);
    tap_diag("attention backward %s: bias gradient error %.3e of the column's mass", shape, worst);
    tap_ok(finite && worst < 4e-3, "attention backward %s: qkv bias gradient", shape);
    free(got);
}

/* which forward the shapes run: "" the default (Hopper's wgmma forward where it applies), or
 * "mma.sync " with MTC_ATTENTION_SM90=0 */
static const char *path_label = "";

/* the forward's lse (GPU workspace, fp32 [B,H,T]) against log sum exp(q.k / sqrt(D)) over each
 * query's keys (t - window_left .. t; window_left -1: 0 .. t) in double, from the same bf16-rounded
 * qkv. Both sides sum the same scores (fp32 tensor-core products on the GPU), so they agree to
 * rounding: an absolute error of 1e-4 (scores here are of order 1, lse of order log T) leaves a
 * wrong window, which moves lse by far more, no room. */
static void check_lse(const char *shape, const void *d_ws, const float *qkv, int B, int T, int H, int G, int D,
                      int window_left) {
    const size_t C3 = (size_t)(H + 2 * G) * D;
    float *lse = host_alloc((size_t)B * H * T * sizeof(float));
    download_raw(lse, d_ws, (size_t)B * H * T * sizeof(float));
    double worst = 0.0;
    int finite = 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + qkv_query_offset(h, H, G, D);
                const int first = window_left >= 0 && t > window_left ? t - window_left : 0;
                double m = -INFINITY, sum = 0.0;
                double *score = (double *)malloc(sizeof(double) * (size_t)(t - first + 1));
                for (int j = first; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * C3 + qkv_key_offset(h / (H / G), H, G, D);
                    double dot = 0.0;
                    for (int d = 0; d < D; d++) dot += (double)q[d] * k[d];
                    score[j - first] = dot / sqrt((double)D);
                    if (score[j - first] > m) m = score[j - first];
                }
                for (int j = first; j <= t; j++) sum += exp(score[j - first] - m);
                free(score);
                const float got = lse[((size_t)b * H + h) * T + t];
                if (!isfinite(got)) finite = 0;
                worst = fmax(worst, fabs((double)got - (m + log(sum))));
            }
    tap_diag("attention forward %s: lse absolute error %.3e", shape, worst);
    tap_ok(finite && worst < 1e-4, "attention forward %s: lse", shape);
    free(lse);
}

/* H query heads in G groups (G == H: multi-head attention); window_left >= 0: a sliding window
 * (the CPU reference takes the same), whose shapes also check lse */
static void test_attention_window(int B, int T, int H, int G, int D, int head_start, int total_heads, float p,
                                  int window_left) {
    const kernel_ops *cpu = kernels_cpu();
    const size_t n_qkv = (size_t)B * T * (H + 2 * G) * D, n_out = (size_t)B * T * H * D;
    const uint64_t seed = 1000u + 7u * B + 13u * T + 17u * H + 19u * D + 23u * G + (p > 0.0f ? 1u : 0u);
    dropout_rng rng = {p, 1234u, 0x5eed0000u + (uint64_t)T, 777u};
    char shape[192];
    char window[32] = "";
    if (window_left >= 0) snprintf(window, sizeof window, " window %d", window_left);
    snprintf(shape, sizeof shape, "%sB=%d T=%d H=%d G=%d D=%d heads %d+%d/%d p=%.2f%s", path_label, B, T, H, G, D,
             head_start, H, total_heads, (double)p, window);

    /* inputs, rounded to bf16 (scores of spread ~1.3 so the softmax is far from uniform) */
    float *qkv = host_alloc(n_qkv * sizeof(float)), *dout = host_alloc(n_out * sizeof(float));
    fill_random(qkv, n_qkv, seed, 2.0f);
    round_to_bf16(qkv, n_qkv);
    fill_random(dout, n_out, seed + 1, 1.0f);
    round_to_bf16(dout, n_out);

    /* CPU reference */
    float *out_ref = host_alloc(n_out * sizeof(float)), *dqkv_ref = host_alloc(n_qkv * sizeof(float));
    void *ws_ref = host_alloc(cpu->attention_workspace_bytes(B, T, H, D));
    cpu->attention_forward(out_ref, ws_ref, qkv, B, T, H, G, D, head_start, total_heads, window_left, rng);
    cpu->attention_backward(dqkv_ref, NULL, dout, qkv, out_ref, ws_ref, B, T, H, G, D, head_start, total_heads,
                            window_left, rng);

    /* GPU forward */
    bf16 *d_qkv = upload_bf16(qkv, n_qkv), *d_dout = upload_bf16(dout, n_out);
    bf16 *d_out = device_alloc(n_out * sizeof(bf16)), *d_dqkv = device_alloc(n_qkv * sizeof(bf16));
    const size_t ws_bytes = cuda_attention_workspace_bytes(B, T, H, D);
    void *d_ws = device_alloc(ws_bytes);
    poison(d_out, n_out * sizeof(bf16));
    poison(d_ws, ws_bytes);
    device_sync();
    cuda_attention_forward(d_out, d_ws, d_qkv, B, T, H, G, D, head_start, total_heads, window_left, rng);
    float *out = download_bf16(d_out, n_out);
    double err = relative_error(out, out_ref, n_out);
    tap_diag("attention forward %s: out relative error %.3e", shape, err);
    tap_ok(err < ACT_TOL, "attention forward %s", shape);
    if (window_left >= 0) check_lse(shape, d_ws, qkv, B, T, H, G, D, window_left);

    bf16 *raw1 = host_alloc(n_qkv * sizeof(bf16)), *raw2 = host_alloc(n_qkv * sizeof(bf16));
    download_raw(raw1, d_out, n_out * sizeof(bf16));
    poison(d_out, n_out * sizeof(bf16));
    device_sync();
    cuda_attention_forward(d_out, d_ws, d_qkv, B, T, H, G, D, head_start, total_heads, window_left, rng);
    download_raw(raw2, d_out, n_out * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_out * sizeof(bf16)) == 0,
           "attention forward %s: rerun bitwise identical", shape);

    /* GPU backward, checked part by part (dq and dk are much smaller than dv), with the qkv bias
     * gradient added into a start of 0.5 */
    const int columns = (H + 2 * G) * D;
    float *bias_start = host_alloc((size_t)columns * sizeof(float));
    for (int j = 0; j < columns; j++) bias_start[j] = 0.5f;
    float *d_dbias = upload_float(bias_start, (size_t)columns);
    poison(d_dqkv, n_qkv * sizeof(bf16));
    device_sync();
    cuda_attention_backward(d_dqkv, d_dbias, d_dout, d_qkv, d_out, d_ws, B, T, H, G, D, head_start,
                            total_heads, window_left, rng);
    float *dqkv = download_bf16(d_dqkv, n_qkv);
    check_bias_gradient(shape, d_dbias, bias_start, dqkv, (size_t)B * T, columns, window_left == 0);
    float *got = host_alloc(n_out * sizeof(float)), *want = host_alloc(n_out * sizeof(float));
    const char *part_name[3] = {"dq", "dk", "dv"};
    /* window 0: dq and dk are 0 up to rounding, so their error is measured against dv's scale */
    double dv_scale = 0.0;
    if (window_left == 0) {
        size_t n_dv = gather_part(want, dqkv_ref, (size_t)B * T, H, G, D, 2);
        for (size_t i = 0; i < n_dv; i++) dv_scale = fmax(dv_scale, fabs((double)want[i]));
    }
    for (int part = 0; part < 3; part++) {
        size_t n_part = gather_part(got, dqkv, (size_t)B * T, H, G, D, part);
        gather_part(want, dqkv_ref, (size_t)B * T, H, G, D, part);
        if (window_left == 0 && part < 2) {
            double worst = 0.0;
            for (size_t i = 0; i < n_part; i++)
                worst = isfinite(got[i]) ? fmax(worst, fabs((double)got[i] - (double)want[i])) : INFINITY;
            err = worst / dv_scale;
        } else {
            err = relative_error(got, want, n_part);
        }
        tap_diag("attention backward %s: %s relative error %.3e", shape, part_name[part], err);
        tap_ok(err < ACT_TOL, "attention backward %s: %s", shape, part_name[part]);
    }

    download_raw(raw1, d_dqkv, n_qkv * sizeof(bf16));
    float *bias1 = host_alloc((size_t)columns * sizeof(float)), *bias2 = host_alloc((size_t)columns * sizeof(float));
    download_raw(bias1, d_dbias, (size_t)columns * sizeof(float));
    poison(d_dqkv, n_qkv * sizeof(bf16));
    TEST_CUDA(cudaMemcpy(d_dbias, bias_start, (size_t)columns * sizeof(float), cudaMemcpyHostToDevice));
    device_sync();
    cuda_attention_backward(d_dqkv, d_dbias, d_dout, d_qkv, d_out, d_ws, B, T, H, G, D, head_start,
                            total_heads, window_left, rng);
    download_raw(raw2, d_dqkv, n_qkv * sizeof(bf16));
    download_raw(bias2, d_dbias, (size_t)columns * sizeof(float));
    tap_ok(memcmp(raw1, raw2, n_qkv * sizeof(bf16)) == 0 && memcmp(bias1, bias2, (size_t)columns * sizeof(float)) == 0,
           "attention backward %s: rerun bitwise identical (dqkv and the bias gradient)", shape);
    TEST_CUDA(cudaFree(d_dbias));
    free(bias_start); free(bias1); free(bias2);

    TEST_CUDA(cudaFree(d_qkv));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dqkv));
    TEST_CUDA(cudaFree(d_ws));
    free(qkv); free(dout); free(out_ref); free(dqkv_ref); free(ws_ref);
    free(out); free(dqkv); free(got); free(want); free(raw1); free(raw2);
}

static void test_attention(int B, int T, int H, int G, int D, int head_start, int total_heads, float p) {
    test_attention_window(B, T, H, G, D, head_start, total_heads, p, -1);
}

/* sliding windows (--window-size W,0) at head dimensions 64 and 128: W 0 (the diagonal alone),
 * 1, 37 (inside a key tile), 64 and 128 (tile multiples), 300 (past T: the same as none), T off
 * the tiles, GQA, local heads of a larger total, with and without dropout; T 1024 with W 100 and
 * 200 has whole key tiles outside every window on both sides of each block's walk */
static void test_windows(void) {
    static const int windows[] = {0, 1, 37, 64, 128, 300};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        test_attention_window(1, 257, 2, 2, 64, 0, 2, 0.0f, windows[i]);
        test_attention_window(2, 200, 4, 2, 128, 0, 4, 0.0f, windows[i]);
    }
    test_attention_window(1, 333, 4, 2, 64, 1, 8, 0.1f, 37);
    /* (not window 0 with dropout: dq, dk are then 0 but for O's rounding to 16 bits, which the
     * GPU's Di sees and the fp32 CPU's does not, a few 1e-3 of dv's scale) */
    test_attention_window(1, 333, 2, 2, 128, 0, 2, 0.1f, 1);
    test_attention_window(2, 200, 4, 2, 128, 4, 12, 0.1f, 64);
    test_attention_window(1, 130, 3, 1, 40, 0, 3, 0.1f, 16); /* D padded to 64, multi-query */
    test_attention_window(1, 1024, 8, 2, 128, 0, 8, 0.0f, 200);
    test_attention_window(1, 1024, 8, 2, 64, 0, 8, 0.1f, 100);
}

/* The dropout mask itself, element for element against the CPU's draw (philox_keep_attention
 * at the CPU backend's counters): with q = 0 every visible score is 0, so P[i, j] = 1 / (i + 1)
 * in the forward; key j's value row is 2^(j / D) in column j % D and 0 elsewhere (T <= 5D), so
 *   out[i, c] (1 - p) (i + 1) = sum over kept j <= i with j % D == c of 2^(j / D)
 * an integer of at most 5 bits that bf16 carries exactly enough to round back (every product
 * and sum before the final scaling is exact). The backward is then run on a workspace of lse = 0
 * (P[i, j] = exp(0) = 1 on the visible elements) with dO[i] = 2^(i / D) in column i % D of one
 * query head per group (the others 0, the group's heads in turn), so that
 *   dV[j, c] (1 - p) = sum over kept i >= j with i % D == c of 2^(i / D)
 * gives the backward's keep decisions of that head. Any element whose decision differs from the
 * CPU's changes one bit of one code. */
static void test_dropout_mask(int B, int T, int H, int G, int D, int head_start, int total_heads) {
    const float p = 0.1f;
    const size_t row = (size_t)(H + 2 * G) * D, n_qkv = (size_t)B * T * row, n_out = (size_t)B * T * H * D;
    const int per = H / G;
    dropout_rng rng = {p, 4321u, 0x6a09e667u + (uint64_t)T, 99u};
    char shape[160];
    snprintf(shape, sizeof shape, "%sB=%d T=%d H=%d G=%d D=%d heads %d+%d/%d p=%.2f", path_label, B, T, H, G, D,
             head_start, H, total_heads, (double)p);
    if (T > 5 * D) {
        fprintf(stderr, "test_dropout_mask: T=%d needs more than 5 value columns per key column (D=%d)\n", T, D);
        exit(1);
    }
    /* the CPU's keep decisions, [B, H, T, T] */
    unsigned char *keep = host_alloc((size_t)B * H * T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const uint64_t head_base =
                rng.offset + ((uint64_t)b * total_heads + (uint64_t)(head_start + h)) * (uint64_t)T * (uint64_t)T;
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++)
                    keep[(((size_t)b * H + h) * T + i) * T + j] =
                        (unsigned char)philox_keep_attention(rng.seed, rng.stream, head_base, T, i, j, p);
        }

    float *qkv = host_alloc(n_qkv * sizeof(float));
    fill_random(qkv, n_qkv, 555u + (uint64_t)T, 1.0f); /* the keys: any values */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *r = qkv + ((size_t)b * T + t) * row;
            for (int h = 0; h < H; h++) memset(r + qkv_query_offset(h, H, G, D), 0, (size_t)D * sizeof(float));
            for (int grp = 0; grp < G; grp++) {
                float *v = r + qkv_key_offset(grp, H, G, D) + D;
                memset(v, 0, (size_t)D * sizeof(float));
                v[t % D] = (float)(1 << (t / D));
            }
        }
    round_to_bf16(qkv, n_qkv);
    bf16 *d_qkv = upload_bf16(qkv, n_qkv);
    bf16 *d_out = device_alloc(n_out * sizeof(bf16)), *d_dqkv = device_alloc(n_qkv * sizeof(bf16));
    const size_t ws_bytes = cuda_attention_workspace_bytes(B, T, H, D);
    void *d_ws = device_alloc(ws_bytes);
    poison(d_out, n_out * sizeof(bf16));
    device_sync();
    cuda_attention_forward(d_out, d_ws, d_qkv, B, T, H, G, D, head_start, total_heads, -1, rng);
    float *out = download_bf16(d_out, n_out);
    size_t wrong = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                for (int c = 0; c < D; c++) {
                    long want = 0;
                    for (int j = c; j <= i; j += D)
                        if (keep[(((size_t)b * H + h) * T + i) * T + j]) want += 1L << (j / D);
                    const float got = out[(((size_t)b * T + i) * H + h) * D + c];
                    const double code = (double)got * (1.0 - (double)p) * (double)(i + 1);
                    if (!isfinite(got) || fabs(code - (double)want) > 0.25) wrong++;
                }
    tap_diag("attention dropout mask %s: forward, %zu of %zu outputs off the CPU's mask", shape, wrong, n_out);
    tap_ok(wrong == 0, "attention dropout mask %s: forward keeps what the CPU keeps", shape);

    /* the backward on lse = 0, one query head of each group at a time */
    float *zeros = host_alloc(ws_bytes), *dout = host_alloc(n_out * sizeof(float));
    memset(zeros, 0, ws_bytes);
    size_t wrong_bwd = 0, checked = 0;
    for (int idx = 0; idx < per; idx++) {
        memset(dout, 0, n_out * sizeof(float));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int grp = 0; grp < G; grp++)
                    dout[(((size_t)b * T + t) * H + grp * per + idx) * D + t % D] = (float)(1 << (t / D));
        bf16 *d_dout = upload_bf16(dout, n_out);
        TEST_CUDA(cudaMemcpy(d_ws, zeros, ws_bytes, cudaMemcpyHostToDevice));
        poison(d_dqkv, n_qkv * sizeof(bf16));
        device_sync();
        cuda_attention_backward(d_dqkv, NULL, d_dout, d_qkv, d_out, d_ws, B, T, H, G, D, head_start, total_heads, -1,
                                rng);
        float *dqkv = download_bf16(d_dqkv, n_qkv);
        for (int b = 0; b < B; b++)
            for (int grp = 0; grp < G; grp++) {
                const int h = grp * per + idx;
                for (int j = 0; j < T; j++)
                    for (int c = 0; c < D; c++) {
                        long want = 0;
                        for (int i = j + ((c - j % D) % D + D) % D; i < T; i += D) /* i >= j, i % D == c */
                            if (keep[(((size_t)b * H + h) * T + i) * T + j]) want += 1L << (i / D);
                        const float got = dqkv[((size_t)b * T + j) * row + qkv_key_offset(grp, H, G, D) + D + c];
                        const double code = (double)got * (1.0 - (double)p);
                        if (!isfinite(got) || fabs(code - (double)want) > 0.25) wrong_bwd++;
                        checked++;
                    }
            }
        TEST_CUDA(cudaFree(d_dout));
        free(dqkv);
    }
    tap_diag("attention dropout mask %s: backward, %zu of %zu dV values off the CPU's mask", shape, wrong_bwd,
             checked);
    tap_ok(wrong_bwd == 0, "attention dropout mask %s: backward (dV) keeps what the CPU keeps", shape);

    TEST_CUDA(cudaFree(d_qkv));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dqkv));
    TEST_CUDA(cudaFree(d_ws));
    free(keep); free(qkv); free(out); free(zeros); free(dout);
}

/* The backward run RUNS times on the same inputs must give the same dqkv bits. On Hopper dQ_i is
 * the sum over key tiles of the partials dS K, added into fp32 one tile after another in the
 * order the semaphores fix (descending key tile). In another order the fp32 sums differ in their
 * last bits for most of the B*T*H*D values (each has T/128 partials: 16 here), and such a change
 * reaches the bf16 result when the sum lies near a bf16 rounding boundary, about 2^-16 of the
 * values per fp32 ulp of difference: hundreds of the 8 to 17 million here. So a backward whose adds raced (say an atomicAdd
 * per partial, or a semaphore that let two key tiles add at once) would differ between runs; the
 * shapes have many key tiles per query tile, GQA (4 query heads a group: by default 4 head
 * chunks per 128 keys, run side by side, whose dK/dV partials the one that finishes last sums:
 * summed in finishing order rather than chunk order they would differ between runs too) and
 * more blocks than SMs, so the blocks of one (batch, group) run concurrently with others'. */
static void test_backward_reruns(int B, int T, int H, int G, int D, float p, int window_left) {
    enum { RUNS = 4 };
    const size_t n_qkv = (size_t)B * T * (H + 2 * G) * D, n_out = (size_t)B * T * H * D;
    dropout_rng rng = {p, 1234u, 0x5eed0000u + (uint64_t)T, 777u};
    char shape[160];
    snprintf(shape, sizeof shape, "%sB=%d T=%d H=%d G=%d D=%d p=%.2f window %d", path_label, B, T, H, G, D, (double)p,
             window_left);
    float *qkv = host_alloc(n_qkv * sizeof(float)), *dout = host_alloc(n_out * sizeof(float));
    fill_random(qkv, n_qkv, 4242u + (uint64_t)D, 2.0f);
    fill_random(dout, n_out, 4343u + (uint64_t)D, 1.0f);
    bf16 *d_qkv = upload_bf16(qkv, n_qkv), *d_dout = upload_bf16(dout, n_out);
    bf16 *d_out = device_alloc(n_out * sizeof(bf16)), *d_dqkv = device_alloc(n_qkv * sizeof(bf16));
    void *d_ws = device_alloc(cuda_attention_workspace_bytes(B, T, H, D));
    device_sync();
    cuda_attention_forward(d_out, d_ws, d_qkv, B, T, H, G, D, 0, H, window_left, rng);
    bf16 *first = host_alloc(n_qkv * sizeof(bf16)), *again = host_alloc(n_qkv * sizeof(bf16));
    int same = 1;
    for (int run = 0; run < RUNS; run++) {
        poison(d_dqkv, n_qkv * sizeof(bf16));
        device_sync();
        cuda_attention_backward(d_dqkv, NULL, d_dout, d_qkv, d_out, d_ws, B, T, H, G, D, 0, H, window_left, rng);
        download_raw(run == 0 ? first : again, d_dqkv, n_qkv * sizeof(bf16));
        if (run > 0 && memcmp(first, again, n_qkv * sizeof(bf16)) != 0) same = 0;
    }
    tap_ok(same, "attention backward %s: %d runs bitwise identical", shape, RUNS);
    TEST_CUDA(cudaFree(d_qkv));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dqkv));
    TEST_CUDA(cudaFree(d_ws));
    free(qkv); free(dout); free(first); free(again);
}

#ifndef TEST_FP16
/* GQA's head chunks in the Hopper one-pass backward (a group's query heads split over work
 * tiles, their dK/dV partials summed in a fixed order) against whole-group tiles
 * (MTC_SM90_BWD_HEAD_SPLIT=0) on the same inputs: dq and the bias gradient of its columns are
 * the same tiles' sums in the same order (bitwise equal); dk and dv are sums of the same fp32
 * products in another order, so before their rounding to bf16 they differ by fp32 rounding
 * (~1e-7 of the partials' size): each bf16 element within one unit in the last place of the
 * larger of the two (the two roundings) plus 1e-5 of the part's largest |value| (the fp32
 * difference, generously), and the bias gradient's fp32 column sums of dk and dv within 1e-5 of
 * the column's mass (sum of |dqkv|). A partial lost, counted twice or summed into the wrong unit
 * moves dk or dv by a good fraction of their scale. Where the chunks do not apply (no sm_90a, D
 * not 64 or 128) both runs are the same kernels. */
static int within_bf16_ulp(float a, float b, double slack) {
    if (!isfinite(a) || !isfinite(b)) return 0;
    const double big = fmax(fabs((double)a), fabs((double)b));
    int e;
    frexp(big, &e); /* big = m 2^e, m in [0.5, 1): bf16's 8 significant bits step by 2^(e - 8) */
    return fabs((double)a - (double)b) <= (big > 0.0 ? ldexp(1.0, e - 8) : 0.0) + slack;
}
static float bf16_bits_to_float(uint16_t x) {
    const uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static void test_head_chunks(int B, int T, int H, int G, int D, int head_start, int total_heads, float p,
                             int window_left) {
    const size_t n_qkv = (size_t)B * T * (H + 2 * G) * D, n_out = (size_t)B * T * H * D;
    const int columns = (H + 2 * G) * D;
    dropout_rng rng = {p, 1234u, 0x5eed0000u + (uint64_t)T, 777u};
    char shape[192];
    snprintf(shape, sizeof shape, "%sB=%d T=%d H=%d G=%d D=%d heads %d+%d/%d p=%.2f window %d", path_label, B, T, H,
             G, D, head_start, H, total_heads, (double)p, window_left);
    float *qkv = host_alloc(n_qkv * sizeof(float)), *dout = host_alloc(n_out * sizeof(float));
    fill_random(qkv, n_qkv, 5151u + (uint64_t)T + (uint64_t)D, 2.0f);
    fill_random(dout, n_out, 5252u + (uint64_t)T + (uint64_t)D, 1.0f);
    bf16 *d_qkv = upload_bf16(qkv, n_qkv), *d_dout = upload_bf16(dout, n_out);
    bf16 *d_out = device_alloc(n_out * sizeof(bf16)), *d_dqkv = device_alloc(n_qkv * sizeof(bf16));
    void *d_ws = device_alloc(cuda_attention_workspace_bytes(B, T, H, D));
    float *zeros = host_alloc((size_t)columns * sizeof(float));
    memset(zeros, 0, (size_t)columns * sizeof(float));
    float *d_dbias = upload_float(zeros, (size_t)columns);
    device_sync();
    cuda_attention_forward(d_out, d_ws, d_qkv, B, T, H, G, D, head_start, total_heads, window_left, rng);
    bf16 *raw[2];
    float *bias[2];
    for (int run = 0; run < 2; run++) { /* 0: head chunks (the default, set against the environment), 1: whole groups */
        setenv("MTC_SM90_BWD_HEAD_SPLIT", run == 1 ? "0" : "1", 1);
        poison(d_dqkv, n_qkv * sizeof(bf16));
        TEST_CUDA(cudaMemcpy(d_dbias, zeros, (size_t)columns * sizeof(float), cudaMemcpyHostToDevice));
        device_sync();
        cuda_attention_backward(d_dqkv, d_dbias, d_dout, d_qkv, d_out, d_ws, B, T, H, G, D, head_start, total_heads,
                                window_left, rng);
        raw[run] = host_alloc(n_qkv * sizeof(bf16));
        bias[run] = host_alloc((size_t)columns * sizeof(float));
        download_raw(raw[run], d_dqkv, n_qkv * sizeof(bf16));
        download_raw(bias[run], d_dbias, (size_t)columns * sizeof(float));
    }
    unsetenv("MTC_SM90_BWD_HEAD_SPLIT");
    /* per group: per query heads (dq), then its key head and value head */
    const int per = H / G;
    const size_t qcols = (size_t)per * D, gcols = (size_t)(per + 2) * D;
    const uint16_t *chunked = (const uint16_t *)raw[0], *whole = (const uint16_t *)raw[1];
    double scale[2] = {0.0, 0.0}; /* the largest |dk| and |dv| of the whole-group run */
    for (size_t i = 0; i < n_qkv; i++) {
        const size_t c = (i % (size_t)columns) % gcols;
        if (c >= qcols) {
            const size_t part = (c - qcols) / (size_t)D; /* 0: dk, 1: dv */
            scale[part] = fmax(scale[part], fabs((double)bf16_bits_to_float(whole[i])));
        }
    }
    size_t dq_diff = 0, kv_off = 0, kv_diff = 0;
    for (size_t i = 0; i < n_qkv; i++) {
        const size_t c = (i % (size_t)columns) % gcols;
        const float fa = bf16_bits_to_float(chunked[i]), fb = bf16_bits_to_float(whole[i]);
        if (c < qcols) {
            dq_diff += chunked[i] != whole[i] || !isfinite(fa);
        } else {
            kv_diff += chunked[i] != whole[i];
            kv_off += !within_bf16_ulp(fa, fb, 1e-5 * scale[(c - qcols) / (size_t)D]);
        }
    }
    /* the bias gradient, column by column against the column's mass in the whole-group dqkv */
    double worst = 0.0;
    size_t bias_dq_diff = 0;
    for (int j = 0; j < columns; j++) {
        if ((size_t)j % gcols < qcols) {
            bias_dq_diff += memcmp(&bias[0][j], &bias[1][j], sizeof(float)) != 0;
            continue;
        }
        double mass = 0.0;
        for (size_t r = 0; r < (size_t)B * T; r++)
            mass += fabs((double)bf16_bits_to_float(whole[r * (size_t)columns + (size_t)j]));
        const double diff = fabs((double)bias[0][j] - (double)bias[1][j]);
        worst = isfinite(bias[0][j]) ? fmax(worst, mass > 0.0 ? diff / mass : diff) : INFINITY;
    }
    tap_diag("attention backward head chunks %s: dq %zu differing; dk, dv %zu differing, %zu by more than one "
             "bf16 ulp + 1e-5 of scale; bias: dq columns %zu differing, dk/dv columns %.3e of their mass",
             shape, dq_diff, kv_diff, kv_off, bias_dq_diff, worst);
    tap_ok(dq_diff == 0 && kv_off == 0 && bias_dq_diff == 0 && worst < 1e-5,
           "attention backward head chunks %s: as whole groups (dq bitwise, dk dv within fp32 reassociation)", shape);
    TEST_CUDA(cudaFree(d_qkv));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dqkv));
    TEST_CUDA(cudaFree(d_ws));
    TEST_CUDA(cudaFree(d_dbias));
    free(qkv); free(dout); free(zeros);
    for (int run = 0; run < 2; run++) free(raw[run]), free(bias[run]);
}
#endif

static void test_cross_entropy(int N, int V, int vocab_start) {
    const kernel_ops *cpu = kernels_cpu();
    const size_t n = (size_t)N * V;
    const float grad_scale = 1.0f / (float)N;
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d V=%d vocab_start=%d", N, V, vocab_start);

    float *logits = host_alloc(n * sizeof(float));
    fill_random(logits, n, 77u + (uint64_t)N * 31u + (uint64_t)V, 4.0f);
    round_to_bf16(logits, n);
    /* targets over a global vocabulary of vocab_start + V + vocab_start ids: with vocab_start > 0
     * some lie before and some after this rank's columns; one is negative (never local) */
    int *targets = host_alloc((size_t)N * sizeof(int));
    uint64_t s = 12345u + (uint64_t)V;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        targets[i] = (int)((s >> 33) % (uint64_t)(V + 2 * vocab_start));
    }
    if (N >= 7) targets[N - 1] = -100;

    /* CPU reference */
    float *row_max_ref = host_alloc(N * sizeof(float)), *sum_exp_ref = host_alloc(N * sizeof(float));
    float *target_ref = host_alloc(N * sizeof(float)), *losses_ref = host_alloc(N * sizeof(float));
    float *grad_ref = host_alloc(n * sizeof(float));
    memcpy(grad_ref, logits, n * sizeof(float));
    cpu->cross_entropy_max(row_max_ref, grad_ref, N, V);
    cpu->cross_entropy_sum_exp(sum_exp_ref, target_ref, grad_ref, row_max_ref, targets, N, V,
                               vocab_start);
    cpu->cross_entropy_loss_grad(losses_ref, grad_ref, row_max_ref, sum_exp_ref, target_ref,
                                 targets, N, V, vocab_start, grad_scale);

    /* GPU, each pass fed by the previous GPU pass */
    bf16 *d_logits = upload_bf16(logits, n);
    int *d_targets = upload_int(targets, N);
    float *d_row_max = device_alloc(N * sizeof(float)), *d_sum_exp = device_alloc(N * sizeof(float));
    float *d_target = device_alloc(N * sizeof(float)), *d_losses = device_alloc(N * sizeof(float));
    poison(d_row_max, N * sizeof(float));
    poison(d_sum_exp, N * sizeof(float));
    poison(d_target, N * sizeof(float));
    poison(d_losses, N * sizeof(float));
    device_sync();

    cuda_cross_entropy_max(d_row_max, d_logits, N, V);
    float *row_max = download_float(d_row_max, N);
    double err = relative_error(row_max, row_max_ref, N);
    tap_diag("cross entropy %s: row_max relative error %.3e", shape, err);
    tap_ok(err == 0.0, "cross entropy max %s: exact", shape);

    cuda_cross_entropy_sum_exp(d_sum_exp, d_target, d_logits, d_row_max, d_targets, N, V,
                               vocab_start);
    float *sum_exp = download_float(d_sum_exp, N), *target = download_float(d_target, N);
    err = relative_error(sum_exp, sum_exp_ref, N);
    tap_diag("cross entropy %s: sum_exp relative error %.3e", shape, err);
    tap_ok(err < 1e-5, "cross entropy sum_exp %s", shape);
    err = relative_error(target, target_ref, N);
    tap_ok(err == 0.0, "cross entropy target_logit %s: exact", shape);

    cuda_cross_entropy_loss_grad(d_losses, d_logits, d_row_max, d_sum_exp, d_target, d_targets,
                                 N, V, vocab_start, grad_scale);
    float *losses = download_float(d_losses, N), *grad = download_bf16(d_logits, n);
    err = relative_error(losses, losses_ref, N);
    tap_diag("cross entropy %s: losses relative error %.3e", shape, err);
    tap_ok(err < 1e-5, "cross entropy losses %s", shape);
    err = relative_error(grad, grad_ref, n);
    tap_diag("cross entropy %s: grad relative error %.3e", shape, err);
    tap_ok(err < ACT_TOL, "cross entropy grad %s", shape);

    if (vocab_start == 0) { /* the fused pass (rows staged in shared memory): the three passes' bits */
        bf16 *d_fused = upload_bf16(logits, n);
        float *d_f_max = device_alloc(N * sizeof(float)), *d_f_sum = device_alloc(N * sizeof(float));
        float *d_f_target = device_alloc(N * sizeof(float)), *d_f_losses = device_alloc(N * sizeof(float));
        poison(d_f_max, N * sizeof(float));
        poison(d_f_sum, N * sizeof(float));
        poison(d_f_target, N * sizeof(float));
        poison(d_f_losses, N * sizeof(float));
        cuda_cross_entropy_fused(d_f_losses, d_fused, d_f_max, d_f_sum, d_f_target, d_targets, N, V, grad_scale);
        float *f_max = download_float(d_f_max, N), *f_sum = download_float(d_f_sum, N);
        float *f_target = download_float(d_f_target, N), *f_losses = download_float(d_f_losses, N);
        float *f_grad = download_bf16(d_fused, n);
        int same = !memcmp(f_max, row_max, N * sizeof(float)) && !memcmp(f_sum, sum_exp, N * sizeof(float)) &&
                   !memcmp(f_target, target, N * sizeof(float)) && !memcmp(f_losses, losses, N * sizeof(float)) &&
                   !memcmp(f_grad, grad, n * sizeof(float));
        tap_ok(same, "cross entropy fused %s: the three passes' losses, gradient and statistics, bit for bit", shape);
        TEST_CUDA(cudaFree(d_fused));
        TEST_CUDA(cudaFree(d_f_max));
        TEST_CUDA(cudaFree(d_f_sum));
        TEST_CUDA(cudaFree(d_f_target));
        TEST_CUDA(cudaFree(d_f_losses));
        free(f_max); free(f_sum); free(f_target); free(f_losses); free(f_grad);
    }

    TEST_CUDA(cudaFree(d_logits));
    TEST_CUDA(cudaFree(d_targets));
    TEST_CUDA(cudaFree(d_row_max));
    TEST_CUDA(cudaFree(d_sum_exp));
    TEST_CUDA(cudaFree(d_target));
    TEST_CUDA(cudaFree(d_losses));
    free(logits); free(targets); free(row_max_ref); free(sum_exp_ref); free(target_ref);
    free(losses_ref); free(grad_ref); free(row_max); free(sum_exp); free(target); free(losses);
    free(grad);
}

#ifndef TEST_FP16
/* the Hopper forward's two products alone (cuda_attention_sm90.cu's self-test): a wrong shared
 * memory layout or descriptor shows here as "scores" or "P V" before it breaks attention */
static void test_sm90_products(int D) {
    float *q = host_alloc(128 * (size_t)D * sizeof(float)), *k = host_alloc(128 * (size_t)D * sizeof(float));
    float *v = host_alloc(128 * (size_t)D * sizeof(float));
    fill_random(q, 128 * (size_t)D, 31u + (uint64_t)D, 1.0f);
    fill_random(k, 128 * (size_t)D, 37u + (uint64_t)D, 1.0f);
    fill_random(v, 128 * (size_t)D, 41u + (uint64_t)D, 1.0f);
    double s_err = 0, o_err = 0;
    if (cuda_attention_sm90_selftest(D, q, k, v, &s_err, &o_err) < 0) {
        tap_skip("sm90 products D=%d: this GPU does not run the sm_90a code", D);
        tap_skip("sm90 products D=%d: P V", D);
    } else {
        tap_diag("sm90 products D=%d: max |error| scores %.3e, P V %.3e", D, s_err, o_err);
        tap_ok(s_err < 1e-3, "sm90 products D=%d: scores Q K^T", D);
        tap_ok(o_err < 1e-2, "sm90 products D=%d: P V", D);
    }
    free(q); free(k); free(v);
}
#endif

int main(void) {
    skip_without_gpu();
    tap_diag("testing the %s kernels", TEST_DTYPE_NAME);

#ifndef TEST_FP16 /* the Hopper wgmma kernels are bf16 only: fp16 always runs the mma.sync ones */
    test_sm90_products(64);
    test_sm90_products(128);
    tap_diag("the Hopper wgmma forward %s on this GPU",
             cuda_attention_sm90_available() ? "runs" : "does not run (shapes below test the mma.sync forward)");
#endif

    /* every attention shape twice: the mma.sync forward, then the default (wgmma on Hopper for
     * D 64 and 128, with or without dropout) */
    for (int pass = 0; pass < 2; pass++) {
    if (pass == 0) setenv("MTC_ATTENTION_SM90", "0", 1), path_label = "mma.sync ";
    else unsetenv("MTC_ATTENTION_SM90"), path_label = "";

    /* attention: T below, at and across the 64- and 128-row tiles; D = 20 exercises the
     * unvectorized path, D = 32, 40, 80, 96 the zero padding to 64 or 128; T = 2048 at D = 128 is
     * the GPT 1.3B head shape */
    static const int shapes[][4] = {
        {1, 1, 1, 32}, {2, 7, 3, 64}, {1, 100, 2, 80}, {1, 50, 2, 20},
        {2, 257, 4, 64}, {1, 130, 2, 96}, {1, 1024, 2, 128}, {3, 333, 3, 40},
        {1, 2048, 1, 128},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        test_attention(s[0], s[1], s[2], s[2], s[3], 0, s[2], 0.0f);
        test_attention(s[0], s[1], s[2], s[2], s[3], 0, s[2], 0.1f);
    }
    /* local heads 2..5 of 8 (tensor parallelism): the dropout mask follows the global head */
    test_attention(2, 257, 4, 4, 64, 2, 8, 0.1f);
    /* grouped-query attention: K/V read in place per group, dK/dV summed over the group's
     * heads (Llama 3.2 1B's 32 heads in 8 groups at D = 64; Llama 3's D = 128; multi-query) */
    test_attention(1, 300, 8, 2, 64, 0, 8, 0.0f);
    test_attention(2, 257, 4, 2, 64, 4, 16, 0.1f);
    test_attention(1, 1024, 8, 2, 128, 0, 8, 0.0f);
    test_attention(1, 130, 3, 1, 40, 0, 3, 0.1f);
    test_attention(1, 512, 32, 8, 64, 0, 32, 0.0f);
    /* the Hopper forward's key-tile loop: query blocks with 1, 2, 3 and 5 key tiles of 128 */
    test_attention(1, 128, 2, 2, 64, 0, 2, 0.0f);
    test_attention(1, 256, 2, 2, 128, 0, 2, 0.0f);
    test_attention(1, 384, 2, 2, 64, 0, 2, 0.0f);
    test_attention(2, 640, 1, 1, 128, 0, 1, 0.0f);
    /* the Hopper backward at D 128 and 64 with T off the 64- and 128-row tiles (zeros past T
     * from the tensor memory accelerator), also grouped */
    test_attention(1, 333, 2, 2, 128, 0, 2, 0.0f);
    test_attention(2, 200, 4, 2, 128, 0, 4, 0.0f);
    test_attention(1, 333, 2, 2, 64, 0, 2, 0.0f);
    test_attention(2, 200, 4, 2, 64, 0, 4, 0.0f);
    /* attention dropout in the Hopper kernels: the same shapes with p = 0.1 (key-tile counts 1,
     * 2, 3, 5, T off the tiles, grouped, local heads of a larger total) */
    test_attention(1, 128, 2, 2, 64, 0, 2, 0.1f);
    test_attention(1, 256, 2, 2, 128, 0, 2, 0.1f);
    test_attention(1, 384, 2, 2, 64, 1, 4, 0.1f);
    test_attention(2, 640, 1, 1, 128, 0, 1, 0.1f);
    test_attention(1, 333, 2, 2, 128, 0, 2, 0.1f);
    test_attention(2, 200, 4, 2, 128, 4, 12, 0.1f);
    test_attention(1, 333, 2, 2, 64, 0, 2, 0.1f);
    test_attention(2, 200, 4, 2, 64, 0, 4, 0.1f);
    test_attention(1, 1024, 8, 2, 128, 0, 8, 0.1f);
    /* the keep decisions element for element (T up to 5 D; off the tiles; grouped; local heads;
     * T % 4 == 2 and odd: the 2 x 4 Philox blocks cut at the row ends) */
    test_dropout_mask(1, 64, 1, 1, 64, 0, 1);
    test_dropout_mask(2, 200, 2, 2, 64, 1, 4);
    test_dropout_mask(1, 130, 3, 3, 64, 5, 9);
    test_dropout_mask(1, 320, 4, 2, 64, 0, 4);
    test_dropout_mask(1, 128, 2, 2, 128, 0, 2);
    test_dropout_mask(2, 333, 2, 1, 128, 2, 6);
    test_dropout_mask(1, 640, 1, 1, 128, 0, 1);
    /* sliding windows (the mma.sync kernels, then Hopper's forward and one-pass backward) */
    test_windows();
    }
    /* bitwise reruns of the default backward (Hopper: dQ summed over the key tiles in a fixed
     * order, 16 of them here) */
    test_backward_reruns(8, 2048, 8, 2, 64, 0.0f, -1);
    test_backward_reruns(8, 2048, 8, 2, 128, 0.0f, -1);
    /* and with attention dropout (Hopper: drawn inside the one pass) */
    test_backward_reruns(8, 2048, 8, 2, 64, 0.1f, -1);
    test_backward_reruns(8, 2048, 8, 2, 128, 0.1f, -1);
    /* and with a sliding window (Hopper: dQ's partials from the window's key tiles only, the
     * lowest writing dQ; 5 key tiles per query step at window 600) */
    test_backward_reruns(8, 2048, 8, 2, 64, 0.0f, 600);
    test_backward_reruns(8, 2048, 8, 2, 128, 0.1f, 600);
    /* the one-pass backward's two step sizes at D 64 (MTC_SM90_BWD_STEP: 128 queries per step,
     * then 64, whichever the default): T at, off and across the 128-query steps, grouped (Llama
     * 3.2 1B's 32 heads in 8 groups), local heads, dropout (two keep words per step), sliding
     * windows (the mask only on steps that meet the diagonal, T or the window's edge), the bias
     * gradient (every test_attention_window shape), bitwise reruns with 16 key tiles (bf16 only:
     * fp16 runs the mma.sync kernels) */
#ifndef TEST_FP16
    static const char *const steps[] = {"128", "64"};
    for (int k = 0; k < 2; k++) {
        setenv("MTC_SM90_BWD_STEP", steps[k], 1);
        path_label = k == 0 ? "step-128 " : "step-64 ";
        test_attention(1, 1024, 8, 2, 64, 0, 8, 0.0f);
        test_attention(1, 512, 32, 8, 64, 0, 32, 0.0f);
        test_attention(1, 128, 2, 2, 64, 0, 2, 0.0f);
        test_attention(1, 333, 2, 2, 64, 0, 2, 0.0f);
        test_attention(2, 200, 4, 2, 64, 0, 4, 0.0f);
        test_attention(1, 640, 4, 1, 64, 0, 4, 0.0f);
        test_attention(1, 1024, 8, 2, 64, 0, 8, 0.1f);
        test_attention(1, 384, 2, 2, 64, 1, 4, 0.1f);
        test_attention(2, 257, 4, 2, 64, 4, 16, 0.1f);
        test_dropout_mask(1, 64, 1, 1, 64, 0, 1);
        test_dropout_mask(2, 200, 2, 2, 64, 1, 4);
        test_dropout_mask(1, 320, 4, 2, 64, 0, 4);
        static const int step_windows[] = {0, 1, 37, 64, 128, 300};
        for (size_t i = 0; i < sizeof step_windows / sizeof step_windows[0]; i++)
            test_attention_window(1, 257, 2, 2, 64, 0, 2, 0.0f, step_windows[i]);
        test_attention_window(1, 1024, 8, 2, 64, 0, 8, 0.0f, 200);
        test_attention_window(1, 1024, 8, 2, 64, 0, 8, 0.1f, 100);
        test_attention_window(1, 333, 4, 2, 64, 1, 8, 0.1f, 37);
        test_backward_reruns(8, 2048, 8, 2, 64, 0.0f, -1);
        test_backward_reruns(8, 2048, 8, 2, 64, 0.1f, -1);
        test_backward_reruns(8, 2048, 8, 2, 64, 0.0f, 600);
        /* GQA's head chunks against whole groups (Llama 3.2 1B's heads, T off the steps with
         * dropout, a window with local heads, 1024 tiles of 4 chunks) */
        test_head_chunks(1, 512, 32, 8, 64, 0, 32, 0.0f, -1);
        test_head_chunks(2, 333, 8, 2, 64, 0, 8, 0.1f, -1);
        test_head_chunks(1, 1024, 8, 2, 64, 2, 16, 0.0f, 200);
        test_head_chunks(4, 2048, 32, 8, 64, 0, 32, 0.0f, -1);
    }
    unsetenv("MTC_SM90_BWD_STEP");
    path_label = "";
    /* and at D 128 (the same with multi-query attention: 4 chunks of one head per key unit) */
    test_head_chunks(1, 1024, 8, 2, 128, 0, 8, 0.0f, -1);
    test_head_chunks(2, 200, 4, 2, 128, 4, 12, 0.1f, 64);
    test_head_chunks(1, 640, 4, 1, 128, 0, 4, 0.1f, -1);
    test_head_chunks(8, 2048, 8, 2, 128, 0, 8, 0.0f, -1);
#endif
    /* the two-pass Hopper backward, on request (MTC_ATTENTION_FUSED_BACKWARD=0:
     * perf/attention_bench compares the two so) */
    setenv("MTC_ATTENTION_FUSED_BACKWARD", "0", 1);
    path_label = "two-pass ";
    test_attention(1, 2048, 1, 1, 128, 0, 1, 0.0f);
    test_attention(1, 1024, 8, 2, 128, 0, 8, 0.0f);
    /* and at D 64 (where the default is the warp-specialized one-pass kernel too), with T off
     * the tiles */
    test_attention(1, 1024, 8, 2, 64, 0, 8, 0.0f);
    test_attention(2, 333, 4, 2, 64, 0, 4, 0.0f);
    /* with dropout the two-pass request takes the Hopper forward and the mma.sync backward */
    test_attention(1, 1024, 8, 2, 128, 0, 8, 0.1f);
    test_dropout_mask(2, 200, 2, 2, 64, 1, 4);
    /* a window with the two-pass request: the Hopper forward, the mma.sync backward */
    test_attention_window(1, 1024, 8, 2, 128, 0, 8, 0.0f, 200);
    unsetenv("MTC_ATTENTION_FUSED_BACKWARD");
    /* MTC_ATTENTION_SM90_WINDOW=0: windowed calls on the mma.sync kernels, unwindowed on Hopper */
    setenv("MTC_ATTENTION_SM90_WINDOW", "0", 1);
    path_label = "sm90-window-off ";
    test_attention_window(2, 200, 4, 2, 128, 0, 4, 0.1f, 64);
    unsetenv("MTC_ATTENTION_SM90_WINDOW");
    /* MTC_ATTENTION_SM90_DROPOUT=0: dropout back on the mma.sync kernels, p = 0 still on Hopper */
    setenv("MTC_ATTENTION_SM90_DROPOUT", "0", 1);
    path_label = "sm90-dropout-off ";
    test_attention(1, 333, 2, 2, 128, 0, 2, 0.1f);
    test_attention(1, 333, 2, 2, 128, 0, 2, 0.0f);
    test_dropout_mask(2, 333, 2, 1, 128, 2, 6);
    test_dropout_mask(1, 130, 3, 3, 64, 5, 9);
    unsetenv("MTC_ATTENTION_SM90_DROPOUT");
    path_label = "";

    static const int ce_rows[] = {1, 7, 64};
    static const int ce_vocab[] = {37, 1000, 50304};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) test_cross_entropy(ce_rows[i], ce_vocab[j], 0);
    test_cross_entropy(7, 50257, 0);           /* odd V: rows start at odd element offsets */
    test_cross_entropy(5, 128257, 0);          /* a row too wide to stage: the fused call runs three passes */
    test_cross_entropy(64, 1000, 500);         /* vocabulary split over two ranks */
    test_cross_entropy(7, 50257, 50257 / 2);

    tap_diag("%d passed, %d failed", tap_count - tap_failed, tap_failed);
    return tap_done();
}
