/* blended_dataset.h: Megatron's BlendedDataset indices (megatron/core/datasets/helpers.cpp
 * build_blending_indices): sample i of a blend comes from dataset dataset_index[i], sample
 * dataset_sample_index[i] of it, chosen greedily so that the counts drawn so far stay as close
 * as possible to the weights. */
#ifndef BLENDED_DATASET_H
#define BLENDED_DATASET_H

#include <stdint.h>

/* Megatron's normalize: w / numpy.sum(w) (numpy's pairwise summation, bit for bit); returns
 * -1 when one is negative or all are zero */
int blend_normalize_weights(double *weights, int count);

/* samples a blend of `target` plans from a component of weight w: ceil(target * w); the blend
 * holds the sum of these over its components */
int64_t blend_component_target(double weight, int64_t target);

/* samples to build of that component: ceil(ceil(target * w) * (1 + 0.005)) (Megatron's
 * mid_level_dataset_surplus, so the greedy rule never runs a dataset dry) */
int64_t blend_component_samples(double weight, int64_t target);

/* fills dataset_index[size], dataset_sample_index[size] (weights normalized) */
void blend_index_build(const double *weights, int count, int64_t size, int64_t *dataset_index,
                       int64_t *dataset_sample_index);

#endif
