/* context_parallel.c: ring attention and the per-piece position operations of context
 * parallelism (see context_parallel.h). */
#include "app/model/context_parallel.h"
#include "app/core/error.h"

#include <stdlib.h>
#include <string.h>

enum { TAG_KV = 1, TAG_DKV = 2 };

struct context_parallel_scratch {
    void *kv[2], *dkv[2];  /* p2p: [N, 2 G D/tp] the block in hand and the next one, and their gradients */
    void *block_out;       /* [N, H D/tp] one block's output before the merge */
    float *block_lse;      /* [B, H/tp, T] */
    void *kv_all, *dkv_all; /* allgather: [CP][N, 2 G D/tp] */
};

typedef struct cp_shapes {
    int B, T, Hl, Gl, D, cp, rank;
    size_t N, kv_count;  /* rows; elements of one rank's packed keys and values */
} cp_shapes;

static cp_shapes shapes_of(const gpt_model *m) {
    const gpt_config *c = &m->config;
    cp_shapes s;
    s.B = c->micro_batch_size;
    s.T = c->seq_length;
    s.Hl = c->num_attention_heads / c->tp_size;
    s.Gl = gpt_query_groups(c) / c->tp_size;
    s.D = c->kv_channels;
    s.cp = c->cp_size;
    s.rank = c->cp_rank;
    s.N = (size_t)s.B * (size_t)s.T;
    s.kv_count = s.N * 2 * (size_t)s.Gl * (size_t)s.D;
    return s;
}

attention_span context_parallel_span(const gpt_config *c, int cp_rank) {
    attention_span span;
    int piece = c->seq_length / 2;
    span.pieces = 2;
    span.piece_length = piece;
    span.start[0] = cp_rank * piece;
    span.start[1] = (2 * c->cp_size - 1 - cp_rank) * piece;
    return span;
}

/* --cp-comm-type of a layer (a per-layer list covers at most GPT_MAX_MOE_LAYERS layers; past
 * them the one type given for all) */
static int uses_allgather(const gpt_model *m, int layer) {
    return m->config.cp_allgather[layer < GPT_MAX_MOE_LAYERS ? layer : 0];
}

void context_parallel_scratch_allocate(gpt_model *m) {
    const gpt_config *c = &m->config;
    if (c->cp_size <= 1) return;
    const kernel_ops *ops = m->ops;
    if (!ops->attention_block_forward || !m->comm->irecv)
        user_error("--context-parallel-size %d: context parallelism runs on the CPU backend for now (--device cpu); "
                   "the %s backend's ring-attention kernels are not built yet", c->cp_size, ops->name);
    cp_shapes s = shapes_of(m);
    if (ops->attention_workspace_bytes(s.B, s.T, s.Hl, s.D) < sizeof(float) * s.N * (size_t)s.Hl)
        FATAL("the attention workspace cannot hold the log-sum-exp of context parallelism");
    struct context_parallel_scratch *x = calloc(1, sizeof *x);
    CHECK(x, "out of host memory");
    size_t kv_bytes = ops->act_bytes * s.kv_count;
    int any_p2p = 0, any_allgather = 0;
    for (int l = 0; l < c->num_layers && l < GPT_MAX_MOE_LAYERS; l++) {
        if (uses_allgather(m, l)) any_allgather = 1;
        else any_p2p = 1;
    }
    for (int k = 0; k < 2; k++) {
        x->kv[k] = any_p2p || k == 0 ? ops->alloc(kv_bytes) : NULL;
        x->dkv[k] = any_p2p || k == 0 ? ops->alloc(kv_bytes) : NULL;
    }
    x->block_out = ops->alloc(ops->act_bytes * s.N * (size_t)s.Hl * (size_t)s.D);
    x->block_lse = ops->alloc(sizeof(float) * s.N * (size_t)s.Hl);
    if (any_allgather) {
        x->kv_all = ops->alloc(kv_bytes * (size_t)s.cp);
        x->dkv_all = ops->alloc(kv_bytes * (size_t)s.cp);
    }
    m->cp_scratch = x;
}

void context_parallel_scratch_release(gpt_model *m) {
    struct context_parallel_scratch *x = m->cp_scratch;
    if (!x) return;
    void *buffers[] = {x->kv[0], x->kv[1], x->dkv[0], x->dkv[1], x->block_out, x->block_lse, x->kv_all, x->dkv_all};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
    free(x);
    m->cp_scratch = NULL;
}

/* the block of step `step` of the ring: this rank's queries over the keys and values of rank
 * rank - step */
static int step_source(const cp_shapes *s, int step) { return (s->rank - step + s->cp) % s->cp; }

static attention_block_spec block_spec(const gpt_model *m, int source) {
    const gpt_config *c = &m->config;
    attention_block_spec spec;
    spec.q = context_parallel_span(c, c->cp_rank);
    spec.k = context_parallel_span(c, source);
    spec.causal = 1;
    spec.total_T = c->seq_length * c->cp_size;
    spec.head_start = c->tp_rank * (c->num_attention_heads / c->tp_size);
    spec.total_heads = c->num_attention_heads;
    return spec;
}

/* step `step` of the forward on the block kv: straight into out and lse first, merged after */
static void forward_block(gpt_model *m, const cp_shapes *s, int step, void *out, float *lse, const void *qkv,
                          const void *kv, dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    struct context_parallel_scratch *x = m->cp_scratch;
    attention_block_spec spec = block_spec(m, step_source(s, step));
    if (step == 0) {
        ops->attention_block_forward(out, lse, qkv, kv, s->B, s->Hl, s->Gl, s->D, spec, rng);
        return;
    }
    ops->attention_block_forward(x->block_out, x->block_lse, qkv, kv, s->B, s->Hl, s->Gl, s->D, spec, rng);
    ops->attention_merge(out, lse, x->block_out, x->block_lse, s->B, s->T, s->Hl, s->D);
}

void context_parallel_attention_forward(gpt_model *m, int layer, void *out, void *workspace, const void *qkv,
                                        dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    const comm_ops *comm = m->comm;
    const comm_group *group = m->config.cp_group;
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    float *lse = workspace;
    size_t kv_bytes = ops->act_bytes * s.kv_count;
    if (uses_allgather(m, layer)) {
        void *own = (char *)x->kv_all + (size_t)s.rank * kv_bytes;
        ops->attention_kv_pack(own, qkv, (int)s.N, s.Hl, s.Gl, s.D);
        comm->allgather(own, x->kv_all, s.kv_count, m->act_dtype, group);
        for (int step = 0; step < s.cp; step++)
            forward_block(m, &s, step, out, lse, qkv, (char *)x->kv_all + (size_t)step_source(&s, step) * kv_bytes, rng);
        return;
    }
    int next = (s.rank + 1) % s.cp, previous = (s.rank + s.cp - 1) % s.cp;
    ops->attention_kv_pack(x->kv[0], qkv, (int)s.N, s.Hl, s.Gl, s.D);
    for (int step = 0; step < s.cp; step++) {
        void *in_hand = x->kv[step % 2];
        comm_request sent, received;
        memset(&sent, 0, sizeof sent);
        memset(&received, 0, sizeof received);
        if (step + 1 < s.cp) {  /* the next block arrives while this one is computed */
            comm->irecv(x->kv[(step + 1) % 2], s.kv_count, m->act_dtype, previous, TAG_KV, group, &received);
            comm->send(in_hand, s.kv_count, m->act_dtype, next, TAG_KV, group, &sent);
        }
        forward_block(m, &s, step, out, lse, qkv, in_hand, rng);
        comm->wait(&sent);
        comm->wait(&received);
    }
}

void context_parallel_attention_backward(gpt_model *m, int layer, void *dqkv, const void *dout, const void *qkv,
                                         const void *out, const void *workspace, dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    const comm_ops *comm = m->comm;
    const comm_group *group = m->config.cp_group;
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    const float *lse = workspace;
    size_t kv_bytes = ops->act_bytes * s.kv_count;
    ops->zero(dqkv, ops->act_bytes * s.N * (size_t)(s.Hl + 2 * s.Gl) * (size_t)s.D);
    if (uses_allgather(m, layer)) {
        void *own = (char *)x->kv_all + (size_t)s.rank * kv_bytes;
        ops->attention_kv_pack(own, qkv, (int)s.N, s.Hl, s.Gl, s.D);
        comm->allgather(own, x->kv_all, s.kv_count, m->act_dtype, group);
        ops->zero(x->dkv_all, kv_bytes * (size_t)s.cp);
        for (int step = 0; step < s.cp; step++) {
            int source = step_source(&s, step);
            ops->attention_block_backward(dqkv, (char *)x->dkv_all + (size_t)source * kv_bytes, dout, qkv,
                                          (char *)x->kv_all + (size_t)source * kv_bytes, out, lse, s.B, s.Hl, s.Gl, s.D,
                                          block_spec(m, source), rng);
        }
        comm->reduce_scatter(x->dkv_all, x->dkv[0], s.kv_count, m->act_dtype, group);
        ops->attention_kv_unpack(dqkv, x->dkv[0], (int)s.N, s.Hl, s.Gl, s.D);
        return;
    }
    /* the keys and values go around as in the forward; the gradient of the block in hand holds
     * the contributions of the ranks it has passed, gets this rank's, and follows the block */
    int next = (s.rank + 1) % s.cp, previous = (s.rank + s.cp - 1) % s.cp;
    ops->attention_kv_pack(x->kv[0], qkv, (int)s.N, s.Hl, s.Gl, s.D);
    ops->zero(x->dkv[0], kv_bytes);
    for (int step = 0; step < s.cp; step++) {
        int here = step % 2, there = (step + 1) % 2;
        comm_request requests[4];
        memset(requests, 0, sizeof requests);
        if (step + 1 < s.cp) {
            comm->irecv(x->kv[there], s.kv_count, m->act_dtype, previous, TAG_KV, group, &requests[0]);
            comm->send(x->kv[here], s.kv_count, m->act_dtype, next, TAG_KV, group, &requests[1]);
        }
        /* the gradient of the next block (after the last step: of this rank's own) */
        comm->irecv(x->dkv[there], s.kv_count, m->act_dtype, previous, TAG_DKV, group, &requests[2]);
        ops->attention_block_backward(dqkv, x->dkv[here], dout, qkv, x->kv[here], out, lse, s.B, s.Hl, s.Gl, s.D,
                                      block_spec(m, step_source(&s, step)), rng);
        comm->send(x->dkv[here], s.kv_count, m->act_dtype, next, TAG_DKV, group, &requests[3]);
        for (int k = 0; k < 4; k++) comm->wait(&requests[k]);
    }
    ops->attention_kv_unpack(dqkv, x->dkv[s.cp % 2], (int)s.N, s.Hl, s.Gl, s.D);
}

/* ---- per-piece positions ---- */

void context_parallel_rope(gpt_model *m, void *qkv, rope_spec rope, int backward) {
    const gpt_config *c = &m->config;
    cp_shapes s = shapes_of(m);
    attention_span span = context_parallel_span(c, c->cp_rank);
    size_t row = (size_t)(s.Hl + 2 * s.Gl) * (size_t)s.D;
    for (int b = 0; b < s.B; b++)
        for (int p = 0; p < span.pieces; p++) {
            rope_spec piece = rope;
            piece.position_start = rope.position_start + span.start[p];
            void *rows = act_at(m->ops, qkv, ((size_t)b * s.T + (size_t)p * span.piece_length) * row);
            if (backward) m->ops->rope_backward(rows, 1, span.piece_length, s.Hl, s.Gl, s.D, piece);
            else m->ops->rope_forward(rows, 1, span.piece_length, s.Hl, s.Gl, s.D, piece);
        }
}

void context_parallel_position_embedding_forward(gpt_model *m, void *out, const void *wpe) {
    const gpt_config *c = &m->config;
    attention_span span = context_parallel_span(c, c->cp_rank);
    size_t C = (size_t)c->hidden_size;
    for (int b = 0; b < c->micro_batch_size; b++)
        for (int p = 0; p < span.pieces; p++)
            m->ops->position_embedding_forward(
                act_at(m->ops, out, ((size_t)b * c->seq_length + (size_t)p * span.piece_length) * C), wpe, 1,
                span.piece_length, c->hidden_size, span.start[p]);
}

void context_parallel_position_embedding_backward(gpt_model *m, float *dwpe, const void *dout) {
    const gpt_config *c = &m->config;
    attention_span span = context_parallel_span(c, c->cp_rank);
    size_t C = (size_t)c->hidden_size;
    for (int b = 0; b < c->micro_batch_size; b++)
        for (int p = 0; p < span.pieces; p++)
            m->ops->position_embedding_backward(
                dwpe, act_at(m->ops, (void *)dout, ((size_t)b * c->seq_length + (size_t)p * span.piece_length) * C), 1,
                span.piece_length, c->hidden_size, span.start[p]);
}
