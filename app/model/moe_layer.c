/* moe_layer.c: the mixture-of-experts MLP (see moe_layer.h): router, token permutation, one
 * GEMM pair per expert, weighted combination, and their backward, through kernel_ops; plus the
 * parser of Megatron's --moe-layer-freq. */
#include "app/model/moe_layer.h"
#include "app/model/layer_pattern.h"
#include "app/model/fp8_linear.h"

#include "app/model/moe_expert_bias.h"
#include "app/model/moe_forced_routing.h"
#include "app/model/moe_shared_expert.h"
#include "app/model/mlp_gelu.h"

#include "app/core/error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ --moe-layer-freq */

int moe_layer_pattern_parse(const char *text, int num_layers, unsigned char *moe_layer, char *err, size_t errlen) {
    memset(moe_layer, 0, GPT_MAX_MOE_LAYERS);
    if (num_layers > GPT_MAX_MOE_LAYERS) {
        snprintf(err, errlen, "--num-layers %d: a mixture-of-experts model has at most %d layers here", num_layers,
                 GPT_MAX_MOE_LAYERS);
        return -1;
    }
    char *end;
    long every = strtol(text, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end != text && !*end) {
        if (every < 1) {
            snprintf(err, errlen, "--moe-layer-freq %s: an integer must be at least 1", text);
            return -1;
        }
        for (int l = 0; l < num_layers; l++) moe_layer[l] = l % every == 0;
        return 0;
    }
    return layer_pattern_parse("moe-layer-freq", text, num_layers, moe_layer, GPT_MAX_MOE_LAYERS, err, errlen);
}

/* ------------------------------------------------------------------ buffers */

typedef struct moe_shapes {
    int N, C, E, k, M;  /* M = N k: the most permuted rows of this rank's tokens */
    int ep, El, R;      /* expert-parallel ranks, experts per rank, R = ep M: the most rows one
                         * rank's experts can receive */
    int Fl, FC1l;       /* an expert's local fc2 inputs and fc1 outputs */
    int t0, Nl;         /* the token rows this rank dispatches, [t0, t0 + Nl): all N, or with
                         * experts split over etp < tp ranks its expert tensor-parallel group's
                         * share of them */
    int sliced;         /* Nl < N possible: etp < tp */
} moe_shapes;

static moe_shapes shapes_of(const gpt_model *m) {
    const gpt_config *c = &m->config;
    moe_shapes s;
    s.N = moe_token_rows(m);
    s.C = c->hidden_size;
    s.E = c->num_experts;
    s.k = c->moe_router.topk;
    s.M = s.N * s.k;
    s.ep = c->ep_size > 1 ? c->ep_size : 1;
    s.El = s.E / s.ep;
    s.R = s.ep * s.M;
    int etp = c->etp_size > 0 ? c->etp_size : c->tp_size;
    s.Fl = c->moe_ffn_hidden_size / etp;
    s.FC1l = (c->swiglu ? 2 : 1) * s.Fl;
    /* Megatron's alltoall dispatcher with --expert-tensor-parallel-size etp < tp under sequence
     * parallelism: each tensor-parallel rank sends its own sequence share's tokens (the rows
     * its reduce-scatter keeps) to the experts, and the expert tensor-parallel group all-gathers
     * its members' rows before the experts (reduce-scatters after). Here the tensor-parallel
     * ranks of one expert tensor-parallel group (etp consecutive tensor-parallel ranks: tp is
     * first in the order, args.c) dispatch their joint share, the rows of tensor-parallel ranks
     * [g etp, (g + 1) etp) with g = tp_rank / etp (etp 1: the rank's own share); the router
     * still sees all N rows here, the same on every tensor-parallel rank, so routing, dropping
     * and the losses are the whole batch's */
    s.sliced = etp != c->tp_size;
    int groups = s.sliced ? c->tp_size / etp : 1, group = s.sliced ? c->tp_rank / etp : 0;
    s.t0 = (int)((long)s.N * group / groups);
    s.Nl = (int)((long)s.N * (group + 1) / groups) - s.t0;
    return s;
}

int moe_token_rows(const gpt_model *m) {
    const moe_scratch *x = m->moe_scratch;
    return x && x->inference_max_rows ? x->inference_rows : m->config.micro_batch_size * m->config.seq_length;
}

/* row `row` of a [*, cols] activation buffer */
static void *act_row(const gpt_model *m, const void *buffer, int row, int cols) {
    return (char *)buffer + m->ops->act_bytes * (size_t)row * (size_t)cols;
}

static void *acts(const gpt_model *m, size_t n) { return m->ops->alloc(m->ops->act_bytes * n); }
static void *host_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    CHECK(p, "out of host memory for the mixture-of-experts buffers");
    return p;
}

/* the scratch for training's micro-batches (inference_rows 0) or forward-only calls of up to
 * inference_rows rows (no backward buffers: those stay NULL) */
static void scratch_allocate(gpt_model *m, int inference_rows) {
    moe_scratch *x = host_alloc(sizeof *x);
    x->inference_max_rows = x->inference_rows = inference_rows;
    m->moe_scratch = x;  /* shapes_of reads the rows from it */
    moe_shapes s = shapes_of(m);
    const kernel_ops *ops = m->ops;
    const int backward = inference_rows == 0;
    size_t M = (size_t)s.M, R = (size_t)s.R, N = (size_t)s.N, C = (size_t)s.C;
    x->permuted = acts(m, M * C);
    x->received = acts(m, R * C);
    x->local_out = acts(m, R * C);
    x->activation = acts(m, R * (size_t)s.Fl);
    if (backward) {
        x->d_activation = acts(m, R * (size_t)s.Fl);
        x->d_fc1_out = acts(m, R * (size_t)s.FC1l);
        x->d_expert_out = acts(m, M * C);
        x->d_local_out = acts(m, R * C);
        x->d_local_in = acts(m, R * C);
        x->d_permuted = acts(m, M * C);
        x->d_input = acts(m, N * C);
        x->router_input = acts(m, N * C);
        x->d_router_input = acts(m, N * C);
        x->d_weight = ops->alloc(sizeof(float) * N * (size_t)s.k);
        x->d_logits = ops->alloc(sizeof(float) * N * (size_t)s.E);
    }
    if (ops->act_bytes != sizeof(float)) x->logits_act = acts(m, N * (size_t)s.E);
    x->stats = ops->alloc(sizeof(float) * MOE_ROUTER_STATS(s.E));
    x->rows = ops->alloc(sizeof(int) * (size_t)(s.E + 1));
    x->host_order = host_alloc(sizeof(int) * R);
    x->host_fc1 = host_alloc(sizeof(void *) * (size_t)s.El);
    x->host_fc2 = host_alloc(sizeof(void *) * (size_t)s.El);
    x->host_d_fc1 = host_alloc(sizeof(float *) * (size_t)s.El);
    x->host_d_fc2 = host_alloc(sizeof(float *) * (size_t)s.El);
    x->log.values = host_alloc(sizeof(double) * moe_log_length(&m->config));
    if (m->config.moe_apply_probs_on_input) {
        x->scaled_input = acts(m, N * C);
        x->identity_rows = ops->alloc(sizeof(int) * N);
        x->ones = ops->alloc(sizeof(float) * N);
        int *rows = host_alloc(sizeof(int) * N);
        for (size_t t = 0; t < N; t++) rows[t] = (int)t;
        ops->copy_from_host(x->identity_rows, rows, sizeof(int) * N);
        free(rows);
        ops->fill(x->ones, 1, 1.0f, N);
    }
    moe_shared_scratch_allocate(m, x);
}

void moe_scratch_allocate(gpt_model *m) { scratch_allocate(m, 0); }

void moe_scratch_release(gpt_model *m) {
    moe_scratch *x = m->moe_scratch;
    if (!x) return;
    void *buffers[] = {x->permuted, x->received, x->local_out, x->activation, x->d_activation, x->d_fc1_out,
                       x->d_expert_out, x->d_local_out, x->d_local_in, x->d_permuted, x->d_input, x->router_input,
                       x->d_router_input, x->d_weight, x->d_logits, x->stats, x->rows, x->logits_act,
                       x->scaled_input, x->identity_rows, x->ones};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
    moe_shared_scratch_release(m, x);
    free(x->host_order);
    free(x->host_fc1);
    free(x->host_fc2);
    free(x->host_d_fc1);
    free(x->host_d_fc2);
    free(x->log.values);
    free(x);
    m->moe_scratch = NULL;
}

void moe_activations_allocate(gpt_model *m, moe_activations *a, int keep_activation) {
    moe_shapes s = shapes_of(m);
    const kernel_ops *ops = m->ops;
    size_t M = (size_t)s.M, R = (size_t)s.R, N = (size_t)s.N;
    a->logits = ops->alloc(sizeof(float) * N * (size_t)s.E);
    a->expert = ops->alloc(sizeof(int) * M);
    a->weight = ops->alloc(sizeof(float) * M);
    a->slot_row = ops->alloc(sizeof(int) * M);
    a->row_token = ops->alloc(sizeof(int) * M);
    a->expert_rows = host_alloc(sizeof(int) * (size_t)(s.E + 1));
    a->all_expert_rows = s.sliced ? host_alloc(sizeof(int) * (size_t)(s.E + 1)) : a->expert_rows;
    a->fc1_out = acts(m, R * (size_t)s.FC1l);
    a->activation = keep_activation ? acts(m, R * (size_t)s.Fl) : NULL;
    a->expert_out = acts(m, M * (size_t)s.C);
    a->stats = host_alloc(sizeof(float) * MOE_ROUTER_STATS(s.E));
    a->local_rows = host_alloc(sizeof(int) * (size_t)(s.El + 1));
    /* the experts' input rows: received from the expert-parallel peers, or with the activation
     * kept (ep 1) this rank's permuted rows, kept for the backward instead of gathered again */
    if (s.ep > 1) a->expert_input = acts(m, R * (size_t)s.C);
    else if (keep_activation) a->expert_input = acts(m, M * (size_t)s.C);
    if (s.ep > 1) {
        a->send_counts = host_alloc(sizeof(size_t) * 4 * (size_t)s.ep);
        a->send_offsets = a->send_counts + s.ep;
        a->recv_counts = a->send_counts + 2 * s.ep;
        a->recv_offsets = a->send_counts + 3 * s.ep;
        a->to_expert_order = ops->alloc(sizeof(int) * R);
        a->to_source_order = ops->alloc(sizeof(int) * R);
    }
    moe_shared_activations_allocate(m, a);
}

void moe_activations_release(gpt_model *m, moe_activations *a) {
    void *buffers[] = {a->logits,     a->expert,         a->weight,         a->slot_row,
                       a->row_token,  a->fc1_out,        a->activation,     a->expert_out,
                       a->expert_input, a->to_expert_order, a->to_source_order};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
    moe_shared_activations_release(m, a);
    if (a->all_expert_rows != a->expert_rows) free(a->all_expert_rows);
    free(a->expert_rows);
    free(a->stats);
    free(a->local_rows);
    free(a->send_counts);
}

/* ------------------------------------------------------------------ token dispatch */

/* the permutation of the routed choices (the backend's moe_permutation: grouped by expert, in
 * token order within an expert); the experts' row counts come to the host, and with them the
 * router's statistics (one wait for the device per layer) */
static void plan_permutation(gpt_model *m, moe_activations *a) {
    moe_shapes s = shapes_of(m);
    moe_scratch *x = m->moe_scratch;
    const kernel_ops *ops = m->ops;
    if (s.sliced) {  /* every token's rows per expert (the log and the expert bias count them) */
        ops->moe_permutation(x->rows, a->slot_row, a->row_token, a->expert, s.M, s.k, s.E);
        ops->copy_to_host(a->all_expert_rows, x->rows, sizeof(int) * (size_t)(s.E + 1));
    }
    /* this rank's tokens' choices (row_token counts from t0) */
    ops->moe_permutation(x->rows, a->slot_row + (size_t)s.t0 * s.k, a->row_token, a->expert + (size_t)s.t0 * s.k,
                         s.Nl * s.k, s.k, s.E);
    ops->copy_to_host(a->expert_rows, x->rows, sizeof(int) * (size_t)(s.E + 1));
    ops->copy_to_host(a->stats, x->stats, sizeof(float) * MOE_ROUTER_STATS(s.E));
    if (s.ep == 1) memcpy(a->local_rows, a->expert_rows, sizeof(int) * (size_t)(s.E + 1));
}

/* expert parallelism: what goes to and comes from each expert-parallel peer. This rank's rows
 * for peer p are those of p's experts, contiguous in the permuted order; the counts per expert
 * are exchanged so that each rank knows how many rows of each of its experts each peer sends.
 * Received rows sit by source rank (then local expert); the experts compute them by local
 * expert (then source rank), the order the two index maps convert between. */
static void plan_exchange(gpt_model *m, moe_activations *a) {
    moe_shapes s = shapes_of(m);
    moe_scratch *x = m->moe_scratch;
    const gpt_config *c = &m->config;
    int *sent = host_alloc(sizeof(int) * (size_t)s.E), *got = host_alloc(sizeof(int) * (size_t)s.E);
    for (int e = 0; e < s.E; e++) sent[e] = a->expert_rows[e + 1] - a->expert_rows[e];
    m->comm->alltoall_host(sent, got, sizeof(int) * (size_t)s.El, c->ep_group); /* got[q El + le] */
    size_t received = 0;
    for (int p = 0; p < s.ep; p++) {
        a->send_offsets[p] = (size_t)a->expert_rows[p * s.El];
        a->send_counts[p] = (size_t)(a->expert_rows[(p + 1) * s.El] - a->expert_rows[p * s.El]);
        a->recv_offsets[p] = received;
        a->recv_counts[p] = 0;
        for (int le = 0; le < s.El; le++) a->recv_counts[p] += (size_t)got[p * s.El + le];
        received += a->recv_counts[p];
    }
    a->received = (int)received;
    /* expert order: for each local expert, each source's block of its rows */
    int i = 0;
    a->local_rows[0] = 0;
    for (int le = 0; le < s.El; le++) {
        for (int q = 0; q < s.ep; q++) {
            int first = (int)a->recv_offsets[q];
            for (int k = 0; k < le; k++) first += got[q * s.El + k];
            for (int r = 0; r < got[q * s.El + le]; r++) x->host_order[i++] = first + r;
        }
        a->local_rows[le + 1] = i;
    }
    m->ops->copy_from_host(a->to_expert_order, x->host_order, sizeof(int) * (size_t)i);
    int *inverse = host_alloc(sizeof(int) * (size_t)(i ? i : 1));
    for (int r = 0; r < i; r++) inverse[x->host_order[r]] = r;
    m->ops->copy_from_host(a->to_source_order, inverse, sizeof(int) * (size_t)i);
    free(inverse);
    free(sent);
    free(got);
}

static void scale_counts(const size_t *counts, size_t *out, int n, size_t by) {
    for (int p = 0; p < n; p++) out[p] = counts[p] * by;
}

/* the all-to-all of the rows: to the experts (send_counts out, recv_counts in) or back to the
 * sources (the reverse); blocking, or started with `request` (--moe-shared-expert-overlap:
 * comm wait completes it) */
static void exchange_rows(gpt_model *m, const moe_activations *a, int to_experts, const void *send, void *recv,
                          comm_request *request) {
    moe_shapes s = shapes_of(m);
    size_t *counts = host_alloc(sizeof(size_t) * 4 * (size_t)s.ep);
    scale_counts(a->send_counts, counts, 4 * s.ep, (size_t)s.C);  /* the four arrays are one block */
    const size_t *out = to_experts ? counts : counts + 2 * s.ep, *in = to_experts ? counts + 2 * s.ep : counts;
    if (request)
        m->comm->ialltoallv(send, out, out + s.ep, recv, in, in + s.ep, m->act_dtype, m->config.ep_group, request);
    else
        m->comm->alltoallv(send, out, out + s.ep, recv, in, in + s.ep, m->act_dtype, m->config.ep_group);
    free(counts);
}

/* this rank's permuted rows [N k, C] -> the rows its experts compute on, in the expert order:
 * the all-to-all into the received rows (started, or done when request is NULL), then, once it
 * is complete, their gather into the expert order */
static void send_to_experts_start(gpt_model *m, const moe_activations *a, const void *mine, comm_request *request) {
    exchange_rows(m, a, 1, mine, m->moe_scratch->received, request);
}
static void send_to_experts_finish(gpt_model *m, const moe_activations *a, void *expert_order, comm_request *request) {
    moe_shapes s = shapes_of(m);
    m->comm->wait(request);
    m->ops->gather_rows(expert_order, m->moe_scratch->received, a->to_expert_order, a->received, s.C);
}

/* the reverse: rows in the expert order -> their tokens' ranks, in each one's permuted order
 * (`mine` is complete after comm wait on request, when one is given) */
static void return_to_sources(gpt_model *m, const moe_activations *a, const void *expert_order, void *mine,
                              comm_request *request) {
    moe_shapes s = shapes_of(m);
    m->ops->gather_rows(m->moe_scratch->received, expert_order, a->to_source_order, a->received, s.C);
    exchange_rows(m, a, 0, m->moe_scratch->received, mine, request);
}

/* ------------------------------------------------------------------ forward and backward */

/* the router's input: x, or x times the jitter in training */
static const void *router_input(gpt_model *m, const void *x, dropout_rng jitter, int training) {
    moe_shapes s = shapes_of(m);
    if (!training || m->config.moe_input_jitter_eps <= 0.0f) return x;
    m->ops->uniform_jitter(m->moe_scratch->router_input, x, (size_t)s.N * s.C, m->config.moe_input_jitter_eps, jitter);
    return m->moe_scratch->router_input;
}

/* the router GEMM's output or output gradient in the compute dtype: the fp32 buffer itself on
 * an fp32 backend, else the 16-bit scratch (converted from or to fp32 around the GEMM) */
void *moe_router_act(gpt_model *m, float *fp32) {
    return m->ops->act_bytes == sizeof(float) ? (void *)fp32 : m->moe_scratch->logits_act;
}

/* an expert's activation of its rows: GeLU or SwiGLU of fc1's output */
static void expert_activation(gpt_model *m, void *out, const void *fc1_out, int rows) {
    moe_shapes s = shapes_of(m);
    if (m->config.swiglu) m->ops->swiglu_forward(out, fc1_out, rows, s.Fl);
    else mlp_gelu_forward(m->ops, m->config.gelu_erf, out, fc1_out, (size_t)rows * s.Fl);
}

/* the global index of local expert le */
static int global_expert(const gpt_model *m, int le) {
    moe_shapes s = shapes_of(m);
    return (m->config.ep_size > 1 ? m->config.ep_rank : 0) * s.El + le;
}

/* the local experts' fc1 (which 1) or fc2 (2) weights, in local order, for the grouped GEMMs */
static const void **expert_weights(gpt_model *m, const layer_view *lw, int which) {
    moe_shapes s = shapes_of(m);
    const void **w = which == 1 ? m->moe_scratch->host_fc1 : m->moe_scratch->host_fc2;
    for (int le = 0; le < s.El; le++) {
        int e = global_expert(m, le);
        w[le] = which == 1 ? lw->expert_fc1_weight[e] : lw->expert_fc2_weight[e];
    }
    return w;
}

/* their gradients likewise */
static float **expert_gradients(gpt_model *m, const layer_view *lg, int which) {
    moe_shapes s = shapes_of(m);
    float **g = which == 1 ? m->moe_scratch->host_d_fc1 : m->moe_scratch->host_d_fc2;
    for (int le = 0; le < s.El; le++) {
        int e = global_expert(m, le);
        g[le] = which == 1 ? (float *)lg->expert_fc1_weight[e] : (float *)lg->expert_fc2_weight[e];
    }
    return g;
}

/* the token rows the permutation gathers: x, or with --moe-apply-probs-on-input (top-1) each row
 * scaled by its routing weight (moe_combine over the rows themselves: w[t] x[t]) */
static const void *expert_source(gpt_model *m, const moe_activations *a, const void *x) {
    moe_shapes s = shapes_of(m);
    moe_scratch *scratch = m->moe_scratch;
    if (!m->config.moe_apply_probs_on_input) return x;
    m->ops->moe_combine(scratch->scaled_input, x, scratch->identity_rows, a->weight, s.N, 1, s.C);
    return scratch->scaled_input;
}

/* the weights the experts' outputs combine with: the routing weights, or 1 when they scaled the
 * input already */
static const float *combine_weights(const gpt_model *m, const moe_activations *a) {
    return m->config.moe_apply_probs_on_input ? m->moe_scratch->ones : a->weight;
}

/* the router's spec for global layer `layer`: the config's, with the layer's expert bias */
static moe_router_spec router_spec(const gpt_model *m, int layer) {
    moe_router_spec spec = m->config.moe_router;
    spec.seq_length = m->config.seq_length;
    spec.expert_bias = moe_expert_bias_of(m, layer);
    if (m->moe_scratch->inference_max_rows) spec.capacity_factor = 0.0f; /* forward-only: dropless */
    return spec;
}

void moe_layer_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                       dropout_rng jitter, int training, int layer) {
    moe_shapes s = shapes_of(m);
    const kernel_ops *ops = m->ops;
    moe_scratch *scratch = m->moe_scratch;
    void *logits_act = moe_router_act(m, a->logits);
    if (m->config.moe_router_force_random) {
        /* the router's GEMM has no effect on the routing (straight-through: its weight still
         * gets the gradient of the draws in the backward) */
        moe_force_router_logits(m, a->logits, s.N, moe_forced_routing_rng(m, jitter), layer);
    } else {
        ops->matmul_forward(logits_act, NULL, router_input(m, x, jitter, training), lw->router_weight, NULL, s.N, s.C, s.E);
        ops->act_to_float(a->logits, logits_act, (size_t)s.N * s.E);
    }
    moe_router_spec spec = router_spec(m, layer);
    ops->moe_route_forward(a->expert, a->weight, scratch->stats, a->logits, s.N, spec, training);
    plan_permutation(m, a);
    void *permuted = s.ep == 1 && a->expert_input ? a->expert_input : scratch->permuted;
    ops->gather_rows(permuted, act_row(m, expert_source(m, a, x), s.t0, s.C), a->row_token, a->expert_rows[s.E], s.C);
    const void *in = permuted;
    void *out = a->expert_out;
    /* --moe-shared-expert-overlap (Megatron's shared-expert overlap in its all-to-all token
     * dispatcher): the shared experts' fc1 and activation compute while the tokens travel to the
     * experts, their fc2 and gate while the outputs travel back; neither touches the rows in
     * flight, and each buffer sees the kernels of the run without it in the same order */
    const int overlap = moe_shared_expert_overlapped(&m->config);
    comm_request request = {0};
    if (s.ep > 1) {
        plan_exchange(m, a);
        send_to_experts_start(m, a, scratch->permuted, overlap ? &request : NULL);
        if (overlap) moe_shared_expert_forward_fc1(m, a, lw, x, layer);
        send_to_experts_finish(m, a, a->expert_input, &request);
        in = a->expert_input;
        out = scratch->local_out;
    }
    /* the local experts' GEMM pairs, one grouped call each, the activation over all their rows;
     * in an fp8 layer on each expert's fp8 operands (fp8_linear.h) */
    const void **w1 = expert_weights(m, lw, 1), **w2 = expert_weights(m, lw, 2);
    int rows = a->local_rows[s.El];
    void *activation = a->activation ? a->activation : scratch->activation;
    fp8_expert_forward(m, layer, 0, a->fc1_out, in, w1, a->local_rows, s.El, s.C, s.FC1l);
    expert_activation(m, activation, a->fc1_out, rows);
    fp8_expert_forward(m, layer, 1, out, activation, w2, a->local_rows, s.El, s.Fl, s.C);
    if (s.ep > 1) {
        return_to_sources(m, a, scratch->local_out, a->expert_out, overlap ? &request : NULL);
        if (overlap) moe_shared_expert_forward_fc2(m, a, lw, x, layer);
        m->comm->wait(&request);
    }
    /* sliced: the other ranks' tokens add zeros here (out_full is reduced over the tensor-parallel
     * ranks as a row-parallel output) */
    if (s.sliced) ops->zero(out_full, ops->act_bytes * (size_t)s.N * s.C);
    ops->moe_combine(act_row(m, out_full, s.t0, s.C), a->expert_out, a->slot_row + (size_t)s.t0 * s.k,
                     combine_weights(m, a) + (size_t)s.t0 * s.k, s.Nl, s.k, s.C);
    if (overlap) moe_shared_expert_add_output(m, out_full);
    else if (moe_has_shared_expert(&m->config)) moe_shared_expert_forward(m, a, lw, x, out_full, layer);
}

void *moe_layer_backward(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg, const void *x,
                         const void *d_full, dropout_rng jitter, int training, int layer) {
    moe_shapes s = shapes_of(m);
    const kernel_ops *ops = m->ops;
    const gpt_config *c = &m->config;
    moe_scratch *scratch = m->moe_scratch;
    /* combine: dL/d(expert outputs) and dL/d(weights); a weight's gradient needs the whole
     * expert output, here split in partial sums over the tensor-parallel ranks */
    if (s.sliced) ops->zero(scratch->d_weight, sizeof(float) * (size_t)s.N * s.k);
    ops->moe_combine_backward(scratch->d_expert_out, scratch->d_weight + (size_t)s.t0 * s.k,
                              act_row(m, d_full, s.t0, s.C), a->expert_out, a->slot_row + (size_t)s.t0 * s.k,
                              combine_weights(m, a) + (size_t)s.t0 * s.k, s.Nl, s.k, s.C);
    if (c->tp_size > 1 && !c->moe_apply_probs_on_input)
        m->comm->allreduce(scratch->d_weight, (size_t)s.N * s.k, COMM_FLOAT, COMM_SUM, m->tp_group);

    /* the experts: their inputs (this rank's permuted rows again, or the rows received in the
     * forward) and output gradients (sent the way the outputs came) */
    const void *in = a->expert_input, *d_out = scratch->d_expert_out;
    void *d_in = scratch->d_permuted;
    /* --moe-shared-expert-overlap: the shared experts' gate, fc2 and activation backward while
     * the output gradients travel to the experts, fc1's while the input gradients come back */
    const int overlap = moe_shared_expert_overlapped(c);
    comm_request request = {0};
    if (s.ep > 1) {
        send_to_experts_start(m, a, scratch->d_expert_out, overlap ? &request : NULL);
        if (overlap) moe_shared_expert_backward_fc2(m, a, lw, lg, x, d_full, layer);
        send_to_experts_finish(m, a, scratch->d_local_out, &request);
        d_out = scratch->d_local_out;
        d_in = scratch->d_local_in;
    } else if (!a->expert_input) {
        ops->gather_rows(scratch->permuted, act_row(m, expert_source(m, a, x), s.t0, s.C), a->row_token,
                         a->expert_rows[s.E], s.C);
        in = scratch->permuted;
    }
    /* fc2 (from the kept activation, or from it computed again), the activation, fc1: grouped
     * over the experts */
    const void **w1 = expert_weights(m, lw, 1), **w2 = expert_weights(m, lw, 2);
    float **dw1 = expert_gradients(m, lg, 1), **dw2 = expert_gradients(m, lg, 2);
    int rows = a->local_rows[s.El];
    const void *activation = a->activation;
    if (!activation) {
        expert_activation(m, scratch->activation, a->fc1_out, rows);
        activation = scratch->activation;
    }
    if (fp8_experts_in_fp8(m, layer))
        fp8_expert_backward(m, layer, 1, scratch->d_activation, dw2, d_out, activation, w2, a->local_rows, s.El, s.Fl,
                            s.C);
    else
        ops->grouped_matmul_backward(scratch->d_activation, dw2, d_out, activation, w2, a->local_rows, s.El, s.Fl, s.C);
    if (c->swiglu) ops->swiglu_backward(scratch->d_fc1_out, a->fc1_out, scratch->d_activation, rows, s.Fl);
    else mlp_gelu_backward(ops, c->gelu_erf, scratch->d_fc1_out, a->fc1_out, scratch->d_activation, (size_t)rows * s.Fl);
    if (fp8_experts_in_fp8(m, layer))
        fp8_expert_backward(m, layer, 0, d_in, dw1, scratch->d_fc1_out, in, w1, a->local_rows, s.El, s.C, s.FC1l);
    else
        ops->grouped_matmul_backward(d_in, dw1, scratch->d_fc1_out, in, w1, a->local_rows, s.El, s.C, s.FC1l);
    if (s.ep > 1) {
        return_to_sources(m, a, scratch->d_local_in, scratch->d_permuted, overlap ? &request : NULL);
        if (overlap) moe_shared_expert_backward_fc1(m, lw, lg, x, layer);
        m->comm->wait(&request);
    }
    if (c->moe_apply_probs_on_input) {
        /* d(w x)[t] from the experts, then dx = w d(w x) and dw = d(w x) . x, a partial sum over
         * the tensor-parallel ranks (fc1's input gradient is) */
        if (s.sliced) ops->zero(scratch->scaled_input, ops->act_bytes * (size_t)s.N * s.C);
        ops->moe_uncombine(act_row(m, scratch->scaled_input, s.t0, s.C), scratch->d_permuted,
                           a->slot_row + (size_t)s.t0 * s.k, s.Nl, s.k, s.C);
        ops->moe_combine_backward(scratch->d_input, scratch->d_weight, scratch->scaled_input, x, scratch->identity_rows,
                                  a->weight, s.N, 1, s.C);
        if (c->tp_size > 1) m->comm->allreduce(scratch->d_weight, (size_t)s.N * s.k, COMM_FLOAT, COMM_SUM, m->tp_group);
    } else {
        if (s.sliced) ops->zero(scratch->d_input, ops->act_bytes * (size_t)s.N * s.C);
        ops->moe_uncombine(act_row(m, scratch->d_input, s.t0, s.C), scratch->d_permuted,
                           a->slot_row + (size_t)s.t0 * s.k, s.Nl, s.k, s.C);
    }

    /* the router: routing weights, load-balancing and z losses; the losses' gradients scaled as
     * the main loss's mean over the micro-batch (grad_scale is per token of the global batch) */
    moe_router_spec spec = router_spec(m, layer);
    if (!training) spec.balancing = MOE_BALANCE_NONE, spec.z_loss_coeff = 0.0f;
    float loss_scale = m->grad_scale * (float)s.N;
    ops->moe_route_backward(scratch->d_logits, scratch->d_weight, a->logits, a->expert, s.N, spec, loss_scale);
    const void *rx = router_input(m, x, jitter, training);
    void *d_logits_act = moe_router_act(m, scratch->d_logits);
    ops->float_to_act(d_logits_act, scratch->d_logits, (size_t)s.N * s.E);
    ops->matmul_backward(scratch->d_router_input, (float *)lg->router_weight, NULL, d_logits_act, rx,
                         lw->router_weight, s.N, s.C, s.E);
    /* every tensor-parallel rank computed the same router gradient: one of them adds it */
    if (c->tp_rank == 0) {
        if (training && c->moe_input_jitter_eps > 0.0f)
            ops->uniform_jitter(scratch->d_router_input, scratch->d_router_input, (size_t)s.N * s.C,
                                c->moe_input_jitter_eps, jitter);
        ops->add(scratch->d_input, scratch->d_input, scratch->d_router_input, (size_t)s.N * s.C);
    }
    if (overlap) moe_shared_expert_add_input_gradient(m, scratch->d_input);
    else if (moe_has_shared_expert(c)) moe_shared_expert_backward(m, a, lw, lg, x, d_full, scratch->d_input, layer);
    if (training) {
        moe_expert_bias_count(m, layer, a->all_expert_rows);
        int L = c->num_layers;
        double *log = scratch->log.values;
        log[layer] += a->stats[0];
        log[L + layer] += a->stats[1];
        for (int e = 0; e < s.E; e++)
            log[2 * L + layer * s.E + e] += a->all_expert_rows[e + 1] - a->all_expert_rows[e];
    }
    return scratch->d_input;
}

/* ------------------------------------------------------------------ forward only */

void moe_inference_allocate(gpt_model *m, moe_activations *a, int max_rows) {
    if (max_rows < 1) FATAL("moe_inference_allocate: %d rows", max_rows);
    moe_scratch_release(m);
    scratch_allocate(m, max_rows);
    memset(a, 0, sizeof *a);
    moe_activations_allocate(m, a, 0);
}

void moe_inference_release(gpt_model *m, moe_activations *a) {
    moe_activations_release(m, a);
    memset(a, 0, sizeof *a);
}

void moe_inference_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                           int rows, int layer) {
    moe_scratch *scratch = m->moe_scratch;
    if (!scratch || rows < 1 || rows > scratch->inference_max_rows)
        FATAL("moe_inference_forward: %d rows, buffers for %d (moe_inference_allocate first)", rows,
              scratch ? scratch->inference_max_rows : 0);
    scratch->inference_rows = rows;
    dropout_rng no_jitter;
    memset(&no_jitter, 0, sizeof no_jitter);
    moe_layer_forward(m, a, lw, x, out_full, no_jitter, 0, layer);
    scratch->inference_rows = scratch->inference_max_rows;
}

size_t moe_log_length(const gpt_config *c) {
    return (size_t)c->num_layers * (2 + (size_t)c->num_experts);
}

void moe_log_take(gpt_model *m, double *out) {
    size_t n = moe_log_length(&m->config);
    if (!m->moe_scratch) {
        memset(out, 0, sizeof(double) * n);
        return;
    }
    memcpy(out, m->moe_scratch->log.values, sizeof(double) * n);
    memset(m->moe_scratch->log.values, 0, sizeof(double) * n);
}
