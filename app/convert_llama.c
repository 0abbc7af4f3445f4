/* convert_llama.c: convert_checkpoint between our checkpoint of a Llama-architecture model and
 * Hugging Face LlamaForCausalLM, or of a Mixtral-architecture mixture of experts and
 * MixtralForCausalLM, or of one with gated shared experts and Qwen2MoeForCausalLM, either way
 * (see convert_llama.h). As for GPT-2, everything is validated
 * before anything is written, and outputs appear only complete (.tmp/.partial, fsync, rename). */
#include "app/convert_args.h"
#include "app/convert_llama.h"

#include "app/core/error.h"
#include "app/model/hf_llama_config.h"
#include "app/model/hf_llama_layout.h"
#include "app/model/moe_layer.h"
#include "io/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int llama_checkpoint(const checkpoint_reader *r) {
    return arg_string_is(r, "normalization", "RMSNorm", NULL) || arg_string_is(r, "position_embedding_type", "rope", NULL) ||
           arg_int_or(r, "swiglu", 0) != 0 || arg_int_or(r, "num_experts", 0) > 0;
}

/* the Hugging Face family of a config: "Llama", "Mixtral" or "Qwen2Moe" (as in XForCausalLM) */
static const char *family(const hf_llama_config *c) {
    return c->mixtral ? "Mixtral" : c->qwen2_moe ? "Qwen2Moe" : "Llama";
}

/* the MLP for the messages: "ffn F", or "E experts of ffn Fm, top k" */
static void mlp_text(const llama_dims *m, int64_t topk, char *out, size_t size) {
    if (m->num_experts > 0)
        snprintf(out, size, "%lld experts of ffn %lld, top %lld", (long long)m->num_experts,
                 (long long)m->moe_ffn_hidden, (long long)topk);
    else
        snprintf(out, size, "ffn %lld", (long long)m->ffn_hidden);
}

/* ---- ours -> Hugging Face ------------------------------------------------------------------ */

/* a mixture of experts: what MixtralForCausalLM computes (every layer MoE, Mixtral's routing:
 * hf_llama_config.h), or a user error naming the argument that differs. Arguments the checkpoint
 * does not record are Megatron's defaults, which are Mixtral's. */
static void read_mixtral(const checkpoint_reader *r, llama_dims *m, hf_llama_config *c) {
    char why[512] = "", err[error_max];
    char *score = checkpoint_read_string_arg(r, "moe_router_score_function");
    char *freq = checkpoint_read_string_arg(r, "moe_layer_freq");
    m->moe_ffn_hidden = arg_int_or(r, "moe_ffn_hidden_size", 0);
    if (m->moe_ffn_hidden <= 0) m->moe_ffn_hidden = m->ffn_hidden;  /* Megatron's default */
    c->num_experts_per_tok = arg_positive_int(r, "moe_router_topk");
    const double topk_scaling = arg_double_or(r, "moe_router_topk_scaling_factor", 0);
    unsigned char *moe_layer = calloc(GPT_MAX_MOE_LAYERS, 1);
    CHECK(moe_layer, "out of memory");
    const int layers = m->num_layers > GPT_MAX_MOE_LAYERS ? GPT_MAX_MOE_LAYERS + 1 : (int)m->num_layers;
    if (freq && moe_layer_pattern_parse(freq, layers, moe_layer, err, sizeof err))
        user_error("%s: /args moe_layer_freq '%s': %s", r->path, freq, err);
    int dense = -1;
    for (int l = 0; freq && l < layers && dense < 0; l++)
        if (!moe_layer[l]) dense = l;
    if (dense >= 0)
        snprintf(why, sizeof why, "layer %d has a dense MLP (--moe-layer-freq %s); MixtralForCausalLM has experts in "
                 "every layer", dense, freq);
    else if (score && strcmp(score, "softmax"))
        snprintf(why, sizeof why, "its router scores with %s (--moe-router-score-function); Mixtral's with softmax",
                 score);
    else if (arg_int_or(r, "moe_router_pre_softmax", 0))
        snprintf(why, sizeof why, "its router takes the softmax before the top-k (--moe-router-pre-softmax), which "
                 "leaves the k weights unnormalized; Mixtral renormalizes them");
    else if (topk_scaling != 0 && topk_scaling != 1)
        snprintf(why, sizeof why, "its routing weights are scaled by %g (--moe-router-topk-scaling-factor)",
                 topk_scaling);
    else if (arg_int_or(r, "moe_router_num_groups", 0) > 0)
        snprintf(why, sizeof why, "its router is group-limited (--moe-router-num-groups)");
    else if (arg_int_or(r, "moe_router_enable_expert_bias", 0))
        snprintf(why, sizeof why, "its router adds an expert bias (--moe-router-enable-expert-bias)");
    else if (arg_double_or(r, "moe_expert_capacity_factor", 0) > 0)
        snprintf(why, sizeof why, "it drops tokens past an expert capacity (--moe-expert-capacity-factor); Mixtral is "
                 "dropless");
    else if (m->bias)
        snprintf(why, sizeof why, "it has linear biases; MixtralForCausalLM has none (--disable-bias-linear)");
    free(score);
    free(freq);
    free(moe_layer);
    if (why[0]) user_error("%s: this checkpoint has no Hugging Face Mixtral layout: %s", r->path, why);
    if (c->num_experts_per_tok > m->num_experts)
        user_error("%s: /args moe_router_topk %lld exceeds num_experts %lld", r->path,
                   (long long)c->num_experts_per_tok, (long long)m->num_experts);
    c->mixtral = 1;
    c->num_local_experts = m->num_experts;
    c->intermediate_size = m->moe_ffn_hidden;
    c->router_aux_loss_coef = arg_double_or(r, "moe_aux_loss_coeff", -1);
    if (c->router_aux_loss_coef < 0) {
        c->router_aux_loss_coef = 0.001;
        fprintf(stderr, "%s: note: %s has no moe_aux_loss_coeff in /args; config.json gets MixtralConfig's default "
                "router_aux_loss_coef 0.001\n", program_name, r->path);
    }
}

/* the routing checks Mixtral and Qwen2-MoE share: a user error naming the argument whose routing
 * neither computes (softmax scores over every expert, no scaling, groups, bias or dropping) */
static void refuse_other_routing(const checkpoint_reader *r, const char *family) {
    char why[256] = "";
    char *score = checkpoint_read_string_arg(r, "moe_router_score_function");
    const double topk_scaling = arg_double_or(r, "moe_router_topk_scaling_factor", 0);
    if (score && strcmp(score, "softmax"))
        snprintf(why, sizeof why, "its router scores with %s (--moe-router-score-function); %s's with softmax", score,
                 family);
    else if (topk_scaling != 0 && topk_scaling != 1)
        snprintf(why, sizeof why, "its routing weights are scaled by %g (--moe-router-topk-scaling-factor)",
                 topk_scaling);
    else if (arg_int_or(r, "moe_router_num_groups", 0) > 0)
        snprintf(why, sizeof why, "its router is group-limited (--moe-router-num-groups)");
    else if (arg_int_or(r, "moe_router_enable_expert_bias", 0))
        snprintf(why, sizeof why, "its router adds an expert bias (--moe-router-enable-expert-bias)");
    else if (arg_double_or(r, "moe_expert_capacity_factor", 0) > 0)
        snprintf(why, sizeof why, "it drops tokens past an expert capacity (--moe-expert-capacity-factor); %s is "
                 "dropless", family);
    free(score);
    if (why[0]) user_error("%s: this checkpoint has no Hugging Face %s layout: %s", r->path, family, why);
}

/* a mixture of experts with shared experts: what Qwen2MoeForCausalLM computes (hf_llama_config.h:
 * softmax routing, renormalized or not, a gated shared expert, dense layers anywhere, q/k/v biases
 * only), or a user error naming the argument that differs */
static void read_qwen2_moe(const checkpoint_reader *r, llama_dims *m, hf_llama_config *c) {
    char err[error_max];
    refuse_other_routing(r, "Qwen2-MoE");
    if (!arg_int_or(r, "moe_shared_expert_gate", 0))
        user_error("%s: this checkpoint has no Hugging Face Qwen2-MoE layout: its shared experts have no gate; "
                   "Qwen2-MoE scales them by sigmoid(shared_expert_gate x) (--moe-shared-expert-gate)", r->path);
    if (m->bias)
        user_error("%s: this checkpoint has no Hugging Face Qwen2-MoE layout: it has biases on every linear layer; "
                   "Qwen2-MoE on q, k and v only (--disable-bias-linear --add-qkv-bias)", r->path);
    m->moe_ffn_hidden = arg_int_or(r, "moe_ffn_hidden_size", 0);
    if (m->moe_ffn_hidden <= 0) m->moe_ffn_hidden = m->ffn_hidden;
    m->shared_ffn_hidden = arg_positive_int(r, "moe_shared_expert_intermediate_size");
    c->num_experts_per_tok = arg_positive_int(r, "moe_router_topk");
    if (c->num_experts_per_tok > m->num_experts)
        user_error("%s: /args moe_router_topk %lld exceeds num_experts %lld", r->path,
                   (long long)c->num_experts_per_tok, (long long)m->num_experts);
    if (m->num_layers > GPT_MAX_MOE_LAYERS)
        user_error("%s: num_layers %lld: a mixture of experts has at most %d layers here", r->path,
                   (long long)m->num_layers, GPT_MAX_MOE_LAYERS);
    char *freq = checkpoint_read_string_arg(r, "moe_layer_freq");
    if (!freq) memset(c->sparse_layer, 1, (size_t)m->num_layers);
    else if (moe_layer_pattern_parse(freq, (int)m->num_layers, c->sparse_layer, err, sizeof err))
        user_error("%s: /args moe_layer_freq '%s': %s", r->path, freq, err);
    free(freq);
    m->qwen2_moe = c->qwen2_moe = 1;
    m->moe_layer = c->sparse_layer;
    c->num_local_experts = m->num_experts;
    c->moe_intermediate_size = m->moe_ffn_hidden;
    c->shared_expert_intermediate_size = m->shared_ffn_hidden;
    c->intermediate_size = m->ffn_hidden;  /* the dense layers' */
    c->norm_topk_prob = !arg_int_or(r, "moe_router_pre_softmax", 0);
    c->qkv_bias = m->qkv_bias;
    c->router_aux_loss_coef = arg_double_or(r, "moe_aux_loss_coeff", -1);
    if (c->router_aux_loss_coef < 0) {
        c->router_aux_loss_coef = 0.001;
        fprintf(stderr, "%s: note: %s has no moe_aux_loss_coeff in /args; config.json gets Qwen2MoeConfig's default "
                "router_aux_loss_coef 0.001\n", program_name, r->path);
    }
}

/* the dimensions and config of a Llama checkpoint; refuses what HF Llama does not compute */
static void read_llama(const checkpoint_reader *r, llama_dims *m, hf_llama_config *c) {
    const char *why = NULL;
    const int experts = arg_int_or(r, "num_experts", 0) > 0;
    if (!arg_string_is(r, "normalization", "RMSNorm", NULL)) why = "its norms are not RMSNorm (--normalization RMSNorm)";
    else if (!arg_string_is(r, "position_embedding_type", "rope", NULL))
        why = "it has no rotary position embeddings (--position-embedding-type rope)";
    else if (!arg_int_or(r, "swiglu", 0)) why = "its MLP is not SwiGLU (--swiglu)";
    else if (arg_double_or(r, "rotary_percent", 1.0) != 1.0)
        why = "it rotates part of each head (--rotary-percent below 1), HF Llama all of it";
    else if (arg_int_or(r, "rotary_interleaved", 0))
        why = "its rotary embedding is interleaved (pairs 2i, 2i+1), HF Llama's rotate_half pairs i, i + D/2";
    if (why)
        user_error("%s: this checkpoint has no Hugging Face %s layout: %s", r->path, experts ? "Mixtral" : "Llama", why);
    memset(m, 0, sizeof *m);
    memset(c, 0, sizeof *c);
    m->num_layers = arg_positive_int(r, "num_layers");
    m->hidden = arg_positive_int(r, "hidden_size");
    m->heads = arg_positive_int(r, "num_attention_heads");
    m->head_dim = arg_int_or(r, "kv_channels", m->hidden / m->heads);
    m->groups = arg_int_or(r, "num_query_groups", m->heads);
    if (m->groups <= 0) m->groups = m->heads;
    m->ffn_hidden = arg_positive_int(r, "ffn_hidden_size");
    m->padded_vocab = arg_positive_int(r, "padded_vocab_size");
    m->positions = arg_positive_int(r, "max_position_embeddings");
    m->untied = arg_int_or(r, "untie_embeddings_and_output_weights", 0) != 0;
    m->bias = arg_int_or(r, "add_bias_linear", 1) != 0;
    m->layernorm_1p = arg_int_or(r, "apply_layernorm_1p", 0) != 0;
    m->vocab = arg_export_vocab(r, m->padded_vocab);
    char err[error_max];
    if (checkpoint_read_double_arg(r, "layernorm_epsilon", &c->rms_norm_eps, err, sizeof err)) user_error("%s", err);
    c->vocab_size = m->vocab;
    c->hidden_size = m->hidden;
    c->intermediate_size = m->ffn_hidden;
    c->num_hidden_layers = m->num_layers;
    c->num_attention_heads = m->heads;
    c->num_key_value_heads = m->groups;
    c->head_dim = m->head_dim;
    c->max_position_embeddings = m->positions;
    c->rope_theta = arg_double_or(r, "rotary_base", 10000.0);
    c->tie_word_embeddings = !m->untied;
    c->bias = m->bias;
    c->rope_scaling = arg_int_or(r, "use_rope_scaling", 0) != 0;
    c->rope_scaling_factor = arg_double_or(r, "rope_scaling_factor", 8.0);
    m->num_experts = arg_int_or(r, "num_experts", 0);
    m->qkv_bias = !m->bias && arg_int_or(r, "add_qkv_bias", 0) != 0;
    const int shared = m->num_experts > 0 && arg_int_or(r, "moe_shared_expert_intermediate_size", 0) > 0;
    if (m->qkv_bias && !shared)
        user_error("%s: this checkpoint has no Hugging Face %s layout: only its QKV projection has a bias "
                   "(--add-qkv-bias); %s", r->path, m->num_experts > 0 ? "Mixtral" : "Llama",
                   m->num_experts > 0 ? "MixtralForCausalLM has no biases" : "LlamaForCausalLM's attention_bias "
                   "puts one on o_proj too");
    if (shared) read_qwen2_moe(r, m, c);
    else if (m->num_experts > 0) read_mixtral(r, m, c);
}

/* the shard of every HF part, filled in order up to max_shard_bytes each (a part larger than
 * that gets a shard of its own); returns the number of shards */
static int plan_shards(const hf_llama_tensor *list, int count, int64_t element_bytes, int64_t max_shard_bytes,
                       int *shard_of) {
    int shards = 1;
    int64_t used = 0;
    for (int i = 0; i < count; i++)
        for (int p = 0; p < list[i].parts; p++) {
            int64_t bytes = hf_llama_hf_elements(&list[i], p) * element_bytes;
            if (used > 0 && used + bytes > max_shard_bytes) {
                shards++;
                used = 0;
            }
            shard_of[i * HF_LLAMA_MAX_PARTS + p] = shards - 1;
            used += bytes;
        }
    return shards;
}

/* HF's names: model.safetensors alone, model-00001-of-00003.safetensors when sharded */
static void shard_name(char *out, size_t size, int shard, int shards) {
    if (shards == 1) snprintf(out, size, "model.safetensors");
    else snprintf(out, size, "model-%05d-of-%05d.safetensors", shard + 1, shards);
}

/* writes shard `shard` (atomically), frees the writer and the tensors it borrowed; a failure
 * removes the config's .tmp too */
static void write_shard(safetensors_writer *writer, const char *output, int shard, int shards, const char *config_tmp,
                        void **buffers, int num_buffers) {
    char file[64], path[path_max], err[error_max];
    shard_name(file, sizeof file, shard, shards);
    snprintf(path, sizeof path, "%s/%s", output, file);
    if (safetensors_writer_write(writer, path, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    safetensors_writer_free(writer);
    for (int b = 0; b < num_buffers; b++) free(buffers[b]);
}

/* model.safetensors.index.json as transformers writes it */
static void write_index_tmp(const char *path, const hf_llama_tensor *list, int count, const int *shard_of, int shards,
                            int64_t total_bytes) {
    json_t *root = json_object(), *metadata = json_object(), *map = json_object();
    json_object_set_new(metadata, "total_size", json_integer(total_bytes));
    json_object_set_new(root, "metadata", metadata);
    for (int i = 0; i < count; i++)
        for (int p = 0; p < list[i].parts; p++) {
            char file[64];
            shard_name(file, sizeof file, shard_of[i * HF_LLAMA_MAX_PARTS + p], shards);
            json_object_set_new(map, list[i].hf[p], json_string(file));
        }
    json_object_set_new(root, "weight_map", map);
    int failed = json_dump_file(root, path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0;
    json_decref(root);
    if (failed) {
        unlink(path);
        user_error("%s: cannot write", path);
    }
}

void llama_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int64_t max_shard_bytes,
                        int overwrite) {
    char err[error_max];
    llama_dims m;
    hf_llama_config config;
    read_llama(reader, &m, &config);
    snprintf(config.torch_dtype, sizeof config.torch_dtype, "%s", bfloat16 ? "bfloat16" : "float32");
    int count;
    hf_llama_tensor *list = hf_llama_tensor_list(&m, &count);
    for (int i = 0; i < count; i++)  /* every shape checked before anything is written */
        if (checkpoint_check_tensor(reader, list[i].ours, list[i].ndim, list[i].our_shape, err, sizeof err))
            user_error("%s", err);
    const int64_t element_bytes = bfloat16 ? 2 : 4;
    int *shard_of = malloc(sizeof(int) * (size_t)count * HF_LLAMA_MAX_PARTS);
    CHECK(shard_of, "out of memory");
    const int shards = plan_shards(list, count, element_bytes, max_shard_bytes, shard_of);

    char config_path[path_max], config_tmp[path_max + 8], index_path[path_max], index_tmp[path_max + 8], path[path_max];
    snprintf(config_path, sizeof config_path, "%s/config.json", output);
    snprintf(config_tmp, sizeof config_tmp, "%s.tmp", config_path);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", output);
    snprintf(index_tmp, sizeof index_tmp, "%s.tmp", index_path);
    convert_refuse_existing(config_path, overwrite);
    for (int s = 0; s < shards; s++) {
        char file[64];
        shard_name(file, sizeof file, s, shards);
        snprintf(path, sizeof path, "%s/%s", output, file);
        convert_refuse_existing(path, overwrite);
    }
    /* the other layout's entry file would be read first (or instead): it goes */
    snprintf(path, sizeof path, "%s/model.safetensors", output);
    convert_refuse_existing(shards == 1 ? index_path : path, overwrite);
    if (!convert_is_folder(output) && mkdir(output, 0777) != 0)
        user_error("%s: cannot create the folder: %s", output, strerror(errno));
    if (hf_llama_config_write(config_tmp, &config, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }

    /* one shard at a time: the writer borrows its converted tensors until it writes them */
    void **buffers = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *buffers);
    CHECK(buffers, "out of memory");
    int num_buffers = 0, current = 0;
    int64_t total_bytes = 0;
    safetensors_writer *writer = NULL;
    for (int i = 0; i < count; i++) {
        const hf_llama_tensor *t = &list[i];
        float *ours = malloc(sizeof(float) * (size_t)hf_llama_our_elements(t));
        float *hf[HF_LLAMA_MAX_PARTS] = {0};
        CHECK(ours, "out of memory converting %s", t->ours);
        for (int p = 0; p < t->parts; p++) {
            hf[p] = malloc(sizeof(float) * (size_t)(hf_llama_hf_elements(t, p) ? hf_llama_hf_elements(t, p) : 1));
            CHECK(hf[p], "out of memory converting %s", t->ours);
        }
        if (checkpoint_reader_read_tensor(reader, t->ours, t->ndim, t->our_shape, ours, err, sizeof err))
            user_error("%s", err);
        hf_llama_to_hf(t, &m, ours, hf);
        free(ours);
        for (int p = 0; p < t->parts; p++) {
            int64_t n = hf_llama_hf_elements(t, p);
            void *data = hf[p];
            if (bfloat16) {
                uint16_t *narrow = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
                CHECK(narrow, "out of memory");
                for (int64_t e = 0; e < n; e++) narrow[e] = safetensors_float_to_bf16(hf[p][e]);
                free(hf[p]);
                data = narrow;
            }
            /* this part starts the next shard: the current one is complete */
            if (writer && current < shard_of[i * HF_LLAMA_MAX_PARTS + p]) {
                write_shard(writer, output, current, shards, config_tmp, buffers, num_buffers);
                writer = NULL;
                num_buffers = 0;
            }
            if (!writer) {
                writer = safetensors_writer_create();
                safetensors_writer_set_metadata(writer, "format", "pt");
                current = shard_of[i * HF_LLAMA_MAX_PARTS + p];
            }
            buffers[num_buffers++] = data;
            total_bytes += n * element_bytes;
            if (safetensors_writer_add(writer, t->hf[p], bfloat16 ? SAFETENSORS_BF16 : SAFETENSORS_F32, t->ndim,
                                       t->hf_shape[p], data, err, sizeof err))
                FATAL("%s", err);
        }
    }
    write_shard(writer, output, current, shards, config_tmp, buffers, num_buffers);
    if (shards > 1) {
        write_index_tmp(index_tmp, list, count, shard_of, shards, total_bytes);
        if (rename(index_tmp, index_path) != 0) user_error("cannot rename %s: %s", index_tmp, strerror(errno));
        snprintf(path, sizeof path, "%s/model.safetensors", output);
        unlink(path);
    } else {
        unlink(index_path);
    }
    if (rename(config_tmp, config_path) != 0) {
        unlink(config_tmp);
        user_error("cannot rename %s to %s: %s", config_tmp, config_path, strerror(errno));
    }
    char shard_text[64] = "", mlp[128];
    if (shards > 1) snprintf(shard_text, sizeof shard_text, " in %d shards", shards);
    mlp_text(&m, config.num_experts_per_tok, mlp, sizeof mlp);
    printf("> %s: %s -> %s: %sForCausalLM, %lld layers, hidden %lld, %lld heads in %lld query groups, %s, "
           "vocab %lld (%lld padding rows dropped), %s%s, %s%s\n", program_name, reader->path, output,
           family(&config), (long long)m.num_layers, (long long)m.hidden, (long long)m.heads,
           (long long)m.groups, mlp, (long long)m.vocab, (long long)(m.padded_vocab - m.vocab),
           m.untied ? "untied lm_head" : "tied embeddings", config.rope_scaling ? ", Llama 3 rope scaling" : "",
           bfloat16 ? "bfloat16" : "float32", shard_text);
    free(buffers);
    free(shard_of);
    free(list);
}

/* ---- Hugging Face -> ours ------------------------------------------------------------------ */

/* what config.json says, for the messages about missing or misshapen tensors */
static const char *config_summary(const hf_source *s, const hf_llama_config *c, char *buffer, size_t size) {
    int used = snprintf(buffer, size, "%s says %lld layers, hidden_size %lld, %lld heads, %lld key/value heads, "
                        "intermediate_size %lld, vocab_size %lld", s->config_path, (long long)c->num_hidden_layers,
                        (long long)c->hidden_size, (long long)c->num_attention_heads,
                        (long long)c->num_key_value_heads, (long long)c->intermediate_size, (long long)c->vocab_size);
    if (used <= 0 || (size_t)used >= size) return buffer;
    if (c->mixtral)
        snprintf(buffer + used, size - (size_t)used, ", num_local_experts %lld, num_experts_per_tok %lld",
                 (long long)c->num_local_experts, (long long)c->num_experts_per_tok);
    else if (c->qwen2_moe)
        snprintf(buffer + used, size - (size_t)used, ", num_experts %lld of moe_intermediate_size %lld, "
                 "shared_expert_intermediate_size %lld, qkv_bias %s", (long long)c->num_local_experts,
                 (long long)c->moe_intermediate_size, (long long)c->shared_expert_intermediate_size,
                 c->qkv_bias ? "true" : "false");
    else
        snprintf(buffer + used, size - (size_t)used, ", attention_bias %s", c->bias ? "true" : "false");
    return buffer;
}

/* non-parameter buffers of older exports: the rotary inverse frequencies */
static int is_ignored_buffer(const char *name) {
    const char *suffix = ".rotary_emb.inv_freq";
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix);
}

/* Qwen2-MoE's mixture of experts with the Megatron flags that compute it (hf_llama_config.h): the
 * sparse layers as a --moe-layer-freq list ("1" when every layer is), the softmax router with
 * --moe-router-pre-softmax unless norm_topk_prob, the gated shared expert, q/k/v biases */
static void write_qwen2_moe_args(checkpoint_writer *w, const llama_dims *m, const hf_llama_config *c) {
    int all_sparse = 1;
    for (int64_t l = 0; l < m->num_layers; l++) all_sparse &= c->sparse_layer[l] != 0;
    char *pattern = malloc((size_t)m->num_layers * 2 + 3);
    CHECK(pattern, "out of memory");
    if (all_sparse) {
        snprintf(pattern, 3, "1");
    } else {
        size_t at = 0;
        pattern[at++] = '[';
        for (int64_t l = 0; l < m->num_layers; l++) {
            if (l) pattern[at++] = ',';
            pattern[at++] = c->sparse_layer[l] ? '1' : '0';
        }
        pattern[at++] = ']';
        pattern[at] = 0;
    }
    checkpoint_write_int_arg(w, "num_experts", m->num_experts);
    checkpoint_write_int_arg(w, "moe_ffn_hidden_size", m->moe_ffn_hidden);
    checkpoint_write_int_arg(w, "moe_router_topk", c->num_experts_per_tok);
    checkpoint_write_string_arg(w, "moe_layer_freq", pattern);
    checkpoint_write_string_arg(w, "moe_router_score_function", "softmax");
    checkpoint_write_int_arg(w, "moe_router_pre_softmax", !c->norm_topk_prob);
    checkpoint_write_string_arg(w, "moe_router_dtype", "fp32");  /* HF's softmax of the router is fp32 */
    checkpoint_write_string_arg(w, "moe_router_load_balancing_type", "aux_loss");
    checkpoint_write_double_arg(w, "moe_aux_loss_coeff", c->router_aux_loss_coef);
    checkpoint_write_int_arg(w, "moe_shared_expert_intermediate_size", m->shared_ffn_hidden);
    checkpoint_write_int_arg(w, "moe_shared_expert_gate", 1);
    checkpoint_write_int_arg(w, "add_qkv_bias", m->qkv_bias);
    free(pattern);
}

static void write_args(checkpoint_writer *w, const llama_dims *m, const hf_llama_config *c, int64_t divisible_by) {
    struct { const char *name; int64_t value; } ints[] = {
        {"num_layers", m->num_layers}, {"hidden_size", m->hidden}, {"num_attention_heads", m->heads},
        {"kv_channels", m->head_dim}, {"ffn_hidden_size", m->ffn_hidden}, {"padded_vocab_size", m->padded_vocab},
        {"vocab_size", m->vocab}, {"make_vocab_size_divisible_by", divisible_by},
        {"max_position_embeddings", m->positions}, {"seq_length", m->positions},
        {"untie_embeddings_and_output_weights", m->untied}, {"num_query_groups", m->groups},
        {"group_query_attention", m->groups != m->heads}, {"swiglu", 1}, {"add_bias_linear", m->bias},
        {"rotary_interleaved", 0}, {"use_rope_scaling", c->rope_scaling}, {"apply_layernorm_1p", 0},
        {"tensor_model_parallel_size", 1}, {"pipeline_model_parallel_size", 1}, {"data_parallel_size", 1},
        {"use_distributed_optimizer", 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) checkpoint_write_int_arg(w, ints[i].name, ints[i].value);
    checkpoint_write_double_arg(w, "layernorm_epsilon", c->rms_norm_eps);
    checkpoint_write_double_arg(w, "rotary_base", c->rope_theta);
    checkpoint_write_double_arg(w, "rotary_percent", 1.0);
    checkpoint_write_double_arg(w, "rope_scaling_factor", c->rope_scaling ? c->rope_scaling_factor : 8.0);
    checkpoint_write_string_arg(w, "normalization", "RMSNorm");
    checkpoint_write_string_arg(w, "position_embedding_type", "rope");
    checkpoint_write_string_arg(w, "tokenizer_type", "HuggingFaceTokenizer");
    if (c->qwen2_moe) {
        write_qwen2_moe_args(w, m, c);
        return;
    }
    if (!c->mixtral) return;
    /* Mixtral's mixture of experts in every layer, with the Megatron router flags that compute its
     * routing (hf_llama_config.h) */
    checkpoint_write_int_arg(w, "num_experts", m->num_experts);
    checkpoint_write_int_arg(w, "moe_ffn_hidden_size", m->moe_ffn_hidden);
    checkpoint_write_int_arg(w, "moe_router_topk", c->num_experts_per_tok);
    checkpoint_write_string_arg(w, "moe_layer_freq", "1");
    checkpoint_write_string_arg(w, "moe_router_score_function", "softmax");
    checkpoint_write_int_arg(w, "moe_router_pre_softmax", 0);
    checkpoint_write_string_arg(w, "moe_router_dtype", "fp32");  /* HF's softmax of the router is fp32 */
    checkpoint_write_string_arg(w, "moe_router_load_balancing_type", "aux_loss");
    checkpoint_write_double_arg(w, "moe_aux_loss_coeff", c->router_aux_loss_coef);
}

void llama_import_from_hf(hf_source *s, const char *input, const char *save, int64_t divisible_by, int overwrite) {
    char err[error_max];
    hf_llama_config c;
    if (hf_llama_config_read(s->config_path, &c, err, sizeof err)) user_error("%s", err);
    llama_dims m = {
        .num_layers = c.num_hidden_layers, .hidden = c.hidden_size, .heads = c.num_attention_heads,
        .groups = c.num_key_value_heads, .head_dim = c.head_dim, .ffn_hidden = c.intermediate_size,
        .positions = c.max_position_embeddings, .vocab = c.vocab_size,
        .padded_vocab = (c.vocab_size + divisible_by - 1) / divisible_by * divisible_by, .bias = c.bias,
        .num_experts = c.mixtral || c.qwen2_moe ? c.num_local_experts : 0,
        .moe_ffn_hidden = c.mixtral ? c.intermediate_size : c.qwen2_moe ? c.moe_intermediate_size : 0,
        .qwen2_moe = c.qwen2_moe, .qkv_bias = c.qwen2_moe && c.qkv_bias,
        .shared_ffn_hidden = c.qwen2_moe ? c.shared_expert_intermediate_size : 0,
        .moe_layer = c.qwen2_moe ? c.sparse_layer : NULL,
    };
    if (c.qwen2_moe && c.num_hidden_layers > GPT_MAX_MOE_LAYERS)
        user_error("%s: num_hidden_layers %lld: a mixture of experts has at most %d layers here", s->config_path,
                   (long long)c.num_hidden_layers, GPT_MAX_MOE_LAYERS);
    if (c.mixtral && c.router_jitter_noise > 0)
        fprintf(stderr, "%s: note: %s has router_jitter_noise %g, a training-time setting not carried over (Megatron's "
                "--moe-input-jitter-eps jitters only the router's input; give it when training)\n", program_name,
                s->config_path, c.router_jitter_noise);
    /* validate everything before writing: shapes and dtypes of every parameter, no strangers */
    const safetensors_file *embed_file;
    int64_t embed_shape[2] = {m.vocab, m.hidden};
    char summary[path_max + 256];
    config_summary(s, &c, summary, sizeof summary);
    const safetensors_tensor *embed = hf_source_checked(s, "model.embed_tokens.weight", 2, embed_shape, summary,
                                                        &embed_file);
    m.untied = hf_source_lm_head_untied(s, m.vocab, m.hidden, embed, embed_file, summary);
    if (m.untied && c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says tie_word_embeddings, but lm_head.weight differs from embed_tokens: "
                "importing it as an untied output layer\n", program_name, s->config_path);
    if (!m.untied && !c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says the embeddings are untied, but there is no distinct lm_head.weight: "
                "importing them tied\n", program_name, s->config_path);
    int count;
    hf_llama_tensor *list = hf_llama_tensor_list(&m, &count);
    const safetensors_tensor **sources = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *sources);
    const safetensors_file **source_files = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *source_files);
    CHECK(sources && source_files, "out of memory");
    for (int i = 0; i < count; i++)
        for (int p = 0; p < list[i].parts; p++)
            sources[i * HF_LLAMA_MAX_PARTS + p] = hf_source_checked(s, list[i].hf[p], list[i].ndim, list[i].hf_shape[p],
                                                                    summary, &source_files[i * HF_LLAMA_MAX_PARTS + p]);
    for (int f = 0; f < s->num_files; f++)
        for (int i = 0; i < s->files[f].num_tensors; i++)
            if (!s->used[f][i] && !is_ignored_buffer(s->files[f].tensors[i].name))
                user_error("%s: tensor '%s' is not a parameter of the %s that %s describes (%s)", s->files[f].path,
                           s->files[f].tensors[i].name, family(&c), s->config_path, summary);

    checkpoint_names release;
    checkpoint_writer *w = convert_release_writer(save, overwrite, &release);
    write_args(w, &m, &c, divisible_by);
    for (int i = 0; i < count; i++) {
        float *hf[HF_LLAMA_MAX_PARTS] = {0};
        for (int p = 0; p < list[i].parts; p++)
            hf[p] = hf_source_read_float32(source_files[i * HF_LLAMA_MAX_PARTS + p], sources[i * HF_LLAMA_MAX_PARTS + p]);
        float *ours = malloc(sizeof(float) * (size_t)hf_llama_our_elements(&list[i]));
        CHECK(ours, "out of memory converting %s", list[i].ours);
        hf_llama_from_hf(&list[i], &m, (const float *const *)hf, ours);
        checkpoint_writer_write_tensor(w, list[i].ours, list[i].ndim, list[i].our_shape, ours);
        for (int p = 0; p < list[i].parts; p++) free(hf[p]);
        free(ours);
    }
    convert_release_commit(w);
    char mlp[128];
    mlp_text(&m, c.num_experts_per_tok, mlp, sizeof mlp);
    printf("> %s: %s -> %s: %sForCausalLM, %lld layers, hidden %lld, %lld heads in %lld query groups, %s, "
           "vocab %lld padded to %lld, %s%s (%d tensors from %d file%s)\n", program_name, input, release.file,
           family(&c), (long long)m.num_layers, (long long)m.hidden, (long long)m.heads,
           (long long)m.groups, mlp, (long long)m.vocab, (long long)m.padded_vocab,
           m.untied ? "untied output layer" : "tied embeddings", c.rope_scaling ? ", Llama 3 rope scaling" : "", count,
           s->num_files, s->num_files == 1 ? "" : "s");
    free(sources);
    free(source_files);
    free(list);
}
