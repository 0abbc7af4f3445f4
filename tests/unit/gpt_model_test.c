/* gpt_model_test.c: the GPT model through its real path (gpt_model.c over the CPU backend).
 * 1. Gradients of the whole model against central finite differences of the loss, for a sample
 *    of elements of every parameter tensor (catches wiring mistakes between kernels), with the
 *    loss in one pass and in chunks of rows (--cross-entropy-chunk-rows).
 * 2. Initialization is layout-independent: element i of a tensor depends only on seed, name, i.
 * 3. A tiny GPT overfits one fixed batch: the loss falls below a bound with AdamW.
 * 4. Mixture-of-experts layers (moe_layer.h): gradients against finite differences of the loss
 *    plus the load-balancing and z losses, for each router variant, with shared experts (with
 *    and without their gate) and with an expert bias steering the top-k choice.
 * 5. The router's expert bias: it decides the choice, the weights stay the unbiased scores.
 * 6. The MLP's exact GeLU (gpt_config.gelu_erf: Megatron without the bias-GeLU fusion): the kept
 *    activation is x Phi(x) of fc1's output (computed here with erf, not the tanh form), and 1.
 *    and 4. run with it too (the dense MLP with fc2's input kept and made again; GeLU experts and
 *    shared experts). */
#include "app/core/error.h"
#include "app/parallel/comm.h"
#include "app/model/gpt_model.h"
#include "app/model/moe_expert_bias.h"
#include "app/model/moe_layer.h"
#include "app/optim/optimizer.h"
#include "kernels/kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"
#include "tests/unit/model_fd.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static gpt_config tiny_config(int untie) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.num_layers = 2;
    c.hidden_size = 8;
    c.num_attention_heads = 2;
    c.kv_channels = 4;
    c.ffn_hidden_size = 12;
    c.padded_vocab_size = 16;
    c.max_position_embeddings = 6;
    c.seq_length = 5;
    c.micro_batch_size = 2;
    c.layernorm_epsilon = 1e-5f;
    c.init_method_std = 0.3f; /* large, so that every path carries a visible gradient */
    c.untie_embeddings_and_output_weights = untie;
    c.seed = 7;
    return c;
}

static comm_group self_group;

static void create(gpt_model *m, const gpt_config *c) {
    gpt_model_create(m, c, kernels_cpu(), comm_mpi(), &self_group);
}

static double forward(gpt_model *m, const int *tokens, const int *targets, micro_batch_rng rng, float scale) {
    return gpt_chunk_forward(m, 0, 0, tokens, targets, rng, scale, 1);
}

/* a forward without backward (finite differences): a chunked loss leaves the gradients alone */
static double forward_only(gpt_model *m, const int *tokens, const int *targets, micro_batch_rng rng) {
    return gpt_chunk_forward(m, 0, 0, tokens, targets, rng, 0.0f, 0);
}

static void fixed_batch(int *tokens, int *targets, int n, int vocab) {
    for (int i = 0; i < n; i++) {
        tokens[i] = (3 * i + 1) % (vocab - 1);
        targets[i] = (5 * i + 2) % (vocab - 1);
    }
}

/* the mean loss of a fixed batch (model_fd_check's objective) */
typedef struct gpt_batch {
    const int *tokens, *targets;
    micro_batch_rng rng;
    int N;
} gpt_batch;

static double mean_loss(gpt_model *m, void *context) {
    const gpt_batch *batch = context;
    return forward_only(m, batch->tokens, batch->targets, batch->rng) / batch->N;
}

/* finite-difference check of d(mean loss)/d(param) on a sample of elements of each tensor */
static void check_gradients(int untie, float dropout, int loss_chunk_rows, int gelu_erf, int keep_activation) {
    gpt_config c = tiny_config(untie);
    c.gelu_erf = gelu_erf;
    c.keep_mlp_activation_layers = keep_activation;
    c.loss_chunk_rows = loss_chunk_rows;
    c.hidden_dropout = dropout;
    c.attention_dropout = dropout;
    gpt_model m;
    create(&m, &c);
    int N = c.micro_batch_size * c.seq_length;
    int tokens[64], targets[64];
    fixed_batch(tokens, targets, N, c.padded_vocab_size);
    micro_batch_rng rng = {1, 0, 1};
    m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
    forward(&m, tokens, targets, rng, 1.0f / (float)N);
    gpt_chunk_backward(&m, 0, 0, rng);
    gpt_batch batch = {tokens, targets, rng, N};
    model_fd_result r = model_fd_check(&m, mean_loss, &batch, NULL);
    tap_ok(r.bad_tensors == 0, "model gradients match finite differences (%s embeddings, dropout %.1f, loss in %s%s%s): %d elements of %d tensors, worst relative error %.2g",
           untie ? "untied" : "tied", dropout, loss_chunk_rows ? "chunks of 3 of the 10 rows" : "one pass",
           gelu_erf ? ", the MLP's exact GeLU" : "", keep_activation ? ", fc2's input kept" : "", r.checked,
           m.num_params, r.worst);
    gpt_model_free(&m);
}

/* the objective an MoE model's backward differentiates: the mean loss plus each MoE layer's
 * load-balancing and z losses times their coefficients (the router's statistics of the last
 * forward) */
static double moe_objective(gpt_model *m, const int *tokens, const int *targets, micro_batch_rng rng, int N) {
    double loss = forward_only(m, tokens, targets, rng) / N;
    const gpt_config *c = &m->config;
    for (int l = 0; l < c->num_layers; l++) {
        if (!gpt_layer_is_moe(c, l)) continue;
        const float *stats = m->chunks[0].slots[0].layers[l].moe->stats;
        loss += c->moe_router.aux_loss_coeff * stats[0] + c->moe_router.z_loss_coeff * stats[1];
    }
    return loss;
}

typedef struct moe_variant {
    const char *name;
    int score_function, pre_softmax, swiglu, num_groups, group_topk, balancing, every_other;
    float scaling, capacity, aux, z, jitter;
    int drop_by_position;  /* with a capacity: drop by position, which a small step cannot change
                            * (dropping by weight flips at near-ties, where finite differences fail) */
    int shared, gate;      /* shared experts of this width (0: none), with their sigmoid gate */
    int expert_bias;       /* an expert bias (+-0.3 per expert, per layer) steering the choice */
    int top1_probs_on_input; /* top-1 with the weight on the expert's input (--moe-apply-probs-on-input) */
    int gelu_erf;          /* the GeLU experts' exact form (what Megatron computes with --disable-bias-linear) */
} moe_variant;

/* finite differences of the MoE objective for a sample of elements of every tensor. A step can
 * move a token across the router's top-k boundary; an element whose two step sizes disagree is
 * such a point and is skipped (counted) */
static void check_moe_gradients(moe_variant v) {
    gpt_config c = tiny_config(1);
    c.disable_bias_linear = 1;
    c.swiglu = v.swiglu;
    c.gelu_erf = v.gelu_erf;
    c.num_experts = 4;
    c.moe_ffn_hidden_size = 6;
    for (int l = 0; l < c.num_layers; l++) c.moe_layer[l] = !v.every_other || l % 2 == 1;
    moe_router_spec *r = &c.moe_router;
    r->num_experts = 4;
    r->topk = v.top1_probs_on_input ? 1 : 2;
    c.moe_apply_probs_on_input = v.top1_probs_on_input;
    r->score_function = v.score_function;
    r->pre_softmax = v.pre_softmax;
    r->topk_scaling_factor = v.scaling;
    r->num_groups = v.num_groups;
    r->group_topk = v.group_topk;
    r->capacity_factor = v.capacity;
    r->drop_by_position = v.drop_by_position;
    r->balancing = v.balancing;
    r->aux_loss_coeff = v.aux;
    r->z_loss_coeff = v.z;
    r->seq_length = c.seq_length;
    c.moe_input_jitter_eps = v.jitter;
    c.moe_shared_expert_intermediate_size = v.shared;
    c.moe_shared_expert_gate = v.gate;
    c.moe_router_enable_expert_bias = v.expert_bias;
    gpt_model m;
    create(&m, &c);
    if (v.expert_bias)  /* a bias that changes which experts some tokens take */
        for (int i = 0; i < c.num_layers * c.num_experts; i++) m.moe_expert_bias[i] = 0.3f * (float)((i * 5 + 1) % 3 - 1);
    int N = c.micro_batch_size * c.seq_length;
    int tokens[64], targets[64];
    fixed_batch(tokens, targets, N, c.padded_vocab_size);
    micro_batch_rng rng = {1, 0, 1};
    m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
    forward(&m, tokens, targets, rng, 1.0f / (float)N);
    gpt_chunk_backward(&m, 0, 0, rng);
    int bad_tensors = 0, checked = 0, skipped = 0, router_seen = 0, shared_seen = 0, gate_seen = 0;
    double worst = 0.0;
    float *params = m.param_buffer;
    for (int p = 0; p < m.num_params; p++) {
        const param_tensor *t = &m.params[p];
        if (strstr(t->name, "router")) router_seen = 1;
        if (strstr(t->name, "shared_experts.linear_fc")) shared_seen = 1;
        if (strstr(t->name, "shared_experts.gate_weight")) gate_seen = 1;
        double max_err = 0.0, max_grad = 0.0;
        for (size_t k = 0; k < 8 && k < t->numel; k++) {
            size_t e = t->offset + (k * 7919u) % t->numel;
            float saved = params[e];
            double numeric[2];
            for (int i = 0; i < 2; i++) {
                const float h = i == 0 ? 1e-2f : 5e-3f;
                params[e] = saved + h;
                double plus = moe_objective(&m, tokens, targets, rng, N);
                params[e] = saved - h;
                double minus = moe_objective(&m, tokens, targets, rng, N);
                numeric[i] = (plus - minus) / (2.0 * h);
            }
            params[e] = saved;
            if (fabs(numeric[0] - numeric[1]) > 0.05 * fabs(numeric[1]) + 1e-3) { skipped++; continue; }
            double err = fabs(numeric[1] - m.grad_buffer[e]);
            if (err > max_err) max_err = err;
            if (fabs(numeric[1]) > max_grad) max_grad = fabs(numeric[1]);
            checked++;
        }
        double rel = max_err / (max_grad > 1e-3 ? max_grad : 1e-3);
        if (rel > worst) worst = rel;
        if (rel > 2e-2) {
            bad_tensors++;
            tap_diag("%s: finite-difference mismatch, relative %.3g", t->name, rel);
        }
    }
    tap_ok(bad_tensors == 0 && router_seen && shared_seen == (v.shared > 0) && gate_seen == v.gate &&
           skipped * 4 < checked,
           "MoE gradients match finite differences (%s): %d elements of %d tensors (%d skipped at routing boundaries), worst relative error %.2g",
           v.name, checked, m.num_params, skipped, worst);
    gpt_model_free(&m);
}

/* the expert bias (sigmoid scores): top-2 of s + b, weights s / sum of the chosen s */
static void check_expert_bias_routing(void) {
    const kernel_ops *ops = kernels_cpu();
    float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f}, bias[4] = {0.0f, 0.0f, 0.6f, 0.9f}, weight[2], stats[MOE_ROUTER_STATS(4)];
    int expert[2];
    moe_router_spec spec = {0};
    spec.num_experts = 4;
    spec.topk = 2;
    spec.score_function = MOE_SCORE_SIGMOID;
    ops->moe_route_forward(expert, weight, stats, logits, 1, spec, 0);
    int plain = expert[0] == 0 && expert[1] == 1;
    spec.expert_bias = bias;  /* s = .881 .731 .5 .269; s + b = .881 .731 1.1 1.169 */
    ops->moe_route_forward(expert, weight, stats, logits, 1, spec, 0);
    float s3 = 1.0f / (1.0f + expf(1.0f)), s2 = 0.5f;
    tap_ok(plain && expert[0] == 3 && expert[1] == 2 && fabsf(weight[0] - s3 / (s3 + s2)) < 1e-6f &&
               fabsf(weight[1] - s2 / (s3 + s2)) < 1e-6f,
           "expert bias: the top-k ranks score + bias (experts %d, %d), the weights are the unbiased scores (%.4f, %.4f)",
           expert[0], expert[1], weight[0], weight[1]);
}

/* the MLP's activation is F.gelu of fc1's output: x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 with
 * gelu_erf, the tanh approximation without (read from the kept activation after a forward); the
 * two forms differ by up to ~5e-4 at |x| ~ 2, so a bound of 1e-6 (1 + |x|) (float rounding)
 * tells them apart */
static void check_gelu_form(int gelu_erf) {
    gpt_config c = tiny_config(0);
    c.num_layers = 1;
    c.gelu_erf = gelu_erf;
    c.keep_mlp_activation_layers = 1;
    c.init_method_std = 1.0f;  /* fc1's outputs spread over [-3, 3], where the forms differ */
    gpt_model m;
    create(&m, &c);
    int N = c.micro_batch_size * c.seq_length;
    int tokens[64], targets[64];
    fixed_batch(tokens, targets, N, c.padded_vocab_size);
    micro_batch_rng rng = {1, 0, 1};
    forward_only(&m, tokens, targets, rng);
    const layer_activations *la = &m.chunks[0].slots[0].layers[0];
    const float *pre = la->fc1_out, *act = la->activation;
    double worst_own = 0.0, worst_other = 0.0, spread = 0.0;
    for (int i = 0; i < N * c.ffn_hidden_size; i++) {
        double x = pre[i];
        double exact = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        double tanh_form = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        double own = gelu_erf ? exact : tanh_form, other = gelu_erf ? tanh_form : exact;
        if (fabs(act[i] - own) / (1.0 + fabs(x)) > worst_own) worst_own = fabs(act[i] - own) / (1.0 + fabs(x));
        if (fabs(act[i] - other) > worst_other) worst_other = fabs(act[i] - other);
        if (fabs(x) > spread) spread = fabs(x);
    }
    tap_ok(act && worst_own < 1e-6 && worst_other > 1e-4,
           "the MLP computes the %s GeLU: within %.2g (1 + |x|) of it, %.2g from the %s form (fc1's outputs up to %.2f)",
           gelu_erf ? "exact (erf)" : "tanh-approximated", worst_own, worst_other, gelu_erf ? "tanh" : "exact", spread);
    gpt_model_free(&m);
}

static void check_layout_independent_init(void) {
    gpt_config c = tiny_config(0);
    gpt_model m;
    create(&m, &c);
    int mismatches = 0;
    const param_tensor *qkv = NULL;
    for (int p = 0; p < m.num_params; p++)
        if (strcmp(m.params[p].name, "decoder.layers.1.self_attention.linear_qkv.weight") == 0) qkv = &m.params[p];
    tap_ok(qkv && qkv->rows == 3 * 2 * 4 && qkv->cols == 8, "parameters carry Megatron names and global shapes");
    if (qkv) {
        uint64_t stream = philox_stream_of_name(qkv->name);
        for (size_t e = 0; e < qkv->numel; e++)
            if (((float *)m.param_buffer)[qkv->offset + e] != c.init_method_std * philox_normal(c.seed, stream, e)) mismatches++;
    }
    tap_ok(qkv && mismatches == 0, "element i of a parameter is std * normal(seed, name, i)");
    gpt_model_free(&m);
}

static void check_overfit(void) {
    gpt_config c = tiny_config(0);
    c.init_method_std = 0.02f;
    c.hidden_size = 32;
    c.kv_channels = 8;
    c.num_attention_heads = 4;
    c.ffn_hidden_size = 128;
    c.padded_vocab_size = 32;
    c.seq_length = 16;
    c.max_position_embeddings = 16;
    c.micro_batch_size = 4;
    gpt_model m;
    create(&m, &c);
    optimizer opt;
    optimizer_create(&opt, &m, NULL, &self_group, comm_mpi(), 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f);
    int N = c.micro_batch_size * c.seq_length;
    int *tokens = malloc(sizeof(int) * (size_t)N), *targets = malloc(sizeof(int) * (size_t)N);
    uint64_t state = 12345; /* random tokens: only memorization brings the loss down */
    for (int i = 0; i < N; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int)((state >> 33) % 31);
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        targets[i] = (int)((state >> 33) % 31);
    }
    double first = 0, last = 0;
    for (int step = 0; step < 150; step++) {
        micro_batch_rng rng = {(uint64_t)step + 1, 0, 1};
        m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
        double loss = forward(&m, tokens, targets, rng, 1.0f / (float)N) / N;
        gpt_chunk_backward(&m, 0, 0, rng);
        optimizer_step(&opt, &m, optimizer_grad_norm(&opt, &m), 1e-2);
        if (step == 0) first = loss;
        last = loss;
    }
    tap_ok(first > 3.0 && last < 0.1, "tiny GPT overfits a fixed batch of random tokens: loss %.3f -> %.4f (bound 0.1)", first, last);
    free(tokens);
    free(targets);
    optimizer_free(&opt, &m);
    gpt_model_free(&m);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    comm_group_create(&self_group, "self", MPI_COMM_SELF);
    check_gradients(0, 0.0f, 0, 0, 0);
    check_gradients(1, 0.0f, 0, 0, 0);
    check_gradients(0, 0.2f, 0, 0, 0);
    check_gradients(0, 0.0f, 3, 0, 0); /* the chunked loss: output layer, cross entropy and their backward 3 rows at a time */
    check_gradients(1, 0.2f, 3, 0, 0);
    check_gradients(0, 0.0f, 0, 1, 0); /* the exact GeLU: fc2's input made again in the backward */
    check_gradients(1, 0.2f, 0, 1, 1); /* ... and kept from the forward */
    check_gelu_form(0);
    check_gelu_form(1);
    /*                 name                                             score                 pre swi grp gtk balance                   every  scale cap  aux   z     jitter */
    check_moe_gradients((moe_variant){"softmax top-2, aux loss, z loss", MOE_SCORE_SOFTMAX, 0, 0, 0, 0, MOE_BALANCE_AUX_LOSS, 0, 0, 0, 0.1f, 0.01f, 0, 0, 0, 0, 0});
    check_moe_gradients((moe_variant){"pre-softmax, SwiGLU experts, seq aux loss", MOE_SCORE_SOFTMAX, 1, 1, 0, 0, MOE_BALANCE_SEQ_AUX_LOSS, 0, 0, 0, 0.1f, 0, 0, 0, 0, 0, 0});
    check_moe_gradients((moe_variant){"sigmoid, scaling 2.5, group-limited to 1 of 2 groups, aux loss", MOE_SCORE_SIGMOID, 0, 0, 2, 1, MOE_BALANCE_AUX_LOSS, 0, 2.5f, 0, 0.1f, 0, 0, 0, 0, 0, 0});
    check_moe_gradients((moe_variant){"sqrt-softplus, jitter 0.1", MOE_SCORE_SQRTSOFTPLUS, 0, 0, 0, 0, MOE_BALANCE_NONE, 0, 0, 0, 0, 0.01f, 0.1f, 0, 0, 0, 0});
    check_moe_gradients((moe_variant){"capacity factor 0.5 dropping by position, every other layer MoE", MOE_SCORE_SOFTMAX, 0, 0, 0, 0, MOE_BALANCE_AUX_LOSS, 1, 0, 0.5f, 0.1f, 0, 0, 1, 0, 0, 0});
    /*                 name                                  score               pre swi grp gtk balance           every scale cap aux   z  jitter pos shared gate bias */
    check_moe_gradients((moe_variant){"shared experts (GeLU), softmax top-2, aux loss", MOE_SCORE_SOFTMAX, 0, 0, 0, 0, MOE_BALANCE_AUX_LOSS, 0, 0, 0, 0.1f, 0, 0, 0, 10, 0, 0});
    check_moe_gradients((moe_variant){"gated shared experts (SwiGLU), every other layer MoE", MOE_SCORE_SOFTMAX, 0, 1, 0, 0, MOE_BALANCE_NONE, 1, 0, 0, 0, 0, 0, 0, 10, 1, 0});
    check_moe_gradients((moe_variant){"sigmoid with an expert bias, group-limited, gated shared experts", MOE_SCORE_SIGMOID, 0, 0, 2, 1, MOE_BALANCE_AUX_LOSS, 0, 0, 0, 0.1f, 0, 0, 0, 6, 1, 1});
    check_moe_gradients((moe_variant){"sigmoid top-1, weights on the experts' input, aux loss", MOE_SCORE_SIGMOID, 0, 0, 0, 0, MOE_BALANCE_AUX_LOSS, 0, 0, 0, 0.1f, 0, 0, 0, 0, 0, 0, 1, 0});
    check_moe_gradients((moe_variant){"pre-softmax top-1, SwiGLU, weights on the experts' input", MOE_SCORE_SOFTMAX, 1, 1, 0, 0, MOE_BALANCE_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0});
    check_moe_gradients((moe_variant){"exact-GeLU experts and shared experts, softmax top-2, aux loss", MOE_SCORE_SOFTMAX, 0, 0, 0, 0, MOE_BALANCE_AUX_LOSS, 0, 0, 0, 0.1f, 0, 0, 0, 10, 0, 0, 0, 1});
    check_expert_bias_routing();
    check_layout_independent_init();
    check_overfit();
    comm_group_free(&self_group);
    MPI_Finalize();
    return tap_done();
}
