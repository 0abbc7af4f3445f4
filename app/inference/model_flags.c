/* model_flags.c: see model_flags.h. Every comparison names the flag as given and the checkpoint's
 * /args attribute it contradicts, under Megatron's names. */
#include "app/inference/model_flags.h"
#include "app/core/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct check {
    const option_table *table;
    const unsigned char *given;
    const inference_model *im;
} check;

static int given(const check *c, const char *flag) { return options_given(c->table, c->given, flag); }

static void refuse(const check *c, const char *flag, const char *value, const char *name, const char *saved) {
    user_error("--%s %s, but the checkpoint %s has %s %s (the model comes from the checkpoint: leave the flag out "
               "or give the checkpoint's value)", flag, value, c->im->path, name, saved);
}

static void compare_int(const check *c, const char *flag, int value, const char *name, int saved) {
    if (!given(c, flag) || value == saved) return;
    char a[32], b[32];
    snprintf(a, sizeof a, "%d", value);
    snprintf(b, sizeof b, "%d", saved);
    refuse(c, flag, a, name, b);
}

/* floats saved as doubles and read back as float: equal within float rounding */
static void compare_float(const check *c, const char *flag, float value, const char *name, float saved) {
    if (!given(c, flag) || fabsf(value - saved) <= 1e-6f * fmaxf(fabsf(value), fabsf(saved))) return;
    char a[32], b[32];
    snprintf(a, sizeof a, "%g", value);
    snprintf(b, sizeof b, "%g", saved);
    refuse(c, flag, a, name, b);
}

/* a switch given says the checkpoint has it on */
static void compare_switch(const check *c, const char *flag, const char *name, int saved_on, const char *saved) {
    if (!given(c, flag) || saved_on) return;
    user_error("--%s, but the checkpoint %s has %s %s (the model comes from the checkpoint: leave the flag out)",
               flag, c->im->path, name, saved);
}

static void compare_text(const check *c, const char *flag, const char *value, const char *name, const char *saved) {
    if (!given(c, flag) || !strcmp(value, saved)) return;
    refuse(c, flag, value, name, saved);
}

void model_flags_check(const option_table *table, const unsigned char *given_flags, const model_flags *f,
                       const inference_model *im) {
    check c = {table, given_flags, im};
    const gpt_config *m = &im->model.config;
    compare_int(&c, "num-layers", f->num_layers, "num_layers", m->num_layers);
    compare_int(&c, "hidden-size", f->hidden_size, "hidden_size", m->hidden_size);
    compare_int(&c, "num-attention-heads", f->num_attention_heads, "num_attention_heads", m->num_attention_heads);
    compare_int(&c, "kv-channels", f->kv_channels, "kv_channels", m->kv_channels);
    compare_int(&c, "ffn-hidden-size", f->ffn_hidden_size, "ffn_hidden_size", m->ffn_hidden_size);
    compare_int(&c, "max-position-embeddings", f->max_position_embeddings, "max_position_embeddings",
                m->max_position_embeddings);
    compare_int(&c, "vocab-size", f->vocab_size, "vocab_size", im->vocab_size);
    if (given(&c, "make-vocab-size-divisible-by") && m->padded_vocab_size % f->make_vocab_size_divisible_by != 0)
        user_error("--make-vocab-size-divisible-by %d, but the checkpoint %s has padded_vocab_size %d, not a multiple "
                   "of it", f->make_vocab_size_divisible_by, im->path, m->padded_vocab_size);
    /* Megatron's --num-query-groups counts only with --group-query-attention; given alone it
     * still says what the checkpoint should have */
    int groups = m->num_query_groups > 0 ? m->num_query_groups : m->num_attention_heads;
    if (given(&c, "group-query-attention") && f->num_query_groups != groups) {
        char a[64], b[32];
        snprintf(a, sizeof a, "with --num-query-groups %d", f->num_query_groups);
        snprintf(b, sizeof b, "%d", groups);
        refuse(&c, "group-query-attention", a, "num_query_groups", b);
    }
    compare_int(&c, "num-query-groups", f->num_query_groups, "num_query_groups", groups);
    compare_switch(&c, "swiglu", "swiglu", m->swiglu, "False");
    compare_switch(&c, "disable-bias-linear", "add_bias_linear", m->disable_bias_linear, "True");
    compare_switch(&c, "untie-embeddings-and-output-weights", "untie_embeddings_and_output_weights",
                   m->untie_embeddings_and_output_weights, "False");
    compare_switch(&c, "apply-layernorm-1p", "apply_layernorm_1p", m->apply_layernorm_1p, "False");
    compare_text(&c, "normalization", f->normalization, "normalization", m->rmsnorm ? "RMSNorm" : "LayerNorm");
    compare_int(&c, "num-experts", f->num_experts, "num_experts", m->num_experts);
    compare_int(&c, "moe-ffn-hidden-size", f->moe_ffn_hidden_size, "moe_ffn_hidden_size", m->moe_ffn_hidden_size);
    compare_int(&c, "moe-router-topk", f->moe_router_topk, "moe_router_topk", m->moe_router.topk);
    compare_int(&c, "moe-shared-expert-intermediate-size", f->moe_shared_expert_intermediate_size,
                "moe_shared_expert_intermediate_size", m->moe_shared_expert_intermediate_size);
    compare_switch(&c, "add-qkv-bias", "add_qkv_bias", m->add_qkv_bias, "False");
    compare_float(&c, "norm-epsilon", f->norm_epsilon, "layernorm_epsilon", m->layernorm_epsilon);
    compare_float(&c, "layernorm-epsilon", f->layernorm_epsilon, "layernorm_epsilon", m->layernorm_epsilon);
    const char *positions = m->position_embedding_type == POSITION_ROPE    ? "rope"
                            : m->position_embedding_type == POSITION_NONE ? "none"
                                                                          : "learned_absolute";
    int rope = m->position_embedding_type == POSITION_ROPE;
    compare_text(&c, "position-embedding-type", f->position_embedding_type, "position_embedding_type", positions);
    compare_switch(&c, "use-rotary-position-embeddings", "position_embedding_type", rope, positions);
    compare_switch(&c, "no-position-embedding", "position_embedding_type",
                   m->position_embedding_type != POSITION_LEARNED_ABSOLUTE, positions);
    if (rope) {  /* the rotary settings mean something only with rotary positions */
        compare_int(&c, "rotary-base", f->rotary_base, "rotary_base",
                    m->rotary_base > 0 ? (int)lrintf(m->rotary_base) : 10000);
        compare_float(&c, "rotary-percent", f->rotary_percent, "rotary_percent",
                      m->rotary_percent > 0 ? m->rotary_percent : 1.0f);
        compare_switch(&c, "use-rope-scaling", "use_rope_scaling", m->rope_scaling_factor > 0, "False");
        if (m->rope_scaling_factor > 0)
            compare_float(&c, "rope-scaling-factor", f->rope_scaling_factor, "rope_scaling_factor",
                          m->rope_scaling_factor);
    } else {
        const char *rotary[] = {"rotary-base", "rotary-percent", "use-rope-scaling", "rope-scaling-factor"};
        for (size_t i = 0; i < sizeof rotary / sizeof rotary[0]; i++)
            if (given(&c, rotary[i]))
                user_error("--%s, but the checkpoint %s has position_embedding_type %s (no rotary embeddings)",
                           rotary[i], im->path, positions);
    }
}

void model_flags_report(const option_table *table, const unsigned char *given_flags) {
    char names[1024];
    if (options_no_effect_given(table, given_flags, names, sizeof names) > 0)
        printf("> accepted with no effect here (see --help): %s\n", names);
}
