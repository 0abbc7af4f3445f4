/* generate_api.h: Megatron's text-generation REST request and response (PUT /api of
 * tools/run_text_generation_server.py): the JSON body is checked field by field with Megatron's
 * messages (prompts, tokens_to_generate, logprobs, temperature, top_k, top_p, top_p_decay,
 * top_p_bound, add_BOS, stop_on_eol, stop_on_double_eol, prevent_newline_after_colon,
 * random_seed, stop_token and, as a list, stop_tokens), the prompts tokenized, generated, and the
 * answer built: {"text": [...], "segments": [[...]], "logprobs": [[...]] (when asked),
 * "tokens": [[...]]}. A request the model cannot take gets status 400 and {"message": "..."}. */
#ifndef GENERATE_API_H
#define GENERATE_API_H

#include <stddef.h>

#include "app/inference/generation.h"
#include "app/inference/generate_request.h"
#include "app/tokenizers/tokenizer.h"

/* Handles one request body (len bytes, not NUL-terminated). Returns the malloc'd JSON answer
 * and sets *status to the HTTP status (200, or 400 with {"message": ...}). Not thread-safe:
 * the caller serializes requests (the generator and tokenizer are shared). */
char *generate_api_handle(generator *g, tokenizer *tok, const char *body, size_t len, int *status);

/* a JSON {"message": text} (malloc'd) */
char *generate_api_message(const char *text);

#endif
