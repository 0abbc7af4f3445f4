/* generate_request.c: see generate_request.h. Validation follows Megatron's MegatronGenerate.put,
 * in its order and with its messages. */
#include "app/inference/generate_request.h"
#include "app/core/error.h"

#include <string.h>

static int is_int(const json_t *v) { return json_is_integer(v); }
static int is_number(const json_t *v) { return json_is_integer(v) || json_is_real(v); }

int generate_request_parse(generate_request *q, const char *body, size_t len, const generate_limits *g, char *err,
                           size_t errlen) {
    json_error_t jerr;
    q->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!q->root) return error_format(err, errlen, "malformed JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    json_t *r = q->root, *v;
    if (!json_is_object(r)) return error_format(err, errlen, "the request body must be a JSON object");
    if (!json_object_get(r, "prompts")) return error_format(err, errlen, "prompts argument required");
    if (json_object_get(r, "max_len")) return error_format(err, errlen, "max_len is no longer used.  Replace with tokens_to_generate");
    if (json_object_get(r, "sentences")) return error_format(err, errlen, "sentences is no longer used.  Replace with prompts");
    if (json_object_get(r, "beam_width")) return error_format(err, errlen, "Beam search is no longer supported.");
    json_t *prompts = json_object_get(r, "prompts");
    if (!json_is_array(prompts)) return error_format(err, errlen, "prompts is not a list of strings");
    q->batch = (int)json_array_size(prompts);
    if (q->batch == 0) return error_format(err, errlen, "prompts is empty");
    if (q->batch > API_MAX_PROMPTS) return error_format(err, errlen, "Maximum number of prompts is %d", API_MAX_PROMPTS);
    if (q->batch > g->max_batch) return error_format(err, errlen, "Maximum number of prompts of this server is %d (--max-batch-size)", g->max_batch);
    for (int i = 0; i < q->batch; i++)
        if (!json_is_string(json_array_get(prompts, (size_t)i))) return error_format(err, errlen, "prompts is not a list of strings");
    generation_params *p = &q->params;
    memset(p, 0, sizeof *p);
    p->tokens_to_generate = 64;
    p->sampling.temperature = 1.0f;
    p->random_seed = -1;
    if ((v = json_object_get(r, "tokens_to_generate"))) {
        if (!is_int(v) || json_integer_value(v) < 0) return error_format(err, errlen, "tokens_to_generate must be an integer greater than or equal to 0");
        if (json_integer_value(v) > g->max_len) return error_format(err, errlen, "tokens_to_generate must be at most %d", g->max_len);
        p->tokens_to_generate = (int)json_integer_value(v);
    }
    if ((v = json_object_get(r, "logprobs"))) {
        if (!json_is_boolean(v)) return error_format(err, errlen, "logprobs must be a boolean value");
        p->logprobs = json_is_true(v);
    }
    if (p->tokens_to_generate == 0 && !p->logprobs) return error_format(err, errlen, "tokens_to_generate=0 implies logprobs should be True");
    if ((v = json_object_get(r, "temperature"))) {
        double t = is_number(v) ? json_number_value(v) : -1.0;
        if (!(t > 0.0 && t <= 100.0)) return error_format(err, errlen, "temperature must be a positive number less than or equal to 100.0");
        p->sampling.temperature = (float)t;
    }
    if ((v = json_object_get(r, "top_k"))) {
        if (!is_int(v)) return error_format(err, errlen, "top_k must be an integer equal to or greater than 0 and less than or equal to 1000");
        if (json_integer_value(v) < 0 || json_integer_value(v) > 1000) return error_format(err, errlen, "top_k must be equal to or greater than 0 and less than or equal to 1000");
        p->sampling.top_k = (int)json_integer_value(v);
    }
    if ((v = json_object_get(r, "top_p"))) {
        if (!json_is_real(v)) return error_format(err, errlen, "top_p must be a positive float less than or equal to 1.0");
        double top_p = json_real_value(v);
        if (top_p > 0.0 && p->sampling.top_k > 0) return error_format(err, errlen, "cannot set both top-k and top-p samplings.");
        if (!(top_p >= 0.0 && top_p <= 1.0)) return error_format(err, errlen, "top_p must be less than or equal to 1.0");
        p->sampling.top_p = (float)top_p;
    }
    if ((v = json_object_get(r, "top_p_decay"))) {
        if (!json_is_real(v)) return error_format(err, errlen, "top_p_decay must be a positive float less than or equal to 1.0");
        if (p->sampling.top_p == 0.0f) return error_format(err, errlen, "top_p_decay cannot be set without top_p");
        double d = json_real_value(v);
        if (!(d >= 0.0 && d <= 1.0)) return error_format(err, errlen, "top_p_decay must be less than or equal to 1.0");
        p->top_p_decay = (float)d;
    }
    if ((v = json_object_get(r, "top_p_bound"))) {
        if (!json_is_real(v)) return error_format(err, errlen, "top_p_bound must be a positive float less than or equal to top_p");
        if (p->sampling.top_p == 0.0f) return error_format(err, errlen, "top_p_bound cannot be set without top_p");
        double bound = json_real_value(v);
        if (!(bound > 0.0 && bound <= p->sampling.top_p)) return error_format(err, errlen, "top_p_bound must be greater than 0 and less than top_p");
        p->top_p_bound = (float)bound;
    }
    struct { const char *name; int *field; } flags[] = {
        {"add_BOS", &q->add_BOS}, {"stop_on_double_eol", &p->stop_on_double_eol}, {"stop_on_eol", &p->stop_on_eol},
        {"prevent_newline_after_colon", &p->prevent_newline_after_colon},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (!(v = json_object_get(r, flags[i].name))) continue;
        if (!json_is_boolean(v)) return error_format(err, errlen, "%s must be a boolean value", flags[i].name);
        *flags[i].field = json_is_true(v);
        if (i == 0)
            for (int k = 0; k < q->batch; k++)
                if (json_string_length(json_array_get(prompts, (size_t)k)) == 0 && !q->add_BOS)
                    return error_format(err, errlen, "Empty prompts require add_BOS=true");
    }
    if (!q->add_BOS)
        for (int k = 0; k < q->batch; k++)
            if (json_string_length(json_array_get(prompts, (size_t)k)) == 0) return error_format(err, errlen, "Empty prompts require add_BOS=true");
    if ((v = json_object_get(r, "random_seed"))) {
        if (!is_int(v)) return error_format(err, errlen, "random_seed must be integer");
        if (json_integer_value(v) < 0) return error_format(err, errlen, "random_seed must be a positive integer");
        p->random_seed = json_integer_value(v);
    }
    if ((v = json_object_get(r, "stop_token"))) {
        if (!is_int(v)) return error_format(err, errlen, "stop_token must be an integer");
        /* Megatron takes any integer; -1, which no token matches, generates every one of
         * tokens_to_generate (benchmarks: no stop at the end-of-document token) */
        if (json_integer_value(v) < -1 || json_integer_value(v) >= g->vocab_size)
            return error_format(err, errlen, "stop_token must be a token id in [0, %d), or -1 for none", g->vocab_size);
        p->stop_tokens[p->num_stop_tokens++] = (int)json_integer_value(v);
    }
    if ((v = json_object_get(r, "stop_tokens"))) {
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > GENERATION_MAX_STOP_TOKENS - 1)
            return error_format(err, errlen, "stop_tokens must be a list of 1 to %d integers", GENERATION_MAX_STOP_TOKENS - 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *id = json_array_get(v, i);
            if (!is_int(id) || json_integer_value(id) < 0 || json_integer_value(id) >= g->vocab_size)
                return error_format(err, errlen, "stop_tokens must hold token ids in [0, %d)", g->vocab_size);
            p->stop_tokens[p->num_stop_tokens++] = (int)json_integer_value(id);
        }
    }
    if ((v = json_object_get(r, "length_penalty")) && !json_is_real(v)) return error_format(err, errlen, "length_penalty must be a float");
    return 0;
}
