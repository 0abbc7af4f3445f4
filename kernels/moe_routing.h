/* moe_routing.h: the per-token arithmetic of the mixture-of-experts router (moe_router_spec in
 * kernels.h), shared by the CPU reference (cpu/cpu_moe.c) and the CUDA kernels (cuda/cuda_moe.cu)
 * so both backends route with one piece of code: the score function, the (group-limited) top-k,
 * the routing weights, the load-balancing scores, and the gradient of one row's logits.
 * Header-only; the caller gives each row its scratch arrays (moe_row_scratch), sized by the
 * largest expert count it handles, so a GPU thread's frame fits the model it runs. */
#ifndef MOE_ROUTING_H
#define MOE_ROUTING_H

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

#ifdef __CUDACC__
#define MOE_FN static __host__ __device__ inline
#else
#define MOE_FN static inline
#endif

/* scratch for one row: floats and ints of E entries each (k <= E, groups <= E) */
typedef struct moe_row_scratch {
    float *s, *a, *g, *w, *dw;  /* scores, aux scores, their gradient, weights, weight gradient */
    float *group_score, *biased;
    int *idx, *best;
    unsigned char *allowed;
} moe_row_scratch;

/* the k largest of v[0..n) among the allowed (all when NULL), largest first, ties to the lower
 * index (torch.topk's order for distinct values) */
MOE_FN void moe_top_k(const float *v, const unsigned char *allowed, int n, int k, int *out) {
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

MOE_FN void moe_softmax(float *out, const float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += out[i] = expf(x[i] - max);
    for (int i = 0; i < n; i++) out[i] /= sum;
}

MOE_FN float moe_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
MOE_FN float moe_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* the score function elementwise (sigmoid, sqrt(softplus)) or over the row (softmax) */
MOE_FN void moe_row_scores(float *s, const float *l, int E, int fn) {
    if (fn == MOE_SCORE_SOFTMAX) { moe_softmax(s, l, E); return; }
    for (int e = 0; e < E; e++) s[e] = fn == MOE_SCORE_SIGMOID ? moe_sigmoid(l[e]) : sqrtf(moe_softplus(l[e]));
}

/* d(score)/d(logit) of the elementwise score functions, from the logit and its score */
MOE_FN float moe_score_derivative(float l, float s, int fn) {
    return fn == MOE_SCORE_SIGMOID ? s * (1.0f - s) : moe_sigmoid(l) / (2.0f * s);
}

/* the top-k choice of one row: on the scores, or on the logits (softmax without pre_softmax);
 * with an expert bias (sigmoid, sqrtsoftplus) on the scores plus the bias; group-limited
 * routing first keeps the best group_topk groups */
MOE_FN void moe_choose_experts(const float *l, const float *s, int *idx, moe_router_spec spec, moe_row_scratch x) {
    int E = spec.num_experts, k = spec.topk;
    const float *v = spec.score_function == MOE_SCORE_SOFTMAX && !spec.pre_softmax ? l : s;
    if (spec.expert_bias && spec.score_function != MOE_SCORE_SOFTMAX) {
        for (int e = 0; e < E; e++) x.biased[e] = s[e] + spec.expert_bias[e];
        v = x.biased;
    }
    if (spec.num_groups > 0 && spec.group_topk > 0) {
        int per_group = E / spec.num_groups, top = k / spec.group_topk;
        for (int g = 0; g < spec.num_groups; g++) {
            moe_top_k(v + g * per_group, NULL, per_group, top, x.best);
            x.group_score[g] = 0.0f;
            for (int j = 0; j < top; j++) x.group_score[g] += v[g * per_group + x.best[j]];
        }
        moe_top_k(x.group_score, NULL, spec.num_groups, spec.group_topk, x.best);
        memset(x.allowed, 0, (size_t)E);
        for (int j = 0; j < spec.group_topk; j++) memset(x.allowed + x.best[j] * per_group, 1, (size_t)per_group);
        moe_top_k(v, x.allowed, E, k, idx);
    } else {
        moe_top_k(v, NULL, E, k, idx);
    }
}

/* the routing weights of the chosen experts, before the scaling factor (x.g: scratch) */
MOE_FN void moe_choice_weights(float *w, const float *l, const float *s, const int *idx, moe_router_spec spec,
                               moe_row_scratch x) {
    int k = spec.topk;
    if (spec.score_function == MOE_SCORE_SOFTMAX && !spec.pre_softmax) {
        for (int j = 0; j < k; j++) x.g[j] = l[idx[j]];
        moe_softmax(w, x.g, k);
        return;
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += w[j] = s[idx[j]];
    if (spec.score_function != MOE_SCORE_SOFTMAX && k > 1)
        for (int j = 0; j < k; j++) w[j] /= sum + 1e-20f;
}

/* one row's routing: expert[k] and weight[k] (scaled), before any capacity drop */
MOE_FN void moe_route_row(int *expert, float *weight, const float *l, moe_router_spec spec, moe_row_scratch x) {
    moe_row_scores(x.s, l, spec.num_experts, spec.score_function);
    moe_choose_experts(l, x.s, expert, spec, x);
    moe_choice_weights(weight, l, x.s, expert, spec, x);
    if (spec.topk_scaling_factor > 0.0f)
        for (int j = 0; j < spec.topk; j++) weight[j] *= spec.topk_scaling_factor;
}

/* the scores the load-balancing loss reads: softmax, or the score normalized over the row */
MOE_FN void moe_aux_scores(float *a, const float *l, moe_router_spec spec) {
    int E = spec.num_experts;
    moe_row_scores(a, l, E, spec.score_function);
    if (spec.score_function == MOE_SCORE_SOFTMAX) return;
    float sum = 0.0f;
    for (int e = 0; e < E; e++) sum += a[e];
    for (int e = 0; e < E; e++) a[e] /= sum + 1e-20f;
}

/* the experts one row counts for in the loss's routing map (the plain top-k of its aux scores),
 * into idx[k] (may be x.idx: only x.a is used as scratch) */
MOE_FN void moe_aux_choice(int *idx, const float *l, moe_router_spec spec, moe_row_scratch x) {
    moe_aux_scores(x.a, l, spec);
    moe_top_k(x.a, NULL, spec.num_experts, spec.topk, idx);
}

/* sum over e of aux_score[e] * counts[e] for one row: its term of the load-balancing loss */
MOE_FN double moe_aux_term(const float *l, const float *counts, moe_router_spec spec, moe_row_scratch x) {
    moe_aux_scores(x.a, l, spec);
    double sum = 0.0;
    for (int e = 0; e < spec.num_experts; e++) sum += (double)x.a[e] * counts[e];
    return sum;
}

MOE_FN float moe_logsumexp(const float *l, int E) {
    float max = l[0], sum = 0.0f;
    for (int e = 1; e < E; e++) max = l[e] > max ? l[e] : max;
    for (int e = 0; e < E; e++) sum += expf(l[e] - max);
    return max + logf(sum);
}

/* y = softmax(x) over n: dx += y * (dy - <dy, y>) */
MOE_FN void moe_softmax_backward_add(float *dx, const float *dy, const float *y, int n) {
    float dot = 0.0f;
    for (int i = 0; i < n; i++) dot += dy[i] * y[i];
    for (int i = 0; i < n; i++) dx[i] += y[i] * (dy[i] - dot);
}

/* the gradient of one row's logits dl[E] (overwritten): of sum_j dweight[j] weight[j] through
 * the routing weights (expert[j] -1: dropped, no gradient), plus, when counts is not NULL, the
 * load-balancing loss with d/da[e] = aux_scale counts[e] (counts: the row's sequence's tokens
 * per expert; aux_scale = loss_scale coeff E / (k T^2 sequences)), plus, when z_scale is not 0,
 * the z loss with d/dl[e] = z_scale lse softmax(l)[e] / N (z_scale = loss_scale z_coeff 2, N the
 * micro-batch's tokens) */
MOE_FN void moe_route_backward_row(float *dl, const float *dweight, const int *expert, const float *l,
                                   moe_router_spec spec, const float *counts, float aux_scale, float z_scale,
                                   int N, moe_row_scratch x) {
    int E = spec.num_experts, k = spec.topk, fn = spec.score_function;
    memset(dl, 0, sizeof(float) * (size_t)E);
    /* the routing weights: the row's top-k again (before any capacity drop) */
    moe_row_scores(x.s, l, E, fn);
    moe_choose_experts(l, x.s, x.idx, spec, x);
    moe_choice_weights(x.w, l, x.s, x.idx, spec, x);
    float factor = spec.topk_scaling_factor > 0.0f ? spec.topk_scaling_factor : 1.0f;
    for (int j = 0; j < k; j++) x.dw[j] = expert[j] >= 0 ? dweight[j] * factor : 0.0f;
    if (fn == MOE_SCORE_SOFTMAX && !spec.pre_softmax) {
        float dot = 0.0f;
        for (int j = 0; j < k; j++) dot += x.dw[j] * x.w[j];
        for (int j = 0; j < k; j++) dl[x.idx[j]] += x.w[j] * (x.dw[j] - dot);
    } else if (fn == MOE_SCORE_SOFTMAX) {
        memset(x.g, 0, sizeof(float) * (size_t)E);
        for (int j = 0; j < k; j++) x.g[x.idx[j]] += x.dw[j];
        moe_softmax_backward_add(dl, x.g, x.s, E);
    } else {
        float sum = 0.0f, dot = 0.0f;
        for (int j = 0; j < k; j++) sum += x.s[x.idx[j]];
        for (int j = 0; j < k; j++) dot += x.dw[j] * x.w[j];
        for (int j = 0; j < k; j++) {
            float dq = k > 1 ? (x.dw[j] - dot) / (sum + 1e-20f) : x.dw[j];
            dl[x.idx[j]] += dq * moe_score_derivative(l[x.idx[j]], x.s[x.idx[j]], fn);
        }
    }
    if (counts) {
        for (int e = 0; e < E; e++) x.g[e] = aux_scale * counts[e];
        moe_aux_scores(x.a, l, spec);
        if (fn == MOE_SCORE_SOFTMAX) {
            moe_softmax_backward_add(dl, x.g, x.a, E);
        } else { /* a = s / (S + 1e-20), S = sum s */
            float sum = 0.0f, dot = 0.0f;
            for (int e = 0; e < E; e++) sum += x.s[e];
            for (int e = 0; e < E; e++) dot += x.g[e] * x.a[e];
            for (int e = 0; e < E; e++)
                dl[e] += (x.g[e] - dot) / (sum + 1e-20f) * moe_score_derivative(l[e], x.s[e], fn);
        }
    }
    if (z_scale != 0.0f) {
        float lse = moe_logsumexp(l, E), scale = z_scale * lse / (float)N;
        for (int e = 0; e < E; e++) dl[e] += scale * expf(l[e] - lse);
    }
}

#endif /* MOE_ROUTING_H */
