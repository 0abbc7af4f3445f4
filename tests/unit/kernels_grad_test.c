/* kernels_grad_test.c: checks the CPU reference backend against straightforward double-precision
 * references written here.
 *  - Forward: float kernel output vs the double reference forward on the same inputs.
 *  - Backward: float backward kernel vs central finite differences, in double, of the scalar
 *    objective L = sum(out .* R) of the reference forward (R fixed random weights, which is also
 *    the dout handed to the backward kernel).
 *  - Plus: AdamW vs a hand-written double AdamW over 3 steps, sum_squares, the fixed tree's
 *    add_float and sum_squares_pieces (kernels.h's tree bit for bit), dropout statistics and
 *    mask agreement, attention causality, and that backward kernels accumulate into parameter
 *    gradients (and overwrite input gradients) as kernels.h specifies. The Llama family's
 *    kernels too: RMSNorm, rotary embeddings (both pairings, partial rotation), SwiGLU, and
 *    grouped-/multi-query attention (a group's K/V gradients summed over its query heads); BERT's
 *    bidirectional attention with a key-padding mask (attention_padded_*), exact GeLU and tanh;
 *    T5's cross-attention (cross_attention_*: Tq != Tk queries over keys and values) and its
 *    relative position bias (attention_bias_*: a score bias, padded or causal, and its gradient).
 * Shapes are small and odd (B=2, T=5, C=7, H=2, D=3, V=11) so that off-by-one layouts show up.
 *
 * Error measure: err(a, b) = max_i |a_i - b_i| / max(max_i |b_i|, 1e-6) with b the double
 * reference. Bounds: the double finite differences (h = 1e-5 on O(1) inputs) are accurate to
 * ~1e-9 (truncation h^2 f''' ~ 1e-10, rounding 1e-16 |L| / h ~ 1e-10), so the gradient error is
 * the float kernel's own rounding, ~1e-6 for these short reductions; GRAD_TOL = 1e-4 leaves 100x
 * margin. A sign error or a wrong scale factor gives err >= ~0.3, and every gradient check also
 * requires the reference gradient to be non-trivial (max |b| > 1e-3), so it cannot pass vacuously.
 * Forwards are compared at FWD_TOL = 1e-5 (float rounding of O(10)-term sums, ~1e-6). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"

#define GRAD_TOL 1e-4
#define FWD_TOL 1e-5
#define FD_H 1e-5

static const kernel_ops *K;

/* ------------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* uniform in [lo, hi), rounded to float so that float and double copies are identical */
static float frand(float lo, float hi) {
    double u = (double)(xorshift64() >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

static float *fill(size_t n, float lo, float hi) {
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = frand(lo, hi);
    return a;
}

static float *fzeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dzeros(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static double *to_double(const float *a, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

/* max |a - b| / max(max |b|, 1e-6) */
static double rel_err(const float *a, const double *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= num)) num = d; /* also catches NaN */
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 1e-6 ? den : 1e-6);
}

static double max_abs(const double *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fabs(b[i]) > m ? fabs(b[i]) : m;
    return m;
}

static void check_fwd(const char *what, const float *a, const double *b, size_t n) {
    double e = rel_err(a, b, n);
    tap_ok(e < FWD_TOL, "%s: forward matches double reference (rel err %.2e)", what, e);
}

static void check_grad(const char *what, const float *a, const double *b, size_t n) {
    double e = rel_err(a, b, n), m = max_abs(b, n);
    tap_ok(e < GRAD_TOL && m > 1e-3,
           "%s: gradient matches finite differences (rel err %.2e, max|g| %.2e)", what, e, m);
}

/* a2 (kernel called twice) == 2 * a1 (called once), up to float rounding of the second sum */
static void check_accumulates(const char *what, const float *a1, const float *a2, size_t n) {
    double *twice = dzeros(n);
    for (size_t i = 0; i < n; i++) twice[i] = 2.0 * (double)a1[i];
    double e = rel_err(a2, twice, n);
    tap_ok(e < 1e-6 && max_abs(twice, n) > 0.0,
           "%s: backward accumulates (two calls give 2x, rel err %.2e)", what, e);
    free(twice);
}

static double dot(const double *a, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * (double)r[i];
    return s;
}

/* central differences of f(ctx) w.r.t. every element of x (which f reads through ctx) */
typedef double (*objective_fn)(void *ctx);
static void fd_grad(objective_fn f, void *ctx, double *x, size_t n, double *grad) {
    for (size_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + FD_H;
        double lp = f(ctx);
        x[i] = saved - FD_H;
        double lm = f(ctx);
        x[i] = saved;
        grad[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static const int B = 2, T = 5, C = 7, H = 2, D = 3, V = 11;

/* ------------------------------------------------------------------ embeddings */

typedef struct {
    const int *tokens;
    double *table, *out;
    const float *R;
    int N, C, vocab_start, vocab_rows;
} emb_ctx;

static void ref_embedding(emb_ctx *c) {
    for (int n = 0; n < c->N; n++) {
        int row = c->tokens[n] - c->vocab_start;
        for (int j = 0; j < c->C; j++)
            c->out[n * c->C + j] = (row >= 0 && row < c->vocab_rows) ? c->table[row * c->C + j] : 0.0;
    }
}

static double obj_embedding(void *p) {
    emb_ctx *c = p;
    ref_embedding(c);
    return dot(c->out, c->R, (size_t)c->N * c->C);
}

/* The table buffers carry one guard row before and after the local rows (neighbouring ranks'
 * rows): forward must not read them and backward must not write them, so tokens just outside
 * the local range (2 and 14 here) catch off-by-one range checks. */
static void test_embedding(void) {
    int N = B * T, vocab_start = 3, rows = V;
    int tokens[10] = {3, 7, 13, 0, 5, 14, 7, 2, 9, 3}; /* local rows: [3, 14) */
    size_t nt = (size_t)(rows + 2) * C; /* with the guard rows */
    float *table = fill(nt, -1, 1), *R = fill((size_t)N * C, -1, 1);
    float *out = fill((size_t)N * C, -1, 1); /* garbage: forward must overwrite */
    float *dtable = fzeros(nt);
    double *out_ref = dzeros((size_t)N * C), *g_ref = dzeros(nt);
    double *table_d = to_double(table, nt);
    emb_ctx c = {tokens, table_d + C, out_ref, R, N, C, vocab_start, rows};

    K->embedding_forward(out, tokens, table + C, N, C, vocab_start, rows);
    ref_embedding(&c);
    check_fwd("embedding (0 for non-local tokens)", out, out_ref, (size_t)N * C);

    K->embedding_backward(dtable + C, R, tokens, N, C, vocab_start, rows);
    fd_grad(obj_embedding, &c, table_d, nt, g_ref); /* guard rows: reference gradient 0 */
    check_grad("embedding dtable (nothing outside the local rows)", dtable, g_ref, nt);

    float *dtable2 = fzeros(nt);
    K->embedding_backward(dtable2 + C, R, tokens, N, C, vocab_start, rows);
    K->embedding_backward(dtable2 + C, R, tokens, N, C, vocab_start, rows);
    check_accumulates("embedding dtable", dtable, dtable2, nt);

    free(table); free(R); free(out); free(dtable); free(dtable2); free(out_ref); free(g_ref);
    free(table_d);
}

typedef struct {
    const float *base, *R;
    double *wpe, *out;
    int position_start;
} pos_ctx;

static void ref_position(pos_ctx *c) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < C; j++)
                c->out[(b * T + t) * C + j] = (double)c->base[(b * T + t) * C + j] +
                                              c->wpe[(c->position_start + t) * C + j];
}

static double obj_position(void *p) {
    pos_ctx *c = p;
    ref_position(c);
    return dot(c->out, c->R, (size_t)B * T * C);
}

static void test_position_embedding(void) {
    int pos_start = 2, maxT = pos_start + T + 2;
    size_t n_out = (size_t)B * T * C, n_wpe = (size_t)maxT * C;
    float *base = fill(n_out, -1, 1), *wpe = fill(n_wpe, -1, 1), *R = fill(n_out, -1, 1);
    float *out = malloc(n_out * sizeof(float));
    memcpy(out, base, n_out * sizeof(float));
    double *out_ref = dzeros(n_out), *g_ref = dzeros(n_wpe);
    pos_ctx c = {base, R, to_double(wpe, n_wpe), out_ref, pos_start};

    K->position_embedding_forward(out, wpe, B, T, C, pos_start);
    ref_position(&c);
    check_fwd("position embedding (adds onto out)", out, out_ref, n_out);

    float *dwpe = fzeros(n_wpe), *dwpe2 = fzeros(n_wpe);
    K->position_embedding_backward(dwpe, R, B, T, C, pos_start);
    fd_grad(obj_position, &c, c.wpe, n_wpe, g_ref);
    check_grad("position embedding dwpe", dwpe, g_ref, n_wpe);
    K->position_embedding_backward(dwpe2, R, B, T, C, pos_start);
    K->position_embedding_backward(dwpe2, R, B, T, C, pos_start);
    check_accumulates("position embedding dwpe", dwpe, dwpe2, n_wpe);

    free(base); free(wpe); free(R); free(out); free(out_ref); free(g_ref); free(dwpe); free(dwpe2);
    free(c.wpe);
}

/* ------------------------------------------------------------------ layer norm */

typedef struct {
    double *x, *w, *b, *out, *mean, *rstd;
    const float *R;
    int N;
    double eps;
} ln_ctx;

static void ref_layernorm(ln_ctx *c) {
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + n * C;
        double m = 0.0, var = 0.0;
        for (int j = 0; j < C; j++) m += x[j];
        m /= C;
        for (int j = 0; j < C; j++) var += (x[j] - m) * (x[j] - m);
        var /= C;
        double s = 1.0 / sqrt(var + c->eps);
        for (int j = 0; j < C; j++) c->out[n * C + j] = (x[j] - m) * s * c->w[j] + c->b[j];
        c->mean[n] = m;
        c->rstd[n] = s;
    }
}

static double obj_layernorm(void *p) {
    ln_ctx *c = p;
    ref_layernorm(c);
    return dot(c->out, c->R, (size_t)c->N * C);
}

static void test_layernorm(void) {
    int N = B * T;
    size_t n = (size_t)N * C;
    float eps = 1e-5f;
    float *x = fill(n, -2, 2), *w = fill(C, 0.5f, 1.5f), *b = fill(C, -0.5f, 0.5f);
    float *R = fill(n, -1, 1), *out = fzeros(n), *mean = fzeros(N), *rstd = fzeros(N);
    /* row 3 has variance ~1e-4, where eps = 1e-5 changes rstd by ~5%: eps must be honoured */
    for (int j = 0; j < C; j++) x[3 * C + j] = 0.25f + 0.01f * x[3 * C + j];
    ln_ctx c = {to_double(x, n), to_double(w, C), to_double(b, C), dzeros(n), dzeros(N),
                dzeros(N), R, N, eps};

    K->layernorm_forward(out, mean, rstd, x, w, b, N, C, eps);
    ref_layernorm(&c);
    check_fwd("layernorm out", out, c.out, n);
    check_fwd("layernorm mean", mean, c.mean, N);
    check_fwd("layernorm rstd", rstd, c.rstd, N);

    double *gx = dzeros(n), *gw = dzeros(C), *gb = dzeros(C);
    fd_grad(obj_layernorm, &c, c.x, n, gx);
    fd_grad(obj_layernorm, &c, c.w, C, gw);
    fd_grad(obj_layernorm, &c, c.b, C, gb);

    float *dx = fzeros(n), *dw = fzeros(C), *db = fzeros(C);
    K->layernorm_backward(dx, dw, db, NULL, R, x, w, mean, rstd, N, C);
    check_grad("layernorm dx", dx, gx, n);
    check_grad("layernorm dweight", dw, gw, C);
    check_grad("layernorm dbias", db, gb, C);

    float *dx2 = fzeros(n), *dw2 = fzeros(C), *db2 = fzeros(C);
    K->layernorm_backward(dx2, dw2, db2, NULL, R, x, w, mean, rstd, N, C);
    K->layernorm_backward(dx2, dw2, db2, NULL, R, x, w, mean, rstd, N, C);
    check_accumulates("layernorm dx (residual stream)", dx, dx2, n);
    check_accumulates("layernorm dweight", dw, dw2, C);
    check_accumulates("layernorm dbias", db, db2, C);

    /* from the output (--memory-efficient-layer-norm): the same gradients; with a zero weight the
     * column's norm is taken as 0 ((y - b) / eps, y = b there), as Apex's clamp does: finite */
    float *dx3 = fzeros(n), *dw3 = fzeros(C), *db3 = fzeros(C);
    K->layernorm_backward_from_output(dx3, dw3, db3, NULL, R, out, w, b, rstd, N, C, eps);
    check_grad("layernorm from its output dx", dx3, gx, n);
    check_grad("layernorm from its output dweight", dw3, gw, C);
    check_grad("layernorm from its output dbias", db3, gb, C);
    float w0 = w[0];
    w[0] = 0.0f;
    K->layernorm_forward(out, mean, rstd, x, w, b, N, C, eps);
    float *dx4 = fzeros(n), *dw4 = fzeros(C), *db4 = fzeros(C);
    K->layernorm_backward_from_output(dx4, dw4, db4, NULL, R, out, w, b, rstd, N, C, eps);
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(dx4[i]) != 0;
    tap_ok(finite && dw4[0] == 0.0f && isfinite(dw4[1]) && dw4[1] != 0.0f,
           "layernorm from its output, a zero weight: dx finite, that column's dweight 0 (clamped as Apex's)");
    w[0] = w0;
    free(dx3); free(dw3); free(db3); free(dx4); free(dw4); free(db4);

    free(x); free(w); free(b); free(R); free(out); free(mean); free(rstd);
    free(c.x); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd);
    free(gx); free(gw); free(gb); free(dx); free(dw); free(db); free(dx2); free(dw2); free(db2);
}

/* ------------------------------------------------------------------ matmul */

typedef struct {
    double *x, *w, *b, *out; /* b NULL: no bias */
    const float *R;
    int N, IC, OC;
} mm_ctx;

static void ref_matmul(mm_ctx *c) {
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double s = c->b ? c->b[o] : 0.0;
            for (int i = 0; i < c->IC; i++) s += c->x[n * c->IC + i] * c->w[o * c->IC + i];
            c->out[n * c->OC + o] = s;
        }
}

static double obj_matmul(void *p) {
    mm_ctx *c = p;
    ref_matmul(c);
    return dot(c->out, c->R, (size_t)c->N * c->OC);
}

static void test_matmul(int with_bias) {
    const char *tag = with_bias ? "matmul with bias" : "matmul without bias";
    char what[128];
    int N = B * T, IC = C, OC = 5;
    size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = with_bias ? fill(OC, -1, 1) : NULL;
    float *R = fill(no, -1, 1), *out = fill(no, -9, 9); /* garbage: forward overwrites */
    mm_ctx c = {to_double(x, nx), to_double(w, nw), with_bias ? to_double(b, OC) : NULL,
                dzeros(no), R, N, IC, OC};

    K->matmul_forward(out, NULL, x, w, b, N, IC, OC);
    ref_matmul(&c);
    check_fwd(tag, out, c.out, no);

    double *gx = dzeros(nx), *gw = dzeros(nw), *gb = dzeros(OC);
    fd_grad(obj_matmul, &c, c.x, nx, gx);
    fd_grad(obj_matmul, &c, c.w, nw, gw);
    if (with_bias) fd_grad(obj_matmul, &c, c.b, OC, gb);

    float *dx = fill(nx, -9, 9), *dw = fzeros(nw), *db = with_bias ? fzeros(OC) : NULL;
    K->matmul_backward(dx, dw, db, R, x, w, N, IC, OC);
    snprintf(what, sizeof what, "%s dx (overwritten)", tag);
    check_grad(what, dx, gx, nx);
    snprintf(what, sizeof what, "%s dweight", tag);
    check_grad(what, dw, gw, nw);
    if (with_bias) {
        snprintf(what, sizeof what, "%s dbias", tag);
        check_grad(what, db, gb, OC);
    }

    /* twice into the same buffers: dx still overwritten, dweight/dbias accumulate; dx NULL ok */
    float *dx2 = fill(nx, -9, 9), *dw2 = fzeros(nw), *db2 = with_bias ? fzeros(OC) : NULL;
    K->matmul_backward(NULL, dw2, db2, R, x, w, N, IC, OC);
    K->matmul_backward(dx2, dw2, db2, R, x, w, N, IC, OC);
    snprintf(what, sizeof what, "%s dweight", tag);
    check_accumulates(what, dw, dw2, nw);
    if (with_bias) {
        snprintf(what, sizeof what, "%s dbias", tag);
        check_accumulates(what, db, db2, OC);
    }
    snprintf(what, sizeof what, "%s dx is overwritten, not accumulated", tag);
    tap_ok(memcmp(dx, dx2, nx * sizeof(float)) == 0, "%s", what);

    free(x); free(w); free(b); free(R); free(out); free(c.x); free(c.w); free(c.b); free(c.out);
    free(gx); free(gw); free(gb); free(dx); free(dw); free(db); free(dx2); free(dw2); free(db2);
}

/* ------------------------------------------------------------------ attention */

/* qkv rows of NH query heads in NG groups (kernels.h's layout; NG == NH: multi-head) */
typedef struct {
    double *qkv, *out, *att; /* att [B,NH,T,T] pre-dropout probabilities */
    const float *R;
    int NH, NG, head_start, total_heads;
    dropout_rng rng;
    int window;  /* sliding window (window_left): key t2 visible from t1 - window; -1: none */
} att_ctx;

/* whether query t1 sees key t2: causal, and within the sliding window when there is one */
static int att_visible(const att_ctx *c, int t1, int t2) {
    return t2 <= t1 && (c->window < 0 || t2 >= t1 - c->window);
}

static void ref_attention(att_ctx *c) {
    int NH = c->NH, NG = c->NG, row = (NH + 2 * NG) * D, HD = NH * D;
    double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t1 = 0; t1 < T; t1++) {
                /* written out here, not through qkv_query_offset: group g = h / (NH/NG) holds
                 * its NH/NG query heads, then k, then v */
                int per = NH / NG, g = h / per;
                const double *q = c->qkv + (b * T + t1) * row + (g * (per + 2) + h % per) * D;
                double *att = c->att + ((b * NH + h) * T + t1) * T;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    const double *k = c->qkv + (b * T + t2) * row + (g * (per + 2) + per) * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    att[t2] = s * scale;
                    if (att_visible(c, t1, t2) && att[t2] > mx) mx = att[t2];
                }
                for (int t2 = 0; t2 < T; t2++) {
                    att[t2] = att_visible(c, t1, t2) ? exp(att[t2] - mx) : 0.0;
                    sum += att[t2];
                }
                for (int t2 = 0; t2 < T; t2++) att[t2] /= sum;
                double *o = c->out + (b * T + t1) * HD + h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0;
                for (int t2 = 0; t2 <= t1; t2++) {
                    double a = att[t2];
                    if (c->rng.p > 0.0f) {
                        uint64_t head_base = c->rng.offset + ((uint64_t)b * c->total_heads + c->head_start + h) * T * T;
                        a = philox_keep_attention(c->rng.seed, c->rng.stream, head_base, T, t1, t2, c->rng.p)
                                ? a / (1.0 - (double)c->rng.p) : 0.0;
                    }
                    const double *v = c->qkv + (b * T + t2) * row + (g * (per + 2) + per + 1) * D;
                    for (int d = 0; d < D; d++) o[d] += a * v[d];
                }
            }
}

static double obj_attention(void *p) {
    att_ctx *c = p;
    ref_attention(c);
    return dot(c->out, c->R, (size_t)B * T * c->NH * D);
}

/* NH query heads in NG groups (NG == NH: multi-head attention; NG < NH: grouped-query, whose
 * key and value gradients sum over the group's heads) */
static void test_attention(float p, int NH, int NG, int window) {
    char tag[96], what[200];
    snprintf(tag, sizeof tag, "attention p=%.2f heads %d groups %d%s", p, NH, NG,
             window < 0 ? "" : window == 1 ? " window 1" : " window 2");
    int head_start = 1, total_heads = NH + 2; /* local heads among more: global mask index */
    dropout_rng rng = {p, 1234, 0xABCDEF, 77};
    int row = (NH + 2 * NG) * D;
    size_t nqkv = (size_t)B * T * row, nout = (size_t)B * T * NH * D, natt = (size_t)B * NH * T * T;
    float *qkv = fill(nqkv, -1.5f, 1.5f), *R = fill(nout, -1, 1), *out = fill(nout, -9, 9);
    size_t wbytes = K->attention_workspace_bytes(B, T, NH, D);
    tap_ok(wbytes >= natt * sizeof(float), "%s: workspace holds [B,H,T,T] floats", tag);
    float *ws = K->alloc(wbytes);
    att_ctx c = {to_double(qkv, nqkv), dzeros(nout), dzeros(natt), R, NH, NG, head_start, total_heads, rng, window};

    K->attention_forward(out, ws, qkv, B, T, NH, NG, D, head_start, total_heads, window, rng);
    ref_attention(&c);
    check_fwd(tag, out, c.out, nout);
    snprintf(what, sizeof what, "%s workspace probabilities", tag);
    check_fwd(what, ws, c.att, natt);

    if (p > 0.0f) { /* the dropout must actually have dropped something, but not everything */
        int dropped = 0, total = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t1 = 0; t1 < T; t1++)
                    for (int t2 = 0; t2 <= t1; t2++) {
                        uint64_t head_base = rng.offset + ((uint64_t)b * total_heads + head_start + h) * T * T;
                        dropped += !philox_keep_attention(rng.seed, rng.stream, head_base, T, t1, t2, p);
                        total++;
                    }
        tap_ok(dropped > 0 && dropped < total, "%s: mask drops %d of %d probabilities", tag,
               dropped, total);
    }

    double *g = dzeros(nqkv);
    fd_grad(obj_attention, &c, c.qkv, nqkv, g);
    float *dqkv = fill(nqkv, -9, 9); /* garbage: backward overwrites all of dqkv */
    float *dbias = fill((size_t)row, -1, 1), *dbias0 = malloc((size_t)row * sizeof(float));
    memcpy(dbias0, dbias, (size_t)row * sizeof(float));
    K->attention_backward(dqkv, dbias, R, qkv, NULL, ws, B, T, NH, NG, D, head_start, total_heads, window, rng);
    snprintf(what, sizeof what, "%s dqkv (overwritten)", tag);
    check_grad(what, dqkv, g, nqkv);
    /* the qkv bias gradient: dbias += the column sums of dqkv */
    double bias_err = 0.0;
    for (int j = 0; j < row; j++) {
        double sum = dbias0[j], mass = fabs(dbias0[j]);
        for (int r = 0; r < B * T; r++) {
            sum += dqkv[(size_t)r * row + j];
            mass += fabs(dqkv[(size_t)r * row + j]);
        }
        bias_err = fmax(bias_err, fabs(dbias[j] - sum) / (mass + 1e-30));
    }
    tap_ok(bias_err < 1e-6, "%s: dbias += column sums of dqkv (error %.1e of the column's mass)", tag, bias_err);
    free(dbias);
    free(dbias0);

    /* causality: changing token tf's q, k, v (batch 0) leaves outputs before tf untouched */
    int tf = 3;
    float *qkv2 = malloc(nqkv * sizeof(float)), *out2 = fzeros(nout);
    memcpy(qkv2, qkv, nqkv * sizeof(float));
    for (int j = 0; j < row; j++) qkv2[tf * row + j] += 0.7f;
    K->attention_forward(out2, ws, qkv2, B, T, NH, NG, D, head_start, total_heads, window, rng);
    size_t before = (size_t)tf * NH * D;
    int same_before = memcmp(out, out2, before * sizeof(float)) == 0;
    int changed_at = memcmp(out + before, out2 + before, (size_t)NH * D * sizeof(float)) != 0;
    int other_batch = memcmp(out + (size_t)T * NH * D, out2 + (size_t)T * NH * D,
                             (size_t)T * NH * D * sizeof(float)) == 0;
    tap_ok(same_before && changed_at && other_batch,
           "%s: causal (a change at t=%d moves outputs at t>=%d only, batch 0 only)", tag, tf, tf);
    if (window >= 0) { /* the window: a change at t=0 reaches the outputs at t <= window only */
        memcpy(qkv2, qkv, nqkv * sizeof(float));
        for (int j = 0; j < row; j++) qkv2[j] += 0.7f;
        K->attention_forward(out2, ws, qkv2, B, T, NH, NG, D, head_start, total_heads, window, rng);
        size_t reach = (size_t)(window + 1) * NH * D, rows0 = (size_t)T * NH * D;
        int changed_inside = memcmp(out + reach - (size_t)NH * D, out2 + reach - (size_t)NH * D,
                                    (size_t)NH * D * sizeof(float)) != 0;
        int same_outside = memcmp(out + reach, out2 + reach, (rows0 - reach) * sizeof(float)) == 0;
        tap_ok(changed_inside && same_outside,
               "%s: a change at t=0 moves the output at t=%d and none after it", tag, window);
    }

    K->release(ws);
    free(qkv); free(R); free(out); free(c.qkv); free(c.out); free(c.att); free(g); free(dqkv);
    free(qkv2); free(out2);
}

/* ------------------------------------------------------------------ padded attention (BERT) */

typedef struct {
    double *qkv, *out;
    const int *valid;  /* [B,T] key validity */
    const float *R;
    int NH, NG, head_start, total_heads;
    dropout_rng rng;
    double *bias;      /* attention_bias_*: [NH,T,T] added to the scaled scores; NULL: none */
    int causal;        /* attention_bias_*: keys after the query invisible too */
} padded_ctx;

static int padded_visible(const padded_ctx *c, int b, int t1, int t2) {
    return (!c->valid || c->valid[b * T + t2]) && (!c->causal || t2 <= t1);
}

/* softmax over the visible keys of every query, in double; keys with valid 0 (and with causal
 * set the later ones) take no part; with a bias, it is added to the scaled scores */
static void ref_attention_padded(padded_ctx *c) {
    int NH = c->NH, NG = c->NG, row = (NH + 2 * NG) * D, HD = NH * D, per = NH / NG;
    double scale = 1.0 / sqrt((double)D), att[T];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t1 = 0; t1 < T; t1++) {
                int g = h / per;
                const double *q = c->qkv + (b * T + t1) * row + (g * (per + 2) + h % per) * D;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    const double *k = c->qkv + (b * T + t2) * row + (g * (per + 2) + per) * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    att[t2] = s * scale + (c->bias ? c->bias[(h * T + t1) * T + t2] : 0.0);
                    if (padded_visible(c, b, t1, t2) && att[t2] > mx) mx = att[t2];
                }
                for (int t2 = 0; t2 < T; t2++) {
                    att[t2] = padded_visible(c, b, t1, t2) ? exp(att[t2] - mx) : 0.0;
                    sum += att[t2];
                }
                double *o = c->out + (b * T + t1) * HD + h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    double a = att[t2] / sum;
                    if (c->rng.p > 0.0f) {
                        uint64_t head_base = c->rng.offset + ((uint64_t)b * c->total_heads + c->head_start + h) * T * T;
                        a = philox_keep_attention(c->rng.seed, c->rng.stream, head_base, T, t1, t2, c->rng.p)
                                ? a / (1.0 - (double)c->rng.p) : 0.0;
                    }
                    const double *v = c->qkv + (b * T + t2) * row + (g * (per + 2) + per + 1) * D;
                    for (int d = 0; d < D; d++) o[d] += a * v[d];
                }
            }
}

static double obj_attention_padded(void *p) {
    padded_ctx *c = p;
    ref_attention_padded(c);
    return dot(c->out, c->R, (size_t)B * T * c->NH * D);
}

/* batch 0 padded at its end, batch 1 with a padded key inside */
static void test_attention_padded(float p, int NH, int NG) {
    char tag[80], what[180];
    snprintf(tag, sizeof tag, "padded attention p=%.2f heads %d groups %d", p, NH, NG);
    if (!K->attention_padded_forward || !K->attention_padded_backward) {
        tap_ok(0, "%s: the backend has the op", tag);
        return;
    }
    static const int valid[] = {1, 1, 1, 0, 0, 1, 0, 1, 1, 1}; /* [B = 2, T = 5] */
    if ((int)(sizeof valid / sizeof *valid) != B * T) { tap_ok(0, "%s: the mask fits [B,T]", tag); return; }
    int head_start = 1, total_heads = NH + 2;
    dropout_rng rng = {p, 4321, 0xFEDCBA, 5};
    int row = (NH + 2 * NG) * D;
    size_t nqkv = (size_t)B * T * row, nout = (size_t)B * T * NH * D;
    float *qkv = fill(nqkv, -1.5f, 1.5f), *R = fill(nout, -1, 1), *out = fill(nout, -9, 9);
    float *ws = K->alloc(K->attention_workspace_bytes(B, T, NH, D));
    int *key_valid = K->alloc(sizeof valid);
    K->copy_from_host(key_valid, valid, sizeof valid);
    padded_ctx c = {to_double(qkv, nqkv), dzeros(nout), valid, R, NH, NG, head_start, total_heads, rng, NULL, 0};

    K->attention_padded_forward(out, ws, qkv, key_valid, B, T, NH, NG, D, head_start, total_heads, rng);
    ref_attention_padded(&c);
    check_fwd(tag, out, c.out, nout);

    double *g = dzeros(nqkv);
    fd_grad(obj_attention_padded, &c, c.qkv, nqkv, g);
    float *dqkv = fill(nqkv, -9, 9); /* garbage: backward overwrites all of dqkv */
    float *dbias = fzeros((size_t)row);
    K->attention_padded_backward(dqkv, dbias, R, qkv, out, key_valid, ws, B, T, NH, NG, D, head_start, total_heads,
                                 rng);
    snprintf(what, sizeof what, "%s dqkv (overwritten)", tag);
    check_grad(what, dqkv, g, nqkv);
    double *column_sums = dzeros((size_t)row); /* the qkv bias gradient: dqkv's column sums */
    for (size_t i = 0; i < (size_t)B * T; i++)
        for (int j = 0; j < row; j++) column_sums[j] += g[i * (size_t)row + (size_t)j];
    snprintf(what, sizeof what, "%s qkv bias gradient (dqkv's column sums)", tag);
    check_grad(what, dbias, column_sums, (size_t)row);
    free(dbias); free(column_sums);

    /* a padded key or value changes nothing; a later valid key changes earlier queries' outputs */
    float *qkv2 = malloc(nqkv * sizeof(float)), *out2 = fzeros(nout);
    memcpy(qkv2, qkv, nqkv * sizeof(float));
    for (int j = 0; j < row; j++) {  /* batch 0, t = 4 (padded): its k and v, not its q */
        int per = NH / NG, in_query = (j / D) % (per + 2) < per;
        if (!in_query) qkv2[(size_t)4 * row + j] += 0.9f;
    }
    K->attention_padded_forward(out2, ws, qkv2, key_valid, B, T, NH, NG, D, head_start, total_heads, rng);
    int unchanged = memcmp(out, out2, nout * sizeof(float)) == 0;
    memcpy(qkv2, qkv, nqkv * sizeof(float));
    for (int j = 0; j < row; j++) qkv2[(size_t)(T + 4) * row + j] += 0.9f;  /* batch 1, t = 4 */
    K->attention_padded_forward(out2, ws, qkv2, key_valid, B, T, NH, NG, D, head_start, total_heads, rng);
    int earlier_moved = memcmp(out + (size_t)T * NH * D, out2 + (size_t)T * NH * D, (size_t)NH * D * sizeof(float)) != 0;
    tap_ok(unchanged && earlier_moved, "%s: padded keys are invisible, later valid keys visible (bidirectional)", tag);

    K->release(ws);
    K->release(key_valid);
    free(qkv); free(R); free(out); free(c.qkv); free(c.out); free(g); free(dqkv); free(qkv2); free(out2);
}

/* ------------------------------------------------------------------ attention with a score bias (T5) */

/* T5's relative position bias (attention_bias_*): the encoder's (padded, bidirectional) or the
 * decoder's (causal, no padding mask) self-attention with bias [NH,T,T] added to the scaled
 * scores; against the double reference and its finite differences in qkv and in the bias (the
 * bias gradient summed over the batch, accumulated into what dscore_bias held); and with a zero
 * bias, bit for bit attention_padded_forward's output (padded) */
static void test_attention_bias(float p, int NH, int NG, int causal) {
    char tag[96], what[200];
    snprintf(tag, sizeof tag, "attention with score bias p=%.2f heads %d groups %d %s", p, NH, NG,
             causal ? "causal" : "padded");
    if (!K->attention_bias_forward || !K->attention_bias_backward) {
        tap_ok(0, "%s: the backend has the op", tag);
        return;
    }
    static const int valid[] = {1, 1, 1, 0, 0, 1, 0, 1, 1, 1}; /* [B = 2, T = 5] */
    int head_start = 1, total_heads = NH + 2;
    dropout_rng rng = {p, 987, 0x5A5A5A, 11};
    int row = (NH + 2 * NG) * D;
    size_t nqkv = (size_t)B * T * row, nout = (size_t)B * T * NH * D, nbias = (size_t)NH * T * T;
    float *qkv = fill(nqkv, -1.5f, 1.5f), *R = fill(nout, -1, 1), *out = fill(nout, -9, 9);
    float *bias = fill(nbias, -2, 2);
    float *ws = K->alloc(K->attention_workspace_bytes(B, T, NH, D));
    int *key_valid = K->alloc(sizeof valid);
    K->copy_from_host(key_valid, valid, sizeof valid);
    const int *kv_mask = causal ? NULL : key_valid;
    padded_ctx c = {to_double(qkv, nqkv), dzeros(nout), causal ? NULL : valid, R, NH, NG, head_start, total_heads,
                    rng, to_double(bias, nbias), causal};

    K->attention_bias_forward(out, ws, qkv, kv_mask, bias, causal, B, T, NH, NG, D, head_start, total_heads, rng);
    ref_attention_padded(&c);
    check_fwd(tag, out, c.out, nout);

    double *g = dzeros(nqkv), *gbias = dzeros(nbias);
    fd_grad(obj_attention_padded, &c, c.qkv, nqkv, g);
    fd_grad(obj_attention_padded, &c, c.bias, nbias, gbias);
    float *dqkv = fill(nqkv, -9, 9); /* garbage: backward overwrites all of dqkv */
    float *dqkv_bias = fzeros((size_t)row), *dscore = fill(nbias, -1, 1), *dscore_before = malloc(nbias * sizeof(float));
    memcpy(dscore_before, dscore, nbias * sizeof(float));
    K->attention_bias_backward(dqkv, dqkv_bias, dscore, R, qkv, kv_mask, causal, ws, B, T, NH, NG, D, head_start,
                               total_heads, rng);
    snprintf(what, sizeof what, "%s dqkv (overwritten)", tag);
    check_grad(what, dqkv, g, nqkv);
    for (size_t i = 0; i < nbias; i++) dscore[i] -= dscore_before[i];
    snprintf(what, sizeof what, "%s score bias gradient (summed over the batch, accumulated)", tag);
    check_grad(what, dscore, gbias, nbias);

    if (!causal) {  /* a zero bias is the padded attention's, bit for bit */
        float *zero = fzeros(nbias), *out2 = fzeros(nout);
        K->attention_bias_forward(out, ws, qkv, key_valid, zero, 0, B, T, NH, NG, D, head_start, total_heads, rng);
        K->attention_padded_forward(out2, ws, qkv, key_valid, B, T, NH, NG, D, head_start, total_heads, rng);
        tap_ok(memcmp(out, out2, nout * sizeof(float)) == 0, "%s: with a zero bias, attention_padded_forward's bits", tag);
        free(zero); free(out2);
    } else {  /* a later key changes no earlier query */
        float *qkv2 = malloc(nqkv * sizeof(float)), *out2 = fzeros(nout);
        memcpy(qkv2, qkv, nqkv * sizeof(float));
        for (int j = 0; j < row; j++) qkv2[(size_t)(T - 1) * row + j] += 0.9f;  /* batch 0's last row */
        K->attention_bias_forward(out2, ws, qkv2, NULL, bias, 1, B, T, NH, NG, D, head_start, total_heads, rng);
        tap_ok(memcmp(out, out2, (size_t)(T - 1) * NH * D * sizeof(float)) == 0 &&
                   memcmp(out + (size_t)(T - 1) * NH * D, out2 + (size_t)(T - 1) * NH * D, (size_t)NH * D * sizeof(float)),
               "%s: a later key changes no earlier query's output", tag);
        free(qkv2); free(out2);
    }
    K->release(ws);
    K->release(key_valid);
    free(qkv); free(R); free(out); free(bias); free(c.qkv); free(c.out); free(c.bias); free(g); free(gbias);
    free(dqkv); free(dqkv_bias); free(dscore); free(dscore_before);
}

/* ------------------------------------------------------------------ cross-attention (T5) */

/* queries of Tq rows over Tk keys and values: q[B,Tq,H*D], kv[B,Tk,H*2D] (per head k then v) */
enum { CROSS_TQ = 3, CROSS_TK = 6 };
typedef struct {
    double *q, *kv, *out;
    const int *valid; /* [B, CROSS_TK] */
    const float *R;
    int NH, head_start, total_heads;
    dropout_rng rng;
} cross_ctx;

static void ref_cross_attention(cross_ctx *c) {
    int NH = c->NH, HD = NH * D;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < CROSS_TQ; i++) {
                double p[CROSS_TK], top = -INFINITY, total = 0.0;
                const double *q = c->q + (b * CROSS_TQ + i) * HD + h * D;
                for (int j = 0; j < CROSS_TK; j++) {
                    const double *k = c->kv + (b * CROSS_TK + j) * 2 * HD + h * 2 * D;
                    p[j] = 0.0;
                    for (int d = 0; d < D; d++) p[j] += q[d] * k[d] / sqrt((double)D);
                    if (c->valid[b * CROSS_TK + j]) top = fmax(top, p[j]);
                }
                for (int j = 0; j < CROSS_TK; j++) total += p[j] = c->valid[b * CROSS_TK + j] ? exp(p[j] - top) : 0.0;
                double *o = c->out + (b * CROSS_TQ + i) * HD + h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0;
                uint64_t base = c->rng.offset + ((uint64_t)b * c->total_heads + c->head_start + h) * CROSS_TQ * CROSS_TK;
                for (int j = 0; j < CROSS_TK; j++) {
                    double weight = total > 0.0 ? p[j] / total : 0.0;
                    if (c->rng.p > 0.0f)
                        weight *= philox_keep_attention(c->rng.seed, c->rng.stream, base, CROSS_TK, i, j, c->rng.p)
                                      ? 1.0 / (1.0 - (double)c->rng.p) : 0.0;
                    for (int d = 0; d < D; d++) o[d] += weight * c->kv[(b * CROSS_TK + j) * 2 * HD + h * 2 * D + D + d];
                }
            }
}

static double obj_cross_attention(void *p) {
    cross_ctx *c = p;
    ref_cross_attention(c);
    return dot(c->out, c->R, (size_t)B * CROSS_TQ * c->NH * D);
}

/* T5's cross-attention (kernels.h cross_attention_*): Tq != Tk, batch 0's last keys padded,
 * batch 1 with a padded key inside; against the double reference and its finite differences
 * in q and kv, and the padded keys and values invisible */
static void test_cross_attention(float p, int NH) {
    char tag[80], what[180];
    snprintf(tag, sizeof tag, "cross-attention p=%.2f heads %d", p, NH);
    if (!K->cross_attention_forward || !K->cross_attention_backward) {
        tap_ok(0, "%s: the backend has the op", tag);
        return;
    }
    static const int valid[2 * CROSS_TK] = {1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1}; /* [B = 2, Tk] */
    int head_start = 1, total_heads = NH + 2, HD = NH * D;
    dropout_rng rng = {p, 977, 0xC0FFEE, 3};
    size_t nq = (size_t)B * CROSS_TQ * HD, nkv = (size_t)B * CROSS_TK * 2 * HD;
    float *q = fill(nq, -1.5f, 1.5f), *kv = fill(nkv, -1.5f, 1.5f), *R = fill(nq, -1, 1), *out = fill(nq, -9, 9);
    float *ws = K->alloc(K->cross_attention_workspace_bytes(B, CROSS_TQ, CROSS_TK, NH));
    int *key_valid = K->alloc(sizeof valid);
    K->copy_from_host(key_valid, valid, sizeof valid);
    cross_ctx c = {to_double(q, nq), to_double(kv, nkv), dzeros(nq), valid, R, NH, head_start, total_heads, rng};
    K->cross_attention_forward(out, ws, q, kv, key_valid, B, CROSS_TQ, CROSS_TK, NH, D, head_start, total_heads, rng);
    ref_cross_attention(&c);
    check_fwd(tag, out, c.out, nq);

    double *gq = dzeros(nq), *gkv = dzeros(nkv);
    fd_grad(obj_cross_attention, &c, c.q, nq, gq);
    fd_grad(obj_cross_attention, &c, c.kv, nkv, gkv);
    float *dq = fill(nq, -9, 9), *dkv = fill(nkv, -9, 9); /* garbage: backward overwrites both */
    K->cross_attention_backward(dq, dkv, R, q, kv, out, key_valid, ws, B, CROSS_TQ, CROSS_TK, NH, D, head_start,
                                total_heads, rng);
    snprintf(what, sizeof what, "%s dq (overwritten)", tag);
    check_grad(what, dq, gq, nq);
    snprintf(what, sizeof what, "%s dkv (overwritten)", tag);
    check_grad(what, dkv, gkv, nkv);

    float *kv2 = malloc(nkv * sizeof(float)), *out2 = fzeros(nq);
    memcpy(kv2, kv, nkv * sizeof(float));
    for (int j = 0; j < 2 * HD; j++) kv2[(size_t)5 * 2 * HD + j] += 0.9f;  /* batch 0, key 5: padded */
    K->cross_attention_forward(out2, ws, q, kv2, key_valid, B, CROSS_TQ, CROSS_TK, NH, D, head_start, total_heads, rng);
    tap_ok(memcmp(out, out2, nq * sizeof(float)) == 0, "%s: padded keys and values are invisible", tag);

    K->release(ws);
    K->release(key_valid);
    free(q); free(kv); free(R); free(out); free(c.q); free(c.kv); free(c.out); free(gq); free(gkv); free(dq); free(dkv);
    free(kv2); free(out2);
}

/* ------------------------------------------------------------------ RMSNorm */

typedef struct {
    double *x, *w, *out, *rstd;
    const float *R;
    int N;
    double eps;
} rms_ctx;

static void ref_rmsnorm(rms_ctx *c) {
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + n * C;
        double sq = 0.0;
        for (int j = 0; j < C; j++) sq += x[j] * x[j];
        double s = 1.0 / sqrt(sq / C + c->eps);
        for (int j = 0; j < C; j++) c->out[n * C + j] = x[j] * s * c->w[j];
        c->rstd[n] = s;
    }
}

static double obj_rmsnorm(void *p) {
    rms_ctx *c = p;
    ref_rmsnorm(c);
    return dot(c->out, c->R, (size_t)c->N * C);
}

static void test_rmsnorm(void) {
    int N = B * T;
    size_t n = (size_t)N * C;
    float eps = 1e-5f;
    float *x = fill(n, -2, 2), *w = fill(C, 0.5f, 1.5f);
    float *R = fill(n, -1, 1), *out = fzeros(n), *rstd = fzeros(N);
    /* row 3 has mean square ~1e-5, where eps = 1e-5 halves it: eps must be honoured */
    for (int j = 0; j < C; j++) x[3 * C + j] = 0.003f * x[3 * C + j];
    rms_ctx c = {to_double(x, n), to_double(w, C), dzeros(n), dzeros(N), R, N, eps};

    K->rmsnorm_forward(out, rstd, x, w, N, C, eps);
    ref_rmsnorm(&c);
    check_fwd("rmsnorm out", out, c.out, n);
    check_fwd("rmsnorm rstd", rstd, c.rstd, N);

    double *gx = dzeros(n), *gw = dzeros(C);
    fd_grad(obj_rmsnorm, &c, c.x, n, gx);
    fd_grad(obj_rmsnorm, &c, c.w, C, gw);
    float *dx = fzeros(n), *dw = fzeros(C);
    K->rmsnorm_backward(dx, dw, R, x, w, rstd, N, C);
    check_grad("rmsnorm dx", dx, gx, n);
    check_grad("rmsnorm dweight", dw, gw, C);

    float *dx2 = fzeros(n), *dw2 = fzeros(C);
    K->rmsnorm_backward(dx2, dw2, R, x, w, rstd, N, C);
    K->rmsnorm_backward(dx2, dw2, R, x, w, rstd, N, C);
    check_accumulates("rmsnorm dx (residual stream)", dx, dx2, n);
    check_accumulates("rmsnorm dweight", dw, dw2, C);

    /* from the output (--memory-efficient-layer-norm): the same gradients */
    float *dx3 = fzeros(n), *dw3 = fzeros(C);
    K->rmsnorm_backward_from_output(dx3, dw3, R, out, w, rstd, N, C, eps);
    check_grad("rmsnorm from its output dx", dx3, gx, n);
    check_grad("rmsnorm from its output dweight", dw3, gw, C);
    free(dx3); free(dw3);

    free(x); free(w); free(R); free(out); free(rstd); free(c.x); free(c.w); free(c.out); free(c.rstd);
    free(gx); free(gw); free(dx); free(dw); free(dx2); free(dw2);
}

/* ------------------------------------------------------------------ rotary embeddings */

typedef struct {
    double *x, *out; /* qkv rows of NH query heads in NG groups, head size DR */
    const float *R;
    int NH, NG, DR;
    rope_spec rope;
} rope_ctx;

/* Megatron-Core's inv_freq in double, with RotaryEmbedding._apply_scaling (Llama 3) written
 * out as in its source: where(wavelen > 8192 / 1, f / factor, f), then the medium band
 * (not < 8192 / 4 and not > 8192) smoothed */
static double ref_rope_theta(rope_spec rope, int i) {
    double f = 1.0 / pow((double)rope.base, 2.0 * i / rope.rotary_dim);
    if (rope.scaling_factor <= 0) return f;
    double factor = rope.scaling_factor, old_context = 8192, low = 1, high = 4;
    double wavelen = 2 * M_PI / f;
    double llama = wavelen > old_context / low ? f / factor : f;
    double smooth = (old_context / wavelen - low) / (high - low);
    double smoothed = (1 - smooth) * llama / factor + smooth * llama;
    int medium = !(wavelen < old_context / high) && !(wavelen > old_context / low);
    return medium ? smoothed : llama;
}

/* Megatron-Core's apply_rotary_pos_emb written out: t * cos + rotate_half(t) * sin on the first
 * rotary_dim channels, with emb = cat(freqs, freqs) (or freqs repeated pairwise, interleaved) */
static void ref_rope(rope_ctx *c) {
    int per = c->NH / c->NG, row = (c->NH + 2 * c->NG) * c->DR, rot = c->rope.rotary_dim;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < c->NG * (per + 2); j++) {
                const double *x = c->x + (b * T + t) * row + j * c->DR;
                double *o = c->out + (b * T + t) * row + j * c->DR;
                int is_value = j % (per + 2) == per + 1;
                for (int d = 0; d < c->DR; d++) {
                    if (is_value || d >= rot) { o[d] = x[d]; continue; }
                    int i = c->rope.interleaved ? d / 2 : d % (rot / 2);
                    double theta = ref_rope_theta(c->rope, i);
                    double angle = t * (double)c->rope.position_scale * theta;
                    double rotated; /* rotate_half: (-x2, x1) */
                    if (c->rope.interleaved) rotated = d % 2 == 0 ? -x[d + 1] : x[d - 1];
                    else rotated = d < rot / 2 ? -x[d + rot / 2] : x[d - rot / 2];
                    o[d] = x[d] * cos(angle) + rotated * sin(angle);
                }
            }
}

static double obj_rope(void *p) {
    rope_ctx *c = p;
    ref_rope(c);
    return dot(c->out, c->R, (size_t)B * T * (c->NH + 2 * c->NG) * c->DR);
}

/* scaling_factor 0: base 3 (the angles of every pair differ visibly over T = 5); else Llama 3's
 * rope scaling with base 500000 and 8 channels: pair 0 (wavelength 6) is kept, pair 2
 * (wavelength 4443) is in the smoothed band, pair 3 (wavelength 118000) turns 1/factor as fast;
 * positions scaled by 100 so that every pair turns visibly */
static void test_rope(int interleaved, int rotary_dim, float scaling_factor) {
    char tag[128], what[200];
    int NH = 4, NG = 2, DR = scaling_factor > 0 ? 8 : 6;
    rope_spec rope = {.rotary_dim = rotary_dim, .interleaved = interleaved, .base = 3.0f, .position_scale = 0.5f, .scaling_factor = scaling_factor};
    if (scaling_factor > 0) {
        rope.base = 500000.0f;
        rope.position_scale = 100.0f;
    }
    snprintf(tag, sizeof tag, "rope %s rotary_dim %d of %d%s", interleaved ? "interleaved" : "rotate-half",
             rotary_dim, DR, scaling_factor > 0 ? ", Llama 3 rope scaling" : "");
    size_t n = (size_t)B * T * (NH + 2 * NG) * DR;
    float *x = fill(n, -1.5f, 1.5f), *R = fill(n, -1, 1), *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    rope_ctx c = {to_double(x, n), dzeros(n), R, NH, NG, DR, rope};
    K->rope_forward(y, B, T, NH, NG, DR, rope);
    ref_rope(&c);
    check_fwd(tag, y, c.out, n);

    double *g = dzeros(n);
    fd_grad(obj_rope, &c, c.x, n, g);
    float *d = malloc(n * sizeof(float));
    memcpy(d, R, n * sizeof(float));
    K->rope_backward(d, B, T, NH, NG, DR, rope);
    snprintf(what, sizeof what, "%s backward (in place)", tag);
    check_grad(what, d, g, n);
    free(x); free(R); free(y); free(d); free(g); free(c.x); free(c.out);
}

/* ------------------------------------------------------------------ SwiGLU */

typedef struct {
    double *x, *out; /* x [N, 2F]: gate | up */
    const float *R;
    int N, F;
} swiglu_ctx;

static void ref_swiglu(swiglu_ctx *c) {
    for (int n = 0; n < c->N; n++)
        for (int f = 0; f < c->F; f++) {
            double a = c->x[n * 2 * c->F + f], u = c->x[n * 2 * c->F + c->F + f];
            c->out[n * c->F + f] = a / (1.0 + exp(-a)) * u;
        }
}

static double obj_swiglu(void *p) {
    swiglu_ctx *c = p;
    ref_swiglu(c);
    return dot(c->out, c->R, (size_t)c->N * c->F);
}

static void test_swiglu(void) {
    int N = B * T, F = 5;
    size_t nx = (size_t)N * 2 * F, nout = (size_t)N * F;
    float *x = fill(nx, -4, 4), *R = fill(nout, -1, 1), *out = fzeros(nout);
    swiglu_ctx c = {to_double(x, nx), dzeros(nout), R, N, F};
    K->swiglu_forward(out, x, N, F);
    ref_swiglu(&c);
    check_fwd("swiglu", out, c.out, nout);
    double *g = dzeros(nx);
    fd_grad(obj_swiglu, &c, c.x, nx, g);
    float *dx = fill(nx, -9, 9); /* garbage: overwritten */
    K->swiglu_backward(dx, x, R, N, F);
    check_grad("swiglu dx (gate and up halves, overwritten)", dx, g, nx);
    /* the backward with the forward's output made again over its dout: bitwise the two ops */
    float *dx2 = fill(nx, -9, 9), *remade = malloc(sizeof(float) * nout);
    memcpy(remade, R, sizeof(float) * nout);
    K->swiglu_backward_remake(dx2, remade, x, remade, N, F);
    tap_ok(memcmp(dx2, dx, sizeof(float) * nx) == 0 && memcmp(remade, out, sizeof(float) * nout) == 0,
          "swiglu_backward_remake: dx and the output made again over dout bitwise swiglu_backward's and swiglu_forward's");
    free(x); free(R); free(out); free(dx); free(g); free(c.x); free(c.out); free(dx2); free(remade);
}

/* ------------------------------------------------------------------ gelu */

typedef struct {
    double *x, *out;
    const float *R;
    size_t n;
} ew_ctx;

static void ref_gelu(ew_ctx *c) {
    for (size_t i = 0; i < c->n; i++) {
        double x = c->x[i];
        c->out[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}

static double obj_gelu(void *p) {
    ew_ctx *c = p;
    ref_gelu(c);
    return dot(c->out, c->R, c->n);
}

static void test_gelu(void) {
    size_t n = 37;
    float *x = fill(n, -4, 4), *R = fill(n, -1, 1), *out = fzeros(n);
    ew_ctx c = {to_double(x, n), dzeros(n), R, n};
    K->gelu_forward(out, x, n);
    ref_gelu(&c);
    check_fwd("gelu", out, c.out, n);
    double *g = dzeros(n);
    fd_grad(obj_gelu, &c, c.x, n, g);
    float *dx = fill(n, -9, 9); /* garbage: overwritten */
    K->gelu_backward(dx, x, R, n);
    check_grad("gelu dx (overwritten)", dx, g, n);
    free(x); free(R); free(out); free(c.x); free(c.out); free(g); free(dx);
}

/* BERT's heads: the exact (erf) GeLU of torch.nn.functional.gelu, and tanh (backward from y) */
static void ref_gelu_erf(ew_ctx *c) {
    for (size_t i = 0; i < c->n; i++) c->out[i] = 0.5 * c->x[i] * (1.0 + erf(c->x[i] / sqrt(2.0)));
}
static double obj_gelu_erf(void *p) {
    ew_ctx *c = p;
    ref_gelu_erf(c);
    return dot(c->out, c->R, c->n);
}
static void ref_tanh(ew_ctx *c) {
    for (size_t i = 0; i < c->n; i++) c->out[i] = tanh(c->x[i]);
}
static double obj_tanh(void *p) {
    ew_ctx *c = p;
    ref_tanh(c);
    return dot(c->out, c->R, c->n);
}

static void test_bert_elementwise(void) {
    if (!K->gelu_erf_forward || !K->tanh_forward) {
        tap_ok(0, "gelu_erf and tanh: the backend has the ops");
        return;
    }
    size_t n = 37;
    float *x = fill(n, -4, 4), *R = fill(n, -1, 1), *out = fzeros(n), *dx = fill(n, -9, 9);
    ew_ctx c = {to_double(x, n), dzeros(n), R, n};
    double *g = dzeros(n);
    K->gelu_erf_forward(out, x, n);
    ref_gelu_erf(&c);
    check_fwd("gelu_erf (exact GeLU)", out, c.out, n);
    fd_grad(obj_gelu_erf, &c, c.x, n, g);
    K->gelu_erf_backward(dx, x, R, n);
    check_grad("gelu_erf dx (overwritten)", dx, g, n);
    K->tanh_forward(out, x, n);
    ref_tanh(&c);
    check_fwd("tanh", out, c.out, n);
    fd_grad(obj_tanh, &c, c.x, n, g);
    K->tanh_backward(dx, out, R, n);
    check_grad("tanh dx from its output (overwritten)", dx, g, n);
    free(x); free(R); free(out); free(c.x); free(c.out); free(g); free(dx);
}

/* ------------------------------------------------------------------ dropout */

typedef struct {
    double *x, *out;
    const float *R;
    size_t n;
    dropout_rng rng;
} drop_ctx;

/* the hidden dropout's rule from the raw Philox4x32-10 words (kernels/philox.h): element `index`
 * takes the call at floor(index / 8), word floor((index mod 8) / 2), low 16 bits for even index
 * and high 16 for odd, kept iff that value >= ceil(65536 p) */
static int hidden_keep_by_rule(dropout_rng rng, uint64_t index) {
    const philox_out w = philox4x32(rng.seed, index / 8, rng.stream);
    const uint32_t word = w.v[(index % 8) / 2];
    return (index % 2 == 0 ? word % 65536u : word / 65536u) >= (uint32_t)ceil((double)rng.p * 65536.0);
}

static void ref_dropout(drop_ctx *c) {
    for (size_t i = 0; i < c->n; i++)
        c->out[i] = c->rng.p <= 0.0f ? c->x[i]
                  : hidden_keep_by_rule(c->rng, c->rng.offset + i) ? c->x[i] / (1.0 - (double)c->rng.p) : 0.0;
}

static double obj_dropout(void *p) {
    drop_ctx *c = p;
    ref_dropout(c);
    return dot(c->out, c->R, c->n);
}

static void test_dropout(void) {
    dropout_rng rng = {0.3f, 42, 7, 1000};
    size_t n = 41;
    float *x = fill(n, -1, 1), *R = fill(n, -1, 1), *out = fzeros(n);
    drop_ctx c = {to_double(x, n), dzeros(n), R, n, rng};
    K->dropout_forward(out, x, n, rng);
    ref_dropout(&c);
    check_fwd("dropout p=0.3", out, c.out, n);
    double *g = dzeros(n);
    fd_grad(obj_dropout, &c, c.x, n, g);
    float *dx = fzeros(n);
    K->dropout_backward(dx, R, n, rng);
    check_grad("dropout dx", dx, g, n);

    /* in place (out aliases x; dx aliases dout) gives the same result */
    float *inplace = malloc(n * sizeof(float));
    memcpy(inplace, x, n * sizeof(float));
    K->dropout_forward(inplace, inplace, n, rng);
    int fwd_alias = memcmp(inplace, out, n * sizeof(float)) == 0;
    memcpy(inplace, R, n * sizeof(float));
    K->dropout_backward(inplace, inplace, n, rng);
    tap_ok(fwd_alias && memcmp(inplace, dx, n * sizeof(float)) == 0,
           "dropout forward and backward work in place");

    /* p = 0 is a plain copy */
    dropout_rng off = rng;
    off.p = 0.0f;
    float *copy = fzeros(n);
    K->dropout_forward(copy, x, n, off);
    tap_ok(memcmp(copy, x, n * sizeof(float)) == 0, "dropout p=0 is a copy");

    /* statistics and mask agreement on a large array of nonzero values */
    size_t big = 200000;
    float *ones = malloc(big * sizeof(float)), *fo = fzeros(big), *bo = fzeros(big);
    for (size_t i = 0; i < big; i++) ones[i] = 1.0f + (float)(i % 3);
    K->dropout_forward(fo, ones, big, rng);
    K->dropout_backward(bo, ones, big, rng);
    size_t kept = 0, agree = 0, scaled = 0;
    for (size_t i = 0; i < big; i++) {
        kept += fo[i] != 0.0f;
        agree += (fo[i] != 0.0f) == (bo[i] != 0.0f);
        scaled += fo[i] == 0.0f || fabs(fo[i] - ones[i] / 0.7) < 1e-6 * ones[i];
    }
    double frac = (double)kept / big; /* sd sqrt(0.21/2e5) ~ 0.001; allow ~7 sd */
    tap_ok(fabs(frac - 0.7) < 0.007, "dropout p=0.3 keeps %.4f of elements (expect 0.7)", frac);
    tap_ok(agree == big, "dropout forward and backward masks agree (%zu of %zu)", agree, big);
    tap_ok(scaled == big, "dropout scales kept values by 1/(1-p)");

    /* masks are indexed by offset + i: a call on a suffix with a shifted offset matches */
    dropout_rng shifted = rng;
    shifted.offset += 1000;
    float *tail = fzeros(big - 1000);
    K->dropout_forward(tail, ones + 1000, big - 1000, shifted);
    tap_ok(memcmp(tail, fo + 1000, (big - 1000) * sizeof(float)) == 0,
           "dropout mask depends on offset + i only (layout independent)");

    free(x); free(R); free(out); free(c.x); free(c.out); free(g); free(dx); free(inplace);
    free(copy); free(ones); free(fo); free(bo); free(tail);
}

/* ------------------------------------------------------------------ add, scale */

static void test_add_scale(void) {
    size_t n = 13;
    float *a = fill(n, -1, 1), *b = fill(n, -1, 1), *out = fzeros(n);
    double *ref = dzeros(n);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    K->add(out, a, b, n);
    check_fwd("add", out, ref, n);
    K->add(a, a, b, n); /* aliasing */
    check_fwd("add in place", a, ref, n);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] * -0.375;
    K->scale(a, -0.375f, n);
    check_fwd("scale", a, ref, n);
    free(a); free(b); free(out); free(ref);
}

/* ------------------------------------------------------------------ cross-entropy */

typedef struct {
    double *logits;
    const int *targets;
    int N, V, vocab_start;
    double grad_scale;
    double *losses;
} ce_ctx;

/* single rank: the global softmax is over the V local columns; non-local targets contribute
 * target_logit = 0, so their loss is just logsumexp (and no -1 in the gradient). */
static void ref_ce(ce_ctx *c) {
    for (int n = 0; n < c->N; n++) {
        const double *l = c->logits + n * c->V;
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < c->V; v++) mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < c->V; v++) s += exp(l[v] - mx);
        int t = c->targets[n] - c->vocab_start;
        c->losses[n] = log(s) + mx - ((t >= 0 && t < c->V) ? l[t] : 0.0);
    }
}

static double obj_ce(void *p) { /* L = grad_scale * sum_n loss_n */
    ce_ctx *c = p;
    ref_ce(c);
    double s = 0.0;
    for (int n = 0; n < c->N; n++) s += c->losses[n];
    return c->grad_scale * s;
}

static void test_cross_entropy(void) {
    int N = 6, vocab_start = 4;
    int targets[6] = {4, 9, 2, 14, 20, 10}; /* local: [4, 15); 2 and 20 are not local */
    float grad_scale = 0.37f;
    size_t nl = (size_t)N * V;
    float *logits = fill(nl, -3, 3);
    double *ld = to_double(logits, nl);
    ce_ctx c = {ld, targets, N, V, vocab_start, grad_scale, dzeros(N)};
    float *row_max = fzeros(N), *sum_exp = fzeros(N), *tl = fzeros(N), *losses = fzeros(N);

    K->cross_entropy_max(row_max, logits, N, V);
    K->cross_entropy_sum_exp(sum_exp, tl, logits, row_max, targets, N, V, vocab_start);
    double *rm_ref = dzeros(N), *se_ref = dzeros(N), *tl_ref = dzeros(N);
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < V; v++) mx = ld[n * V + v] > mx ? ld[n * V + v] : mx;
        for (int v = 0; v < V; v++) s += exp(ld[n * V + v] - mx);
        int t = targets[n] - vocab_start;
        rm_ref[n] = mx;
        se_ref[n] = s;
        tl_ref[n] = (t >= 0 && t < V) ? ld[n * V + t] : 0.0;
    }
    check_fwd("cross-entropy pass 1 row_max", row_max, rm_ref, N);
    check_fwd("cross-entropy pass 2 sum_exp", sum_exp, se_ref, N);
    check_fwd("cross-entropy pass 2 target_logit (0 where not local)", tl, tl_ref, N);

    K->cross_entropy_loss_grad(losses, logits, row_max, sum_exp, tl, targets, N, V, vocab_start,
                               grad_scale);
    ref_ce(&c);
    check_fwd("cross-entropy pass 3 losses", losses, c.losses, N);
    double *g = dzeros(nl);
    fd_grad(obj_ce, &c, c.logits, nl, g);
    check_grad("cross-entropy dlogits (grad_scale 0.37, vocab_start 4, non-local targets)",
               logits, g, nl);

    free(logits); free(ld); free(c.losses); free(row_max); free(sum_exp); free(tl); free(losses);
    free(rm_ref); free(se_ref); free(tl_ref); free(g);
}

/* ------------------------------------------------------------------ optimizer */

static void test_adamw(void) {
    size_t n = 9;
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
    float *p = fill(n, -1, 1), *m = fzeros(n), *v = fzeros(n);
    double *pd = to_double(p, n), *md = dzeros(n), *vd = dzeros(n);
    float *p0 = malloc(n * sizeof(float));
    memcpy(p0, p, n * sizeof(float));
    for (int step = 1; step <= 3; step++) {
        float *g = fill(n, -1, 1);
        K->adamw_update(p, p, g, m, v, n, lr, b1, b2, eps, wd, step);
        for (size_t i = 0; i < n; i++) {
            md[i] = (double)b1 * md[i] + (1.0 - (double)b1) * g[i];
            vd[i] = (double)b2 * vd[i] + (1.0 - (double)b2) * (double)g[i] * g[i];
            double mh = md[i] / (1.0 - pow(b1, step)), vh = vd[i] / (1.0 - pow(b2, step));
            pd[i] -= (double)lr * (mh / (sqrt(vh) + eps) + (double)wd * pd[i]);
        }
        free(g);
    }
    double moved = 0.0;
    for (size_t i = 0; i < n; i++) moved = fmax(moved, fabs((double)p[i] - p0[i]));
    /* |p| <= 1 and each step moves p by <= ~lr: float rounding ~1e-7 absolute */
    double ep = rel_err(p, pd, n), em = rel_err(m, md, n), ev = rel_err(v, vd, n);
    tap_ok(ep < 1e-6 && moved > 1e-3,
           "adamw 3 steps with weight decay: params match double reference (rel err %.2e)", ep);
    tap_ok(em < 1e-6 && ev < 1e-5, "adamw moments m, v match (rel err %.2e, %.2e)", em, ev);

    /* weight decay alone (g = 0, fresh state): p -= lr * wd * p exactly */
    float q = 0.5f, zg = 0.0f, zm = 0.0f, zv = 0.0f;
    K->adamw_update(&q, &q, &zg, &zm, &zv, 1, lr, b1, b2, eps, wd, 1);
    tap_ok(fabs(q - 0.5 * (1.0 - 1e-3)) < 1e-7, "adamw decoupled weight decay with zero gradient");

    free(p); free(m); free(v); free(pd); free(md); free(vd); free(p0);
}

static void test_sum_squares(void) {
    size_t n = 1001;
    float *x = fill(n, -2, 2);
    double ref = 0.0;
    for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
    double s = K->sum_squares(x, n);
    tap_ok(fabs(s - ref) <= 1e-12 * ref, "sum_squares matches double sum (%.15g vs %.15g)", s, ref);
    tap_ok(K->sum_squares(x, 0) == 0.0, "sum_squares of nothing is 0");
    free(x);
}

/* kernels.h's tree for sum_squares_pieces, written from its description: lane t of a chunk adds
 * x[t], x[t + LANES], ... from 0.0; then lane t after the halving steps down to stride s is
 * G(t, s) = G(t, 2s) + G(t + s, 2s), G(t, LANES) = lane t's sum; a piece adds its chunks' G(0, 1)
 * in order from 0.0 */
static double tree_lanes(const double *lanes, int t, int s) {
    if (s == SUM_SQUARES_TREE_LANES) return lanes[t];
    return tree_lanes(lanes, t, 2 * s) + tree_lanes(lanes, t + s, 2 * s);
}
static double tree_piece(const float *x, size_t n) {
    double total = 0.0, lanes[SUM_SQUARES_TREE_LANES];
    for (size_t c = 0; c * SUM_SQUARES_TREE_CHUNK < n; c++) {
        for (int t = 0; t < SUM_SQUARES_TREE_LANES; t++) {
            lanes[t] = 0.0;
            for (int j = 0; j < SUM_SQUARES_TREE_CHUNK / SUM_SQUARES_TREE_LANES; j++) {
                size_t i = c * SUM_SQUARES_TREE_CHUNK + (size_t)t + (size_t)j * SUM_SQUARES_TREE_LANES;
                if (i < n) lanes[t] += (double)x[i] * (double)x[i];
            }
        }
        total += tree_lanes(lanes, 0, 1);
    }
    return total;
}

/* --deterministic-mode's fixed tree: add_float is the fp32 sum; sum_squares_pieces follows the
 * tree above bit for bit, within 1e-12 of a long-double sum, and gives a piece's bits wherever its
 * values lie */
static void test_fixed_tree_kernels(void) {
    const size_t lengths[] = {0, 1, 5, 256, 257, 4096, 4097, 20000, 70001};
    enum { PIECES = sizeof lengths / sizeof lengths[0] };
    tensor_range pieces[PIECES], moved[PIECES];
    size_t n = 0;
    for (int p = 0; p < PIECES; p++) {
        pieces[p] = (tensor_range){.offset = n + 1, .length = lengths[p]};
        n += lengths[p] + 2;
    }
    float *x = fill(2 * n + 1, -3, 3);
    for (size_t i = 0; i < 2 * n + 1; i += 3) x[i] *= 1e-4f; /* squares over many decades */
    for (int p = 0; p < PIECES; p++) {
        moved[p] = (tensor_range){.offset = n + 1 + pieces[p].offset, .length = pieces[p].length};
        memcpy(x + moved[p].offset, x + pieces[p].offset, pieces[p].length * sizeof(float));
    }
    double got[PIECES], want[PIECES], got_moved[PIECES], worst = 0.0;
    K->sum_squares_pieces(got, x, pieces, PIECES);
    K->sum_squares_pieces(got_moved, x, moved, PIECES);
    for (int p = 0; p < PIECES; p++) {
        want[p] = tree_piece(x + pieces[p].offset, pieces[p].length);
        long double reference = 0.0L;
        for (size_t i = 0; i < pieces[p].length; i++) reference += (long double)x[pieces[p].offset + i] * x[pieces[p].offset + i];
        if (reference > 0.0L && (double)(fabsl(got[p] - reference) / reference) > worst)
            worst = (double)(fabsl(got[p] - reference) / reference);
    }
    tap_ok(memcmp(got, want, sizeof got) == 0 && got[0] == 0.0,
           "sum_squares_pieces: kernels.h's tree (chunks of %d, %d lanes, halving) bit for bit over %d pieces",
           SUM_SQUARES_TREE_CHUNK, SUM_SQUARES_TREE_LANES, PIECES);
    tap_ok(worst < 1e-12 && got[PIECES - 1] > 0.0, "sum_squares_pieces: within 1e-12 of a long-double sum (%.2e)", worst);
    tap_ok(memcmp(got, got_moved, sizeof got) == 0, "sum_squares_pieces: the same values elsewhere give the same bits");
    double sequential = 0.0;
    for (size_t i = 0; i < lengths[PIECES - 1]; i++)
        sequential += (double)x[pieces[PIECES - 1].offset + i] * x[pieces[PIECES - 1].offset + i];
    tap_diag("the last piece: tree %.17g, one after the other %.17g", got[PIECES - 1], sequential);
    size_t m = 1001;
    float *a = fill(m, -2, 2), *b = fill(m, -1e-3f, 1e-3f), *out = fzeros(m);
    K->add_float(out, a, b, m);
    int exact = 1;
    for (size_t i = 0; i < m; i++) {
        volatile float sum = a[i] + b[i];
        exact &= memcmp(&out[i], (const float *)&sum, sizeof(float)) == 0;
    }
    K->add_float(a, a, b, m); /* in place */
    tap_ok(exact && memcmp(a, out, m * sizeof(float)) == 0, "add_float: out = a + b in fp32, in place too");
    free(x); free(a); free(b); free(out);
}

/* ------------------------------------------------------------------ memory */

static void test_memory(void) {
    size_t n = 17;
    float *a = K->alloc(n * sizeof(float));
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= a[i] == 0.0f;
    tap_ok(zero, "alloc returns zero-filled memory");
    float *h = fill(n, -1, 1), *back = fzeros(n), *b = K->alloc(n * sizeof(float));
    K->copy_from_host(a, h, n * sizeof(float));
    K->copy(b, a, n * sizeof(float));
    K->copy_to_host(back, b, n * sizeof(float));
    K->synchronize();
    int same = memcmp(back, h, n * sizeof(float)) == 0;
    K->zero(b, n * sizeof(float));
    K->copy_to_host(back, b, n * sizeof(float));
    for (size_t i = 0; i < n; i++) same &= back[i] == 0.0f;
    tap_ok(same, "copy_from_host / copy / copy_to_host round-trip, zero clears");
    K->release(a);
    K->release(b);
    free(h); free(back);
}

int main(void) {
    K = kernels_cpu();
    tap_ok(K != NULL && strcmp(K->name, "cpu") == 0, "kernels_cpu() returns the cpu table");
    test_memory();
    test_embedding();
    test_position_embedding();
    test_layernorm();
    test_matmul(1);
    test_matmul(0);
    test_attention(0.0f, H, H, -1);
    test_attention(0.25f, H, H, -1);
    test_attention(0.0f, 4, 2, -1);   /* grouped-query */
    test_attention_padded(0.0f, H, H);
    test_attention_padded(0.25f, H, H);
    test_attention_padded(0.0f, 4, 2);
    test_attention_bias(0.0f, H, H, 0);
    test_attention_bias(0.25f, 4, 2, 0);
    test_attention_bias(0.0f, H, H, 1);
    test_attention_bias(0.3f, 3, 3, 1);
    test_cross_attention(0.0f, H);
    test_cross_attention(0.3f, 3);
    test_attention(0.25f, 4, 2, -1);
    test_attention(0.0f, 3, 1, -1);   /* multi-query */
    test_attention(0.0f, H, H, 1);    /* sliding window (--window-size 1,0) */
    test_attention(0.25f, 4, 2, 2);   /* sliding window with dropout, grouped-query */
    test_rmsnorm();
    test_rope(0, 6, 0);
    test_rope(1, 6, 0);
    test_rope(0, 4, 0);           /* --rotary-percent < 1: the last channels pass through */
    test_rope(0, 8, 8.0f);        /* --use-rope-scaling --rope-scaling-factor 8 */
    test_rope(1, 8, 32.0f);
    {   /* the scaled frequencies themselves: kept, smoothed, slowed by the factor */
        rope_spec plain = {.rotary_dim = 8, .base = 500000.0f, .position_scale = 1.0f}, scaled = plain;
        scaled.scaling_factor = 8.0f;
        int kept = rope_inv_freq(scaled, 0) == rope_inv_freq(plain, 0);
        double slowed = rope_inv_freq(plain, 3) / rope_inv_freq(scaled, 3);
        double smoothed = rope_inv_freq(plain, 2) / rope_inv_freq(scaled, 2);
        tap_ok(kept && fabs(slowed - 8.0) < 1e-5 && smoothed > 1.5 && smoothed < 8.0 &&
                   fabs(rope_inv_freq(scaled, 2) / ref_rope_theta(scaled, 2) - 1.0) < 1e-6,
               "rope scaling: pair 0 kept, pair 3 slowed %.4fx, pair 2 %.4fx (between 1 and 8)", slowed, smoothed);
    }
    test_swiglu();
    test_gelu();
    test_bert_elementwise();
    test_dropout();
    test_add_scale();
    test_cross_entropy();
    test_adamw();
    test_sum_squares();
    test_fixed_tree_kernels();
    return tap_done();
}
