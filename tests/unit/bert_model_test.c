/* bert_model_test.c: gpt_model's encoder mode (BERT, app/model/bert_encoder.h) through its real
 * path over the CPU backend.
 * 1. The parameters are Megatron-Core's BertModel's: the block named "encoder", tokentype
 *    embeddings, pooler and binary head only with the binary head, the LM head and output bias.
 * 2. Gradients of the whole model (embeddings with token types, bidirectional layers under the
 *    padding mask, final norm, LM head, tied output layer and bias, pooler, binary head) against
 *    central finite differences of lm_loss + sop_loss, with and without the binary head.
 * 3. The padding is invisible: changing the text of padded positions changes no loss.
 * 4. A tiny BERT fits one fixed batch: lm_loss + sop_loss falls below a bound with plain gradient descent. */
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

enum { B = 2, T = 6, N = B * T, V = 16 };

static gpt_config tiny_bert(int binary_head) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    c.bert = 1;
    c.bert_binary_head = binary_head;
    c.num_layers = 2;
    c.hidden_size = 8;
    c.num_attention_heads = 2;
    c.kv_channels = 4;
    c.ffn_hidden_size = 12;
    c.padded_vocab_size = V;
    c.max_position_embeddings = T;
    c.seq_length = T;
    c.micro_batch_size = B;
    c.layernorm_epsilon = 1e-5f;
    c.init_method_std = 0.3f; /* large, so that every path carries a visible gradient */
    c.seed = 11;
    return c;
}

/* gpt_chunk_forward's packed encoder inputs: tokens = text, types, padding mask; targets =
 * labels, loss mask, is_random. Sample 1 ends with two padded positions. */
static void fixed_batch(int tokens[3 * N], int targets[2 * N + B]) {
    for (int i = 0; i < N; i++) {
        int t = i % T, b = i / T;
        int padded = b == 1 && t >= T - 2;
        tokens[i] = padded ? 0 : (3 * i + 5) % (V - 1) + 1;
        tokens[N + i] = t >= T / 2 && !padded;
        tokens[2 * N + i] = !padded;
        int masked = !padded && t > 0 && (i % 3 == 1);
        targets[i] = masked ? (5 * i + 2) % V : -1;
        targets[N + i] = masked;
    }
    targets[2 * N] = 1;
    targets[2 * N + 1] = 0;
}

static comm_group self_group;

static double loss_only(gpt_model *m, const int *tokens, const int *targets) {
    micro_batch_rng rng = {1, 0, 1};
    return gpt_chunk_forward(m, 0, 0, tokens, targets, rng, 0.0f, 0);
}

static void check_names(int binary_head) {
    gpt_config c = tiny_bert(binary_head);
    global_parameter globals[64];
    int count = gpt_global_parameters(&c, NULL);
    CHECK(count <= 64, "too many tensors");
    gpt_global_parameters(&c, globals);
    static const char *const expected[] = {"embedding.tokentype_embeddings.weight", "encoder.layers.1.mlp.linear_fc2.bias",
                                           "encoder.final_layernorm.weight", "lm_head.dense.weight",
                                           "lm_head.layer_norm.bias", "output_layer.bias", "pooler.dense.weight",
                                           "binary_head.weight", "binary_head.bias"};
    int found = 0, binary_found = 0, decoder = 0;
    for (int i = 0; i < count; i++) {
        for (size_t k = 0; k < sizeof expected / sizeof *expected; k++)
            if (!strcmp(globals[i].name, expected[k])) {
                found++;
                if (k == 0 || k >= 6) binary_found++;
            }
        if (!strncmp(globals[i].name, "decoder.", 8)) decoder++;
    }
    int want_binary = binary_head ? 4 : 0;
    tap_ok(decoder == 0 && binary_found == want_binary && found == 5 + want_binary,
           "%s binary head: %d tensors named as Megatron-Core's BertModel (encoder.*, lm_head, output_layer.bias%s)",
           binary_head ? "with" : "without", count, binary_head ? ", tokentype embeddings, pooler, binary_head" : "");
}

typedef struct bert_batch_input {
    const int *tokens, *targets;
} bert_batch_input;

static double objective(gpt_model *m, void *context) {
    const bert_batch_input *batch = context;
    return loss_only(m, batch->tokens, batch->targets);
}

/* finite-difference check of d(lm_loss + sop_loss)/d(param) on a sample of elements of each tensor */
static void check_gradients(int binary_head) {
    gpt_config c = tiny_bert(binary_head);
    gpt_model m;
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    int tokens[3 * N], targets[2 * N + B];
    fixed_batch(tokens, targets);
    micro_batch_rng rng = {1, 0, 1};
    m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
    gpt_chunk_forward(&m, 0, 0, tokens, targets, rng, 1.0f, 1);
    gpt_chunk_backward(&m, 0, 0, rng);
    model_fd_result r = model_fd_check(&m, objective, &(bert_batch_input){tokens, targets}, NULL);
    tap_ok(r.bad_tensors == 0, "BERT gradients match finite differences (%s binary head): %d elements of %d tensors, worst relative error %.2g",
           binary_head ? "with" : "without", r.checked, m.num_params, r.worst);
    gpt_model_free(&m);
}

static void check_padding_invisible(void) {
    gpt_config c = tiny_bert(1);
    gpt_model m;
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    int tokens[3 * N], targets[2 * N + B];
    fixed_batch(tokens, targets);
    double before = loss_only(&m, tokens, targets), lm_before = m.bert_lm_loss, sop_before = m.bert_sop_loss;
    tokens[N - 1] = 9, tokens[N - 2] = 3;  /* the padded positions' text and types */
    tokens[2 * N - 1] = 1;
    m.bert_lm_loss = m.bert_sop_loss = 0.0;
    double after = loss_only(&m, tokens, targets);
    tap_ok(before == after && m.bert_lm_loss == lm_before && m.bert_sop_loss == sop_before && before > 0,
           "the padded positions change no loss (lm %.6f, sop %.6f, bitwise)", lm_before, sop_before);
    tokens[N - 3] = 9;  /* a visible position does */
    m.bert_lm_loss = 0.0;
    double changed = loss_only(&m, tokens, targets);
    tap_ok(changed != before, "a visible position changes the loss (%.6f -> %.6f)", before, changed);
    gpt_model_free(&m);
}

/* plain gradient descent on one batch: the heads and the encoder learn it */
static void check_fits(void) {
    gpt_config c = tiny_bert(1);
    c.init_method_std = 0.05f;
    gpt_model m;
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    int tokens[3 * N], targets[2 * N + B];
    fixed_batch(tokens, targets);
    double first = 0, last = 0;
    model_descend(&m, tokens, targets, 300, 0.2f, &first, &last);
    tap_ok(last < 0.1 * first && last < 0.4, "a tiny BERT fits one batch: lm + sop loss %.4f -> %.4f in 300 steps", first, last);
    gpt_model_free(&m);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    comm_group_create(&self_group, "self", MPI_COMM_SELF);
    check_names(1);
    check_names(0);
    check_gradients(1);
    check_gradients(0);
    check_padding_invisible();
    check_fits();
    comm_group_free(&self_group);
    MPI_Finalize();
    return tap_done();
}
