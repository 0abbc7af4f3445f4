/* checkpoint_args.c: see checkpoint_args.h. The checkpoint's /args attributes are the ones
 * app/training/checkpointing.c writes, under Megatron's argument names. */
#include "app/training/checkpoint_args.h"
#include "app/core/error.h"
#include "io/checkpoint_file.h"
#include "io/checkpoint_format.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct taken {
    char *text;
    size_t size, used;
} taken;

static void note(taken *t, const char *name, const char *value) {
    if (t->used < t->size)
        t->used += (size_t)snprintf(t->text + t->used, t->size - t->used, "%s%s %s", t->used ? ", " : "", name, value);
}

/* Megatron's _set_arg: force, or only when the user did not give the flag */
static int wanted(const flag_marks *flags, const char *flag, int force) {
    return force || !flags->given(flags->context, flag);
}

static void set_int(checkpoint_file *f, const flag_marks *flags, taken *t, const char *name, const char *flag,
                    int force, int *field) {
    int64_t value;
    if (!wanted(flags, flag, force) || checkpoint_get_int(f, "/args", name, &value) != 0) return;
    *field = (int)value;
    flags->mark(flags->context, flag);
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)value);
    note(t, name, text);
}

/* a float argument, always from the checkpoint when it holds one */
static void set_float(checkpoint_file *f, const flag_marks *flags, taken *t, const char *name, const char *flag,
                      float *field) {
    double value;
    if (checkpoint_get_double(f, "/args", name, &value) != 0) return;
    *field = (float)value;
    flags->mark(flags->context, flag);
    char text[32];
    snprintf(text, sizeof text, "%g", value);
    note(t, name, text);
}

static void set_string(checkpoint_file *f, const flag_marks *flags, taken *t, const char *name, const char *flag,
                       char *field, size_t size) {
    char *value = checkpoint_get_string(f, "/args", name);
    if (!value) return;
    snprintf(field, size, "%s", value);
    flags->mark(flags->context, flag);
    note(t, name, value);
    free(value);
}

int checkpoint_args_apply(args *a, const flag_marks *flags, char *err, size_t errlen) {
    if (!a->load[0]) return error_format(err, errlen, "--use-checkpoint-args requires --load DIR");
    int64_t iteration;
    int rc = checkpoint_tracker_read(a->load, &iteration, err, errlen);
    if (rc == CHECKPOINT_NO_TRACKER) {
        snprintf(a->from_checkpoint, sizeof a->from_checkpoint, "no checkpoint in %.900s to provide arguments: using the flags as given", a->load);
        return 0;
    }
    if (rc) return -1;
    checkpoint_names names;
    if (checkpoint_names_for(&names, a->load, iteration, err, errlen)) return -1;
    checkpoint_file f;
    if (checkpoint_file_open(&f, names.file, MPI_COMM_SELF, 0, err, errlen)) return -1;
    taken t = {a->from_checkpoint, sizeof a->from_checkpoint, 0};
    a->from_checkpoint[0] = '\0';

    /* the shape: only where the user gave nothing */
    set_int(&f, flags, &t, "num_layers", "num-layers", 0, &a->num_layers);
    set_int(&f, flags, &t, "hidden_size", "hidden-size", 0, &a->hidden_size);
    set_int(&f, flags, &t, "ffn_hidden_size", "ffn-hidden-size", 0, &a->ffn_hidden_size);
    set_int(&f, flags, &t, "seq_length", "seq-length", 0, &a->seq_length);
    set_int(&f, flags, &t, "num_attention_heads", "num-attention-heads", 0, &a->num_attention_heads);
    set_int(&f, flags, &t, "kv_channels", "kv-channels", 0, &a->kv_channels);
    set_int(&f, flags, &t, "max_position_embeddings", "max-position-embeddings", 0, &a->max_position_embeddings);
    /* the vocabulary (Megatron's padded_vocab_size) when no tokenizer gives it */
    if (!a->tokenizer_type[0] && !(a->vocab_file[0] && a->merge_file[0]))
        set_int(&f, flags, &t, "vocab_size", "vocab-size", 0, &a->vocab_size);

    /* the architecture: the checkpoint's, whatever the command line says */
    set_int(&f, flags, &t, "group_query_attention", "group-query-attention", 1, &a->group_query_attention);
    if (a->group_query_attention)  /* without it the count is the heads' (args.c) */
        set_int(&f, flags, &t, "num_query_groups", "num-query-groups", 1, &a->num_query_groups);
    set_string(&f, flags, &t, "position_embedding_type", "position-embedding-type", a->position_embedding_type,
               sizeof a->position_embedding_type);
    set_int(&f, flags, &t, "relative_attention_num_buckets", "relative-attention-num-buckets", 1,
            &a->relative_attention_num_buckets);
    set_int(&f, flags, &t, "relative_attention_max_distance", "relative-attention-max-distance", 1,
            &a->relative_attention_max_distance);
    a->use_rotary_position_embeddings = 0;  /* the deprecated spellings yield to the checkpoint's type */
    if (strcmp(a->position_embedding_type, "rope") != 0) a->no_position_embedding = 0;
    double value;
    if (checkpoint_get_double(&f, "/args", "rotary_base", &value) == 0) {
        a->rotary_base = (int)value;
        flags->mark(flags->context, "rotary-base");
        char text[32];
        snprintf(text, sizeof text, "%d", a->rotary_base);
        note(&t, "rotary_base", text);
    }
    set_float(&f, flags, &t, "rotary_percent", "rotary-percent", &a->rotary_percent);
    set_float(&f, flags, &t, "hidden_dropout", "hidden-dropout", &a->hidden_dropout);
    set_float(&f, flags, &t, "attention_dropout", "attention-dropout", &a->attention_dropout);
    set_int(&f, flags, &t, "rotary_interleaved", "rotary-interleaved", 1, &a->rotary_interleaved);
    /* Llama 3.x's rope scaling (Megatron's load_args_from_checkpoint leaves it to the command
     * line; here the resume check compares it with the other rotary flags, so it comes along) */
    set_int(&f, flags, &t, "use_rope_scaling", "use-rope-scaling", 1, &a->use_rope_scaling);
    if (a->use_rope_scaling) set_float(&f, flags, &t, "rope_scaling_factor", "rope-scaling-factor", &a->rope_scaling_factor);
    int add_bias_linear = !a->disable_bias_linear;
    set_int(&f, flags, &t, "add_bias_linear", "disable-bias-linear", 1, &add_bias_linear);
    a->disable_bias_linear = !add_bias_linear;
    set_int(&f, flags, &t, "add_qkv_bias", "add-qkv-bias", 1, &a->add_qkv_bias);
    set_int(&f, flags, &t, "swiglu", "swiglu", 1, &a->swiglu);
    set_int(&f, flags, &t, "untie_embeddings_and_output_weights", "untie-embeddings-and-output-weights", 1,
            &a->untie_embeddings_and_output_weights);
    set_string(&f, flags, &t, "normalization", "normalization", a->normalization, sizeof a->normalization);
    /* the MLP's GeLU form (Megatron's args.bias_gelu_fusion: tanh with it, erf without), which
     * Megatron derives again from the flags; here the checkpoint's, as the model's function. A
     * checkpoint from before it was recorded computed the tanh form. */
    a->bias_gelu_fusion = 1;
    set_int(&f, flags, &t, "bias_gelu_fusion", "no-bias-gelu-fusion", 1, &a->bias_gelu_fusion);
    a->bias_gelu_fusion = a->bias_gelu_fusion != 0;
    a->no_bias_gelu_fusion = !a->bias_gelu_fusion;
    a->bias_gelu_fusion_from_checkpoint = 1;
    /* mixture of experts, as Megatron's load_args_from_checkpoint forces them */
    int64_t experts;
    if (checkpoint_get_int(&f, "/args", "num_experts", &experts) == 0 && experts > 0) {
        set_int(&f, flags, &t, "num_experts", "num-experts", 1, &a->num_experts);
        set_int(&f, flags, &t, "moe_ffn_hidden_size", "moe-ffn-hidden-size", 1, &a->moe_ffn_hidden_size);
        set_int(&f, flags, &t, "moe_router_topk", "moe-router-topk", 1, &a->moe_router_topk);
        set_string(&f, flags, &t, "moe_layer_freq", "moe-layer-freq", a->moe_layer_freq, sizeof a->moe_layer_freq);
        set_string(&f, flags, &t, "moe_router_score_function", "moe-router-score-function", a->moe_router_score_function,
                   sizeof a->moe_router_score_function);
        set_int(&f, flags, &t, "moe_shared_expert_intermediate_size", "moe-shared-expert-intermediate-size", 1,
                &a->moe_shared_expert_intermediate_size);
        /* not forced by Megatron, but it adds a tensor: the checkpoint's, as the shape's */
        set_int(&f, flags, &t, "moe_shared_expert_gate", "moe-shared-expert-gate", 1, &a->moe_shared_expert_gate);
        set_int(&f, flags, &t, "moe_router_enable_expert_bias", "moe-router-enable-expert-bias", 1,
                &a->moe_router_enable_expert_bias);
    }
    checkpoint_file_close(&f);
    return 0;
}
