/* cuda_kernels_test.c: the bf16 CUDA kernels (conversions, elementwise, embeddings, layer norm,
 * RMSNorm, rotary embeddings, SwiGLU, cuBLASLt matmul, AdamW, sum of squares, and the fixed
 * tree's add_float and sum_squares_pieces, which must give the CPU's bits) against the fp32
 * CPU reference backend; built with -DTEST_FP16 (cuda_kernels_fp16_test) the same cases test
 * their fp16 instantiations (tests/gpu/cuda_fp16_map.h: fp16 rounding, tolerance 2e-3).
 *
 * Every case draws inputs, rounds them to bf16 so that both backends see the same values, runs
 * the CPU reference and the CUDA kernel, and compares with relative_error (max|got - want| /
 * max|want|): bf16 outputs within 1e-2; fp32 parameter gradients accumulated from bf16 inputs
 * within 1e-4 (embedding gradients add in the CPU's order, so they should match exactly); AdamW
 * and the sum of squares within 1e-5. Overwritten outputs are poisoned with NaN first (an
 * element a kernel fails to write shows up as an infinite error); accumulated outputs are
 * prefilled with the same known values on both sides. Shapes include odd sizes (scalar paths),
 * pointers shifted by one element (unaligned: the 128-bit paths must fall back), and large rows
 * (layer norm at C = 12288 uses more than 48 KiB of shared memory). The reductions that must be
 * deterministic (embedding, layer-norm and bias gradients, sum of squares, dweight) run twice and
 * must agree bit for bit. Skips (exit 77) without a GPU. */
#include <stdarg.h>

#include "tests/gpu/cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"

static const kernel_ops *cpu;

#define GRAD_TOL 1e-4
#define EXACT_TOL 1e-5

static void expect_identical(const void *a, const void *b, size_t bytes, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tap_ok(memcmp(a, b, bytes) == 0, "%s", what);
}

/* host array of bf16-representable values uniform in [-scale, scale) */
static float *host_random(size_t n, uint64_t seed, float scale) {
    float *x = (float *)malloc(n * sizeof(float) + 4);
    fill_random(x, n, seed, scale);
    round_to_bf16(x, n);
    return x;
}
/* host array of fp32 values (not rounded) */
static float *host_random_fp32(size_t n, uint64_t seed, float scale) {
    float *x = (float *)malloc(n * sizeof(float) + 4);
    fill_random(x, n, seed, scale);
    return x;
}
static float *host_copy(const float *x, size_t n) {
    float *y = (float *)malloc(n * sizeof(float) + 4);
    memcpy(y, x, n * sizeof(float));
    return y;
}
static float *host_alloc(size_t n) { return (float *)calloc(n + 1, sizeof(float)); }

/* device copies placed `shift` elements past an aligned allocation (shift 1: unaligned);
 * *base receives the allocation to free */
static bf16 *upload_bf16_shifted(const float *x, size_t n, int shift, void **base) {
    float *padded = host_alloc(n + (size_t)shift);
    memcpy(padded + shift, x, n * sizeof(float));
    bf16 *d = upload_bf16(padded, n + (size_t)shift);
    free(padded);
    *base = d;
    return d + shift;
}
static float *upload_float_shifted(const float *x, size_t n, int shift, void **base) {
    float *d = (float *)device_alloc((n + (size_t)shift) * sizeof(float));
    TEST_CUDA(cudaMemcpy(d + shift, x, n * sizeof(float), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
    *base = d;
    return d + shift;
}
static bf16 *alloc_bf16_shifted(size_t n, int shift, void **base) {
    bf16 *d = (bf16 *)device_alloc((n + (size_t)shift) * sizeof(bf16));
    *base = d;
    return d + shift;
}
static void set_float(float *d, const float *x, size_t n) {
    TEST_CUDA(cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
}
static void set_bf16(bf16 *d, const float *x, size_t n) {
    bf16 *h = (bf16 *)malloc(n * sizeof(bf16) + 2);
    for (size_t i = 0; i < n; i++) h[i] = host_to_bf16(x[i]);
    TEST_CUDA(cudaMemcpy(d, h, n * sizeof(bf16), cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize()); /* a pageable upload may still be in flight: the kernels run on a non-blocking stream */
    free(h);
}

/* ---- the backend table (kernels_cuda(), or kernels_cuda_fp16() with TEST_FP16) ---- */

/* its compute dtype, and its host copies: fp32 in, rounded to the compute dtype on the device,
 * fp32 out, exactly the host's rounding */
static void test_backend_table(size_t n) {
    const kernel_ops *ops = kernels_cuda();
    tap_ok(ops->act_dtype == TEST_ACT_DTYPE && ops->act_bytes == 2, "backend table: compute dtype %s (act_dtype %d)",
           TEST_DTYPE_NAME, ops->act_dtype);
    float *x = host_random_fp32(n, 300 + n, 3.0f), *want = host_copy(x, n);
    x[0] = 1e6f; /* out of fp16's range: infinity there, a bf16 number */
    want[0] = x[0];
    round_to_bf16(want, n);
    void *d = ops->alloc(n * ops->act_bytes);
    ops->copy_from_host_float(d, x, n);
    float *got = (float *)malloc(n * sizeof(float));
    ops->copy_to_host_float(got, d, n);
    size_t equal = 0;
    for (size_t i = 0; i < n; i++) equal += memcmp(&got[i], &want[i], sizeof(float)) == 0;
    tap_ok(equal == n, "backend table: copy_from_host_float / copy_to_host_float round to %s exactly (%zu of %zu)",
           TEST_DTYPE_NAME, equal, n);
    ops->release(d);
    free(x); free(want); free(got);
}

/* ---- conversions ---- */

static void test_conversions(size_t n, int shift) {
    float *x = host_random_fp32(n, 100 + n, 3.0f);
    float *want = host_copy(x, n);
    round_to_bf16(want, n); /* the host's round-to-nearest-even */
    void *b1, *b2, *b3;
    float *d_x = upload_float_shifted(x, n, shift, &b1);
    bf16 *d_h = alloc_bf16_shifted(n, shift, &b2);
    poison(d_h, n * sizeof(bf16));
    cuda_float_to_bf16(d_h, d_x, n);
    float *got = download_bf16(d_h, n);
    expect_below(relative_error(got, want, n), 1e-30, "float_to_bf16 n=%zu shift=%d (exact)", n,
                 shift);
    float *d_back = upload_float_shifted(x, n, shift, &b3);
    poison(d_back, n * sizeof(float));
    cuda_bf16_to_float(d_back, d_h, n);
    float *back = download_float(d_back, n);
    expect_below(relative_error(back, want, n), 1e-30, "bf16_to_float n=%zu shift=%d (exact)", n,
                 shift);
    free(x); free(want); free(got); free(back);
    cudaFree(b1); cudaFree(b2); cudaFree(b3);
}

/* ---- parameter initialization ---- */

/* the device's normal initial values against the CPU backend's, for one shard layout: fp32
 * (master weights) agree to float rounding (both compute Box-Muller in double; the device's
 * log/cos may differ from glibc's in the last bit of a double), the bf16 copy is exactly the
 * device's fp32 value rounded to nearest even */
static void test_init_normal(const char *what, shard_map map, size_t n, uint64_t first) {
    float *want = malloc(n * sizeof(float));
    cpu->init_normal(want, 1, map, 1234, 0x9e3779b97f4a7c15ull, 0.02f, first, n);
    float *d_f = NULL;
    bf16 *d_h = NULL;
    TEST_CUDA(cudaMalloc((void **)&d_f, n * sizeof(float)));
    TEST_CUDA(cudaMalloc((void **)&d_h, n * sizeof(bf16)));
    cuda_init_normal(d_f, 1, map, 1234, 0x9e3779b97f4a7c15ull, 0.02f, first, n);
    cuda_init_normal(d_h, 0, map, 1234, 0x9e3779b97f4a7c15ull, 0.02f, first, n);
    float *got = download_float(d_f, n), *got_h = download_bf16(d_h, n);
    size_t exact = 0;
    for (size_t i = 0; i < n; i++) exact += got[i] == want[i];
    expect_below(relative_error(got, want, n), 1e-6, "init_normal %s n=%zu fp32 (%zu of %zu bitwise equal)", what, n, exact, n);
    round_to_bf16(got, n);
    expect_below(relative_error(got_h, got, n), 1e-30, "init_normal %s n=%zu bf16 is the fp32 value rounded (exact)", what, n);
    float ones[5] = {1, 1, 1, 1, 1};
    cuda_fill(d_h, 0, 1.0f, 5);
    float *got_ones = download_bf16(d_h, 5);
    expect_below(relative_error(got_ones, ones, 5), 1e-30, "fill %s bf16 ones", what);
    free(want); free(got); free(got_h); free(got_ones);
    cudaFree(d_f); cudaFree(d_h);
}

/* ---- elementwise ---- */

static void test_gelu(size_t n, int shift) {
    float *x = host_random(n, 200 + n, 4.0f), *dout = host_random(n, 201 + n, 1.0f);
    float *want = host_alloc(n), *want_dx = host_alloc(n);
    cpu->gelu_forward(want, x, n);
    cpu->gelu_backward(want_dx, x, dout, n);
    void *b1, *b2, *b3, *b4;
    bf16 *d_x = upload_bf16_shifted(x, n, shift, &b1);
    bf16 *d_dout = upload_bf16_shifted(dout, n, shift, &b2);
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b3);
    bf16 *d_dx = alloc_bf16_shifted(n, shift, &b4);
    poison(d_out, n * sizeof(bf16));
    poison(d_dx, n * sizeof(bf16));
    cuda_gelu_forward(d_out, d_x, n);
    cuda_gelu_backward(d_dx, d_x, d_dout, n);
    float *got = download_bf16(d_out, n), *got_dx = download_bf16(d_dx, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "gelu_forward n=%zu shift=%d", n, shift);
    expect_below(relative_error(got_dx, want_dx, n), ACT_TOL, "gelu_backward n=%zu shift=%d", n,
                 shift);
    free(x); free(dout); free(want); free(want_dx); free(got); free(got_dx);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(b4);
}

/* The hidden dropout's rule (kernels/philox.h), written out from the raw Philox4x32-10 words:
 * element `index` of a site takes the call at counter floor(index / 8), word floor((index mod 8)
 * / 2), the low 16 bits for even index and the high 16 for odd, and is kept iff that value >=
 * ceil(65536 p). */
static int keep_by_rule(uint64_t seed, uint64_t stream, uint64_t index, float p) {
    const philox_out w = philox4x32(seed, index / 8, stream);
    const uint32_t word = w.v[(index % 8) / 2];
    const uint32_t value = index % 2 == 0 ? word % 65536u : word / 65536u;
    return value >= (uint32_t)ceil((double)p * 65536.0);
}

/* bias-dropout-add against the CPU's (the unfused order): the same mask (the rule's), values
 * within bf16; offset a multiple of 8 takes the kernel's one-call-per-group path, others two */
static void test_bias_dropout_add(int N, int C, int with_bias, int shift, float p, uint64_t offset) {
    size_t n = (size_t)N * C;
    dropout_rng rng = {p, 4321, 0x51ed27ull ^ n, offset};
    float *x = host_random(n, 310 + n, 2.0f), *residual = host_random(n, 311 + n, 3.0f);
    float *bias = with_bias ? host_random((size_t)C, 312 + C, 1.0f) : NULL;
    float *want = host_alloc(n);
    cpu->bias_dropout_add(want, residual, x, bias, N, C, rng);
    void *b1, *b2, *b3 = NULL, *b4;
    bf16 *d_x = upload_bf16_shifted(x, n, shift, &b1);
    bf16 *d_residual = upload_bf16_shifted(residual, n, shift, &b2);
    bf16 *d_bias = with_bias ? upload_bf16_shifted(bias, (size_t)C, shift, &b3) : NULL;
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b4);
    poison(d_out, n * sizeof(bf16));
    cuda_bias_dropout_add(d_out, d_residual, d_x, d_bias, N, C, rng);
    float *got = download_bf16(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "bias_dropout_add N=%d C=%d bias=%d shift=%d p=%.2f", N, C,
                 with_bias, shift, p);
    float *r16 = download_bf16(d_residual, n);
    size_t mismatched = 0, dropped = 0; /* a dropped element is the residual, exactly */
    for (size_t i = 0; p > 0.0f && i < n; i++) {
        if (keep_by_rule(rng.seed, rng.stream, rng.offset + i, p)) continue;
        dropped++;
        mismatched += got[i] != r16[i];
    }
    tap_ok(mismatched == 0 && (p == 0.0f || dropped > 0),
           "bias_dropout_add N=%d C=%d p=%.2f offset %% 8 = %d: the rule's mask (%zu dropped, %zu not the residual)", N,
           C, p, (int)(offset % 8), dropped, mismatched);
    free(r16);
    cuda_bias_dropout_add(d_residual, d_residual, d_x, d_bias, N, C, rng); /* out aliasing the residual */
    float *got_alias = download_bf16(d_residual, n);
    tap_ok(memcmp(got_alias, got, n * sizeof(float)) == 0, "bias_dropout_add N=%d C=%d p=%.2f in place on the residual",
           N, C, p);
    free(x); free(residual); free(bias); free(want); free(got); free(got_alias);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(b4);
}

static void test_dropout(size_t n, int shift, float p) {
    dropout_rng rng = {p, 1234, 0x9e3779b97f4a7c15ull ^ n, 1000 + 17 * n};
    float *x = host_random(n, 300 + n, 2.0f), *dout = host_random(n, 301 + n, 1.0f);
    float *want = host_alloc(n), *want_dx = host_alloc(n);
    cpu->dropout_forward(want, x, n, rng);
    cpu->dropout_backward(want_dx, dout, n, rng);
    void *b1, *b2, *b3;
    bf16 *d_x = upload_bf16_shifted(x, n, shift, &b1);
    bf16 *d_dout = upload_bf16_shifted(dout, n, shift, &b2);
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b3);
    poison(d_out, n * sizeof(bf16));
    cuda_dropout_forward(d_out, d_x, n, rng);
    float *got = download_bf16(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "dropout_forward n=%zu shift=%d p=%.2f", n,
                 shift, p);
    size_t zeros_got = 0, zeros_want = 0, mismatched = 0, off_rule = 0;
    for (size_t i = 0; i < n; i++) {
        zeros_got += got[i] == 0.0f;
        zeros_want += want[i] == 0.0f;
        mismatched += (got[i] == 0.0f) != (want[i] == 0.0f);
        /* dropped iff 0 (a kept nonzero input stays nonzero; an input of exactly 0 says nothing) */
        if (x[i] != 0.0f) off_rule += (got[i] == 0.0f) == keep_by_rule(rng.seed, rng.stream, rng.offset + i, p);
    }
    tap_diag("dropout n=%zu: %zu dropped on the GPU, %zu on the CPU", n, zeros_got, zeros_want);
    tap_ok(mismatched == 0 && off_rule == 0,
           "dropout_forward n=%zu shift=%d p=%.2f offset %% 8 = %d: the CPU's mask, the rule's (%zu off it)", n, shift,
           p, (int)(rng.offset % 8), off_rule);
    /* backward in place (dx aliases dout) */
    cuda_dropout_backward(d_dout, d_dout, n, rng);
    float *got_dx = download_bf16(d_dout, n);
    expect_below(relative_error(got_dx, want_dx, n), ACT_TOL,
                 "dropout_backward in place n=%zu shift=%d p=%.2f", n, shift, p);
    free(x); free(dout); free(want); free(want_dx); free(got); free(got_dx);
    cudaFree(b1); cudaFree(b2); cudaFree(b3);
}

static void test_add_scale(size_t n, int shift) {
    float *a = host_random(n, 400 + n, 1.0f), *b = host_random(n, 401 + n, 1.0f);
    float *want = host_alloc(n);
    cpu->add(want, a, b, n);
    void *b1, *b2, *b3;
    bf16 *d_a = upload_bf16_shifted(a, n, shift, &b1);
    bf16 *d_b = upload_bf16_shifted(b, n, shift, &b2);
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b3);
    poison(d_out, n * sizeof(bf16));
    cuda_add(d_out, d_a, d_b, n);
    float *got = download_bf16(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "add n=%zu shift=%d", n, shift);
    cuda_add(d_a, d_a, d_b, n); /* out aliases a */
    float *got_alias = download_bf16(d_a, n);
    expect_below(relative_error(got_alias, want, n), ACT_TOL, "add in place n=%zu shift=%d", n,
                 shift);
    float *want_scaled = host_copy(b, n);
    cpu->scale(want_scaled, -0.37f, n);
    cuda_scale(d_b, -0.37f, n);
    float *got_scaled = download_bf16(d_b, n);
    expect_below(relative_error(got_scaled, want_scaled, n), ACT_TOL, "scale n=%zu shift=%d", n,
                 shift);
    free(a); free(b); free(want); free(got); free(got_alias); free(want_scaled); free(got_scaled);
    cudaFree(b1); cudaFree(b2); cudaFree(b3);
}

/* sum_blocks (--tp-comm-overlap's reduce-scatter): own and received[ranks][n] summed in rank order */
static void test_sum_blocks(size_t n, int ranks, int own_rank, int shift) {
    float *own = host_random(n, 410 + n, 1.0f), *received = host_random(n * (size_t)ranks, 411 + n, 1.0f);
    float *want = host_alloc(n);
    cpu->sum_blocks(want, own, received, ranks, own_rank, n);
    void *b1, *b2, *b3;
    bf16 *d_own = upload_bf16_shifted(own, n, shift, &b1);
    bf16 *d_received = upload_bf16_shifted(received, n * (size_t)ranks, shift, &b2);
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b3);
    poison(d_out, n * sizeof(bf16));
    cuda_sum_blocks(d_out, d_own, d_received, ranks, own_rank, n);
    float *got = download_bf16(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "sum_blocks n=%zu ranks=%d own=%d shift=%d", n, ranks,
                 own_rank, shift);
    cuda_sum_blocks(d_own, d_own, d_received, ranks, own_rank, n); /* out aliases own */
    float *got_alias = download_bf16(d_own, n);
    expect_below(relative_error(got_alias, want, n), ACT_TOL, "sum_blocks in place n=%zu ranks=%d own=%d", n,
                 ranks, own_rank);
    free(own); free(received); free(want); free(got); free(got_alias);
    cudaFree(b1); cudaFree(b2); cudaFree(b3);
}

static void test_bias(int N, int C, int shift) {
    size_t n = (size_t)N * C;
    float *out = host_random(n, 500 + n, 1.0f), *bias = host_random((size_t)C, 501 + C, 1.0f);
    float *dout = host_random(n, 502 + n, 1.0f);
    float *dbias = host_random_fp32((size_t)C, 503 + C, 1.0f);
    float *want = host_copy(out, n), *want_dbias = host_copy(dbias, (size_t)C);
    cpu->bias_add(want, bias, N, C);
    cpu->bias_backward(want_dbias, dout, N, C);
    void *b1, *b2, *b3;
    bf16 *d_out = upload_bf16_shifted(out, n, shift, &b1);
    bf16 *d_bias = upload_bf16_shifted(bias, (size_t)C, shift, &b2);
    bf16 *d_dout = upload_bf16_shifted(dout, n, shift, &b3);
    float *d_dbias = upload_float(dbias, (size_t)C);
    cuda_bias_add(d_out, d_bias, N, C);
    float *got = download_bf16(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "bias_add N=%d C=%d shift=%d", N, C,
                 shift);
    cuda_bias_backward(d_dbias, d_dout, N, C);
    float *got_dbias = download_float(d_dbias, (size_t)C);
    expect_below(relative_error(got_dbias, want_dbias, (size_t)C), GRAD_TOL,
                 "bias_backward accumulates N=%d C=%d shift=%d", N, C, shift);
    set_float(d_dbias, dbias, (size_t)C);
    cuda_bias_backward(d_dbias, d_dout, N, C);
    float *again = download_float(d_dbias, (size_t)C);
    expect_identical(again, got_dbias, (size_t)C * sizeof(float),
                     "bias_backward N=%d C=%d is deterministic", N, C);
    free(out); free(bias); free(dout); free(dbias); free(want); free(want_dbias); free(got);
    free(got_dbias); free(again);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(d_dbias);
}

/* dropout_bias_backward: the bits of dropout_backward then bias_backward on the GPU (dx and
 * dbias), the rule's mask, and dbias against the CPU's two ops; in place (dx aliasing dout) too */
static void test_dropout_bias_backward(int N, int C, int shift, float p, uint64_t offset) {
    size_t n = (size_t)N * C;
    dropout_rng rng = {p, 97531, 0x2545f4914f6cdd1dull ^ n, offset};
    float *dout = host_random(n, 520 + n, 1.0f), *dbias = host_random_fp32((size_t)C, 521 + C, 1.0f);
    float *want_dx = host_alloc(n), *want_dbias = host_copy(dbias, (size_t)C);
    cpu->dropout_bias_backward(want_dx, want_dbias, dout, N, C, rng);
    void *b1, *b2, *b3;
    bf16 *d_dout = upload_bf16_shifted(dout, n, shift, &b1);
    bf16 *d_dx = alloc_bf16_shifted(n, shift, &b2), *d_dx2 = alloc_bf16_shifted(n, shift, &b3);
    float *d_dbias = upload_float(dbias, (size_t)C), *d_dbias2 = upload_float(dbias, (size_t)C);
    poison(d_dx, n * sizeof(bf16));
    cuda_dropout_bias_backward(d_dx, d_dbias, d_dout, N, C, rng);
    cuda_dropout_backward(d_dx2, d_dout, n, rng);
    cuda_bias_backward(d_dbias2, d_dx2, N, C);
    float *dx = download_bf16(d_dx, n), *dx2 = download_bf16(d_dx2, n);
    float *got = download_float(d_dbias, (size_t)C), *got2 = download_float(d_dbias2, (size_t)C);
    size_t off_rule = 0;
    for (size_t i = 0; i < n; i++)
        if (dout[i] != 0.0f) off_rule += (dx[i] == 0.0f) == keep_by_rule(rng.seed, rng.stream, rng.offset + i, p);
    tap_ok(memcmp(dx, dx2, n * sizeof(float)) == 0 && memcmp(got, got2, (size_t)C * sizeof(float)) == 0 &&
               off_rule == 0,
           "dropout_bias_backward N=%d C=%d shift=%d p=%.2f offset %% 8 = %d: dropout_backward's and bias_backward's "
           "bits, the rule's mask (%zu off it)", N, C, shift, p, (int)(offset % 8), off_rule);
    expect_below(relative_error(dx, want_dx, n), ACT_TOL, "dropout_bias_backward dx N=%d C=%d p=%.2f", N, C, p);
    expect_below(relative_error(got, want_dbias, (size_t)C), 1e-2,
                 "dropout_bias_backward dbias N=%d C=%d p=%.2f against the CPU (bf16 dx summed)", N, C, p);
    set_float(d_dbias2, dbias, (size_t)C);
    cuda_dropout_bias_backward(d_dout, d_dbias2, d_dout, N, C, rng); /* in place */
    float *dx3 = download_bf16(d_dout, n), *got3 = download_float(d_dbias2, (size_t)C);
    tap_ok(memcmp(dx3, dx, n * sizeof(float)) == 0 && memcmp(got3, got, (size_t)C * sizeof(float)) == 0,
           "dropout_bias_backward N=%d C=%d p=%.2f in place: the same bits", N, C, p);
    free(dout); free(dbias); free(want_dx); free(want_dbias); free(dx); free(dx2); free(got); free(got2);
    free(dx3); free(got3);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(d_dbias); cudaFree(d_dbias2);
}

/* ---- embeddings ---- */

static void test_embedding(int N, int C, int vocab_start, int vocab_rows, int token_range,
                           int repeat_every, int shift) {
    int *tokens = (int *)malloc((size_t)N * sizeof(int));
    uint64_t s = 77 + (uint64_t)N * 31 + (uint64_t)C;
    for (int n = 0; n < N; n++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tokens[n] = (int)((s >> 33) % (uint64_t)token_range);
        if (repeat_every > 0 && n % repeat_every == 0) tokens[n] = vocab_start + vocab_rows / 2;
    }
    size_t table_n = (size_t)vocab_rows * C, out_n = (size_t)N * C;
    float *table = host_random(table_n, 600 + table_n, 1.0f);
    float *want = host_alloc(out_n);
    cpu->embedding_forward(want, tokens, table, N, C, vocab_start, vocab_rows);
    void *b1, *b2, *b3;
    int *d_tokens = upload_int(tokens, (size_t)N);
    bf16 *d_table = upload_bf16_shifted(table, table_n, shift, &b1);
    bf16 *d_out = alloc_bf16_shifted(out_n, shift, &b2);
    poison(d_out, out_n * sizeof(bf16));
    cuda_embedding_forward(d_out, d_tokens, d_table, N, C, vocab_start, vocab_rows);
    float *got = download_bf16(d_out, out_n);
    expect_below(relative_error(got, want, out_n), ACT_TOL,
                 "embedding_forward N=%d C=%d rows [%d,%d) shift=%d", N, C, vocab_start,
                 vocab_start + vocab_rows, shift);

    float *dout = host_random(out_n, 601 + out_n, 1.0f);
    float *dtable = host_random_fp32(table_n, 602 + table_n, 1.0f);
    float *want_dtable = host_copy(dtable, table_n);
    cpu->embedding_backward(want_dtable, dout, tokens, N, C, vocab_start, vocab_rows);
    bf16 *d_dout = upload_bf16_shifted(dout, out_n, shift, &b3);
    float *d_dtable = upload_float(dtable, table_n);
    cuda_embedding_backward(d_dtable, d_dout, d_tokens, N, C, vocab_start, vocab_rows);
    float *got_dtable = download_float(d_dtable, table_n);
    expect_below(relative_error(got_dtable, want_dtable, table_n), EXACT_TOL,
                 "embedding_backward accumulates N=%d C=%d repeat_every=%d shift=%d", N, C,
                 repeat_every, shift);
    set_float(d_dtable, dtable, table_n);
    cuda_embedding_backward(d_dtable, d_dout, d_tokens, N, C, vocab_start, vocab_rows);
    float *again = download_float(d_dtable, table_n);
    expect_identical(again, got_dtable, table_n * sizeof(float),
                     "embedding_backward N=%d C=%d is deterministic", N, C);
    expect_identical(got_dtable, want_dtable, table_n * sizeof(float),
                     "embedding_backward N=%d C=%d equals the CPU bit for bit", N, C);
    free(tokens); free(table); free(want); free(got); free(dout); free(dtable); free(want_dtable);
    free(got_dtable); free(again);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(d_tokens); cudaFree(d_dtable);
}

static void test_position_embedding(int B, int T, int C, int position_start, int shift) {
    size_t out_n = (size_t)B * T * C, wpe_n = (size_t)(position_start + T + 3) * C;
    float *out = host_random(out_n, 700 + out_n, 1.0f), *wpe = host_random(wpe_n, 701, 1.0f);
    float *want = host_copy(out, out_n);
    cpu->position_embedding_forward(want, wpe, B, T, C, position_start);
    void *b1, *b2, *b3;
    bf16 *d_out = upload_bf16_shifted(out, out_n, shift, &b1);
    bf16 *d_wpe = upload_bf16_shifted(wpe, wpe_n, shift, &b2);
    cuda_position_embedding_forward(d_out, d_wpe, B, T, C, position_start);
    float *got = download_bf16(d_out, out_n);
    expect_below(relative_error(got, want, out_n), ACT_TOL,
                 "position_embedding_forward B=%d T=%d C=%d start=%d shift=%d", B, T, C,
                 position_start, shift);

    float *dout = host_random(out_n, 702 + out_n, 1.0f);
    float *dwpe = host_random_fp32(wpe_n, 703, 1.0f);
    float *want_dwpe = host_copy(dwpe, wpe_n);
    cpu->position_embedding_backward(want_dwpe, dout, B, T, C, position_start);
    bf16 *d_dout = upload_bf16_shifted(dout, out_n, shift, &b3);
    float *d_dwpe = upload_float(dwpe, wpe_n);
    cuda_position_embedding_backward(d_dwpe, d_dout, B, T, C, position_start);
    float *got_dwpe = download_float(d_dwpe, wpe_n);
    expect_below(relative_error(got_dwpe, want_dwpe, wpe_n), EXACT_TOL,
                 "position_embedding_backward accumulates B=%d T=%d C=%d shift=%d", B, T, C,
                 shift);
    free(out); free(wpe); free(want); free(got); free(dout); free(dwpe); free(want_dwpe);
    free(got_dwpe);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(d_dwpe);
}

/* ---- layer norm ---- */

/* the gradients a norm backward accumulates into, back to their starting values */
static void reset_norm_grads(bf16 *d_dx, const float *dx, float *d_dw, const float *dw, float *d_db, const float *db,
                             size_t n, int C) {
    set_bf16(d_dx, dx, n);
    set_float(d_dw, dw, (size_t)C);
    set_float(d_db, db, (size_t)C);
}

static void test_layernorm(int N, int C, int shift) {
    size_t n = (size_t)N * C;
    float *x = host_random_fp32(n, 800 + n, 1.0f);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * x[i] + 0.5f; /* rows with a nonzero mean */
    round_to_bf16(x, n);
    float *w = host_random((size_t)C, 801 + C, 0.5f), *b = host_random((size_t)C, 802 + C, 0.5f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    round_to_bf16(w, (size_t)C);
    float *want = host_alloc(n), *want_mean = host_alloc((size_t)N), *want_rstd = host_alloc((size_t)N);
    cpu->layernorm_forward(want, want_mean, want_rstd, x, w, b, N, C, 1e-5f);

    void *b1, *b2, *b3, *b4, *b5, *b6;
    bf16 *d_x = upload_bf16_shifted(x, n, shift, &b1);
    bf16 *d_w = upload_bf16_shifted(w, (size_t)C, shift, &b2);
    bf16 *d_b = upload_bf16_shifted(b, (size_t)C, shift, &b3);
    bf16 *d_out = alloc_bf16_shifted(n, shift, &b4);
    float *d_mean = (float *)device_alloc((size_t)N * sizeof(float));
    float *d_rstd = (float *)device_alloc((size_t)N * sizeof(float));
    poison(d_out, n * sizeof(bf16));
    poison(d_mean, (size_t)N * sizeof(float));
    poison(d_rstd, (size_t)N * sizeof(float));
    cuda_layernorm_forward(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, 1e-5f);
    float *got = download_bf16(d_out, n);
    float *got_mean = download_float(d_mean, (size_t)N), *got_rstd = download_float(d_rstd, (size_t)N);
    expect_below(relative_error(got, want, n), ACT_TOL, "layernorm_forward N=%d C=%d shift=%d", N,
                 C, shift);
    expect_below(relative_error(got_mean, want_mean, (size_t)N), GRAD_TOL,
                 "layernorm_forward mean N=%d C=%d", N, C);
    expect_below(relative_error(got_rstd, want_rstd, (size_t)N), GRAD_TOL,
                 "layernorm_forward rstd N=%d C=%d", N, C);

    /* backward from the CPU's statistics, onto prefilled gradients */
    float *dout = host_random(n, 803 + n, 1.0f);
    float *dx = host_random(n, 804 + n, 0.5f);
    float *dw = host_random_fp32((size_t)C, 805 + C, 1.0f);
    float *db = host_random_fp32((size_t)C, 806 + C, 1.0f);
    float *want_dx = host_copy(dx, n), *want_dw = host_copy(dw, (size_t)C);
    float *want_db = host_copy(db, (size_t)C);
    cpu->layernorm_backward(want_dx, want_dw, want_db, NULL, dout, x, w, want_mean, want_rstd, N, C);
    bf16 *d_dout = upload_bf16_shifted(dout, n, shift, &b5);
    bf16 *d_dx = upload_bf16_shifted(dx, n, shift, &b6);
    float *d_dw = upload_float(dw, (size_t)C), *d_db = upload_float(db, (size_t)C);
    set_float(d_mean, want_mean, (size_t)N);
    set_float(d_rstd, want_rstd, (size_t)N);
    cuda_layernorm_backward(d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
    float *got_dx = download_bf16(d_dx, n);
    float *got_dw = download_float(d_dw, (size_t)C), *got_db = download_float(d_db, (size_t)C);
    expect_below(relative_error(got_dx, want_dx, n), ACT_TOL,
                 "layernorm_backward dx accumulates N=%d C=%d shift=%d", N, C, shift);
    expect_below(relative_error(got_dw, want_dw, (size_t)C), GRAD_TOL,
                 "layernorm_backward dweight accumulates N=%d C=%d", N, C);
    expect_below(relative_error(got_db, want_db, (size_t)C), GRAD_TOL,
                 "layernorm_backward dbias accumulates N=%d C=%d", N, C);

    reset_norm_grads(d_dx, dx, d_dw, dw, d_db, db, n, C);
    cuda_layernorm_backward(d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
    float *again_dx = download_bf16(d_dx, n);
    float *again_dw = download_float(d_dw, (size_t)C), *again_db = download_float(d_db, (size_t)C);
    tap_ok(memcmp(again_dx, got_dx, n * sizeof(float)) == 0 &&
               memcmp(again_dw, got_dw, (size_t)C * sizeof(float)) == 0 &&
               memcmp(again_db, got_db, (size_t)C * sizeof(float)) == 0,
           "layernorm_backward N=%d C=%d is deterministic", N, C);

    /* with the column sums of the updated dx (the residual bias gradient): dx, dweight and dbias
     * bitwise those above, dx_colsum += the sums of the dx stored */
    float *colsum = host_random_fp32((size_t)C, 807 + C, 1.0f), *want_colsum = host_copy(colsum, (size_t)C);
    float *d_colsum = upload_float(colsum, (size_t)C);
    reset_norm_grads(d_dx, dx, d_dw, dw, d_db, db, n, C);
    cuda_layernorm_backward_colsum(d_dx, d_dw, d_db, d_colsum, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
    float *sum_dx = download_bf16(d_dx, n), *sum_dw = download_float(d_dw, (size_t)C);
    float *sum_db = download_float(d_db, (size_t)C), *got_colsum = download_float(d_colsum, (size_t)C);
    tap_ok(memcmp(sum_dx, got_dx, n * sizeof(float)) == 0 && memcmp(sum_dw, got_dw, (size_t)C * sizeof(float)) == 0 &&
               memcmp(sum_db, got_db, (size_t)C * sizeof(float)) == 0,
           "layernorm_backward_colsum N=%d C=%d: dx, dweight, dbias bitwise those without the sums", N, C);
    cpu->bias_backward(want_colsum, got_dx, N, C);
    expect_below(relative_error(got_colsum, want_colsum, (size_t)C), GRAD_TOL,
                 "layernorm_backward_colsum N=%d C=%d: dx_colsum += the column sums of the stored dx", N, C);
    free(sum_dx); free(sum_dw); free(sum_db); free(got_colsum);

    /* from the output (--memory-efficient-layer-norm): from the GPU's forward output y, against
     * the CPU's backward from the same y; then with the residual bias sums (bitwise the same dx,
     * dweight, dbias; the sums of the dx stored) */
    float *me_dx = host_copy(dx, n), *me_dw = host_copy(dw, (size_t)C), *me_db = host_copy(db, (size_t)C);
    cpu->layernorm_backward_from_output(me_dx, me_dw, me_db, NULL, dout, got, w, b, want_rstd, N, C, 1e-5f);
    reset_norm_grads(d_dx, dx, d_dw, dw, d_db, db, n, C);
    cuda_layernorm_backward_from_output(d_dx, d_dw, d_db, NULL, d_dout, d_out, d_w, d_b, d_rstd, N, C, 1e-5f);
    float *me_got_dx = download_bf16(d_dx, n);
    float *me_got_dw = download_float(d_dw, (size_t)C), *me_got_db = download_float(d_db, (size_t)C);
    expect_below(relative_error(me_got_dx, me_dx, n), ACT_TOL,
                 "layernorm_backward_from_output dx accumulates N=%d C=%d shift=%d", N, C, shift);
    expect_below(relative_error(me_got_dw, me_dw, (size_t)C), GRAD_TOL,
                 "layernorm_backward_from_output dweight accumulates N=%d C=%d", N, C);
    expect_below(relative_error(me_got_db, me_db, (size_t)C), GRAD_TOL,
                 "layernorm_backward_from_output dbias accumulates N=%d C=%d", N, C);
    reset_norm_grads(d_dx, dx, d_dw, dw, d_db, db, n, C);
    set_float(d_colsum, colsum, (size_t)C);
    cuda_layernorm_backward_from_output(d_dx, d_dw, d_db, d_colsum, d_dout, d_out, d_w, d_b, d_rstd, N, C, 1e-5f);
    float *me_sum_dx = download_bf16(d_dx, n), *me_sum_dw = download_float(d_dw, (size_t)C);
    float *me_sum_db = download_float(d_db, (size_t)C), *me_colsum = download_float(d_colsum, (size_t)C);
    float *me_want_colsum = host_copy(colsum, (size_t)C);
    cpu->bias_backward(me_want_colsum, me_got_dx, N, C);
    tap_ok(memcmp(me_sum_dx, me_got_dx, n * sizeof(float)) == 0 &&
               memcmp(me_sum_dw, me_got_dw, (size_t)C * sizeof(float)) == 0 &&
               memcmp(me_sum_db, me_got_db, (size_t)C * sizeof(float)) == 0 &&
               relative_error(me_colsum, me_want_colsum, (size_t)C) < GRAD_TOL,
           "layernorm_backward_from_output with the residual bias sums N=%d C=%d: the same dx, dweight, dbias; the sums "
           "of the stored dx", N, C);
    free(me_dx); free(me_dw); free(me_db); free(me_got_dx); free(me_got_dw); free(me_got_db);
    free(me_sum_dx); free(me_sum_dw); free(me_sum_db); free(me_colsum); free(me_want_colsum);
    free(colsum); free(want_colsum);
    cudaFree(d_colsum);

    free(x); free(w); free(b); free(want); free(want_mean); free(want_rstd); free(got);
    free(got_mean); free(got_rstd); free(dout); free(dx); free(dw); free(db); free(want_dx);
    free(want_dw); free(want_db); free(got_dx); free(got_dw); free(got_db); free(again_dx);
    free(again_dw); free(again_db);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(b4); cudaFree(b5); cudaFree(b6);
    cudaFree(d_mean); cudaFree(d_rstd); cudaFree(d_dw); cudaFree(d_db);
}

/* ---- the Llama family: RMSNorm, rotary embeddings, SwiGLU ---- */

static void test_rmsnorm(int N, int C) {
    size_t n = (size_t)N * C;
    float *x = host_random(n, 900 + n, 2.0f), *w = host_random((size_t)C, 901 + C, 0.5f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    round_to_bf16(w, (size_t)C);
    float *want = host_alloc(n), *want_rstd = host_alloc((size_t)N);
    cpu->rmsnorm_forward(want, want_rstd, x, w, N, C, 1e-5f);
    bf16 *d_x = upload_bf16(x, n), *d_w = upload_bf16(w, (size_t)C);
    bf16 *d_out = (bf16 *)device_alloc(n * sizeof(bf16));
    float *d_rstd = (float *)device_alloc((size_t)N * sizeof(float));
    poison(d_out, n * sizeof(bf16));
    poison(d_rstd, (size_t)N * sizeof(float));
    cuda_rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, 1e-5f);
    float *got = download_bf16(d_out, n), *got_rstd = download_float(d_rstd, (size_t)N);
    expect_below(relative_error(got, want, n), ACT_TOL, "rmsnorm_forward N=%d C=%d", N, C);
    expect_below(relative_error(got_rstd, want_rstd, (size_t)N), GRAD_TOL, "rmsnorm_forward rstd N=%d C=%d", N, C);

    /* backward from the CPU's statistic, onto prefilled gradients */
    float *dout = host_random(n, 902 + n, 1.0f), *dx = host_random(n, 903 + n, 0.5f);
    float *dw = host_random_fp32((size_t)C, 904 + C, 1.0f);
    float *want_dx = host_copy(dx, n), *want_dw = host_copy(dw, (size_t)C);
    cpu->rmsnorm_backward(want_dx, want_dw, dout, x, w, want_rstd, N, C);
    bf16 *d_dout = upload_bf16(dout, n), *d_dx = upload_bf16(dx, n);
    float *d_dw = upload_float(dw, (size_t)C);
    set_float(d_rstd, want_rstd, (size_t)N);
    cuda_rmsnorm_backward(d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
    float *got_dx = download_bf16(d_dx, n), *got_dw = download_float(d_dw, (size_t)C);
    expect_below(relative_error(got_dx, want_dx, n), ACT_TOL, "rmsnorm_backward dx accumulates N=%d C=%d", N, C);
    expect_below(relative_error(got_dw, want_dw, (size_t)C), GRAD_TOL, "rmsnorm_backward dweight accumulates N=%d C=%d", N, C);
    set_bf16(d_dx, dx, n);
    set_float(d_dw, dw, (size_t)C);
    cuda_rmsnorm_backward(d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
    float *again_dx = download_bf16(d_dx, n), *again_dw = download_float(d_dw, (size_t)C);
    tap_ok(memcmp(again_dx, got_dx, n * sizeof(float)) == 0 && memcmp(again_dw, got_dw, (size_t)C * sizeof(float)) == 0,
           "rmsnorm_backward N=%d C=%d is deterministic", N, C);
    /* from the output (--memory-efficient-layer-norm), the GPU's forward output, against the CPU */
    float *me_dx = host_copy(dx, n), *me_dw = host_copy(dw, (size_t)C);
    cpu->rmsnorm_backward_from_output(me_dx, me_dw, dout, got, w, want_rstd, N, C, 1e-5f);
    set_bf16(d_dx, dx, n);
    set_float(d_dw, dw, (size_t)C);
    cuda_rmsnorm_backward_from_output(d_dx, d_dw, d_dout, d_out, d_w, d_rstd, N, C, 1e-5f);
    float *me_got_dx = download_bf16(d_dx, n), *me_got_dw = download_float(d_dw, (size_t)C);
    expect_below(relative_error(me_got_dx, me_dx, n), ACT_TOL, "rmsnorm_backward_from_output dx accumulates N=%d C=%d",
                 N, C);
    expect_below(relative_error(me_got_dw, me_dw, (size_t)C), GRAD_TOL,
                 "rmsnorm_backward_from_output dweight accumulates N=%d C=%d", N, C);
    free(me_dx); free(me_dw); free(me_got_dx); free(me_got_dw);
    free(x); free(w); free(want); free(want_rstd); free(got); free(got_rstd); free(dout); free(dx); free(dw);
    free(want_dx); free(want_dw); free(got_dx); free(got_dw); free(again_dx); free(again_dw);
    cudaFree(d_x); cudaFree(d_w); cudaFree(d_out); cudaFree(d_rstd); cudaFree(d_dout); cudaFree(d_dx); cudaFree(d_dw);
}

/* H query heads in G groups of dimension D at T positions from position_start (generation: the
 * key/value cache position), with Llama 3's rope scaling when scaling_factor > 0; the CPU rotates
 * the same bf16 values */
static void test_rope_at(int B, int T, int H, int G, int D, int rotary_dim, int interleaved, float base,
                         int position_start, float scaling_factor) {
    rope_spec rope = {rotary_dim, interleaved, base, 1.0f, position_start, scaling_factor};
    size_t n = (size_t)B * T * (H + 2 * G) * D;
    float *x = host_random(n, 950 + n, 2.0f), *want = host_copy(x, n), *want_back = host_copy(x, n);
    cpu->rope_forward(want, B, T, H, G, D, rope);
    cpu->rope_backward(want_back, B, T, H, G, D, rope);
    bf16 *d_x = upload_bf16(x, n);
    cuda_rope_forward(d_x, B, T, H, G, D, rope);
    float *got = download_bf16(d_x, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "rope_forward B=%d T=%d H=%d G=%d D=%d rot=%d %s base %g from %d scaling %g", B,
                 T, H, G, D, rotary_dim, interleaved ? "interleaved" : "half", (double)base, position_start,
                 (double)scaling_factor);
    set_bf16(d_x, x, n);
    cuda_rope_backward(d_x, B, T, H, G, D, rope);
    float *got_back = download_bf16(d_x, n);
    expect_below(relative_error(got_back, want_back, n), ACT_TOL, "rope_backward B=%d T=%d H=%d G=%d D=%d rot=%d %s", B,
                 T, H, G, D, rotary_dim, interleaved ? "interleaved" : "half");
    free(x); free(want); free(want_back); free(got); free(got_back);
    cudaFree(d_x);
}

static void test_rope(int B, int T, int H, int G, int D, int rotary_dim, int interleaved, float base) {
    test_rope_at(B, T, H, G, D, rotary_dim, interleaved, base, 0, 0.0f);
}

static void test_swiglu(int N, int F) {
    size_t nx = (size_t)N * 2 * F, n = (size_t)N * F;
    float *x = host_random(nx, 970 + nx, 4.0f), *dout = host_random(n, 971 + n, 1.0f);
    float *want = host_alloc(n), *want_dx = host_alloc(nx);
    cpu->swiglu_forward(want, x, N, F);
    cpu->swiglu_backward(want_dx, x, dout, N, F);
    bf16 *d_x = upload_bf16(x, nx), *d_dout = upload_bf16(dout, n);
    bf16 *d_out = (bf16 *)device_alloc(n * sizeof(bf16)), *d_dx = (bf16 *)device_alloc(nx * sizeof(bf16));
    poison(d_out, n * sizeof(bf16));
    poison(d_dx, nx * sizeof(bf16));
    cuda_swiglu_forward(d_out, d_x, N, F);
    cuda_swiglu_backward(d_dx, d_x, d_dout, N, F);
    float *got = download_bf16(d_out, n), *got_dx = download_bf16(d_dx, nx);
    expect_below(relative_error(got, want, n), ACT_TOL, "swiglu_forward N=%d F=%d", N, F);
    expect_below(relative_error(got_dx, want_dx, nx), ACT_TOL, "swiglu_backward N=%d F=%d", N, F);
    /* the backward with the output made again over its dout (fc2's input gradient): bitwise the
     * two kernels above */
    bf16 *d_dx2 = (bf16 *)device_alloc(nx * sizeof(bf16)), *d_both = upload_bf16(dout, n);
    poison(d_dx2, nx * sizeof(bf16));
    cuda_swiglu_backward_remake(d_dx2, d_both, d_x, d_both, N, F);
    float *got_dx2 = download_bf16(d_dx2, nx), *got_both = download_bf16(d_both, n);
    tap_ok(memcmp(got_dx2, got_dx, nx * sizeof(float)) == 0 && memcmp(got_both, got, n * sizeof(float)) == 0,
                "swiglu_backward_remake N=%d F=%d: bitwise swiglu_backward then swiglu_forward", N, F);
    free(x); free(dout); free(want); free(want_dx); free(got); free(got_dx); free(got_dx2); free(got_both);
    cudaFree(d_x); cudaFree(d_dout); cudaFree(d_out); cudaFree(d_dx); cudaFree(d_dx2); cudaFree(d_both);
}

/* the greedy decoder's row argmax against the CPU's on the same bf16 values: the same ids (the
 * lowest on ties: each row repeats its maximum at a later column), only the first `valid` columns */
static void test_logits_argmax(int N, int V, int valid) {
    size_t n = (size_t)N * V;
    float *logits = host_random(n, 990 + n, 8.0f);
    for (int r = 0; r < N; r++) {  /* a tie: the row's first column's value again further on */
        logits[(size_t)r * V + (size_t)(r % valid)] = 20.0f;
        if (r % valid + 3 < valid) logits[(size_t)r * V + (size_t)(r % valid + 3)] = 20.0f;
        if (valid < V) logits[(size_t)r * V + (size_t)valid] = 99.0f;  /* padding: never chosen */
    }
    round_to_bf16(logits, n);
    float *want_max = host_alloc((size_t)N);
    int *want = malloc(sizeof(int) * (size_t)N), *got = malloc(sizeof(int) * (size_t)N);
    cpu->logits_argmax(want_max, want, logits, N, V, valid);
    bf16 *d_logits = upload_bf16(logits, n);
    float *d_max = (float *)device_alloc(sizeof(float) * (size_t)N);
    int *d_arg = (int *)device_alloc(sizeof(int) * (size_t)N);
    cuda_logits_argmax(d_max, d_arg, d_logits, N, V, valid);
    TEST_CUDA(cudaMemcpy(got, d_arg, sizeof(int) * (size_t)N, cudaMemcpyDeviceToHost));
    float *got_max = download_float(d_max, (size_t)N);
    int same = 0;
    for (int r = 0; r < N; r++) same += got[r] == want[r] && got_max[r] == want_max[r];
    tap_ok(same == N, "logits_argmax N=%d V=%d valid=%d: %d of %d rows give the CPU's id and maximum", N, V, valid, same, N);
    free(logits); free(want_max); free(want); free(got); free(got_max);
    cudaFree(d_logits); cudaFree(d_max); cudaFree(d_arg);
}

/* ---- matmul ---- */

/* fc2's backward with the GeLU's fused (the DGELU epilogue where IC % 8 == 0, else two passes)
 * against the CPU's steps; dweight accumulates as matmul_backward's; x, fc2's input, is recomputed
 * as gelu(pre) (poisoned before the call) and the weight gradient uses it */
static void test_matmul_backward_gelu(int N, int IC, int OC) {
    size_t x_n = (size_t)N * IC, w_n = (size_t)OC * IC, out_n = (size_t)N * OC;
    float *pre = host_random(x_n, 910 + x_n, 2.0f), *w = host_random(w_n, 911 + w_n, 0.1f);
    float *dout = host_random(out_n, 912 + out_n, 1.0f), *x = host_alloc(x_n);
    round_to_bf16(pre, x_n); /* the GPU's pre-activation is stored in bf16 */
    float *dw = host_random_fp32(w_n, 913 + w_n, 1.0f);
    float *want_dpre = host_alloc(x_n), *want_dw = host_copy(dw, w_n);
    cpu->matmul_backward_gelu(want_dpre, want_dw, dout, x, pre, w, N, IC, OC, 0);  /* x = gelu(pre) */
    /* the GPU's recomputed x is bf16: the weight gradient of that x, in fp32 */
    float *x16 = host_copy(x, x_n);
    round_to_bf16(x16, x_n);
    memcpy(want_dw, dw, sizeof(float) * w_n);
    cpu->matmul_backward(NULL, want_dw, NULL, dout, x16, w, N, IC, OC);
    bf16 *d_pre = upload_bf16(pre, x_n), *d_w = upload_bf16(w, w_n), *d_dout = upload_bf16(dout, out_n);
    bf16 *d_x = upload_bf16(x, x_n), *d_dpre = upload_bf16(x, x_n);
    float *d_dw = upload_float(dw, w_n);
    poison(d_dpre, x_n * sizeof(bf16));
    poison(d_x, x_n * sizeof(bf16));
    cuda_matmul_backward_gelu(d_dpre, d_dw, d_dout, d_x, d_pre, d_w, N, IC, OC, 0);
    float *got_dpre = download_bf16(d_dpre, x_n), *got_dw = download_float(d_dw, w_n), *got_x = download_bf16(d_x, x_n);
    expect_below(relative_error(got_dpre, want_dpre, x_n), ACT_TOL,
                 "matmul_backward_gelu dpre = (dout W) gelu'(pre) N=%d IC=%d OC=%d%s", N, IC, OC,
                 IC % 8 == 0 ? " (DGELU epilogue)" : " (two passes)");
    expect_below(relative_error(got_x, x, x_n), ACT_TOL, "matmul_backward_gelu recomputes x = gelu(pre) N=%d IC=%d OC=%d",
                 N, IC, OC);
    expect_below(relative_error(got_dw, want_dw, w_n), GRAD_TOL, "matmul_backward_gelu dweight accumulates N=%d IC=%d OC=%d",
                 N, IC, OC);
    free(pre); free(w); free(dout); free(x); free(dw); free(want_dpre); free(want_dw); free(got_dpre); free(got_dw);
    free(got_x); free(x16);
    cudaFree(d_pre); cudaFree(d_w); cudaFree(d_dout); cudaFree(d_x); cudaFree(d_dpre); cudaFree(d_dw);
}

/* the same with x kept from the forward (--keep-mlp-activation): x holds gelu(pre) and dpre is x
 * itself, so the weight gradient must read x before the input gradient overwrites it; a weight
 * gradient of the overwritten x, or a dpre of a stale x, fails one of the two checks */
static void test_matmul_backward_gelu_kept(int N, int IC, int OC) {
    size_t x_n = (size_t)N * IC, w_n = (size_t)OC * IC, out_n = (size_t)N * OC;
    float *pre = host_random(x_n, 920 + x_n, 2.0f), *w = host_random(w_n, 921 + w_n, 0.1f);
    float *dout = host_random(out_n, 922 + out_n, 1.0f), *x = host_alloc(x_n);
    round_to_bf16(pre, x_n);
    float *dw = host_random_fp32(w_n, 923 + w_n, 1.0f);
    float *want_dpre = host_alloc(x_n), *want_dw = host_copy(dw, w_n);
    cpu->gelu_forward(x, pre, x_n);
    round_to_bf16(x, x_n); /* the kept activation is bf16 */
    float *x_kept = host_copy(x, x_n);
    cpu->matmul_backward_gelu(x_kept, want_dw, dout, x_kept, pre, w, N, IC, OC, 1); /* dpre over x, as the model */
    memcpy(want_dpre, x_kept, sizeof(float) * x_n);
    bf16 *d_pre = upload_bf16(pre, x_n), *d_w = upload_bf16(w, w_n), *d_dout = upload_bf16(dout, out_n);
    bf16 *d_x = upload_bf16(x, x_n);
    float *d_dw = upload_float(dw, w_n);
    cuda_matmul_backward_gelu(d_x, d_dw, d_dout, d_x, d_pre, d_w, N, IC, OC, 1);
    float *got_dpre = download_bf16(d_x, x_n), *got_dw = download_float(d_dw, w_n);
    expect_below(relative_error(got_dpre, want_dpre, x_n), ACT_TOL,
                 "matmul_backward_gelu, x kept: dpre = (dout W) gelu'(pre) over x N=%d IC=%d OC=%d%s", N, IC, OC,
                 IC % 8 == 0 ? " (DGELU epilogue)" : " (two passes)");
    expect_below(relative_error(got_dw, want_dw, w_n), GRAD_TOL,
                 "matmul_backward_gelu, x kept: dweight from the kept x N=%d IC=%d OC=%d", N, IC, OC);
    free(pre); free(w); free(dout); free(x); free(dw); free(want_dpre); free(want_dw); free(x_kept); free(got_dpre);
    free(got_dw);
    cudaFree(d_pre); cudaFree(d_w); cudaFree(d_dout); cudaFree(d_x); cudaFree(d_dw);
}

static void test_matmul(int N, int IC, int OC, int with_bias, int with_gelu, int shift) {
    size_t x_n = (size_t)N * IC, w_n = (size_t)OC * IC, out_n = (size_t)N * OC;
    float *x = host_random(x_n, 900 + x_n, 1.0f), *w = host_random(w_n, 901 + w_n, 0.1f);
    float *bias = with_bias ? host_random((size_t)OC, 902 + OC, 0.5f) : NULL;
    float *want = host_alloc(out_n), *want_gelu = host_alloc(out_n);
    cpu->matmul_forward(want, NULL, x, w, bias, N, IC, OC);
    cpu->gelu_forward(want_gelu, want, out_n);
    const char *env = getenv("MEGATRON_C_MATMUL_FALLBACK");
    const char *path = env != NULL && env[0] == '1' ? "fallback" : "cublaslt";

    void *b1, *b2, *b3 = NULL, *b4, *b5 = NULL, *b6, *b7;
    bf16 *d_x = upload_bf16_shifted(x, x_n, shift, &b1);
    bf16 *d_w = upload_bf16_shifted(w, w_n, shift, &b2);
    bf16 *d_bias = with_bias ? upload_bf16_shifted(bias, (size_t)OC, shift, &b3) : NULL;
    bf16 *d_out = alloc_bf16_shifted(out_n, shift, &b4);
    bf16 *d_gelu = with_gelu ? alloc_bf16_shifted(out_n, shift, &b5) : NULL;
    poison(d_out, out_n * sizeof(bf16));
    if (with_gelu) poison(d_gelu, out_n * sizeof(bf16));
    cuda_matmul_forward(d_out, d_gelu, d_x, d_w, d_bias, N, IC, OC);
    float *got = download_bf16(d_out, out_n);
    expect_below(relative_error(got, want, out_n), ACT_TOL,
                 "matmul_forward %s N=%d IC=%d OC=%d bias=%d gelu=%d shift=%d", path, N, IC, OC,
                 with_bias, with_gelu, shift);
    if (with_gelu) {
        float *got_gelu = download_bf16(d_gelu, out_n);
        expect_below(relative_error(got_gelu, want_gelu, out_n), ACT_TOL,
                     "matmul_forward %s gelu_out N=%d IC=%d OC=%d bias=%d shift=%d", path, N, IC,
                     OC, with_bias, shift);
        free(got_gelu);
    }
    if (!with_gelu) { /* the residual join: out = residual + x W^T + bias, one GEMM (beta 1, C = residual) */
        float *residual = host_random(out_n, 906 + out_n, 2.0f), *want_res = host_alloc(out_n);
        cpu->matmul_forward_residual(want_res, x, w, bias, residual, N, IC, OC);
        void *b8, *b9;
        bf16 *d_residual = upload_bf16_shifted(residual, out_n, shift, &b8);
        bf16 *d_res_out = alloc_bf16_shifted(out_n, shift, &b9);
        poison(d_res_out, out_n * sizeof(bf16));
        cuda_matmul_forward_residual(d_res_out, d_x, d_w, d_bias, d_residual, N, IC, OC);
        float *got_res = download_bf16(d_res_out, out_n), *got_residual = download_bf16(d_residual, out_n);
        expect_below(relative_error(got_res, want_res, out_n), ACT_TOL,
                     "matmul_forward_residual %s N=%d IC=%d OC=%d bias=%d shift=%d", path, N, IC, OC, with_bias, shift);
        expect_below(relative_error(got_residual, residual, out_n), ACT_TOL,
                     "matmul_forward_residual leaves the residual as it was N=%d IC=%d OC=%d", N, IC, OC);
        free(residual); free(want_res); free(got_res); free(got_residual);
        cudaFree(b8); cudaFree(b9);
    }

    /* backward onto prefilled dweight/dbias */
    float *dout = host_random(out_n, 903 + out_n, 1.0f);
    float *dw = host_random_fp32(w_n, 904 + w_n, 1.0f);
    float *db = host_random_fp32((size_t)OC, 905 + OC, 1.0f);
    float *want_dx = host_alloc(x_n), *want_dw = host_copy(dw, w_n);
    float *want_db = host_copy(db, (size_t)OC);
    cpu->matmul_backward(want_dx, want_dw, want_db, dout, x, w, N, IC, OC);
    bf16 *d_dout = upload_bf16_shifted(dout, out_n, shift, &b6);
    bf16 *d_dx = alloc_bf16_shifted(x_n, shift, &b7);
    float *d_dw = upload_float(dw, w_n), *d_db = upload_float(db, (size_t)OC);
    poison(d_dx, x_n * sizeof(bf16));
    cuda_matmul_backward(d_dx, d_dw, d_db, d_dout, d_x, d_w, N, IC, OC);
    float *got_dx = download_bf16(d_dx, x_n);
    float *got_dw = download_float(d_dw, w_n), *got_db = download_float(d_db, (size_t)OC);
    expect_below(relative_error(got_dx, want_dx, x_n), ACT_TOL,
                 "matmul_backward %s dx N=%d IC=%d OC=%d shift=%d", path, N, IC, OC, shift);
    expect_below(relative_error(got_dw, want_dw, w_n), GRAD_TOL,
                 "matmul_backward %s dweight accumulates N=%d IC=%d OC=%d shift=%d", path, N, IC,
                 OC, shift);
    expect_below(relative_error(got_db, want_db, (size_t)OC), GRAD_TOL,
                 "matmul_backward %s dbias accumulates N=%d IC=%d OC=%d", path, N, IC, OC);

    /* again without dx and dbias: dweight accumulates once more, identically */
    set_float(d_dw, dw, w_n);
    cuda_matmul_backward(NULL, d_dw, NULL, d_dout, d_x, d_w, N, IC, OC);
    float *again_dw = download_float(d_dw, w_n);
    expect_identical(again_dw, got_dw, w_n * sizeof(float),
                     "matmul_backward %s N=%d IC=%d OC=%d dweight deterministic (dx, dbias NULL)",
                     path, N, IC, OC);
    float *still_db = download_float(d_db, (size_t)OC);
    expect_identical(still_db, got_db, (size_t)OC * sizeof(float),
                     "matmul_backward %s N=%d IC=%d OC=%d leaves dbias alone when NULL", path, N,
                     IC, OC);

    /* the weight gradient written over a poisoned dweight (beta 0: nothing of it is read) */
    float *want_ow = host_copy(dw, w_n);
    cpu->matmul_backward_weight_overwrite(want_ow, dout, x, N, IC, OC);
    poison(d_dw, w_n * sizeof(float));
    cuda_matmul_backward_weight_overwrite(d_dw, d_dout, d_x, N, IC, OC);
    float *got_ow = download_float(d_dw, w_n);
    expect_below(relative_error(got_ow, want_ow, w_n), GRAD_TOL,
                 "matmul_backward_weight_overwrite %s N=%d IC=%d OC=%d over a poisoned dweight", path, N, IC, OC);
    free(want_ow); free(got_ow);

    free(x); free(w); free(bias); free(want); free(want_gelu); free(got); free(dout); free(dw);
    free(db); free(want_dx); free(want_dw); free(want_db); free(got_dx); free(got_dw);
    free(got_db); free(again_dw); free(still_db);
    cudaFree(b1); cudaFree(b2); cudaFree(b4); cudaFree(b6); cudaFree(b7);
    if (b3) cudaFree(b3);
    if (b5) cudaFree(b5);
    cudaFree(d_dw); cudaFree(d_db);
}

/* ---- optimizer ---- */

static void test_adamw(size_t n, int shift, int with_params) {
    const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const int step = 3;
    float *master = host_random_fp32(n, 1000 + n, 1.0f);
    float *grads = host_random_fp32(n, 1001 + n, 0.01f);
    float *m = host_random_fp32(n, 1002 + n, 0.001f);
    float *v = host_random_fp32(n, 1003 + n, 0.03f);
    for (size_t i = 0; i < n; i++) v[i] *= v[i];
    float *want = host_copy(master, n), *want_m = host_copy(m, n), *want_v = host_copy(v, n);
    cpu->adamw_update(want, want, grads, want_m, want_v, n, lr, beta1, beta2, eps, wd, step);
    void *b1, *b2, *b3, *b4, *b5 = NULL;
    float *d_master = upload_float_shifted(master, n, shift, &b1);
    float *d_grads = upload_float_shifted(grads, n, shift, &b2);
    float *d_m = upload_float_shifted(m, n, shift, &b3);
    float *d_v = upload_float_shifted(v, n, shift, &b4);
    bf16 *d_params = with_params ? alloc_bf16_shifted(n, shift, &b5) : NULL;
    if (with_params) poison(d_params, n * sizeof(bf16));
    cuda_adamw_update(d_master, d_params, d_grads, d_m, d_v, n, lr, beta1, beta2, eps, wd, step);
    float *got = download_float(d_master, n), *got_m = download_float(d_m, n);
    float *got_v = download_float(d_v, n);
    expect_below(relative_error(got, want, n), EXACT_TOL, "adamw master n=%zu shift=%d", n, shift);
    expect_below(relative_error(got_m, want_m, n), EXACT_TOL, "adamw m n=%zu shift=%d", n, shift);
    expect_below(relative_error(got_v, want_v, n), EXACT_TOL, "adamw v n=%zu shift=%d", n, shift);
    tap_diag("adamw n=%zu: masters %s the CPU's bit for bit", n,
             memcmp(got, want, n * sizeof(float)) == 0 ? "equal" : "differ from");
    if (with_params) {
        float *got_params = download_bf16(d_params, n);
        float *want_params = host_copy(want, n);
        round_to_bf16(want_params, n);
        expect_below(relative_error(got_params, want_params, n), ACT_TOL,
                     "adamw bf16 params = bf16(master) n=%zu shift=%d", n, shift);
        free(got_params);
        free(want_params);
    }
    free(master); free(grads); free(m); free(v); free(want); free(want_m); free(want_v);
    free(got); free(got_m); free(got_v);
    cudaFree(b1); cudaFree(b2); cudaFree(b3); cudaFree(b4);
    if (b5) cudaFree(b5);
}

/* the multi-tensor AdamW and norm over ranges of different decay, alignment and size (masters
 * in their own state buffer, as the optimizer lays them out), against the CPU bit for bit; with
 * sm_limit > 0 the AdamW runs as that many blocks looping over the chunks (cuda_adamw_set_sm_limit,
 * perf/optimizer_overlap_bench's split variants) */
static void test_ranges(float grad_scale, int sm_limit) {
    const tensor_range ranges[] = {
        {.offset = 0, .state_offset = 0, .length = 4096 * 3 + 1, .weight_decay = 0.1f},
        {.offset = 4096 * 3 + 1, .state_offset = 4096 * 3 + 1, .length = 7, .weight_decay = 0.0f},
        {.offset = 4096 * 3 + 9, .state_offset = 4096 * 3 + 8, .length = 100003, .weight_decay = 0.1f},
        {.offset = 200000, .state_offset = 120000, .length = 768, .weight_decay = 0.0f},
    };
    const int count = 4;
    const size_t n = 200768, states = 120768;
    const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
    float *grads = host_random_fp32(n, 77, 0.01f), *params = host_random_fp32(n, 78, 1.0f);
    float *master = host_random_fp32(states, 79, 1.0f), *m = host_random_fp32(states, 80, 0.001f);
    float *v = host_random_fp32(states, 81, 0.03f);
    for (size_t i = 0; i < states; i++) v[i] *= v[i];
    float *want = host_copy(master, states), *want_m = host_copy(m, states), *want_v = host_copy(v, states);
    float *want_params = host_copy(params, n);
    cpu->adamw_update_ranges(want, want_params, grads, want_m, want_v, ranges, count, grad_scale, lr, beta1, beta2,
                             eps, 4);
    float *d_grads = upload_float(grads, n), *d_master = upload_float(master, states);
    float *d_m = upload_float(m, states), *d_v = upload_float(v, states);
    bf16 *d_params = upload_bf16(params, n);
    cuda_adamw_set_sm_limit(sm_limit);
    cuda_adamw_update_ranges(d_master, d_params, d_grads, d_m, d_v, ranges, count, grad_scale, lr, beta1, beta2,
                             eps, 4);
    cuda_adamw_set_sm_limit(0);
    float *got = download_float(d_master, states), *got_m = download_float(d_m, states);
    float *got_v = download_float(d_v, states), *got_params = download_bf16(d_params, n);
    tap_ok(memcmp(got, want, states * sizeof(float)) == 0 && memcmp(got_m, want_m, states * sizeof(float)) == 0 &&
           memcmp(got_v, want_v, states * sizeof(float)) == 0,
           "adamw_update_ranges grad_scale=%g sm_limit=%d: masters and moments equal the CPU's bit for bit", grad_scale,
           sm_limit);
    round_to_bf16(want_params, n);
    for (size_t i = 0; i < n; i++) /* untouched elements keep their bf16 upload */
        if (i >= 200000 + 768 || (i >= 4096 * 3 + 8 && i < 4096 * 3 + 9) || (i >= 4096 * 3 + 9 + 100003 && i < 200000))
            want_params[i] = got_params[i];
    expect_below(relative_error(got_params, want_params, n), 1e-30, "adamw_update_ranges sm_limit=%d: bf16 params = bf16(master)",
                 sm_limit);
    double want_sum = cpu->sum_squares_ranges(grads, ranges, count);
    double got_sum = cuda_sum_squares_ranges(d_grads, ranges, count), again = cuda_sum_squares_ranges(d_grads, ranges, count);
    expect_below(fabs(got_sum - want_sum) / want_sum, EXACT_TOL, "sum_squares_ranges (gpu %.17g cpu %.17g)", got_sum,
                 want_sum);
    tap_ok(memcmp(&got_sum, &again, sizeof got_sum) == 0, "sum_squares_ranges is deterministic");
    free(grads); free(params); free(master); free(m); free(v); free(want); free(want_m); free(want_v);
    free(want_params); free(got); free(got_m); free(got_v); free(got_params);
    cudaFree(d_grads); cudaFree(d_master); cudaFree(d_m); cudaFree(d_v); cudaFree(d_params);
}

static void test_sum_squares(size_t n, int shift) {
    float *x = host_random_fp32(n, 1100 + n, 1.0f);
    double want = cpu->sum_squares(x, n);
    void *b1;
    float *d_x = upload_float_shifted(x, n, shift, &b1);
    double got = cuda_sum_squares(d_x, n), again = cuda_sum_squares(d_x, n);
    double err = fabs(got - want) / (want > 0.0 ? want : 1.0);
    expect_below(err, EXACT_TOL, "sum_squares n=%zu shift=%d (gpu %.17g cpu %.17g)", n, shift, got,
                 want);
    tap_ok(memcmp(&got, &again, sizeof got) == 0, "sum_squares n=%zu is deterministic", n);
    free(x);
    cudaFree(b1);
}

/* ---- --deterministic-mode's fixed tree (cuda_fixed_tree.cu) ---- */

/* add_float: fp32 sums equal the CPU's bit for bit (float4 and scalar paths, in place) */
static void test_add_float(size_t n, int shift) {
    float *a = host_random_fp32(n, 1200 + n, 3.0f), *b = host_random_fp32(n, 1201 + n, 1e-3f);
    float *want = host_alloc(n);
    cpu->add_float(want, a, b, n);
    void *b1, *b2, *b3;
    float *d_a = upload_float_shifted(a, n, shift, &b1), *d_b = upload_float_shifted(b, n, shift, &b2);
    float *d_out = (float *)device_alloc((n + (size_t)shift) * sizeof(float));
    b3 = d_out;
    d_out += shift;
    poison(d_out, n * sizeof(float));
    TEST_CUDA(cudaDeviceSynchronize()); /* the kernels run on a non-blocking stream */
    kernels_cuda()->add_float(d_out, d_a, d_b, n);
    float *got = download_float(d_out, n);
    expect_identical(got, want, n * sizeof(float), "add_float n=%zu shift=%d: the CPU's bits", n, shift);
    cuda_add_float(d_a, d_a, d_b, n); /* out aliases a */
    float *got_alias = download_float(d_a, n);
    expect_identical(got_alias, want, n * sizeof(float), "add_float in place n=%zu shift=%d: the CPU's bits", n, shift);
    free(a); free(b); free(want); free(got); free(got_alias);
    cudaFree(b1); cudaFree(b2); cudaFree(b3);
}

/* sum_squares_pieces: pieces of odd lengths (empty, one element, around a chunk, over many
 * chunks) at odd offsets: each piece's sum is the CPU's bits, within 1e-12 of a long-double
 * reference, the same on a second call, and the same for the same values at another offset and
 * alignment (the tree depends on a piece's values alone); an all-zero piece sums to 0 */
static void test_sum_squares_pieces(void) {
    const size_t lengths[] = {0, 1, 7, 255, 256, 257, 4095, 4096, 4097, 8192, 12289, 100003, 1000003};
    enum { PIECES = sizeof lengths / sizeof lengths[0] };
    tensor_range pieces[PIECES + 1], moved[PIECES + 1];
    size_t n = 0;
    for (int p = 0; p < PIECES; p++) {
        pieces[p] = (tensor_range){.offset = n + 3, .length = lengths[p]};
        n += lengths[p] + 3 + (size_t)p;
    }
    size_t zeros_at = n;
    pieces[PIECES] = (tensor_range){.offset = zeros_at, .length = 5000};
    n += 5000;
    const int count = PIECES + 1;
    /* values from 1e-4 to 30 in magnitude: squares over 13 decades, so the order shows */
    float *x = host_random_fp32(2 * n + 1, 1300, 1.0f);
    for (size_t i = 0; i < 2 * n + 1; i++) x[i] *= (i % 3 == 0) ? 30.0f : (i % 3 == 1) ? 1e-4f : 1.0f;
    for (size_t i = 0; i < 5000; i++) x[zeros_at + i] = 0.0f;
    /* the same values again from n + 1 on (another place, another alignment) */
    for (int p = 0; p < count; p++) {
        moved[p] = (tensor_range){.offset = n + 1 + pieces[p].offset, .length = pieces[p].length};
        memcpy(x + moved[p].offset, x + pieces[p].offset, pieces[p].length * sizeof(float));
    }
    double want[PIECES + 1], got[PIECES + 1], again[PIECES + 1], got_moved[PIECES + 1];
    cpu->sum_squares_pieces(want, x, pieces, count);
    float *d_x = upload_float(x, 2 * n + 1);
    kernels_cuda()->sum_squares_pieces(got, d_x, pieces, count);
    cuda_sum_squares_pieces(again, d_x, pieces, count);
    cuda_sum_squares_pieces(got_moved, d_x, moved, count);
    double worst = 0.0;
    int nonzero = 1;
    for (int p = 0; p < PIECES; p++) {
        long double reference = 0.0L;
        for (size_t i = 0; i < pieces[p].length; i++) {
            long double v = x[pieces[p].offset + i];
            reference += v * v;
        }
        double error = reference > 0.0L ? (double)fabsl((long double)got[p] - reference) / (double)reference
                                        : fabs(got[p]);
        if (error > worst) worst = error;
        if (pieces[p].length > 0 && !(got[p] > 0.0)) nonzero = 0;
    }
    expect_identical(got, want, sizeof got, "sum_squares_pieces: %d pieces (0 to 1000003 elements, odd offsets) give "
                     "the CPU's bits", count);
    expect_below(worst, 1e-12, "sum_squares_pieces: within 1e-12 of a long-double reference");
    tap_ok(nonzero && got[0] == 0.0 && got[PIECES] == 0.0, "sum_squares_pieces: empty and all-zero pieces sum to 0, "
           "the others are positive");
    expect_identical(again, got, sizeof got, "sum_squares_pieces: a second call gives the same bits");
    expect_identical(got_moved, got, sizeof got, "sum_squares_pieces: the same values at another offset and "
                     "alignment give the same bits");
    free(x);
    cudaFree(d_x);
}

int main(void) {
    skip_without_gpu();
    cpu = kernels_cpu();
    tap_diag("testing the %s kernels", TEST_DTYPE_NAME);

    test_backend_table(1000);

    test_conversions(7, 0);
    test_conversions(1000003, 0);
    test_conversions(1000003, 1);
    test_init_normal("vector", (shard_map){.cols = 0, .shard_start = 5}, 1001, 0);
    test_init_normal("row-split [gate; up] rows", (shard_map){.cols = 768, .local_cols = 768, .rows_held = 512,
                     .rows_per_block = 1024, .shard_start = 512, .split_rows = 1}, 1024 * 768, 0);
    test_init_normal("column-split, offset range", (shard_map){.cols = 3072, .local_cols = 1536,
                     .shard_start = 1536, .split_cols = 1}, 300007, 4099);

    test_gelu(7, 0);
    test_gelu(64 * 768, 0);
    test_gelu(100003, 1);
    test_dropout(7, 0, 0.1f);
    test_dropout(64 * 768, 0, 0.1f);
    test_dropout(100003, 1, 0.3f);
    test_dropout(1000, 0, 0.0f);
    test_dropout(4101, 0, 0.1f); /* offset 70717: groups across two Philox calls, and a tail */
    test_bias_dropout_add(64, 768, 1, 0, 0.1f, 77 + 5 * 64 * 768);   /* offset % 8 = 5: two calls a group */
    test_bias_dropout_add(64, 768, 1, 0, 0.1f, 8 * 64 * 768 * 3);    /* the model's case: one call a group */
    test_bias_dropout_add(33, 768, 0, 0, 0.1f, 77 + 5 * 33 * 768);
    test_bias_dropout_add(17, 100, 1, 1, 0.3f, 77 + 5 * 17 * 100);   /* unaligned, C % 8 != 0: the scalar loop */
    test_bias_dropout_add(64, 2048, 1, 0, 0.0f, 77 + 5 * 64 * 2048);
    test_add_scale(7 * 33, 0);
    test_add_scale(64 * 768, 0);
    test_add_scale(100003, 1);
    test_sum_blocks(64 * 768, 2, 0, 0);
    test_sum_blocks(64 * 768, 2, 1, 0);
    test_sum_blocks(64 * 768, 4, 3, 0);
    test_sum_blocks(100003, 4, 1, 1);
    test_bias(7, 33, 0);
    test_bias(64, 768, 0);
    test_bias(1000, 33, 0);
    test_bias(4096, 768, 0);
    test_bias(64, 768, 1);
    test_bias(4096, 3072, 0);  /* 64 chunks of 64 rows, 12 column tiles */
    test_bias(20000, 768, 0);  /* at most 128 chunks: 128 of 157 rows, a partial batch of eight rows ahead */
    test_bias(16384, 2048, 0); /* at most 64 chunks from 2048 columns: 64 of 256 rows */
    test_bias(2000, 100, 1);   /* unaligned, C % 8 != 0: the scalar tiles */
    test_dropout_bias_backward(4096, 768, 0, 0.1f, 3 * 4096 * 768);   /* the model's case: offset % 8 = 0 */
    test_dropout_bias_backward(20000, 768, 0, 0.1f, 77 + 4096);       /* offset % 8 = 5: two calls a group */
    test_dropout_bias_backward(2000, 100, 1, 0.3f, 1000);             /* unaligned, C % 8 != 0: scalar tiles */
    test_dropout_bias_backward(64, 2048, 0, 0.0f, 0);                 /* p = 0: a copy, then the sums */

    test_embedding(7, 33, 5, 10, 20, 0, 0);
    test_embedding(64, 768, 0, 50, 50, 0, 0);
    test_embedding(4096, 768, 100, 300, 500, 3, 0);
    test_embedding(256, 1600, 0, 64, 64, 2, 0);
    test_embedding(64, 768, 0, 50, 50, 0, 1);
    test_embedding(96, 64, 0, 8, 8, 1, 0);       /* one run of 96 rows: whole batches of 16 */
    test_embedding(97, 64, 0, 8, 8, 1, 0);       /* ... and one row more */
    test_embedding(8192, 64, 0, 2000, 2000, 0, 0); /* more runs than the persistent grid's blocks */
    test_position_embedding(3, 5, 33, 2, 0);
    test_position_embedding(4, 64, 768, 0, 0);
    test_position_embedding(4, 64, 768, 7, 1);

    test_layernorm(7, 33, 0);
    test_layernorm(64, 768, 0);
    test_layernorm(5, 1600, 0);
    test_layernorm(64, 768, 1);
    test_layernorm(2048, 768, 0);  /* several rows per backward block */
    test_layernorm(300, 2048, 0);  /* the 1.3B width */
    test_layernorm(8192, 768, 0);  /* 256 backward blocks of 32 rows */
    test_layernorm(100, 4096, 0);
    test_layernorm(700, 12288, 0); /* > 48 KiB of shared memory in the backward */
    test_layernorm(300, 8192, 0);  /* two units of 8 columns per thread in the row-cached backward */
    test_layernorm(64, 16384, 0);  /* four units per thread */
    test_layernorm(40, 20480, 0);  /* above the row-cached kernel: 128-bit loads, shared accumulators */
    test_layernorm(1500, 770, 0);  /* C % 8 != 0: the scalar backward, 47 blocks of 32 rows (an odd count
                                    * times 3C: the group sums' float4 alignment with dx_colsum) */
    test_layernorm(2048, 2048, 1); /* unaligned at the 1.3B width */

    test_rmsnorm(7, 33);
    test_rmsnorm(64, 2048);
    test_rmsnorm(700, 16384); /* > 48 KiB of shared memory in the backward (Llama 3 70B: 8192) */
    test_rmsnorm(2048, 768);   /* the row-cached backward, several rows per block */
    test_rmsnorm(300, 4096);   /* one unit of 8 columns per thread, 512 threads (Llama 2 7B) */
    test_rmsnorm(100, 8192);   /* two units per thread */
    test_rmsnorm(20, 20480);   /* above the row-cached kernel: the scalar backward */
    test_rmsnorm(1500, 770);   /* C % 8 != 0: the scalar backward, 47 blocks of 32 rows */
    test_rmsnorm(8192, 2048);  /* 256 backward blocks of 32 rows at the 1.3B width */
    test_rope(2, 7, 4, 2, 6, 6, 0, 10000.0f);
    test_rope(2, 7, 4, 2, 6, 6, 1, 10000.0f);
    test_rope(1, 33, 3, 1, 10, 4, 0, 3.0f);     /* partial rotation, multi-query */
    test_rope(1, 4096, 32, 8, 64, 64, 0, 500000.0f); /* Llama 3.2 1B's heads and base */
    test_rope_at(3, 1, 32, 8, 64, 64, 0, 500000.0f, 4000, 0.0f); /* one decoding step at cache position 4000 */
    test_rope_at(2, 5, 4, 2, 6, 6, 1, 10000.0f, 17, 0.0f);
    test_rope_at(1, 4096, 32, 8, 64, 64, 0, 500000.0f, 0, 32.0f); /* ... with its rope scaling */
    test_swiglu(7, 33);
    test_swiglu(256, 8192);

    test_logits_argmax(32, 50304, 50257);
    test_logits_argmax(3, 1000, 1000);
    test_logits_argmax(5, 25152, 100);

    test_matmul(5, 17, 3, 1, 1, 0);
    test_matmul_backward_gelu(64, 3072, 768);
    test_matmul_backward_gelu(33, 100, 48);
    test_matmul_backward_gelu(5, 17, 3);
    test_matmul_backward_gelu_kept(64, 3072, 768);
    test_matmul_backward_gelu_kept(33, 100, 48);
    test_matmul(5, 17, 3, 0, 0, 0);
    test_matmul(256, 768, 2304, 1, 0, 0);
    test_matmul(256, 768, 3072, 1, 1, 0);
    test_matmul(256, 768, 3072, 0, 1, 0);
    test_matmul(64, 768, 100, 1, 1, 0); /* OC % 8 != 0: the GeLU epilogue cannot be used */
    test_matmul(64, 768, 96, 1, 1, 1);  /* unaligned pointers */
    test_matmul(33, 7, 5, 1, 0, 0);
    setenv("MEGATRON_C_MATMUL_FALLBACK", "1", 1);
    test_matmul(5, 17, 3, 1, 1, 0);
    test_matmul(64, 768, 100, 1, 1, 0);
    test_matmul(64, 96, 256, 0, 1, 1);
    unsetenv("MEGATRON_C_MATMUL_FALLBACK");
    /* GEMM algorithm tuning: every problem of these shapes (over 1 GFLOP) is timed on first use;
     * the results stay within the tolerances, the accumulating weight gradients add once (their
     * candidates ran into scratch), and test_matmul's second weight gradient, on the tuned plan,
     * gives the first's bits */
    cuda_matmul_set_tuning(1);
    int tuned_before = cuda_matmul_tuned_problems();
    test_matmul(1024, 768, 2304, 1, 0, 0);
    test_matmul(1024, 768, 3072, 1, 1, 0);
    test_matmul_backward_gelu(1024, 3072, 768);
    int tuned = cuda_matmul_tuned_problems() - tuned_before;
    tap_ok(tuned >= 8, "GEMM tuning timed the candidates of %d problems (forward, residual, GeLU, input and weight gradients)",
           tuned);
    cuda_matmul_set_tuning(0);
    /* GEMMs planned for fewer SMs (cuBLASLt's SM count target, perf/optimizer_overlap_bench's
     * split variants): another plan, the same results within the tolerances */
    cuda_matmul_set_sm_count_target(100);
    tap_diag("GEMMs planned for 100 SMs");
    test_matmul(1024, 768, 2304, 1, 0, 0);
    cuda_matmul_set_sm_count_target(0);

    test_adamw(7, 0, 1);
    test_adamw(1000003, 0, 1);
    test_adamw(1000003, 1, 1);
    test_adamw(4099, 0, 0);
    test_ranges(1.0f, 0);
    test_ranges(0.37f, 0);
    test_ranges(0.37f, 3); /* 3 blocks over the ranges' chunks */
    test_sum_squares(7, 0);
    test_sum_squares(1000003, 0);
    test_sum_squares(1000003, 1);
    test_add_float(7, 0);
    test_add_float(1000003, 0);
    test_add_float(1000003, 1);
    test_sum_squares_pieces();

    return tap_done();
}
