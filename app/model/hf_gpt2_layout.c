/* hf_gpt2_layout.c: the parameter table and the layout permutations of hf_gpt2_layout.h. */
#include "app/model/hf_gpt2_layout.h"

#include "app/core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t hf_gpt2_qkv_column(int64_t row, int64_t heads, int64_t head_dim) {
    int64_t head = row / (3 * head_dim), part = row / head_dim % 3, d = row % head_dim;
    return part * heads * head_dim + head * head_dim + d;
}

typedef struct table { hf_gpt2_tensor *tensors; int count; } table;

static void add(table *t, hf_transform transform, int64_t rows, int64_t cols, const char *hf,
                const char *ours_format, ...) __attribute__((format(printf, 6, 7)));
static void add(table *t, hf_transform transform, int64_t rows, int64_t cols, const char *hf,
                const char *ours_format, ...) {
    hf_gpt2_tensor *e = &t->tensors[t->count++];
    memset(e, 0, sizeof *e);
    va_list ap;
    va_start(ap, ours_format);
    vsnprintf(e->ours, sizeof e->ours, ours_format, ap);
    va_end(ap);
    snprintf(e->hf, sizeof e->hf, "%s", hf);
    e->transform = transform;
    e->ndim = cols ? 2 : 1;
    e->our_shape[0] = rows;
    e->our_shape[1] = cols;
    e->hf_shape[0] = rows;
    e->hf_shape[1] = cols;
    if (transform == HF_TRANSPOSE || transform == HF_QKV_WEIGHT) {
        e->hf_shape[0] = cols;
        e->hf_shape[1] = rows;
    }
}

hf_gpt2_tensor *hf_gpt2_tensor_list(const gpt2_dims *m, int *count) {
    table t = {calloc((size_t)(16 * m->num_layers + 8), sizeof(hf_gpt2_tensor)), 0};
    CHECK(t.tensors, "out of memory");
    const int64_t C = m->hidden, HD = m->heads * m->head_dim, F = m->ffn_hidden;
    char hf[96];
    add(&t, HF_VOCAB_ROWS, m->padded_vocab, C, "transformer.wte.weight",
        "embedding.word_embeddings.weight");
    t.tensors[t.count - 1].hf_shape[0] = m->vocab;
    add(&t, HF_COPY, m->positions, C, "transformer.wpe.weight", "embedding.position_embeddings.weight");
    for (int64_t l = 0; l < m->num_layers; l++) {
        const char *p = "decoder.layers";
        long long L = (long long)l;
#define HF(suffix) (snprintf(hf, sizeof hf, "transformer.h.%lld.%s", L, suffix), hf)
        add(&t, HF_COPY, C, 0, HF("ln_1.weight"), "%s.%lld.input_layernorm.weight", p, L);
        add(&t, HF_COPY, C, 0, HF("ln_1.bias"), "%s.%lld.input_layernorm.bias", p, L);
        add(&t, HF_QKV_WEIGHT, 3 * HD, C, HF("attn.c_attn.weight"),
            "%s.%lld.self_attention.linear_qkv.weight", p, L);
        add(&t, HF_QKV_BIAS, 3 * HD, 0, HF("attn.c_attn.bias"),
            "%s.%lld.self_attention.linear_qkv.bias", p, L);
        add(&t, HF_TRANSPOSE, C, HD, HF("attn.c_proj.weight"),
            "%s.%lld.self_attention.linear_proj.weight", p, L);
        add(&t, HF_COPY, C, 0, HF("attn.c_proj.bias"), "%s.%lld.self_attention.linear_proj.bias", p, L);
        add(&t, HF_COPY, C, 0, HF("ln_2.weight"), "%s.%lld.pre_mlp_layernorm.weight", p, L);
        add(&t, HF_COPY, C, 0, HF("ln_2.bias"), "%s.%lld.pre_mlp_layernorm.bias", p, L);
        add(&t, HF_TRANSPOSE, F, C, HF("mlp.c_fc.weight"), "%s.%lld.mlp.linear_fc1.weight", p, L);
        add(&t, HF_COPY, F, 0, HF("mlp.c_fc.bias"), "%s.%lld.mlp.linear_fc1.bias", p, L);
        add(&t, HF_TRANSPOSE, C, F, HF("mlp.c_proj.weight"), "%s.%lld.mlp.linear_fc2.weight", p, L);
        add(&t, HF_COPY, C, 0, HF("mlp.c_proj.bias"), "%s.%lld.mlp.linear_fc2.bias", p, L);
#undef HF
    }
    add(&t, HF_COPY, C, 0, "transformer.ln_f.weight", "decoder.final_layernorm.weight");
    add(&t, HF_COPY, C, 0, "transformer.ln_f.bias", "decoder.final_layernorm.bias");
    if (m->untied) {
        add(&t, HF_VOCAB_ROWS, m->padded_vocab, C, "lm_head.weight", "output_layer.weight");
        t.tensors[t.count - 1].hf_shape[0] = m->vocab;
    }
    *count = t.count;
    return t.tensors;
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
