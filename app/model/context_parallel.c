/* context_parallel.c: ring attention and the per-piece position operations of context
 * parallelism (see context_parallel.h): p2p, allgather, a2a and the hierarchical a2a+p2p. */
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
    /* a2a and a2a+p2p: [A][N, width] blocks (A: the a2a group's size): the sequence of the a2a
     * group's rows for this rank's share of the heads (qkv, out, dout, the gradient of qkv), and
     * the exchange's two sides; the packed keys and values of the blocks and their gradients are
     * kv[] and dkv[], which go around the ring of a2a+p2p */
    void *heads_qkv, *heads_out, *heads_dout, *heads_dqkv, *send, *received;
    /* a2a with one ring member (the whole context-parallel group exchanges heads): the group's
     * sequence in its natural order, [B, CP T, width], for one attention call over it (qkv,
     * out, dout, the gradient of qkv); full_workspace: that call's workspace where the layer's
     * (sized for [B, T] rows of every local head) cannot hold it (the CPU's probabilities) */
    void *natural_qkv, *natural_out, *natural_dout, *natural_dqkv, *full_workspace;
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
static cp_comm_kind comm_type(const gpt_model *m, int layer) {
    return (cp_comm_kind)m->config.cp_comm_type[layer < GPT_MAX_MOE_LAYERS ? layer : 0];
}

typedef struct cp_levels {
    int a2a_size, ring_size;   /* A and R */
    int a2a_index, ring_index; /* this rank's places: CP rank = ring_index x A + a2a_index */
} cp_levels;

static cp_levels levels_of(const gpt_model *m, int layer) {
    const gpt_config *c = &m->config;
    cp_levels L;
    L.a2a_size = comm_type(m, layer) == CP_COMM_A2A_P2P ? c->cp_a2a_size : c->cp_size;
    if (L.a2a_size < 1 || c->cp_size % L.a2a_size != 0)
        FATAL("a2a+p2p: the a2a group size %d does not divide the context-parallel size %d", L.a2a_size, c->cp_size);
    L.ring_size = c->cp_size / L.a2a_size;
    L.a2a_index = c->cp_rank % L.a2a_size;
    L.ring_index = c->cp_rank / L.a2a_size;
    return L;
}

/* a layer whose a2a group is the whole context-parallel group (a ring of one): one attention
 * call over the whole sequence (whole_forward) */
static int whole_group_a2a(const gpt_model *m, int layer) {
    cp_comm_kind kind = comm_type(m, layer);
    return (kind == CP_COMM_A2A || kind == CP_COMM_A2A_P2P) && levels_of(m, layer).ring_size == 1;
}

/* one attention call over the whole sequence of the context-parallel group (a2a with one ring
 * member, 1/CP of the local heads) keeps what its backward needs in the layer's workspace when
 * that is large enough (CUDA: a log-sum-exp per row and head, the same size); otherwise (the
 * CPU's probabilities) in full_workspace, recomputed before the backward */
static int full_call_fits(const gpt_model *m) {
    cp_shapes s = shapes_of(m);
    return m->ops->attention_workspace_bytes(s.B, s.T * s.cp, s.Hl / s.cp, s.D) <=
           m->ops->attention_workspace_bytes(s.B, s.T, s.Hl, s.D);
}

void context_parallel_scratch_allocate(gpt_model *m) {
    const gpt_config *c = &m->config;
    if (c->cp_size <= 1) return;
    const kernel_ops *ops = m->ops;
    if (!ops->attention_block_forward || !m->comm->irecv)
        user_error("--context-parallel-size %d: the %s backend has no ring-attention kernels "
                   "(kernel_ops.attention_block_forward) or no point-to-point receive", c->cp_size, ops->name);
    cp_shapes s = shapes_of(m);
    if (ops->attention_workspace_bytes(s.B, s.T, s.Hl, s.D) < sizeof(float) * s.N * (size_t)s.Hl)
        FATAL("the attention workspace cannot hold the log-sum-exp of context parallelism");
    struct context_parallel_scratch *x = calloc(1, sizeof *x);
    CHECK(x, "out of host memory");
    size_t kv_bytes = ops->act_bytes * s.kv_count;
    int any[4] = {0, 0, 0, 0};
    for (int l = 0; l < c->num_layers; l++) any[comm_type(m, l)] = 1;
    for (int l = 0; l < c->num_layers; l++) /* a ring of one is a2a (one attention call) */
        if (comm_type(m, l) == CP_COMM_A2A_P2P && levels_of(m, l).ring_size > 1 && strcmp(ops->name, "cpu") != 0)
            user_error("--cp-comm-type a2a+p2p (hierarchical context parallelism) is built on the CPU backend only: "
                       "use p2p, allgather or a2a with --device %s", ops->name);
    int any_a2a = any[CP_COMM_A2A] || any[CP_COMM_A2A_P2P];
    int any_p2p = any[CP_COMM_P2P] || any_a2a, any_allgather = any[CP_COMM_ALLGATHER];
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
    if (any_a2a) {  /* the blocks of the a2a group's rows hold 1/A of the heads: N x width each */
        size_t qkv_bytes = ops->act_bytes * s.N * (size_t)(s.Hl + 2 * s.Gl) * (size_t)s.D;
        size_t out_bytes = ops->act_bytes * s.N * (size_t)s.Hl * (size_t)s.D;
        void **qkv_sized[] = {&x->heads_qkv, &x->heads_dqkv, &x->send, &x->received};
        for (size_t i = 0; i < sizeof qkv_sized / sizeof *qkv_sized; i++) *qkv_sized[i] = ops->alloc(qkv_bytes);
        x->heads_out = ops->alloc(out_bytes);
        x->heads_dout = ops->alloc(out_bytes);
        int whole = 0;
        for (int l = 0; l < c->num_layers; l++) whole |= whole_group_a2a(m, l);
        if (whole) {
            x->natural_qkv = ops->alloc(qkv_bytes);
            x->natural_dqkv = ops->alloc(qkv_bytes);
            x->natural_out = ops->alloc(out_bytes);
            x->natural_dout = ops->alloc(out_bytes);
            if (!full_call_fits(m))
                x->full_workspace = ops->alloc(ops->attention_workspace_bytes(s.B, s.T * s.cp, s.Hl / s.cp, s.D));
        }
    }
    m->cp_scratch = x;
}

void context_parallel_scratch_release(gpt_model *m) {
    struct context_parallel_scratch *x = m->cp_scratch;
    if (!x) return;
    void *buffers[] = {x->kv[0], x->kv[1], x->dkv[0], x->dkv[1], x->block_out, x->block_lse, x->kv_all, x->dkv_all,
                       x->heads_qkv, x->heads_out, x->heads_dout, x->heads_dqkv, x->send, x->received,
                       x->natural_qkv, x->natural_out, x->natural_dout, x->natural_dqkv, x->full_workspace};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
    free(x);
    m->cp_scratch = NULL;
}

/* the block of step `step` of the ring: this rank's queries over the keys and values of rank
 * rank - step */
static int step_source(const cp_shapes *s, int step) { return (s->rank - step + s->cp) % s->cp; }

/* the block of rank q_rank's rows (queries) against rank k_rank's (keys), over this rank's heads
 * (after an a2a over groups of a2a_size ranks: its 1/a2a_size share of them; 0: no a2a), with
 * layer `layer`'s sliding window */
static attention_block_spec rows_spec(const gpt_model *m, int layer, int q_rank, int k_rank, int a2a_size) {
    const gpt_config *c = &m->config;
    int local_heads = c->num_attention_heads / c->tp_size;
    attention_block_spec spec;
    spec.q = context_parallel_span(c, q_rank);
    spec.k = context_parallel_span(c, k_rank);
    spec.causal = 1;
    spec.total_T = c->seq_length * c->cp_size;
    spec.head_start = c->tp_rank * local_heads + (a2a_size ? c->cp_rank % a2a_size * (local_heads / a2a_size) : 0);
    spec.total_heads = c->num_attention_heads;
    spec.window_left = gpt_layer_window(c, layer);
    spec.windowed = spec.window_left >= 0;
    return spec;
}

static attention_block_spec block_spec(const gpt_model *m, int layer, int source) {
    return rows_spec(m, layer, m->config.cp_rank, source, 0);
}

/* step `step` of the forward on the block kv: straight into out and lse first, merged after */
static void forward_block(gpt_model *m, int layer, const cp_shapes *s, int step, void *out, float *lse,
                          const void *qkv, const void *kv, dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    struct context_parallel_scratch *x = m->cp_scratch;
    attention_block_spec spec = block_spec(m, layer, step_source(s, step));
    if (step == 0) {
        ops->attention_block_forward(out, lse, qkv, kv, s->B, s->Hl, s->Gl, s->D, spec, rng);
        return;
    }
    ops->attention_block_forward(x->block_out, x->block_lse, qkv, kv, s->B, s->Hl, s->Gl, s->D, spec, rng);
    ops->attention_merge(out, lse, x->block_out, x->block_lse, s->B, s->T, s->Hl, s->D);
}

/* ---- a2a and a2a+p2p: the a2a group's rows for 1/A of the heads ----
 * a2a exchanges the heads for the sequence among all CP ranks (A = CP, a ring of one).
 * a2a+p2p (Megatron's hierarchical context parallelism) does it among A consecutive CP ranks
 * (--hierarchical-context-parallel-sizes' first size), then the packed keys and values of the
 * group's A blocks go around a p2p ring of the R = CP / A ranks A apart (same share of the heads)
 * as in p2p's ring attention, their gradients following them in the backward. */

/* the all-to-all among the a2a group (over the context-parallel group, nothing to or from the
 * ranks outside it) of equal blocks of `block` elements: block k of send goes to the group's
 * member k, block p of received comes from member p */
static void exchange_blocks(gpt_model *m, const cp_levels *L, const void *send, void *received, size_t block) {
    int cp = m->config.cp_size;
    size_t *counts = calloc(2 * (size_t)cp, sizeof(size_t));
    CHECK(counts, "out of host memory");
    for (int k = 0; k < cp; k++)
        if (k / L->a2a_size == L->ring_index) {
            counts[k] = block;
            counts[cp + k] = (size_t)(k % L->a2a_size) * block;
        }
    m->comm->alltoallv(send, counts, counts + cp, received, counts, counts + cp, m->act_dtype, m->config.cp_group);
    free(counts);
}

/* in [N, A x width] (this rank's rows, every head) -> out [A][N, width]: block p holds member p's
 * rows of this rank's share of the columns (its heads) */
static void heads_to_sequence(gpt_model *m, const cp_levels *L, void *out, const void *in, int width) {
    cp_shapes s = shapes_of(m);
    struct context_parallel_scratch *x = m->cp_scratch;
    m->ops->columns_to_blocks(x->send, in, (int)s.N, L->a2a_size, width);
    exchange_blocks(m, L, x->send, out, s.N * (size_t)width);
}

/* the inverse: in [A][N, width] (the group's rows, this rank's heads) -> out [N, A x width] */
static void sequence_to_heads(gpt_model *m, const cp_levels *L, void *out, const void *in, int width) {
    cp_shapes s = shapes_of(m);
    struct context_parallel_scratch *x = m->cp_scratch;
    exchange_blocks(m, L, in, x->received, s.N * (size_t)width);
    m->ops->blocks_to_columns(out, x->received, (int)s.N, L->a2a_size, width);
}

/* element offset of block p of a [A][N, width] buffer */
static void *block_at(const gpt_model *m, void *base, int p, int width) {
    return act_at(m->ops, base, (size_t)p * (size_t)m->config.micro_batch_size * (size_t)m->config.seq_length * (size_t)width);
}

/* the CP ranks of this rank's ring neighbours (same a2a_index, ring_index +- 1) */
static int ring_next(const cp_levels *L) { return (L->ring_index + 1) % L->ring_size * L->a2a_size + L->a2a_index; }
static int ring_previous(const cp_levels *L) {
    return (L->ring_index + L->ring_size - 1) % L->ring_size * L->a2a_size + L->a2a_index;
}

static void a2a_forward(gpt_model *m, int layer, void *out, float *lse, const void *qkv, dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    const comm_ops *comm = m->comm;
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    cp_levels L = levels_of(m, layer);
    int A = L.a2a_size, R = L.ring_size;
    int Hh = s.Hl / A, Gh = s.Gl / A, W = (Hh + 2 * Gh) * s.D, O = Hh * s.D, KVW = 2 * Gh * s.D;
    heads_to_sequence(m, &L, x->heads_qkv, qkv, W);
    for (int p = 0; p < A; p++)
        ops->attention_kv_pack(block_at(m, x->kv[0], p, KVW), block_at(m, x->heads_qkv, p, W), (int)s.N, Hh, Gh, s.D);
    for (int step = 0; step < R; step++) {
        void *in_hand = x->kv[step % 2];
        comm_request sent, received;
        memset(&sent, 0, sizeof sent);
        memset(&received, 0, sizeof received);
        if (step + 1 < R) {  /* the next ring member's blocks arrive while these are computed */
            comm->irecv(x->kv[(step + 1) % 2], s.kv_count, m->act_dtype, ring_previous(&L), TAG_KV, m->config.cp_group, &received);
            comm->send(in_hand, s.kv_count, m->act_dtype, ring_next(&L), TAG_KV, m->config.cp_group, &sent);
        }
        int source_ring = (L.ring_index - step + R) % R;
        for (int p = 0; p < A; p++) {  /* member p's rows, the diagonal block first */
            void *o = block_at(m, x->heads_out, p, O), *q = block_at(m, x->heads_qkv, p, W);
            float *l = lse + (size_t)p * s.B * Hh * s.T;
            for (int r = 0; r < A; r++) {
                int k = (p - r + A) % A;
                attention_block_spec spec = rows_spec(m, layer, L.ring_index * A + p, source_ring * A + k, A);
                void *kv = block_at(m, in_hand, k, KVW);
                if (step == 0 && r == 0) {
                    ops->attention_block_forward(o, l, q, kv, s.B, Hh, Gh, s.D, spec, rng);
                    continue;
                }
                ops->attention_block_forward(x->block_out, x->block_lse, q, kv, s.B, Hh, Gh, s.D, spec, rng);
                ops->attention_merge(o, l, x->block_out, x->block_lse, s.B, s.T, Hh, s.D);
            }
        }
        comm->wait(&sent);
        comm->wait(&received);
    }
    sequence_to_heads(m, &L, out, x->heads_out, O);
}

static void a2a_backward(gpt_model *m, int layer, void *dqkv, const void *dout, const void *qkv, const void *out,
                         const float *lse, dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    const comm_ops *comm = m->comm;
    const comm_group *group = m->config.cp_group;
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    cp_levels L = levels_of(m, layer);
    int A = L.a2a_size, R = L.ring_size;
    int Hh = s.Hl / A, Gh = s.Gl / A, W = (Hh + 2 * Gh) * s.D, O = Hh * s.D, KVW = 2 * Gh * s.D;
    heads_to_sequence(m, &L, x->heads_qkv, qkv, W);
    heads_to_sequence(m, &L, x->heads_out, out, O);
    heads_to_sequence(m, &L, x->heads_dout, dout, O);
    ops->zero(x->heads_dqkv, ops->act_bytes * s.N * (size_t)A * (size_t)W);
    ops->zero(x->dkv[0], ops->act_bytes * s.kv_count);
    for (int p = 0; p < A; p++)
        ops->attention_kv_pack(block_at(m, x->kv[0], p, KVW), block_at(m, x->heads_qkv, p, W), (int)s.N, Hh, Gh, s.D);
    /* as p2p's backward: the gradient of the blocks in hand holds the contributions of the ring
     * members they have passed, gets this rank's, and follows them */
    for (int step = 0; step < R; step++) {
        int here = step % 2, there = (step + 1) % 2;
        comm_request requests[4];
        memset(requests, 0, sizeof requests);
        if (step + 1 < R) {
            comm->irecv(x->kv[there], s.kv_count, m->act_dtype, ring_previous(&L), TAG_KV, group, &requests[0]);
            comm->send(x->kv[here], s.kv_count, m->act_dtype, ring_next(&L), TAG_KV, group, &requests[1]);
        }
        if (R > 1) comm->irecv(x->dkv[there], s.kv_count, m->act_dtype, ring_previous(&L), TAG_DKV, group, &requests[2]);
        int source_ring = (L.ring_index - step + R) % R;
        for (int p = 0; p < A; p++)
            for (int r = 0; r < A; r++) {
                int k = (p - r + A) % A;
                ops->attention_block_backward(block_at(m, x->heads_dqkv, p, W), block_at(m, x->dkv[here], k, KVW),
                                              block_at(m, x->heads_dout, p, O), block_at(m, x->heads_qkv, p, W),
                                              block_at(m, x->kv[here], k, KVW), block_at(m, x->heads_out, p, O),
                                              lse + (size_t)p * s.B * Hh * s.T, s.B, Hh, Gh, s.D,
                                              rows_spec(m, layer, L.ring_index * A + p, source_ring * A + k, A), rng);
            }
        if (R > 1) comm->send(x->dkv[here], s.kv_count, m->act_dtype, ring_next(&L), TAG_DKV, group, &requests[3]);
        for (int k = 0; k < 4; k++) comm->wait(&requests[k]);
    }
    void *own_dkv = R > 1 ? x->dkv[R % 2] : x->dkv[0];  /* back home after R steps */
    for (int p = 0; p < A; p++)
        ops->attention_kv_unpack(block_at(m, x->heads_dqkv, p, W), block_at(m, own_dkv, p, KVW), (int)s.N, Hh, Gh, s.D);
    sequence_to_heads(m, &L, dqkv, x->heads_dqkv, W);
}

/* ---- a2a over the whole context-parallel group: one attention call (Ulysses) ----
 * With one ring member (--cp-comm-type a2a, or a2a+p2p of ring size 1) the all-to-all gives
 * this rank every rank's rows for its 1/CP of the heads. Rank p's rows are the sequence's
 * pieces p and 2 CP - 1 - p (context_parallel_span); put in their natural order, they are the
 * whole sequence, and the backend's own causal attention runs over it in one call (on Hopper:
 * the wgmma kernels), with the dropout numbering of the blocks (the same global positions and
 * heads). */

/* blocks [CP][B, T, width] (rank p's rows) <-> natural [B, CP T, width]; to_natural 0: back */
static void natural_order(gpt_model *m, void *natural, void *blocks, int width, int to_natural) {
    cp_shapes s = shapes_of(m);
    const kernel_ops *ops = m->ops;
    size_t piece = (size_t)s.T / 2, bytes = ops->act_bytes * piece * (size_t)width;
    for (int p = 0; p < s.cp; p++)
        for (int half = 0; half < 2; half++) {
            size_t chunk = half == 0 ? (size_t)p : (size_t)(2 * s.cp - 1 - p);
            for (int b = 0; b < s.B; b++) {
                void *in_block = act_at(ops, block_at(m, blocks, p, width), ((size_t)b * s.T + half * piece) * width);
                void *in_natural = act_at(ops, natural, ((size_t)b * s.T * s.cp + chunk * piece) * width);
                if (to_natural) ops->copy(in_natural, in_block, bytes);
                else ops->copy(in_block, in_natural, bytes);
            }
        }
}

typedef struct whole_call {
    cp_levels L;
    int Hh, Gh, W, O, T, head_start, window_left;
} whole_call;

static whole_call whole_call_of(const gpt_model *m, int layer) {
    const gpt_config *c = &m->config;
    cp_shapes s = shapes_of(m);
    whole_call w;
    w.L = levels_of(m, layer); /* A = CP, a ring of one */
    w.Hh = s.Hl / s.cp, w.Gh = s.Gl / s.cp;
    w.W = (w.Hh + 2 * w.Gh) * s.D, w.O = w.Hh * s.D, w.T = s.T * s.cp;
    w.head_start = c->tp_rank * s.Hl + s.rank * w.Hh;
    w.window_left = gpt_layer_window(c, layer);
    return w;
}

/* qkv (this rank's rows, every local head) -> natural_qkv (every rank's rows, this rank's heads) */
static void gather_natural_qkv(gpt_model *m, const whole_call *w, const void *qkv) {
    struct context_parallel_scratch *x = m->cp_scratch;
    heads_to_sequence(m, &w->L, x->heads_qkv, qkv, w->W);
    natural_order(m, x->natural_qkv, x->heads_qkv, w->W, 1);
}

static void whole_forward(gpt_model *m, int layer, void *out, void *workspace, const void *qkv, dropout_rng rng) {
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    whole_call w = whole_call_of(m, layer);
    gather_natural_qkv(m, &w, qkv);
    m->ops->attention_forward(x->natural_out, full_call_fits(m) ? workspace : x->full_workspace, x->natural_qkv, s.B,
                              w.T, w.Hh, w.Gh, s.D, w.head_start, m->config.num_attention_heads, w.window_left, rng);
    natural_order(m, x->natural_out, x->heads_out, w.O, 0);
    sequence_to_heads(m, &w.L, out, x->heads_out, w.O);
}

static void whole_backward(gpt_model *m, int layer, void *dqkv, const void *dout, const void *qkv, const void *out,
                           const void *workspace, dropout_rng rng) {
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    whole_call w = whole_call_of(m, layer);
    int total_heads = m->config.num_attention_heads;
    gather_natural_qkv(m, &w, qkv);
    heads_to_sequence(m, &w.L, x->heads_dout, dout, w.O);
    natural_order(m, x->natural_dout, x->heads_dout, w.O, 1);
    const void *saved = workspace;
    if (full_call_fits(m)) {
        heads_to_sequence(m, &w.L, x->heads_out, out, w.O);
        natural_order(m, x->natural_out, x->heads_out, w.O, 1);
    } else { /* the forward again, for its workspace (the same bits as the forward's output) */
        m->ops->attention_forward(x->natural_out, x->full_workspace, x->natural_qkv, s.B, w.T, w.Hh, w.Gh, s.D,
                                  w.head_start, total_heads, w.window_left, rng);
        saved = x->full_workspace;
    }
    m->ops->attention_backward(x->natural_dqkv, NULL, x->natural_dout, x->natural_qkv, x->natural_out, saved, s.B, w.T,
                               w.Hh, w.Gh, s.D, w.head_start, total_heads, w.window_left, rng);
    natural_order(m, x->natural_dqkv, x->heads_dqkv, w.W, 0);
    sequence_to_heads(m, &w.L, dqkv, x->heads_dqkv, w.W);
}

/* ---- the attention ---- */

void context_parallel_attention_forward(gpt_model *m, int layer, void *out, void *workspace, const void *qkv,
                                        dropout_rng rng) {
    const kernel_ops *ops = m->ops;
    const comm_ops *comm = m->comm;
    const comm_group *group = m->config.cp_group;
    struct context_parallel_scratch *x = m->cp_scratch;
    cp_shapes s = shapes_of(m);
    float *lse = workspace;
    size_t kv_bytes = ops->act_bytes * s.kv_count;
    if (whole_group_a2a(m, layer)) {
        whole_forward(m, layer, out, workspace, qkv, rng);
        return;
    }
    if (comm_type(m, layer) == CP_COMM_A2A || comm_type(m, layer) == CP_COMM_A2A_P2P) {
        a2a_forward(m, layer, out, lse, qkv, rng);
        return;
    }
    if (comm_type(m, layer) == CP_COMM_ALLGATHER) {
        void *own = (char *)x->kv_all + (size_t)s.rank * kv_bytes;
        ops->attention_kv_pack(own, qkv, (int)s.N, s.Hl, s.Gl, s.D);
        comm->allgather(own, x->kv_all, s.kv_count, m->act_dtype, group);
        for (int step = 0; step < s.cp; step++)
            forward_block(m, layer, &s, step, out, lse, qkv, (char *)x->kv_all + (size_t)step_source(&s, step) * kv_bytes,
                          rng);
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
        forward_block(m, layer, &s, step, out, lse, qkv, in_hand, rng);
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
    if (whole_group_a2a(m, layer)) {
        whole_backward(m, layer, dqkv, dout, qkv, out, workspace, rng);
        return;
    }
    if (comm_type(m, layer) == CP_COMM_A2A || comm_type(m, layer) == CP_COMM_A2A_P2P) {
        a2a_backward(m, layer, dqkv, dout, qkv, out, lse, rng);
        return;
    }
    ops->zero(dqkv, ops->act_bytes * s.N * (size_t)(s.Hl + 2 * s.Gl) * (size_t)s.D);
    if (comm_type(m, layer) == CP_COMM_ALLGATHER) {
        void *own = (char *)x->kv_all + (size_t)s.rank * kv_bytes;
        ops->attention_kv_pack(own, qkv, (int)s.N, s.Hl, s.Gl, s.D);
        comm->allgather(own, x->kv_all, s.kv_count, m->act_dtype, group);
        ops->zero(x->dkv_all, kv_bytes * (size_t)s.cp);
        for (int step = 0; step < s.cp; step++) {
            int source = step_source(&s, step);
            ops->attention_block_backward(dqkv, (char *)x->dkv_all + (size_t)source * kv_bytes, dout, qkv,
                                          (char *)x->kv_all + (size_t)source * kv_bytes, out, lse, s.B, s.Hl, s.Gl, s.D,
                                          block_spec(m, layer, source), rng);
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
                                      block_spec(m, layer, step_source(&s, step)), rng);
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
