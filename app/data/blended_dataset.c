/* blended_dataset.c: Megatron's blend arithmetic (utils.normalize with numpy's summation,
 * _get_size_per_split_per_dataset) and helpers.cpp build_blending_indices. */
#include "app/data/blended_dataset.h"

#include <math.h>
#include <stdlib.h>

/* numpy.sum of a float64 array: pairwise summation, 8 accumulators, blocks of 128 */
static double numpy_pairwise_sum(const double *a, int n) {
    if (n < 8) {
        double sum = 0.;
        for (int i = 0; i < n; i++) sum += a[i];
        return sum;
    }
    if (n <= 128) {
        double r[8];
        int i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) sum += a[i];
        return sum;
    }
    int half = n / 2;
    half -= half % 8;
    return numpy_pairwise_sum(a, half) + numpy_pairwise_sum(a + half, n - half);
}

int blend_normalize_weights(double *weights, int count) {
    for (int i = 0; i < count; i++)
        if (!(weights[i] >= 0)) return -1;
    double sum = numpy_pairwise_sum(weights, count);
    if (!(sum > 0)) return -1;
    for (int i = 0; i < count; i++) weights[i] /= sum;
    return 0;
}

int64_t blend_component_target(double weight, int64_t target) {
    return (int64_t)ceil((double)target * weight);
}

int64_t blend_component_samples(double weight, int64_t target) {
    const double surplus = 0.005;  /* mid_level_dataset_surplus */
    return (int64_t)ceil((double)blend_component_target(weight, target) * (1.0 + surplus));
}

void blend_index_build(const double *weights, int count, int64_t size, int64_t *dataset_index,
                       int64_t *dataset_sample_index) {
    int64_t *drawn = calloc((size_t)count, sizeof *drawn);
    for (int64_t i = 0; i < size; i++) {
        /* the dataset furthest below its share so far; ties go to the lowest index */
        double position = i > 1 ? (double)i : 1.0;
        int best = 0;
        double best_error = weights[0] * position - (double)drawn[0];
        for (int d = 1; d < count; d++) {
            double error = weights[d] * position - (double)drawn[d];
            if (error > best_error) { best_error = error; best = d; }
        }
        dataset_index[i] = best;
        dataset_sample_index[i] = drawn[best]++;
    }
    free(drawn);
}
