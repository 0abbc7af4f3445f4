/* checkpoint_args.h: Megatron's load_args_from_checkpoint (--use-checkpoint-args): the model's
 * shape and architecture flags from the newest checkpoint in --load, applied to the parsed
 * flags before they are checked. As in Megatron, the shape flags (--num-layers, --hidden-size,
 * --ffn-hidden-size, --seq-length, --num-attention-heads, --kv-channels,
 * --max-position-embeddings, and --vocab-size when no tokenizer names it) fill only what the
 * user left out, while the architecture flags (query groups, position embeddings, RoPE, biases,
 * SwiGLU, untied output layer, normalization, dropout) override the command line. */
#ifndef CHECKPOINT_ARGS_H
#define CHECKPOINT_ARGS_H

#include <stddef.h>

#include "app/training/args.h"

/* which flags the user gave, by name without "--", and marking one as given */
typedef struct flag_marks {
    void *context;
    int (*given)(void *context, const char *flag);
    void (*mark)(void *context, const char *flag);
} flag_marks;

/* Reads DIR's newest checkpoint (a->load) and applies its arguments to a; a->from_checkpoint
 * says what was taken. A folder with no checkpoint leaves the flags as given (Megatron's
 * "Checkpoint not found to provide arguments"). Returns 0, or -1 with one line in err. */
int checkpoint_args_apply(args *a, const flag_marks *flags, char *err, size_t errlen);

#endif
