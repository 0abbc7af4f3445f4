/* moe_shared_expert.c: the shared experts of an MoE layer (see moe_shared_expert.h): fc1, the
 * activation, fc2 and the optional sigmoid gate, forward and backward, through kernel_ops. */
#include "app/model/moe_shared_expert.h"
#include "app/model/fp8_linear.h"
#include "app/model/mlp_gelu.h"

#include "app/core/error.h"

#include <stdlib.h>

typedef struct shared_shapes {
    int N, C;
    int Fl, FC1l;  /* this rank's fc2 inputs and fc1 outputs */
} shared_shapes;

static shared_shapes shared_shapes_of(const gpt_model *m) {
    const gpt_config *c = &m->config;
    shared_shapes s;
    s.N = moe_token_rows(m);
    s.C = c->hidden_size;
    s.Fl = c->moe_shared_expert_intermediate_size / c->tp_size;
    s.FC1l = (c->swiglu ? 2 : 1) * s.Fl;
    return s;
}

static int gated(const gpt_model *m) { return m->config.moe_shared_expert_gate; }

static void *acts(const gpt_model *m, size_t n) { return m->ops->alloc(m->ops->act_bytes * n); }

void moe_shared_activations_allocate(gpt_model *m, moe_activations *a) {
    if (!moe_has_shared_expert(&m->config)) return;
    const moe_activations *owner = m->shared_experts_recomputed;
    if (m->config.recompute_shared_experts && owner) {  /* one set, recomputed in each backward */
        a->shared_fc1_out = owner->shared_fc1_out;
        a->shared_out = owner->shared_out;
        a->gate_logits = owner->gate_logits;
        a->gate_score = owner->gate_score;
        a->shared_borrowed = 1;
        return;
    }
    if (m->config.recompute_shared_experts) m->shared_experts_recomputed = a;
    shared_shapes s = shared_shapes_of(m);
    size_t N = (size_t)s.N;
    a->shared_fc1_out = acts(m, N * (size_t)s.FC1l);
    if (gated(m)) {
        a->shared_out = acts(m, N * (size_t)s.C);
        a->gate_logits = m->ops->alloc(sizeof(float) * N);
        a->gate_score = m->ops->alloc(sizeof(float) * N);
    }
}

void moe_shared_activations_release(gpt_model *m, moe_activations *a) {
    if (a->shared_borrowed) return;
    if (m->shared_experts_recomputed == a) m->shared_experts_recomputed = NULL;
    void *buffers[] = {a->shared_fc1_out, a->shared_out, a->gate_logits, a->gate_score};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
}

void moe_shared_scratch_allocate(gpt_model *m, moe_scratch *x) {
    if (!moe_has_shared_expert(&m->config)) return;
    shared_shapes s = shared_shapes_of(m);
    const kernel_ops *ops = m->ops;
    size_t N = (size_t)s.N, C = (size_t)s.C;
    const int backward = !x->inference_max_rows;  /* forward-only use: no gradient buffers */
    x->shared_activation = acts(m, N * (size_t)s.Fl);
    x->shared_out = acts(m, N * C);
    if (backward) {
        x->shared_d_activation = acts(m, N * (size_t)s.Fl);
        x->shared_d_fc1_out = acts(m, N * (size_t)s.FC1l);
        x->shared_d_input = acts(m, N * C);
    }
    if (gated(m)) {
        if (backward) {
            x->shared_d_out = acts(m, N * C);
            x->gate_d_input = acts(m, N * C);
            x->gate_d_score = ops->alloc(sizeof(float) * N);
            x->gate_d_logits = ops->alloc(sizeof(float) * N);
        }
        x->gate_expert = ops->alloc(sizeof(int) * N);
        x->gate_stats = ops->alloc(sizeof(float) * MOE_ROUTER_STATS(1));
        /* the identity rows: token t's one "expert output" is row t of the shared output */
        int *rows = malloc(sizeof(int) * N);
        CHECK(rows, "out of host memory for the shared experts' gate");
        for (size_t t = 0; t < N; t++) rows[t] = (int)t;
        x->gate_rows = ops->alloc(sizeof(int) * N);
        ops->copy_from_host(x->gate_rows, rows, sizeof(int) * N);
        free(rows);
    }
}

void moe_shared_scratch_release(gpt_model *m, moe_scratch *x) {
    void *buffers[] = {x->shared_activation, x->shared_d_activation, x->shared_d_fc1_out, x->shared_out,
                       x->shared_d_input, x->shared_d_out, x->gate_d_input, x->gate_expert, x->gate_d_score,
                       x->gate_d_logits, x->gate_stats, x->gate_rows};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i]) m->ops->release(buffers[i]);
}

/* the gate as a router of one expert: sigmoid score, top-1, no losses, no bias */
static moe_router_spec gate_spec(void) {
    moe_router_spec spec = {0};
    spec.num_experts = 1;
    spec.topk = 1;
    spec.score_function = MOE_SCORE_SIGMOID;
    return spec;
}

/* the activation of fc1's output: GeLU or SwiGLU */
static void shared_activation(gpt_model *m, void *out, const void *fc1_out) {
    shared_shapes s = shared_shapes_of(m);
    if (m->config.swiglu) m->ops->swiglu_forward(out, fc1_out, s.N, s.Fl);
    else mlp_gelu_forward(m->ops, m->config.gelu_erf, out, fc1_out, (size_t)s.N * s.Fl);
}

/* --moe-shared-expert-overlap: Megatron's SharedExpertMLP split in the steps its token
 * dispatcher interleaves with the all-to-alls; run in a row they are the whole forward and
 * backward, the same kernels in the same order on each buffer */

void moe_shared_expert_forward_fc1(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, int layer) {
    shared_shapes s = shared_shapes_of(m);
    /* in an fp8 layer on fp8 operands (fp8_linear.h: the layer's linear_fc1/linear_fc2 slots),
     * as fp8 GEMMs where the layer's linears are */
    if (fp8_native(m, layer))
        fp8_native_forward(m, layer, FP8_GEMM_FC1, a->shared_fc1_out, x, lw->shared_fc1_weight, NULL, NULL, s.N, s.C,
                           s.FC1l, NULL);
    else
        m->ops->matmul_forward(a->shared_fc1_out, NULL,
                               fp8_operand(m, layer, FP8_GEMM_FC1, FP8_ROLE_INPUT, x, (size_t)s.N * s.C),
                               fp8_operand(m, layer, FP8_GEMM_FC1, FP8_ROLE_WEIGHT, lw->shared_fc1_weight,
                                           (size_t)s.FC1l * s.C),
                               NULL, s.N, s.C, s.FC1l);
    shared_activation(m, m->moe_scratch->shared_activation, a->shared_fc1_out);
}

void moe_shared_expert_forward_fc2(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, int layer) {
    shared_shapes s = shared_shapes_of(m);
    const kernel_ops *ops = m->ops;
    moe_scratch *scratch = m->moe_scratch;
    void *out = gated(m) ? a->shared_out : scratch->shared_out;
    if (fp8_native(m, layer))
        fp8_native_forward(m, layer, FP8_GEMM_FC2, out, scratch->shared_activation, lw->shared_fc2_weight, NULL, NULL,
                           s.N, s.Fl, s.C, NULL);
    else
        ops->matmul_forward(out, NULL,
                            fp8_operand(m, layer, FP8_GEMM_FC2, FP8_ROLE_INPUT, scratch->shared_activation,
                                        (size_t)s.N * s.Fl),
                            fp8_operand(m, layer, FP8_GEMM_FC2, FP8_ROLE_WEIGHT, lw->shared_fc2_weight, (size_t)s.C * s.Fl),
                            NULL, s.N, s.Fl, s.C);
    if (gated(m)) {  /* score = sigmoid(x . gate_weight); out * score per token */
        void *logits_act = moe_router_act(m, a->gate_logits);
        ops->matmul_forward(logits_act, NULL, x, lw->shared_gate_weight, NULL, s.N, s.C, 1);
        ops->act_to_float(a->gate_logits, logits_act, (size_t)s.N);
        ops->moe_route_forward(scratch->gate_expert, a->gate_score, scratch->gate_stats, a->gate_logits, s.N,
                               gate_spec(), 0);
        ops->moe_combine(scratch->shared_out, a->shared_out, scratch->gate_rows, a->gate_score, s.N, 1, s.C);
    }
}

void moe_shared_expert_add_output(gpt_model *m, void *out_full) {
    shared_shapes s = shared_shapes_of(m);
    m->ops->add(out_full, out_full, m->moe_scratch->shared_out, (size_t)s.N * s.C);
}

void moe_shared_expert_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                               int layer) {
    moe_shared_expert_forward_fc1(m, a, lw, x, layer);
    moe_shared_expert_forward_fc2(m, a, lw, x, layer);
    moe_shared_expert_add_output(m, out_full);
}

void moe_shared_expert_backward_fc2(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg,
                                    const void *x, const void *d_full, int layer) {
    shared_shapes s = shared_shapes_of(m);
    const kernel_ops *ops = m->ops;
    const gpt_config *c = &m->config;
    moe_scratch *scratch = m->moe_scratch;
    const void *d_out = d_full;
    /* --recompute-modules shared_experts: their forward again from the layer's input (its output
     * into forward_full, free in the backward); with moe the whole layer ran again already */
    if (c->recompute_shared_experts && !c->recompute_moe) moe_shared_expert_forward(m, a, lw, x, m->scratch.forward_full, layer);
    if (gated(m)) {
        /* d(out before the gate) = score * d_full; dscore = d_full . out, summed over the
         * tensor-parallel ranks' partial outputs; dlogit = dscore s (1 - s) */
        ops->moe_combine_backward(scratch->shared_d_out, scratch->gate_d_score, d_full, a->shared_out,
                                  scratch->gate_rows, a->gate_score, s.N, 1, s.C);
        if (c->tp_size > 1) m->comm->allreduce(scratch->gate_d_score, (size_t)s.N, COMM_FLOAT, COMM_SUM, m->tp_group);
        /* the route backward's choice is the forward's: the one expert, never dropped */
        ops->moe_route_backward(scratch->gate_d_logits, scratch->gate_d_score, a->gate_logits, scratch->gate_expert,
                                s.N, gate_spec(), 0.0f);
        void *d_logits_act = moe_router_act(m, scratch->gate_d_logits);
        ops->float_to_act(d_logits_act, scratch->gate_d_logits, (size_t)s.N);
        ops->matmul_backward(scratch->gate_d_input, (float *)lg->shared_gate_weight, NULL, d_logits_act, x,
                             lw->shared_gate_weight, s.N, s.C, 1);
        d_out = scratch->shared_d_out;
    }
    /* fc2, the activation (again from fc1's kept output) */
    shared_activation(m, scratch->shared_activation, a->shared_fc1_out);
    fp8_matmul_backward(m, layer, FP8_GEMM_FC2, scratch->shared_d_activation, (float *)lg->shared_fc2_weight, NULL, d_out,
                        scratch->shared_activation, lw->shared_fc2_weight, s.N, s.Fl, s.C);
    if (c->swiglu) ops->swiglu_backward(scratch->shared_d_fc1_out, a->shared_fc1_out, scratch->shared_d_activation, s.N, s.Fl);
    else mlp_gelu_backward(ops, c->gelu_erf, scratch->shared_d_fc1_out, a->shared_fc1_out, scratch->shared_d_activation,
                           (size_t)s.N * s.Fl);
}

void moe_shared_expert_backward_fc1(gpt_model *m, const layer_view *lw, const layer_view *lg, const void *x, int layer) {
    shared_shapes s = shared_shapes_of(m);
    moe_scratch *scratch = m->moe_scratch;
    fp8_matmul_backward(m, layer, FP8_GEMM_FC1, scratch->shared_d_input, (float *)lg->shared_fc1_weight, NULL,
                        scratch->shared_d_fc1_out, x, lw->shared_fc1_weight, s.N, s.C, s.FC1l);
}

void moe_shared_expert_add_input_gradient(gpt_model *m, void *d_input) {
    shared_shapes s = shared_shapes_of(m);
    moe_scratch *scratch = m->moe_scratch;
    size_t NC = (size_t)s.N * s.C;
    m->ops->add(d_input, d_input, scratch->shared_d_input, NC);
    /* every tensor-parallel rank computed the same gate gradient: one of them adds it */
    if (gated(m) && m->config.tp_rank == 0) m->ops->add(d_input, d_input, scratch->gate_d_input, NC);
}

void moe_shared_expert_backward(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg,
                                const void *x, const void *d_full, void *d_input, int layer) {
    moe_shared_expert_backward_fc2(m, a, lw, lg, x, d_full, layer);
    moe_shared_expert_backward_fc1(m, lw, lg, x, layer);
    moe_shared_expert_add_input_gradient(m, d_input);
}

int moe_shared_expert_overlapped(const gpt_config *c) {
    return moe_has_shared_expert(c) && c->moe_shared_expert_overlap && c->ep_size > 1;
}

const char *moe_shared_expert_overlap_note(const gpt_config *c) {
    if (moe_shared_expert_overlapped(c))
        return "--moe-shared-expert-overlap: the shared experts' fc1 and activation compute while the dispatch "
               "all-to-all is in flight, fc2 (and the gate) during the combine all-to-all; in the backward fc2's "
               "gradients during the first all-to-all, fc1's during the second";
    return "--moe-shared-expert-overlap: expert-parallel size 1, no all-to-all for the shared experts to overlap "
           "(they compute in order)";
}
