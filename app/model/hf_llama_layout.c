/* hf_llama_layout.c: the Hugging Face LlamaForCausalLM (MixtralForCausalLM, Qwen2MoeForCausalLM) tensor list,
 * derived from the GPT parameter table for a Llama config, and the row permutations of
 * hf_llama_layout.h. */
#include "app/model/hf_llama_layout.h"

#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/gpt_parameter_table.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* our row name (what follows "decoder.layers.N." for layer rows) -> HF name(s) and transform;
 * HF layer names follow "model.layers.N."; a per-expert row's names hold the expert's index */
static const struct {
    const char *ours;
    llama_transform transform;
    const char *hf[HF_LLAMA_MAX_PARTS];
} llama_names[] = {
    {"embedding.word_embeddings.weight", LLAMA_VOCAB_ROWS, {"model.embed_tokens.weight"}},
    {"self_attention.linear_qkv.layer_norm_weight", LLAMA_NORM, {"input_layernorm.weight"}},
    {"self_attention.linear_qkv.weight", LLAMA_QKV,
     {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {"self_attention.linear_qkv.bias", LLAMA_QKV,
     {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}},
    {"self_attention.linear_proj.weight", LLAMA_COPY, {"self_attn.o_proj.weight"}},
    {"self_attention.linear_proj.bias", LLAMA_COPY, {"self_attn.o_proj.bias"}},
    {"mlp.linear_fc1.layer_norm_weight", LLAMA_NORM, {"post_attention_layernorm.weight"}},
    {"mlp.linear_fc1.weight", LLAMA_GATE_UP, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}},
    {"mlp.linear_fc1.bias", LLAMA_GATE_UP, {"mlp.gate_proj.bias", "mlp.up_proj.bias"}},
    {"mlp.linear_fc2.weight", LLAMA_COPY, {"mlp.down_proj.weight"}},
    {"mlp.linear_fc2.bias", LLAMA_COPY, {"mlp.down_proj.bias"}},
    /* Mixtral's sparse MoE block */
    {"pre_mlp_layernorm.weight", LLAMA_NORM, {"post_attention_layernorm.weight"}},
    {"mlp.router.weight", LLAMA_COPY, {"block_sparse_moe.gate.weight"}},
    {"mlp.experts.local_experts.%d.linear_fc1.weight", LLAMA_GATE_UP,
     {"block_sparse_moe.experts.%d.w1.weight", "block_sparse_moe.experts.%d.w3.weight"}},
    {"mlp.experts.local_experts.%d.linear_fc2.weight", LLAMA_COPY, {"block_sparse_moe.experts.%d.w2.weight"}},
    {"decoder.final_layernorm.weight", LLAMA_NORM, {"model.norm.weight"}},
    /* Qwen2-MoE's shared expert and its gate (its routed experts: qwen2_moe_names) */
    {"mlp.shared_experts.linear_fc1.weight", LLAMA_GATE_UP,
     {"mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"}},
    {"mlp.shared_experts.linear_fc2.weight", LLAMA_COPY, {"mlp.shared_expert.down_proj.weight"}},
    {"mlp.shared_experts.gate_weight", LLAMA_COPY, {"mlp.shared_expert_gate.weight"}},
    {"output_layer.weight", LLAMA_VOCAB_ROWS, {"lm_head.weight"}},
};

/* Qwen2MoeSparseMoeBlock's names for the router and routed experts (in place of Mixtral's) */
static const struct {
    const char *ours;
    llama_transform transform;
    const char *hf[HF_LLAMA_MAX_PARTS];
} qwen2_moe_names[] = {
    {"mlp.router.weight", LLAMA_COPY, {"mlp.gate.weight"}},
    {"mlp.experts.local_experts.%d.linear_fc1.weight", LLAMA_GATE_UP,
     {"mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight"}},
    {"mlp.experts.local_experts.%d.linear_fc2.weight", LLAMA_COPY, {"mlp.experts.%d.down_proj.weight"}},
};

static int config_dim(int64_t value, int64_t limit, const char *what) {
    if (value <= 0 || value > limit)
        user_error("%s %lld is out of range (1 to %lld)", what, (long long)value, (long long)limit);
    return (int)value;
}

/* the model config the parameter table expands for these dimensions */
static gpt_config config_of(const llama_dims *m, const parameter_table *table) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = config_dim(m->num_layers, INT_MAX / table->count - 1, "num_layers");
    c.hidden_size = config_dim(m->hidden, INT_MAX, "hidden_size");
    c.num_attention_heads = config_dim(m->heads, INT_MAX / 3, "num_attention_heads");
    c.num_query_groups = config_dim(m->groups, c.num_attention_heads, "num_query_groups");
    if (m->heads % m->groups)
        user_error("num_attention_heads %lld is not a multiple of num_query_groups %lld", (long long)m->heads,
                   (long long)m->groups);
    c.kv_channels = config_dim(m->head_dim, INT_MAX / 3 / m->heads, "kv_channels");
    c.ffn_hidden_size = config_dim(m->ffn_hidden, INT_MAX / 2, "ffn_hidden_size");
    c.padded_vocab_size = config_dim(m->padded_vocab, INT_MAX, "padded_vocab_size");
    c.max_position_embeddings = config_dim(m->positions, INT_MAX, "max_position_embeddings");
    c.untie_embeddings_and_output_weights = m->untied;
    c.position_embedding_type = POSITION_ROPE;
    c.rmsnorm = 1;
    c.swiglu = 1;
    c.disable_bias_linear = !m->bias;
    c.add_qkv_bias = m->qkv_bias;
    if (m->num_experts > 0) {  /* Mixtral: every layer a mixture of experts; Qwen2-MoE: moe_layer's */
        c.num_experts = config_dim(m->num_experts, INT_MAX / c.num_layers / table->count, "num_experts");
        c.moe_ffn_hidden_size = config_dim(m->moe_ffn_hidden, INT_MAX / 2, "moe_ffn_hidden_size");
        if (c.num_layers > GPT_MAX_MOE_LAYERS)
            user_error("num_layers %d: a mixture-of-experts model has at most %d layers here", c.num_layers,
                       GPT_MAX_MOE_LAYERS);
        if (m->moe_layer) memcpy(c.moe_layer, m->moe_layer, (size_t)c.num_layers);
        else memset(c.moe_layer, 1, (size_t)c.num_layers);
        if (m->shared_ffn_hidden > 0) {
            c.moe_shared_expert_intermediate_size = config_dim(m->shared_ffn_hidden, INT_MAX / 2,
                                                               "shared_expert_intermediate_size");
            c.moe_shared_expert_gate = 1;
        }
    }
    return c;
}

hf_llama_tensor *hf_llama_tensor_list(const llama_dims *m, int *count) {
    const parameter_table *table = gpt_parameter_table();
    gpt_config c = config_of(m, table);
    int total = parameter_table_globals(table, &c, NULL);
    global_parameter *globals = calloc((size_t)total, sizeof *globals);
    hf_llama_tensor *list = calloc((size_t)total, sizeof *list);
    CHECK(globals && list, "out of memory");
    parameter_table_globals(table, &c, globals);
    const size_t names = sizeof llama_names / sizeof llama_names[0];
    for (int i = 0; i < total; i++) {
        const global_parameter *g = &globals[i];
        hf_llama_tensor *e = &list[i];
        size_t n = 0, q = 0, qwen_names = sizeof qwen2_moe_names / sizeof qwen2_moe_names[0];
        while (m->qwen2_moe && q < qwen_names && strcmp(qwen2_moe_names[q].ours, g->row->name)) q++;
        const int qwen_row = m->qwen2_moe && q < qwen_names;
        while (n < names && strcmp(llama_names[n].ours, g->row->name)) n++;
        CHECK(qwen_row || n < names, "parameter %s has no Hugging Face Llama name", g->name);
        const char *const *hf_names = qwen_row ? qwen2_moe_names[q].hf : llama_names[n].hf;
        snprintf(e->ours, sizeof e->ours, "%s", g->name);
        e->transform = qwen_row ? qwen2_moe_names[q].transform : llama_names[n].transform;
        e->ndim = g->cols ? 2 : 1;
        e->our_shape[0] = g->rows;
        e->our_shape[1] = g->cols;
        e->parts = e->transform == LLAMA_QKV ? 3 : e->transform == LLAMA_GATE_UP ? 2 : 1;
        for (int p = 0; p < e->parts; p++) {
            char own[80];  /* the row's own HF name, an expert's index filled in */
            if (g->row->per_expert) snprintf(own, sizeof own, hf_names[p], g->expert);
            else snprintf(own, sizeof own, "%s", hf_names[p]);
            if (g->row->part == PART_LAYER)
                snprintf(e->hf[p], sizeof e->hf[p], "model.layers.%d.%s", g->layer, own);
            else
                snprintf(e->hf[p], sizeof e->hf[p], "%s", own);
            e->hf_shape[p][0] = g->rows;
            e->hf_shape[p][1] = g->cols;
        }
        if (e->transform == LLAMA_VOCAB_ROWS) e->hf_shape[0][0] = m->vocab;
        if (e->transform == LLAMA_GATE_UP) e->hf_shape[0][0] = e->hf_shape[1][0] = g->rows / 2;
        if (e->transform == LLAMA_QKV) {
            e->hf_shape[0][0] = m->heads * m->head_dim;
            e->hf_shape[1][0] = e->hf_shape[2][0] = m->groups * m->head_dim;
        }
    }
    free(globals);
    *count = total;
    return list;
}

int64_t hf_llama_our_elements(const hf_llama_tensor *t) {
    return t->ndim == 2 ? t->our_shape[0] * t->our_shape[1] : t->our_shape[0];
}
int64_t hf_llama_hf_elements(const hf_llama_tensor *t, int part) {
    return t->ndim == 2 ? t->hf_shape[part][0] * t->hf_shape[part][1] : t->hf_shape[part][0];
}

void hf_llama_qkv_row(int64_t row, const llama_dims *m, int *part, int64_t *hf_row) {
    const int64_t D = m->head_dim, per = m->heads / m->groups;
    const int64_t group = row / ((per + 2) * D), slot = row / D % (per + 2), d = row % D;
    if (slot < per) {
        *part = 0;
        *hf_row = (group * per + slot) * D + d;
    } else {
        *part = slot == per ? 1 : 2;
        *hf_row = group * D + d;
    }
}

void hf_rows_copy(float *ours, float *hf, size_t bytes, int to_hf) {
    if (to_hf) memcpy(hf, ours, bytes);
    else memcpy(ours, hf, bytes);
}

void hf_rows_norm(float *ours, float *hf, int64_t n, float shift, int to_hf) {
    for (int64_t i = 0; i < n; i++) {
        if (to_hf) hf[i] = ours[i] + shift;
        else ours[i] = hf[i] - shift;
    }
}

void hf_rows_vocab(float *ours, float *hf, size_t kept_bytes, size_t our_bytes, int to_hf) {
    hf_rows_copy(ours, hf, kept_bytes, to_hf);
    if (!to_hf) memset((char *)ours + kept_bytes, 0, our_bytes - kept_bytes);
}

void hf_rows_split(float *ours, float *const *hf, int parts, size_t part_bytes, int to_hf) {
    for (int p = 0; p < parts; p++)
        hf_rows_copy((float *)((char *)ours + (size_t)p * part_bytes), hf[p], part_bytes, to_hf);
}

/* to_hf 1: ours -> hf; 0: hf -> ours. Every transform moves whole rows of `width` elements. */
static void convert(const hf_llama_tensor *t, const llama_dims *m, float *ours, float *const *hf, int to_hf) {
    const int64_t rows = t->our_shape[0], width = t->ndim == 2 ? t->our_shape[1] : 1;
    const size_t row_bytes = sizeof(float) * (size_t)width;
    switch (t->transform) {
    case LLAMA_COPY:
        hf_rows_copy(ours, hf[0], row_bytes * (size_t)rows, to_hf);
        break;
    case LLAMA_NORM:
        hf_rows_norm(ours, hf[0], rows * width, m->layernorm_1p ? 1.0f : 0.0f, to_hf);
        break;
    case LLAMA_VOCAB_ROWS:
        hf_rows_vocab(ours, hf[0], row_bytes * (size_t)t->hf_shape[0][0], row_bytes * (size_t)rows, to_hf);
        break;
    case LLAMA_QKV:
        for (int64_t r = 0; r < rows; r++) {
            int part;
            int64_t hf_row;
            hf_llama_qkv_row(r, m, &part, &hf_row);
            if (to_hf) memcpy(hf[part] + hf_row * width, ours + r * width, row_bytes);
            else memcpy(ours + r * width, hf[part] + hf_row * width, row_bytes);
        }
        break;
    case LLAMA_GATE_UP:  /* the dense MLP's F rows each, or an expert's Fm */
        hf_rows_split(ours, hf, 2, row_bytes * (size_t)(rows / 2), to_hf);
        break;
    }
}

void hf_llama_to_hf(const hf_llama_tensor *t, const llama_dims *m, const float *ours, float *const *hf) {
    convert(t, m, (float *)ours, hf, 1);
}

void hf_llama_from_hf(const hf_llama_tensor *t, const llama_dims *m, const float *const *hf, float *ours) {
    convert(t, m, ours, (float *const *)hf, 0);
}
