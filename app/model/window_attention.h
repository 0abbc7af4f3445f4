/* window_attention.h: Megatron's sliding-window attention flags into a gpt_config (whose
 * gpt_layer_window gives each layer's window to the attention kernels).
 *  --window-size LEFT,RIGHT (Megatron's tuple_type: "4096,0" or "(4096, 0)"): with Transformer
 *    Engine's causal attention a query at position i sees the keys at i - LEFT .. i + RIGHT
 *    within the causal mask, -1 meaning unbounded; TE's check_set_window_size takes (-1, 0) and
 *    (>= 0, 0) as they are, turns (-1, -1) and (>= 0, != 0) into (LEFT, 0) with a warning, and
 *    refuses anything else.
 *  --window-attn-skip-freq N|PATTERN (Megatron-Core's is_layer_window_attention): an integer N
 *    makes layers N, 2N, ... (1-based) full attention and the others windowed; a Python list
 *    expression of 0/1 per layer (app/model/layer_pattern.h) marks the windowed layers with 1. */
#ifndef WINDOW_ATTENTION_H
#define WINDOW_ATTENTION_H

#include <stddef.h>

#include "app/model/gpt_model.h"

/* Set c's window fields from the flags' texts ("" when not given) for num_layers layers.
 * notice (may be NULL) gets TE's warning when RIGHT was set to 0, else "". Returns 0, or -1 with
 * one message in err naming the flag and the fault. */
int window_attention_configure(gpt_config *c, const char *window_size, const char *skip_freq, int num_layers,
                               char *notice, size_t notice_len, char *err, size_t errlen);

#endif
