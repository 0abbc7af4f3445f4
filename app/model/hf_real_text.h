/* hf_real_text.h: a real number as the Hugging Face config.json writers (hf_*_config.c) print it:
 * the shortest %g text that reads back as the same value (as float when as_float: Python prints
 * 1e-05, not 9.99999974737875e-06, for the float32 epsilon our checkpoints carry), kept a JSON
 * real ("1.0", not "1"). */
#ifndef HF_REAL_TEXT_H
#define HF_REAL_TEXT_H

#include <stddef.h>

void hf_real_text(double value, int as_float, char *text, size_t size);

#endif
