/* hf_t5_layout.c: the Hugging Face T5ForConditionalGeneration tensor list, derived from the GPT
 * parameter table for a T5 config, and the row permutations of hf_t5_layout.h. */
#include "app/model/hf_t5_layout.h"

#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/gpt_parameter_table.h"
#include "app/model/hf_llama_layout.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* our row name -> HF name(s) after "<stack>.block.N." (layer rows; "%d" is the MLP's sublayer:
 * 1 in the encoder, 2 in the decoder) or the whole HF name (the others) */
static const struct {
    const char *ours;
    t5_transform transform;
    const char *hf[HF_T5_MAX_PARTS];
} t5_names[] = {
    {"embedding.word_embeddings.weight", T5_VOCAB_ROWS, {"shared.weight"}},
    {"encoder_relative_pos_emb.relative_attention_bias.weight", T5_COPY,
     {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}},
    {"decoder_relative_pos_emb.relative_attention_bias.weight", T5_COPY,
     {"decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}},
    {"self_attention.linear_qkv.layer_norm_weight", T5_NORM, {"layer.0.layer_norm.weight"}},
    {"self_attention.linear_qkv.weight", T5_QKV,
     {"layer.0.SelfAttention.q.weight", "layer.0.SelfAttention.k.weight", "layer.0.SelfAttention.v.weight"}},
    {"self_attention.linear_proj.weight", T5_COPY, {"layer.0.SelfAttention.o.weight"}},
    {"pre_cross_attn_layernorm.weight", T5_NORM, {"layer.1.layer_norm.weight"}},
    {"cross_attention.linear_q.weight", T5_CROSS_Q, {"layer.1.EncDecAttention.q.weight"}},
    {"cross_attention.linear_kv.weight", T5_CROSS_KV, {"layer.1.EncDecAttention.k.weight", "layer.1.EncDecAttention.v.weight"}},
    {"cross_attention.linear_proj.weight", T5_COPY, {"layer.1.EncDecAttention.o.weight"}},
    {"mlp.linear_fc1.layer_norm_weight", T5_NORM, {"layer.%d.layer_norm.weight"}},
    {"mlp.linear_fc1.weight", T5_GATE_UP, {"layer.%d.DenseReluDense.wi_0.weight", "layer.%d.DenseReluDense.wi_1.weight"}},
    {"mlp.linear_fc2.weight", T5_COPY, {"layer.%d.DenseReluDense.wo.weight"}},
    {"encoder.final_layernorm.weight", T5_NORM, {"encoder.final_layer_norm.weight"}},
    {"decoder.final_layernorm.weight", T5_NORM, {"decoder.final_layer_norm.weight"}},
    {"output_layer.weight", T5_VOCAB_ROWS, {"lm_head.weight"}},
};

static int config_dim(int64_t value, int64_t limit, const char *what) {
    if (value <= 0 || value > limit)
        user_error("%s %lld is out of range (1 to %lld)", what, (long long)value, (long long)limit);
    return (int)value;
}

/* the model config the parameter table expands for these dimensions */
static gpt_config config_of(const t5_dims *d, const parameter_table *table) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.t5 = 1;
    c.t5_encoder_layers = config_dim(d->encoder_layers, INT_MAX / 2 / table->count - 1, "encoder layers");
    c.num_layers = c.t5_encoder_layers + config_dim(d->decoder_layers, INT_MAX / 2 / table->count - 1, "decoder layers");
    c.hidden_size = config_dim(d->hidden, INT_MAX, "d_model (hidden_size)");
    c.num_attention_heads = config_dim(d->heads, INT_MAX / 3, "num_heads");
    c.kv_channels = config_dim(d->head_dim, INT_MAX / 3 / d->heads, "d_kv (kv_channels)");
    c.ffn_hidden_size = config_dim(d->ffn_hidden, INT_MAX / 2, "d_ff (ffn_hidden_size)");
    c.padded_vocab_size = config_dim(d->padded_vocab, INT_MAX, "vocab_size");
    c.relative_attention_num_buckets = config_dim(d->buckets, INT_MAX / d->heads, "relative_attention_num_buckets");
    c.max_position_embeddings = 1;
    c.position_embedding_type = POSITION_RELATIVE;
    c.rmsnorm = 1;
    c.swiglu = d->gated;
    c.disable_bias_linear = 1;
    c.untie_embeddings_and_output_weights = 1;
    return c;
}

hf_t5_tensor *hf_t5_tensor_list(const t5_dims *d, int *count) {
    const parameter_table *table = gpt_parameter_table();
    gpt_config c = config_of(d, table);
    int total = parameter_table_globals(table, &c, NULL);
    global_parameter *globals = calloc((size_t)total, sizeof *globals);
    hf_t5_tensor *list = calloc((size_t)total, sizeof *list);
    CHECK(globals && list, "out of memory");
    parameter_table_globals(table, &c, globals);
    const size_t names = sizeof t5_names / sizeof t5_names[0];
    for (int i = 0; i < total; i++) {
        const global_parameter *g = &globals[i];
        hf_t5_tensor *e = &list[i];
        size_t n = 0;
        while (n < names && strcmp(t5_names[n].ours, g->row->name)) n++;
        CHECK(n < names, "parameter %s has no Hugging Face T5 name", g->name);
        snprintf(e->ours, sizeof e->ours, "%s", g->name);
        e->transform = t5_names[n].transform;
        e->ndim = g->cols ? 2 : 1;
        e->our_shape[0] = g->rows;
        e->our_shape[1] = g->cols;
        e->parts = e->transform == T5_QKV ? 3 : e->transform == T5_CROSS_KV || e->transform == T5_GATE_UP ? 2 : 1;
        if (e->transform == T5_GATE_UP && !d->gated) e->parts = 1;  /* GeLU: wi alone */
        const int decoder = g->row->part == PART_LAYER && g->layer >= c.t5_encoder_layers;
        for (int p = 0; p < e->parts; p++) {
            char own[80];
            const char *pattern = e->transform == T5_GATE_UP && !d->gated ? "layer.%d.DenseReluDense.wi.weight" : t5_names[n].hf[p];
            snprintf(own, sizeof own, pattern, decoder ? 2 : 1);
            if (g->row->part == PART_LAYER)
                snprintf(e->hf[p], sizeof e->hf[p], "%s.block.%d.%s", decoder ? "decoder" : "encoder",
                         decoder ? g->layer - c.t5_encoder_layers : g->layer, own);
            else
                snprintf(e->hf[p], sizeof e->hf[p], "%s", own);
            e->hf_shape[p][0] = g->rows / e->parts;
            e->hf_shape[p][1] = g->cols;
        }
        if (e->transform == T5_VOCAB_ROWS) e->hf_shape[0][0] = d->vocab;
    }
    free(globals);
    *count = total;
    return list;
}

int64_t hf_t5_our_elements(const hf_t5_tensor *t) {
    return t->ndim == 2 ? t->our_shape[0] * t->our_shape[1] : t->our_shape[0];
}
int64_t hf_t5_hf_elements(const hf_t5_tensor *t, int part) {
    return t->ndim == 2 ? t->hf_shape[part][0] * t->hf_shape[part][1] : t->hf_shape[part][0];
}

/* where row r of a per-head interleaved tensor (parts blocks of D rows per head) goes */
static void head_row(int64_t r, int64_t D, int parts, int *part, int64_t *hf_row) {
    const int64_t head = r / (parts * D);
    *part = (int)(r / D % parts);
    *hf_row = head * D + r % D;
}

/* to_hf 1: ours -> hf; 0: hf -> ours. Every transform moves whole rows of `width` elements; the
 * query rows are divided by sqrt(D) on the way to HF and multiplied back on the way in. */
static void convert(const hf_t5_tensor *t, const t5_dims *d, float *ours, float *const *hf, int to_hf) {
    const int64_t rows = t->our_shape[0], width = t->ndim == 2 ? t->our_shape[1] : 1;
    const size_t row_bytes = sizeof(float) * (size_t)width;
    const float scale = (float)sqrt((double)d->head_dim);
    switch (t->transform) {
    case T5_COPY:
        hf_rows_copy(ours, hf[0], row_bytes * (size_t)rows, to_hf);
        break;
    case T5_NORM:
        hf_rows_norm(ours, hf[0], rows * width, d->layernorm_1p ? 1.0f : 0.0f, to_hf);
        break;
    case T5_VOCAB_ROWS:
        hf_rows_vocab(ours, hf[0], row_bytes * (size_t)t->hf_shape[0][0], row_bytes * (size_t)rows, to_hf);
        break;
    case T5_CROSS_Q:
        for (int64_t i = 0; i < rows * width; i++) {
            if (to_hf) hf[0][i] = ours[i] / scale;
            else ours[i] = hf[0][i] * scale;
        }
        break;
    case T5_QKV:
    case T5_CROSS_KV:
        for (int64_t r = 0; r < rows; r++) {
            int part;
            int64_t hf_row;
            head_row(r, d->head_dim, t->parts, &part, &hf_row);
            float *o = ours + r * width, *h = hf[part] + hf_row * width;
            const int query = t->transform == T5_QKV && part == 0;
            for (int64_t k = 0; k < width; k++) {
                if (to_hf) h[k] = query ? o[k] / scale : o[k];
                else o[k] = query ? h[k] * scale : h[k];
            }
        }
        break;
    case T5_GATE_UP:  /* [gate; up] halves, or wi whole */
        hf_rows_split(ours, hf, t->parts, row_bytes * (size_t)(rows / t->parts), to_hf);
        break;
    }
}

void hf_t5_to_hf(const hf_t5_tensor *t, const t5_dims *d, const float *ours, float *const *hf) {
    convert(t, d, (float *)ours, hf, 1);
}

void hf_t5_from_hf(const hf_t5_tensor *t, const t5_dims *d, const float *const *hf, float *ours) {
    convert(t, d, ours, (float *const *)hf, 0);
}
