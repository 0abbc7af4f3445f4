/* cpu_cross_entropy.c: vocab-parallel softmax cross-entropy over logits[N,V] in three passes,
 * with tensor-parallel all-reduces (MAX, then SUM) between them done by the caller:
 *   1. row_max = max_v logits
 *   2. sum_exp = sum_v exp(logits - row_max), target_logit = logits[target] if local else 0
 *   3. loss = log(sum_exp) + row_max - target_logit   (= logsumexp(logits) - logits[target])
 *      dloss/dlogits_v = softmax_v - [v == target] = exp(logits_v - row_max)/sum_exp - onehot,
 *      written over the logits, times grad_scale.
 * Also the greedy decoder's row argmax over the same logits (cpu_logits_argmax). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_cross_entropy_max(float *row_max, const float *logits, int N, int V) {
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float m = -INFINITY;
        for (int v = 0; v < V; v++) m = l[v] > m ? l[v] : m;
        row_max[n] = m;
    }
}

void cpu_logits_argmax(float *row_max, int *argmax, const float *logits, int N, int V, int valid) {
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        int best = 0;
        for (int v = 1; v < valid; v++) if (l[v] > l[best]) best = v;
        row_max[n] = valid > 0 ? l[best] : -INFINITY;
        argmax[n] = valid > 0 ? best : -1;
    }
}

void cpu_cross_entropy_sum_exp(float *sum_exp, float *target_logit, const float *logits,
                               const float *row_max, const int *targets, int N, int V,
                               int vocab_start) {
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += expf(l[v] - row_max[n]);
        sum_exp[n] = (float)sum;
        int t = targets[n] - vocab_start;
        target_logit[n] = (t >= 0 && t < V) ? l[t] : 0.0f;
    }
}

void cpu_cross_entropy_loss_grad(float *losses, float *logits, const float *row_max,
                                 const float *sum_exp, const float *target_logit,
                                 const int *targets, int N, int V, int vocab_start,
                                 float grad_scale) {
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * V;
        losses[n] = logf(sum_exp[n]) + row_max[n] - target_logit[n];
        float inv_sum = 1.0f / sum_exp[n];
        int t = targets[n] - vocab_start; /* local column of the target, if this rank has it */
        for (int v = 0; v < V; v++) {
            float prob = expf(l[v] - row_max[n]) * inv_sum;
            float indicator = v == t ? 1.0f : 0.0f;
            l[v] = (prob - indicator) * grad_scale;
        }
    }
}
