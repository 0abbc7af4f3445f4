/* bert_task_head_test.c: app/model/bert_task_head.c on the CPU backend against a double-precision
 * reference of Megatron's legacy Classification and MultipleChoice heads written here (pooler:
 * [CLS] row, dense, tanh; dropout; linear to K outputs; the mean cross entropy over the samples,
 * a multiple-choice sample's logits being its rows' single outputs): the loss, the correct count
 * and every gradient (the encoder output, pooler and head weights and biases) against central
 * finite differences of the reference. Dropout at p = 0.3: the reference takes the kernel's mask
 * (dropout_forward of ones: 0 or 1 / (1 - p)). Cases: MNLI's 3 classes over 3 samples; RACE's 4
 * choices over 2 samples (8 rows); an evaluation batch with a padding sample (label -1: no loss
 * term that counts, never correct). Bounds as bert_heads_test.c's: GRAD_TOL 1e-4. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/model/bert_task_head.h"
#include "tests/tap.h"

#define GRAD_TOL 1e-4
#define FD_H 1e-5
enum { T = 3, C = 5, MAX_ROWS = 8 };

typedef struct head_case {
    const char *name;
    int rows, outputs, choices;
    int labels[MAX_ROWS];
} head_case;

/* the reference's tensors in one flat array: hidden [rows T, C], pooler W [C, C], b [C], head W [K, C], b [K] */
typedef struct layout { int hidden, pw, pb, hw, hb, end; } layout;
static layout layout_of(const head_case *h) {
    layout l;
    l.hidden = 0;
    l.pw = l.hidden + h->rows * T * C;
    l.pb = l.pw + C * C;
    l.hw = l.pb + C;
    l.hb = l.hw + h->outputs * C;
    l.end = l.hb + h->outputs;
    return l;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double frand(double lo, double hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * ((double)(rng_state >> 11) / 9007199254740992.0);
}

/* the mean loss over samples (a padding label counts as class 0); *correct as the head counts it */
static double reference(const head_case *h, const double *p, const float *mask, int *correct) {
    layout l = layout_of(h);
    int samples = h->rows / h->choices, classes = h->choices > 1 ? h->choices : h->outputs;
    double logits[MAX_ROWS * 3];
    for (int r = 0; r < h->rows; r++) {
        const double *x = p + l.hidden + (size_t)r * T * C;  /* the [CLS] row: position 0 */
        double pooled[C];
        for (int o = 0; o < C; o++) {
            double s = p[l.pb + o];
            for (int i = 0; i < C; i++) s += x[i] * p[l.pw + o * C + i];
            pooled[o] = tanh(s) * mask[r * C + o];
        }
        for (int k = 0; k < h->outputs; k++) {
            double s = p[l.hb + k];
            for (int i = 0; i < C; i++) s += pooled[i] * p[l.hw + k * C + i];
            logits[r * h->outputs + k] = s;
        }
    }
    double loss = 0;
    *correct = 0;
    for (int s = 0; s < samples; s++) {
        const double *z = logits + s * classes;
        double mx = z[0], sum = 0;
        int best = 0;
        for (int k = 1; k < classes; k++) {
            mx = fmax(mx, z[k]);
            if (z[k] > z[best]) best = k;
        }
        for (int k = 0; k < classes; k++) sum += exp(z[k] - mx);
        int target = h->labels[s] < 0 ? 0 : h->labels[s];
        loss += log(sum) + mx - z[target];
        *correct += h->labels[s] >= 0 && best == h->labels[s];
    }
    return loss / samples;
}

static void run_case(const kernel_ops *ops, const head_case *h, int with_backward, float p_drop) {
    layout l = layout_of(h);
    int N = h->rows * T;
    double *p = malloc(sizeof(double) * (size_t)l.end);
    float *values = malloc(sizeof(float) * (size_t)l.end), *grads = calloc((size_t)l.end, sizeof(float));
    float *mask = malloc(sizeof(float) * (size_t)h->rows * C), *ones = malloc(sizeof(float) * (size_t)h->rows * C);
    for (int i = 0; i < l.end; i++) values[i] = (float)frand(-0.8, 0.8), p[i] = values[i];
    /* the kernel's dropout mask, as the head draws it */
    dropout_rng drop = {p_drop, 1234, 77, 40};
    for (int i = 0; i < h->rows * C; i++) ones[i] = 1.0f;
    ops->dropout_forward(mask, ones, (size_t)h->rows * C, drop);
    /* the batch: only the [CLS] rows and the labels matter to the head */
    int64_t text[MAX_ROWS * T], types[MAX_ROWS * T], zeros[MAX_ROWS * T], padding[MAX_ROWS * T];
    for (int i = 0; i < N; i++) text[i] = 2 + i % 5, types[i] = i % T > 0, zeros[i] = 0, padding[i] = 1;
    bert_host_batch host = {text, types, zeros, padding, zeros, h->labels};
    bert_batch batch = {0};
    bert_batch_upload(ops, &host, h->rows, T, 16, &batch);
    bert_heads_view params = {0}, gradients = {0};
    params.pooler_weight = values + l.pw, params.pooler_bias = values + l.pb;
    params.task_weight = values + l.hw, params.task_bias = values + l.hb;
    gradients.pooler_weight = grads + l.pw, gradients.pooler_bias = grads + l.pb;
    gradients.task_weight = grads + l.hw, gradients.task_bias = grads + l.hb;
    float *dhidden = malloc(sizeof(float) * (size_t)N * C);
    for (int i = 0; i < N * C; i++) dhidden[i] = 99.0f;  /* must be overwritten */
    bert_task_head_config cfg = {C, h->outputs, h->choices, drop};
    int correct = -1, ref_correct;
    float loss = bert_task_head_forward_backward(ops, &cfg, &batch, values + l.hidden, &params, &gradients, dhidden,
                                                 1.0f, with_backward, &correct);
    double ref = reference(h, p, mask, &ref_correct);
    tap_ok(fabs(loss - ref) < 1e-5 * fmax(1, fabs(ref)) && correct == ref_correct,
           "%s: loss %.6f (reference %.6f), %d correct (reference %d)", h->name, loss, ref, correct, ref_correct);
    if (with_backward) {
        for (int i = 0; i < N * C; i++) grads[l.hidden + i] = dhidden[i];
        static const char *const names[] = {"the encoder output", "pooler.dense.weight", "pooler.dense.bias", "head.weight", "head.bias"};
        int starts[] = {l.hidden, l.pw, l.pb, l.hw, l.hb, l.end};
        for (int t = 0; t < 5; t++) {
            double err = 0, scale = 0;
            for (int i = starts[t]; i < starts[t + 1]; i++) {
                double keep = p[i], up, down;
                int unused;
                p[i] = keep + FD_H;
                up = reference(h, p, mask, &unused);
                p[i] = keep - FD_H;
                down = reference(h, p, mask, &unused);
                p[i] = keep;
                double fd = (up - down) / (2 * FD_H);
                err = fmax(err, fabs(fd - grads[i]));
                scale = fmax(scale, fabs(fd));
            }
            /* the multiple-choice bias adds the same to every choice: the softmax ignores it */
            int vanishes = h->choices > 1 && t == 4;
            tap_ok(err < GRAD_TOL && (vanishes ? scale < 1e-6 : scale > 1e-3),
                   "%s: d loss / d %s matches finite differences (max error %.2e, max |gradient| %.3f%s)", h->name,
                   names[t], err, scale, vanishes ? ": 0, as a bias shared by the choices must have" : "");
        }
    }
    bert_batch_free(ops, &batch);
    free(p), free(values), free(grads), free(mask), free(ones), free(dhidden);
}

int main(void) {
    const kernel_ops *ops = kernels_cpu();
    head_case mnli = {"MNLI (3 classes, 3 samples)", 3, 3, 1, {2, 0, 1}};
    head_case race = {"RACE (4 choices, 2 samples)", 8, 1, 4, {3, 1}};
    head_case padded = {"evaluation with a padding sample", 3, 3, 1, {1, -1, 2}};
    run_case(ops, &mnli, 1, 0.3f);
    run_case(ops, &race, 1, 0.3f);
    run_case(ops, &mnli, 1, 0.0f);
    run_case(ops, &padded, 0, 0.0f);
    return tap_done();
}
