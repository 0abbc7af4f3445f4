/* batch_check.h: the token ids of a micro-batch against the model's padded vocabulary, checked on
 * the host before they reach the embedding (or the loss). A vocab-parallel embedding gives an id
 * outside every rank's shard a zero row and a cross-entropy target outside the vocabulary reads
 * past the logits, silently; the datasets and the corpus check at the door keep ids inside the
 * tokenizer's vocabulary, which data_setup_vocab_size makes part of the model's, so this is the
 * last line: a violation names the sample and the position and ends the job. */
#ifndef BATCH_CHECK_H
#define BATCH_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* The first position of ids[0 .. n) outside [0, limit) (with ignore_minus_one, -1 counts as
 * inside: Megatron's label for "no loss"), or -1 when every id is inside. */
long batch_check_first_outside(const int *ids, size_t n, int limit, int ignore_minus_one);

/* Ends the job (user_error_local: this rank alone loads the sample) when an id of ids[0 .. n)
 * is outside [0, padded_vocab_size): "<field> of <split> sample <sample>: token id X at
 * position P is outside the model's padded vocabulary [0, V)". split is SPLIT_TRAIN, SPLIT_VALID
 * or SPLIT_TEST. */
void batch_check_ids(const int *ids, size_t n, int padded_vocab_size, int ignore_minus_one, const char *field,
                     int split, int64_t sample);

#endif
