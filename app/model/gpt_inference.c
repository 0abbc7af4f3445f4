/* gpt_inference.c: see gpt_inference.h. The layer is training's (gpt_model.c) without dropout,
 * row for row, on this rank's heads and MLP columns:
 *   x0 = wte[token] (+ wpe[position] with learned positions)         (all-reduced over tp)
 *   q, k = rope(q, k) at the cache positions with RoPE
 *   x' = x + (reduce(attention(N1(x) Wqkv^T + bqkv) Wproj^T) + bproj)  (keys/values from the cache)
 *   y  = x' + (reduce(act(N2(x') W1^T + b1) W2^T) + b2)               (act: GeLU or SwiGLU)
 *   logits = Nf(xL) Wout^T                                            (gathered over tp)
 * N is LayerNorm or RMSNorm (with --apply-layernorm-1p its weight is 1 + the stored one, as
 * training's norm_weight computes it); the row-parallel biases (when the model has them) are
 * added after the reduction as training adds them, so the cached forward computes each row the
 * way the full forward does (RoPE, Llama 3 scaling included, through gpt_rope_spec). An MoE
 * layer's MLP is moe_inference_forward on N2(x'), its partial sums reduced as fc2's are. */
#include "app/model/gpt_inference.h"
#include "app/model/moe_layer.h"
#include "app/model/mlp_gelu.h"
#include "app/core/error.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PIPELINE_TAG = 7301 };

static void *acts(const kernel_ops *ops, size_t n) { return ops->alloc(ops->act_bytes * n); }

static int query_groups(const gpt_config *c) {
    return c->num_query_groups > 0 ? c->num_query_groups : c->num_attention_heads;
}

void gpt_inference_create(gpt_inference *inf, gpt_model *model, const comm_group *pp_group, int max_batch,
                          int max_len, int max_rows) {
    const gpt_config *c = &model->config;
    const kernel_ops *ops = model->ops;
    if (model->num_chunks != 1 || c->sequence_parallel)
        user_error("generation runs one model chunk per rank without sequence parallelism");
    if ((c->pp_size > 1) != (pp_group != NULL) || (c->tp_size > 1 && !model->comm))
        FATAL("gpt_inference_create: a model of %d stages and %d tensor-parallel ranks needs its groups", c->pp_size, c->tp_size);
    if (max_len > c->max_position_embeddings)
        user_error("generation length %d exceeds --max-position-embeddings %d", max_len, c->max_position_embeddings);
    if (max_batch < 1 || max_len < 1 || max_rows < 1) user_error("generation needs a batch, a length and rows of at least 1");
    memset(inf, 0, sizeof *inf);
    inf->model = model;
    inf->pp_group = pp_group;
    inf->max_batch = max_batch;
    inf->max_len = max_len;
    inf->max_rows = max_rows;
    int tp = c->tp_size, layers = model->chunks[0].num_layers;
    size_t rows = (size_t)max_rows, C = (size_t)c->hidden_size, D = (size_t)c->kv_channels;
    size_t Hl = (size_t)c->num_attention_heads / tp, Gl = (size_t)query_groups(c) / tp;
    size_t Fl = (size_t)c->ffn_hidden_size / tp, Vl = (size_t)c->padded_vocab_size / tp;
    size_t cache = (size_t)max_batch * (size_t)max_len * Gl * D;
    inf->k_cache = calloc((size_t)layers + 1, sizeof(void *));
    inf->v_cache = calloc((size_t)layers + 1, sizeof(void *));
    CHECK(inf->k_cache && inf->v_cache, "out of host memory for the key/value cache table");
    for (int l = 0; l < layers; l++) {
        inf->k_cache[l] = acts(ops, cache);
        inf->v_cache[l] = acts(ops, cache);
    }
    inf->tokens = ops->alloc(sizeof(int) * rows);
    inf->x = acts(ops, rows * C);
    inf->x_mid = acts(ops, rows * C);
    inf->ln = acts(ops, rows * C);
    inf->qkv = acts(ops, rows * (Hl + 2 * Gl) * D);
    inf->attention = acts(ops, rows * Hl * D);
    inf->fc1 = acts(ops, rows * (c->swiglu ? 2 : 1) * Fl);
    inf->gelu = acts(ops, rows * Fl);
    inf->out_rows = acts(ops, rows * C);
    inf->logits = acts(ops, rows * Vl);
    inf->mean = ops->alloc(sizeof(float) * rows);
    inf->rstd = ops->alloc(sizeof(float) * rows);
    if (c->apply_layernorm_1p) {
        float *ones = malloc(sizeof(float) * C);
        CHECK(ones, "out of host memory");
        for (size_t i = 0; i < C; i++) ones[i] = 1.0f;
        inf->norm_ones = acts(ops, C);
        inf->norm_weight = acts(ops, C);
        ops->copy_from_host_float(inf->norm_ones, ones, C);
        free(ones);
    }
    if (c->num_experts > 0) {
        inf->moe = calloc(1, sizeof *inf->moe);
        CHECK(inf->moe, "out of host memory");
        moe_inference_allocate(model, inf->moe, max_rows);
    }
    if (tp > 1) {
        inf->local_logits = malloc(sizeof(float) * rows * Vl);
        inf->gathered_logits = malloc(sizeof(float) * rows * Vl * (size_t)tp);
        CHECK(inf->local_logits && inf->gathered_logits, "out of host memory for %d rows of logits", max_rows);
    }
}

void gpt_inference_free(gpt_inference *inf) {
    if (!inf->model) return;
    const kernel_ops *ops = inf->model->ops;
    for (int l = 0; l < inf->model->chunks[0].num_layers; l++) {
        ops->release(inf->k_cache[l]);
        ops->release(inf->v_cache[l]);
    }
    free(inf->k_cache);
    free(inf->v_cache);
    if (inf->moe) {
        moe_inference_release(inf->model, inf->moe);
        free(inf->moe);
    }
    void *buffers[] = {inf->tokens, inf->x, inf->x_mid, inf->ln, inf->qkv, inf->attention, inf->fc1,
                       inf->gelu, inf->out_rows, inf->logits, inf->mean, inf->rstd, inf->norm_ones, inf->norm_weight};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) if (buffers[i]) ops->release(buffers[i]);
    free(inf->local_logits);
    free(inf->gathered_logits);
    memset(inf, 0, sizeof *inf);
}

static void norm(gpt_inference *inf, void *out, const void *x, const void *weight, const void *bias, int N) {
    const gpt_config *c = &inf->model->config;
    if (c->apply_layernorm_1p) {
        /* zero-centred weights: the norm multiplies by 1 + w, as training's forward */
        inf->model->ops->add(inf->norm_weight, weight, inf->norm_ones, (size_t)c->hidden_size);
        weight = inf->norm_weight;
    }
    if (c->rmsnorm) inf->model->ops->rmsnorm_forward(out, inf->rstd, x, weight, N, c->hidden_size, c->layernorm_epsilon);
    else inf->model->ops->layernorm_forward(out, inf->mean, inf->rstd, x, weight, bias, N, c->hidden_size, c->layernorm_epsilon);
}

/* the sum over tensor-parallel ranks of partial rows (Megatron's reduce_from_tensor_parallel_region) */
static void tp_reduce(gpt_inference *inf, void *x, size_t n) {
    gpt_model *m = inf->model;
    if (m->config.tp_size > 1) m->comm->allreduce(x, n, m->act_dtype, COMM_SUM, m->tp_group);
}

/* this rank's logits [N, V/tp] into host_logits [N, V] on every rank of the tensor-parallel group */
static void gather_logits(gpt_inference *inf, int N, float *host_logits) {
    gpt_model *m = inf->model;
    int tp = m->config.tp_size, V = m->config.padded_vocab_size, Vl = V / tp;
    if (tp == 1) {
        m->ops->copy_to_host_float(host_logits, inf->logits, (size_t)N * (size_t)V);
        return;
    }
    size_t block = (size_t)N * (size_t)Vl;
    CHECK(block <= INT_MAX, "%d rows of %d logits exceed MPI's int count", N, Vl);
    m->ops->copy_to_host_float(inf->local_logits, inf->logits, block);
    CHECK_MPI(MPI_Allgather(inf->local_logits, (int)block, MPI_FLOAT, inf->gathered_logits, (int)block, MPI_FLOAT,
                            m->tp_group->mpi));
    for (int r = 0; r < tp; r++)
        for (int n = 0; n < N; n++)
            memcpy(host_logits + (size_t)n * V + (size_t)r * Vl, inf->gathered_logits + (size_t)r * block + (size_t)n * Vl,
                   sizeof(float) * (size_t)Vl);
}

/* greedy decoding on the device: this rank's shard of the logits [N, V/tp] reduced to each row's
 * (largest logit, its vocabulary id) among the real vocabulary's ids, then combined over the
 * tensor-parallel ranks by MPI_MAXLOC, whose ties go to the lowest id: the host's greedy rule. The
 * device buffers of the token ids and the norm's means are free by now and hold the reduction. */
static void greedy_tokens(gpt_inference *inf, int N, int vocab_size, int *next_tokens) {
    gpt_model *m = inf->model;
    int tp = m->config.tp_size, Vl = m->config.padded_vocab_size / tp, start = m->config.tp_rank * Vl;
    int valid = vocab_size - start < 0 ? 0 : vocab_size - start < Vl ? vocab_size - start : Vl;
    m->ops->logits_argmax(inf->mean, inf->tokens, inf->logits, N, Vl, valid);
    float *row_max = malloc(sizeof(float) * (size_t)N);
    int *argmax = malloc(sizeof(int) * (size_t)N);
    struct { float value; int id; } *best = malloc(sizeof *best * (size_t)N);
    CHECK(row_max && argmax && best, "out of host memory for %d rows", N);
    m->ops->copy_to_host(row_max, inf->mean, sizeof(float) * (size_t)N);
    m->ops->copy_to_host(argmax, inf->tokens, sizeof(int) * (size_t)N);
    for (int n = 0; n < N; n++) {
        best[n].value = valid > 0 ? row_max[n] : -INFINITY;
        best[n].id = valid > 0 ? start + argmax[n] : INT_MAX;
    }
    if (tp > 1) CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, best, N, MPI_FLOAT_INT, MPI_MAXLOC, m->tp_group->mpi));
    for (int n = 0; n < N; n++) next_tokens[n] = best[n].id;
    free(row_max);
    free(argmax);
    free(best);
}

/* the forward of gpt_inference_forward; with last_only the output layer runs on each sequence's
 * last new row only; with next_tokens its logits are reduced to greedy tokens on the device
 * instead of copied to host_logits */
static void forward(gpt_inference *inf, const int *tokens, int B, int Tq, int past, int last_only, float *host_logits,
                    int *next_tokens, int vocab_size) {
    gpt_model *m = inf->model;
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    const model_chunk *ch = &m->chunks[0];
    const model_view *w = &ch->weights;
    int tp = c->tp_size, N = B * Tq, C = c->hidden_size, D = c->kv_channels;
    int Hl = c->num_attention_heads / tp, Gl = query_groups(c) / tp, Fl = c->ffn_hidden_size / tp;
    int V = c->padded_vocab_size, Vl = V / tp, HDl = Hl * D, QKVl = (Hl + 2 * Gl) * D;
    if (B < 1 || Tq < 1 || B > inf->max_batch || N > inf->max_rows || past < 0 || past + Tq > inf->max_len)
        FATAL("gpt_inference_forward: %d sequences of %d tokens at position %d exceed the buffers "
              "(%d sequences, %d rows, %d positions)", B, Tq, past, inf->max_batch, inf->max_rows, inf->max_len);
    size_t rows_size = (size_t)N * (size_t)C;
    if (ch->pre_process) {
        ops->copy_from_host(inf->tokens, tokens, sizeof(int) * (size_t)N);
        ops->embedding_forward(inf->x, inf->tokens, w->word_embeddings, N, C, c->tp_rank * Vl, Vl);
        if (c->tp_rank == 0 && w->position_embeddings)
            ops->position_embedding_forward(inf->x, w->position_embeddings, B, Tq, C, past);
        tp_reduce(inf, inf->x, rows_size);
    } else {
        m->comm->recv(inf->x, rows_size, m->act_dtype, inf->pp_group->rank - 1, PIPELINE_TAG, inf->pp_group);
    }
    rope_spec rope = gpt_rope_spec(c);
    rope.position_start = past;
    for (int l = 0; l < ch->num_layers; l++) {
        const layer_view *lw = &w->layers[l];
        norm(inf, inf->ln, inf->x, lw->input_layernorm_weight, lw->input_layernorm_bias, N);
        ops->matmul_forward(inf->qkv, NULL, inf->ln, lw->qkv_weight, lw->qkv_bias, N, C, QKVl);
        if (c->position_embedding_type == POSITION_ROPE) ops->rope_forward(inf->qkv, B, Tq, Hl, Gl, D, rope);
        ops->decode_attention(inf->attention, inf->k_cache[l], inf->v_cache[l], inf->qkv, B, Tq, Hl, Gl, D, past,
                              inf->max_len, gpt_layer_window(c, ch->first_layer + l));
        ops->matmul_forward(inf->out_rows, NULL, inf->attention, lw->proj_weight, NULL, N, HDl, C);
        tp_reduce(inf, inf->out_rows, rows_size);
        if (lw->proj_bias) ops->bias_add(inf->out_rows, lw->proj_bias, N, C);
        ops->add(inf->x_mid, inf->x, inf->out_rows, rows_size);
        norm(inf, inf->ln, inf->x_mid, lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias, N);
        if (gpt_layer_is_moe(c, ch->first_layer + l)) {
            moe_inference_forward(m, inf->moe, lw, inf->ln, inf->out_rows, N, ch->first_layer + l);
            tp_reduce(inf, inf->out_rows, rows_size);
            ops->add(inf->x, inf->x_mid, inf->out_rows, rows_size);
            continue;
        }
        if (c->swiglu) {
            ops->matmul_forward(inf->fc1, NULL, inf->ln, lw->fc1_weight, lw->fc1_bias, N, C, 2 * Fl);
            ops->swiglu_forward(inf->gelu, inf->fc1, N, Fl);
        } else {
            mlp_matmul_gelu_forward(ops, c->gelu_erf, inf->fc1, inf->gelu, inf->ln, lw->fc1_weight, lw->fc1_bias, N, C, Fl);
        }
        ops->matmul_forward(inf->out_rows, NULL, inf->gelu, lw->fc2_weight, NULL, N, Fl, C);
        tp_reduce(inf, inf->out_rows, rows_size);
        if (lw->fc2_bias) ops->bias_add(inf->out_rows, lw->fc2_bias, N, C);
        ops->add(inf->x, inf->x_mid, inf->out_rows, rows_size);
    }
    int out_rows = last_only ? B : N;
    if (ch->post_process) {
        const void *final = inf->x;
        if (last_only && Tq > 1) {
            /* row Tq-1 of each sequence, side by side (x_mid is free by now) */
            for (int b = 0; b < B; b++)
                ops->copy((char *)inf->x_mid + (size_t)b * C * ops->act_bytes,
                          (const char *)inf->x + ((size_t)b * Tq + (size_t)(Tq - 1)) * C * ops->act_bytes,
                          (size_t)C * ops->act_bytes);
            final = inf->x_mid;
        }
        norm(inf, inf->ln, final, w->final_layernorm_weight, w->final_layernorm_bias, out_rows);
        ops->matmul_forward(inf->logits, NULL, inf->ln, w->output_layer, NULL, out_rows, C, Vl);
        if (next_tokens) greedy_tokens(inf, out_rows, vocab_size, next_tokens);
        else gather_logits(inf, out_rows, host_logits);
    } else {
        comm_request request;
        m->comm->send(inf->x, rows_size, m->act_dtype, inf->pp_group->rank + 1, PIPELINE_TAG, inf->pp_group, &request);
        m->comm->wait(&request);
    }
}

void gpt_inference_forward(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits) {
    forward(inf, tokens, B, Tq, past, 0, host_logits, NULL, 0);
}

void gpt_inference_forward_last(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits) {
    forward(inf, tokens, B, Tq, past, 1, host_logits, NULL, 0);
}

void gpt_inference_forward_greedy(gpt_inference *inf, const int *tokens, int B, int Tq, int past, int vocab_size,
                                  int *next_tokens) {
    forward(inf, tokens, B, Tq, past, 1, NULL, next_tokens, vocab_size);
}

int gpt_inference_last_stage(const gpt_inference *inf) { return inf->model->chunks[0].post_process; }

void gpt_inference_share(gpt_inference *inf, void *buffer, size_t count, MPI_Datatype type) {
    if (!inf->pp_group) return;
    int size;
    CHECK_MPI(MPI_Type_size(type, &size));
    /* in pieces MPI's int count can carry */
    size_t piece = (size_t)INT_MAX / 2;
    for (size_t start = 0; start < count; start += piece) {
        size_t n = count - start < piece ? count - start : piece;
        CHECK_MPI(MPI_Bcast((char *)buffer + start * (size_t)size, (int)n, type, inf->pp_group->size - 1,
                            inf->pp_group->mpi));
    }
    if (gpt_inference_last_stage(inf)) inf->shared_bytes += (uint64_t)count * (uint64_t)size;
}
