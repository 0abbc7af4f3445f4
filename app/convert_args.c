/* convert_args.c: the /args readers of convert_args.h. */
#include "app/convert_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/convert_hf_source.h"
#include "app/core/error.h"

int64_t arg_int_or(const checkpoint_reader *r, const char *name, int64_t fallback) {
    char err[error_max];
    int64_t value;
    return checkpoint_read_int_arg(r, name, &value, err, sizeof err) ? fallback : value;
}

double arg_double_or(const checkpoint_reader *r, const char *name, double fallback) {
    char err[error_max];
    double value;
    return checkpoint_read_double_arg(r, name, &value, err, sizeof err) ? fallback : value;
}

int64_t arg_positive_int(const checkpoint_reader *r, const char *name) {
    char err[error_max];
    int64_t value;
    if (checkpoint_read_int_arg(r, name, &value, err, sizeof err)) user_error("%s", err);
    if (value <= 0) user_error("%s: /args %s is %lld, expected a positive value", r->path, name, (long long)value);
    return value;
}

int arg_string_is(const checkpoint_reader *r, const char *name, const char *value, const char *fallback) {
    char *stored = checkpoint_read_string_arg(r, name);
    const char *seen = stored && stored[0] ? stored : fallback;
    int same = seen && !strcmp(seen, value);
    free(stored);
    return same;
}

int64_t arg_export_vocab(const checkpoint_reader *r, int64_t padded_vocab) {
    int64_t vocab = arg_int_or(r, "vocab_size", 0);
    if (vocab <= 0) {
        fprintf(stderr, "%s: note: %s has no tokenizer vocab_size in /args; exporting all %lld embedding rows\n",
                program_name, r->path, (long long)padded_vocab);
        vocab = padded_vocab;
    }
    if (vocab > padded_vocab)
        user_error("%s: /args vocab_size %lld exceeds padded_vocab_size %lld", r->path, (long long)vocab,
                   (long long)padded_vocab);
    return vocab;
}
