/* blended_dataset.c: the greedy error-minimizing blend of Megatron's build_blending_indices. */
#include "app/data/blended_dataset.h"

#include <math.h>
#include <stdlib.h>

int blend_normalize_weights(double *weights, int count) {
    double sum = 0;
    for (int i = 0; i < count; i++) {
        if (!(weights[i] >= 0)) return -1;
        sum += weights[i];
    }
    if (!(sum > 0)) return -1;
    for (int i = 0; i < count; i++) weights[i] /= sum;
    return 0;
}

int64_t blend_component_samples(double weight, int64_t target) {
    return (int64_t)ceil(ceil((double)target * weight) * 1.005);
}

void blend_index_build(const double *weights, int count, int64_t size, int64_t *dataset_index,
                       int64_t *dataset_sample_index) {
    int64_t *drawn = calloc((size_t)count, sizeof *drawn);
    for (int64_t i = 0; i < size; i++) {
        /* pick the dataset furthest below its share of the samples so far */
        double position = i > 1 ? (double)i : 1.0;
        int best = -1;
        double best_error = 0;
        for (int d = 0; d < count; d++) {
            if (weights[d] == 0) continue;  /* (Megatron could pick these on a tie) */
            double error = weights[d] * position - (double)drawn[d];
            if (best < 0 || error > best_error) { best_error = error; best = d; }
        }
        dataset_index[i] = best;
        dataset_sample_index[i] = drawn[best]++;
    }
    free(drawn);
}
