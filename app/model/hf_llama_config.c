/* hf_llama_config.c: reading and writing Hugging Face Llama, Mixtral and Qwen2-MoE config.json
 * (see hf_llama_config.h). */
#include "app/model/hf_llama_config.h"
#include "app/core/error.h"
#include "app/model/hf_real_text.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load(const char *path, json_error_t *json_error) {
    return json_load_file(path, JSON_REJECT_DUPLICATES, json_error);
}

int hf_config_is_llama(const char *path) {
    json_error_t json_error;
    json_t *root = load(path, &json_error);
    const json_t *type = root ? json_object_get(root, "model_type") : NULL;
    int llama = json_is_string(type) &&
                (!strcmp(json_string_value(type), "llama") || !strcmp(json_string_value(type), "mixtral") ||
                 !strcmp(json_string_value(type), "qwen2_moe"));
    json_decref(root);
    return llama;
}

const char *hf_config_shared_expert_key(const char *path) {
    static const char *const keys[] = {"n_shared_experts"};
    json_error_t json_error;
    json_t *root = load(path, &json_error);
    const char *found = NULL;
    for (size_t i = 0; root && !found && i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(root, keys[i]);
        if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0)) found = keys[i];
    }
    json_decref(root);
    return found;
}

/* a positive integer field; when absent, fallback (> 0), or an error when fallback is 0 */
static int positive_field(const json_t *root, const char *name, int64_t fallback, const char *path,
                          int64_t *value, char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if ((!v || json_is_null(v)) && fallback > 0) {
        *value = fallback;
        return 0;
    }
    if (!v || !json_is_integer(v) || json_integer_value(v) <= 0)
        return error_format(err, errlen, "%s: \"%s\" is %s", path, name, v ? "not a positive integer" : "missing");
    *value = json_integer_value(v);
    return 0;
}

static int positive_number(const json_t *root, const char *name, double fallback, const char *path,
                           double *value, char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v) {
        *value = fallback;
        return 0;
    }
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return error_format(err, errlen, "%s: \"%s\" is not a positive number", path, name);
    *value = json_number_value(v);
    return 0;
}

static int boolean_field(const json_t *root, const char *name, int fallback, const char *path, int *value,
                         char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (!v) {
        *value = fallback;
        return 0;
    }
    if (!json_is_boolean(v)) return error_format(err, errlen, "%s: \"%s\" is not true or false", path, name);
    *value = json_is_true(v);
    return 0;
}

/* rope_scaling null, or Llama 3's (Megatron-Core's apply_rope_scaling has fixed low/high
 * frequency factors 1 and 4 and an original context of 8192) */
static int parse_rope_scaling(const json_t *scaling, const char *path, hf_llama_config *c, char *err, size_t errlen) {
    c->rope_scaling = 0;
    if (!scaling || json_is_null(scaling)) return 0;
    if (!json_is_object(scaling)) return error_format(err, errlen, "%s: \"rope_scaling\" is not an object", path);
    const json_t *type = json_object_get(scaling, "rope_type");
    if (!type) type = json_object_get(scaling, "type");
    const char *name = json_is_string(type) ? json_string_value(type) : "?";
    if (!strcmp(name, "default")) return 0;
    if (strcmp(name, "llama3"))
        return error_format(err, errlen, "%s: rope_scaling type \"%s\" cannot be converted: Megatron-Core computes "
                            "no rope scaling or Llama 3's (\"llama3\")", path, name);
    static const struct { const char *key; double value; } fixed[] = {
        {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192.0},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const json_t *v = json_object_get(scaling, fixed[i].key);
        if (!json_is_number(v) || json_number_value(v) != fixed[i].value)
            return error_format(err, errlen, "%s: rope_scaling \"%s\" must be %g (Megatron-Core's "
                                "apply_rope_scaling fixes it)", path, fixed[i].key, fixed[i].value);
    }
    const json_t *factor = json_object_get(scaling, "factor");
    if (!json_is_number(factor) || json_number_value(factor) <= 0)
        return error_format(err, errlen, "%s: rope_scaling \"factor\" is not a positive number", path);
    c->rope_scaling = 1;
    c->rope_scaling_factor = json_number_value(factor);
    return 0;
}

static void read_torch_dtype(const json_t *root, hf_llama_config *c) {
    const json_t *dtype = json_object_get(root, "torch_dtype");
    if (!dtype) dtype = json_object_get(root, "dtype");
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", json_is_string(dtype) ? json_string_value(dtype) : "float32");
}

/* MixtralConfig's own keys (its linear layers have no biases: attention_bias and mlp_bias are
 * not its keys) */
static int parse_mixtral(const json_t *root, const char *path, hf_llama_config *c, char *err, size_t errlen) {
    if (positive_field(root, "num_local_experts", 8, path, &c->num_local_experts, err, errlen) ||
        positive_field(root, "num_experts_per_tok", 2, path, &c->num_experts_per_tok, err, errlen) ||
        boolean_field(root, "tie_word_embeddings", 0, path, &c->tie_word_embeddings, err, errlen))
        return -1;
    if (c->num_experts_per_tok > c->num_local_experts)
        return error_format(err, errlen, "%s: num_experts_per_tok %lld exceeds num_local_experts %lld", path,
                            (long long)c->num_experts_per_tok, (long long)c->num_local_experts);
    const struct { const char *key; double fallback, *value; } numbers[] = {
        {"router_aux_loss_coef", 0.001, &c->router_aux_loss_coef},
        {"router_jitter_noise", 0.0, &c->router_jitter_noise},
    };
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        const json_t *v = json_object_get(root, numbers[i].key);
        if (v && (!json_is_number(v) || json_number_value(v) < 0))
            return error_format(err, errlen, "%s: \"%s\" is not a number >= 0", path, numbers[i].key);
        *numbers[i].value = v ? json_number_value(v) : numbers[i].fallback;
    }
    /* HF's sliding-window attention matters only when the window is shorter than the context */
    const json_t *window = json_object_get(root, "sliding_window");
    if (window && !json_is_null(window) && !json_is_integer(window))
        return error_format(err, errlen, "%s: \"sliding_window\" is not an integer or null", path);
    if (json_is_integer(window) && json_integer_value(window) < c->max_position_embeddings)
        return error_format(err, errlen, "%s: \"sliding_window\" %lld is shorter than max_position_embeddings %lld: "
                            "sliding-window attention cannot be converted (attention here is full causal; null, or a "
                            "window at least as long as the context, computes the same)", path,
                            (long long)json_integer_value(window), (long long)c->max_position_embeddings);
    c->bias = 0;
    read_torch_dtype(root, c);
    return 0;
}

/* a number >= 0 field (absent: fallback) */
static int nonnegative_number(const json_t *root, const char *name, double fallback, const char *path, double *value,
                              char *err, size_t errlen) {
    const json_t *v = json_object_get(root, name);
    if (v && (!json_is_number(v) || json_number_value(v) < 0))
        return error_format(err, errlen, "%s: \"%s\" is not a number >= 0", path, name);
    *value = v ? json_number_value(v) : fallback;
    return 0;
}

/* Qwen2MoeConfig's own keys (its defaults where absent) */
static int parse_qwen2_moe(const json_t *root, const char *path, hf_llama_config *c, char *err, size_t errlen) {
    int64_t step = 1;
    if (positive_field(root, "num_experts", 60, path, &c->num_local_experts, err, errlen) ||
        positive_field(root, "num_experts_per_tok", 4, path, &c->num_experts_per_tok, err, errlen) ||
        positive_field(root, "moe_intermediate_size", 1408, path, &c->moe_intermediate_size, err, errlen) ||
        positive_field(root, "shared_expert_intermediate_size", 5632, path, &c->shared_expert_intermediate_size, err,
                       errlen) ||
        positive_field(root, "decoder_sparse_step", 1, path, &step, err, errlen) ||
        boolean_field(root, "norm_topk_prob", 0, path, &c->norm_topk_prob, err, errlen) ||
        boolean_field(root, "qkv_bias", 1, path, &c->qkv_bias, err, errlen) ||
        boolean_field(root, "tie_word_embeddings", 0, path, &c->tie_word_embeddings, err, errlen) ||
        nonnegative_number(root, "router_aux_loss_coef", 0.001, path, &c->router_aux_loss_coef, err, errlen))
        return -1;
    if (c->num_experts_per_tok > c->num_local_experts)
        return error_format(err, errlen, "%s: num_experts_per_tok %lld exceeds num_experts %lld", path,
                            (long long)c->num_experts_per_tok, (long long)c->num_local_experts);
    if (c->num_hidden_layers > GPT_MAX_MOE_LAYERS)
        return error_format(err, errlen, "%s: num_hidden_layers %lld: a mixture of experts has at most %d layers here",
                            path, (long long)c->num_hidden_layers, GPT_MAX_MOE_LAYERS);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) c->sparse_layer[l] = (l + 1) % step == 0;
    const json_t *dense = json_object_get(root, "mlp_only_layers");
    if (dense && !json_is_null(dense) && !json_is_array(dense))
        return error_format(err, errlen, "%s: \"mlp_only_layers\" is not a list of layer indices", path);
    for (size_t i = 0; json_is_array(dense) && i < json_array_size(dense); i++) {
        const json_t *v = json_array_get(dense, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= c->num_hidden_layers)
            return error_format(err, errlen, "%s: mlp_only_layers[%zu] is not a layer index below %lld", path, i,
                                (long long)c->num_hidden_layers);
        c->sparse_layer[json_integer_value(v)] = 0;
    }
    int sliding = 0;
    if (boolean_field(root, "use_sliding_window", 0, path, &sliding, err, errlen)) return -1;
    const json_t *window = json_object_get(root, "sliding_window");
    if (sliding && json_is_integer(window) && json_integer_value(window) < c->max_position_embeddings)
        return error_format(err, errlen, "%s: use_sliding_window with \"sliding_window\" %lld shorter than "
                            "max_position_embeddings %lld cannot be converted (attention here is full causal)", path,
                            (long long)json_integer_value(window), (long long)c->max_position_embeddings);
    c->bias = 0;
    read_torch_dtype(root, c);
    return 0;
}

static int parse(const json_t *root, const char *path, hf_llama_config *c, char *err, size_t errlen) {
    if (!json_is_object(root)) return error_format(err, errlen, "%s: not a JSON object", path);
    const json_t *model_type = json_object_get(root, "model_type");
    const char *type = json_is_string(model_type) ? json_string_value(model_type) : "missing";
    if (strcmp(type, "llama") && strcmp(type, "mixtral") && strcmp(type, "qwen2_moe"))
        return error_format(err, errlen, "%s: model_type is %s, expected \"llama\", \"mixtral\" or \"qwen2_moe\"", path,
                            type);
    c->mixtral = !strcmp(type, "mixtral");
    c->qwen2_moe = !strcmp(type, "qwen2_moe");
    if (positive_field(root, "hidden_size", 0, path, &c->hidden_size, err, errlen) ||
        positive_field(root, "intermediate_size", 0, path, &c->intermediate_size, err, errlen) ||
        positive_field(root, "num_hidden_layers", 0, path, &c->num_hidden_layers, err, errlen) ||
        positive_field(root, "num_attention_heads", 0, path, &c->num_attention_heads, err, errlen) ||
        positive_field(root, "num_key_value_heads", c->num_attention_heads, path, &c->num_key_value_heads, err, errlen) ||
        positive_field(root, "max_position_embeddings", 0, path, &c->max_position_embeddings, err, errlen) ||
        positive_field(root, "vocab_size", 0, path, &c->vocab_size, err, errlen))
        return -1;
    if (c->hidden_size % c->num_attention_heads && !json_object_get(root, "head_dim"))
        return error_format(err, errlen, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld",
                            path, (long long)c->hidden_size, (long long)c->num_attention_heads);
    if (positive_field(root, "head_dim", c->hidden_size / c->num_attention_heads, path, &c->head_dim, err, errlen))
        return -1;
    if (c->num_attention_heads % c->num_key_value_heads)
        return error_format(err, errlen, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                            path, (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    /* newer transformers keep rope_theta and the scaling in "rope_parameters" */
    const json_t *rope = json_object_get(root, "rope_parameters");
    const json_t *rope_source = json_is_object(rope) ? rope : root;
    /* the defaults of LlamaConfig, or MixtralConfig's (Qwen2MoeConfig's are LlamaConfig's) */
    if (positive_number(root, "rms_norm_eps", c->mixtral ? 1e-5 : 1e-6, path, &c->rms_norm_eps, err, errlen) ||
        positive_number(rope_source, "rope_theta", c->mixtral ? 1e6 : 10000.0, path, &c->rope_theta, err, errlen))
        return -1;
    if (parse_rope_scaling(json_is_object(rope) ? rope : json_object_get(root, "rope_scaling"), path, c, err, errlen))
        return -1;
    const json_t *partial = json_object_get(root, "partial_rotary_factor");
    if (partial && (!json_is_number(partial) || json_number_value(partial) != 1.0))
        return error_format(err, errlen, "%s: partial_rotary_factor must be 1 (HF Llama rotates whole heads)", path);
    const json_t *activation = json_object_get(root, "hidden_act");
    if (activation && (!json_is_string(activation) || strcmp(json_string_value(activation), "silu")))
        return error_format(err, errlen, "%s: hidden_act \"%s\" cannot be converted: our SwiGLU computes silu", path,
                            json_is_string(activation) ? json_string_value(activation) : "?");
    if (c->mixtral) return parse_mixtral(root, path, c, err, errlen);
    if (c->qwen2_moe) return parse_qwen2_moe(root, path, c, err, errlen);
    int attention_bias = 0, mlp_bias = 0;
    if (boolean_field(root, "attention_bias", 0, path, &attention_bias, err, errlen) ||
        boolean_field(root, "mlp_bias", 0, path, &mlp_bias, err, errlen) ||
        boolean_field(root, "tie_word_embeddings", 0, path, &c->tie_word_embeddings, err, errlen))
        return -1;
    if (attention_bias != mlp_bias)
        return error_format(err, errlen, "%s: attention_bias %s with mlp_bias %s cannot be converted: Megatron has one "
                            "switch for the biases of every linear layer (--disable-bias-linear)", path,
                            attention_bias ? "true" : "false", mlp_bias ? "true" : "false");
    c->bias = attention_bias;
    read_torch_dtype(root, c);
    return 0;
}

int hf_llama_config_read(const char *path, hf_llama_config *config, char *err, size_t errlen) {
    memset(config, 0, sizeof *config);
    FILE *probe = fopen(path, "r");
    if (!probe) return error_format(err, errlen, "%s: %s", path, strerror(errno));
    fclose(probe);
    json_error_t json_error;
    json_t *root = load(path, &json_error);
    if (!root) return error_format(err, errlen, "%s:%d: not valid JSON: %s", path, json_error.line, json_error.text);
    int status = parse(root, path, config, err, errlen);
    json_decref(root);
    return status;
}

/* LlamaConfig's keys, sorted as transformers' to_json_string(sort_keys=True, indent=2) writes them */
static void write_llama(FILE *f, const hf_llama_config *c, const char *epsilon, const char *scaling,
                        const char *theta) {
    const char *bias = c->bias ? "true" : "false";
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"LlamaForCausalLM\"\n"
            "  ],\n"
            "  \"attention_bias\": %s,\n"
            "  \"attention_dropout\": 0.0,\n"
            "  \"head_dim\": %lld,\n"
            "  \"hidden_act\": \"silu\",\n"
            "  \"hidden_size\": %lld,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %lld,\n"
            "  \"max_position_embeddings\": %lld,\n"
            "  \"mlp_bias\": %s,\n"
            "  \"model_type\": \"llama\",\n"
            "  \"num_attention_heads\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n"
            "  \"num_key_value_heads\": %lld,\n"
            "  \"pretraining_tp\": 1,\n"
            "  \"rms_norm_eps\": %s,\n"
            "  \"rope_scaling\": %s,\n"
            "  \"rope_theta\": %s,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            bias, (long long)c->head_dim, (long long)c->hidden_size, (long long)c->intermediate_size,
            (long long)c->max_position_embeddings, bias, (long long)c->num_attention_heads,
            (long long)c->num_hidden_layers, (long long)c->num_key_value_heads, epsilon, scaling, theta,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype, (long long)c->vocab_size);
}

/* MixtralConfig's keys, sorted as transformers writes them */
static void write_mixtral(FILE *f, const hf_llama_config *c, const char *epsilon, const char *scaling,
                          const char *theta) {
    char coefficient[64];
    hf_real_text(c->router_aux_loss_coef, 0, coefficient, sizeof coefficient);
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"MixtralForCausalLM\"\n"
            "  ],\n"
            "  \"attention_dropout\": 0.0,\n"
            "  \"head_dim\": %lld,\n"
            "  \"hidden_act\": \"silu\",\n"
            "  \"hidden_size\": %lld,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %lld,\n"
            "  \"max_position_embeddings\": %lld,\n"
            "  \"model_type\": \"mixtral\",\n"
            "  \"num_attention_heads\": %lld,\n"
            "  \"num_experts_per_tok\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n"
            "  \"num_key_value_heads\": %lld,\n"
            "  \"num_local_experts\": %lld,\n"
            "  \"output_router_logits\": false,\n"
            "  \"rms_norm_eps\": %s,\n"
            "  \"rope_scaling\": %s,\n"
            "  \"rope_theta\": %s,\n"
            "  \"router_aux_loss_coef\": %s,\n"
            "  \"router_jitter_noise\": 0.0,\n"
            "  \"sliding_window\": null,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            (long long)c->head_dim, (long long)c->hidden_size, (long long)c->intermediate_size,
            (long long)c->max_position_embeddings, (long long)c->num_attention_heads,
            (long long)c->num_experts_per_tok, (long long)c->num_hidden_layers, (long long)c->num_key_value_heads,
            (long long)c->num_local_experts, epsilon, scaling, theta, coefficient,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype, (long long)c->vocab_size);
}

/* Qwen2MoeConfig's keys, sorted as transformers writes them; every layer sparse but the
 * mlp_only_layers (decoder_sparse_step 1) */
static void write_qwen2_moe(FILE *f, const hf_llama_config *c, const char *epsilon, const char *scaling,
                            const char *theta) {
    char coefficient[64];
    hf_real_text(c->router_aux_loss_coef, 0, coefficient, sizeof coefficient);
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"Qwen2MoeForCausalLM\"\n"
            "  ],\n"
            "  \"attention_dropout\": 0.0,\n"
            "  \"decoder_sparse_step\": 1,\n"
            "  \"head_dim\": %lld,\n"
            "  \"hidden_act\": \"silu\",\n"
            "  \"hidden_size\": %lld,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %lld,\n"
            "  \"max_position_embeddings\": %lld,\n"
            "  \"max_window_layers\": %lld,\n"
            "  \"mlp_only_layers\": [",
            (long long)c->head_dim, (long long)c->hidden_size, (long long)c->intermediate_size,
            (long long)c->max_position_embeddings, (long long)c->num_hidden_layers);
    int first = 1;
    for (int64_t l = 0; l < c->num_hidden_layers; l++)
        if (!c->sparse_layer[l]) {
            fprintf(f, "%s\n    %lld", first ? "" : ",", (long long)l);
            first = 0;
        }
    fprintf(f, first ? "],\n" : "\n  ],\n");
    fprintf(f,
            "  \"model_type\": \"qwen2_moe\",\n"
            "  \"moe_intermediate_size\": %lld,\n"
            "  \"norm_topk_prob\": %s,\n"
            "  \"num_attention_heads\": %lld,\n"
            "  \"num_experts\": %lld,\n"
            "  \"num_experts_per_tok\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n"
            "  \"num_key_value_heads\": %lld,\n"
            "  \"output_router_logits\": false,\n"
            "  \"qkv_bias\": %s,\n"
            "  \"rms_norm_eps\": %s,\n"
            "  \"rope_scaling\": %s,\n"
            "  \"rope_theta\": %s,\n"
            "  \"router_aux_loss_coef\": %s,\n"
            "  \"shared_expert_intermediate_size\": %lld,\n"
            "  \"sliding_window\": null,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"use_cache\": true,\n"
            "  \"use_sliding_window\": false,\n"
            "  \"vocab_size\": %lld\n"
            "}\n",
            (long long)c->moe_intermediate_size, c->norm_topk_prob ? "true" : "false",
            (long long)c->num_attention_heads, (long long)c->num_local_experts, (long long)c->num_experts_per_tok,
            (long long)c->num_hidden_layers, (long long)c->num_key_value_heads, c->qkv_bias ? "true" : "false",
            epsilon, scaling, theta, coefficient, (long long)c->shared_expert_intermediate_size,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype, (long long)c->vocab_size);
}

int hf_llama_config_write(const char *path, const hf_llama_config *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return error_format(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    char epsilon[64], theta[64], factor[64], scaling[512];
    hf_real_text(c->rms_norm_eps, 1, epsilon, sizeof epsilon);
    hf_real_text(c->rope_theta, 0, theta, sizeof theta);
    snprintf(scaling, sizeof scaling, "null");
    if (c->rope_scaling) {
        hf_real_text(c->rope_scaling_factor, 0, factor, sizeof factor);
        snprintf(scaling, sizeof scaling,
                 "{\n    \"factor\": %s,\n    \"high_freq_factor\": 4.0,\n    \"low_freq_factor\": 1.0,\n"
                 "    \"original_max_position_embeddings\": 8192,\n    \"rope_type\": \"llama3\"\n  }", factor);
    }
    if (c->mixtral) write_mixtral(f, c, epsilon, scaling, theta);
    else if (c->qwen2_moe) write_qwen2_moe(f, c, epsilon, scaling, theta);
    else write_llama(f, c, epsilon, scaling, theta);
    int ok = fflush(f) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved_errno = errno; }
    if (!ok) return error_format(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    return 0;
}
