/* bert_heads.c: BERT's tokentype embeddings, LM head, pooler, binary head and loss (see
 * bert_heads.h). Backward derivations: linear y = x W^T + b gives dx = dy W, dW += dy^T x,
 * db += colsum dy (matmul_backward); the cross entropies give (softmax - onehot) scaled by
 * loss_scale / rows (cross_entropy_fused); the gathers' backward scatters rows back
 * (moe_uncombine with one choice per row: the other rows get 0). Under tensor parallelism the
 * logits are this rank's vocabulary columns and the cross entropy is vocab-parallel (its max and
 * sums all-reduced, kernels/kernels.h), the output layer's input gradient all-reduced. */
#include "app/model/bert_heads.h"
#include "app/core/error.h"

#include <stdlib.h>
#include <string.h>

/* The micro-batch's index arrays live in one backend buffer of 7 [B T] and 2 [B] ints (the
 * masked arrays at their largest, M <= B T), filled by one copy: a batch's upload allocates
 * nothing when the buffer is there already (one per activation slot, kept from micro-batch to
 * micro-batch), and each copy to a GPU waits for its queue. */
#define BERT_BATCH_ROWS_ARRAYS 7

void bert_batch_upload(const kernel_ops *ops, const bert_host_batch *host, int B, int T,
                       int padded_vocab_size, bert_batch *out) {
    size_t N = (size_t)B * T, total = BERT_BATCH_ROWS_ARRAYS * N + 2 * (size_t)B;
    if (out->text && (out->B != B || out->T != T)) bert_batch_free(ops, out);
    int *staging = malloc(sizeof(int) * total);
    CHECK(staging, "out of memory");
    int *text = staging, *types = text + N, *valid = types + N, *masked_rows = valid + N,
        *labels = masked_rows + N, *masked_slot = labels + N, *cls_slot = masked_slot + N,
        *cls_rows = cls_slot + N, *is_random = cls_rows + B;
    memset(staging, 0, sizeof(int) * total);
    int M = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            text[row] = (int)host->text[row];
            types[row] = (int)host->types[row];
            valid[row] = host->padding_mask[row] == 1;
            masked_slot[row] = -1;
            cls_slot[row] = t == 0 ? b : -1;
            if (!host->loss_mask[row]) continue;
            if (host->labels[row] < 0 || host->labels[row] >= padded_vocab_size)
                user_error("BERT sample %d of the micro-batch: the label %lld at position %d is "
                           "outside the vocabulary [0, %d)", b, (long long)host->labels[row], t,
                           padded_vocab_size);
            masked_slot[row] = M;
            masked_rows[M] = (int)row;
            labels[M++] = (int)host->labels[row];
        }
        cls_rows[b] = b * T;
        is_random[b] = host->is_random[b];
    }
    if (!out->text) out->text = ops->alloc(sizeof(int) * total);
    ops->copy_from_host(out->text, staging, sizeof(int) * total);
    free(staging);
    out->B = B;
    out->T = T;
    out->masked_count = M;
    out->types = out->text + N;
    out->key_valid = out->types + N;
    out->masked_rows = out->key_valid + N;
    out->masked_labels = out->masked_rows + N;
    out->masked_slot = out->masked_labels + N;
    out->cls_slot = out->masked_slot + N;
    out->cls_rows = out->cls_slot + N;
    out->is_random = out->cls_rows + B;
}

void bert_batch_free(const kernel_ops *ops, bert_batch *batch) {
    if (batch->text) ops->release(batch->text);  /* every array is a slice of it */
    memset(batch, 0, sizeof *batch);
}

/* ---- the heads' scratch buffers: kept from call to call, grown when a call needs more (the
 * masked count changes with every micro-batch), so that a step allocates and frees nothing:
 * on a GPU each free waits for the queue and each allocation of the LM head's logits costs
 * milliseconds. One set per process (the heads of one model run one at a time); another
 * backend's call releases the set first. ---- */
enum { WS_X, WS_PRE, WS_ACT, WS_NORMED, WS_LOGITS, WS_DX, WS_STATS, WS_CE_SCRATCH, WS_BIN_X, WS_BIN_PRE,
       WS_BIN_POOLED, WS_BIN_LOGITS, WS_BIN_DPOOLED, WS_BIN_DX, WS_BIN_SCATTERED, WS_BIN_CE_SCRATCH, WS_COUNT };
static struct {
    const kernel_ops *ops;
    void *buffer[WS_COUNT];
    size_t bytes[WS_COUNT];
} workspace;

void bert_heads_workspace_release(void) {
    for (int i = 0; i < WS_COUNT; i++)
        if (workspace.buffer[i]) workspace.ops->release(workspace.buffer[i]);
    memset(&workspace, 0, sizeof workspace);
}

/* buffer `which`, at least `bytes` long (its contents are not kept when it grows) */
static void *scratch(const kernel_ops *ops, int which, size_t bytes) {
    if (workspace.ops && workspace.ops != ops) bert_heads_workspace_release();
    workspace.ops = ops;
    if (bytes > workspace.bytes[which]) {
        if (workspace.buffer[which]) ops->release(workspace.buffer[which]);
        size_t grown = bytes + bytes / 8;  /* room for the next micro-batches' larger counts */
        workspace.buffer[which] = ops->alloc(grown);
        workspace.bytes[which] = grown;
    }
    return workspace.buffer[which];
}

void bert_tokentype_forward(const kernel_ops *ops, void *hidden, const bert_batch *batch,
                            const void *tokentype_embeddings, void *scratch, int C) {
    int N = batch->B * batch->T;
    ops->embedding_forward(scratch, batch->types, tokentype_embeddings, N, C, 0, 2);
    ops->add(hidden, hidden, scratch, (size_t)N * C);
}

void bert_tokentype_backward(const kernel_ops *ops, float *dtokentype_embeddings,
                             const void *dhidden, const bert_batch *batch, int C) {
    ops->embedding_backward(dtokentype_embeddings, dhidden, batch->types, batch->B * batch->T, C,
                            0, 2);
}

/* the mean of a backend fp32 vector of n losses, on the host */
static float mean_loss(const kernel_ops *ops, const float *losses, int n) {
    float *host = malloc(sizeof(float) * (size_t)n);
    CHECK(host, "out of memory");
    ops->copy_to_host(host, losses, sizeof(float) * (size_t)n);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += host[i];
    free(host);
    return (float)(sum / n);
}

/* the compute dtype, for communication */
static comm_dtype comm_dtype_of(const kernel_ops *ops) {
    return ops->act_dtype == KERNEL_FP16 ? COMM_FP16 : ops->act_dtype == KERNEL_BF16 ? COMM_BF16 : COMM_FLOAT;
}

static int tp_size_of(const tensor_parallel_comm *tp) { return tp && tp->group ? tp->group->size : 1; }
static int tp_rank_of(const tensor_parallel_comm *tp) { return tp && tp->group ? tp->group->rank : 0; }

/* one cross entropy over logits[rows, V/tp] in place (vocab-parallel over tp: this rank's
 * vocabulary rows from vocab_start): losses' mean returned, logits become the gradient scaled by
 * loss_scale / rows */
static float cross_entropy(const kernel_ops *ops, const tensor_parallel_comm *tp, void *logits,
                           const int *targets, int rows, int V, int vocab_start, float loss_scale, int ws) {
    float *buffer = scratch(ops, ws, sizeof(float) * 4 * (size_t)rows);
    float *losses = buffer, *row_max = buffer + rows, *sum_exp = buffer + 2 * rows,
          *target_logit = buffer + 3 * rows;
    float grad_scale = loss_scale / (float)rows;
    if (tp_size_of(tp) == 1) {
        ops->cross_entropy_fused(losses, logits, row_max, sum_exp, target_logit, targets, rows, V, grad_scale);
    } else {  /* sum_exp and target_logit side by side: one all-reduce */
        ops->cross_entropy_max(row_max, logits, rows, V);
        vocab_parallel_statistics_allreduce(tp, row_max, (size_t)rows, COMM_MAX);
        ops->cross_entropy_sum_exp(sum_exp, target_logit, logits, row_max, targets, rows, V, vocab_start);
        vocab_parallel_statistics_allreduce(tp, sum_exp, 2 * (size_t)rows, COMM_SUM);
        ops->cross_entropy_loss_grad(losses, logits, row_max, sum_exp, target_logit, targets, rows, V,
                                     vocab_start, grad_scale);
    }
    return mean_loss(ops, losses, rows);
}

/* LM head over the M masked rows: dense, exact GeLU, layer norm, tied output + bias, loss;
 * dhidden (overwritten) gets the gradient on those rows, 0 elsewhere */
static float lm_head(const kernel_ops *ops, const tensor_parallel_comm *tp, const bert_heads_config *cfg,
                     const bert_batch *batch, const void *hidden, const void *word_embeddings,
                     const bert_heads_view *p, const bert_heads_view *g, float *dword_embeddings,
                     void *dhidden, float loss_scale, int with_backward) {
    int M = batch->masked_count, C = cfg->hidden_size, V = cfg->padded_vocab_size / tp_size_of(tp);
    size_t N = (size_t)batch->B * batch->T, a = ops->act_bytes;
    if (M == 0) {
        if (with_backward) ops->zero(dhidden, N * C * a);
        return 0.0f;
    }
    size_t rows_bytes = (size_t)M * C * a;
    void *x = scratch(ops, WS_X, rows_bytes), *pre = scratch(ops, WS_PRE, rows_bytes),
         *act = scratch(ops, WS_ACT, rows_bytes), *normed = scratch(ops, WS_NORMED, rows_bytes),
         *logits = scratch(ops, WS_LOGITS, (size_t)M * V * a), *dx = scratch(ops, WS_DX, rows_bytes);
    float *stats = scratch(ops, WS_STATS, sizeof(float) * 2 * (size_t)M);
    /* the masked count changes with every micro-batch: the GEMMs over its rows are planned per
     * size bucket (kernels.h) */
    if (ops->matmul_rows_vary) ops->matmul_rows_vary(1);
    ops->gather_rows(x, hidden, batch->masked_rows, M, C);
    ops->matmul_forward(pre, NULL, x, p->lm_dense_weight, p->lm_dense_bias, M, C, C);
    ops->gelu_erf_forward(act, pre, (size_t)M * C);
    ops->layernorm_forward(normed, stats, stats + M, act, p->lm_norm_weight, p->lm_norm_bias, M, C,
                           cfg->layernorm_epsilon);
    ops->matmul_forward(logits, NULL, normed, word_embeddings, p->output_bias, M, C, V);
    if (cfg->capture_lm_logits) ops->copy_to_host_float(cfg->capture_lm_logits, logits, (size_t)M * V);
    float loss = cross_entropy(ops, tp, logits, batch->masked_labels, M, V, tp_rank_of(tp) * V, loss_scale,
                               WS_CE_SCRATCH);
    if (!with_backward) {
        if (ops->matmul_rows_vary) ops->matmul_rows_vary(0);
        return loss;
    }
    /* backward: logits now hold d loss / d logits; the output layer's input gradient summed over
     * the vocabulary shards (Megatron's copy_to_tensor_parallel_region's backward) */
    ops->matmul_backward(dx, dword_embeddings, g->output_bias, logits, normed, word_embeddings, M,
                         C, V);
    if (tp_size_of(tp) > 1) copy_to_tensor_parallel_region_backward(tp, dx, (size_t)M, (size_t)C, comm_dtype_of(ops));
    void *dact = normed;  /* normed is no longer needed: the norm's input gradient lands here */
    ops->zero(dact, (size_t)M * C * a);
    ops->layernorm_backward(dact, g->lm_norm_weight, g->lm_norm_bias, NULL, dx, act,
                            p->lm_norm_weight, stats, stats + M, M, C);
    ops->gelu_erf_backward(dact, pre, dact, (size_t)M * C);
    ops->matmul_backward(dx, g->lm_dense_weight, g->lm_dense_bias, dact, x, p->lm_dense_weight, M,
                         C, C);
    if (ops->matmul_rows_vary) ops->matmul_rows_vary(0);
    ops->moe_uncombine(dhidden, dx, batch->masked_slot, (int)N, 1, C);
    return loss;
}

/* pooler and binary head on the [CLS] rows; dhidden += their gradient */
static float binary_head(const kernel_ops *ops, const bert_heads_config *cfg,
                         const bert_batch *batch, const void *hidden, const bert_heads_view *p,
                         const bert_heads_view *g, void *dhidden, float loss_scale, int with_backward) {
    int B = batch->B, C = cfg->hidden_size;
    size_t N = (size_t)B * batch->T, a = ops->act_bytes;
    size_t rows_bytes = (size_t)B * C * a;
    void *x = scratch(ops, WS_BIN_X, rows_bytes), *pre = scratch(ops, WS_BIN_PRE, rows_bytes),
         *pooled = scratch(ops, WS_BIN_POOLED, rows_bytes), *logits = scratch(ops, WS_BIN_LOGITS, (size_t)B * 2 * a),
         *dpooled = scratch(ops, WS_BIN_DPOOLED, rows_bytes), *dx = scratch(ops, WS_BIN_DX, rows_bytes),
         *scattered = scratch(ops, WS_BIN_SCATTERED, N * C * a);
    ops->gather_rows(x, hidden, batch->cls_rows, B, C);
    ops->matmul_forward(pre, NULL, x, p->pooler_weight, p->pooler_bias, B, C, C);
    ops->tanh_forward(pooled, pre, (size_t)B * C);
    ops->matmul_forward(logits, NULL, pooled, p->binary_weight, p->binary_bias, B, C, 2);
    if (cfg->capture_binary_logits) ops->copy_to_host_float(cfg->capture_binary_logits, logits, (size_t)B * 2);
    float loss = cross_entropy(ops, NULL, logits, batch->is_random, B, 2, 0, loss_scale, WS_BIN_CE_SCRATCH);
    if (!with_backward) return loss;
    ops->matmul_backward(dpooled, g->binary_weight, g->binary_bias, logits, pooled,
                         p->binary_weight, B, C, 2);
    ops->tanh_backward(dpooled, pooled, dpooled, (size_t)B * C);
    ops->matmul_backward(dx, g->pooler_weight, g->pooler_bias, dpooled, x, p->pooler_weight, B, C,
                         C);
    ops->moe_uncombine(scattered, dx, batch->cls_slot, (int)N, 1, C);
    ops->add(dhidden, dhidden, scattered, N * C);
    return loss;
}

void bert_heads_forward_backward(const kernel_ops *ops, const tensor_parallel_comm *tp,
                                 const bert_heads_config *cfg, const bert_batch *batch,
                                 const void *hidden, const void *word_embeddings,
                                 const bert_heads_view *params, const bert_heads_view *grads,
                                 float *dword_embeddings, void *dhidden, float loss_scale,
                                 int with_backward, float *lm_loss, float *sop_loss) {
    if (!ops->gelu_erf_forward || !ops->tanh_forward || !ops->attention_padded_forward)
        user_error("BERT needs the kernels of its heads and padded attention, which the %s backend "
                   "lacks", ops->name);
    *lm_loss = lm_head(ops, tp, cfg, batch, hidden, word_embeddings, params, grads, dword_embeddings,
                       dhidden, loss_scale, with_backward);
    *sop_loss = cfg->binary_head
                    ? binary_head(ops, cfg, batch, hidden, params, grads, dhidden, loss_scale, with_backward)
                    : 0.0f;
}
