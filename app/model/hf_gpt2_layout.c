/* hf_gpt2_layout.c: the Hugging Face GPT-2 tensor list, derived from the GPT parameter table,
 * and the layout permutations of hf_gpt2_layout.h. */
#include "app/model/hf_gpt2_layout.h"

#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/gpt_parameter_table.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t hf_gpt2_qkv_column(int64_t row, int64_t heads, int64_t head_dim) {
    int64_t head = row / (3 * head_dim), part = row / head_dim % 3, d = row % head_dim;
    return part * heads * head_dim + head * head_dim + d;
}

/* a dimension as the int the model config holds; beyond `limit` is bad input */
static int config_dim(int64_t value, int64_t limit, const char *what) {
    if (value < 0 || value > limit) user_error("%s %lld is out of range (at most %lld)", what, (long long)value, (long long)limit);
    return (int)value;
}

/* the model config the parameter table expands for these dimensions (every shape, and the
 * tensor count, fits an int) */
static gpt_config config_of(const gpt2_dims *m, const parameter_table *table) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = config_dim(m->num_layers, INT_MAX / table->count - 1, "num_layers");
    c.hidden_size = config_dim(m->hidden, INT_MAX, "hidden_size");
    c.num_attention_heads = config_dim(m->heads, INT_MAX / 3, "num_attention_heads");
    c.kv_channels = config_dim(m->head_dim, INT_MAX / 3 / (m->heads ? m->heads : 1), "kv_channels");
    c.ffn_hidden_size = config_dim(m->ffn_hidden, INT_MAX, "ffn_hidden_size");
    c.padded_vocab_size = config_dim(m->padded_vocab, INT_MAX, "padded_vocab_size");
    c.max_position_embeddings = config_dim(m->positions, INT_MAX, "max_position_embeddings");
    c.untie_embeddings_and_output_weights = m->untied;
    return c;
}

hf_gpt2_tensor *hf_gpt2_tensor_list(const gpt2_dims *m, int *count) {
    const parameter_table *table = gpt_parameter_table();
    gpt_config c = config_of(m, table);
    int total = parameter_table_globals(table, &c, NULL);
    global_parameter *globals = calloc((size_t)total, sizeof *globals);
    hf_gpt2_tensor *list = calloc((size_t)total, sizeof *list);
    CHECK(globals && list, "out of memory");
    parameter_table_globals(table, &c, globals);
    for (int i = 0; i < total; i++) {
        const global_parameter *g = &globals[i];
        hf_gpt2_tensor *e = &list[i];
        snprintf(e->ours, sizeof e->ours, "%s", g->name);
        parameter_row_hf_name(table, g->row, g->layer, e->hf, sizeof e->hf);
        e->transform = g->row->hf_transform;
        e->ndim = g->cols ? 2 : 1;
        e->our_shape[0] = e->hf_shape[0] = g->rows;
        e->our_shape[1] = e->hf_shape[1] = g->cols;
        if (e->transform == HF_TRANSPOSE || e->transform == HF_QKV_WEIGHT) {
            e->hf_shape[0] = g->cols;
            e->hf_shape[1] = g->rows;
        }
        if (e->transform == HF_VOCAB_ROWS) e->hf_shape[0] = m->vocab;
    }
    free(globals);
    *count = total;
    return list;
}

int64_t hf_gpt2_our_elements(const hf_gpt2_tensor *t) {
    return t->ndim == 2 ? t->our_shape[0] * t->our_shape[1] : t->our_shape[0];
}
int64_t hf_gpt2_hf_elements(const hf_gpt2_tensor *t) {
    return t->ndim == 2 ? t->hf_shape[0] * t->hf_shape[1] : t->hf_shape[0];
}

/* out[j][i] = in[i][j] for in [rows, cols] */
static void transpose(const float *in, float *out, int64_t rows, int64_t cols) {
    enum { tile = 32 };
    for (int64_t i0 = 0; i0 < rows; i0 += tile)
        for (int64_t j0 = 0; j0 < cols; j0 += tile)
            for (int64_t i = i0; i < i0 + tile && i < rows; i++)
                for (int64_t j = j0; j < j0 + tile && j < cols; j++) out[j * rows + i] = in[i * cols + j];
}

void hf_gpt2_to_hf(const hf_gpt2_tensor *t, const gpt2_dims *m, const float *ours, float *hf) {
    const int64_t rows = t->our_shape[0], cols = t->our_shape[1];
    switch (t->transform) {
    case HF_COPY:
        memcpy(hf, ours, sizeof(float) * (size_t)hf_gpt2_our_elements(t));
        break;
    case HF_VOCAB_ROWS:
        memcpy(hf, ours, sizeof(float) * (size_t)hf_gpt2_hf_elements(t));
        break;
    case HF_TRANSPOSE:
        transpose(ours, hf, rows, cols);
        break;
    case HF_QKV_WEIGHT:  /* hf [C, 3HD]: hf[i][column(r)] = ours[r][i] */
        for (int64_t r = 0; r < rows; r++) {
            int64_t column = hf_gpt2_qkv_column(r, m->heads, m->head_dim);
            for (int64_t i = 0; i < cols; i++) hf[i * rows + column] = ours[r * cols + i];
        }
        break;
    case HF_QKV_BIAS:
        for (int64_t r = 0; r < rows; r++) hf[hf_gpt2_qkv_column(r, m->heads, m->head_dim)] = ours[r];
        break;
    }
}

void hf_gpt2_from_hf(const hf_gpt2_tensor *t, const gpt2_dims *m, const float *hf, float *ours) {
    const int64_t rows = t->our_shape[0], cols = t->our_shape[1];
    switch (t->transform) {
    case HF_COPY:
        memcpy(ours, hf, sizeof(float) * (size_t)hf_gpt2_our_elements(t));
        break;
    case HF_VOCAB_ROWS: {
        size_t kept = (size_t)hf_gpt2_hf_elements(t), all = (size_t)hf_gpt2_our_elements(t);
        memcpy(ours, hf, sizeof(float) * kept);
        memset(ours + kept, 0, sizeof(float) * (all - kept));
        break;
    }
    case HF_TRANSPOSE:
        transpose(hf, ours, t->hf_shape[0], t->hf_shape[1]);
        break;
    case HF_QKV_WEIGHT:
        for (int64_t r = 0; r < rows; r++) {
            int64_t column = hf_gpt2_qkv_column(r, m->heads, m->head_dim);
            for (int64_t i = 0; i < cols; i++) ours[r * cols + i] = hf[i * rows + column];
        }
        break;
    case HF_QKV_BIAS:
        for (int64_t r = 0; r < rows; r++) ours[r] = hf[hf_gpt2_qkv_column(r, m->heads, m->head_dim)];
        break;
    }
}
