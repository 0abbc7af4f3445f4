/* mock_data.h: deterministic synthetic tokens (Megatron's --mock-data). Sample i of a split is a
 * pure function of (seed, split, i): documents of random length whose tokens count upward from a
 * random start, separated by the end-of-document token. A model can learn the pattern, so the
 * loss falls, and every rank can produce any sample without reading or communicating. */
#ifndef MOCK_DATA_H
#define MOCK_DATA_H

#include <stdint.h>

enum { SPLIT_TRAIN = 0, SPLIT_VALID = 1, SPLIT_TEST = 2 };

/* tokens[0..length) of sample `index` (length = seq_length + 1: inputs and shifted targets) */
void mock_data_sample(uint64_t seed, int split, int64_t index, int vocab_size, int length,
                      int32_t *tokens);

#endif
