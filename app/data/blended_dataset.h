/* blended_dataset.h: Megatron's BlendedDataset indices (megatron/core/datasets/helpers.cpp
 * build_blending_indices): sample i of a blend comes from dataset dataset_index[i], sample
 * dataset_sample_index[i] of it, chosen greedily so that the counts drawn so far stay as close
 * as possible to the weights. */
#ifndef BLENDED_DATASET_H
#define BLENDED_DATASET_H

#include <stdint.h>

/* scales weights to sum to 1; returns -1 when one is negative or all are zero */
int blend_normalize_weights(double *weights, int count);

/* samples to build of a component of weight w for a blend of `target` samples: Megatron's
 * ceil(ceil(target * w) * 1.005) (0.5% surplus so the greedy rule never runs a dataset dry) */
int64_t blend_component_samples(double weight, int64_t target);

/* fills dataset_index[size], dataset_sample_index[size] (weights normalized) */
void blend_index_build(const double *weights, int count, int64_t size, int64_t *dataset_index,
                       int64_t *dataset_sample_index);

#endif
