/* dataset_index.c: Megatron's GPT document/sample/shuffle indices, drawn from numpy's
 * RandomState (numpy_random.h) (see dataset_index.h). */
#include "app/data/dataset_index.h"
#include "app/core/error.h"
#include "app/data/numpy_random.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int64_t *alloc_int64(int64_t n) {
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    CHECK(p, "out of memory for an index of %lld entries", (long long)n);
    return p;
}

/* _build_document_index without a separate final epoch: documents [first, last) repeated
 * `epochs` times, shuffled as one array */
static void fill_document_index(int64_t *out, int64_t first, int64_t last, int epochs,
                                numpy_random_state *random) {
    int64_t n = last - first, k = 0;
    for (int e = 0; e < epochs; e++)
        for (int64_t d = first; d < last; d++) out[k++] = d;
    numpy_random_shuffle(random, out, (int64_t)epochs * n);
}

void gpt_index_build(const int64_t *lengths, int64_t first, int64_t last, int seq_length,
                     int64_t num_samples_requested, uint64_t seed, gpt_index *out) {
    const int extra = 1;  /* add_extra_token_to_sequence */
    int64_t documents = last - first, tokens_per_epoch = 0;
    for (int64_t d = first; d < last; d++) tokens_per_epoch += lengths[d];
    CHECK(tokens_per_epoch >= 2, "gpt_index_build needs at least 2 tokens");
    CHECK(seed <= 0xffffffffull, "the dataset seed %llu is outside numpy's [0, 2^32)",
          (unsigned long long)seed);

    /* _get_num_epochs (num_samples None: one epoch) */
    int epochs = 1;
    if (num_samples_requested >= 0) {
        int64_t tokens = tokens_per_epoch, requested = num_samples_requested * seq_length + extra;
        while (tokens < requested) { tokens += tokens_per_epoch; epochs++; }
    }

    /* separate the final epoch when less than int(0.80 * samples per epoch) come from it */
    int separate_final_epoch = 0;
    int64_t samples_sans_final = 0;
    if (epochs > 1) {
        samples_sans_final = ((int64_t)(epochs - 1) * tokens_per_epoch - extra) / seq_length;
        int64_t from_final = num_samples_requested - samples_sans_final;
        int64_t per_epoch = (tokens_per_epoch - extra) / seq_length;
        separate_final_epoch = from_final < (int64_t)(0.80 * (double)per_epoch);
    }

    /* one RandomState(seed) per dataset, drawn in Megatron's order: the document index (the
     * first epochs, then the final one), then the shuffle index */
    numpy_random_state random;
    numpy_random_seed(&random, (uint32_t)seed);

    /* _build_document_index */
    out->num_epochs = epochs;
    out->num_documents_index = (int64_t)epochs * documents;
    out->document_index = alloc_int64(out->num_documents_index);
    if (!separate_final_epoch) {
        fill_document_index(out->document_index, first, last, epochs, &random);
    } else {
        fill_document_index(out->document_index, first, last, epochs - 1, &random);
        fill_document_index(out->document_index + (int64_t)(epochs - 1) * documents, first, last,
                            1, &random);
    }

    /* helpers.cpp build_sample_idx with drop_last_partial_sequence */
    int64_t samples = ((int64_t)epochs * tokens_per_epoch - extra) / seq_length;
    int64_t *sample = alloc_int64(2 * (samples + 1));
    int64_t position = 0, offset = 0;
    sample[0] = 0;
    sample[1] = 0;
    for (int64_t s = 1; s <= samples; s++) {
        int64_t remaining = seq_length + extra;
        while (remaining != 0) {
            int64_t doc_length = lengths[out->document_index[position]] - offset;
            remaining -= doc_length;
            if (remaining <= 0) {
                offset += remaining + doc_length - extra;  /* the last token is shared */
                remaining = 0;
            } else {
                if (position == out->num_documents_index - 1) {
                    CHECK(s == samples, "sample index ran out of documents");
                    offset = lengths[out->document_index[position]] - extra;
                    break;
                }
                position++;
                offset = 0;
            }
        }
        sample[2 * s] = position;
        sample[2 * s + 1] = offset;
    }
    out->num_samples = samples;
    out->sample_index = sample;

    /* _build_shuffle_index: [0, sans_final) and [sans_final, samples) shuffled apart */
    out->shuffle_index = alloc_int64(samples);
    for (int64_t i = 0; i < samples; i++) out->shuffle_index[i] = i;
    int64_t first_range = separate_final_epoch ? samples_sans_final : samples;
    numpy_random_shuffle(&random, out->shuffle_index, first_range);
    if (first_range < samples)
        numpy_random_shuffle(&random, out->shuffle_index + first_range, samples - first_range);
}

void gpt_index_free(gpt_index *index) {
    free(index->document_index);
    free(index->sample_index);
    free(index->shuffle_index);
    memset(index, 0, sizeof *index);
}
