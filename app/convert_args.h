/* convert_args.h: reading a checkpoint's /args in the Hugging Face converters (convert_llama.c,
 * convert_bert.c, convert_t5.c, convert_checkpoint.c): an integer or a real with a fallback for
 * checkpoints that predate it, a positive integer that must be there (else the user error names
 * the file and the argument), and a string compared with a fallback for an absent one. */
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

#endif
