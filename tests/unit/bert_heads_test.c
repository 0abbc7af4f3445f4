/* bert_heads_test.c: app/model/bert_heads.c on the CPU backend against a double-precision
 * reference of Megatron-Core's BERT heads written here (BertLMHead: dense, exact GeLU, layer
 * norm; the tied output layer with its bias; Pooler: [CLS] row, dense, tanh; binary head; the
 * loss of pretrain_bert.py: masked-mean LM cross entropy + mean sentence-order cross entropy):
 * the two losses, and every gradient (the encoder output, each head parameter, the tied word
 * embeddings, the tokentype embeddings) against central finite differences of the reference,
 * with and without the binary head. Shapes small and odd (B=2, T=5, C=6, V=11); sample 0 has
 * two masked positions and padding, sample 1 one masked position.
 * Bounds as kernels_grad_test.c's: the double finite differences are good to ~1e-9, the float
 * kernels' rounding ~1e-6 relative; GRAD_TOL 1e-4. Each checked gradient must be non-trivial. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/model/bert_heads.h"
#include "tests/tap.h"

#define GRAD_TOL 1e-4
#define FD_H 1e-5
enum { B = 2, T = 5, C = 6, V = 11, N = B * T };
static const float EPS = 1e-5f;

static const int64_t loss_mask[N] = {0, 1, 0, 1, 0, 0, 0, 1, 0, 0};
static const int64_t labels[N] = {-1, 7, -1, 2, -1, -1, -1, 10, -1, -1};
static const int64_t padding[N] = {1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
static const int64_t text[N] = {2, 4, 5, 4, 0, 2, 6, 4, 3, 3};
static const int64_t types[N] = {0, 0, 0, 1, 0, 0, 0, 1, 1, 1};
static const int is_random[B] = {1, 0};

/* every tensor of the reference, in double, one flat array: offsets below */
enum {
    O_HIDDEN = 0, O_WE = O_HIDDEN + N * C, O_DW = O_WE + V * C, O_DB = O_DW + C * C,
    O_NW = O_DB + C, O_NB = O_NW + C, O_OB = O_NB + C, O_PW = O_OB + V, O_PB = O_PW + C * C,
    O_BW = O_PB + C, O_BB = O_BW + 2 * C, O_END = O_BB + 2
};
static const struct { const char *name; int offset, count; } tensors[] = {
    {"the encoder output", O_HIDDEN, N * C}, {"word embeddings (tied output layer)", O_WE, V * C},
    {"lm_head.dense.weight", O_DW, C * C}, {"lm_head.dense.bias", O_DB, C},
    {"lm_head.layer_norm.weight", O_NW, C}, {"lm_head.layer_norm.bias", O_NB, C},
    {"output_layer.bias", O_OB, V}, {"pooler.dense.weight", O_PW, C * C},
    {"pooler.dense.bias", O_PB, C}, {"binary_head.weight", O_BW, 2 * C},
    {"binary_head.bias", O_BB, 2}};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(float lo, float hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(lo + (hi - lo) * ((double)(rng_state >> 11) / 9007199254740992.0));
}

static double log_softmax_loss(const double *logits, int n, int target) {
    double mx = logits[0], sum = 0;
    for (int i = 1; i < n; i++) mx = fmax(mx, logits[i]);
    for (int i = 0; i < n; i++) sum += exp(logits[i] - mx);
    return log(sum) + mx - logits[target];
}

/* lm + sop (sop only with the binary head) */
static double reference_loss(const double *p, int binary, double *lm_out, double *sop_out) {
    double lm = 0, sop = 0;
    int masked = 0;
    for (int r = 0; r < N; r++) {
        if (!loss_mask[r]) continue;
        const double *x = p + O_HIDDEN + r * C;
        double act[C], normed[C], logits[V], mean = 0, var = 0;
        for (int o = 0; o < C; o++) {
            double pre = p[O_DB + o];
            for (int i = 0; i < C; i++) pre += p[O_DW + o * C + i] * x[i];
            act[o] = 0.5 * pre * (1.0 + erf(pre / sqrt(2.0)));
            mean += act[o] / C;
        }
        for (int o = 0; o < C; o++) var += (act[o] - mean) * (act[o] - mean) / C;
        for (int o = 0; o < C; o++)
            normed[o] = (act[o] - mean) / sqrt(var + EPS) * p[O_NW + o] + p[O_NB + o];
        for (int v = 0; v < V; v++) {
            logits[v] = p[O_OB + v];
            for (int i = 0; i < C; i++) logits[v] += p[O_WE + v * C + i] * normed[i];
        }
        lm += log_softmax_loss(logits, V, (int)labels[r]);
        masked++;
    }
    lm /= masked;
    if (binary) {
        for (int b = 0; b < B; b++) {
            const double *x = p + O_HIDDEN + b * T * C;
            double pooled[C], logits[2];
            for (int o = 0; o < C; o++) {
                double pre = p[O_PB + o];
                for (int i = 0; i < C; i++) pre += p[O_PW + o * C + i] * x[i];
                pooled[o] = tanh(pre);
            }
            for (int k = 0; k < 2; k++) {
                logits[k] = p[O_BB + k];
                for (int i = 0; i < C; i++) logits[k] += p[O_BW + k * C + i] * pooled[i];
            }
            sop += log_softmax_loss(logits, 2, is_random[b]);
        }
        sop /= B;
    }
    if (lm_out) *lm_out = lm;
    if (sop_out) *sop_out = sop;
    return lm + sop;
}

static void run(const kernel_ops *ops, int binary) {
    const char *tag = binary ? "with the binary head" : "--bert-no-binary-head";
    float *values = malloc(sizeof(float) * O_END), *grads = calloc(O_END, sizeof(float));
    double *p = malloc(sizeof(double) * O_END), *fd = malloc(sizeof(double) * O_END);
    for (int i = 0; i < O_END; i++) p[i] = values[i] = frand(-1.0f, 1.0f);
    for (int i = 0; i < C; i++) p[O_NW + i] = values[O_NW + i] = frand(0.5f, 1.5f);
    bert_heads_config cfg = {C, V, binary, EPS, NULL, NULL};
    bert_heads_view params = {NULL, values + O_DW, values + O_DB, values + O_NW, values + O_NB,
                              values + O_OB, binary ? values + O_PW : NULL, binary ? values + O_PB : NULL,
                              binary ? values + O_BW : NULL, binary ? values + O_BB : NULL};
    bert_heads_view g = {NULL, grads + O_DW, grads + O_DB, grads + O_NW, grads + O_NB, grads + O_OB,
                         grads + O_PW, grads + O_PB, grads + O_BW, grads + O_BB};
    bert_host_batch host = {text, types, labels, padding, loss_mask, is_random};
    bert_batch batch = {0};
    bert_batch_upload(ops, &host, B, T, V, &batch);
    tap_ok(batch.masked_count == 3, "%s: 3 masked positions in the batch", tag);
    float lm = 0, sop = 0;
    bert_heads_forward_backward(ops, NULL, &cfg, &batch, values + O_HIDDEN, values + O_WE, &params, &g,
                                grads + O_WE, grads + O_HIDDEN, 1.0f, 1, &lm, &sop);
    double ref_lm, ref_sop;
    reference_loss(p, binary, &ref_lm, &ref_sop);
    tap_ok(fabs(lm - ref_lm) < 1e-5 * fmax(1, fabs(ref_lm)) && fabs(sop - ref_sop) < 1e-5 * fmax(1, fabs(ref_sop)),
           "%s: lm loss %.6f (reference %.6f), sop loss %.6f (reference %.6f)", tag, lm, ref_lm, sop, ref_sop);
    for (int i = 0; i < O_END; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double up = reference_loss(p, binary, NULL, NULL);
        p[i] = keep - FD_H;
        double down = reference_loss(p, binary, NULL, NULL);
        p[i] = keep;
        fd[i] = (up - down) / (2 * FD_H);
    }
    for (size_t t = 0; t < sizeof tensors / sizeof *tensors; t++) {
        int o = tensors[t].offset, n = tensors[t].count;
        int pooler_part = o >= O_PW;
        double err = 0, scale = 0;
        for (int i = 0; i < n; i++) scale = fmax(scale, fabs(fd[o + i]));
        for (int i = 0; i < n; i++) err = fmax(err, fabs(grads[o + i] - fd[o + i]));
        if (!binary && pooler_part) {
            tap_ok(scale == 0 && err == 0, "%s: %s untouched", tag, tensors[t].name);
            continue;
        }
        err /= fmax(scale, 1e-6);
        tap_ok(err < GRAD_TOL && scale > 1e-3, "%s: d loss / d %s matches finite differences "
               "(rel err %.1e, max|g| %.2e)", tag, tensors[t].name, err, scale);
    }
    /* the tokentype embeddings: hidden += table[type]; backward sums dhidden per type */
    float table[2 * C], hidden[N * C], scratch[N * C], dtable[2 * C] = {0};
    for (int i = 0; i < 2 * C; i++) table[i] = frand(-1, 1);
    for (int i = 0; i < N * C; i++) hidden[i] = values[O_HIDDEN + i];
    bert_tokentype_forward(ops, hidden, &batch, table, scratch, C);
    bert_tokentype_backward(ops, dtable, grads + O_HIDDEN, &batch, C);
    double fwd_err = 0, bwd_err = 0;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++)
            fwd_err = fmax(fwd_err, fabs(hidden[r * C + c] - (values[O_HIDDEN + r * C + c] + table[types[r] * C + c])));
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < C; c++) {
            double sum = 0;
            for (int r = 0; r < N; r++) if (types[r] == k) sum += grads[O_HIDDEN + r * C + c];
            bwd_err = fmax(bwd_err, fabs(dtable[k * C + c] - sum));
        }
    tap_ok(fwd_err < 1e-6 && bwd_err < 1e-5, "%s: tokentype embeddings added per type, gradient "
           "summed per type (errors %.1e, %.1e)", tag, fwd_err, bwd_err);
    bert_batch_free(ops, &batch);
    free(values), free(grads), free(p), free(fd);
}

int main(void) {
    const kernel_ops *ops = kernels_cpu();
    run(ops, 1);
    run(ops, 0);
    return tap_done();
}
