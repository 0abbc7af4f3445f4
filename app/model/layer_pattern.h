/* layer_pattern.h: Megatron's per-layer patterns given as Python list expressions of 0 and 1
 * (its _eval_pattern: "[1,0,1]", "([0]*1+[1]*3)*2": lists, '+' concatenation, '*' repetition,
 * parentheses), as --moe-layer-freq and --window-attn-skip-freq take them. */
#ifndef LAYER_PATTERN_H
#define LAYER_PATTERN_H

#include <stddef.h>

/* Evaluate the list expression `text` of the flag `flag` (named in messages, without "--") into
 * out[0..num_layers), which holds max_layers entries; the list must have num_layers entries.
 * Returns 0, or -1 with one message in err naming the flag and the offset of the fault. */
int layer_pattern_parse(const char *flag, const char *text, int num_layers, unsigned char *out, int max_layers,
                        char *err, size_t errlen);

#endif
