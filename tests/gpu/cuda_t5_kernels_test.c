/* cuda_t5_kernels_test.c: the CUDA kernel T5 adds, cross_attention_forward/backward (its
 * decoder's queries over the encoder's keys and values under the encoder's padding mask:
 * kernels/cuda/cuda_attention.cu's padded flash kernels with q and kv in tensors of their own),
 * through the backend's table (kernels_cuda(): bf16) against the fp32 CPU reference
 * (kernels_cpu()). Built with -DTEST_FP16 (cuda_t5_kernels_fp16_test) it tests
 * kernels_cuda_fp16() instead (tests/gpu/cuda_fp16_map.h).
 *  - out, dq, dk and dv within ACT_TOL (bf16 1e-2, fp16 2e-3: the other attention tests'
 *    tolerances) of the CPU's, with and without dropout, over shapes with Tq != Tk (either
 *    longer, one query, two keys, on and off the 64- and 128-row tiles), D padded (20, 40, 80, 96)
 *    and unvectorized (20), and a tensor-parallel slice of heads. Each micro-batch mixes four
 *    kinds of sequence: every key visible, padding at the end (T5's), padding scattered, no
 *    visible key at all; the last gives out 0 and dq 0 exactly, and a padding key's dk and dv
 *    are exactly 0. Changing a padding key's k and v leaves out bitwise unchanged; reruns give
 *    the same bits; dq and dkv are overwritten (poisoned before).
 *  - the dropout mask is the CPU's, element for element: with q = 0 (a uniform softmax over the
 *    visible keys), value t2 the unit vector e_t2 and dout of query t1 the unit vector e_t1
 *    (D >= Tq, Tk), out[t1][t2] is nonzero exactly where probability (t1, t2) is kept and
 *    dv[t2][t1] likewise: the zero patterns of the GPU's out and dv equal the CPU's.
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

/* sequence b's kind of padding: 0 every key visible, 1 the last ~40% padding (T5's encoder), 2
 * every third key padding, 3 no visible key */
static int key_is_valid(int b, int t, int T) {
    switch (b % 4) {
    case 0: return 1;
    case 1: return t < (T * 3 + 4) / 5;
    case 2: return t % 3 != 1;
    default: return 0;
    }
}

/* part 0 (keys) or 1 (values) of kv rows [rows, H*2D] (per head its key then its value) into
 * [rows, H, D]; returns the element count */
static size_t kv_part(float *dst, const float *kv, size_t rows, int H, int D, int part) {
    size_t count = 0;
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) {
            memcpy(dst + count, kv + (r * H + h) * 2 * D + (size_t)part * D, (size_t)D * sizeof(float));
            count += (size_t)D;
        }
    return count;
}

typedef struct cross_shape {
    int B, Tq, Tk, H, D, head_start, total_heads;
} cross_shape;

static void test_cross_attention(cross_shape c, float p) {
    const kernel_ops *cpu = kernels_cpu(), *gpu = kernels_cuda();
    const int B = c.B, Tq = c.Tq, Tk = c.Tk, H = c.H, D = c.D;
    const size_t n_q = (size_t)B * Tq * H * D, n_kv = (size_t)B * Tk * 2 * H * D, kv_row = (size_t)2 * H * D;
    const uint64_t seed = 7000u + 7u * B + 13u * Tq + 11u * Tk + 17u * H + 19u * D + (p > 0.0f ? 1u : 0u);
    dropout_rng rng = {p, 8642u, 0xc4055000u + (uint64_t)Tq * 1000u + (uint64_t)Tk, 77u};
    char shape[160];
    snprintf(shape, sizeof shape, "cross attention B=%d Tq=%d Tk=%d H=%d D=%d heads %d+%d/%d p=%.2f", B, Tq, Tk, H, D,
             c.head_start, H, c.total_heads, (double)p);

    int *valid = host_alloc((size_t)B * Tk * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tk; t++) valid[(size_t)b * Tk + t] = key_is_valid(b, t, Tk);
    float *q = host_alloc(n_q * sizeof(float)), *kv = host_alloc(n_kv * sizeof(float));
    float *dout = host_alloc(n_q * sizeof(float));
    fill_random(q, n_q, seed, 2.0f); /* scores of spread ~1.3: far from a uniform softmax */
    round_to_bf16(q, n_q);
    fill_random(kv, n_kv, seed + 1, 2.0f);
    round_to_bf16(kv, n_kv);
    fill_random(dout, n_q, seed + 2, 1.0f);
    round_to_bf16(dout, n_q);

    /* CPU reference */
    float *out_ref = host_alloc(n_q * sizeof(float)), *dq_ref = host_alloc(n_q * sizeof(float));
    float *dkv_ref = host_alloc(n_kv * sizeof(float));
    void *ws_ref = host_alloc(cpu->cross_attention_workspace_bytes(B, Tq, Tk, H));
    cpu->cross_attention_forward(out_ref, ws_ref, q, kv, valid, B, Tq, Tk, H, D, c.head_start, c.total_heads, rng);
    cpu->cross_attention_backward(dq_ref, dkv_ref, dout, q, kv, out_ref, valid, ws_ref, B, Tq, Tk, H, D, c.head_start,
                                  c.total_heads, rng);

    /* GPU forward */
    bf16 *d_q = upload_bf16(q, n_q), *d_kv = upload_bf16(kv, n_kv), *d_dout = upload_bf16(dout, n_q);
    int *d_valid = upload_int(valid, (size_t)B * Tk);
    bf16 *d_out = device_alloc(n_q * sizeof(bf16)), *d_dq = device_alloc(n_q * sizeof(bf16));
    bf16 *d_dkv = device_alloc(n_kv * sizeof(bf16));
    const size_t ws_bytes = gpu->cross_attention_workspace_bytes(B, Tq, Tk, H);
    void *d_ws = device_alloc(ws_bytes), *d_ws2 = device_alloc(ws_bytes);
    poison(d_out, n_q * sizeof(bf16));
    poison(d_ws, ws_bytes);
    device_sync();
    gpu->cross_attention_forward(d_out, d_ws, d_q, d_kv, d_valid, B, Tq, Tk, H, D, c.head_start, c.total_heads, rng);
    float *out = download_bf16(d_out, n_q);
    double err = relative_error(out, out_ref, n_q);
    tap_diag("%s: out relative error %.3e", shape, err);
    tap_ok(err < ACT_TOL, "%s: forward", shape);
    int empty_zero = 1; /* sequences with no visible key: out exactly 0 */
    for (int b = 3; b < B; b += 4)
        for (size_t i = (size_t)b * Tq * H * D; i < (size_t)(b + 1) * Tq * H * D; i++)
            if (out[i] != 0.0f) empty_zero = 0;
    if (B > 3) tap_ok(empty_zero, "%s: a sequence without a visible key gets out 0", shape);

    bf16 *raw1 = host_alloc(n_kv * sizeof(bf16) + n_q * sizeof(bf16)), *raw2 = host_alloc(n_kv * sizeof(bf16) + n_q * sizeof(bf16));
    download_raw(raw1, d_out, n_q * sizeof(bf16));
    /* a padding key's k and v moved far: out keeps its bits */
    float *kv_moved = host_alloc(n_kv * sizeof(float));
    memcpy(kv_moved, kv, n_kv * sizeof(float));
    for (size_t r = 0; r < (size_t)B * Tk; r++)
        if (!valid[r])
            for (size_t j = 0; j < kv_row; j++) kv_moved[r * kv_row + j] += 3.0f;
    round_to_bf16(kv_moved, n_kv);
    bf16 *d_kv_moved = upload_bf16(kv_moved, n_kv);
    poison(d_out, n_q * sizeof(bf16));
    device_sync();
    gpu->cross_attention_forward(d_out, d_ws2, d_q, d_kv_moved, d_valid, B, Tq, Tk, H, D, c.head_start, c.total_heads,
                                 rng);
    download_raw(raw2, d_out, n_q * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_q * sizeof(bf16)) == 0, "%s: padding keys' k and v changed, out bitwise unchanged",
           shape);
    poison(d_out, n_q * sizeof(bf16));
    device_sync();
    gpu->cross_attention_forward(d_out, d_ws, d_q, d_kv, d_valid, B, Tq, Tk, H, D, c.head_start, c.total_heads, rng);
    download_raw(raw2, d_out, n_q * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, n_q * sizeof(bf16)) == 0, "%s: forward rerun bitwise identical", shape);

    /* GPU backward (overwrites dq and dkv: poisoned first) */
    poison(d_dq, n_q * sizeof(bf16));
    poison(d_dkv, n_kv * sizeof(bf16));
    device_sync();
    gpu->cross_attention_backward(d_dq, d_dkv, d_dout, d_q, d_kv, d_out, d_valid, d_ws, B, Tq, Tk, H, D, c.head_start,
                                  c.total_heads, rng);
    float *dq = download_bf16(d_dq, n_q), *dkv = download_bf16(d_dkv, n_kv);
    err = relative_error(dq, dq_ref, n_q);
    tap_diag("%s: dq relative error %.3e", shape, err);
    tap_ok(err < ACT_TOL, "%s: backward dq", shape);
    float *got = host_alloc(n_kv * sizeof(float)), *want = host_alloc(n_kv * sizeof(float));
    const char *part_name[2] = {"dk", "dv"};
    for (int part = 0; part < 2; part++) {
        size_t n_part = kv_part(got, dkv, (size_t)B * Tk, H, D, part);
        kv_part(want, dkv_ref, (size_t)B * Tk, H, D, part);
        err = relative_error(got, want, n_part);
        tap_diag("%s: %s relative error %.3e", shape, part_name[part], err);
        tap_ok(err < ACT_TOL, "%s: backward %s", shape, part_name[part]);
    }
    int exact_zeros = 1; /* padding keys' dk, dv and a keyless sequence's dq: exactly 0 */
    for (size_t r = 0; r < (size_t)B * Tk; r++)
        for (size_t j = 0; j < kv_row; j++)
            if (!valid[r] && dkv[r * kv_row + j] != 0.0f) exact_zeros = 0;
    for (int b = 3; b < B; b += 4)
        for (size_t i = (size_t)b * Tq * H * D; i < (size_t)(b + 1) * Tq * H * D; i++)
            if (dq[i] != 0.0f) exact_zeros = 0;
    tap_ok(exact_zeros, "%s: padding keys' dk and dv%s exactly 0", shape,
           B > 3 ? ", and the dq of a sequence without a visible key," : "");

    download_raw(raw1, d_dq, n_q * sizeof(bf16));
    download_raw((char *)raw1 + n_q * sizeof(bf16), d_dkv, n_kv * sizeof(bf16));
    poison(d_dq, n_q * sizeof(bf16));
    poison(d_dkv, n_kv * sizeof(bf16));
    device_sync();
    gpu->cross_attention_backward(d_dq, d_dkv, d_dout, d_q, d_kv, d_out, d_valid, d_ws, B, Tq, Tk, H, D, c.head_start,
                                  c.total_heads, rng);
    download_raw(raw2, d_dq, n_q * sizeof(bf16));
    download_raw((char *)raw2 + n_q * sizeof(bf16), d_dkv, n_kv * sizeof(bf16));
    tap_ok(memcmp(raw1, raw2, (n_q + n_kv) * sizeof(bf16)) == 0, "%s: backward rerun bitwise identical", shape);

    TEST_CUDA(cudaFree(d_q));
    TEST_CUDA(cudaFree(d_kv));
    TEST_CUDA(cudaFree(d_kv_moved));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_valid));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dq));
    TEST_CUDA(cudaFree(d_dkv));
    TEST_CUDA(cudaFree(d_ws));
    TEST_CUDA(cudaFree(d_ws2));
    free(valid); free(q); free(kv); free(dout); free(out_ref); free(dq_ref); free(dkv_ref); free(ws_ref); free(out);
    free(raw1); free(raw2); free(kv_moved); free(dq); free(dkv); free(got); free(want);
}

/* the dropout mask itself (see the header): q = 0, v of key t2 = e_t2, dout of query t1 = e_t1
 * (needs D >= Tq, Tk); out's and dv's zero patterns against the CPU's */
static void test_cross_dropout_mask(cross_shape c, float p) {
    const kernel_ops *cpu = kernels_cpu(), *gpu = kernels_cuda();
    const int B = c.B, Tq = c.Tq, Tk = c.Tk, H = c.H, D = c.D;
    const size_t n_q = (size_t)B * Tq * H * D, n_kv = (size_t)B * Tk * 2 * H * D;
    dropout_rng rng = {p, 1234567u, 0xd40b0000u + (uint64_t)Tk, 5u};
    char shape[160];
    snprintf(shape, sizeof shape, "dropout mask B=%d Tq=%d Tk=%d H=%d D=%d heads %d+%d/%d p=%.2f", B, Tq, Tk, H, D,
             c.head_start, H, c.total_heads, (double)p);
    if (D < Tq || D < Tk) {
        tap_ok(0, "%s: the test needs D >= Tq, Tk", shape);
        return;
    }
    int *valid = host_alloc((size_t)B * Tk * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tk; t++) valid[(size_t)b * Tk + t] = key_is_valid(b, t, Tk);
    float *q = calloc(n_q, sizeof(float)), *kv = host_alloc(n_kv * sizeof(float)), *dout = calloc(n_q, sizeof(float));
    if (!q || !dout) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill_random(kv, n_kv, 99u + (uint64_t)Tk, 1.0f); /* keys: anything (q = 0 makes every score 0) */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tk; t++)
            for (int h = 0; h < H; h++) {
                float *v = kv + (((size_t)b * Tk + t) * H + h) * 2 * D + D;
                for (int d = 0; d < D; d++) v[d] = d == t ? 1.0f : 0.0f;
            }
    round_to_bf16(kv, n_kv);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tq; t++)
            for (int h = 0; h < H; h++) dout[(((size_t)b * Tq + t) * H + h) * D + t] = 1.0f;

    float *out_ref = host_alloc(n_q * sizeof(float)), *dq_ref = host_alloc(n_q * sizeof(float));
    float *dkv_ref = host_alloc(n_kv * sizeof(float));
    void *ws_ref = host_alloc(cpu->cross_attention_workspace_bytes(B, Tq, Tk, H));
    cpu->cross_attention_forward(out_ref, ws_ref, q, kv, valid, B, Tq, Tk, H, D, c.head_start, c.total_heads, rng);
    cpu->cross_attention_backward(dq_ref, dkv_ref, dout, q, kv, out_ref, valid, ws_ref, B, Tq, Tk, H, D, c.head_start,
                                  c.total_heads, rng);

    bf16 *d_q = upload_bf16(q, n_q), *d_kv = upload_bf16(kv, n_kv), *d_dout = upload_bf16(dout, n_q);
    int *d_valid = upload_int(valid, (size_t)B * Tk);
    bf16 *d_out = device_alloc(n_q * sizeof(bf16)), *d_dq = device_alloc(n_q * sizeof(bf16));
    bf16 *d_dkv = device_alloc(n_kv * sizeof(bf16));
    void *d_ws = device_alloc(gpu->cross_attention_workspace_bytes(B, Tq, Tk, H));
    poison(d_out, n_q * sizeof(bf16));
    poison(d_dq, n_q * sizeof(bf16));
    poison(d_dkv, n_kv * sizeof(bf16));
    device_sync();
    gpu->cross_attention_forward(d_out, d_ws, d_q, d_kv, d_valid, B, Tq, Tk, H, D, c.head_start, c.total_heads, rng);
    gpu->cross_attention_backward(d_dq, d_dkv, d_dout, d_q, d_kv, d_out, d_valid, d_ws, B, Tq, Tk, H, D, c.head_start,
                                  c.total_heads, rng);
    float *out = download_bf16(d_out, n_q), *dkv = download_bf16(d_dkv, n_kv);

    /* out[b,t1,h,t2]: kept (t1, t2) of a visible key t2 */
    size_t visible = 0, kept = 0, out_mismatch = 0, dv_mismatch = 0;
    for (int b = 0; b < B; b++)
        for (int t1 = 0; t1 < Tq; t1++)
            for (int h = 0; h < H; h++)
                for (int t2 = 0; t2 < Tk; t2++) {
                    size_t i = (((size_t)b * Tq + t1) * H + h) * D + t2;
                    int want = out_ref[i] != 0.0f, have = out[i] != 0.0f;
                    if (isnan(out[i]) || want != have) out_mismatch++;
                    if (valid[(size_t)b * Tk + t2]) {
                        visible++;
                        kept += (size_t)want;
                    }
                    /* dv[b,t2,h,t1] = keep(t1, t2) / (n (1 - p)) */
                    size_t j = (((size_t)b * Tk + t2) * H + h) * 2 * D + D + t1;
                    if (isnan(dkv[j]) || (dkv_ref[j] != 0.0f) != (dkv[j] != 0.0f)) dv_mismatch++;
                }
    tap_diag("%s: %zu of %zu visible probabilities kept (%.3f; 1 - p = %.3f)", shape, kept, visible,
             visible ? (double)kept / (double)visible : 0.0, 1.0 - (double)p);
    tap_ok(out_mismatch == 0 && (p == 0.0f ? kept == visible : kept < visible),
           "%s: the forward keeps exactly the CPU's probabilities (%zu differ)", shape, out_mismatch);
    tap_ok(dv_mismatch == 0, "%s: the backward's dv keeps exactly the CPU's probabilities (%zu differ)", shape,
           dv_mismatch);

    TEST_CUDA(cudaFree(d_q));
    TEST_CUDA(cudaFree(d_kv));
    TEST_CUDA(cudaFree(d_dout));
    TEST_CUDA(cudaFree(d_valid));
    TEST_CUDA(cudaFree(d_out));
    TEST_CUDA(cudaFree(d_dq));
    TEST_CUDA(cudaFree(d_dkv));
    TEST_CUDA(cudaFree(d_ws));
    free(valid); free(q); free(kv); free(dout); free(out_ref); free(dq_ref); free(dkv_ref); free(ws_ref); free(out);
    free(dkv);
}

int main(void) {
    skip_without_gpu();
    tap_diag("testing the %s kernels", TEST_DTYPE_NAME);
    const kernel_ops *gpu = kernels_cuda();
    int has_ops = gpu->cross_attention_workspace_bytes && gpu->cross_attention_forward && gpu->cross_attention_backward;
    tap_ok(has_ops, "the CUDA table has T5's cross-attention ops");
    if (!has_ops) return tap_done();

    /* (B, Tq, Tk, H, D): Tq and Tk apart, one query, two keys (of which the third kind of
     * sequence sees one: its dq and dk are 0 up to rounding, judged against the tensor's scale;
     * with one key in all, Tk = 1, they would be rounding noise against exact zeros), below, at
     * and across the 64- and 128-row tiles; D 20 the unvectorized path, 40, 80, 96 the zero
     * padding to 64 or 128; 128 over 512 a T5 decoder over its encoder */
    static const int shapes[][5] = {
        {4, 1, 7, 2, 32},    {4, 7, 2, 3, 64},     {4, 100, 37, 2, 80}, {4, 50, 130, 2, 20},  {4, 257, 64, 4, 64},
        {4, 64, 257, 4, 64}, {8, 130, 333, 3, 40}, {4, 96, 96, 2, 96},  {4, 128, 512, 4, 64}, {4, 300, 77, 2, 128},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        cross_shape c = {s[0], s[1], s[2], s[3], s[4], 0, s[3]};
        test_cross_attention(c, 0.0f);
        test_cross_attention(c, 0.1f);
    }
    /* local heads 2..5 of 8 (tensor parallelism): the dropout mask follows the global head */
    test_cross_attention((cross_shape){4, 130, 257, 4, 64, 2, 8}, 0.1f);
    test_cross_attention((cross_shape){4, 33, 65, 2, 128, 6, 8}, 0.25f);

    /* the dropout mask, element for element: Tq != Tk (odd ones: the 2 x 4 Philox blocks cross
     * rows of odd length), and a tensor-parallel slice */
    test_cross_dropout_mask((cross_shape){4, 77, 100, 2, 128, 0, 2}, 0.1f);
    test_cross_dropout_mask((cross_shape){4, 120, 41, 3, 128, 0, 3}, 0.3f);
    test_cross_dropout_mask((cross_shape){4, 33, 64, 2, 64, 3, 8}, 0.5f);
    test_cross_dropout_mask((cross_shape){4, 50, 63, 2, 64, 0, 2}, 0.0f);

    tap_diag("%d passed, %d failed", tap_count - tap_failed, tap_failed);
    return tap_done();
}
