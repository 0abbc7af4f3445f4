/* fp8_linear_test.c: the fp8 linear layers' operands and scaling state (app/model/fp8_linear.h)
 * on the CPU backend, against fp8_format.h's rounding done by hand: which layers are in fp8
 * (--first-last-layers-bf16), the formats per role (E4M3 forward; E5M2 gradients only with
 * hybrid), the amax recorded over a step's quantizations (not in evaluation), TE's delayed update
 * at the step's end (scale = 448 * 2^-margin / amax, the history rolled, the next quantization
 * with the new scale), tensorwise current scaling, and the checkpoint tensors' names and shape. */
#include "app/model/fp8_linear.h"
#include "kernels/fp8_format.h"
#include "kernels/fp8_recipe.h"
#include "tests/tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 4, ROWS = 8, HIDDEN = 16, EXPERT_F = 32, EXPERTS = 3, EXPERT_ROWS = 21 };

/* a model shell of one chunk holding every layer: what fp8_linear reads (config, ops, chunks) */
static void make_model(gpt_model *m, model_chunk *chunk, int hybrid, fp8_recipe_kind recipe, int margin,
                       int history_len, int bf16_start, int bf16_end, int experts) {
    memset(m, 0, sizeof *m);
    memset(chunk, 0, sizeof *chunk);
    gpt_config *c = &m->config;
    c->num_layers = LAYERS;
    c->hidden_size = HIDDEN;
    c->num_attention_heads = 2;
    c->kv_channels = HIDDEN / 2;
    c->ffn_hidden_size = 4 * HIDDEN;
    c->micro_batch_size = 1;
    c->seq_length = ROWS;
    c->tp_size = 1;
    c->fp8.enabled = 1;
    c->fp8.hybrid = hybrid;
    c->fp8.recipe = recipe;
    c->fp8.margin = margin;
    c->fp8.amax_history_len = history_len;
    c->fp8.amax_compute_algo = FP8_AMAX_MOST_RECENT;
    c->fp8.wgrad = 1;
    c->fp8.layers_at_start_in_bf16 = bf16_start;
    c->fp8.layers_at_end_in_bf16 = bf16_end;
    if (experts > 0) { /* layer 1 an MoE layer of `experts` experts of width EXPERT_F */
        c->num_experts = experts;
        c->moe_layer[1] = 1;
        c->moe_ffn_hidden_size = EXPERT_F;
    }
    m->ops = kernels_cpu();
    chunk->first_layer = 0;
    chunk->num_layers = LAYERS;
    m->chunks = chunk;
    m->num_chunks = 1;
    fp8_state_allocate(m);
}

/* x[i] = a spread of magnitudes around `size`, both signs, so that rounding changes most */
static void fill(float *x, size_t n, float size) {
    for (size_t i = 0; i < n; i++) x[i] = size * (float)(i % 2 ? -1 : 1) * (0.3f + 0.137f * (float)(i % 13));
}

static float max_abs(const float *x, size_t n) {
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* the count of elements where q differs from x's rounding to `format` with `scale` (0: all match) */
static int mismatches(const float *q, const float *x, size_t n, float scale, int format) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float expected = fp8_to_float(fp8_from_float(x[i] * scale, format), format) * (1.0f / scale);
        if (memcmp(&expected, &q[i], sizeof expected) != 0) bad++;
    }
    return bad;
}

static int changed(const float *q, const float *x, size_t n) {
    int count = 0;
    for (size_t i = 0; i < n; i++) count += q[i] != x[i];
    return count;
}

/* the fp8 value of x with scale 1 */
static double q1(float x, int format) { return fp8_to_float(fp8_from_float(x, format), format); }

/* the largest |a - b| over n, relative to the largest |b| */
static double relative_error(const float *a, const double *b, size_t n) {
    double worst = 0.0, size = 0.0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        size = fmax(size, fabs(b[i]));
    }
    return size > 0.0 ? worst / size : worst;
}

/* the experts as fp8 GEMMs on the CPU's reference of them (MTC_FP8_NATIVE=1): fc1 of 3 local
 * experts, IC 16 -> OC 32, row blocks of 5, 0 and 16 rows, at the first step (scale 1: each
 * operand is its codes' values exactly, so every output a short fp32 sum of exact products)
 * against a double reference over the fp8-rounded operands: the forward, the input gradient and
 * the weight gradient, whose 5-row block goes through transposed codes padded to 16 rows */
static void experts_native(void) {
    gpt_model m;
    model_chunk chunk;
    setenv("MTC_FP8_NATIVE", "1", 1);
    make_model(&m, &chunk, 1, FP8_RECIPE_DELAYED, 0, 1, 0, 0, EXPERTS);
    unsetenv("MTC_FP8_NATIVE");
    enum { IC = HIDDEN, OC = EXPERT_F };
    const int rows[EXPERTS + 1] = {0, 5, 5, EXPERT_ROWS};
    static float x[EXPERT_ROWS * IC], dout[EXPERT_ROWS * OC], w[EXPERTS][OC * IC], out[EXPERT_ROWS * OC],
        dx[EXPERT_ROWS * IC], dw[EXPERTS][OC * IC];
    static double out_ref[EXPERT_ROWS * OC], dx_ref[EXPERT_ROWS * IC], dw_ref[EXPERTS][OC * IC];
    fill(x, EXPERT_ROWS * IC, 1.0f);
    fill(dout, EXPERT_ROWS * OC, 1e-3f);
    const void *weights[EXPERTS];
    float *grads[EXPERTS];
    for (int e = 0; e < EXPERTS; e++) {
        for (int i = 0; i < OC * IC; i++) w[e][i] = 0.05f * (float)((i * 7 + e * 3) % 11 - 5) + 0.013f * (float)e;
        weights[e] = w[e];
        grads[e] = dw[e];
    }
    for (int e = 0; e < EXPERTS; e++)
        for (int r = rows[e]; r < rows[e + 1]; r++) {
            for (int o = 0; o < OC; o++) {
                double sum = 0.0;
                for (int k = 0; k < IC; k++) sum += q1(x[r * IC + k], FP8_E4M3) * q1(w[e][o * IC + k], FP8_E4M3);
                out_ref[r * OC + o] = sum;
            }
            for (int k = 0; k < IC; k++) {
                double sum = 0.0;
                for (int o = 0; o < OC; o++) sum += q1(dout[r * OC + o], FP8_E5M2) * q1(w[e][o * IC + k], FP8_E4M3);
                dx_ref[r * IC + k] = sum;
            }
            for (int o = 0; o < OC; o++)
                for (int k = 0; k < IC; k++)
                    dw_ref[e][o * IC + k] += q1(dout[r * OC + o], FP8_E5M2) * q1(x[r * IC + k], FP8_E4M3);
        }
    tap_ok(fp8_native(&m, 1) && fp8_experts_in_fp8(&m, 1) && fp8_experts_native_shapes(IC, OC) &&
               !fp8_experts_native_shapes(24, OC),
           "MTC_FP8_NATIVE=1: layer 1's experts in fp8 on the fp8 GEMMs (widths 16 -> 32; not 24)");
    fp8_expert_forward(&m, 1, 0, out, x, weights, rows, EXPERTS, IC, OC);
    double e_out = relative_error(out, out_ref, EXPERT_ROWS * OC);
    tap_ok(e_out < 1e-6, "experts' forward, one fp8 GEMM per non-empty block: the reference within %.2g", e_out);
    memset(dw, 0, sizeof dw);
    fp8_expert_backward(&m, 1, 0, dx, grads, dout, x, weights, rows, EXPERTS, IC, OC);
    double e_dx = relative_error(dx, dx_ref, EXPERT_ROWS * IC);
    double e_dw0 = relative_error(dw[0], dw_ref[0], OC * IC), e_dw2 = relative_error(dw[2], dw_ref[2], OC * IC);
    int empty_zero = 1;
    for (int i = 0; i < OC * IC; i++) empty_zero &= dw[1][i] == 0.0f;
    tap_ok(e_dx < 1e-6, "experts' input gradient: the reference within %.2g", e_dx);
    tap_ok(e_dw0 < 1e-6 && e_dw2 < 1e-6 && empty_zero,
           "experts' weight gradient (5 rows padded to 16 with zero codes, 16 rows, an empty expert untouched): "
           "within %.2g and %.2g", e_dw0, e_dw2);
    /* accumulated in fp32 over a second micro-batch: twice the reference */
    fp8_expert_backward(&m, 1, 0, NULL, grads, dout, x, weights, rows, EXPERTS, IC, OC);
    for (int i = 0; i < OC * IC; i++) dw_ref[0][i] *= 2.0;
    double e_acc = relative_error(dw[0], dw_ref[0], OC * IC);
    tap_ok(e_acc < 1e-6, "a second backward adds into the fp32 weight gradient: twice the reference within %.2g", e_acc);
    fp8_state_release(&m);
}

int main(void) {
    gpt_model m;
    model_chunk chunk;
    const size_t n = (size_t)ROWS * HIDDEN;
    float x[ROWS * HIDDEN], g[ROWS * HIDDEN], y[ROWS * HIDDEN];
    fill(x, n, 1.0f);
    fill(g, n, 1e-3f);

    /* which layers: --first-last-layers-bf16 with 1 at the start and 1 at the end */
    make_model(&m, &chunk, 1, FP8_RECIPE_TENSORWISE, 0, 1, 1, 1, 0);
    tap_ok(!fp8_layer_in_fp8(&m.config, -1) && !fp8_layer_in_fp8(&m.config, 0) && fp8_layer_in_fp8(&m.config, 1) &&
               fp8_layer_in_fp8(&m.config, 2) && !fp8_layer_in_fp8(&m.config, 3) && fp8_layers_in_fp8(&m.config) == 2,
           "first/last layers in bf16: layers 1 and 2 of 4 in fp8 (none for the output layer, -1)");
    tap_ok(fp8_operand(&m, 0, FP8_GEMM_QKV, FP8_ROLE_INPUT, x, n) == x &&
               fp8_operand(&m, 3, FP8_GEMM_FC2, FP8_ROLE_WEIGHT, x, n) == x &&
               fp8_operand(&m, -1, FP8_GEMM_QKV, FP8_ROLE_GRAD_OUTPUT, x, n) == x,
           "a bf16 layer's operands are the tensors themselves");
    fp8_state_release(&m);

    /* delayed scaling, hybrid: scale 1 at the start; E4M3 input and weight, E5M2 gradient */
    make_model(&m, &chunk, 1, FP8_RECIPE_DELAYED, 0, 3, 0, 0, 0);
    const float *q = fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_INPUT, x, n);
    tap_ok(q != x && mismatches(q, x, n, 1.0f, FP8_E4M3) == 0 && changed(q, x, n) > (int)n / 4,
           "delayed, first step: the input rounded to E4M3 with scale 1 (%d of %zu values change)", changed(q, x, n), n);
    q = fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_GRAD_OUTPUT, g, n);
    tap_ok(mismatches(q, g, n, 1.0f, FP8_E5M2) == 0, "hybrid: the output gradient rounded to E5M2");
    /* a second micro-batch of larger values: the amax recorded is the step's largest */
    float x2[ROWS * HIDDEN];
    fill(x2, n, 3.0f);
    fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_INPUT, x2, n);
    fp8_set_recording(&m, 0); /* an evaluation pass records nothing */
    fill(y, n, 100.0f);
    fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_INPUT, y, n);
    fp8_set_recording(&m, 1);
    fp8_step_end(&m, NULL, NULL);
    float amax = max_abs(x2, n), expected_scale = FP8_E4M3_MAX / amax;
    q = fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_INPUT, x, n);
    tap_ok(mismatches(q, x, n, expected_scale, FP8_E4M3) == 0,
           "after the step: the input's scale is 448 / the step's training amax (%g / %g = %g), used by the next quantization",
           FP8_E4M3_MAX, amax, expected_scale);
    float gmax = max_abs(g, n);
    q = fp8_operand(&m, 1, FP8_GEMM_FC1, FP8_ROLE_GRAD_OUTPUT, g, n);
    tap_ok(mismatches(q, g, n, FP8_E5M2_MAX / gmax, FP8_E5M2) == 0, "the gradient's scale is 57344 / its amax (%g)",
           FP8_E5M2_MAX / gmax);
    q = fp8_operand(&m, 2, FP8_GEMM_QKV, FP8_ROLE_INPUT, x, n);
    tap_ok(mismatches(q, x, n, 1.0f, FP8_E4M3) == 0, "a tensor that recorded nothing keeps scale 1 (TE: amax 0, no update)");

    /* the checkpoint state: [3, 1 + history_len] per linear, TE's layout */
    sharded_state state = {0};
    fp8_sharded_state(&m, 0, &state);
    char name[PARAM_NAME_MAX];
    fp8_extra_state_name(&m.config, 1, FP8_GEMM_FC1, name, sizeof name);
    int found = -1;
    for (int i = 0; i < state.num_tensors; i++)
        if (strstr(state.tensors[i].name, name)) found = i;
    tap_ok(state.num_tensors == LAYERS * FP8_GEMMS && found >= 0 && state.tensors[found].rows == 3 &&
               state.tensors[found].cols == 4 && state.num_shards == LAYERS * FP8_GEMMS,
           "%d _extra_state tensors, %s [3, 4] among them", state.num_tensors, name);
    const float *row = NULL;
    for (int i = 0; i < state.num_shards; i++)
        if (state.shards[i].tensor == found) row = state.shards[i].data;
    /* the input row after one step (most_recent, history 3): scale, then [0, 0, amax] */
    tap_ok(row && row[0] == expected_scale && row[1] == 0.0f && row[2] == 0.0f && row[3] == amax,
           "its input row: scale %g, history {%g, %g, %g} (entry 0 the next step's slot)", row ? row[0] : 0.0f,
           row ? row[1] : 0.0f, row ? row[2] : 0.0f, row ? row[3] : 0.0f);
    sharded_state_free(&state);
    fp8_state_release(&m);

    /* e4m3 everywhere; margin 1 halves the scale */
    make_model(&m, &chunk, 0, FP8_RECIPE_DELAYED, 1, 1, 0, 0, 0);
    q = fp8_operand(&m, 0, FP8_GEMM_PROJ, FP8_ROLE_GRAD_OUTPUT, g, n);
    tap_ok(mismatches(q, g, n, 1.0f, FP8_E4M3) == 0, "--fp8-format e4m3: the output gradient rounded to E4M3");
    fp8_step_end(&m, NULL, NULL);
    q = fp8_operand(&m, 0, FP8_GEMM_PROJ, FP8_ROLE_GRAD_OUTPUT, g, n);
    tap_ok(mismatches(q, g, n, FP8_E4M3_MAX / 2.0f / gmax, FP8_E4M3) == 0, "--fp8-margin 1: scale = 448 / 2 / amax");
    fp8_state_release(&m);

    /* tensorwise: each quantization's scale from the tensor's own amax; nothing to update */
    make_model(&m, &chunk, 1, FP8_RECIPE_TENSORWISE, 0, 1, 0, 0, 0);
    q = fp8_operand(&m, 0, FP8_GEMM_QKV, FP8_ROLE_WEIGHT, x2, n);
    tap_ok(mismatches(q, x2, n, FP8_E4M3_MAX / max_abs(x2, n), FP8_E4M3) == 0, "tensorwise: scale 448 / the tensor's amax");
    q = fp8_operand(&m, 0, FP8_GEMM_QKV, FP8_ROLE_WEIGHT, x, n);
    tap_ok(mismatches(q, x, n, FP8_E4M3_MAX / max_abs(x, n), FP8_E4M3) == 0,
           "tensorwise: the next tensor takes its own amax's scale, not the last one's");
    fp8_state_release(&m);
    experts_native();
    return tap_done();
}
