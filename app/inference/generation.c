/* generation.c: see generation.h. */
#include "app/inference/generation.h"
#include "app/core/error.h"
#include "kernels/philox.h"

#include <stdlib.h>
#include <string.h>

void generator_create(generator *g, inference_model *im, int max_batch, int max_len, int max_rows,
                      int vocab_size, int eod, uint64_t seed, int64_t max_tokens_to_oom) {
    if (max_rows < max_batch)
        user_error("--inference-max-rows %d is below --max-batch-size %d: a forward takes one row per prompt at least",
                   max_rows, max_batch);
    memset(g, 0, sizeof *g);
    g->im = im;
    g->max_batch = max_batch;
    g->max_len = max_len;
    g->max_rows = max_rows;
    g->vocab_size = vocab_size;
    g->eod = eod;
    g->colon_id = g->newline_id = -1;
    g->seed = seed;
    g->max_tokens_to_oom = max_tokens_to_oom;
    gpt_inference_create(&g->inference, &im->model, inference_model_pp_group(im), max_batch, max_len, max_rows);
    g->logits = malloc(sizeof(float) * (size_t)max_rows * (size_t)im->model.config.padded_vocab_size);
    g->piece_logprobs = malloc(sizeof(float) * (size_t)max_rows);
    CHECK(g->logits && g->piece_logprobs, "out of host memory for %d rows of logits", max_rows);
    sampling_scratch_init(&g->scratch, vocab_size);
}

void generator_free(generator *g) {
    gpt_inference_free(&g->inference);
    sampling_scratch_free(&g->scratch);
    free(g->logits);
    free(g->piece_logprobs);
    memset(g, 0, sizeof *g);
}

void generation_result_free(generation_result *r) {
    free(r->tokens);
    free(r->lengths);
    free(r->logprobs);
    memset(r, 0, sizeof *r);
}

/* Runs positions [from, to) of every sequence through the model in pieces of at most max_rows
 * rows, filling the log-probabilities of the tokens that follow them, and leaves each
 * sequence's logits at position to - 1 in g->logits [B, padded vocab], on every rank. With
 * several pipeline stages the last one computes the log-probabilities and sends them with those
 * B rows of logits, not the [B*count, vocab] logits of a prefill. */
static void forward_positions(generator *g, const generation_result *r, int from, int to, int *piece_tokens) {
    int B = r->batch, L = r->total_length, V = g->im->model.config.padded_vocab_size;
    int per_piece = g->max_rows / B, count = 0;
    int last_stage = gpt_inference_last_stage(&g->inference);
    for (int start = from; start < to; start += count) {
        count = to - start < per_piece ? to - start : per_piece;
        for (int b = 0; b < B; b++)
            memcpy(piece_tokens + (size_t)b * count, r->tokens + (size_t)b * L + start, sizeof(int) * (size_t)count);
        if (!r->logprobs) {
            gpt_inference_forward_last(&g->inference, piece_tokens, B, count, start, g->logits);
            continue;
        }
        gpt_inference_forward(&g->inference, piece_tokens, B, count, start, g->logits);
        if (last_stage) {
            for (int b = 0; b < B; b++)
                for (int t = 0; t < count; t++) {
                    int position = start + t;
                    const float *row = g->logits + ((size_t)b * count + t) * (size_t)V;
                    /* a generation step rewrites the last one once it has sampled tokens[to] */
                    g->piece_logprobs[(size_t)b * count + t] =
                        position + 1 < L ? (float)token_log_prob(row, g->vocab_size, r->tokens[(size_t)b * L + position + 1])
                                         : 0.0f;
                }
            /* row count-1 of each sequence to row b (ascending b never overwrites a later source) */
            if (count > 1)
                for (int b = 0; b < B; b++)
                    memmove(g->logits + (size_t)b * V, g->logits + ((size_t)b * count + (size_t)(count - 1)) * (size_t)V,
                            sizeof(float) * (size_t)V);
        }
        gpt_inference_share(&g->inference, g->piece_logprobs, (size_t)B * (size_t)count, MPI_FLOAT);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < count; t++)
                if (start + t + 1 < L) r->logprobs[(size_t)b * (L - 1) + start + t] = g->piece_logprobs[(size_t)b * count + t];
    }
    gpt_inference_share(&g->inference, g->logits, (size_t)B * (size_t)V, MPI_FLOAT);
}

/* forward_positions for greedy decoding without log-probabilities: the next token of every
 * sequence is chosen on the device (gpt_inference_forward_greedy), so per step only B token ids
 * leave it and travel to the other pipeline stages, not B rows of logits */
static void forward_positions_greedy(generator *g, const generation_result *r, int from, int to, int *piece_tokens,
                                     int *next_tokens) {
    int B = r->batch, L = r->total_length, per_piece = g->max_rows / B, count = 0;
    for (int start = from; start < to; start += count) {
        count = to - start < per_piece ? to - start : per_piece;
        for (int b = 0; b < B; b++)
            memcpy(piece_tokens + (size_t)b * count, r->tokens + (size_t)b * L + start, sizeof(int) * (size_t)count);
        gpt_inference_forward_greedy(&g->inference, piece_tokens, B, count, start, g->vocab_size, next_tokens);
    }
    gpt_inference_share(&g->inference, next_tokens, (size_t)B, MPI_INT);
}

static int is_stop(const generator *g, const generation_params *p, int token, int previous) {
    if (p->stop_on_double_eol) return token == 628 || (token == 198 && previous == 198);
    if (p->stop_on_eol) return token == 628 || token == 198;
    if (p->num_stop_tokens == 0) return token == g->eod;
    for (int i = 0; i < p->num_stop_tokens; i++) if (token == p->stop_tokens[i]) return 1;
    return 0;
}

int generate(generator *g, int batch, int32_t *const *prompts, const int *prompt_lengths,
             const generation_params *p, generation_result *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    int max_prompt = 0, min_prompt = 0;
    for (int b = 0; b < batch; b++) {
        if (prompt_lengths[b] < 1) return error_format(err, errlen, "prompt %d has no tokens", b);
        if (prompt_lengths[b] > max_prompt) max_prompt = prompt_lengths[b];
        if (b == 0 || prompt_lengths[b] < min_prompt) min_prompt = prompt_lengths[b];
    }
    if (batch < 1 || batch > g->max_batch)
        return error_format(err, errlen, "%d prompts: this server takes 1 to %d", batch, g->max_batch);
    int L = max_prompt + p->tokens_to_generate;
    if (L > g->max_len)
        return error_format(err, errlen, "Length of prompt + tokens_to_generate longer than allowed (%d > %d)", L, g->max_len);
    if ((int64_t)L * batch > g->max_tokens_to_oom)
        return error_format(err, errlen, "Too many tokens.  %lld is greater than %lld", (long long)L * batch,
                            (long long)g->max_tokens_to_oom);
    int V = g->im->model.config.padded_vocab_size;
    r->batch = batch;
    r->total_length = L;
    r->tokens = malloc(sizeof(int) * (size_t)batch * (size_t)L);
    r->lengths = malloc(sizeof(int) * (size_t)batch);
    int *done = calloc((size_t)batch, sizeof(int));
    int *piece = malloc(sizeof(int) * (size_t)g->max_rows);
    if (p->logprobs && L > 1) r->logprobs = calloc((size_t)batch * (size_t)(L - 1), sizeof(float));
    CHECK(r->tokens && r->lengths && done && piece && (!p->logprobs || L <= 1 || r->logprobs),
          "out of host memory for a batch of %d x %d tokens", batch, L);
    for (int b = 0; b < batch; b++) {
        for (int t = 0; t < L; t++) r->tokens[(size_t)b * L + t] = t < prompt_lengths[b] ? prompts[b][t] : g->eod;
        r->lengths[b] = p->tokens_to_generate == 0 ? prompt_lengths[b] : L;
    }
    if (p->tokens_to_generate == 0) {
        /* scoring only: every prompt position at once */
        forward_positions(g, r, 0, L, piece);
        free(done);
        free(piece);
        return 0;
    }
    uint64_t seed = p->random_seed >= 0 ? (uint64_t)p->random_seed : philox_stream_mix(g->seed, g->requests);
    g->requests++;
    sampling_params sampling = p->sampling;
    /* greedy without log-probabilities or logit edits: the device picks the tokens (the same ids
     * sample_token's top_k 1 rule picks from the same logits) */
    int device_greedy = sampling.top_k == 1 && !r->logprobs && !(p->prevent_newline_after_colon && g->colon_id >= 0);
    int *next_tokens = device_greedy ? malloc(sizeof(int) * (size_t)batch) : NULL;
    CHECK(!device_greedy || next_tokens, "out of host memory");
    int previous = 0, context = min_prompt;
    for (context = min_prompt; context < L; context++) {
        if (device_greedy) forward_positions_greedy(g, r, previous, context, piece, next_tokens);
        else forward_positions(g, r, previous, context, piece);
        int all_done = 1;
        for (int b = 0; b < batch; b++) {
            int *row_tokens = r->tokens + (size_t)b * L;
            float *row = g->logits + (size_t)b * (size_t)V;
            int token;
            if (device_greedy) {
                token = next_tokens[b];
            } else {
                if (p->prevent_newline_after_colon && g->colon_id >= 0 && row_tokens[context - 1] == g->colon_id)
                    row[g->newline_id] = -1e10f;
                token = sample_token(row, g->vocab_size, &sampling, &g->scratch, seed,
                                     philox_stream_mix(0x67656eull /* "gen" */, (uint64_t)b), (uint64_t)context);
            }
            int started = prompt_lengths[b] <= context;
            if (started) row_tokens[context] = token;
            if (r->logprobs)
                r->logprobs[(size_t)b * (L - 1) + context - 1] = (float)token_log_prob(row, g->vocab_size, row_tokens[context]);
            if (started && !done[b] && is_stop(g, p, token, row_tokens[context - 1])) {
                done[b] = 1;
                r->lengths[b] = context + 1;
            }
            all_done &= done[b];
        }
        if (sampling.top_p > 0.0f && p->top_p_decay > 0.0f) {
            sampling.top_p *= p->top_p_decay;
            if (p->top_p_bound > 0.0f && sampling.top_p < p->top_p_bound) sampling.top_p = p->top_p_bound;
        }
        previous = context;
        if (all_done) break;
    }
    free(next_tokens);
    if (context == L) context = L - 1;
    /* Megatron keeps tokens up to the last step's position */
    int kept = context + 1;
    if (kept < L) {
        for (int b = 0; b < batch; b++) {
            memmove(r->tokens + (size_t)b * kept, r->tokens + (size_t)b * L, sizeof(int) * (size_t)kept);
            if (r->logprobs && kept > 1)
                memmove(r->logprobs + (size_t)b * (kept - 1), r->logprobs + (size_t)b * (L - 1), sizeof(float) * (size_t)(kept - 1));
            if (r->lengths[b] > kept) r->lengths[b] = kept;
        }
        r->total_length = kept;
    }
    free(done);
    free(piece);
    return 0;
}
