/* generate_api.c: see generate_api.h. Validation follows Megatron's MegatronGenerate.put, in
 * its order and with its messages; text that is not UTF-8 (a GPT-2 token may end inside a
 * character) is answered with U+FFFD in its place, as Python's errors="replace" does. */
#include "app/inference/generate_api.h"
#include "app/inference/generate_request.h"
#include "app/inference/generation_lockstep.h"
#include "app/core/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

char *generate_api_message(const char *text) {
    json_t *o = json_pack("{s:s}", "message", text);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    CHECK(s, "out of host memory for a response");
    return s;
}

/* a JSON string of bytes, invalid UTF-8 replaced by U+FFFD */
static json_t *utf8_string(const char *bytes, size_t n) {
    char *out = malloc(3 * n + 1);
    CHECK(out, "out of host memory for a response");
    size_t o = 0, i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t step = utf8proc_iterate((const utf8proc_uint8_t *)bytes + i, (utf8proc_ssize_t)(n - i), &cp);
        if (step > 0 && cp != 0) {
            memcpy(out + o, bytes + i, (size_t)step);
            o += (size_t)step;
            i += (size_t)step;
        } else if (step > 0) { /* a NUL byte: JSON can carry it escaped, keep it simple: drop */
            i += (size_t)step;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    json_t *s = json_stringn(out, o);
    free(out);
    CHECK(s, "cannot build a JSON string");
    return s;
}

/* the answer of a generation: text, segments, logprobs, tokens */
static json_t *build_response(const generation_result *res, tokenizer *tok, int with_logprobs) {
    json_t *text = json_array(), *segments = json_array(), *logprobs = json_array(), *tokens = json_array();
    for (int b = 0; b < res->batch; b++) {
        const int *row = res->tokens + (size_t)b * res->total_length;
        int n = res->lengths[b];
        size_t bytes = 0;
        char *s = tokenizer_decode_bytes(tok, row, (size_t)n, &bytes);
        CHECK(s, "cannot detokenize a generated sequence: %s", tokenizer_last_error(tok));
        json_array_append_new(text, utf8_string(s, bytes));
        free(s);
        json_t *seg = json_array(), *ids = json_array(), *lp = json_array();
        for (int t = 0; t < n; t++) {
            s = tokenizer_decode_bytes(tok, row + t, 1, &bytes);
            CHECK(s, "cannot detokenize token %d: %s", row[t], tokenizer_last_error(tok));
            json_array_append_new(seg, utf8_string(s, bytes));
            free(s);
            json_array_append_new(ids, json_integer(row[t]));
            if (with_logprobs && t + 1 < n)
                json_array_append_new(lp, json_real(res->logprobs[(size_t)b * (res->total_length - 1) + t]));
        }
        json_array_append_new(segments, seg);
        json_array_append_new(tokens, ids);
        json_array_append_new(logprobs, lp);
    }
    json_t *o = json_object();
    json_object_set_new(o, "text", text);
    json_object_set_new(o, "segments", segments);
    if (with_logprobs) json_object_set_new(o, "logprobs", logprobs);
    else json_decref(logprobs);
    json_object_set_new(o, "tokens", tokens);
    return o;
}

char *generate_api_handle(generator *g, tokenizer *tok, const char *body, size_t len, int *status) {
    char err[1024];
    generate_request q = {0};
    generate_limits limits = {g->max_batch, g->max_len, g->vocab_size};
    *status = 400;
    if (generate_request_parse(&q, body, len, &limits, err, sizeof err) != 0) {
        json_decref(q.root);
        return generate_api_message(err);
    }
    json_t *prompts = json_object_get(q.root, "prompts");
    int32_t **ids = calloc((size_t)q.batch, sizeof(int32_t *));
    int *lengths = calloc((size_t)q.batch, sizeof(int));
    CHECK(ids && lengths, "out of host memory for prompts");
    char *answer = NULL;
    for (int b = 0; b < q.batch && !answer; b++) {
        json_t *s = json_array_get(prompts, (size_t)b);
        size_t n = 0, cap = 0;
        if (q.add_BOS) {
            cap = 16;
            ids[b] = malloc(sizeof(int32_t) * cap);
            CHECK(ids[b], "out of host memory for prompts");
            ids[b][n++] = g->eod;
        }
        if (tokenizer_encode(tok, json_string_value(s), json_string_length(s), &ids[b], &n, &cap) != 0) {
            snprintf(err, sizeof err, "prompt %d cannot be tokenized: %s", b, tokenizer_last_error(tok));
            answer = generate_api_message(err);
        }
        lengths[b] = (int)n;
    }
    generation_result res = {0};
    if (!answer && generate_lockstep(g, q.batch, ids, lengths, &q.params, &res, err, sizeof err) != 0)
        answer = generate_api_message(err);
    if (!answer) {
        json_t *o = build_response(&res, tok, q.params.logprobs);
        answer = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
        json_decref(o);
        CHECK(answer, "out of host memory for a response");
        *status = 200;
    }
    generation_result_free(&res);
    for (int b = 0; b < q.batch; b++) free(ids[b]);
    free(ids);
    free(lengths);
    json_decref(q.root);
    return answer;
}
