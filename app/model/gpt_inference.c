/* gpt_inference.c: see gpt_inference.h. The layer is training's (gpt_model.c) with tensor
 * parallelism of size 1 and no dropout, row for row:
 *   x0 = wte[token] + wpe[position]
 *   x' = x + (attention(LN1(x) Wqkv^T + bqkv) Wproj^T + bproj)      (keys/values from the cache)
 *   y  = x' + (gelu(LN2(x') W1^T + b1) W2^T + b2)
 *   logits = LNf(xL) Wout^T
 * with the row-parallel biases added after the matmul as training adds them, so the cached
 * forward computes each row the way the full forward does. */
#include "app/model/gpt_inference.h"
#include "app/core/error.h"

#include <stdlib.h>
#include <string.h>

static void *acts(const kernel_ops *ops, size_t n) { return ops->alloc(ops->act_bytes * n); }

void gpt_inference_create(gpt_inference *inf, gpt_model *model, int max_batch, int max_len, int max_rows) {
    const gpt_config *c = &model->config;
    const kernel_ops *ops = model->ops;
    if (c->tp_size != 1 || c->pp_size != 1 || model->num_chunks != 1)
        user_error("generation runs the whole model on one rank (tensor and pipeline parallel size 1)");
    if (max_len > c->max_position_embeddings)
        user_error("generation length %d exceeds --max-position-embeddings %d", max_len, c->max_position_embeddings);
    if (max_batch < 1 || max_len < 1 || max_rows < 1) user_error("generation needs a batch, a length and rows of at least 1");
    memset(inf, 0, sizeof *inf);
    inf->model = model;
    inf->max_batch = max_batch;
    inf->max_len = max_len;
    inf->max_rows = max_rows;
    size_t rows = (size_t)max_rows, C = (size_t)c->hidden_size, HD = (size_t)c->num_attention_heads * c->kv_channels;
    size_t cache = (size_t)max_batch * (size_t)max_len * HD;
    inf->k_cache = calloc((size_t)c->num_layers, sizeof(void *));
    inf->v_cache = calloc((size_t)c->num_layers, sizeof(void *));
    CHECK(inf->k_cache && inf->v_cache, "out of host memory for the key/value cache table");
    for (int l = 0; l < c->num_layers; l++) {
        inf->k_cache[l] = acts(ops, cache);
        inf->v_cache[l] = acts(ops, cache);
    }
    inf->tokens = ops->alloc(sizeof(int) * rows);
    inf->x = acts(ops, rows * C);
    inf->x_mid = acts(ops, rows * C);
    inf->ln = acts(ops, rows * C);
    inf->qkv = acts(ops, rows * 3 * HD);
    inf->attention = acts(ops, rows * HD);
    inf->fc1 = acts(ops, rows * (size_t)c->ffn_hidden_size);
    inf->gelu = acts(ops, rows * (size_t)c->ffn_hidden_size);
    inf->out_rows = acts(ops, rows * C);
    inf->logits = acts(ops, rows * (size_t)c->padded_vocab_size);
    inf->mean = ops->alloc(sizeof(float) * rows);
    inf->rstd = ops->alloc(sizeof(float) * rows);
}

void gpt_inference_free(gpt_inference *inf) {
    if (!inf->model) return;
    const kernel_ops *ops = inf->model->ops;
    for (int l = 0; l < inf->model->config.num_layers; l++) {
        ops->release(inf->k_cache[l]);
        ops->release(inf->v_cache[l]);
    }
    free(inf->k_cache);
    free(inf->v_cache);
    void *buffers[] = {inf->tokens, inf->x, inf->x_mid, inf->ln, inf->qkv, inf->attention, inf->fc1,
                       inf->gelu, inf->out_rows, inf->logits, inf->mean, inf->rstd};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) ops->release(buffers[i]);
    memset(inf, 0, sizeof *inf);
}

void gpt_inference_forward(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits) {
    gpt_model *m = inf->model;
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    const model_chunk *ch = &m->chunks[0];
    const model_view *w = &ch->weights;
    int N = B * Tq, C = c->hidden_size, H = c->num_attention_heads, D = c->kv_channels;
    int HD = H * D, F = c->ffn_hidden_size, V = c->padded_vocab_size;
    if (B < 1 || Tq < 1 || B > inf->max_batch || N > inf->max_rows || past < 0 || past + Tq > inf->max_len)
        FATAL("gpt_inference_forward: %d sequences of %d tokens at position %d exceed the buffers "
              "(%d sequences, %d rows, %d positions)", B, Tq, past, inf->max_batch, inf->max_rows, inf->max_len);
    size_t rows_size = (size_t)N * (size_t)C;
    ops->copy_from_host(inf->tokens, tokens, sizeof(int) * (size_t)N);
    ops->embedding_forward(inf->x, inf->tokens, w->word_embeddings, N, C, 0, V);
    ops->position_embedding_forward(inf->x, w->position_embeddings, B, Tq, C, past);
    for (int l = 0; l < ch->num_layers; l++) {
        const layer_view *lw = &w->layers[l];
        ops->layernorm_forward(inf->ln, inf->mean, inf->rstd, inf->x, lw->input_layernorm_weight,
                               lw->input_layernorm_bias, N, C, c->layernorm_epsilon);
        ops->matmul_forward(inf->qkv, NULL, inf->ln, lw->qkv_weight, lw->qkv_bias, N, C, 3 * HD);
        ops->decode_attention(inf->attention, inf->k_cache[l], inf->v_cache[l], inf->qkv, B, Tq, H, D, past, inf->max_len);
        ops->matmul_forward(inf->out_rows, NULL, inf->attention, lw->proj_weight, NULL, N, HD, C);
        ops->bias_add(inf->out_rows, lw->proj_bias, N, C);
        ops->add(inf->x_mid, inf->x, inf->out_rows, rows_size);
        ops->layernorm_forward(inf->ln, inf->mean, inf->rstd, inf->x_mid, lw->pre_mlp_layernorm_weight,
                               lw->pre_mlp_layernorm_bias, N, C, c->layernorm_epsilon);
        ops->matmul_forward(inf->fc1, inf->gelu, inf->ln, lw->fc1_weight, lw->fc1_bias, N, C, F);
        ops->matmul_forward(inf->out_rows, NULL, inf->gelu, lw->fc2_weight, NULL, N, F, C);
        ops->bias_add(inf->out_rows, lw->fc2_bias, N, C);
        ops->add(inf->x, inf->x_mid, inf->out_rows, rows_size);
    }
    ops->layernorm_forward(inf->ln, inf->mean, inf->rstd, inf->x, w->final_layernorm_weight,
                           w->final_layernorm_bias, N, C, c->layernorm_epsilon);
    ops->matmul_forward(inf->logits, NULL, inf->ln, w->output_layer, NULL, N, C, V);
    ops->copy_to_host_float(host_logits, inf->logits, (size_t)N * (size_t)V);
}
