/* hf_gpt2_config.c: reading and writing Hugging Face GPT-2 config.json (see hf_gpt2_config.h). */
#include "app/model/hf_gpt2_config.h"
#include "app/core/error.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* a positive integer field; fallback (may be NULL) is tried when name is absent */
static int positive_field(const json_t *root, const char *name, const char *fallback,
                          const char *path, int64_t *value, char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v && fallback) v = json_object_get(root, fallback);
    if (!v || !json_is_integer(v) || json_integer_value(v) <= 0)
        return error_format(err, errlen, "%s: \"%s\" is %s", path, name,
                    v ? "not a positive integer" : "missing");
    *value = json_integer_value(v);
    return 0;
}

/* a boolean field that must have the given value when present (our model computes only that) */
static int required_flag(const json_t *root, const char *name, int required, const char *path,
                         char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (v && (!json_is_boolean(v) || json_is_true(v) != required))
        return error_format(err, errlen, "%s: \"%s\" must be %s for this model (our attention does not "
                    "implement the other setting)", path, name, required ? "true" : "false");
    return 0;
}

static int parse(const json_t *root, const char *path, hf_gpt2_config *c, char *err, size_t errlen) {
    if (!json_is_object(root)) return error_format(err, errlen, "%s: not a JSON object", path);
    const json_t *model_type = json_object_get(root, "model_type");
    if (model_type && (!json_is_string(model_type) || strcmp(json_string_value(model_type), "gpt2")))
        return error_format(err, errlen, "%s: model_type is %s, this converter reads \"gpt2\"", path,
                    json_is_string(model_type) ? json_string_value(model_type) : "not a string");
    if (positive_field(root, "n_embd", NULL, path, &c->n_embd, err, errlen) ||
        positive_field(root, "n_layer", NULL, path, &c->n_layer, err, errlen) ||
        positive_field(root, "n_head", NULL, path, &c->n_head, err, errlen) ||
        positive_field(root, "n_positions", "n_ctx", path, &c->n_positions, err, errlen) ||
        positive_field(root, "vocab_size", NULL, path, &c->vocab_size, err, errlen))
        return -1;
    if (c->n_embd % c->n_head)
        return error_format(err, errlen, "%s: n_embd %lld is not a multiple of n_head %lld", path,
                    (long long)c->n_embd, (long long)c->n_head);
    const json_t *inner = json_object_get(root, "n_inner");
    c->n_inner = 4 * c->n_embd;
    if (inner && !json_is_null(inner) &&
        positive_field(root, "n_inner", NULL, path, &c->n_inner, err, errlen))
        return -1;
    const json_t *epsilon = json_object_get(root, "layer_norm_epsilon");
    c->layer_norm_epsilon = 1e-5;
    if (epsilon) {
        if (!json_is_number(epsilon) || json_number_value(epsilon) <= 0)
            return error_format(err, errlen, "%s: \"layer_norm_epsilon\" is not a positive number", path);
        c->layer_norm_epsilon = json_number_value(epsilon);
    }
    /* our GeLU is the tanh approximation, which these three names all compute */
    const json_t *activation = json_object_get(root, "activation_function");
    if (activation) {
        const char *name = json_is_string(activation) ? json_string_value(activation) : "";
        if (strcmp(name, "gelu_new") && strcmp(name, "gelu_pytorch_tanh") && strcmp(name, "gelu_fast"))
            return error_format(err, errlen, "%s: activation_function \"%s\" cannot be converted: our model "
                        "computes the tanh-approximated GeLU (gelu_new)", path, name);
    }
    if (required_flag(root, "scale_attn_weights", 1, path, err, errlen) ||
        required_flag(root, "scale_attn_by_inverse_layer_idx", 0, path, err, errlen))
        return -1;
    const json_t *tie = json_object_get(root, "tie_word_embeddings");
    c->tie_word_embeddings = tie ? json_is_true(tie) : 1;
    const json_t *dtype = json_object_get(root, "torch_dtype");
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s",
             json_is_string(dtype) ? json_string_value(dtype) : "float32");
    return 0;
}

int hf_gpt2_config_read(const char *path, hf_gpt2_config *config, char *err, size_t errlen) {
    memset(config, 0, sizeof *config);
    FILE *probe = fopen(path, "r");
    if (!probe) return error_format(err, errlen, "%s: %s", path, strerror(errno));
    fclose(probe);
    json_error_t json_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &json_error);
    if (!root)
        return error_format(err, errlen, "%s:%d: not valid JSON: %s", path, json_error.line, json_error.text);
    int status = parse(root, path, config, err, errlen);
    json_decref(root);
    return status;
}

/* the shortest %g text that reads back as the same float (Python prints 1e-05, not
 * 9.99999974737875e-06, for the float32 epsilon Megatron configs carry) */
static void shortest_float_text(double value, char *text, size_t size) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, size, "%.*g", digits, value);
        if ((float)strtod(text, NULL) == (float)value) break;
    }
    if (!strpbrk(text, ".eEn")) strncat(text, ".0", size - strlen(text) - 1); /* stay a JSON real */
}

int hf_gpt2_config_write(const char *path, const hf_gpt2_config *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return error_format(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    char epsilon[64], n_inner[32];
    shortest_float_text(c->layer_norm_epsilon, epsilon, sizeof epsilon);
    if (c->n_inner == 4 * c->n_embd) snprintf(n_inner, sizeof n_inner, "null");
    else snprintf(n_inner, sizeof n_inner, "%lld", (long long)c->n_inner);
    /* GPT-2's <|endoftext|> is 50256, the last id; a smaller vocabulary keeps its last id */
    long long end_of_text = c->vocab_size > 50256 ? 50256 : (long long)c->vocab_size - 1;
    /* keys sorted as transformers' to_json_string(sort_keys=True, indent=2) writes them */
    fprintf(f,
            "{\n"
            "  \"activation_function\": \"gelu_new\",\n"
            "  \"architectures\": [\n"
            "    \"GPT2LMHeadModel\"\n"
            "  ],\n"
            "  \"attn_pdrop\": 0.1,\n"
            "  \"bos_token_id\": %lld,\n"
            "  \"embd_pdrop\": 0.1,\n"
            "  \"eos_token_id\": %lld,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"layer_norm_epsilon\": %s,\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"n_embd\": %lld,\n"
            "  \"n_head\": %lld,\n"
            "  \"n_inner\": %s,\n"
            "  \"n_layer\": %lld,\n"
            "  \"n_positions\": %lld,\n"
            "  \"reorder_and_upcast_attn\": false,\n"
            "  \"resid_pdrop\": 0.1,\n"
            "  \"scale_attn_by_inverse_layer_idx\": false,\n"
            "  \"scale_attn_weights\": true,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            end_of_text, end_of_text, epsilon, (long long)c->n_embd, (long long)c->n_head, n_inner,
            (long long)c->n_layer, (long long)c->n_positions,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype, (long long)c->vocab_size);
    int ok = fflush(f) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved_errno = errno; }
    if (!ok) return error_format(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    return 0;
}
