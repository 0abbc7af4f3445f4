/* hf_t5_config.c: Hugging Face T5Config read and written (hf_t5_config.h). */
#include "app/model/hf_t5_config.h"

#include "app/core/error.h"
#include "app/model/hf_real_text.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hf_config_is_t5(const char *path) {
    json_error_t json_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &json_error);
    const json_t *type = root ? json_object_get(root, "model_type") : NULL;
    int t5 = json_is_string(type) && !strcmp(json_string_value(type), "t5");
    json_decref(root);
    return t5;
}

/* a positive integer field, fallback when absent or null */
static int positive_field(const json_t *root, const char *name, int64_t fallback, const char *path, int64_t *value,
                          char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        *value = fallback;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return error_format(err, errlen, "%s: \"%s\" is not a positive integer", path, name);
    *value = json_integer_value(v);
    return 0;
}

/* a token id: a non-negative integer, fallback when absent or null */
static int token_field(const json_t *root, const char *name, int64_t fallback, const char *path, int64_t *value,
                       char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        *value = fallback;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return error_format(err, errlen, "%s: \"%s\" is not a token id", path, name);
    *value = json_integer_value(v);
    return 0;
}

static int number_field(const json_t *root, const char *name, double fallback, double minimum, const char *path,
                        double *value, char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        *value = fallback;
        return 0;
    }
    if (!json_is_number(v) || json_number_value(v) < minimum)
        return error_format(err, errlen, "%s: \"%s\" is not a number of at least %g", path, name, minimum);
    *value = json_number_value(v);
    return 0;
}

/* why our model does not compute feed_forward_proj `proj`, or NULL; *gated and *gelu_erf are
 * set when it does */
static const char *feed_forward_refusal(const char *proj, int *gated, int *gelu_erf) {
    *gated = !strcmp(proj, "gated-silu") || !strcmp(proj, "gated-swish");
    *gelu_erf = !strcmp(proj, "gelu");
    if (*gated || *gelu_erf || !strcmp(proj, "gelu_new") || !strcmp(proj, "gelu_pytorch_tanh")) return NULL;
    if (!strcmp(proj, "gated-gelu") || !strcmp(proj, "gated-gelu_new") || !strcmp(proj, "gated-gelu_pytorch_tanh"))
        return "its MLP is gated GeLU (T5 v1.1, Flan-T5: wo(gelu(wi_0 x) * wi_1 x)), which is not built here: the "
               "gated MLP here is Megatron's --swiglu (feed_forward_proj gated-silu)";
    if (!strcmp(proj, "relu"))
        return "its MLP is ReLU (the original T5), which is not built here: the MLPs here are GeLU (feed_forward_proj "
               "gelu or gelu_new) and --swiglu (gated-silu)";
    return "only feed_forward_proj gated-silu (--swiglu), gelu (the exact GeLU) and gelu_new or gelu_pytorch_tanh "
           "(GeLU's tanh approximation) are computed here";
}

int hf_t5_config_read(const char *path, hf_t5_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    json_error_t json_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &json_error);
    if (!root) return error_format(err, errlen, "%s: not valid JSON: %s (line %d)", path, json_error.text, json_error.line);
    int rc = -1;
    const json_t *type = json_object_get(root, "model_type");
    const json_t *proj = json_object_get(root, "feed_forward_proj");
    const json_t *tied = json_object_get(root, "tie_word_embeddings");
    const char *projection = json_is_string(proj) ? json_string_value(proj) : "relu";  /* T5Config's default */
    const char *why = NULL;
    if (!json_is_string(type) || strcmp(json_string_value(type), "t5")) {
        error_format(err, errlen, "%s: \"model_type\" is not \"t5\"", path);
        goto done;
    }
    if (proj && !json_is_string(proj)) {
        error_format(err, errlen, "%s: \"feed_forward_proj\" is not a string", path);
        goto done;
    }
    if (tied && !json_is_boolean(tied)) {
        error_format(err, errlen, "%s: \"tie_word_embeddings\" is not true or false", path);
        goto done;
    }
    why = feed_forward_refusal(projection, &c->gated, &c->gelu_erf);
    if (!why && (!tied || json_is_true(tied)))
        why = "its lm_head is tied to the embeddings (tie_word_embeddings, T5Config's default), which HF T5 computes "
              "as lm_head(d_model^-0.5 x) without a bias, and Megatron's tied T5LMHead adds a bias and no scaling: "
              "only untied T5 models convert (tie_word_embeddings false, as T5 v1.1's)";
    if (why) {
        error_format(err, errlen, "%s: this T5 has no equivalent here: %s (feed_forward_proj \"%s\")", path, why,
                     projection);
        goto done;
    }
    if (positive_field(root, "vocab_size", 32128, path, &c->vocab_size, err, errlen) ||
        positive_field(root, "d_model", 512, path, &c->d_model, err, errlen) ||
        positive_field(root, "d_kv", 64, path, &c->d_kv, err, errlen) ||
        positive_field(root, "d_ff", 2048, path, &c->d_ff, err, errlen) ||
        positive_field(root, "num_layers", 6, path, &c->num_layers, err, errlen) ||
        positive_field(root, "num_decoder_layers", c->num_layers, path, &c->num_decoder_layers, err, errlen) ||
        positive_field(root, "num_heads", 8, path, &c->num_heads, err, errlen) ||
        positive_field(root, "relative_attention_num_buckets", 32, path, &c->relative_attention_num_buckets, err, errlen) ||
        positive_field(root, "relative_attention_max_distance", 128, path, &c->relative_attention_max_distance, err,
                       errlen) ||
        token_field(root, "pad_token_id", 0, path, &c->pad_token_id, err, errlen) ||
        token_field(root, "eos_token_id", 1, path, &c->eos_token_id, err, errlen) ||
        token_field(root, "decoder_start_token_id", 0, path, &c->decoder_start_token_id, err, errlen) ||
        number_field(root, "layer_norm_epsilon", 1e-6, 1e-30, path, &c->layer_norm_epsilon, err, errlen) ||
        number_field(root, "dropout_rate", 0.1, 0.0, path, &c->dropout_rate, err, errlen))
        goto done;
    if (c->dropout_rate >= 1.0) {
        error_format(err, errlen, "%s: \"dropout_rate\" %g is not below 1", path, c->dropout_rate);
        goto done;
    }
    const json_t *dtype = json_object_get(root, "torch_dtype");
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", json_is_string(dtype) ? json_string_value(dtype) : "float32");
    rc = 0;
done:
    json_decref(root);
    return rc;
}

int hf_t5_config_write(const char *path, const hf_t5_config *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return error_format(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    char epsilon[64], dropout[64];
    hf_real_text(c->layer_norm_epsilon, 1, epsilon, sizeof epsilon);
    hf_real_text(c->dropout_rate, 1, dropout, sizeof dropout);
    /* T5Config's keys, sorted as transformers' to_json_string(sort_keys=True, indent=2) writes them */
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"T5ForConditionalGeneration\"\n"
            "  ],\n"
            "  \"classifier_dropout\": 0.0,\n"
            "  \"d_ff\": %lld,\n"
            "  \"d_kv\": %lld,\n"
            "  \"d_model\": %lld,\n"
            "  \"decoder_start_token_id\": %lld,\n"
            "  \"dense_act_fn\": \"%s\",\n"
            "  \"dropout_rate\": %s,\n"
            "  \"eos_token_id\": %lld,\n"
            "  \"feed_forward_proj\": \"%s\",\n"
            "  \"initializer_factor\": 1.0,\n"
            "  \"is_encoder_decoder\": true,\n"
            "  \"is_gated_act\": %s,\n"
            "  \"layer_norm_epsilon\": %s,\n"
            "  \"model_type\": \"t5\",\n"
            "  \"num_decoder_layers\": %lld,\n"
            "  \"num_heads\": %lld,\n"
            "  \"num_layers\": %lld,\n"
            "  \"pad_token_id\": %lld,\n"
            "  \"relative_attention_max_distance\": %lld,\n"
            "  \"relative_attention_num_buckets\": %lld,\n"
            "  \"tie_word_embeddings\": false,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            (long long)c->d_ff, (long long)c->d_kv, (long long)c->d_model, (long long)c->decoder_start_token_id,
            c->gated ? "silu" : c->gelu_erf ? "gelu" : "gelu_new", dropout, (long long)c->eos_token_id,
            c->gated ? "gated-silu" : c->gelu_erf ? "gelu" : "gelu_new",
            c->gated ? "true" : "false", epsilon, (long long)c->num_decoder_layers, (long long)c->num_heads,
            (long long)c->num_layers, (long long)c->pad_token_id, (long long)c->relative_attention_max_distance,
            (long long)c->relative_attention_num_buckets, c->torch_dtype, (long long)c->vocab_size);
    int ok = fflush(f) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) return error_format(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    return 0;
}
