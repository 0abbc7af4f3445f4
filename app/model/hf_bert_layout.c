/* hf_bert_layout.c: the Hugging Face MegatronBertForPreTraining (MegatronBertForMaskedLM) tensor
 * list, derived from the GPT parameter table in encoder mode (see hf_bert_layout.h). */
#include "app/model/hf_bert_layout.h"

#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/gpt_parameter_table.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* our row name (what follows "encoder.layers.N." for layer rows) -> HF name(s) and transform;
 * HF layer names follow "bert.encoder.layer.N." */
static const struct {
    const char *ours;
    llama_transform transform;
    const char *hf[3];
} bert_names[] = {
    {"embedding.word_embeddings.weight", LLAMA_VOCAB_ROWS, {"bert.embeddings.word_embeddings.weight"}},
    {"embedding.position_embeddings.weight", LLAMA_COPY, {"bert.embeddings.position_embeddings.weight"}},
    {"embedding.tokentype_embeddings.weight", LLAMA_COPY, {"bert.embeddings.token_type_embeddings.weight"}},
    {"input_layernorm.weight", LLAMA_COPY, {"attention.ln.weight"}},
    {"input_layernorm.bias", LLAMA_COPY, {"attention.ln.bias"}},
    {"self_attention.linear_qkv.weight", LLAMA_QKV,
     {"attention.self.query.weight", "attention.self.key.weight", "attention.self.value.weight"}},
    {"self_attention.linear_qkv.bias", LLAMA_QKV,
     {"attention.self.query.bias", "attention.self.key.bias", "attention.self.value.bias"}},
    {"self_attention.linear_proj.weight", LLAMA_COPY, {"attention.output.dense.weight"}},
    {"self_attention.linear_proj.bias", LLAMA_COPY, {"attention.output.dense.bias"}},
    {"pre_mlp_layernorm.weight", LLAMA_COPY, {"ln.weight"}},
    {"pre_mlp_layernorm.bias", LLAMA_COPY, {"ln.bias"}},
    {"mlp.linear_fc1.weight", LLAMA_COPY, {"intermediate.dense.weight"}},
    {"mlp.linear_fc1.bias", LLAMA_COPY, {"intermediate.dense.bias"}},
    {"mlp.linear_fc2.weight", LLAMA_COPY, {"output.dense.weight"}},
    {"mlp.linear_fc2.bias", LLAMA_COPY, {"output.dense.bias"}},
    {"decoder.final_layernorm.weight", LLAMA_COPY, {"bert.encoder.ln.weight"}},
    {"decoder.final_layernorm.bias", LLAMA_COPY, {"bert.encoder.ln.bias"}},
    {"output_layer.weight", LLAMA_VOCAB_ROWS, {"cls.predictions.decoder.weight"}},
    {"lm_head.dense.weight", LLAMA_COPY, {"cls.predictions.transform.dense.weight"}},
    {"lm_head.dense.bias", LLAMA_COPY, {"cls.predictions.transform.dense.bias"}},
    {"lm_head.layer_norm.weight", LLAMA_COPY, {"cls.predictions.transform.LayerNorm.weight"}},
    {"lm_head.layer_norm.bias", LLAMA_COPY, {"cls.predictions.transform.LayerNorm.bias"}},
    {"output_layer.bias", LLAMA_VOCAB_ROWS, {"cls.predictions.bias"}},
    {"pooler.dense.weight", LLAMA_COPY, {"bert.pooler.dense.weight"}},
    {"pooler.dense.bias", LLAMA_COPY, {"bert.pooler.dense.bias"}},
    {"binary_head.weight", LLAMA_COPY, {"cls.seq_relationship.weight"}},
    {"binary_head.bias", LLAMA_COPY, {"cls.seq_relationship.bias"}},
};

static int config_dim(int64_t value, int64_t limit, const char *what) {
    if (value <= 0 || value > limit)
        user_error("%s %lld is out of range (1 to %lld)", what, (long long)value, (long long)limit);
    return (int)value;
}

/* the encoder-mode config the parameter table expands for these dimensions */
static gpt_config config_of(const bert_dims *m, const parameter_table *table) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = config_dim(m->num_layers, INT_MAX / table->count - 1, "num_layers");
    c.hidden_size = config_dim(m->hidden, INT_MAX, "hidden_size");
    c.num_attention_heads = config_dim(m->heads, INT_MAX / 3, "num_attention_heads");
    c.num_query_groups = c.num_attention_heads;
    c.kv_channels = config_dim(m->head_dim, INT_MAX / 3 / m->heads, "kv_channels");
    c.ffn_hidden_size = config_dim(m->ffn_hidden, INT_MAX, "ffn_hidden_size");
    c.padded_vocab_size = config_dim(m->padded_vocab, INT_MAX, "padded_vocab_size");
    c.max_position_embeddings = config_dim(m->positions, INT_MAX, "max_position_embeddings");
    c.untie_embeddings_and_output_weights = m->untied;
    c.position_embedding_type = POSITION_LEARNED_ABSOLUTE;
    c.bert = 1;
    c.bert_binary_head = m->binary_head;
    return c;
}

llama_dims bert_llama_dims(const bert_dims *m) {
    llama_dims l;
    memset(&l, 0, sizeof l);
    l.num_layers = m->num_layers;
    l.hidden = m->hidden;
    l.heads = l.groups = m->heads;
    l.head_dim = m->head_dim;
    l.ffn_hidden = m->ffn_hidden;
    l.positions = m->positions;
    l.vocab = m->vocab;
    l.padded_vocab = m->padded_vocab;
    l.untied = m->untied;
    l.bias = 1;
    return l;
}

hf_llama_tensor *hf_bert_tensor_list(const bert_dims *m, int *count) {
    const parameter_table *table = gpt_parameter_table();
    gpt_config c = config_of(m, table);
    int total = parameter_table_globals(table, &c, NULL);
    global_parameter *globals = calloc((size_t)total, sizeof *globals);
    hf_llama_tensor *list = calloc((size_t)total + 1, sizeof *list);
    CHECK(globals && list, "out of memory");
    parameter_table_globals(table, &c, globals);
    const size_t names = sizeof bert_names / sizeof bert_names[0];
    for (int i = 0; i < total; i++) {
        const global_parameter *g = &globals[i];
        hf_llama_tensor *e = &list[i];
        size_t n = 0;
        while (n < names && strcmp(bert_names[n].ours, g->row->name)) n++;
        CHECK(n < names, "parameter %s has no Hugging Face MegatronBert name", g->name);
        snprintf(e->ours, sizeof e->ours, "%s", g->name);
        e->transform = bert_names[n].transform;
        e->ndim = g->cols ? 2 : 1;
        e->our_shape[0] = g->rows;
        e->our_shape[1] = g->cols;
        e->parts = e->transform == LLAMA_QKV ? 3 : 1;
        for (int p = 0; p < e->parts; p++) {
            if (g->row->part == PART_LAYER)
                snprintf(e->hf[p], sizeof e->hf[p], "bert.encoder.layer.%d.%s", g->layer, bert_names[n].hf[p]);
            else
                snprintf(e->hf[p], sizeof e->hf[p], "%s", bert_names[n].hf[p]);
            e->hf_shape[p][0] = e->transform == LLAMA_QKV ? g->rows / 3 : g->rows;
            e->hf_shape[p][1] = g->cols;
        }
        if (e->transform == LLAMA_VOCAB_ROWS) e->hf_shape[0][0] = m->vocab;
    }
    free(globals);
    if (!m->binary_head) {  /* MegatronBertForMaskedLM's token types: zeros */
        hf_llama_tensor *e = &list[total++];
        e->transform = LLAMA_COPY;
        e->ndim = 2;
        e->parts = 1;
        snprintf(e->hf[0], sizeof e->hf[0], "%s", HF_BERT_ZERO_TOKEN_TYPES);
        e->hf_shape[0][0] = e->our_shape[0] = 2;
        e->hf_shape[0][1] = e->our_shape[1] = m->hidden;
    }
    *count = total;
    return list;
}
