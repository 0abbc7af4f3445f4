/* gpt_model.c: GPT forward and backward over the flat buffers, through kernel_ops.
 *
 * One layer (pre-LN, as Megatron's GPT):
 *   ln1 = LN(x); qkv = ln1 Wqkv^T + b; a = attention(qkv); x' = x + dropout(a Wproj^T + b)
 *   ln2 = LN(x'); h = gelu(ln2 W1^T + b1); y = x' + dropout(h W2^T + b2)
 * Embedding: x0 = dropout(wte[token] + wpe[position]); head: logits = LN(xL) Wout^T, where Wout
 * is the word-embedding table unless --untie-embeddings-and-output-weights. */
#include "gpt_model.h"
#include "error.h"
#include "philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { INIT_NORMAL, INIT_SCALED_NORMAL, INIT_ONES, INIT_ZEROS } init_kind;

typedef struct layout_builder {
    gpt_model *model;
    int capacity;
    init_kind *init;
} layout_builder;

static void add_param(layout_builder *b, const char *name, int rows, int cols, init_kind init) {
    gpt_model *m = b->model;
    if (m->num_params == b->capacity) {
        b->capacity = b->capacity ? 2 * b->capacity : 64;
        m->params = realloc(m->params, sizeof(param_tensor) * (size_t)b->capacity);
        b->init = realloc(b->init, sizeof(init_kind) * (size_t)b->capacity);
        CHECK(m->params && b->init, "out of host memory for the parameter table");
    }
    param_tensor *p = &m->params[m->num_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rows = rows;
    p->cols = cols;
    p->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    p->offset = m->num_elements;
    p->no_weight_decay = (cols == 0); /* biases and layer-norm vectors */
    b->init[m->num_params] = init;
    m->num_elements += p->numel;
    m->num_params++;
}

/* the parameter table in Megatron's naming, in the order of the flat buffer */
static init_kind *build_layout(gpt_model *m) {
    const gpt_config *c = &m->config;
    int C = c->hidden_size, HD = c->num_attention_heads * c->kv_channels, F = c->ffn_hidden_size;
    layout_builder b = {m, 0, NULL};
    char name[PARAM_NAME_MAX];
    add_param(&b, "embedding.word_embeddings.weight", c->padded_vocab_size, C, INIT_NORMAL);
    add_param(&b, "embedding.position_embeddings.weight", c->max_position_embeddings, C, INIT_NORMAL);
    for (int l = 0; l < c->num_layers; l++) {
#define LAYER_PARAM(suffix, rows, cols, init) \
        (snprintf(name, sizeof name, "decoder.layers.%d.%s", l, suffix), add_param(&b, name, rows, cols, init))
        LAYER_PARAM("input_layernorm.weight", C, 0, INIT_ONES);
        LAYER_PARAM("input_layernorm.bias", C, 0, INIT_ZEROS);
        LAYER_PARAM("self_attention.linear_qkv.weight", 3 * HD, C, INIT_NORMAL);
        LAYER_PARAM("self_attention.linear_qkv.bias", 3 * HD, 0, INIT_ZEROS);
        LAYER_PARAM("self_attention.linear_proj.weight", C, HD, INIT_SCALED_NORMAL);
        LAYER_PARAM("self_attention.linear_proj.bias", C, 0, INIT_ZEROS);
        LAYER_PARAM("pre_mlp_layernorm.weight", C, 0, INIT_ONES);
        LAYER_PARAM("pre_mlp_layernorm.bias", C, 0, INIT_ZEROS);
        LAYER_PARAM("mlp.linear_fc1.weight", F, C, INIT_NORMAL);
        LAYER_PARAM("mlp.linear_fc1.bias", F, 0, INIT_ZEROS);
        LAYER_PARAM("mlp.linear_fc2.weight", C, F, INIT_SCALED_NORMAL);
        LAYER_PARAM("mlp.linear_fc2.bias", C, 0, INIT_ZEROS);
#undef LAYER_PARAM
    }
    add_param(&b, "decoder.final_layernorm.weight", C, 0, INIT_ONES);
    add_param(&b, "decoder.final_layernorm.bias", C, 0, INIT_ZEROS);
    if (c->untie_embeddings_and_output_weights)
        add_param(&b, "output_layer.weight", c->padded_vocab_size, C, INIT_NORMAL);
    return b.init;
}

/* point a model_view at a flat buffer, following the table order of build_layout */
static void bind_view(model_view *v, const gpt_model *m, float *base) {
    const param_tensor *p = m->params;
    int i = 0;
    v->word_embeddings = base + p[i++].offset;
    v->position_embeddings = base + p[i++].offset;
    for (int l = 0; l < m->config.num_layers; l++) {
        layer_view *lv = &v->layers[l];
        float **fields[] = {&lv->input_layernorm_weight, &lv->input_layernorm_bias, &lv->qkv_weight,
                            &lv->qkv_bias, &lv->proj_weight, &lv->proj_bias,
                            &lv->pre_mlp_layernorm_weight, &lv->pre_mlp_layernorm_bias,
                            &lv->fc1_weight, &lv->fc1_bias, &lv->fc2_weight, &lv->fc2_bias};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) *fields[f] = base + p[i++].offset;
    }
    v->final_layernorm_weight = base + p[i++].offset;
    v->final_layernorm_bias = base + p[i++].offset;
    v->output_layer = m->config.untie_embeddings_and_output_weights ? base + p[i++].offset
                                                                     : v->word_embeddings;
}

/* element i of every parameter comes from philox(seed, stream(name), i): layout-independent */
static void initialize_parameters(gpt_model *m, const init_kind *init) {
    const gpt_config *c = &m->config;
    float scaled_std = c->init_method_std / sqrtf(2.0f * (float)c->num_layers);
    size_t largest = 0;
    for (int i = 0; i < m->num_params; i++) if (m->params[i].numel > largest) largest = m->params[i].numel;
    float *host = malloc(sizeof(float) * largest);
    CHECK(host, "out of host memory initializing parameters");
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        uint64_t stream = philox_stream_of_name(p->name);
        float std = init[i] == INIT_SCALED_NORMAL ? scaled_std : c->init_method_std;
        for (size_t e = 0; e < p->numel; e++) {
            switch (init[i]) {
            case INIT_NORMAL:
            case INIT_SCALED_NORMAL: host[e] = std * philox_normal(c->seed, stream, e); break;
            case INIT_ONES: host[e] = 1.0f; break;
            case INIT_ZEROS: host[e] = 0.0f; break;
            }
        }
        m->ops->copy_from_host(m->param_buffer + p->offset, host, sizeof(float) * p->numel);
    }
    free(host);
}

static float *alloc_floats(const kernel_ops *ops, size_t n) { return ops->alloc(sizeof(float) * n); }

static void allocate_activations(gpt_model *m) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    size_t N = (size_t)c->micro_batch_size * (size_t)c->seq_length, C = (size_t)c->hidden_size;
    size_t HD = (size_t)c->num_attention_heads * (size_t)c->kv_channels, F = (size_t)c->ffn_hidden_size;
    size_t V = (size_t)c->padded_vocab_size;
    activations *a = &m->act;
    a->tokens = ops->alloc(sizeof(int) * N);
    a->targets = ops->alloc(sizeof(int) * N);
    a->layers = calloc((size_t)c->num_layers, sizeof(layer_activations));
    CHECK(a->layers, "out of host memory for activation tables");
    size_t workspace = ops->attention_workspace_bytes(c->micro_batch_size, c->seq_length,
                                                      c->num_attention_heads, c->kv_channels);
    for (int l = 0; l < c->num_layers; l++) {
        layer_activations *la = &a->layers[l];
        la->input = alloc_floats(ops, N * C);
        la->ln1 = alloc_floats(ops, N * C);
        la->ln1_mean = alloc_floats(ops, N);
        la->ln1_rstd = alloc_floats(ops, N);
        la->qkv = alloc_floats(ops, N * 3 * HD);
        la->attention_out = alloc_floats(ops, N * HD);
        la->attention_workspace = ops->alloc(workspace);
        la->residual_mid = alloc_floats(ops, N * C);
        la->ln2 = alloc_floats(ops, N * C);
        la->ln2_mean = alloc_floats(ops, N);
        la->ln2_rstd = alloc_floats(ops, N);
        la->fc1_out = alloc_floats(ops, N * F);
        la->gelu_out = alloc_floats(ops, N * F);
    }
    a->final_input = alloc_floats(ops, N * C);
    a->lnf = alloc_floats(ops, N * C);
    a->lnf_mean = alloc_floats(ops, N);
    a->lnf_rstd = alloc_floats(ops, N);
    a->logits = alloc_floats(ops, N * V);
    a->losses = alloc_floats(ops, N);
    a->row_max = alloc_floats(ops, N);
    a->sum_exp = alloc_floats(ops, N);
    a->target_logit = alloc_floats(ops, N);
    a->d_residual = alloc_floats(ops, N * C);
    a->d_hidden = alloc_floats(ops, N * C);
    a->d_ln = alloc_floats(ops, N * C);
    a->d_attention = alloc_floats(ops, N * HD);
    a->d_qkv = alloc_floats(ops, N * 3 * HD);
    a->d_ffn_a = alloc_floats(ops, N * F);
    a->d_ffn_b = alloc_floats(ops, N * F);
    a->scratch_hidden = alloc_floats(ops, N * C);
    m->host_losses = malloc(sizeof(float) * N);
    CHECK(m->host_losses, "out of host memory for losses");
}

void gpt_model_create(gpt_model *m, const gpt_config *config, const kernel_ops *ops) {
    memset(m, 0, sizeof(*m));
    m->config = *config;
    m->ops = ops;
    init_kind *init = build_layout(m);
    m->param_buffer = alloc_floats(ops, m->num_elements);
    m->grad_buffer = alloc_floats(ops, m->num_elements);
    m->weights.layers = calloc((size_t)config->num_layers, sizeof(layer_view));
    m->grads.layers = calloc((size_t)config->num_layers, sizeof(layer_view));
    CHECK(m->weights.layers && m->grads.layers, "out of host memory for layer views");
    bind_view(&m->weights, m, m->param_buffer);
    bind_view(&m->grads, m, m->grad_buffer);
    initialize_parameters(m, init);
    free(init);
    allocate_activations(m);
}

void gpt_model_free(gpt_model *m) {
    const kernel_ops *ops = m->ops;
    activations *a = &m->act;
    for (int l = 0; l < m->config.num_layers; l++) {
        layer_activations *la = &a->layers[l];
        void *buffers[] = {la->input, la->ln1, la->ln1_mean, la->ln1_rstd, la->qkv,
                           la->attention_out, la->attention_workspace, la->residual_mid, la->ln2,
                           la->ln2_mean, la->ln2_rstd, la->fc1_out, la->gelu_out};
        for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) ops->release(buffers[i]);
    }
    void *buffers[] = {a->tokens, a->targets, a->final_input, a->lnf, a->lnf_mean, a->lnf_rstd,
                       a->logits, a->losses, a->row_max, a->sum_exp, a->target_logit,
                       a->d_residual, a->d_hidden, a->d_ln, a->d_attention, a->d_qkv,
                       a->d_ffn_a, a->d_ffn_b, a->scratch_hidden, m->param_buffer, m->grad_buffer};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) ops->release(buffers[i]);
    free(a->layers);
    free(m->weights.layers);
    free(m->grads.layers);
    free(m->params);
    free(m->host_losses);
    memset(m, 0, sizeof(*m));
}

/* dropout sites of one layer; the embedding uses layer index -1 */
enum { SITE_EMBEDDING = 1, SITE_ATTENTION_PROBS, SITE_ATTENTION_OUT, SITE_MLP_OUT };

/* Mask element index = first_sample * (elements per sample) + local index: the same global
 * element gets the same mask whatever the micro-batch size and data-parallel split. */
static dropout_rng site_rng(const gpt_model *m, micro_batch_rng rng, int layer, int site,
                            float p, uint64_t elements_per_sample) {
    dropout_rng r;
    r.p = rng.training ? p : 0.0f;
    r.seed = m->config.seed;
    r.stream = philox_stream_mix(philox_stream_mix(rng.iteration, (uint64_t)(layer + 1)), (uint64_t)site);
    r.offset = (uint64_t)rng.first_sample * elements_per_sample;
    return r;
}

double gpt_model_forward(gpt_model *m, const int *tokens, const int *targets,
                         micro_batch_rng rng, float grad_scale) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    activations *a = &m->act;
    const model_view *w = &m->weights;
    int B = c->micro_batch_size, T = c->seq_length, C = c->hidden_size, H = c->num_attention_heads;
    int D = c->kv_channels, HD = H * D, F = c->ffn_hidden_size, V = c->padded_vocab_size;
    int N = B * T;
    uint64_t per_sample_hidden = (uint64_t)T * (uint64_t)C;
    uint64_t per_sample_probs = (uint64_t)H * (uint64_t)T * (uint64_t)T;

    ops->copy_from_host(a->tokens, tokens, sizeof(int) * (size_t)N);
    ops->copy_from_host(a->targets, targets, sizeof(int) * (size_t)N);

    /* embedding */
    float *x = c->num_layers > 0 ? a->layers[0].input : a->final_input;
    ops->embedding_forward(x, a->tokens, w->word_embeddings, N, C, 0, V);
    ops->position_embedding_forward(x, w->position_embeddings, B, T, C, 0);
    ops->dropout_forward(x, x, (size_t)N * C, site_rng(m, rng, -1, SITE_EMBEDDING, c->hidden_dropout, per_sample_hidden));

    for (int l = 0; l < c->num_layers; l++) {
        layer_activations *la = &a->layers[l];
        const layer_view *lw = &w->layers[l];
        float *out = l + 1 < c->num_layers ? a->layers[l + 1].input : a->final_input;
        /* attention block */
        ops->layernorm_forward(la->ln1, la->ln1_mean, la->ln1_rstd, la->input,
                               lw->input_layernorm_weight, lw->input_layernorm_bias, N, C, c->layernorm_epsilon);
        ops->matmul_forward(la->qkv, la->ln1, lw->qkv_weight, lw->qkv_bias, N, C, 3 * HD);
        ops->attention_forward(la->attention_out, la->attention_workspace, la->qkv, B, T, H, D, 0, H,
                               site_rng(m, rng, l, SITE_ATTENTION_PROBS, c->attention_dropout, per_sample_probs));
        ops->matmul_forward(a->scratch_hidden, la->attention_out, lw->proj_weight, lw->proj_bias, N, HD, C);
        ops->dropout_forward(a->scratch_hidden, a->scratch_hidden, (size_t)N * C,
                             site_rng(m, rng, l, SITE_ATTENTION_OUT, c->hidden_dropout, per_sample_hidden));
        ops->add(la->residual_mid, la->input, a->scratch_hidden, (size_t)N * C);
        /* MLP block */
        ops->layernorm_forward(la->ln2, la->ln2_mean, la->ln2_rstd, la->residual_mid,
                               lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias, N, C, c->layernorm_epsilon);
        ops->matmul_forward(la->fc1_out, la->ln2, lw->fc1_weight, lw->fc1_bias, N, C, F);
        ops->gelu_forward(la->gelu_out, la->fc1_out, (size_t)N * F);
        ops->matmul_forward(a->scratch_hidden, la->gelu_out, lw->fc2_weight, lw->fc2_bias, N, F, C);
        ops->dropout_forward(a->scratch_hidden, a->scratch_hidden, (size_t)N * C,
                             site_rng(m, rng, l, SITE_MLP_OUT, c->hidden_dropout, per_sample_hidden));
        ops->add(out, la->residual_mid, a->scratch_hidden, (size_t)N * C);
    }

    /* output layer and loss; the loss pass leaves dL/dlogits in a->logits for backward */
    ops->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->final_input,
                           w->final_layernorm_weight, w->final_layernorm_bias, N, C, c->layernorm_epsilon);
    ops->matmul_forward(a->logits, a->lnf, w->output_layer, NULL, N, C, V);
    ops->cross_entropy_max(a->row_max, a->logits, N, V);
    ops->cross_entropy_sum_exp(a->sum_exp, a->target_logit, a->logits, a->row_max, a->targets, N, V, 0);
    ops->cross_entropy_loss_grad(a->losses, a->logits, a->row_max, a->sum_exp, a->target_logit,
                                 a->targets, N, V, 0, grad_scale);
    ops->copy_to_host(m->host_losses, a->losses, sizeof(float) * (size_t)N);
    double loss_sum = 0.0;
    for (int n = 0; n < N; n++) loss_sum += m->host_losses[n];
    return loss_sum;
}

void gpt_model_backward(gpt_model *m, micro_batch_rng rng) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    activations *a = &m->act;
    const model_view *w = &m->weights;
    const model_view *g = &m->grads;
    int B = c->micro_batch_size, T = c->seq_length, C = c->hidden_size, H = c->num_attention_heads;
    int D = c->kv_channels, HD = H * D, F = c->ffn_hidden_size, V = c->padded_vocab_size;
    int N = B * T;
    uint64_t per_sample_hidden = (uint64_t)T * (uint64_t)C;
    uint64_t per_sample_probs = (uint64_t)H * (uint64_t)T * (uint64_t)T;

    /* output layer: a->logits holds dL/dlogits */
    ops->matmul_backward(a->d_ln, g->output_layer, NULL, a->logits, a->lnf, w->output_layer, N, C, V);
    ops->zero(a->d_residual, sizeof(float) * (size_t)N * C);
    ops->layernorm_backward(a->d_residual, g->final_layernorm_weight, g->final_layernorm_bias, a->d_ln,
                            a->final_input, w->final_layernorm_weight, a->lnf_mean, a->lnf_rstd, N, C);

    /* d_residual carries dL/d(residual stream) down through the layers */
    for (int l = c->num_layers - 1; l >= 0; l--) {
        layer_activations *la = &a->layers[l];
        const layer_view *lw = &w->layers[l];
        const layer_view *lg = &g->layers[l];
        /* MLP block: y = x' + dropout(fc2(gelu(fc1(LN(x'))))) */
        ops->dropout_backward(a->d_hidden, a->d_residual, (size_t)N * C,
                              site_rng(m, rng, l, SITE_MLP_OUT, c->hidden_dropout, per_sample_hidden));
        ops->matmul_backward(a->d_ffn_a, lg->fc2_weight, lg->fc2_bias, a->d_hidden, la->gelu_out, lw->fc2_weight, N, F, C);
        ops->gelu_backward(a->d_ffn_b, la->fc1_out, a->d_ffn_a, (size_t)N * F);
        ops->matmul_backward(a->d_ln, lg->fc1_weight, lg->fc1_bias, a->d_ffn_b, la->ln2, lw->fc1_weight, N, C, F);
        ops->layernorm_backward(a->d_residual, lg->pre_mlp_layernorm_weight, lg->pre_mlp_layernorm_bias, a->d_ln,
                                la->residual_mid, lw->pre_mlp_layernorm_weight, la->ln2_mean, la->ln2_rstd, N, C);
        /* attention block: x' = x + dropout(proj(attention(qkv(LN(x))))) */
        ops->dropout_backward(a->d_hidden, a->d_residual, (size_t)N * C,
                              site_rng(m, rng, l, SITE_ATTENTION_OUT, c->hidden_dropout, per_sample_hidden));
        ops->matmul_backward(a->d_attention, lg->proj_weight, lg->proj_bias, a->d_hidden, la->attention_out, lw->proj_weight, N, HD, C);
        ops->attention_backward(a->d_qkv, a->d_attention, la->qkv, la->attention_workspace, B, T, H, D, 0, H,
                                site_rng(m, rng, l, SITE_ATTENTION_PROBS, c->attention_dropout, per_sample_probs));
        ops->matmul_backward(a->d_ln, lg->qkv_weight, lg->qkv_bias, a->d_qkv, la->ln1, lw->qkv_weight, N, C, 3 * HD);
        ops->layernorm_backward(a->d_residual, lg->input_layernorm_weight, lg->input_layernorm_bias, a->d_ln,
                                la->input, lw->input_layernorm_weight, la->ln1_mean, la->ln1_rstd, N, C);
    }

    /* embedding */
    ops->dropout_backward(a->d_hidden, a->d_residual, (size_t)N * C,
                          site_rng(m, rng, -1, SITE_EMBEDDING, c->hidden_dropout, per_sample_hidden));
    ops->embedding_backward(g->word_embeddings, a->d_hidden, a->tokens, N, C, 0, V);
    ops->position_embedding_backward(g->position_embeddings, a->d_hidden, B, T, C, 0);
}

uint64_t gpt_model_parameter_hash(const gpt_model *m) {
    size_t bytes = sizeof(float) * m->num_elements;
    unsigned char *host = malloc(bytes);
    CHECK(host, "out of host memory hashing parameters");
    m->ops->copy_to_host(host, m->param_buffer, bytes);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) { h ^= host[i]; h *= 1099511628211ull; }
    free(host);
    return h;
}
