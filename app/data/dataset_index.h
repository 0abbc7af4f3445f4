/* dataset_index.h: the index arrays behind Megatron's GPTDataset (document index, sample index,
 * shuffle index; megatron/core/datasets/gpt_dataset.py and helpers.cpp build_sample_idx), the
 * seeded shuffle they use, and the on-disk cache that rank 0 writes and the others read.
 *
 * Randomness: numpy.random.RandomState(seed) reproduced in C (numpy_random.h), one per
 * dataset, shuffled in Megatron's call order, so the indices equal Megatron-Core's for the
 * same documents, seq_length, seed and sample count. */
#ifndef DATASET_INDEX_H
#define DATASET_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpt_index {
    int64_t num_documents_index;  /* = epochs x documents */
    int64_t *document_index;      /* document ids, shuffled */
    int64_t num_samples;          /* samples available (>= requested) */
    int64_t *sample_index;        /* [2 (num_samples + 1)]: (document_index position, offset) */
    int64_t *shuffle_index;       /* [num_samples] */
    int num_epochs;
} gpt_index;

/* Megatron's _build_document_sample_shuffle_indices for documents [first, last) whose lengths
 * are lengths[first..last), samples of seq_length + 1 tokens (add_extra_token_to_sequence),
 * drop_last_partial_sequence, and the 80% rule for a separate final epoch.
 * num_samples_requested < 0 is Megatron's num_samples None: exactly one epoch.
 * The caller guarantees the documents hold at least 2 tokens in total. */
void gpt_index_build(const int64_t *lengths, int64_t first, int64_t last, int seq_length,
                     int64_t num_samples_requested, uint64_t seed, gpt_index *out);
void gpt_index_free(gpt_index *index);

#endif
