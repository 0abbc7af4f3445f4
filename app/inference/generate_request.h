/* generate_request.h: the JSON body of Megatron's PUT /api checked field by field (prompts,
 * tokens_to_generate, logprobs, temperature, top_k, top_p, top_p_decay, top_p_bound, add_BOS,
 * stop_on_eol, stop_on_double_eol, prevent_newline_after_colon, random_seed, stop_token (-1: none,
 * generate all tokens_to_generate) and, as a list, stop_tokens, length_penalty) into generation parameters, with Megatron's messages.
 * Bytes from the network: any input gets 0 or -1 and a message, never a crash (fuzzed by
 * tests/fuzz/fuzz_generate_request.c). */
#ifndef GENERATE_REQUEST_H
#define GENERATE_REQUEST_H

#include <jansson.h>
#include <stddef.h>

#include "app/inference/generation.h"

#define API_MAX_PROMPTS 128

/* what the server takes: prompts per request, positions per sequence, token ids */
typedef struct generate_limits {
    int max_batch, max_len, vocab_size;
} generate_limits;

typedef struct generate_request {
    json_t *root;               /* the parsed body (json_decref when done, also after an error) */
    generation_params params;
    int add_BOS;
    int batch;                  /* prompts: the strings of root's "prompts" */
} generate_request;

/* Parses body[len] (not NUL-terminated). Returns 0, or -1 with one line in err. */
int generate_request_parse(generate_request *q, const char *body, size_t len, const generate_limits *limits, char *err,
                           size_t errlen);

#endif
