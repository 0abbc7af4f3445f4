/* t5_model_test.c: gpt_model's encoder-decoder mode (T5, app/model/gpt_model_t5.inc) through its
 * real path over the CPU backend.
 * 1. The parameters are Megatron-Core's T5Model's: encoder.layers.N and decoder.layers.N (with
 *    pre_cross_attn_layernorm and cross_attention.linear_q / linear_kv / linear_proj),
 *    encoder.final_layernorm, decoder.final_layernorm, lm_head.output_layer.bias, the shared
 *    embeddings; no output layer weight (tied). Untied (--untie-embeddings-and-output-weights):
 *    lm_head.output_layer.weight and no bias, as T5LMHead's ColumnParallelLinear.
 * 2. Gradients of the whole model (shared embeddings, encoder layers under the padding mask, the
 *    encoder's final norm, decoder layers with causal self-attention and the cross-attention
 *    over the encoder output, the decoder's final norm, tied output layer and lm_head bias)
 *    against central finite differences of the masked mean loss, with dropout 0 and with
 *    dropout (the same masks on every evaluation), and untied.
 * 3. What must not count does not: the encoder's padding (text under enc_mask 0), the labels
 *    under loss_mask 0, and a decoder input after a position (causal) for that position's loss.
 * 4. A tiny T5 fits one fixed batch with plain gradient descent. */
#include "app/core/error.h"
#include "app/parallel/comm.h"
#include "app/model/gpt_model.h"
#include "kernels/kernels.h"
#include "tests/tap.h"
#include "tests/unit/model_fd.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, TE = 7, TD = 5, NE = B * TE, ND = B * TD, V = 16 };

/* 2 encoder + 2 decoder layers; init_method_std large, so that every path carries a visible gradient */
static gpt_config tiny_t5_untied(float dropout, int untie) {
    return (gpt_config){.t5 = 1, .t5_encoder_layers = 2, .num_layers = 4, .t5_encoder_seq_length = TE,
                        .t5_decoder_seq_length = TD, .seq_length = TE, .hidden_size = 8, .num_attention_heads = 2,
                        .kv_channels = 4, .ffn_hidden_size = 12, .padded_vocab_size = V, .max_position_embeddings = TE,
                        .micro_batch_size = B, .layernorm_epsilon = 1e-5f, .init_method_std = 0.3f,
                        .hidden_dropout = dropout, .attention_dropout = dropout, .seed = 13,
                        .untie_embeddings_and_output_weights = untie};
}
static gpt_config tiny_t5(float dropout) { return tiny_t5_untied(dropout, 0); }

/* gpt_chunk_forward's T5 packing: tokens = encoder text, decoder text, encoder padding mask;
 * targets = labels, loss mask. Sample 1's encoder ends with two padded positions, its decoder
 * with one position outside the loss mask. */
static void fixed_batch(int tokens[2 * NE + ND], int targets[2 * ND]) {
    for (int i = 0; i < NE; i++) {
        int padded = i / TE == 1 && i % TE >= TE - 2;
        tokens[i] = padded ? 0 : (3 * i + 5) % (V - 1) + 1;
        tokens[NE + ND + i] = !padded;
    }
    for (int i = 0; i < ND; i++) {
        int outside = i / TD == 1 && i % TD == TD - 1;
        tokens[NE + i] = (7 * i + 2) % (V - 1) + 1;
        targets[i] = outside ? 0 : (5 * i + 3) % V;
        targets[ND + i] = !outside;
    }
}

static comm_group self_group;

/* a tiny T5 on one rank, and its fixed batch */
static void t5_create(gpt_model *m, gpt_config c, int tokens[2 * NE + ND], int targets[2 * ND]) {
    gpt_model_create(m, &c, kernels_cpu(), comm_mpi(), &self_group);
    fixed_batch(tokens, targets);
}

static double loss_only(gpt_model *m, const int *tokens, const int *targets, int training) {
    micro_batch_rng rng = {1, 0, training};
    return gpt_chunk_forward(m, 0, 0, tokens, targets, rng, 0.0f, 0);
}

static int has_name(const global_parameter *globals, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (!strcmp(globals[i].name, name)) return 1;
    return 0;
}

static void check_names(void) {
    gpt_config c = tiny_t5(0.0f);
    global_parameter globals[128];
    int count = gpt_global_parameters(&c, NULL);
    CHECK(count <= 128, "too many tensors");
    gpt_global_parameters(&c, globals);
    static const char *const expected[] = {
        "embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
        "encoder.layers.0.self_attention.linear_qkv.weight", "encoder.layers.1.mlp.linear_fc2.bias",
        "decoder.layers.0.self_attention.linear_qkv.weight", "decoder.layers.1.pre_cross_attn_layernorm.weight",
        "decoder.layers.1.cross_attention.linear_q.weight", "decoder.layers.0.cross_attention.linear_kv.bias",
        "decoder.layers.1.cross_attention.linear_proj.weight", "decoder.layers.1.pre_mlp_layernorm.bias",
        "encoder.final_layernorm.weight", "encoder.final_layernorm.bias", "decoder.final_layernorm.weight",
        "lm_head.output_layer.bias"};
    int found = 0;
    for (size_t k = 0; k < sizeof expected / sizeof *expected; k++) {
        if (has_name(globals, count, expected[k])) found++;
        else tap_diag("missing %s", expected[k]);
    }
    int wrong = has_name(globals, count, "encoder.layers.0.cross_attention.linear_q.weight") ||
                has_name(globals, count, "decoder.layers.2.input_layernorm.weight") ||
                has_name(globals, count, "output_layer.weight");
    /* 2 embeddings; encoder layers 12 tensors, decoder layers 12 + 8; 2 + 2 final norms + bias */
    tap_ok(found == (int)(sizeof expected / sizeof *expected) && !wrong && count == 2 + 2 * 12 + 2 * 20 + 5,
           "%d tensors named as Megatron-Core's T5Model (encoder.layers, decoder.layers with cross_attention, both final norms, lm_head.output_layer.bias)",
           count);
    c = tiny_t5_untied(0.0f, 1);
    count = gpt_global_parameters(&c, globals);
    tap_ok(has_name(globals, count, "lm_head.output_layer.weight") && !has_name(globals, count, "lm_head.output_layer.bias") &&
               !has_name(globals, count, "output_layer.weight"),
           "untied: T5LMHead's lm_head.output_layer.weight, without a bias");
}

typedef struct t5_batch {
    const int *tokens, *targets;
} t5_batch;

static double objective(gpt_model *m, void *context) {
    const t5_batch *batch = context;
    return loss_only(m, batch->tokens, batch->targets, 1);
}

/* finite-difference check of d(loss)/d(param) on a sample of elements of each tensor */
static void check_gradients(float dropout, int untie) {
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    t5_create(&m, tiny_t5_untied(dropout, untie), tokens, targets);
    micro_batch_rng rng = {1, 0, 1};
    m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
    gpt_chunk_forward(&m, 0, 0, tokens, targets, rng, 1.0f, 1);
    gpt_chunk_backward(&m, 0, 0, rng);
    double max_grads[128];
    CHECK(m.num_params <= 128, "too many tensors");
    model_fd_result r = model_fd_check(&m, objective, &(t5_batch){tokens, targets}, max_grads);
    int cross_checked = 0;
    for (int p = 0; p < m.num_params; p++) cross_checked += strstr(m.params[p].name, "cross_attention") && max_grads[p] > 1e-3;
    tap_ok(r.bad_tensors == 0 && cross_checked == 12,
           "T5 gradients match finite differences (dropout %.1f, %s): %d elements of %d tensors (%d cross-attention ones with gradient), worst relative error %.2g",
           dropout, untie ? "untied" : "tied", r.checked, m.num_params, cross_checked, r.worst);
    gpt_model_free(&m);
}

static void check_invisible(void) {
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    t5_create(&m, tiny_t5(0.0f), tokens, targets);
    double before = loss_only(&m, tokens, targets, 0);
    tokens[NE - 1] = 9, tokens[NE - 2] = 3;  /* the encoder's padded text */
    double padded = loss_only(&m, tokens, targets, 0);
    targets[ND - 1] = 7;                     /* a label under loss mask 0 */
    double unmasked = loss_only(&m, tokens, targets, 0);
    tap_ok(before == padded && before == unmasked && before > 0,
           "the encoder's padding and the labels outside the loss mask change no loss (%.6f, bitwise)", before);
    tokens[NE - 3] = tokens[NE - 3] % (V - 2) + 1; /* a visible encoder position (another token) does */
    double changed = loss_only(&m, tokens, targets, 0);
    tap_ok(changed != before, "a visible encoder position changes the loss (%.6f -> %.6f)", before, changed);
    /* causal decoder: only sample 0's last position's label counts, a later input cannot exist
     * there; sample 0 alone: changing its last decoder input changes only its own row's loss */
    fixed_batch(tokens, targets);
    for (int i = 0; i < ND; i++) targets[ND + i] = i < TD - 1;  /* sample 0, positions 0..TD-2 */
    double masked_before = loss_only(&m, tokens, targets, 0);
    tokens[NE + TD - 1] = 11;  /* sample 0's last decoder input: after every counted position */
    double masked_after = loss_only(&m, tokens, targets, 0);
    tap_ok(masked_before == masked_after, "the decoder is causal: a later decoder input changes no earlier position's loss");
    gpt_model_free(&m);
}

/* plain gradient descent on one batch, from a small initialization */
static void check_fits(void) {
    gpt_config c = tiny_t5(0.0f);
    c.init_method_std = 0.05f;
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    t5_create(&m, c, tokens, targets);
    double loss[2] = {0, 0};
    model_descend(&m, tokens, targets, 300, 0.2f, &loss[0], &loss[1]);
    gpt_model_free(&m);
    tap_ok(loss[1] < 0.1 * loss[0] && loss[1] < 0.3, "a tiny T5 fits one batch: loss %.4f -> %.4f in 300 steps", loss[0], loss[1]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    comm_group_create(&self_group, "self", MPI_COMM_SELF);
    check_names();
    for (int with_dropout = 0; with_dropout <= 1; with_dropout++) check_gradients(with_dropout ? 0.2f : 0.0f, 0);
    check_gradients(0.0f, 1);
    check_invisible();
    check_fits();
    comm_group_free(&self_group);
    MPI_Finalize();
    return tap_done();
}
