/* cpu_moe.c: the mixture-of-experts operations of the CPU reference backend (kernels/kernels.h,
 * moe_router_spec): the router's top-k routing with capacity dropping and its load-balancing and
 * z losses, their backward, and the row gathers and weighted sums that move tokens to their
 * experts and back. Everything is fp32 and runs in a fixed order, so results are bitwise
 * reproducible and do not depend on how the tokens are later split over ranks. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MOE_MAX_EXPERTS 1024

/* the k largest of v[0..n) among the allowed (all when NULL), largest first, ties to the lower
 * index (torch.topk's order for distinct values) */
static void top_k(const float *v, const unsigned char *allowed, int n, int k, int *out) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (allowed && !allowed[i]) continue;
            int taken = 0;
            for (int q = 0; q < j && !taken; q++) taken = out[q] == i;
            if (!taken && (best < 0 || v[i] > v[best])) best = i;
        }
        out[j] = best;
    }
}

static void softmax(float *out, const float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += out[i] = expf(x[i] - max);
    for (int i = 0; i < n; i++) out[i] /= sum;
}

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* the score function elementwise (sigmoid, sqrt(softplus)) or over the row (softmax) */
static void row_scores(float *s, const float *l, int E, int fn) {
    if (fn == MOE_SCORE_SOFTMAX) { softmax(s, l, E); return; }
    for (int e = 0; e < E; e++) s[e] = fn == MOE_SCORE_SIGMOID ? sigmoid(l[e]) : sqrtf(softplus(l[e]));
}

/* d(score)/d(logit) of the elementwise score functions, from the logit and its score */
static float score_derivative(float l, float s, int fn) {
    return fn == MOE_SCORE_SIGMOID ? s * (1.0f - s) : sigmoid(l) / (2.0f * s);
}

/* the top-k choice of one row: on the scores, or on the logits (softmax without pre_softmax);
 * with an expert bias (sigmoid, sqrtsoftplus) on the scores plus the bias; group-limited
 * routing first keeps the best group_topk groups */
static void choose_experts(const float *l, const float *s, int *idx, moe_router_spec spec) {
    int E = spec.num_experts, k = spec.topk;
    const float *v = spec.score_function == MOE_SCORE_SOFTMAX && !spec.pre_softmax ? l : s;
    float biased[MOE_MAX_EXPERTS];
    if (spec.expert_bias && spec.score_function != MOE_SCORE_SOFTMAX) {
        for (int e = 0; e < E; e++) biased[e] = s[e] + spec.expert_bias[e];
        v = biased;
    }
    unsigned char allowed[MOE_MAX_EXPERTS];
    if (spec.num_groups > 0 && spec.group_topk > 0) {
        int per_group = E / spec.num_groups, top = k / spec.group_topk;
        float group_score[MOE_MAX_EXPERTS];
        int best[MOE_MAX_EXPERTS];
        for (int g = 0; g < spec.num_groups; g++) {
            top_k(v + g * per_group, NULL, per_group, top, best);
            group_score[g] = 0.0f;
            for (int j = 0; j < top; j++) group_score[g] += v[g * per_group + best[j]];
        }
        top_k(group_score, NULL, spec.num_groups, spec.group_topk, best);
        memset(allowed, 0, (size_t)E);
        for (int j = 0; j < spec.group_topk; j++) memset(allowed + best[j] * per_group, 1, (size_t)per_group);
        top_k(v, allowed, E, k, idx);
    } else {
        top_k(v, NULL, E, k, idx);
    }
}

/* the routing weights of the chosen experts, before the scaling factor */
static void choice_weights(float *w, const float *l, const float *s, const int *idx, moe_router_spec spec) {
    int k = spec.topk;
    if (spec.score_function == MOE_SCORE_SOFTMAX && !spec.pre_softmax) {
        float chosen[MOE_MAX_EXPERTS];
        for (int j = 0; j < k; j++) chosen[j] = l[idx[j]];
        softmax(w, chosen, k);
        return;
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += w[j] = s[idx[j]];
    if (spec.score_function != MOE_SCORE_SOFTMAX && k > 1)
        for (int j = 0; j < k; j++) w[j] /= sum + 1e-20f;
}

/* the scores the load-balancing loss reads: softmax, or the score normalized over the row */
static void aux_scores(float *a, const float *l, moe_router_spec spec) {
    int E = spec.num_experts;
    row_scores(a, l, E, spec.score_function);
    if (spec.score_function == MOE_SCORE_SOFTMAX) return;
    float sum = 0.0f;
    for (int e = 0; e < E; e++) sum += a[e];
    for (int e = 0; e < E; e++) a[e] /= sum + 1e-20f;
}

/* tokens per expert under the loss's routing map (plain top-k of the aux scores) over rows
 * [first, first + rows) */
static void aux_counts(float *counts, const float *logits, int first, int rows, moe_router_spec spec) {
    int E = spec.num_experts, k = spec.topk, idx[MOE_MAX_EXPERTS];
    float a[MOE_MAX_EXPERTS];
    memset(counts, 0, sizeof(float) * (size_t)E);
    for (int t = first; t < first + rows; t++) {
        aux_scores(a, logits + (size_t)t * E, spec);
        top_k(a, NULL, E, k, idx);
        for (int j = 0; j < k; j++) counts[idx[j]] += 1.0f;
    }
}

typedef struct drop_candidate { float weight; int token, slot; } drop_candidate;

static int by_weight_then_token(const void *pa, const void *pb) {
    const drop_candidate *a = pa, *b = pb;
    if (a->weight != b->weight) return a->weight > b->weight ? -1 : 1;
    return a->token - b->token;
}

/* Megatron's apply_router_token_dropping: each expert keeps at most `capacity` of its tokens */
static void drop_over_capacity(int *expert, float *weight, int N, moe_router_spec spec) {
    int E = spec.num_experts, k = spec.topk;
    long capacity = (long)ceil((double)N * k / E * spec.capacity_factor);
    if (capacity >= N) return;
    drop_candidate *c = malloc(sizeof *c * (size_t)N);
    if (!c) KERNELS_FATAL("out of host memory routing %d tokens", N);
    for (int e = 0; e < E; e++) {
        int count = 0;
        for (int t = 0; t < N; t++)
            for (int j = 0; j < k; j++)
                if (expert[(size_t)t * k + j] == e) c[count++] = (drop_candidate){weight[(size_t)t * k + j], t, j};
        if (count <= capacity) continue;
        if (!spec.drop_by_position) qsort(c, (size_t)count, sizeof *c, by_weight_then_token);
        for (int i = (int)capacity; i < count; i++) {
            expert[(size_t)c[i].token * k + c[i].slot] = -1;
            weight[(size_t)c[i].token * k + c[i].slot] = 0.0f;
        }
    }
    free(c);
}

static float logsumexp(const float *l, int E) {
    float max = l[0], sum = 0.0f;
    for (int e = 1; e < E; e++) max = l[e] > max ? l[e] : max;
    for (int e = 0; e < E; e++) sum += expf(l[e] - max);
    return max + logf(sum);
}

void cpu_moe_route_forward(int *expert, float *weight, float *stats, const float *logits, int N,
                           moe_router_spec spec, int with_losses) {
    int E = spec.num_experts, k = spec.topk;
    if (E > MOE_MAX_EXPERTS) KERNELS_FATAL("%d experts: the CPU router handles at most %d", E, MOE_MAX_EXPERTS);
    float s[MOE_MAX_EXPERTS];
    for (int t = 0; t < N; t++) {
        const float *l = logits + (size_t)t * E;
        row_scores(s, l, E, spec.score_function);
        choose_experts(l, s, expert + (size_t)t * k, spec);
        choice_weights(weight + (size_t)t * k, l, s, expert + (size_t)t * k, spec);
        if (spec.topk_scaling_factor > 0.0f)
            for (int j = 0; j < k; j++) weight[(size_t)t * k + j] *= spec.topk_scaling_factor;
    }
    if (spec.capacity_factor > 0.0f) drop_over_capacity(expert, weight, N, spec);

    memset(stats, 0, sizeof(float) * MOE_ROUTER_STATS(E));
    if (!with_losses) return;
    float a[MOE_MAX_EXPERTS], counts[MOE_MAX_EXPERTS];
    if (spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f) {
        int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N, sequences = N / T;
        double aux = 0.0;
        for (int b = 0; b < sequences; b++) {
            aux_counts(counts, logits, b * T, T, spec);
            double sum = 0.0;
            for (int t = b * T; t < (b + 1) * T; t++) {
                aux_scores(a, logits + (size_t)t * E, spec);
                for (int e = 0; e < E; e++) sum += (double)a[e] * counts[e];
            }
            aux += sum * E / ((double)k * T * T);
            for (int e = 0; e < E; e++) stats[2 + e] += counts[e];
        }
        stats[0] = (float)(aux / sequences);
    }
    if (spec.z_loss_coeff > 0.0f) {
        double z = 0.0;
        for (int t = 0; t < N; t++) {
            float lse = logsumexp(logits + (size_t)t * E, E);
            z += (double)lse * lse;
        }
        stats[1] = (float)(z / N);
    }
}

/* y = softmax(x) over n: dx += y * (dy - <dy, y>) */
static void softmax_backward_add(float *dx, const float *dy, const float *y, int n) {
    float dot = 0.0f;
    for (int i = 0; i < n; i++) dot += dy[i] * y[i];
    for (int i = 0; i < n; i++) dx[i] += y[i] * (dy[i] - dot);
}

void cpu_moe_route_backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                            moe_router_spec spec, float loss_scale) {
    int E = spec.num_experts, k = spec.topk, fn = spec.score_function;
    float s[MOE_MAX_EXPERTS], ds[MOE_MAX_EXPERTS], a[MOE_MAX_EXPERTS], counts[MOE_MAX_EXPERTS];
    int idx[MOE_MAX_EXPERTS];
    float dw[MOE_MAX_EXPERTS], w[MOE_MAX_EXPERTS];
    int balancing = spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f;
    int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N;
    int sequences = N / T;
    for (int t = 0; t < N; t++) {
        const float *l = logits + (size_t)t * E;
        float *dl = dlogits + (size_t)t * E;
        memset(dl, 0, sizeof(float) * (size_t)E);
        /* the routing weights: the row's top-k again (before any capacity drop), dropped
         * choices with no gradient of their own */
        row_scores(s, l, E, fn);
        choose_experts(l, s, idx, spec);
        choice_weights(w, l, s, idx, spec);
        float factor = spec.topk_scaling_factor > 0.0f ? spec.topk_scaling_factor : 1.0f;
        for (int j = 0; j < k; j++) dw[j] = expert[(size_t)t * k + j] >= 0 ? dweight[(size_t)t * k + j] * factor : 0.0f;
        if (fn == MOE_SCORE_SOFTMAX && !spec.pre_softmax) {
            float dot = 0.0f;
            for (int j = 0; j < k; j++) dot += dw[j] * w[j];
            for (int j = 0; j < k; j++) dl[idx[j]] += w[j] * (dw[j] - dot);
        } else if (fn == MOE_SCORE_SOFTMAX) {
            memset(ds, 0, sizeof(float) * (size_t)E);
            for (int j = 0; j < k; j++) ds[idx[j]] += dw[j];
            softmax_backward_add(dl, ds, s, E);
        } else {
            float sum = 0.0f, dot = 0.0f;
            for (int j = 0; j < k; j++) sum += s[idx[j]];
            for (int j = 0; j < k; j++) dot += dw[j] * w[j];
            for (int j = 0; j < k; j++) {
                float dq = k > 1 ? (dw[j] - dot) / (sum + 1e-20f) : dw[j];
                dl[idx[j]] += dq * score_derivative(l[idx[j]], s[idx[j]], fn);
            }
        }
        /* the load-balancing loss: d/da[t,e] = coeff E f_e / (k T^2 sequences) */
        if (balancing) {
            int b = t / T;
            if (t % T == 0) aux_counts(counts, logits, b * T, T, spec);
            float g[MOE_MAX_EXPERTS], scale = loss_scale * spec.aux_loss_coeff * (float)E /
                                                 ((float)k * (float)T * (float)T * (float)sequences);
            for (int e = 0; e < E; e++) g[e] = scale * counts[e];
            aux_scores(a, l, spec);
            if (fn == MOE_SCORE_SOFTMAX) {
                softmax_backward_add(dl, g, a, E);
            } else {  /* a = s / (S + 1e-20), S = sum s */
                float sum = 0.0f, dot = 0.0f;
                for (int e = 0; e < E; e++) sum += s[e];
                for (int e = 0; e < E; e++) dot += g[e] * a[e];
                for (int e = 0; e < E; e++) dl[e] += (g[e] - dot) / (sum + 1e-20f) * score_derivative(l[e], s[e], fn);
            }
        }
        /* z loss: d/dl[t,e] = z_coeff 2 lse_t softmax(l_t)_e / N */
        if (spec.z_loss_coeff > 0.0f) {
            float lse = logsumexp(l, E), scale = loss_scale * spec.z_loss_coeff * 2.0f * lse / (float)N;
            for (int e = 0; e < E; e++) dl[e] += scale * expf(l[e] - lse);
        }
    }
}

void cpu_gather_rows(float *out, const float *x, const int *rows, int M, int C) {
    for (int i = 0; i < M; i++) memcpy(out + (size_t)i * C, x + (size_t)rows[i] * C, sizeof(float) * (size_t)C);
}

void cpu_moe_combine(float *out, const float *y, const int *slot_row, const float *weight, int N, int k, int C) {
    for (int t = 0; t < N; t++) {
        float *o = out + (size_t)t * C;
        memset(o, 0, sizeof(float) * (size_t)C);
        for (int j = 0; j < k; j++) {
            int row = slot_row[(size_t)t * k + j];
            if (row < 0) continue;
            float w = weight[(size_t)t * k + j];
            const float *yr = y + (size_t)row * C;
            for (int c = 0; c < C; c++) o[c] += w * yr[c];
        }
    }
}

void cpu_moe_combine_backward(float *dy, float *dweight, const float *dout, const float *y, const int *slot_row,
                              const float *weight, int N, int k, int C) {
    for (int t = 0; t < N; t++) {
        const float *d = dout + (size_t)t * C;
        for (int j = 0; j < k; j++) {
            int row = slot_row[(size_t)t * k + j];
            if (row < 0) { dweight[(size_t)t * k + j] = 0.0f; continue; }
            float w = weight[(size_t)t * k + j], dot = 0.0f;
            const float *yr = y + (size_t)row * C;
            float *dyr = dy + (size_t)row * C;
            for (int c = 0; c < C; c++) {
                dot += d[c] * yr[c];
                dyr[c] = w * d[c];
            }
            dweight[(size_t)t * k + j] = dot;
        }
    }
}

void cpu_moe_uncombine(float *dx, const float *dxp, const int *slot_row, int N, int k, int C) {
    for (int t = 0; t < N; t++) {
        float *d = dx + (size_t)t * C;
        memset(d, 0, sizeof(float) * (size_t)C);
        for (int j = 0; j < k; j++) {
            int row = slot_row[(size_t)t * k + j];
            if (row < 0) continue;
            const float *src = dxp + (size_t)row * C;
            for (int c = 0; c < C; c++) d[c] += src[c];
        }
    }
}

void cpu_uniform_jitter(float *out, const float *x, size_t n, float eps, dropout_rng rng) {
    for (size_t i = 0; i < n; i++) {
        float u = philox_uniform(rng.seed, rng.stream, rng.offset + i);
        out[i] = x[i] * (1.0f + eps * (2.0f * u - 1.0f));
    }
}
