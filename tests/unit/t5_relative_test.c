/* t5_relative_test.c: T5's relative position bias (--position-embedding-type relative;
 * app/model/relative_position.h, gpt_model_t5.inc) over the CPU backend.
 * 1. The bucket function is Megatron-Core's (and Hugging Face T5's) _relative_position_bucket:
 *    hand-checked values for 32 buckets of max distance 128, bidirectional (the encoder's) and
 *    causal (the decoder's), and for 8 buckets of max distance 6 (the tiny model below).
 * 2. The bias of a table: bias[h,t1,t2] = table[bucket(t2 - t1), head_start + h] (a rank's heads),
 *    and its backward bins the bias gradient into the table's columns of those heads only.
 * 3. The parameters: encoder_relative_pos_emb and decoder_relative_pos_emb
 *    .relative_attention_bias.weight [buckets, heads], no position embeddings.
 * 4. Gradients of a tiny relative T5 against central finite differences: every element of both
 *    tables, and 6 elements of every other tensor, without and with dropout.
 * 5. The tables matter: changing a used entry of either changes the loss, an unused one (a
 *    bucket no position pair of the sequence reaches) does not.
 * 6. A tiny relative T5 fits one batch with plain gradient descent. */
#include "app/core/error.h"
#include "app/model/gpt_model.h"
#include "app/model/relative_position.h"
#include "app/parallel/comm.h"
#include "kernels/kernels.h"
#include "tests/tap.h"
#include "tests/unit/model_fd.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, TE = 7, TD = 5, NE = B * TE, ND = B * TD, V = 16, BUCKETS = 8, HEADS = 2 };

/* hand-checked buckets (Megatron's formula worked out: e.g. bidirectional 32/128: n = 16,
 * max_exact 8; r = 12: 16 + 8 + trunc(log(12/8) / log(128/8) * 8) = 16 + 8 + trunc(1.17) = 25;
 * r = -64: 8 + log(8)/log(16) * 8 = 8 + 6 = 14; r = 91: 16 + 8 + trunc(7.02) = 31, r = 90:
 * 16 + 8 + trunc(6.98) = 30. Causal 32/128: n = 32, max_exact 16, r > 0 -> 0; r = -100:
 * 16 + trunc(log(100/16) / log(8) * 16) = 16 + trunc(14.1) = 30; r = -45: 16 + trunc(7.96) = 23) */
typedef struct { int relative, bucket; } bucket_case;
static const bucket_case bidirectional_32_128[] = {
    {-1000, 15}, {-200, 15}, {-128, 15}, {-127, 15}, {-100, 15}, {-64, 14}, {-63, 13}, {-45, 12}, {-32, 12},
    {-31, 11}, {-23, 11}, {-16, 10}, {-15, 9}, {-12, 9}, {-11, 8}, {-8, 8}, {-7, 7}, {-1, 1}, {0, 0}, {1, 17},
    {2, 18}, {7, 23}, {8, 24}, {11, 24}, {12, 25}, {15, 25}, {16, 26}, {22, 26}, {23, 27}, {32, 28}, {45, 28},
    {64, 30}, {90, 30}, {91, 31}, {127, 31}, {128, 31}, {129, 31}, {500, 31}};
static const bucket_case causal_32_128[] = {
    {-1000, 31}, {-200, 31}, {-128, 31}, {-127, 31}, {-100, 30}, {-64, 26}, {-63, 26}, {-45, 23}, {-32, 21},
    {-31, 21}, {-23, 18}, {-16, 16}, {-15, 15}, {-12, 12}, {-11, 11}, {-8, 8}, {-7, 7}, {-1, 1}, {0, 0}, {1, 0},
    {2, 0}, {16, 0}, {127, 0}, {500, 0}};
/* 8 buckets, max distance 6: bidirectional n = 4, max_exact 2 (r = -3: 2 + trunc(log 1.5 / log 3 *
 * 2) = 2; r = 4: 4 + 2 + trunc(log 2 / log 3 * 2) = 7); causal n = 8, max_exact 4 (r = -5:
 * 4 + trunc(log 1.25 / log 1.5 * 4) = 6; r = -6: 4 + 4 -> at most 7) */
static const bucket_case bidirectional_8_6[] = {
    {-8, 3}, {-6, 3}, {-5, 3}, {-4, 3}, {-3, 2}, {-2, 2}, {-1, 1}, {0, 0}, {1, 5}, {2, 6}, {3, 6}, {4, 7}, {6, 7}, {9, 7}};
static const bucket_case causal_8_6[] = {
    {-9, 7}, {-6, 7}, {-5, 6}, {-4, 4}, {-3, 3}, {-2, 2}, {-1, 1}, {0, 0}, {1, 0}, {5, 0}};

static void check_cases(const char *what, const bucket_case *cases, int count, int bidirectional, int buckets,
                        int max_distance) {
    int wrong = 0;
    for (int i = 0; i < count; i++) {
        int got = relative_position_bucket(cases[i].relative, bidirectional, buckets, max_distance);
        if (got != cases[i].bucket) {
            wrong++;
            tap_diag("%s: relative position %d in bucket %d, expected %d", what, cases[i].relative, got, cases[i].bucket);
        }
    }
    tap_ok(!wrong, "%s: %d hand-checked relative positions in Megatron's buckets", what, count);
}

static void check_buckets(void) {
#define CASES(a) a, (int)(sizeof a / sizeof *a)
    check_cases("bidirectional, 32 buckets, max distance 128", CASES(bidirectional_32_128), 1, 32, 128);
    check_cases("causal, 32 buckets, max distance 128", CASES(causal_32_128), 0, 32, 128);
    check_cases("bidirectional, 8 buckets, max distance 6", CASES(bidirectional_8_6), 1, 8, 6);
    check_cases("causal, 8 buckets, max distance 6", CASES(causal_8_6), 0, 8, 6);
#undef CASES
    /* monotone in |r| on each side, and in range */
    int bad = 0;
    for (int bidirectional = 0; bidirectional <= 1; bidirectional++)
        for (int r = -600; r <= 600; r++) {
            int b = relative_position_bucket(r, bidirectional, 32, 128);
            int next = relative_position_bucket(r < 0 ? r - 1 : r + 1, bidirectional, 32, 128);
            if (b < 0 || b >= 32 || (r != 0 && next < b)) bad++;
        }
    tap_ok(!bad, "buckets lie in [0, 32) and never fall as |relative position| grows (both kinds)");
    tap_ok(relative_position_check(2, 128) && relative_position_check(32, 16) && !relative_position_check(32, 17) &&
               !relative_position_check(4, 3),
           "bucket settings without a well-defined logarithmic part are refused");
}

/* the bias of a rank's heads, and its backward into those columns only */
static void check_bias_layout(void) {
    enum { T = 4, H = 4, NB = 8 };
    int buckets[T * T];
    relative_position_buckets(buckets, T, T, 0, NB, 6);
    float table[NB * H], bias[2 * T * T], dtable[NB * H] = {0}, dbias[2 * T * T];
    for (int i = 0; i < NB * H; i++) table[i] = (float)i;
    relative_position_bias(bias, table, buckets, T, T, H, 2, 2);  /* heads 2 and 3 */
    int wrong = 0;
    for (int h = 0; h < 2; h++)
        for (int t1 = 0; t1 < T; t1++)
            for (int t2 = 0; t2 < T; t2++) {
                int b = relative_position_bucket(t2 - t1, 0, NB, 6);
                if (bias[(h * T + t1) * T + t2] != table[b * H + 2 + h]) wrong++;
            }
    for (int i = 0; i < 2 * T * T; i++) dbias[i] = 1.0f;
    relative_position_bias_backward(dtable, dbias, buckets, T, T, H, 2, 2, NB);
    /* causal T = 4: bucket 0 gets the 10 pairs t2 >= t1, bucket r the T - r pairs t1 - t2 = r */
    int expected[NB] = {10, 3, 2, 1, 0, 0, 0, 0};
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < H; h++)
            if (dtable[b * H + h] != (h >= 2 ? (float)expected[b] : 0.0f)) wrong++;
    tap_ok(!wrong, "bias[h,t1,t2] = table[bucket(t2 - t1), head_start + h]; its gradient counts each bucket's pairs into those heads' columns only");
}

static comm_group self_group;

static gpt_config tiny_relative_t5(float dropout) {
    return (gpt_config){.t5 = 1, .t5_encoder_layers = 2, .num_layers = 4, .t5_encoder_seq_length = TE,
                        .t5_decoder_seq_length = TD, .seq_length = TE, .hidden_size = 8, .num_attention_heads = HEADS,
                        .kv_channels = 4, .ffn_hidden_size = 12, .padded_vocab_size = V, .max_position_embeddings = TE,
                        .micro_batch_size = B, .layernorm_epsilon = 1e-5f, .init_method_std = 0.3f,
                        .hidden_dropout = dropout, .attention_dropout = dropout, .seed = 29,
                        .position_embedding_type = POSITION_RELATIVE, .relative_attention_num_buckets = BUCKETS,
                        .relative_attention_max_distance = 6};
}

/* t5_model_test's batch: sample 1's encoder ends with two padded positions, its decoder with one
 * position outside the loss mask */
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

typedef struct t5_batch {
    const int *tokens, *targets;
} t5_batch;

static double objective(gpt_model *m, void *context) {
    const t5_batch *batch = context;
    micro_batch_rng rng = {1, 0, 1};
    return gpt_chunk_forward(m, 0, 0, batch->tokens, batch->targets, rng, 0.0f, 0);
}

static int find_param(const gpt_model *m, const char *name) {
    for (int p = 0; p < m->num_params; p++)
        if (!strcmp(m->params[p].name, name)) return p;
    return -1;
}

static const char *const table_names[2] = {"encoder_relative_pos_emb.relative_attention_bias.weight",
                                           "decoder_relative_pos_emb.relative_attention_bias.weight"};

static void check_names(void) {
    gpt_model m;
    gpt_config c = tiny_relative_t5(0.0f);
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    int ok = find_param(&m, "embedding.position_embeddings.weight") < 0;
    for (int k = 0; k < 2; k++) {
        int p = find_param(&m, table_names[k]);
        ok = ok && p >= 0 && m.params[p].rows == BUCKETS && m.params[p].cols == HEADS && m.params[p].split == SHARD_NONE &&
             !m.params[p].no_weight_decay;
    }
    tap_ok(ok, "the tables are Megatron's encoder_relative_pos_emb / decoder_relative_pos_emb.relative_attention_bias.weight [%d, %d], whole, with weight decay; no position embeddings",
           BUCKETS, HEADS);
    gpt_model_free(&m);
}

/* every element of both tables, then model_fd_check's sample of every tensor */
static void check_gradients(float dropout) {
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    gpt_config c = tiny_relative_t5(dropout);
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    fixed_batch(tokens, targets);
    t5_batch batch = {tokens, targets};
    micro_batch_rng rng = {1, 0, 1};
    m.ops->zero(m.grad_buffer, sizeof(float) * m.num_elements);
    gpt_chunk_forward(&m, 0, 0, tokens, targets, rng, 1.0f, 1);
    gpt_chunk_backward(&m, 0, 0, rng);
    float *params = m.param_buffer;
    double worst = 0.0;
    int used = 0, checked = 0;
    for (int k = 0; k < 2; k++) {
        const param_tensor *t = &m.params[find_param(&m, table_names[k])];
        double max_grad = 0.0, max_err = 0.0;
        for (size_t e = t->offset; e < t->offset + t->numel; e++) {
            float saved = params[e];
            const float h = 1e-2f;
            params[e] = saved + h;
            double plus = objective(&m, &batch);
            params[e] = saved - h;
            double minus = objective(&m, &batch);
            params[e] = saved;
            double numeric = (plus - minus) / (2.0 * h), analytic = m.grad_buffer[e];
            if (fabs(numeric - analytic) > max_err) max_err = fabs(numeric - analytic);
            if (fabs(numeric) > max_grad) max_grad = fabs(numeric);
            used += fabs(analytic) > 1e-4;
            checked++;
        }
        double rel = max_err / (max_grad > 1e-3 ? max_grad : 1e-3);
        if (rel > worst) worst = rel;
    }
    /* buckets reached: the encoder's r in [-6, 6] every one of 8 but 4 (the positive side's r = 0,
     * which only r > 0 could use); the decoder's r in [-4, 0]: 0..4 */
    tap_ok(worst < 2e-2 && used == (7 + 5) * HEADS,
           "dropout %.1f: every element of both tables matches finite differences (%d checked, %d with gradient), worst relative error %.2g",
           dropout, checked, used, worst);
    model_fd_result r = model_fd_check(&m, objective, &batch, NULL);
    tap_ok(r.bad_tensors == 0, "dropout %.1f: the relative T5's other gradients match finite differences: %d elements of %d tensors, worst relative error %.2g",
           dropout, r.checked, m.num_params, r.worst);
    gpt_model_free(&m);
}

/* a used table entry moves the loss, an unused one (decoder bucket 6: r = -5 needs 6 positions) does not */
static void check_tables_matter(void) {
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    gpt_config c = tiny_relative_t5(0.0f);
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    fixed_batch(tokens, targets);
    t5_batch batch = {tokens, targets};
    float *params = m.param_buffer;
    double before = objective(&m, &batch);
    size_t enc = m.params[find_param(&m, table_names[0])].offset, dec = m.params[find_param(&m, table_names[1])].offset;
    size_t entries[3] = {enc + 3 * HEADS + 1,  /* encoder bucket 3 (r <= -4), head 1 */
                         dec + 2 * HEADS,      /* decoder bucket 2 (r = -2), head 0 */
                         dec + 6 * HEADS};     /* decoder bucket 6: not reached with 5 positions */
    double moved[3];
    for (int k = 0; k < 3; k++) {
        float saved = params[entries[k]];
        params[entries[k]] = saved + 0.5f;
        moved[k] = objective(&m, &batch);
        params[entries[k]] = saved;
    }
    double encoder_moved = moved[0], decoder_moved = moved[1], unused = moved[2];
    tap_ok(encoder_moved != before && decoder_moved != before && unused == before,
           "the encoder's and decoder's tables move the loss (%.6f -> %.6f, %.6f); an unreached bucket does not", before,
           encoder_moved, decoder_moved);
    gpt_model_free(&m);
}

static void check_fits(void) {
    gpt_config c = tiny_relative_t5(0.0f);
    c.init_method_std = 0.05f;
    gpt_model m;
    int tokens[2 * NE + ND], targets[2 * ND];
    gpt_model_create(&m, &c, kernels_cpu(), comm_mpi(), &self_group);
    fixed_batch(tokens, targets);
    double loss[2] = {0, 0};
    model_descend(&m, tokens, targets, 300, 0.2f, &loss[0], &loss[1]);
    gpt_model_free(&m);
    tap_ok(loss[1] < 0.1 * loss[0] && loss[1] < 0.3, "a tiny T5 with relative positions fits one batch: loss %.4f -> %.4f in 300 steps",
           loss[0], loss[1]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    comm_group_create(&self_group, "self", MPI_COMM_SELF);
    check_buckets();
    check_bias_layout();
    check_names();
    check_gradients(0.0f);
    check_gradients(0.2f);
    check_tables_matter();
    check_fits();
    comm_group_free(&self_group);
    MPI_Finalize();
    return tap_done();
}
