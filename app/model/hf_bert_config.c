/* hf_bert_config.c: reading and writing Hugging Face MegatronBertConfig (see hf_bert_config.h). */
#include "app/model/hf_bert_config.h"
#include "app/core/error.h"
#include "app/model/hf_real_text.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *model_type_of(const json_t *root) {
    const json_t *type = json_is_object(root) ? json_object_get(root, "model_type") : NULL;
    return json_is_string(type) ? json_string_value(type) : NULL;
}

int hf_config_is_bert(const char *path) {
    json_error_t json_error;
    json_t *root = json_load_file(path, 0, &json_error);
    const char *type = model_type_of(root);
    int bert = type && (!strcmp(type, "megatron-bert") || !strcmp(type, "bert"));
    json_decref(root);
    return bert;
}

/* a positive integer field; absent: fallback (> 0), or an error when fallback is 0 */
static int positive_field(const json_t *root, const char *name, int64_t fallback, const char *path, int64_t *value,
                          char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v && fallback > 0) {
        *value = fallback;
        return 0;
    }
    if (!v || !json_is_integer(v) || json_integer_value(v) <= 0)
        return error_format(err, errlen, "%s: \"%s\" is %s", path, name, v ? "not a positive integer" : "missing");
    *value = json_integer_value(v);
    return 0;
}

/* a number field in [0, limit); absent: fallback */
static int number_field(const json_t *root, const char *name, double fallback, double low, double limit,
                        const char *path, double *value, char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v) {
        *value = fallback;
        return 0;
    }
    if (!json_is_number(v) || json_number_value(v) < low || json_number_value(v) >= limit)
        return error_format(err, errlen, "%s: \"%s\" is not a number in [%g, %g)", path, name, low, limit);
    *value = json_number_value(v);
    return 0;
}

/* a string field; absent: fallback */
static const char *string_field(const json_t *root, const char *name, const char *fallback) {
    const json_t *v = json_object_get(root, name);
    return !v ? fallback : json_is_string(v) ? json_string_value(v) : "(not a string)";
}

static int parse(const json_t *root, const char *path, hf_bert_config *c, char *err, size_t errlen) {
    if (!json_is_object(root)) return error_format(err, errlen, "%s: not a JSON object", path);
    const char *type = model_type_of(root);
    if (type && !strcmp(type, "bert"))
        return error_format(err, errlen, "%s: model_type \"bert\" (BertForPreTraining) cannot be converted: Hugging "
                            "Face's BERT is post-LN (a LayerNorm on the embeddings and after each residual sum), ours "
                            "is Megatron's pre-LN encoder (a LayerNorm before attention and before the MLP, one final "
                            "LayerNorm), another function of the same weights; MegatronBertForPreTraining and "
                            "MegatronBertForMaskedLM (model_type \"megatron-bert\") convert both ways", path);
    if (!type || strcmp(type, "megatron-bert"))
        return error_format(err, errlen, "%s: model_type is %s, expected \"megatron-bert\"", path,
                            type ? type : "missing");
    if (positive_field(root, "hidden_size", 0, path, &c->hidden_size, err, errlen) ||
        positive_field(root, "intermediate_size", 0, path, &c->intermediate_size, err, errlen) ||
        positive_field(root, "num_hidden_layers", 0, path, &c->num_hidden_layers, err, errlen) ||
        positive_field(root, "num_attention_heads", 0, path, &c->num_attention_heads, err, errlen) ||
        positive_field(root, "max_position_embeddings", 0, path, &c->max_position_embeddings, err, errlen) ||
        positive_field(root, "vocab_size", 0, path, &c->vocab_size, err, errlen) ||
        positive_field(root, "type_vocab_size", 2, path, &c->type_vocab_size, err, errlen) ||
        number_field(root, "layer_norm_eps", 1e-12, 1e-300, 1.0, path, &c->layer_norm_eps, err, errlen) ||
        number_field(root, "hidden_dropout_prob", 0.1, 0.0, 1.0, path, &c->hidden_dropout_prob, err, errlen) ||
        number_field(root, "attention_probs_dropout_prob", 0.1, 0.0, 1.0, path, &c->attention_probs_dropout_prob, err,
                     errlen))
        return -1;
    if (c->hidden_size % c->num_attention_heads)
        return error_format(err, errlen, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", path,
                            (long long)c->hidden_size, (long long)c->num_attention_heads);
    if (c->type_vocab_size != 2)
        return error_format(err, errlen, "%s: type_vocab_size %lld cannot be converted: our BERT has 2 token types "
                            "(Megatron's num_tokentypes)", path, (long long)c->type_vocab_size);
    const char *act = string_field(root, "hidden_act", "gelu");
    if (strcmp(act, "gelu") && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_fast"))
        return error_format(err, errlen, "%s: hidden_act \"%s\" cannot be converted: our BERT computes GeLU (\"gelu\", "
                            "\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")", path, act);
    snprintf(c->hidden_act, sizeof c->hidden_act, "%s", act);
    const char *positions = string_field(root, "position_embedding_type", "absolute");
    if (strcmp(positions, "absolute"))
        return error_format(err, errlen, "%s: position_embedding_type \"%s\" cannot be converted: our BERT has "
                            "learned absolute positions (\"absolute\")", path, positions);
    static const char *const off[] = {"is_decoder", "add_cross_attention"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        const json_t *v = json_object_get(root, off[i]);
        if (v && !json_is_false(v))
            return error_format(err, errlen, "%s: \"%s\" must be false: our BERT is a bidirectional encoder", path,
                                off[i]);
    }
    const json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie)) return error_format(err, errlen, "%s: \"tie_word_embeddings\" is not true or false", path);
    c->tie_word_embeddings = !tie || json_is_true(tie);
    const json_t *architectures = json_object_get(root, "architectures");
    const json_t *first = json_is_array(architectures) ? json_array_get(architectures, 0) : NULL;
    c->binary_head = !(json_is_string(first) && !strcmp(json_string_value(first), "MegatronBertForMaskedLM"));
    const char *dtype = string_field(root, "torch_dtype", string_field(root, "dtype", "float32"));
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dtype);
    return 0;
}

int hf_bert_config_read(const char *path, hf_bert_config *config, char *err, size_t errlen) {
    memset(config, 0, sizeof *config);
    FILE *probe = fopen(path, "r");
    if (!probe) return error_format(err, errlen, "%s: %s", path, strerror(errno));
    fclose(probe);
    json_error_t json_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &json_error);
    if (!root) return error_format(err, errlen, "%s:%d: not valid JSON: %s", path, json_error.line, json_error.text);
    int status = parse(root, path, config, err, errlen);
    json_decref(root);
    return status;
}

int hf_bert_config_write(const char *path, const hf_bert_config *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return error_format(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    char epsilon[64], hidden_dropout[64], attention_dropout[64];
    hf_real_text(c->layer_norm_eps, 1, epsilon, sizeof epsilon);
    hf_real_text(c->hidden_dropout_prob, 1, hidden_dropout, sizeof hidden_dropout);
    hf_real_text(c->attention_probs_dropout_prob, 1, attention_dropout, sizeof attention_dropout);
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"%s\"\n"
            "  ],\n"
            "  \"attention_probs_dropout_prob\": %s,\n"
            "  \"hidden_act\": \"%s\",\n"
            "  \"hidden_dropout_prob\": %s,\n"
            "  \"hidden_size\": %lld,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %lld,\n"
            "  \"layer_norm_eps\": %s,\n"
            "  \"max_position_embeddings\": %lld,\n"
            "  \"model_type\": \"megatron-bert\",\n"
            "  \"num_attention_heads\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n"
            "  \"pad_token_id\": 0,\n"
            "  \"position_embedding_type\": \"absolute\",\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"type_vocab_size\": %lld,\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            c->binary_head ? "MegatronBertForPreTraining" : "MegatronBertForMaskedLM", attention_dropout, c->hidden_act,
            hidden_dropout, (long long)c->hidden_size, (long long)c->intermediate_size, epsilon,
            (long long)c->max_position_embeddings, (long long)c->num_attention_heads, (long long)c->num_hidden_layers,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype, (long long)c->type_vocab_size,
            (long long)c->vocab_size);
    int ok = fflush(f) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) return error_format(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    return 0;
}
