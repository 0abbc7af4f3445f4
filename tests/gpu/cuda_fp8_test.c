/* cuda_fp8_test.c: the CUDA backend's fp8 quantization (kernels/cuda/cuda_fp8.cu) against the CPU
 * emulation (kernels/cpu/cpu_fp8.c), through the two backends' kernel tables, in E4M3 and E5M2:
 *   - fp8_quantize: the same codes bit for bit as the CPU from the same (compute-dtype) values,
 *     saturation and tiny values included; the amax folded into a prior one exactly (with and
 *     without a NaN element, which it ignores); scale_inv = 1 / scale;
 *   - fp8_dequantize: the CPU's fp32 values rounded once to the compute dtype;
 *   - fp8_amax: exactly the CPU's; sizes from 1 element to 2^20 + 3 (many blocks); sizes that are
 *     multiples of 16 (8) take the vectorized quantization 16 (8) at a time (the hardware's
 *     paired conversion);
 *   - fp8_transpose: the codes transposed exactly (edges of partial 32 x 32 tiles included);
 *   - fp8_quantize_transpose: bit for bit fp8_quantize's codes, amax and scale_inv, and the
 *     fp8_transpose of those codes (the vectorized kernel's 128 x 128 tiles, partial on both
 *     edges, and the byte-wise kernel's partial 64 x 64 tiles, odd widths included);
 *   - the fused producers (layernorm_forward_fp8, rmsnorm_forward_fp8, gelu_forward_fp8,
 *     swiglu_forward_fp8): bit for bit the plain op followed by fp8_quantize (output, norm
 *     statistics, codes, amax, scale_inv), on their fused and their fallback paths;
 *     gelu_backward_fp8, gelu_forward_fp8_transpose, swiglu_backward_fp8 and
 *     swiglu_forward_fp8_transpose likewise against the plain op then fp8_quantize_transpose;
 *   - mlp_backward_fp8 (the fp8 MLP backward's elementwise pass in one kernel): bit for bit the
 *     passes it replaces (the activation made again, its backward with the gradient's codes, the
 *     bias gradient), GeLU and SwiGLU, with and without a bias, E4M3 and E5M2 gradients, on the
 *     fused kernel's shapes and the fallback's, bf16 and fp16;
 *   - fp8_linear_forward (fast accumulation, the bias and the residual fused): within 1e-2 of
 *     fp8_gemm's product plus the bias plus the residual computed on the host;
 *   - fp8_gemm (cuBLASLt) in a linear layer's three forms: forward x . W^T (E4M3 x E4M3, bf16
 *     out), input gradient dout . W (E5M2 x E4M3 through W's transposed codes), weight gradient
 *     dout^T . x added into fp32 (through both transposes): against the products of the CPU's
 *     dequantized values summed in double, within 1e-2 (bf16 output) and 1e-3 (fp32 output: Hopper's
 *     fp8 tensor cores accumulate with fewer bits than fp32 between cuBLASLt's promotions, 1.6e-4
 *     and 1.9e-4 measured on an H200 at these shapes); over more shapes than the plan table holds
 *     (its slots made over), against the CPU backend's reference fp8_gemm within 1e-3.
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
    size_t differ = 0; /* a NaN code gives NaN on both, whatever its payload bits */
    for (size_t i = 0; i < n; i++)
        if (got_back[i] != want_back[i] && !(isnan(got_back[i]) && isnan(want_back[i]))) differ++;
    tap_ok(differ == 0, "fp8_dequantize %s n=%zu: the CPU's values rounded once to the compute dtype (%zu differ)", name,
           n, differ);

    float *d_amax2 = device_float(0.0f), want_amax2 = 0.0f;
    cpu->fp8_amax(&want_amax2, x, n);
    gpu->fp8_amax(d_amax2, d_x, n);
    float amax2 = host_float(d_amax2);
    tap_ok(amax2 == want_amax2, "fp8_amax n=%zu: %.9g, the CPU's %.9g", n, amax2, want_amax2);

    gpu->release(d_x), gpu->release(d_q), gpu->release(d_amax), gpu->release(d_scale), gpu->release(d_scale_inv);
    gpu->release(d_back), gpu->release(d_want), gpu->release(d_amax2);
    free(x), free(want), free(got), free(want_back), free(got_back);
}

/* codes [n] of random values in `format` with scale `scale`, and their dequantized values */
static uint8_t *random_codes(size_t n, uint64_t seed, int format, float scale, float *values, float *scale_inv) {
    float *x = (float *)malloc(sizeof(float) * n);
    fill_random(x, n, seed, 2.0f);
    uint8_t *q = (uint8_t *)malloc(n);
    cpu->fp8_quantize(q, NULL, scale_inv, x, n, &scale, format);
    cpu->fp8_dequantize(values, q, n, scale_inv, format);
    free(x);
    return q;
}

static uint8_t *upload_codes(const uint8_t *q, size_t n) {
    uint8_t *d = (uint8_t *)gpu->alloc(n + 16);
    gpu->copy_from_host(d, q, n);
    return d;
}

/* out[r, c] = sum_k a[r, k] b[c, k] in double (a [rows, K], b [cols, K]) */
static void reference_gemm(double *out, const float *a, const float *b, int rows, int K, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) sum += (double)a[(size_t)r * K + k] * b[(size_t)c * K + k];
            out[(size_t)r * cols + c] = sum;
        }
}

static double worst_relative(const float *got, const double *want, size_t n) {
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]) / (scale > 0 ? scale : 1.0));
    return worst;
}

/* a linear layer's three GEMMs: x [N, IC], W [OC, IC], dout [N, OC] */
static void test_gemm(int N, int IC, int OC) {
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, nd = (size_t)N * OC;
    float *x = (float *)malloc(sizeof(float) * nx), *w = (float *)malloc(sizeof(float) * nw);
    float *dout = (float *)malloc(sizeof(float) * nd), sx, sw, sd;
    uint8_t *qx = random_codes(nx, 11 + nx, FP8_E4M3, 100.0f, x, &sx), *qw = random_codes(nw, 12 + nw, FP8_E4M3, 150.0f, w, &sw);
    uint8_t *qd = random_codes(nd, 13 + nd, FP8_E5M2, 3000.0f, dout, &sd);
    uint8_t *d_qx = upload_codes(qx, nx), *d_qw = upload_codes(qw, nw), *d_qd = upload_codes(qd, nd);
    float *d_sx = device_float(sx), *d_sw = device_float(sw), *d_sd = device_float(sd);

    /* transposes: W^T [IC, OC], x^T [IC, N], dout^T [OC, N] */
    uint8_t *d_wt = (uint8_t *)gpu->alloc(nw + 16), *d_xt = (uint8_t *)gpu->alloc(nx + 16), *d_dt = (uint8_t *)gpu->alloc(nd + 16);
    gpu->fp8_transpose(d_wt, d_qw, OC, IC);
    gpu->fp8_transpose(d_xt, d_qx, N, IC);
    gpu->fp8_transpose(d_dt, d_qd, N, OC);
    uint8_t *wt = (uint8_t *)malloc(nw);
    TEST_CUDA(cudaDeviceSynchronize());
    gpu->copy_to_host(wt, d_wt, nw);
    size_t wrong = 0;
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) wrong += wt[(size_t)i * OC + o] != qw[(size_t)o * IC + i];
    tap_ok(wrong == 0, "fp8_transpose %d x %d: every code in its place (%zu wrong)", OC, IC, wrong);

    /* forward: out [N, OC] = x . W^T, bf16 */
    double *want = (double *)malloc(sizeof(double) * (nd > nw ? (nd > nx ? nd : nx) : (nw > nx ? nw : nx)));
    reference_gemm(want, x, w, N, IC, OC);
    void *d_out = gpu->alloc(gpu->act_bytes * nd);
    gpu->fp8_gemm(d_out, 0, d_qx, FP8_E4M3, d_sx, d_qw, FP8_E4M3, d_sw, N, IC, OC);
    float *got = (float *)malloc(sizeof(float) * (nd > nw ? (nd > nx ? nd : nx) : (nw > nx ? nw : nx)));
    gpu->copy_to_host_float(got, d_out, nd);
    expect_below(worst_relative(got, want, nd), 1e-2, "fp8_gemm forward x . W^T %d x %d x %d (E4M3 x E4M3, bf16 out)", N, IC, OC);

    /* input gradient: dx [N, IC] = dout . W: dout [N, OC] and (W^T) [IC, OC] */
    float *wt_values = (float *)malloc(sizeof(float) * nw);
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) wt_values[(size_t)i * OC + o] = w[(size_t)o * IC + i];
    reference_gemm(want, dout, wt_values, N, OC, IC);
    void *d_dx = gpu->alloc(gpu->act_bytes * nx);
    gpu->fp8_gemm(d_dx, 0, d_qd, FP8_E5M2, d_sd, d_wt, FP8_E4M3, d_sw, N, OC, IC);
    gpu->copy_to_host_float(got, d_dx, nx);
    expect_below(worst_relative(got, want, nx), 1e-2, "fp8_gemm input gradient dout . W %d x %d x %d (E5M2 x E4M3)", N, OC, IC);

    /* weight gradient: dW [OC, IC] += dout^T . x: (dout^T) [OC, N] and (x^T) [IC, N], fp32 */
    float *dt_values = (float *)malloc(sizeof(float) * nd), *xt_values = (float *)malloc(sizeof(float) * nx);
    for (int r = 0; r < N; r++) {
        for (int o = 0; o < OC; o++) dt_values[(size_t)o * N + r] = dout[(size_t)r * OC + o];
        for (int i = 0; i < IC; i++) xt_values[(size_t)i * N + r] = x[(size_t)r * IC + i];
    }
    reference_gemm(want, dt_values, xt_values, OC, N, IC);
    float *start = (float *)malloc(sizeof(float) * nw);
    for (size_t i = 0; i < nw; i++) start[i] = (float)(i % 7) - 3.0f;
    for (size_t i = 0; i < nw; i++) want[i] += start[i];
    float *d_dw = (float *)gpu->alloc(sizeof(float) * nw);
    gpu->copy_from_host(d_dw, start, sizeof(float) * nw);
    gpu->fp8_gemm(d_dw, 1, d_dt, FP8_E5M2, d_sd, d_xt, FP8_E4M3, d_sx, OC, N, IC);
    TEST_CUDA(cudaDeviceSynchronize());
    gpu->copy_to_host(got, d_dw, sizeof(float) * nw);
    expect_below(worst_relative(got, want, nw), 1e-3, "fp8_gemm weight gradient dW += dout^T . x %d x %d x %d (fp32 accumulate)",
                 OC, N, IC);

    gpu->release(d_qx), gpu->release(d_qw), gpu->release(d_qd), gpu->release(d_sx), gpu->release(d_sw), gpu->release(d_sd);
    gpu->release(d_wt), gpu->release(d_xt), gpu->release(d_dt), gpu->release(d_out), gpu->release(d_dx), gpu->release(d_dw);
    free(x), free(w), free(dout), free(qx), free(qw), free(qd), free(wt), free(want), free(got);
    free(wt_values), free(dt_values), free(xt_values), free(start);
}

/* fp8_quantize_transpose of [rows, cols] against fp8_quantize then fp8_transpose */
static void test_quantize_transpose(int rows, int cols, int format) {
    size_t n = (size_t)rows * (size_t)cols;
    float *x = values(n, 9100 + n, (size_t)-1);
    void *d_x = gpu->alloc(gpu->act_bytes * n);
    gpu->copy_from_host_float(d_x, x, n);
    float scale = format == FP8_E5M2 ? 3.7f : 0.8125f;
    float *d_scale = device_float(scale), *d_amax1 = device_float(1.5f), *d_amax2 = device_float(1.5f);
    float *d_si1 = device_float(0.0f), *d_si2 = device_float(0.0f);
    uint8_t *d_q1 = (uint8_t *)gpu->alloc(n), *d_t1 = (uint8_t *)gpu->alloc(n);
    uint8_t *d_q2 = (uint8_t *)gpu->alloc(n), *d_t2 = (uint8_t *)gpu->alloc(n);
    gpu->fp8_quantize(d_q1, d_amax1, d_si1, d_x, n, d_scale, format);
    gpu->fp8_transpose(d_t1, d_q1, rows, cols);
    gpu->fp8_quantize_transpose(d_q2, d_t2, d_amax2, d_si2, d_x, rows, cols, d_scale, format);
    uint8_t *h[4];
    uint8_t *d[4] = {d_q1, d_t1, d_q2, d_t2};
    for (int i = 0; i < 4; i++) {
        h[i] = (uint8_t *)malloc(n);
        gpu->copy_to_host(h[i], d[i], n);
    }
    float amax1 = host_float(d_amax1), amax2 = host_float(d_amax2), si1 = host_float(d_si1), si2 = host_float(d_si2);
    tap_ok(!memcmp(h[0], h[2], n) && !memcmp(h[1], h[3], n) && amax1 == amax2 && si1 == si2,
           "fp8_quantize_transpose %d x %d (%s): fp8_quantize's codes, amax %.6g and scale_inv, and their transpose, "
           "bit for bit", rows, cols, format == FP8_E5M2 ? "E5M2" : "E4M3", amax2);
    for (int i = 0; i < 4; i++) free(h[i]), gpu->release(d[i]);
    gpu->release(d_x), gpu->release(d_scale), gpu->release(d_amax1), gpu->release(d_amax2);
    gpu->release(d_si1), gpu->release(d_si2);
    free(x);
}

/* ---- the fused producers (kernels.h's *_fp8 ops): the plain op then fp8_quantize, bit for bit ---- */

/* a device buffer holding n values of the compute dtype from a seed, spread by `scale` */
static void *device_values(size_t n, uint64_t seed, float scale) {
    float *x = (float *)malloc(sizeof(float) * n + 4);
    fill_random(x, n, seed, scale);
    void *d = gpu->alloc(gpu->act_bytes * n + 64);
    gpu->copy_from_host_float(d, x, n);
    free(x);
    return d;
}

/* whether device buffers a and b hold the same bytes */
static int same_device_bytes(const void *a, const void *b, size_t bytes) {
    unsigned char *ha = (unsigned char *)malloc(bytes + 1), *hb = (unsigned char *)malloc(bytes + 1);
    TEST_CUDA(cudaDeviceSynchronize());
    gpu->copy_to_host(ha, a, bytes);
    gpu->copy_to_host(hb, b, bytes);
    int same = !memcmp(ha, hb, bytes);
    free(ha), free(hb);
    return same;
}

/* the fp8 side of a producer: codes [n] (+ `offset` bytes: an unaligned start), amax from 1.5 */
typedef struct fused_side {
    uint8_t *codes_buffer;
    fp8_output q;
} fused_side;

static fused_side fused_side_make(size_t n, size_t offset, float scale, int format, int with_amax) {
    fused_side f;
    f.codes_buffer = (uint8_t *)gpu->alloc(n + 64);
    TEST_CUDA(cudaDeviceSynchronize()); /* the backend's stream-ordered allocation, then the default stream's memset */
    TEST_CUDA(cudaMemset(f.codes_buffer, 0x5a, n + 64));
    TEST_CUDA(cudaDeviceSynchronize());
    f.q.codes = f.codes_buffer + offset;
    f.q.amax = with_amax ? device_float(1.5f) : NULL;
    f.q.scale_inv = device_float(0.0f);
    f.q.scale = device_float(scale);
    f.q.format = format;
    return f;
}

/* the codes, amax and scale_inv of two producers' sides equal */
static int same_sides(const fused_side *a, const fused_side *b, size_t n) {
    int same = same_device_bytes(a->q.codes, b->q.codes, n) && same_device_bytes(a->q.scale_inv, b->q.scale_inv, 4);
    if (a->q.amax) same = same && same_device_bytes(a->q.amax, b->q.amax, 4);
    return same;
}

static void fused_side_release(fused_side *f) {
    gpu->release(f->codes_buffer), gpu->release((void *)f->q.scale), gpu->release(f->q.scale_inv);
    if (f->q.amax) gpu->release(f->q.amax);
}

/* what the plain path does after the plain op: fp8_quantize of its output */
static void quantize_side(fused_side *f, const void *out, size_t n) {
    gpu->fp8_quantize(f->q.codes, f->q.amax, f->q.scale_inv, out, n, f->q.scale, f->q.format);
}

/* layernorm_forward_fp8 (rms 0) or rmsnorm_forward_fp8 (rms 1) of x [N, C] against the plain
 * norm then fp8_quantize: output, statistics, codes, amax and scale_inv bit for bit */
static void test_fused_norm(int N, int C, int rms, int format, float scale, int with_amax) {
    size_t n = (size_t)N * (size_t)C;
    void *x = device_values(n, 3100 + n + (uint64_t)rms, 3.0f), *w = device_values((size_t)C, 3200 + (uint64_t)C, 1.5f);
    void *b = device_values((size_t)C, 3300 + (uint64_t)C, 0.5f);
    void *out[2];
    float *mean[2], *rstd[2];
    fused_side side[2];
    for (int k = 0; k < 2; k++) {
        out[k] = gpu->alloc(gpu->act_bytes * n);
        mean[k] = (float *)gpu->alloc(sizeof(float) * (size_t)N);
        rstd[k] = (float *)gpu->alloc(sizeof(float) * (size_t)N);
        TEST_CUDA(cudaDeviceSynchronize());
        TEST_CUDA(cudaMemset(mean[k], 0, sizeof(float) * (size_t)N));
        TEST_CUDA(cudaDeviceSynchronize());
        side[k] = fused_side_make(n, 0, scale, format, with_amax);
    }
    if (rms) {
        gpu->rmsnorm_forward(out[0], rstd[0], x, w, N, C, 1e-5f);
        quantize_side(&side[0], out[0], n);
        gpu->rmsnorm_forward_fp8(out[1], rstd[1], x, w, N, C, 1e-5f, &side[1].q);
    } else {
        gpu->layernorm_forward(out[0], mean[0], rstd[0], x, w, b, N, C, 1e-5f);
        quantize_side(&side[0], out[0], n);
        gpu->layernorm_forward_fp8(out[1], mean[1], rstd[1], x, w, b, N, C, 1e-5f, &side[1].q);
    }
    int same = same_device_bytes(out[0], out[1], gpu->act_bytes * n) &&
               same_device_bytes(mean[0], mean[1], sizeof(float) * (size_t)N) &&
               same_device_bytes(rstd[0], rstd[1], sizeof(float) * (size_t)N) && same_sides(&side[0], &side[1], n);
    tap_ok(same, "%s_forward_fp8 %d x %d (%s%s): the plain norm then fp8_quantize bit for bit (output, statistics, "
           "codes, amax, scale_inv)", rms ? "rmsnorm" : "layernorm", N, C, format == FP8_E5M2 ? "E5M2" : "E4M3",
           with_amax ? "" : ", no amax");
    for (int k = 0; k < 2; k++) {
        gpu->release(out[k]), gpu->release(mean[k]), gpu->release(rstd[k]);
        fused_side_release(&side[k]);
    }
    gpu->release(x), gpu->release(w), gpu->release(b);
}

/* gelu_forward_fp8 of n elements (x, out and the codes `offset` elements past aligned starts)
 * against gelu_forward then fp8_quantize; and with out NULL (the codes only: fc2's input in
 * scratch) the same codes, amax and scale_inv */
static void test_fused_gelu(size_t n, size_t offset, int format, float scale) {
    void *x = device_values(n + offset, 3400 + n, 4.0f);
    void *xs = (char *)x + offset * gpu->act_bytes;
    void *out[2];
    fused_side side[3];
    for (int k = 0; k < 2; k++) {
        out[k] = gpu->alloc(gpu->act_bytes * (n + offset));
        side[k] = fused_side_make(n, offset, scale, format, 1);
    }
    side[2] = fused_side_make(n, offset, scale, format, 1);
    void *o0 = (char *)out[0] + offset * gpu->act_bytes, *o1 = (char *)out[1] + offset * gpu->act_bytes;
    gpu->gelu_forward(o0, xs, n);
    quantize_side(&side[0], o0, n);
    gpu->gelu_forward_fp8(o1, xs, n, &side[1].q);
    gpu->gelu_forward_fp8(NULL, xs, n, &side[2].q);
    tap_ok(same_device_bytes(o0, o1, gpu->act_bytes * n) && same_sides(&side[0], &side[1], n),
           "gelu_forward_fp8 n=%zu%s (%s): gelu_forward then fp8_quantize bit for bit", n,
           offset ? " (unaligned: the scalar loop)" : "", format == FP8_E5M2 ? "E5M2" : "E4M3");
    tap_ok(same_sides(&side[0], &side[2], n), "gelu_forward_fp8 n=%zu%s (%s) with out NULL: the same codes, amax and "
           "scale_inv", n, offset ? " (unaligned: the scalar loop)" : "", format == FP8_E5M2 ? "E5M2" : "E4M3");
    for (int k = 0; k < 2; k++) gpu->release(out[k]), fused_side_release(&side[k]);
    fused_side_release(&side[2]);
    gpu->release(x);
}

/* swiglu_forward_fp8 of x [N, 2F] against swiglu_forward then fp8_quantize */
static void test_fused_swiglu(int N, int F, int format, float scale) {
    size_t n = (size_t)N * (size_t)F;
    void *x = device_values(2 * n, 3500 + n, 4.0f);
    void *out[2];
    fused_side side[2];
    for (int k = 0; k < 2; k++) {
        out[k] = gpu->alloc(gpu->act_bytes * n);
        side[k] = fused_side_make(n, 0, scale, format, 1);
    }
    gpu->swiglu_forward(out[0], x, N, F);
    quantize_side(&side[0], out[0], n);
    gpu->swiglu_forward_fp8(out[1], x, N, F, &side[1].q);
    tap_ok(same_device_bytes(out[0], out[1], gpu->act_bytes * n) && same_sides(&side[0], &side[1], n),
           "swiglu_forward_fp8 %d x %d (%s): swiglu_forward then fp8_quantize bit for bit", N, F,
           format == FP8_E5M2 ? "E5M2" : "E4M3");
    for (int k = 0; k < 2; k++) gpu->release(out[k]), fused_side_release(&side[k]);
    gpu->release(x);
}

/* gelu_backward_fp8 of [rows, cols] (in place: dx = dout) against gelu_backward then
 * fp8_quantize_transpose: dx, codes, transposed codes, amax and scale_inv bit for bit; with
 * in_place -1 gelu_forward_fp8_transpose against gelu_forward then fp8_quantize_transpose */
static void test_fused_gelu_backward(int rows, int cols, int in_place, int format, float scale) {
    size_t n = (size_t)rows * (size_t)cols;
    void *x = device_values(n, 3600 + n, 4.0f), *dout = device_values(n, 3700 + n, 2.0f);
    void *dx[2];
    uint8_t *codes_t[2];
    fused_side side[2];
    for (int k = 0; k < 2; k++) {
        dx[k] = gpu->alloc(gpu->act_bytes * n + 64);
        if (in_place) {
            TEST_CUDA(cudaDeviceSynchronize());
            TEST_CUDA(cudaMemcpy(dx[k], dout, gpu->act_bytes * n, cudaMemcpyDeviceToDevice));
            TEST_CUDA(cudaDeviceSynchronize());
        }
        codes_t[k] = (uint8_t *)gpu->alloc(n + 64);
        side[k] = fused_side_make(n, 0, scale, format, 1);
    }
    int forward = in_place < 0;
    if (forward) gpu->gelu_forward(dx[0], x, n);
    else gpu->gelu_backward(dx[0], x, in_place ? dx[0] : dout, n);
    gpu->fp8_quantize_transpose(side[0].q.codes, codes_t[0], side[0].q.amax, side[0].q.scale_inv, dx[0], rows, cols,
                                side[0].q.scale, format);
    if (forward) gpu->gelu_forward_fp8_transpose(dx[1], x, rows, cols, &side[1].q, codes_t[1]);
    else gpu->gelu_backward_fp8(dx[1], x, in_place ? dx[1] : dout, rows, cols, &side[1].q, codes_t[1]);
    tap_ok(same_device_bytes(dx[0], dx[1], gpu->act_bytes * n) && same_sides(&side[0], &side[1], n) &&
               same_device_bytes(codes_t[0], codes_t[1], n),
           "%s %d x %d%s (%s): %s then fp8_quantize_transpose bit for bit",
           forward ? "gelu_forward_fp8_transpose" : "gelu_backward_fp8", rows, cols, in_place > 0 ? " in place" : "",
           format == FP8_E5M2 ? "E5M2" : "E4M3", forward ? "gelu_forward" : "gelu_backward");
    for (int k = 0; k < 2; k++) gpu->release(dx[k]), gpu->release(codes_t[k]), fused_side_release(&side[k]);
    gpu->release(x), gpu->release(dout);
}

/* swiglu_backward_fp8 (backward 1: dx [N, 2F]) or swiglu_forward_fp8_transpose (0: out [N, F])
 * of x [N, 2F] against the plain op then fp8_quantize_transpose, bit for bit */
static void test_fused_swiglu_transpose(int N, int F, int backward, int format, float scale) {
    size_t n = (size_t)N * (size_t)F, out_n = backward ? 2 * n : n;
    int cols = backward ? 2 * F : F;
    void *x = device_values(2 * n, 3800 + n, 4.0f), *dout = device_values(n, 3900 + n, 2.0f);
    void *dx[2];
    uint8_t *codes_t[2];
    fused_side side[2];
    for (int k = 0; k < 2; k++) {
        dx[k] = gpu->alloc(gpu->act_bytes * out_n + 64);
        codes_t[k] = (uint8_t *)gpu->alloc(out_n + 64);
        side[k] = fused_side_make(out_n, 0, scale, format, 1);
    }
    if (backward) gpu->swiglu_backward(dx[0], x, dout, N, F);
    else gpu->swiglu_forward(dx[0], x, N, F);
    gpu->fp8_quantize_transpose(side[0].q.codes, codes_t[0], side[0].q.amax, side[0].q.scale_inv, dx[0], N, cols,
                                side[0].q.scale, format);
    if (backward) gpu->swiglu_backward_fp8(dx[1], x, dout, N, F, &side[1].q, codes_t[1]);
    else gpu->swiglu_forward_fp8_transpose(dx[1], x, N, F, &side[1].q, codes_t[1]);
    tap_ok(same_device_bytes(dx[0], dx[1], gpu->act_bytes * out_n) && same_sides(&side[0], &side[1], out_n) &&
               same_device_bytes(codes_t[0], codes_t[1], out_n),
           "%s %d x %d (%s): %s then fp8_quantize_transpose bit for bit",
           backward ? "swiglu_backward_fp8" : "swiglu_forward_fp8_transpose", N, F, format == FP8_E5M2 ? "E5M2" : "E4M3",
           backward ? "swiglu_backward" : "swiglu_forward");
    for (int k = 0; k < 2; k++) gpu->release(dx[k]), gpu->release(codes_t[k]), fused_side_release(&side[k]);
    gpu->release(x), gpu->release(dout);
}

/* mlp_backward_fp8 (the fp8 MLP backward's elementwise pass in one kernel, cuda_fp8_mlp.cu) of
 * pre [rows, F] (swiglu: [rows, 2F]) and dact [rows, F] against the passes it replaces: the
 * activation made again with its codes and transposed codes (gelu/swiglu_forward_fp8_transpose),
 * the activation's backward with its codes and transposed codes (gelu/swiglu_backward_fp8), and
 * with a bias bias_backward over that gradient: x's transposed codes, amax and scale_inv, the
 * gradient's codes, transposed codes, amax and scale_inv and the bias gradient (added into the
 * same prior values) bit for bit, and qa's row codes left untouched. x's codes E4M3 (fc2's
 * input), the gradient's in grad_format. */
static void test_mlp_backward(const kernel_ops *k, int rows, int F, int swiglu, int with_bias, int grad_format) {
    const kernel_ops *saved = gpu;
    gpu = k; /* the helpers allocate and copy through gpu */
    size_t n = (size_t)rows * (size_t)F, G = swiglu ? 2 * (size_t)F : (size_t)F, ng = (size_t)rows * G;
    void *pre = device_values(swiglu ? 2 * n : n, 4100 + n + (uint64_t)swiglu, 4.0f);
    void *dact = device_values(n, 4200 + n, 2.0f);
    float *prior = (float *)malloc(sizeof(float) * G);
    fill_random(prior, G, 4300 + G, 1.0f);
    void *x = k->alloc(k->act_bytes * n + 64), *dpre[2];
    uint8_t *act_t[2], *grad_t[2];
    float *dbias[2];
    fused_side xs[2], gs[2];
    for (int j = 0; j < 2; j++) {
        dpre[j] = k->alloc(k->act_bytes * ng + 64);
        act_t[j] = (uint8_t *)k->alloc(n + 64);
        grad_t[j] = (uint8_t *)k->alloc(ng + 64);
        dbias[j] = (float *)k->alloc(sizeof(float) * G);
        k->copy_from_host(dbias[j], prior, sizeof(float) * G);
        xs[j] = fused_side_make(n, 0, 150.0f, FP8_E4M3, 1);
        gs[j] = fused_side_make(ng, 0, grad_format == FP8_E5M2 ? 3.7f : 150.0f, grad_format, 1);
    }
    float *bias0 = with_bias ? dbias[0] : NULL, *bias1 = with_bias ? dbias[1] : NULL;
    if (swiglu) {
        k->swiglu_forward_fp8_transpose(x, pre, rows, F, &xs[0].q, act_t[0]);
        k->swiglu_backward_fp8(dpre[0], pre, dact, rows, F, &gs[0].q, grad_t[0]);
    } else {
        k->gelu_forward_fp8_transpose(x, pre, rows, F, &xs[0].q, act_t[0]);
        k->gelu_backward_fp8(dpre[0], pre, dact, rows, F, &gs[0].q, grad_t[0]);
    }
    if (bias0) k->bias_backward(bias0, dpre[0], rows, (int)G);
    k->mlp_backward_fp8(dpre[1], bias1, pre, dact, rows, F, swiglu, &xs[1].q, act_t[1], &gs[1].q, grad_t[1]);
    int x_side = same_device_bytes(act_t[0], act_t[1], n) && same_device_bytes(xs[0].q.amax, xs[1].q.amax, 4) &&
                 same_device_bytes(xs[0].q.scale_inv, xs[1].q.scale_inv, 4);
    int g_side = same_sides(&gs[0], &gs[1], ng) && same_device_bytes(grad_t[0], grad_t[1], ng);
    int bias_same = same_device_bytes(dbias[0], dbias[1], sizeof(float) * G);
    uint8_t *untouched = (uint8_t *)malloc(n), *pattern = (uint8_t *)malloc(n);
    TEST_CUDA(cudaDeviceSynchronize());
    k->copy_to_host(untouched, xs[1].q.codes, n);
    memset(pattern, 0x5a, n);
    int rows_untouched = !memcmp(untouched, pattern, n);
    int fused = rows % 16 == 0 && F % 8 == 0;
    if (fused && with_bias) { /* bias_backward's chunks must be whole multiples of 16 rows */
        int chunks = (rows + 63) / 64, most = G >= 2048 ? 64 : 128;
        if (chunks > most) chunks = most;
        fused = ((rows + chunks - 1) / chunks) % 16 == 0;
    }
    tap_ok(x_side && g_side && bias_same && rows_untouched,
           "mlp_backward_fp8 %s %d x %d%s (%s, %s; %s): x's transposed codes %s, the gradient's codes %s, the bias "
           "gradient %s, qa's row codes %s",
           swiglu ? "SwiGLU" : "GeLU", rows, F, with_bias ? " with bias" : "", k == kernels_cuda_fp16() ? "fp16" : "bf16",
           grad_format == FP8_E5M2 ? "E5M2 gradient" : "E4M3 gradient", fused ? "the fused kernel" : "the fallback",
           x_side ? "same" : "DIFFER", g_side ? "same" : "DIFFER", with_bias ? (bias_same ? "same" : "DIFFERS") : "untouched",
           rows_untouched ? "untouched" : "WRITTEN");
    free(untouched), free(pattern), free(prior);
    for (int j = 0; j < 2; j++) {
        k->release(dpre[j]), k->release(act_t[j]), k->release(grad_t[j]), k->release(dbias[j]);
        fused_side_release(&xs[j]), fused_side_release(&gs[j]);
    }
    k->release(x), k->release(pre), k->release(dact);
    gpu = saved;
}

/* fp8_linear_forward with bias and residual against fp8_gemm's product plus both on the host */
/* more fp8 GEMM shapes than cuda_fp8_gemm.cu's plan table holds (the MoE experts' GEMMs take a
 * shape per expert row count, new ones every step): rows 1 .. SHAPES with K 32 and 16 columns,
 * then the first ones again (their plans made over), each against the CPU backend's fp8_gemm
 * (kernels/cpu/cpu_fp8_gemm.c: the codes' exact products summed in fp32), fp32 accumulation */
static void test_plan_eviction(void) {
    enum { K = 32, COLS = 16, SHAPES = 1100, AGAIN = 8 };
    size_t nx = (size_t)SHAPES * K, nw = (size_t)COLS * K, no = (size_t)SHAPES * COLS;
    float *xv = (float *)malloc(sizeof(float) * nx), *wv = (float *)malloc(sizeof(float) * nw), sx, sw;
    uint8_t *qx = random_codes(nx, 21, FP8_E5M2, 3000.0f, xv, &sx), *qw = random_codes(nw, 22, FP8_E4M3, 150.0f, wv, &sw);
    uint8_t *d_qx = upload_codes(qx, nx), *d_qw = upload_codes(qw, nw);
    float *d_sx = device_float(sx), *d_sw = device_float(sw), *d_out = (float *)gpu->alloc(sizeof(float) * no);
    float *want = (float *)malloc(sizeof(float) * no), *got = (float *)malloc(sizeof(float) * no);
    double worst = 0.0;
    int shapes = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int rows = 1; rows <= (pass ? AGAIN : SHAPES); rows++, shapes++) {
            size_t n = (size_t)rows * COLS;
            gpu->zero(d_out, sizeof(float) * n);
            gpu->fp8_gemm(d_out, 1, d_qx, FP8_E5M2, d_sx, d_qw, FP8_E4M3, d_sw, rows, K, COLS);
            TEST_CUDA(cudaDeviceSynchronize());
            gpu->copy_to_host(got, d_out, sizeof(float) * n);
            memset(want, 0, sizeof(float) * n);
            cpu->fp8_gemm(want, 1, qx, FP8_E5M2, &sx, qw, FP8_E4M3, &sw, rows, K, COLS);
            double size = 0.0, err = 0.0;
            for (size_t i = 0; i < n; i++) size = fmax(size, fabs(want[i]));
            for (size_t i = 0; i < n; i++) err = fmax(err, fabs((double)got[i] - want[i]) / (size > 0 ? size : 1.0));
            worst = fmax(worst, err);
        }
    expect_below(worst, 1e-3, "fp8_gemm over %d shapes (more than the plan table holds, the first %d again): the CPU "
                 "backend's reference fp8_gemm", shapes, AGAIN);
    gpu->release(d_qx), gpu->release(d_qw), gpu->release(d_sx), gpu->release(d_sw), gpu->release(d_out);
    free(xv), free(wv), free(qx), free(qw), free(want), free(got);
}

static void test_linear_forward(int N, int IC, int OC) {
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, nd = (size_t)N * OC;
    float sx = 0.0f, sw = 0.0f;
    float *xv = (float *)malloc(sizeof(float) * nx), *wv = (float *)malloc(sizeof(float) * nw);
    uint8_t *qx = random_codes(nx, 61, FP8_E4M3, 8.0f, xv, &sx), *qw = random_codes(nw, 62, FP8_E4M3, 16.0f, wv, &sw);
    uint8_t *d_qx = upload_codes(qx, nx), *d_qw = upload_codes(qw, nw);
    float *d_sx = device_float(sx), *d_sw = device_float(sw);
    float *bias = (float *)malloc(sizeof(float) * OC), *residual = (float *)malloc(sizeof(float) * nd);
    fill_random(bias, OC, 63, 0.5f);
    fill_random(residual, nd, 64, 0.5f);
    void *d_bias = gpu->alloc(gpu->act_bytes * OC), *d_res = gpu->alloc(gpu->act_bytes * nd);
    gpu->copy_from_host_float(d_bias, bias, OC);
    gpu->copy_from_host_float(d_res, residual, nd);
    gpu->copy_to_host_float(bias, d_bias, OC); /* the values as the compute dtype holds them */
    gpu->copy_to_host_float(residual, d_res, nd);
    void *d_out = gpu->alloc(gpu->act_bytes * nd);
    gpu->fp8_linear_forward(d_out, d_qx, d_sx, d_qw, d_sw, d_bias, d_res, N, IC, OC);
    double *want = (double *)malloc(sizeof(double) * nd);
    reference_gemm(want, xv, wv, N, IC, OC);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < OC; c++) want[(size_t)r * OC + c] += bias[c] + residual[(size_t)r * OC + c];
    float *got = (float *)malloc(sizeof(float) * nd);
    gpu->copy_to_host_float(got, d_out, nd);
    expect_below(worst_relative(got, want, nd), 1e-2,
                 "fp8_linear_forward %d x %d x %d with bias and residual (fast accumulation, bf16 out)", N, IC, OC);
    gpu->release(d_qx), gpu->release(d_qw), gpu->release(d_sx), gpu->release(d_sw), gpu->release(d_bias);
    gpu->release(d_res), gpu->release(d_out);
    free(xv), free(wv), free(qx), free(qw), free(bias), free(residual), free(want), free(got);
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
    test_fp8(1u << 20, FP8_E4M3, 4321); /* the vectorized path (16 at a time), a NaN inside */
    test_fp8(1000, FP8_E4M3, 999);      /* 8 at a time (1000 is not a multiple of 16) */
    test_fp8(1u << 20, FP8_E5M2, none);
    test_gemm(256, 512, 384);
    test_gemm(80, 176, 208); /* partial transpose tiles, dimensions multiples of 16 */
    test_quantize_transpose(256, 512, FP8_E4M3);
    test_quantize_transpose(80, 208, FP8_E5M2);  /* partial tiles */
    test_quantize_transpose(37, 101, FP8_E4M3);  /* odd widths: byte stores */
    /* the vectorized kernel's 128 x 128 tiles (rows multiples of 16, cols of 8): several tiles
     * with partial ones on both edges; then rows a multiple of 8 only (the byte-wise kernel) */
    test_quantize_transpose(304, 1032, FP8_E4M3);
    test_quantize_transpose(1040, 136, FP8_E5M2);
    test_quantize_transpose(16, 8, FP8_E4M3);
    test_quantize_transpose(88, 200, FP8_E4M3);
    test_linear_forward(256, 512, 384);
    test_linear_forward(80, 176, 208);
    test_plan_eviction();
    /* the fused producers: the warp-per-row norms (a last block of fewer rows included), the
     * block-per-row ones (C over 2048, C not a multiple of 8), saturating scales */
    for (int rms = 0; rms < 2; rms++) {
        test_fused_norm(64, 2048, rms, FP8_E4M3, 60.0f, 1);
        test_fused_norm(37, 1024, rms, FP8_E4M3, 200.0f, 1);
        test_fused_norm(13, 64, rms, FP8_E5M2, 3.7f, 0);
        test_fused_norm(5, 8200, rms, FP8_E4M3, 60.0f, 1);
        test_fused_norm(9, 100, rms, FP8_E4M3, 60.0f, 1);
    }
    test_fused_gelu((size_t)1 << 20, 0, FP8_E4M3, 150.0f);
    test_fused_gelu(1000003, 0, FP8_E5M2, 3.7f);  /* a tail past the groups of 8 */
    test_fused_gelu(4099, 1, FP8_E4M3, 150.0f);
    test_fused_swiglu(64, 1024, FP8_E4M3, 150.0f);
    test_fused_swiglu(4096, 1024, FP8_E4M3, 150.0f); /* fewer blocks than rows: each loops */
    test_fused_swiglu(7, 100, FP8_E5M2, 3.7f);       /* F not a multiple of 8: quantized after */
    test_fused_gelu_backward(256, 1024, 0, FP8_E5M2, 3.7f);
    test_fused_gelu_backward(304, 1032, 1, FP8_E5M2, 3.7f); /* partial tiles, in place */
    test_fused_gelu_backward(88, 200, 0, FP8_E4M3, 150.0f); /* rows not a multiple of 16: unfused */
    test_fused_gelu_backward(304, 1032, -1, FP8_E4M3, 150.0f); /* the forward made again */
    test_fused_gelu_backward(88, 200, -1, FP8_E4M3, 150.0f);
    for (int backward = 0; backward < 2; backward++) {
        test_fused_swiglu_transpose(256, 512, backward, backward ? FP8_E5M2 : FP8_E4M3, backward ? 3.7f : 150.0f);
        test_fused_swiglu_transpose(304, 520, backward, FP8_E4M3, 150.0f); /* partial tiles */
        test_fused_swiglu_transpose(88, 96, backward, FP8_E4M3, 150.0f);   /* rows not a multiple of 16: unfused */
        test_fused_swiglu_transpose(64, 100, backward, FP8_E5M2, 3.7f);    /* F not a multiple of 8: unfused */
    }
    /* the fp8 MLP backward's fused pass (mlp_backward_fp8), GeLU and SwiGLU, with and without the
     * bias gradient, hybrid (E5M2 gradient) and e4m3: one tile a chunk (256 rows: 4 chunks of 64),
     * several (9216 rows of 2048 gradient columns: 64 chunks of 144 rows, a tile of 128 then one
     * of 16), partial column tiles (320 x 1032: 5 chunks of 64 rows), and the fallback's shapes: rows not a multiple of 16
     * (88), F not of 8 (100), and with a bias chunks of 40 rows (80 rows; fused without it) */
    for (int swiglu = 0; swiglu < 2; swiglu++)
        for (int bias = 0; bias < 2; bias++) {
            test_mlp_backward(gpu, 256, 1024, swiglu, bias, FP8_E5M2);
            test_mlp_backward(gpu, 320, 1032, swiglu, bias, FP8_E4M3);
            test_mlp_backward(gpu, 9216, swiglu ? 1024 : 2048, swiglu, bias, FP8_E5M2);
            test_mlp_backward(gpu, 88, 200, swiglu, bias, FP8_E5M2);
            test_mlp_backward(gpu, 64, 100, swiglu, bias, FP8_E4M3);
            test_mlp_backward(gpu, 80, 256, swiglu, bias, FP8_E5M2);
        }
    test_mlp_backward(kernels_cuda_fp16(), 256, 1024, 0, 1, FP8_E5M2); /* the fp16 instantiation */
    test_mlp_backward(kernels_cuda_fp16(), 320, 1032, 1, 1, FP8_E4M3);
    return tap_done();
}
