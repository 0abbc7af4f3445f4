/* convert_bert.c: convert_checkpoint between our BERT checkpoint (pretrain_bert) and Hugging
 * Face MegatronBertForPreTraining / MegatronBertForMaskedLM, either way (see convert_bert.h). As
 * for GPT-2 and Llama, everything is validated before anything is written, and outputs appear
 * only complete (.tmp/.partial, fsync, rename). */
#include "app/convert_args.h"
#include "app/convert_bert.h"

#include "app/core/error.h"
#include "app/model/hf_bert_config.h"
#include "app/model/hf_bert_layout.h"
#include "io/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* BERT's own heads (T5 has encoder.* tensors too, but none of these) */
int bert_checkpoint(const checkpoint_reader *r) {
    return checkpoint_has_tensor(r, "lm_head.dense.weight") || checkpoint_has_tensor(r, "classification_head.weight") ||
           checkpoint_has_tensor(r, "multichoice_head.weight");
}

/* ---- ours -> Hugging Face ------------------------------------------------------------------ */

/* the dimensions of a BERT checkpoint; refuses what MegatronBert does not compute */
static void read_bert(const checkpoint_reader *r, bert_dims *m, hf_bert_config *c) {
    memset(m, 0, sizeof *m);
    memset(c, 0, sizeof *c);
    const char *why = NULL;
    if (checkpoint_has_tensor(r, "classification_head.weight") || checkpoint_has_tensor(r, "multichoice_head.weight"))
        why = "it is a finetune_bert checkpoint (a task head, no LM head); the export takes pretrain_bert checkpoints";
    else if (!checkpoint_has_tensor(r, "lm_head.dense.weight"))
        why = "it has no LM head (lm_head.dense.weight)";
    else if (!arg_string_is(r, "normalization", "LayerNorm", "LayerNorm"))
        why = "its norms are not LayerNorm (--normalization RMSNorm)";
    else if (!arg_string_is(r, "position_embedding_type", "learned_absolute", "learned_absolute"))
        why = "its positions are not learned absolute embeddings (--position-embedding-type)";
    else if (arg_int_or(r, "swiglu", 0)) why = "its MLP is SwiGLU (--swiglu); MegatronBert's is GeLU";
    else if (!arg_int_or(r, "add_bias_linear", 1)) why = "it has no linear biases (--disable-bias-linear)";
    else if (arg_int_or(r, "apply_layernorm_1p", 0)) why = "its norm weights are stored as w - 1 (--apply-layernorm-1p)";
    else if (arg_int_or(r, "num_experts", 0) > 0) why = "it has experts (--num-experts)";
    if (why) user_error("%s: this checkpoint has no Hugging Face MegatronBert layout: %s", r->path, why);
    m->num_layers = arg_positive_int(r, "num_layers");
    m->hidden = arg_positive_int(r, "hidden_size");
    m->heads = arg_positive_int(r, "num_attention_heads");
    m->head_dim = arg_int_or(r, "kv_channels", m->hidden / m->heads);
    int64_t groups = arg_int_or(r, "num_query_groups", m->heads);
    if (groups > 0 && groups != m->heads)
        user_error("%s: this checkpoint has no Hugging Face MegatronBert layout: %lld query groups of %lld heads "
                   "(--group-query-attention); MegatronBert's attention is multi-head", r->path, (long long)groups,
                   (long long)m->heads);
    if (m->heads * m->head_dim != m->hidden)
        user_error("%s: this checkpoint has no Hugging Face MegatronBert layout: kv_channels %lld x "
                   "num_attention_heads %lld != hidden_size %lld (MegatronBert's heads are hidden_size / "
                   "num_attention_heads wide)", r->path, (long long)m->head_dim, (long long)m->heads,
                   (long long)m->hidden);
    m->ffn_hidden = arg_positive_int(r, "ffn_hidden_size");
    m->padded_vocab = arg_positive_int(r, "padded_vocab_size");
    m->positions = arg_positive_int(r, "max_position_embeddings");
    m->untied = arg_int_or(r, "untie_embeddings_and_output_weights", 0) != 0;
    m->binary_head = checkpoint_has_tensor(r, "binary_head.weight");
    m->vocab = arg_export_vocab(r, m->padded_vocab);
    char err[error_max];
    if (checkpoint_read_double_arg(r, "layernorm_epsilon", &c->layer_norm_eps, err, sizeof err)) user_error("%s", err);
    c->vocab_size = m->vocab;
    c->hidden_size = m->hidden;
    c->intermediate_size = m->ffn_hidden;
    c->num_hidden_layers = m->num_layers;
    c->num_attention_heads = m->heads;
    c->max_position_embeddings = m->positions;
    c->type_vocab_size = 2;
    c->hidden_dropout_prob = arg_double_or(r, "hidden_dropout", 0.1);
    c->attention_probs_dropout_prob = arg_double_or(r, "attention_dropout", 0.1);
    c->tie_word_embeddings = !m->untied;
    c->binary_head = m->binary_head;
    /* the encoder MLP's GeLU (hf_bert_config.h): exact without the bias-GeLU fusion
     * (--no-bias-gelu-fusion), as the LM head's, so "gelu" is exact for both; else the tanh form
     * (also checkpoints from before bias_gelu_fusion was recorded) */
    snprintf(c->hidden_act, sizeof c->hidden_act, "%s", arg_int_or(r, "bias_gelu_fusion", 1) ? "gelu_new" : "gelu");
}

void bert_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int overwrite) {
    char err[error_max];
    bert_dims m;
    hf_bert_config config;
    read_bert(reader, &m, &config);
    snprintf(config.torch_dtype, sizeof config.torch_dtype, "%s", bfloat16 ? "bfloat16" : "float32");
    int count;
    hf_llama_tensor *list = hf_bert_tensor_list(&m, &count);
    for (int i = 0; i < count; i++)  /* every shape checked before anything is written */
        if (list[i].ours[0] &&
            checkpoint_check_tensor(reader, list[i].ours, list[i].ndim, list[i].our_shape, err, sizeof err))
            user_error("%s", err);
    const llama_dims dims = bert_llama_dims(&m);

    char model_path[path_max], config_path[path_max], config_tmp[path_max + 8], index_path[path_max];
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", output);
    snprintf(config_path, sizeof config_path, "%s/config.json", output);
    snprintf(config_tmp, sizeof config_tmp, "%s.tmp", config_path);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", output);
    convert_refuse_existing(model_path, overwrite);
    convert_refuse_existing(config_path, overwrite);
    convert_refuse_existing(index_path, overwrite);  /* it would be read instead of model.safetensors */

    /* the writer borrows every converted tensor until it writes them all */
    safetensors_writer *writer = safetensors_writer_create();
    safetensors_writer_set_metadata(writer, "format", "pt");
    void **converted = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *converted);
    CHECK(converted, "out of memory");
    for (int i = 0; i < count; i++) {
        const hf_llama_tensor *t = &list[i];
        float *hf[HF_LLAMA_MAX_PARTS] = {0};
        for (int p = 0; p < t->parts; p++) {
            hf[p] = calloc((size_t)hf_llama_hf_elements(t, p), sizeof(float));
            CHECK(hf[p], "out of memory converting %s", t->hf[p]);
        }
        if (t->ours[0]) {  /* else the zero token types of a model without them */
            float *ours = malloc(sizeof(float) * (size_t)hf_llama_our_elements(t));
            CHECK(ours, "out of memory converting %s", t->ours);
            if (checkpoint_reader_read_tensor(reader, t->ours, t->ndim, t->our_shape, ours, err, sizeof err))
                user_error("%s", err);
            hf_llama_to_hf(t, &dims, ours, hf);
            free(ours);
        }
        for (int p = 0; p < t->parts; p++) {
            void *data = hf[p];
            if (bfloat16) {
                int64_t n = hf_llama_hf_elements(t, p);
                uint16_t *narrow = malloc(sizeof(uint16_t) * (size_t)n);
                CHECK(narrow, "out of memory");
                for (int64_t e = 0; e < n; e++) narrow[e] = safetensors_float_to_bf16(hf[p][e]);
                free(hf[p]);
                data = narrow;
            }
            converted[i * HF_LLAMA_MAX_PARTS + p] = data;
            if (safetensors_writer_add(writer, t->hf[p], bfloat16 ? SAFETENSORS_BF16 : SAFETENSORS_F32, t->ndim,
                                       t->hf_shape[p], data, err, sizeof err))
                FATAL("%s", err);
        }
    }

    if (!convert_is_folder(output) && mkdir(output, 0777) != 0)
        user_error("%s: cannot create the folder: %s", output, strerror(errno));
    /* config first to a .tmp, then the model (atomic), then the config into place */
    if (hf_bert_config_write(config_tmp, &config, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    if (safetensors_writer_write(writer, model_path, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    if (rename(config_tmp, config_path) != 0) {
        unlink(config_tmp);
        user_error("cannot rename %s to %s: %s", config_tmp, config_path, strerror(errno));
    }
    printf("> %s: %s -> %s: %s, %lld layers, hidden %lld, %lld heads, ffn %lld, vocab %lld (%lld padding rows "
           "dropped), %s, %s%s\n", program_name, reader->path, output,
           m.binary_head ? "MegatronBertForPreTraining" : "MegatronBertForMaskedLM (no binary head: zero token types)",
           (long long)m.num_layers, (long long)m.hidden, (long long)m.heads, (long long)m.ffn_hidden,
           (long long)m.vocab, (long long)(m.padded_vocab - m.vocab), m.untied ? "untied decoder" : "tied embeddings",
           bfloat16 ? "bfloat16" : "float32", !strcmp(config.hidden_act, "gelu") ? ", hidden_act gelu" : ", hidden_act gelu_new");
    safetensors_writer_free(writer);
    for (int i = 0; i < count * HF_LLAMA_MAX_PARTS; i++) free(converted[i]);
    free(converted);
    free(list);
}

/* ---- Hugging Face -> ours ------------------------------------------------------------------ */

static const char *config_summary(const hf_source *s, const hf_bert_config *c, char *buffer, size_t size) {
    snprintf(buffer, size, "%s says %lld layers, hidden_size %lld, %lld heads, intermediate_size %lld, vocab_size "
             "%lld, max_position_embeddings %lld", s->config_path, (long long)c->num_hidden_layers,
             (long long)c->hidden_size, (long long)c->num_attention_heads, (long long)c->intermediate_size,
             (long long)c->vocab_size, (long long)c->max_position_embeddings);
    return buffer;
}

/* non-parameter buffers of older exports */
static int is_ignored_buffer(const char *name) { return !strcmp(name, "bert.embeddings.position_ids"); }

/* 1 when the two tensors hold the same values (as float32) */
static int same_values(const safetensors_file *fa, const safetensors_tensor *a, const safetensors_file *fb,
                       const safetensors_tensor *b) {
    if (a->num_elements != b->num_elements) return 0;
    float *x = hf_source_read_float32(fa, a), *y = hf_source_read_float32(fb, b);
    int same = memcmp(x, y, sizeof(float) * (size_t)a->num_elements) == 0;
    free(x);
    free(y);
    return same;
}

void bert_import_from_hf(hf_source *s, const char *input, const char *save, int64_t divisible_by, int overwrite) {
    char err[error_max];
    hf_bert_config c;
    if (hf_bert_config_read(s->config_path, &c, err, sizeof err)) user_error("%s", err);
    /* "gelu": the exact GeLU in the MLP (recorded as bias_gelu_fusion 0: Megatron's
     * --no-bias-gelu-fusion) and in the LM head, which computes it in any case; the tanh forms:
     * the MLP's fused tanh GeLU (bias_gelu_fusion 1), the LM head's transform then within the
     * approximation of HF's (hf_bert_config.h) */
    int gelu_erf = !strcmp(c.hidden_act, "gelu");
    if ((float)c.layer_norm_eps != 1e-5f)  /* /args keeps it, but no flag is taken from there */
        fprintf(stderr, "%s: note: %s says layer_norm_eps %g: give pretrain_bert and finetune_bert --norm-epsilon %g "
                "(their default is 1e-5)\n", program_name, s->config_path, c.layer_norm_eps, c.layer_norm_eps);
    bert_dims m = {
        .num_layers = c.num_hidden_layers, .hidden = c.hidden_size, .heads = c.num_attention_heads,
        .head_dim = c.hidden_size / c.num_attention_heads, .ffn_hidden = c.intermediate_size,
        .positions = c.max_position_embeddings, .vocab = c.vocab_size,
        .padded_vocab = (c.vocab_size + divisible_by - 1) / divisible_by * divisible_by,
    };
    char summary[path_max + 256];
    config_summary(s, &c, summary, sizeof summary);
    /* the binary head and an untied decoder are what the file holds */
    const safetensors_file *file, *embed_file;
    m.binary_head = hf_source_find(s, "cls.seq_relationship.weight", &file) != NULL;
    if (m.binary_head != c.binary_head)
        fprintf(stderr, "%s: note: %s names %s, but the file %s cls.seq_relationship: importing %s binary head\n",
                program_name, s->config_path, c.binary_head ? "MegatronBertForPreTraining" : "MegatronBertForMaskedLM",
                m.binary_head ? "has" : "has no", m.binary_head ? "with the" : "without a");
    int64_t embed_shape[2] = {m.vocab, m.hidden};
    const safetensors_tensor *embed = hf_source_checked(s, "bert.embeddings.word_embeddings.weight", 2, embed_shape,
                                                        summary, &embed_file);
    const safetensors_tensor *decoder = hf_source_find(s, "cls.predictions.decoder.weight", &file);
    if (decoder) {
        decoder = hf_source_checked(s, "cls.predictions.decoder.weight", 2, embed_shape, summary, &file);
        m.untied = !same_values(embed_file, embed, file, decoder);
    }
    if (m.untied && c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says tie_word_embeddings, but cls.predictions.decoder.weight differs from the "
                "word embeddings: importing it as an untied output layer\n", program_name, s->config_path);
    if (!m.untied && !c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says the embeddings are untied, but there is no distinct "
                "cls.predictions.decoder.weight: importing them tied\n", program_name, s->config_path);
    int count;
    hf_llama_tensor *list = hf_bert_tensor_list(&m, &count);
    const safetensors_tensor **sources = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *sources);
    const safetensors_file **source_files = calloc((size_t)count * HF_LLAMA_MAX_PARTS, sizeof *source_files);
    CHECK(sources && source_files, "out of memory");
    for (int i = 0; i < count; i++)
        for (int p = 0; p < list[i].parts; p++)
            sources[i * HF_LLAMA_MAX_PARTS + p] = hf_source_checked(s, list[i].hf[p], list[i].ndim, list[i].hf_shape[p],
                                                                    summary, &source_files[i * HF_LLAMA_MAX_PARTS + p]);
    /* cls.predictions.decoder.bias: HF's alias of cls.predictions.bias, stored by some exports */
    const safetensors_tensor *decoder_bias = hf_source_find(s, "cls.predictions.decoder.bias", &file);
    for (int i = 0; decoder_bias && i < count; i++)
        if (!strcmp(list[i].hf[0], "cls.predictions.bias") &&
            !same_values(file, decoder_bias, source_files[i * HF_LLAMA_MAX_PARTS], sources[i * HF_LLAMA_MAX_PARTS]))
            user_error("%s: cls.predictions.decoder.bias differs from cls.predictions.bias (transformers ties them)",
                       file->path);
    for (int f = 0; f < s->num_files; f++)
        for (int i = 0; i < s->files[f].num_tensors; i++)
            if (!s->used[f][i] && !is_ignored_buffer(s->files[f].tensors[i].name))
                user_error("%s: tensor '%s' is not a parameter of the MegatronBertFor%s that %s describes (%s)",
                           s->files[f].path, s->files[f].tensors[i].name, m.binary_head ? "PreTraining" : "MaskedLM",
                           s->config_path, summary);
    if (!m.binary_head) {  /* the token types must add nothing: our model without the binary head has none */
        const int last = count - 1;
        float *types = hf_source_read_float32(source_files[last * HF_LLAMA_MAX_PARTS], sources[last * HF_LLAMA_MAX_PARTS]);
        for (int64_t e = 0; e < 2 * m.hidden; e++)
            if (types[e] != 0.0f)
                user_error("%s: bert.embeddings.token_type_embeddings.weight is not zero, but there is no binary head "
                           "(cls.seq_relationship): our BERT without the binary head has no token types "
                           "(--bert-no-binary-head); import a MegatronBertForPreTraining instead",
                           source_files[last * HF_LLAMA_MAX_PARTS]->path);
        free(types);
    }

    checkpoint_names release;
    checkpoint_writer *w = convert_release_writer(save, overwrite, &release);
    struct { const char *name; int64_t value; } ints[] = {
        {"num_layers", m.num_layers}, {"hidden_size", m.hidden}, {"num_attention_heads", m.heads},
        {"kv_channels", m.head_dim}, {"ffn_hidden_size", m.ffn_hidden}, {"padded_vocab_size", m.padded_vocab},
        {"vocab_size", m.vocab}, {"make_vocab_size_divisible_by", divisible_by},
        {"max_position_embeddings", m.positions}, {"seq_length", m.positions},
        {"untie_embeddings_and_output_weights", m.untied}, {"num_query_groups", m.heads},
        {"group_query_attention", 0}, {"swiglu", 0}, {"add_bias_linear", 1}, {"add_qkv_bias", 0},
        {"bias_gelu_fusion", !gelu_erf}, {"apply_layernorm_1p", 0}, {"bert_binary_head", m.binary_head},
        {"tensor_model_parallel_size", 1}, {"pipeline_model_parallel_size", 1}, {"data_parallel_size", 1},
        {"use_distributed_optimizer", 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) checkpoint_write_int_arg(w, ints[i].name, ints[i].value);
    checkpoint_write_double_arg(w, "layernorm_epsilon", c.layer_norm_eps);
    checkpoint_write_double_arg(w, "hidden_dropout", c.hidden_dropout_prob);
    checkpoint_write_double_arg(w, "attention_dropout", c.attention_probs_dropout_prob);
    checkpoint_write_string_arg(w, "normalization", "LayerNorm");
    checkpoint_write_string_arg(w, "position_embedding_type", "learned_absolute");
    checkpoint_write_string_arg(w, "tokenizer_type", "BertWordPieceLowerCase");  /* pretrain_bert's default */
    const llama_dims dims = bert_llama_dims(&m);
    for (int i = 0; i < count; i++) {
        if (!list[i].ours[0]) continue;  /* the zero token types (checked above) */
        float *hf[HF_LLAMA_MAX_PARTS] = {0};
        for (int p = 0; p < list[i].parts; p++)
            hf[p] = hf_source_read_float32(source_files[i * HF_LLAMA_MAX_PARTS + p], sources[i * HF_LLAMA_MAX_PARTS + p]);
        float *ours = malloc(sizeof(float) * (size_t)hf_llama_our_elements(&list[i]));
        CHECK(ours, "out of memory converting %s", list[i].ours);
        hf_llama_from_hf(&list[i], &dims, (const float *const *)hf, ours);
        checkpoint_writer_write_tensor(w, list[i].ours, list[i].ndim, list[i].our_shape, ours);
        for (int p = 0; p < list[i].parts; p++) free(hf[p]);
        free(ours);
    }
    convert_release_commit(w);
    printf("> %s: %s -> %s: MegatronBertFor%s, %lld layers, hidden %lld, %lld heads, ffn %lld, vocab %lld padded to "
           "%lld, %s, the MLP's GeLU %s (%d tensors from %d file%s)\n", program_name, input, release.file,
           m.binary_head ? "PreTraining" : "MaskedLM (no binary head)", (long long)m.num_layers, (long long)m.hidden,
           (long long)m.heads, (long long)m.ffn_hidden, (long long)m.vocab, (long long)m.padded_vocab,
           m.untied ? "untied output layer" : "tied embeddings",
           gelu_erf ? "exact (--no-bias-gelu-fusion; --use-checkpoint-args keeps it)" : "the tanh approximation", count,
           s->num_files, s->num_files == 1 ? "" : "s");
    free(sources);
    free(source_files);
    free(list);
}
