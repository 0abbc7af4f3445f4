/* convert_args.h: reading a checkpoint's /args in the Hugging Face converters (convert_llama.c,
 * convert_bert.c, convert_t5.c, convert_checkpoint.c): an integer or a real with a fallback for
 * checkpoints that predate it, a positive integer that must be there (else the user error names
 * the file and the argument), a string compared with a fallback for an absent one, and the
 * vocabulary an export keeps. */
#ifndef CONVERT_ARGS_H
#define CONVERT_ARGS_H

#include <stdint.h>

#include "io/checkpoint_serial.h"

int64_t arg_int_or(const checkpoint_reader *r, const char *name, int64_t fallback);
double arg_double_or(const checkpoint_reader *r, const char *name, double fallback);
int64_t arg_positive_int(const checkpoint_reader *r, const char *name);
/* 1 when the string argument is `value`; an absent or empty one reads as `fallback` (NULL: never
 * equal) */
int arg_string_is(const checkpoint_reader *r, const char *name, const char *value, const char *fallback);
/* the vocabulary an export keeps: the tokenizer's vocab_size, or (with a note) all padded_vocab
 * rows when /args has none; more than padded_vocab is a user error */
int64_t arg_export_vocab(const checkpoint_reader *r, int64_t padded_vocab);

#endif
