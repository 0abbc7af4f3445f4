/* convert_t5.c: convert_checkpoint between our T5 checkpoint and Hugging Face
 * T5ForConditionalGeneration, either way (see convert_t5.h). As for GPT-2 and Llama, everything
 * is validated before anything is written, and outputs appear only complete (.tmp, rename). */
#include "app/convert_args.h"
#include "app/convert_t5.h"

#include "app/core/error.h"
#include "app/model/hf_t5_config.h"
#include "app/model/hf_t5_layout.h"
#include "app/model/relative_position.h"
#include "io/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* a T5 has both stacks' final norms (a BERT's encoder has only encoder.*, a GPT only decoder.*) */
int t5_checkpoint(const checkpoint_reader *r) {
    return checkpoint_has_tensor(r, "encoder.final_layernorm.weight") &&
           checkpoint_has_tensor(r, "decoder.final_layernorm.weight");
}

/* ---- ours -> Hugging Face ------------------------------------------------------------------ */

/* config.json's feed_forward_proj of a config */
static const char *feed_forward_name(const hf_t5_config *c) {
    return c->gated ? "gated-silu" : c->gelu_erf ? "gelu" : "gelu_new";
}

/* the dimensions and config of a T5 checkpoint; refuses what HF T5 does not compute as ours */
static void read_t5(const checkpoint_reader *r, t5_dims *d, hf_t5_config *c) {
    const char *why = NULL;
    const int64_t heads = arg_positive_int(r, "num_attention_heads");
    if (!arg_string_is(r, "position_embedding_type", "relative", "learned_absolute"))
        why = "it has learned absolute position embeddings; HF T5 has relative position buckets only "
              "(--position-embedding-type relative)";
    else if (!arg_string_is(r, "normalization", "RMSNorm", "LayerNorm"))
        why = "its norms are LayerNorm; HF T5's T5LayerNorm is RMSNorm without bias (--normalization RMSNorm)";
    else if (arg_int_or(r, "add_bias_linear", 1) || arg_int_or(r, "add_qkv_bias", 0))
        why = "it has linear biases; HF T5 has none (--disable-bias-linear)";
    else if (!arg_int_or(r, "untie_embeddings_and_output_weights", 0))
        why = "its output layer is tied to the embeddings with T5LMHead's bias; HF T5 ties without a bias and scales "
              "by d_model^-0.5 (train with --untie-embeddings-and-output-weights, HF's tie_word_embeddings false)";
    else if (arg_int_or(r, "num_query_groups", heads) != heads)
        why = "it has grouped-query attention; HF T5 has multi-head attention";
    if (why) user_error("%s: this T5 checkpoint has no Hugging Face T5ForConditionalGeneration layout: %s", r->path, why);
    memset(d, 0, sizeof *d);
    memset(c, 0, sizeof *c);
    d->encoder_layers = arg_positive_int(r, "num_layers");
    d->decoder_layers = arg_int_or(r, "decoder_num_layers", 0);
    if (d->decoder_layers <= 0) {  /* before /args kept it: the decoder's tensors say */
        char name[96];
        do snprintf(name, sizeof name, "decoder.layers.%lld.self_attention.linear_qkv.weight", (long long)d->decoder_layers);
        while (checkpoint_has_tensor(r, name) && ++d->decoder_layers < (1 << 20));
        if (d->decoder_layers == 0) user_error("%s: no decoder layers", r->path);
    }
    d->hidden = arg_positive_int(r, "hidden_size");
    d->heads = heads;
    d->head_dim = arg_int_or(r, "kv_channels", d->hidden / d->heads);
    d->ffn_hidden = arg_positive_int(r, "ffn_hidden_size");
    d->padded_vocab = arg_positive_int(r, "padded_vocab_size");
    d->gated = arg_int_or(r, "swiglu", 0) != 0;
    d->layernorm_1p = arg_int_or(r, "apply_layernorm_1p", 0) != 0;
    d->buckets = arg_int_or(r, "relative_attention_num_buckets", 32);
    d->vocab = arg_export_vocab(r, d->padded_vocab);
    char err[error_max];
    if (checkpoint_read_double_arg(r, "layernorm_epsilon", &c->layer_norm_epsilon, err, sizeof err)) user_error("%s", err);
    if (checkpoint_read_double_arg(r, "hidden_dropout", &c->dropout_rate, err, sizeof err)) c->dropout_rate = 0.1;
    c->vocab_size = d->vocab;
    c->d_model = d->hidden;
    c->d_kv = d->head_dim;
    c->d_ff = d->ffn_hidden;
    c->num_layers = d->encoder_layers;
    c->num_decoder_layers = d->decoder_layers;
    c->num_heads = d->heads;
    c->relative_attention_num_buckets = d->buckets;
    c->relative_attention_max_distance = arg_int_or(r, "relative_attention_max_distance", 128);
    c->gated = d->gated;
    /* the GeLU MLP's form: exact (HF "gelu") without the bias-GeLU fusion, as a checkpoint without
     * linear biases has it; the tanh form (gelu_new) where bias_gelu_fusion says so or is absent
     * (checkpoints before it was recorded) */
    c->gelu_erf = !d->gated && arg_int_or(r, "bias_gelu_fusion", 1) == 0;
    c->pad_token_id = 0;  /* T5Config's defaults: generation settings, not the forward pass */
    c->eos_token_id = 1;
    c->decoder_start_token_id = 0;
}

void t5_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int overwrite) {
    char err[error_max];
    t5_dims d;
    hf_t5_config config;
    read_t5(reader, &d, &config);
    snprintf(config.torch_dtype, sizeof config.torch_dtype, "%s", bfloat16 ? "bfloat16" : "float32");
    int count;
    hf_t5_tensor *list = hf_t5_tensor_list(&d, &count);
    for (int i = 0; i < count; i++)  /* every shape checked before anything is written */
        if (checkpoint_check_tensor(reader, list[i].ours, list[i].ndim, list[i].our_shape, err, sizeof err))
            user_error("%s", err);
    char config_path[path_max], config_tmp[path_max + 8], model_path[path_max], index_path[path_max];
    snprintf(config_path, sizeof config_path, "%s/config.json", output);
    snprintf(config_tmp, sizeof config_tmp, "%s.tmp", config_path);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", output);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", output);
    convert_refuse_existing(config_path, overwrite);
    convert_refuse_existing(model_path, overwrite);
    convert_refuse_existing(index_path, overwrite);  /* it would be read instead: it goes */
    if (!convert_is_folder(output) && mkdir(output, 0777) != 0)
        user_error("%s: cannot create the folder: %s", output, strerror(errno));
    if (hf_t5_config_write(config_tmp, &config, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    safetensors_writer *writer = safetensors_writer_create();
    safetensors_writer_set_metadata(writer, "format", "pt");
    void **buffers = calloc((size_t)count * HF_T5_MAX_PARTS, sizeof *buffers);
    CHECK(buffers, "out of memory");
    int num_buffers = 0;
    for (int i = 0; i < count; i++) {
        const hf_t5_tensor *t = &list[i];
        float *ours = malloc(sizeof(float) * (size_t)hf_t5_our_elements(t));
        float *hf[HF_T5_MAX_PARTS] = {0};
        CHECK(ours, "out of memory converting %s", t->ours);
        for (int p = 0; p < t->parts; p++) {
            hf[p] = malloc(sizeof(float) * (size_t)hf_t5_hf_elements(t, p));
            CHECK(hf[p], "out of memory converting %s", t->ours);
        }
        if (checkpoint_reader_read_tensor(reader, t->ours, t->ndim, t->our_shape, ours, err, sizeof err))
            user_error("%s", err);
        hf_t5_to_hf(t, &d, ours, hf);
        free(ours);
        for (int p = 0; p < t->parts; p++) {
            int64_t n = hf_t5_hf_elements(t, p);
            void *data = hf[p];
            if (bfloat16) {
                uint16_t *narrow = malloc(sizeof(uint16_t) * (size_t)n);
                CHECK(narrow, "out of memory");
                for (int64_t e = 0; e < n; e++) narrow[e] = safetensors_float_to_bf16(hf[p][e]);
                free(hf[p]);
                data = narrow;
            }
            buffers[num_buffers++] = data;
            if (safetensors_writer_add(writer, t->hf[p], bfloat16 ? SAFETENSORS_BF16 : SAFETENSORS_F32, t->ndim,
                                       t->hf_shape[p], data, err, sizeof err))
                FATAL("%s", err);
        }
    }
    if (safetensors_writer_write(writer, model_path, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    safetensors_writer_free(writer);
    for (int b = 0; b < num_buffers; b++) free(buffers[b]);
    unlink(index_path);
    if (rename(config_tmp, config_path) != 0) {
        unlink(config_tmp);
        user_error("cannot rename %s to %s: %s", config_tmp, config_path, strerror(errno));
    }
    printf("> %s: %s -> %s: T5ForConditionalGeneration, %lld encoder and %lld decoder layers, d_model %lld, %lld "
           "heads of %lld, d_ff %lld (%s), %lld relative buckets, vocab %lld (%lld padding rows dropped), untied "
           "lm_head, %s\n", program_name, reader->path, output, (long long)d.encoder_layers, (long long)d.decoder_layers,
           (long long)d.hidden, (long long)d.heads, (long long)d.head_dim, (long long)d.ffn_hidden,
           feed_forward_name(&config), (long long)d.buckets, (long long)d.vocab,
           (long long)(d.padded_vocab - d.vocab), bfloat16 ? "bfloat16" : "float32");
    free(buffers);
    free(list);
}

/* ---- Hugging Face -> ours ------------------------------------------------------------------ */

/* the max_position_embeddings an import records: HF T5 has no position table (its relative
 * buckets take any length); Megatron's T5 examples' encoder length */
enum { T5_IMPORT_POSITIONS = 512 };

static void write_args(checkpoint_writer *w, const t5_dims *d, const hf_t5_config *c, int64_t divisible_by) {
    const int64_t positions = T5_IMPORT_POSITIONS;
    struct { const char *name; int64_t value; } ints[] = {
        {"num_layers", d->encoder_layers}, {"encoder_num_layers", d->encoder_layers},
        {"decoder_num_layers", d->decoder_layers}, {"hidden_size", d->hidden}, {"num_attention_heads", d->heads},
        {"kv_channels", d->head_dim}, {"ffn_hidden_size", d->ffn_hidden}, {"padded_vocab_size", d->padded_vocab},
        {"vocab_size", d->vocab}, {"make_vocab_size_divisible_by", divisible_by},
        {"max_position_embeddings", positions}, {"seq_length", positions}, {"encoder_seq_length", positions},
        {"decoder_seq_length", 128}, {"untie_embeddings_and_output_weights", 1}, {"num_query_groups", d->heads},
        {"group_query_attention", 0}, {"swiglu", d->gated}, {"add_bias_linear", 0}, {"add_qkv_bias", 0},
        /* Megatron's: no fusion without biases (F.gelu); HF's gelu_new is the tanh form, which a
         * checkpoint records as the fusion's (--use-checkpoint-args keeps it) */
        {"bias_gelu_fusion", !c->gated && !c->gelu_erf},
        {"rotary_interleaved", 0}, {"use_rope_scaling", 0}, {"apply_layernorm_1p", 0},
        {"relative_attention_num_buckets", c->relative_attention_num_buckets},
        {"relative_attention_max_distance", c->relative_attention_max_distance},
        {"tensor_model_parallel_size", 1}, {"pipeline_model_parallel_size", 1}, {"data_parallel_size", 1},
        {"use_distributed_optimizer", 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) checkpoint_write_int_arg(w, ints[i].name, ints[i].value);
    checkpoint_write_double_arg(w, "layernorm_epsilon", c->layer_norm_epsilon);
    checkpoint_write_double_arg(w, "hidden_dropout", c->dropout_rate);
    checkpoint_write_double_arg(w, "attention_dropout", c->dropout_rate);
    checkpoint_write_string_arg(w, "normalization", "RMSNorm");
    checkpoint_write_string_arg(w, "position_embedding_type", "relative");
    checkpoint_write_string_arg(w, "tokenizer_type", "HuggingFaceTokenizer");
}

/* tensors of older exports that are the shared embedding again (tied in the module) */
static int is_ignored_copy(const char *name) {
    return !strcmp(name, "encoder.embed_tokens.weight") || !strcmp(name, "decoder.embed_tokens.weight");
}

/* the encoder's and decoder's embed_tokens, where saved beside the shared embedding, must hold
 * its values: Megatron's T5 has one embedding for both stacks (transformers 5 with
 * tie_word_embeddings false gives each stack an embedding of its own) */
static void copies_must_match(hf_source *s, const safetensors_tensor *shared, const safetensors_file *shared_file,
                              const char *shared_name) {
    static const char *const names[] = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};
    float *want = NULL;
    for (int k = 0; k < 2; k++) {
        if (!strcmp(names[k], shared_name)) continue;
        for (int f = 0; f < s->num_files; f++) {
            const safetensors_tensor *t = safetensors_find(&s->files[f], names[k]);
            if (!t) continue;
            if (!want) want = hf_source_read_float32(shared_file, shared);
            float *got = t->num_elements == shared->num_elements ? hf_source_read_float32(&s->files[f], t) : NULL;
            int same = got && !memcmp(got, want, sizeof(float) * (size_t)shared->num_elements);
            free(got);
            if (!same)
                user_error("%s: '%s' differs from '%s': this T5 has untied input embeddings, and Megatron's T5 "
                           "shares one embedding between the encoder and the decoder (save the model with "
                           "its stacks' embed_tokens tied to shared)", s->files[f].path, names[k], shared_name);
        }
    }
    free(want);
}

void t5_import_from_hf(hf_source *s, const char *input, const char *save, int64_t divisible_by, int overwrite) {
    char err[error_max];
    hf_t5_config c;
    if (hf_t5_config_read(s->config_path, &c, err, sizeof err)) user_error("%s", err);
    const char *why_not = relative_position_check((int)(c.relative_attention_num_buckets > 1 << 20 ? 1 << 20 :
                                                        c.relative_attention_num_buckets),
                                                  (int)(c.relative_attention_max_distance > 1 << 30 ? 1 << 30 :
                                                        c.relative_attention_max_distance));
    if (why_not) user_error("%s: relative_attention_num_buckets %lld, relative_attention_max_distance %lld: %s",
                            s->config_path, (long long)c.relative_attention_num_buckets,
                            (long long)c.relative_attention_max_distance, why_not);
    t5_dims d = {
        .encoder_layers = c.num_layers, .decoder_layers = c.num_decoder_layers, .hidden = c.d_model,
        .heads = c.num_heads, .head_dim = c.d_kv, .ffn_hidden = c.d_ff, .vocab = c.vocab_size,
        .padded_vocab = (c.vocab_size + divisible_by - 1) / divisible_by * divisible_by,
        .buckets = c.relative_attention_num_buckets, .gated = c.gated,
    };
    char summary[path_max + 256];
    snprintf(summary, sizeof summary, "%s says %lld encoder and %lld decoder layers, d_model %lld, %lld heads of "
             "d_kv %lld, d_ff %lld, %lld relative buckets, vocab_size %lld", s->config_path, (long long)c.num_layers,
             (long long)c.num_decoder_layers, (long long)c.d_model, (long long)c.num_heads, (long long)c.d_kv,
             (long long)c.d_ff, (long long)c.relative_attention_num_buckets, (long long)c.vocab_size);
    int count;
    hf_t5_tensor *list = hf_t5_tensor_list(&d, &count);
    /* the shared embedding under one of its tied names: shared.weight, else the encoder's */
    const safetensors_file *in;
    if (!hf_source_find(s, "shared.weight", &in) && hf_source_find(s, "encoder.embed_tokens.weight", &in))
        snprintf(list[0].hf[0], sizeof list[0].hf[0], "encoder.embed_tokens.weight");
    /* no lm_head.weight: transformers (5.x) ties a new T5's lm_head to the shared embedding and
     * saves the one tensor; with tie_word_embeddings false (checked above) HF computes the logits
     * with that matrix and no d_model^-0.5 scaling, which is our untied output layer holding a copy */
    if (!hf_source_find(s, "lm_head.weight", &in))
        for (int i = 0; i < count; i++)
            if (list[i].hf[0][0] && !strcmp(list[i].hf[0], "lm_head.weight")) {
                snprintf(list[i].hf[0], sizeof list[i].hf[0], "%s", list[0].hf[0]);
                printf("> %s: %s has no lm_head.weight (transformers saved the tied module once): the output layer "
                       "is a copy of %s, unscaled, as HF computes it with tie_word_embeddings false\n",
                       program_name, input, list[0].hf[0]);
            }
    const safetensors_tensor **sources = calloc((size_t)count * HF_T5_MAX_PARTS, sizeof *sources);
    const safetensors_file **source_files = calloc((size_t)count * HF_T5_MAX_PARTS, sizeof *source_files);
    CHECK(sources && source_files, "out of memory");
    for (int i = 0; i < count; i++)
        for (int p = 0; p < list[i].parts; p++)
            sources[i * HF_T5_MAX_PARTS + p] = hf_source_checked(s, list[i].hf[p], list[i].ndim, list[i].hf_shape[p],
                                                                 summary, &source_files[i * HF_T5_MAX_PARTS + p]);
    copies_must_match(s, sources[0], source_files[0], list[0].hf[0]);
    for (int f = 0; f < s->num_files; f++)
        for (int i = 0; i < s->files[f].num_tensors; i++)
            if (!s->used[f][i] && !is_ignored_copy(s->files[f].tensors[i].name))
                user_error("%s: tensor '%s' is not a parameter of the T5ForConditionalGeneration that %s describes (%s)",
                           s->files[f].path, s->files[f].tensors[i].name, s->config_path, summary);

    checkpoint_names release;
    checkpoint_writer *w = convert_release_writer(save, overwrite, &release);
    write_args(w, &d, &c, divisible_by);
    for (int i = 0; i < count; i++) {
        float *hf[HF_T5_MAX_PARTS] = {0};
        for (int p = 0; p < list[i].parts; p++)
            hf[p] = hf_source_read_float32(source_files[i * HF_T5_MAX_PARTS + p], sources[i * HF_T5_MAX_PARTS + p]);
        float *ours = malloc(sizeof(float) * (size_t)hf_t5_our_elements(&list[i]));
        CHECK(ours, "out of memory converting %s", list[i].ours);
        hf_t5_from_hf(&list[i], &d, (const float *const *)hf, ours);
        checkpoint_writer_write_tensor(w, list[i].ours, list[i].ndim, list[i].our_shape, ours);
        for (int p = 0; p < list[i].parts; p++) free(hf[p]);
        free(ours);
    }
    convert_release_commit(w);
    printf("> %s: %s -> %s: T5ForConditionalGeneration, %lld encoder and %lld decoder layers, d_model %lld, %lld "
           "heads of %lld, d_ff %lld (%s), %lld relative buckets, vocab %lld padded to %lld, untied output layer "
           "(%d tensors from %d file%s); train it with pretrain_t5 --position-embedding-type relative "
           "--normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights%s --norm-epsilon %g "
           "--max-position-embeddings %d (recorded; T5's relative positions have no table)\n",
           program_name, input, release.file, (long long)d.encoder_layers, (long long)d.decoder_layers,
           (long long)d.hidden, (long long)d.heads, (long long)d.head_dim, (long long)d.ffn_hidden,
           feed_forward_name(&c), (long long)d.buckets, (long long)d.vocab, (long long)d.padded_vocab, count,
           s->num_files, s->num_files == 1 ? "" : "s", d.gated ? " --swiglu" : "", c.layer_norm_epsilon, T5_IMPORT_POSITIONS);
    if (!c.gated && !c.gelu_erf)
        printf("> %s: its MLP's GeLU is the tanh form (%s), which Megatron computes only with linear biases: the "
               "checkpoint records it (bias_gelu_fusion 1), and pretrain_t5 --use-checkpoint-args keeps it\n",
               program_name, "gelu_new");
    free(sources);
    free(source_files);
    free(list);
}
