/* cpu_moe.c: the mixture-of-experts operations of the CPU reference backend (kernels/kernels.h,
 * moe_router_spec): the router's top-k routing with capacity dropping and its load-balancing and
 * z losses, their backward, and the row gathers and weighted sums that move tokens to their
 * experts and back. Everything is fp32 and runs in a fixed order, so results are bitwise
 * reproducible and do not depend on how the tokens are later split over ranks. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/moe_routing.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MOE_MAX_EXPERTS 1024

/* one row's scratch on the stack of the CPU loop */
#define ROW_SCRATCH(x)                                                                             \
    float x##_s[MOE_MAX_EXPERTS], x##_a[MOE_MAX_EXPERTS], x##_g[MOE_MAX_EXPERTS], x##_w[MOE_MAX_EXPERTS], \
        x##_dw[MOE_MAX_EXPERTS], x##_gs[MOE_MAX_EXPERTS], x##_b[MOE_MAX_EXPERTS];                                          \
    int x##_idx[MOE_MAX_EXPERTS], x##_best[MOE_MAX_EXPERTS];                                       \
    unsigned char x##_allowed[MOE_MAX_EXPERTS];                                                    \
    moe_row_scratch x = {x##_s, x##_a, x##_g, x##_w, x##_dw, x##_gs, x##_b, x##_idx, x##_best, x##_allowed}

/* tokens per expert under the loss's routing map (plain top-k of the aux scores) over rows
 * [first, first + rows) */
static void aux_counts(float *counts, const float *logits, int first, int rows, moe_router_spec spec) {
    int E = spec.num_experts, k = spec.topk;
    ROW_SCRATCH(x);
    memset(counts, 0, sizeof(float) * (size_t)E);
    for (int t = first; t < first + rows; t++) {
        moe_aux_choice(x.idx, logits + (size_t)t * E, spec, x);
        for (int j = 0; j < k; j++) counts[x.idx[j]] += 1.0f;
    }
}

typedef struct drop_candidate { float weight; int token, slot; } drop_candidate;

static int by_weight_then_token(const void *pa, const void *pb) {
    const drop_candidate *a = pa, *b = pb;
    if (a->weight != b->weight) return a->weight > b->weight ? -1 : 1;
    return a->token - b->token;
}

/* Megatron's apply_router_token_dropping: each expert keeps at most `capacity` of its tokens
 * (also the CUDA backend's, on the host: cpu_kernels.h) */
void cpu_moe_drop_over_capacity(int *expert, float *weight, int N, moe_router_spec spec) {
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

void cpu_moe_route_forward(int *expert, float *weight, float *stats, const float *logits, int N,
                           moe_router_spec spec, int with_losses) {
    int E = spec.num_experts, k = spec.topk;
    if (E > MOE_MAX_EXPERTS) KERNELS_FATAL("%d experts: the CPU router handles at most %d", E, MOE_MAX_EXPERTS);
    ROW_SCRATCH(x);
    for (int t = 0; t < N; t++) moe_route_row(expert + (size_t)t * k, weight + (size_t)t * k, logits + (size_t)t * E, spec, x);
    if (spec.capacity_factor > 0.0f) cpu_moe_drop_over_capacity(expert, weight, N, spec);

    memset(stats, 0, sizeof(float) * MOE_ROUTER_STATS(E));
    if (!with_losses) return;
    float counts[MOE_MAX_EXPERTS];
    if (spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f) {
        int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N, sequences = N / T;
        double aux = 0.0;
        for (int b = 0; b < sequences; b++) {
            aux_counts(counts, logits, b * T, T, spec);
            double sum = 0.0;
            for (int t = b * T; t < (b + 1) * T; t++) sum += moe_aux_term(logits + (size_t)t * E, counts, spec, x);
            aux += sum * E / ((double)k * T * T);
            for (int e = 0; e < E; e++) stats[2 + e] += counts[e];
        }
        stats[0] = (float)(aux / sequences);
    }
    if (spec.z_loss_coeff > 0.0f) {
        double z = 0.0;
        for (int t = 0; t < N; t++) {
            float lse = moe_logsumexp(logits + (size_t)t * E, E);
            z += (double)lse * lse;
        }
        stats[1] = (float)(z / N);
    }
}

void cpu_moe_route_backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                            moe_router_spec spec, float loss_scale) {
    int E = spec.num_experts, k = spec.topk;
    float counts[MOE_MAX_EXPERTS];
    ROW_SCRATCH(x);
    int balancing = spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f;
    int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N;
    int sequences = N / T;
    float aux_scale = loss_scale * spec.aux_loss_coeff * (float)E / ((float)k * (float)T * (float)T * (float)sequences);
    float z_scale = spec.z_loss_coeff > 0.0f ? loss_scale * spec.z_loss_coeff * 2.0f : 0.0f;
    for (int t = 0; t < N; t++) {
        if (balancing && t % T == 0) aux_counts(counts, logits, t, T, spec);
        moe_route_backward_row(dlogits + (size_t)t * E, dweight + (size_t)t * k, expert + (size_t)t * k,
                               logits + (size_t)t * E, spec, balancing ? counts : NULL, aux_scale, z_scale, N, x);
    }
}

void cpu_moe_permutation(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E) {
    memset(rows, 0, sizeof(int) * (size_t)(E + 1));
    for (int i = 0; i < M; i++)
        if (expert[i] >= 0) rows[expert[i] + 1]++;
    for (int e = 0; e < E; e++) rows[e + 1] += rows[e];
    for (int i = 0; i < M; i++) {  /* i = t k + j: token order, then top-k order */
        int e = expert[i];
        if (e < 0) {
            slot_row[i] = -1;
            continue;
        }
        int row = rows[e]++;  /* rows[e]: expert e's next row; at the end, its end = e+1's start */
        slot_row[i] = row;
        row_token[row] = i / k;
    }
    for (int e = E; e > 0; e--) rows[e] = rows[e - 1];  /* shifted back: the starts again */
    rows[0] = 0;
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
