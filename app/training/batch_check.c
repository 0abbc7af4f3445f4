/* batch_check.c: a micro-batch's token ids inside the model's padded vocabulary (batch_check.h). */
#include "app/training/batch_check.h"
#include "app/core/error.h"

long batch_check_first_outside(const int *ids, size_t n, int limit, int ignore_minus_one) {
    for (size_t i = 0; i < n; i++)
        if ((ids[i] < 0 || ids[i] >= limit) && !(ignore_minus_one && ids[i] == -1)) return (long)i;
    return -1;
}

void batch_check_ids(const int *ids, size_t n, int padded_vocab_size, int ignore_minus_one, const char *field,
                     int split, int64_t sample) {
    long at = batch_check_first_outside(ids, n, padded_vocab_size, ignore_minus_one);
    if (at < 0) return;
    static const char *const splits[3] = {"training", "validation", "test"};
    user_error_local("%s of %s sample %lld: token id %d at position %ld is outside the model's padded "
                     "vocabulary [0, %d) (the tokenizer's vocabulary, padded to --make-vocab-size-divisible-by "
                     "x TP)", field, split >= 0 && split < 3 ? splits[split] : "?", (long long)sample, ids[at], at,
                     padded_vocab_size);
}
