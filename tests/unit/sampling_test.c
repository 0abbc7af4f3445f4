/* sampling_test.c: the pieces of generation that need no model. Sampling
 * (app/inference/sampling.c): greedy is the argmax (lowest id on ties) whatever the temperature;
 * temperature, top-k and top-p draw with the frequencies of their renormalized softmax (Megatron's
 * nucleus: the first token past top_p kept); padded ids are never drawn; a draw is a function of
 * (seed, stream, counter). Log-probabilities against a direct computation. The KV-cache attention
 * kernel (decode_attention, CPU backend): a prefill followed by one token at a time gives the rows
 * of the full causal attention of the training forward, multi-head and grouped-query (the cache
 * holds one key/value head per group), also past the kernel's block of 4096 scores. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/inference/sampling.h"
#include "kernels/kernels.h"
#include "kernels/philox.h"
#include "tests/tap.h"

enum { DRAWS = 20000 };

/* frequencies of each id over DRAWS counters */
static void frequencies(const float *logits, int vocab, const sampling_params *p, double *freq) {
    sampling_scratch s;
    sampling_scratch_init(&s, vocab);
    memset(freq, 0, sizeof(double) * (size_t)vocab);
    for (int i = 0; i < DRAWS; i++) freq[sample_token(logits, vocab, p, &s, 42, 7, (uint64_t)i)] += 1.0 / DRAWS;
    sampling_scratch_free(&s);
}

static double max_error(const double *freq, const double *expected, int n) {
    double worst = 0.0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(freq[i] - expected[i]));
    return worst;
}

static void test_sampling(void) {
    float logits[6] = {2.0f, 1.0f, 0.5f, 0.0f, 2.0f, 9.0f}; /* id 5 is padding (vocab 5) */
    sampling_scratch s;
    sampling_scratch_init(&s, 5);
    sampling_params greedy = {0.01f, 1, 0.0f};
    tap_ok(sample_token(logits, 5, &greedy, &s, 1, 2, 3) == 0, "greedy (top_k 1) takes the argmax, the lowest id on a tie, never a padded id");
    sampling_params plain = {1.0f, 0, 0.0f};
    int same = 1;
    for (int i = 0; i < 50; i++) same &= sample_token(logits, 5, &plain, &s, 9, 4, (uint64_t)i) == sample_token(logits, 5, &plain, &s, 9, 4, (uint64_t)i);
    tap_ok(same, "a draw is a function of (seed, stream, counter)");
    sampling_scratch_free(&s);

    double freq[5], expected[5], total = 0.0;
    for (int i = 0; i < 5; i++) total += exp(logits[i] / 0.5);
    for (int i = 0; i < 5; i++) expected[i] = exp(logits[i] / 0.5) / total;
    sampling_params temperature = {0.5f, 0, 0.0f};
    frequencies(logits, 5, &temperature, freq);
    tap_ok(max_error(freq, expected, 5) < 0.015, "temperature 0.5: frequencies of softmax(logits / 0.5) (worst %.4f)", max_error(freq, expected, 5));

    /* top-k 2 over ids {0, 4} (logit 2 each): half and half, nothing else */
    sampling_params top_k = {1.0f, 2, 0.0f};
    frequencies(logits, 5, &top_k, freq);
    double expected_k[5] = {0.5, 0, 0, 0, 0.5};
    tap_ok(max_error(freq, expected_k, 5) < 0.015, "top_k 2: only the two largest, renormalized (worst %.4f)", max_error(freq, expected_k, 5));

    /* top-p 0.7 over probabilities 0.5, 0.3, 0.15, 0.05: ids 0 and 1 (0.625, 0.375) */
    float p_logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    sampling_params top_p = {1.0f, 0, 0.7f};
    frequencies(p_logits, 4, &top_p, freq);
    double expected_p[4] = {0.625, 0.375, 0, 0};
    tap_ok(max_error(freq, expected_p, 4) < 0.015, "top_p 0.7: the nucleus with the first token past it (worst %.4f)", max_error(freq, expected_p, 4));
    sampling_params top_p_small = {1.0f, 0, 0.2f};
    frequencies(p_logits, 4, &top_p_small, freq);
    tap_ok(freq[0] > 0.9999, "top_p below the largest probability keeps the most likely token alone");

    double direct = logits[3] - (log(exp(2.0) + exp(1.0) + exp(0.5) + exp(0.0) + exp(2.0)));
    tap_ok(fabs(token_log_prob(logits, 5, 3) - direct) < 1e-9, "log-probability over the tokenizer's ids, not the padded one (%.9f)", direct);
}

static void test_decode_attention(int B, int T, int H, int G, int D, int prefill, int window) {
    const kernel_ops *ops = kernels_cpu();
    size_t C3 = (size_t)(H + 2 * G) * D, HD = (size_t)H * D, GD = (size_t)G * D;
    float *qkv = malloc(sizeof(float) * B * T * C3), *full = malloc(sizeof(float) * B * T * HD);
    float *cached = calloc((size_t)B * T * HD, sizeof(float)), *step_qkv = malloc(sizeof(float) * B * T * C3);
    float *step_out = malloc(sizeof(float) * B * T * HD);
    float *k_cache = calloc((size_t)B * T * GD, sizeof(float)), *v_cache = calloc((size_t)B * T * GD, sizeof(float));
    void *workspace = ops->alloc(ops->attention_workspace_bytes(B, T, H, D));
    for (size_t i = 0; i < (size_t)B * T * C3; i++) qkv[i] = philox_normal(3, 5, i);
    dropout_rng none = {0.0f, 0, 0, 0};
    ops->attention_forward(full, workspace, qkv, B, T, H, G, D, 0, H, window, none);
    /* positions [0, prefill) at once, then one at a time */
    for (int past = 0; past < T; past = past == 0 ? prefill : past + 1) {
        int Tq = past == 0 ? prefill : 1;
        for (int b = 0; b < B; b++)
            memcpy(step_qkv + (size_t)b * Tq * C3, qkv + ((size_t)b * T + past) * C3, sizeof(float) * Tq * C3);
        ops->decode_attention(step_out, k_cache, v_cache, step_qkv, B, Tq, H, G, D, past, T, window);
        for (int b = 0; b < B; b++)
            memcpy(cached + ((size_t)b * T + past) * HD, step_out + (size_t)b * Tq * HD, sizeof(float) * Tq * HD);
    }
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)B * T * HD; i++) worst = fmax(worst, fabs(full[i] - cached[i]));
    tap_ok(worst < 1e-5, "decode attention B=%d T=%d H=%d G=%d D=%d window %d over the cache (prefill %d, then one "
           "token at a time) equals the full causal attention (worst %.2e)", B, T, H, G, D, window, prefill, worst);
    ops->release(workspace);
    free(qkv); free(full); free(cached); free(step_qkv); free(step_out); free(k_cache); free(v_cache);
}

int main(void) {
    test_sampling();
    test_decode_attention(2, 7, 2, 2, 8, 3, -1);
    test_decode_attention(2, 9, 6, 2, 8, 4, -1);  /* grouped-query: 3 query heads per key/value head */
    test_decode_attention(1, 4200, 1, 1, 4, 4190, -1); /* more keys than the CPU kernel's score block */
    /* sliding windows (--window-size W,0): shorter than the prefill, 0 (each token itself) */
    test_decode_attention(2, 9, 6, 2, 8, 4, 2);
    test_decode_attention(2, 7, 2, 2, 8, 3, 0);
    test_decode_attention(1, 4200, 1, 1, 4, 4190, 4100); /* a window of more keys than a score block */
    return tap_done();
}
