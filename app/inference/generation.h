/* generation.h: text generation over a batch of prompts of different lengths (Megatron's
 * generate_tokens_probs_and_return_on_first_stage and score_and_return_on_first_stage).
 * Prompts are padded with the end-of-document id to max prompt length + tokens_to_generate; the
 * loop starts at the shortest prompt's length and runs the model on the new positions only (the
 * key/value cache holds the rest): the first step all prompt positions up to the shortest length
 * (prefill), then one position per step. A sequence still inside its prompt keeps its prompt
 * token; the others take the sampled one. A sequence is done when it samples a stop token
 * (its length then ends after it); generation stops when every sequence is done or the length is
 * reached. Log-probabilities are those of each next token (prompt and generated) under the
 * model's distribution over the tokenizer's ids, before sampling modifies it. tokens_to_generate == 0 only scores the
 * prompts. */
#ifndef GENERATION_H
#define GENERATION_H

#include <stddef.h>
#include <stdint.h>

#include "app/inference/inference_model.h"
#include "app/inference/sampling.h"
#include "app/model/gpt_inference.h"

#define GENERATION_MAX_STOP_TOKENS 16

typedef struct generation_params {
    int tokens_to_generate;
    int logprobs;               /* compute log-probabilities */
    sampling_params sampling;
    float top_p_decay, top_p_bound;
    int64_t random_seed;        /* < 0: the generator's own sequence of seeds */
    int stop_tokens[GENERATION_MAX_STOP_TOKENS];
    int num_stop_tokens;        /* 0: the end-of-document id */
    int stop_on_eol, stop_on_double_eol;  /* GPT-2 ids 198 ("\n") and 628 ("\n\n") */
    int prevent_newline_after_colon;
} generation_params;

typedef struct generation_result {
    int batch, total_length;    /* tokens is [batch, total_length] */
    int *tokens;
    int *lengths;               /* per sequence: prompt + generated tokens kept */
    float *logprobs;            /* [batch, total_length - 1] when asked for, else NULL */
} generation_result;

typedef struct generator {
    inference_model *im;
    gpt_inference inference;
    int max_batch, max_len, max_rows;
    int vocab_size, eod;        /* the tokenizer's */
    int colon_id, newline_id;   /* for prevent_newline_after_colon (-1 when unknown) */
    int64_t max_tokens_to_oom;  /* batch * length above this is refused (Megatron's) */
    uint64_t seed, requests;    /* seeds of requests without random_seed: (seed, request count) */
    float *logits;              /* host [max_rows, padded vocab] */
    float *piece_logprobs;      /* host [max_rows]: one forward's log-probabilities */
    sampling_scratch scratch;
} generator;

void generator_create(generator *g, inference_model *im, int max_batch, int max_len, int max_rows,
                      int vocab_size, int eod, uint64_t seed, int64_t max_tokens_to_oom);
void generator_free(generator *g);

/* Generates for batch prompts (prompts[b][0..prompt_lengths[b]), at least one token each).
 * Returns 0, or -1 with one line in err (a request the model cannot take: too long, too many
 * tokens, too many prompts); the result's arrays are malloc'd (generation_result_free). */
int generate(generator *g, int batch, int32_t *const *prompts, const int *prompt_lengths,
             const generation_params *p, generation_result *r, char *err, size_t errlen);
void generation_result_free(generation_result *r);

#endif
