/* sampling.c: see sampling.h. */
#include "app/inference/sampling.h"
#include "app/core/error.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdlib.h>

void sampling_scratch_init(sampling_scratch *s, int vocab_size) {
    s->values = malloc(sizeof(float) * (size_t)vocab_size);
    s->order = malloc(sizeof(int) * (size_t)vocab_size);
    s->size = vocab_size;
    CHECK(s->values && s->order, "out of host memory for sampling");
}

void sampling_scratch_free(sampling_scratch *s) {
    free(s->values);
    free(s->order);
    s->values = NULL;
    s->order = NULL;
}

static const float *sort_keys;
/* descending by value; ties by the lower id first (a total order: the same result every run) */
static int by_value_descending(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_keys[i] != sort_keys[j]) return sort_keys[i] > sort_keys[j] ? -1 : 1;
    return (i > j) - (i < j);
}

int sample_token(const float *logits, int vocab_size, const sampling_params *p, sampling_scratch *s,
                 uint64_t seed, uint64_t stream, uint64_t counter) {
    if (p->top_k == 1) {
        int best = 0;
        for (int v = 1; v < vocab_size; v++) if (logits[v] > logits[best]) best = v;
        return best;
    }
    int n = vocab_size;
    for (int v = 0; v < n; v++) {
        s->values[v] = logits[v] / p->temperature;
        s->order[v] = v;
    }
    if (p->top_k > 1 || p->top_p > 0.0f) {
        sort_keys = s->values; /* generation is serialized: one sort at a time */
        qsort(s->order, (size_t)n, sizeof(int), by_value_descending);
        if (p->top_k > 1 && p->top_k < n) n = p->top_k;
    }
    /* softmax over the candidates s->order[0..n) */
    float max_value = -INFINITY;
    for (int i = 0; i < n; i++) if (s->values[s->order[i]] > max_value) max_value = s->values[s->order[i]];
    double total = 0.0;
    for (int i = 0; i < n; i++) total += exp((double)s->values[s->order[i]] - max_value);
    if (p->top_k <= 1 && p->top_p > 0.0f) {
        /* keep the sorted tokens whose preceding cumulative probability is <= top_p */
        double cumulative = 0.0;
        int keep = 0;
        while (keep < n && cumulative <= p->top_p) {
            cumulative += exp((double)s->values[s->order[keep]] - max_value) / total;
            keep++;
        }
        n = keep > 0 ? keep : 1;
        total = 0.0;
        for (int i = 0; i < n; i++) total += exp((double)s->values[s->order[i]] - max_value);
    }
    double u = (double)philox_uniform(seed, stream, counter) * total, running = 0.0;
    for (int i = 0; i < n; i++) {
        running += exp((double)s->values[s->order[i]] - max_value);
        if (u <= running) return s->order[i];
    }
    return s->order[n - 1];
}

double token_log_prob(const float *logits, int V, int token) {
    float max_value = -INFINITY;
    for (int v = 0; v < V; v++) if (logits[v] > max_value) max_value = logits[v];
    double total = 0.0;
    for (int v = 0; v < V; v++) total += exp((double)logits[v] - max_value);
    return (double)logits[token] - max_value - log(total);
}
