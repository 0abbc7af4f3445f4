/* parameter_table_test.c: what derives from the GPT parameter table matches what it replaced.
 * 1. The global list of a 2-layer model, tied and untied: Megatron names, shapes, splits and
 *    initialization, in order, written out here independently of the table.
 * 2. Counts per part, and each chunk's parameters run embedding, layers, final part.
 * 3. Every model_view and layer_view field (weights and gradients) points at the parameter of
 *    its name, for single-stage, pipeline (tied-embedding copy included), interleaved and
 *    tensor-parallel layouts.
 * 4. Per-rank flags: no weight decay exactly for vectors; with --sequence-parallel a partial
 *    gradient exactly for replicated tensors other than the position embeddings.
 * 5. The Hugging Face list: one entry per global tensor, GPT-2 names, shapes and transforms. */
#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/gpt_parameter_table.h"
#include "app/model/hf_gpt2_layout.h"
#include "app/parallel/comm.h"
#include "tests/tap.h"

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dimensions all different, so that a row naming the wrong one is caught */
enum { LAYERS = 2, HIDDEN = 8, HEADS = 2, HEAD_DIM = 3, FFN = 12, VOCAB = 16, POSITIONS = 10,
       TOKENIZER_VOCAB = 13 };

static gpt_config small_config(int untie) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = LAYERS;
    c.hidden_size = HIDDEN;
    c.num_attention_heads = HEADS;
    c.kv_channels = HEAD_DIM;
    c.ffn_hidden_size = FFN;
    c.padded_vocab_size = VOCAB;
    c.max_position_embeddings = POSITIONS;
    c.seq_length = 4;
    c.micro_batch_size = 2;
    c.layernorm_epsilon = 1e-5f;
    c.init_method_std = 0.02f;
    c.untie_embeddings_and_output_weights = untie;
    c.seed = 3;
    return c;
}

/* one expected tensor: Megatron name (layer tensors: the suffix), global shape, split, init,
 * Hugging Face name (layer tensors: the suffix), HF shape, transform */
typedef struct expected_tensor {
    const char *name;
    int rows, cols;
    shard_dim split;
    init_kind init;
    const char *hf;
    int hf_rows, hf_cols;
    hf_transform transform;
} expected_tensor;

enum { QKV = 3 * HEADS * HEAD_DIM, ATTENTION = HEADS * HEAD_DIM };

static const expected_tensor embedding[] = {
    {"embedding.word_embeddings.weight", VOCAB, HIDDEN, SHARD_ROWS, INIT_NORMAL,
     "transformer.wte.weight", TOKENIZER_VOCAB, HIDDEN, HF_VOCAB_ROWS},
    {"embedding.position_embeddings.weight", POSITIONS, HIDDEN, SHARD_NONE, INIT_NORMAL,
     "transformer.wpe.weight", POSITIONS, HIDDEN, HF_COPY},
};
static const expected_tensor layer[] = {
    {"input_layernorm.weight", HIDDEN, 0, SHARD_NONE, INIT_ONES, "ln_1.weight", HIDDEN, 0, HF_COPY},
    {"input_layernorm.bias", HIDDEN, 0, SHARD_NONE, INIT_ZEROS, "ln_1.bias", HIDDEN, 0, HF_COPY},
    {"self_attention.linear_qkv.weight", QKV, HIDDEN, SHARD_ROWS, INIT_NORMAL, "attn.c_attn.weight", HIDDEN, QKV, HF_QKV_WEIGHT},
    {"self_attention.linear_qkv.bias", QKV, 0, SHARD_ROWS, INIT_ZEROS, "attn.c_attn.bias", QKV, 0, HF_QKV_BIAS},
    {"self_attention.linear_proj.weight", HIDDEN, ATTENTION, SHARD_COLS, INIT_SCALED_NORMAL, "attn.c_proj.weight", ATTENTION, HIDDEN, HF_TRANSPOSE},
    {"self_attention.linear_proj.bias", HIDDEN, 0, SHARD_NONE, INIT_ZEROS, "attn.c_proj.bias", HIDDEN, 0, HF_COPY},
    {"pre_mlp_layernorm.weight", HIDDEN, 0, SHARD_NONE, INIT_ONES, "ln_2.weight", HIDDEN, 0, HF_COPY},
    {"pre_mlp_layernorm.bias", HIDDEN, 0, SHARD_NONE, INIT_ZEROS, "ln_2.bias", HIDDEN, 0, HF_COPY},
    {"mlp.linear_fc1.weight", FFN, HIDDEN, SHARD_ROWS, INIT_NORMAL, "mlp.c_fc.weight", HIDDEN, FFN, HF_TRANSPOSE},
    {"mlp.linear_fc1.bias", FFN, 0, SHARD_ROWS, INIT_ZEROS, "mlp.c_fc.bias", FFN, 0, HF_COPY},
    {"mlp.linear_fc2.weight", HIDDEN, FFN, SHARD_COLS, INIT_SCALED_NORMAL, "mlp.c_proj.weight", FFN, HIDDEN, HF_TRANSPOSE},
    {"mlp.linear_fc2.bias", HIDDEN, 0, SHARD_NONE, INIT_ZEROS, "mlp.c_proj.bias", HIDDEN, 0, HF_COPY},
};
static const expected_tensor final_part[] = {
    {"decoder.final_layernorm.weight", HIDDEN, 0, SHARD_NONE, INIT_ONES, "transformer.ln_f.weight", HIDDEN, 0, HF_COPY},
    {"decoder.final_layernorm.bias", HIDDEN, 0, SHARD_NONE, INIT_ZEROS, "transformer.ln_f.bias", HIDDEN, 0, HF_COPY},
    {"output_layer.weight", VOCAB, HIDDEN, SHARD_ROWS, INIT_NORMAL, "lm_head.weight", TOKENIZER_VOCAB, HIDDEN, HF_VOCAB_ROWS},
};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* the whole model's expected tensors in order, names completed; returns the count */
static int expected_list(int untie, expected_tensor *out, char names[][2][PARAM_NAME_MAX]) {
    int n = 0;
    for (int i = 0; i < COUNT(embedding); i++) out[n++] = embedding[i];
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < COUNT(layer); i++) {
            out[n] = layer[i];
            snprintf(names[n][0], PARAM_NAME_MAX, "decoder.layers.%d.%s", l, layer[i].name);
            snprintf(names[n][1], PARAM_NAME_MAX, "transformer.h.%d.%s", l, layer[i].hf);
            out[n].name = names[n][0];
            out[n].hf = names[n][1];
            n++;
        }
    for (int i = 0; i < COUNT(final_part) - !untie; i++) out[n++] = final_part[i];
    return n;
}

enum { MAX_TENSORS = 64 };

static void check_global_list(int untie) {
    gpt_config c = small_config(untie);
    expected_tensor want[MAX_TENSORS];
    char names[MAX_TENSORS][2][PARAM_NAME_MAX];
    int expected = expected_list(untie, want, names);
    global_parameter got[MAX_TENSORS];
    int count = gpt_global_parameters(&c, NULL);
    int filled = count <= MAX_TENSORS ? gpt_global_parameters(&c, got) : 0;
    int bad = 0;
    for (int i = 0; i < expected && i < filled; i++) {
        const global_parameter *g = &got[i];
        int layer_of = i < COUNT(embedding) ? -1 : i < COUNT(embedding) + LAYERS * COUNT(layer)
                     ? (i - COUNT(embedding)) / COUNT(layer) : LAYERS;
        if (strcmp(g->name, want[i].name) || g->rows != want[i].rows || g->cols != want[i].cols ||
            g->split != want[i].split || g->init != want[i].init || g->layer != layer_of || !g->row) {
            bad++;
            tap_diag("global %d: got %s [%d, %d] split %d init %d layer %d, want %s [%d, %d] split %d init %d layer %d",
                     i, g->name, g->rows, g->cols, g->split, g->init, g->layer, want[i].name, want[i].rows,
                     want[i].cols, want[i].split, want[i].init, layer_of);
        }
    }
    tap_ok(count == expected && filled == count && bad == 0,
           "global list of a 2-layer %s model from the table: %d tensors (want %d), Megatron names, shapes, splits, init and layer in order",
           untie ? "untied" : "tied", count, expected);
}

static void check_part_counts(void) {
    const parameter_table *t = gpt_parameter_table();
    gpt_config tied = small_config(0), untied = small_config(1);
    int embedding_count = parameter_table_part_count(t, PART_EMBEDDING, &tied, -1);
    int layer_count = parameter_table_part_count(t, PART_LAYER, &tied, 0);
    int final_tied = parameter_table_part_count(t, PART_FINAL, &tied, -1);
    int final_untied = parameter_table_part_count(t, PART_FINAL, &untied, -1);
    tap_ok(embedding_count == COUNT(embedding) && layer_count == COUNT(layer) && final_tied == 2 &&
           final_untied == 3, "tensors per part: embedding %d, layer %d, final %d tied / %d untied",
           embedding_count, layer_count, final_tied, final_untied);
}

/* ------------------------------------------------------------------ views of real layouts */

static comm_group self_group;

/* the parameter of this chunk with that name (the tied copy when `copy`), or NULL */
static const param_tensor *find(const gpt_model *m, const model_chunk *ch, const char *name, int copy) {
    for (int i = ch->first_param; i < ch->first_param + ch->num_params; i++)
        if (!strcmp(m->params[i].name, name) && m->params[i].embedding_copy == copy) return &m->params[i];
    return NULL;
}

/* 1 when `pointer` is where the named parameter sits in buffer */
static int points_at(const gpt_model *m, const model_chunk *ch, const void *pointer, const char *name,
                     int copy, const char *buffer, size_t element_bytes) {
    const param_tensor *p = find(m, ch, name, copy);
    return p && pointer == buffer + element_bytes * p->offset;
}

#define LAYER_FIELD(f) {offsetof(layer_view, f), #f}
static const struct { size_t offset; const char *field; } layer_fields[] = {
    LAYER_FIELD(input_layernorm_weight), LAYER_FIELD(input_layernorm_bias), LAYER_FIELD(qkv_weight),
    LAYER_FIELD(qkv_bias), LAYER_FIELD(proj_weight), LAYER_FIELD(proj_bias),
    LAYER_FIELD(pre_mlp_layernorm_weight), LAYER_FIELD(pre_mlp_layernorm_bias), LAYER_FIELD(fc1_weight),
    LAYER_FIELD(fc1_bias), LAYER_FIELD(fc2_weight), LAYER_FIELD(fc2_bias),
};

/* every field of one view (weights or gradients) of every chunk; returns mismatches */
static int check_view(const gpt_model *m, int grads) {
    const char *buffer = grads ? (const char *)m->grad_buffer : (const char *)m->param_buffer;
    size_t bytes = grads ? sizeof(float) : m->ops->act_bytes;
    int bad = 0;
    for (int k = 0; k < m->num_chunks; k++) {
        const model_chunk *ch = &m->chunks[k];
        const model_view *v = grads ? &ch->grads : &ch->weights;
        for (int l = 0; l < ch->num_layers; l++)
            for (int f = 0; f < COUNT(layer_fields); f++) {
                char name[PARAM_NAME_MAX];
                snprintf(name, sizeof name, "decoder.layers.%d.%s", ch->first_layer + l, layer[f].name);
                void *pointer = *(void *const *)((const char *)&v->layers[l] + layer_fields[f].offset);
                if (!points_at(m, ch, pointer, name, 0, buffer, bytes)) {
                    bad++;
                    tap_diag("chunk %d layer %d: %s does not point at %s", k, l, layer_fields[f].field, name);
                }
            }
        int tied = !m->config.untie_embeddings_and_output_weights;
        if (ch->pre_process) {
            bad += !points_at(m, ch, v->word_embeddings, embedding[0].name, 0, buffer, bytes);
            bad += !points_at(m, ch, v->position_embeddings, embedding[1].name, 0, buffer, bytes);
        } else {
            bad += v->word_embeddings != NULL || v->position_embeddings != NULL;
        }
        if (ch->post_process) {
            bad += !points_at(m, ch, v->final_layernorm_weight, final_part[0].name, 0, buffer, bytes);
            bad += !points_at(m, ch, v->final_layernorm_bias, final_part[1].name, 0, buffer, bytes);
            const char *output = tied ? embedding[0].name : final_part[2].name;
            bad += !points_at(m, ch, v->output_layer, output, tied && !ch->pre_process, buffer, bytes);
        } else {
            bad += v->final_layernorm_weight != NULL || v->final_layernorm_bias != NULL || v->output_layer != NULL;
        }
    }
    return bad;
}

/* each chunk's parameters: embedding, then each layer's, then the final part (and tied copy) */
static int check_chunk_order(const gpt_model *m) {
    int bad = 0, tied = !m->config.untie_embeddings_and_output_weights;
    for (int k = 0; k < m->num_chunks; k++) {
        const model_chunk *ch = &m->chunks[k];
        int i = ch->first_param;
        if (ch->pre_process)
            for (int e = 0; e < COUNT(embedding); e++) bad += strcmp(m->params[i++].name, embedding[e].name) != 0;
        for (int l = 0; l < ch->num_layers; l++)
            for (int f = 0; f < COUNT(layer); f++) {
                char name[PARAM_NAME_MAX];
                snprintf(name, sizeof name, "decoder.layers.%d.%s", ch->first_layer + l, layer[f].name);
                bad += strcmp(m->params[i++].name, name) != 0;
            }
        if (ch->post_process) {
            i += tied ? 2 : 3;
            if (tied && !ch->pre_process) i++;
        }
        bad += i != ch->first_param + ch->num_params;
    }
    return bad;
}

/* the per-rank flags, against the rules they had before the table */
static int check_flags(const gpt_model *m) {
    int bad = 0;
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        int partial = m->config.sequence_parallel && p->tp_replicated && !strstr(p->name, "position_embeddings");
        bad += p->no_weight_decay != (p->cols == 0) || p->sequence_parallel_grad != partial ||
               p->tp_replicated != (p->split == SHARD_NONE);
    }
    return bad;
}

static void check_layout(const char *what, int untie, int num_layers, int tp_size, int tp_rank,
                         int pp_size, int pp_rank, int virtual_stages, int sequence_parallel) {
    gpt_config c = small_config(untie);
    c.num_layers = num_layers;
    c.tp_size = tp_size;
    c.tp_rank = tp_rank;
    c.pp_size = pp_size;
    c.pp_rank = pp_rank;
    c.virtual_stages = virtual_stages;
    c.sequence_parallel = sequence_parallel;
    gpt_model m;
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    int weights = check_view(&m, 0), grads = check_view(&m, 1);
    int order = check_chunk_order(&m), flags = check_flags(&m);
    tap_ok(weights == 0 && grads == 0 && order == 0 && flags == 0,
           "%s, %s: every view field points at its parameter (%d weight, %d gradient mismatches), chunks run embedding/layers/final (%d), flags (%d)",
           what, untie ? "untied" : "tied", weights, grads, order, flags);
    gpt_model_free(&m);
}

/* ------------------------------------------------------------------ Hugging Face list */

static void check_hf_list(int untie) {
    gpt2_dims dims = {LAYERS, HIDDEN, HEADS, HEAD_DIM, FFN, POSITIONS, TOKENIZER_VOCAB, VOCAB, untie};
    expected_tensor want[MAX_TENSORS];
    char names[MAX_TENSORS][2][PARAM_NAME_MAX];
    int expected = expected_list(untie, want, names);
    gpt_config c = small_config(untie);
    int globals = gpt_global_parameters(&c, NULL);
    int count, bad = 0;
    hf_gpt2_tensor *list = hf_gpt2_tensor_list(&dims, &count);
    for (int i = 0; i < count && i < expected; i++) {
        const hf_gpt2_tensor *t = &list[i];
        const expected_tensor *w = &want[i];
        int ndim = w->cols ? 2 : 1;
        if (strcmp(t->ours, w->name) || strcmp(t->hf, w->hf) || t->transform != w->transform || t->ndim != ndim ||
            t->our_shape[0] != w->rows || (ndim == 2 && t->our_shape[1] != w->cols) ||
            t->hf_shape[0] != w->hf_rows || (ndim == 2 && t->hf_shape[1] != w->hf_cols)) {
            bad++;
            tap_diag("HF %d: got %s -> %s [%lld, %lld] transform %d, want %s -> %s [%d, %d] transform %d", i, t->ours,
                     t->hf, (long long)t->hf_shape[0], (long long)t->hf_shape[1], t->transform, w->name, w->hf,
                     w->hf_rows, w->hf_cols, w->transform);
        }
    }
    tap_ok(count == globals && count == expected && bad == 0,
           "Hugging Face list (%s): %d entries, one per global tensor (%d), GPT-2 names, shapes and transforms",
           untie ? "untied" : "tied", count, globals);
    free(list);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    comm_group_create(&self_group, "self", MPI_COMM_SELF);
    for (int untie = 0; untie <= 1; untie++) check_global_list(untie);
    check_part_counts();
    for (int untie = 0; untie <= 1; untie++) {
        check_layout("one stage", untie, LAYERS, 1, 0, 1, 0, 1, 0);
        check_layout("pipeline stage 0 of 2", untie, LAYERS, 1, 0, 2, 0, 1, 0);
        check_layout("pipeline stage 1 of 2", untie, LAYERS, 1, 0, 2, 1, 1, 0);
        check_layout("4 layers, stage 1 of 2, 2 virtual stages", untie, 4, 1, 0, 2, 1, 2, 0);
        check_layout("4 layers, stage 0 of 2, 2 virtual stages", untie, 4, 1, 0, 2, 0, 2, 0);
        check_layout("tensor-parallel rank 1 of 2, sequence parallel", untie, LAYERS, 2, 1, 1, 0, 1, 1);
    }
    for (int untie = 0; untie <= 1; untie++) check_hf_list(untie);
    comm_group_free(&self_group);
    MPI_Finalize();
    return tap_done();
}
