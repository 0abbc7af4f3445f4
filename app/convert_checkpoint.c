/* convert_checkpoint.c: converts a GPT model between our HDF5 checkpoint (io/CHECKPOINT_FORMAT.md)
 * and Hugging Face GPT-2 (model.safetensors + config.json), either way; a Llama-architecture
 * model (RMSNorm, SwiGLU, RoPE, grouped-query attention) to and from LlamaForCausalLM instead, and
 * such a model with a mixture of experts in every layer to and from MixtralForCausalLM, and one
 * with gated shared experts (dense layers allowed, q/k/v biases) to and from Qwen2MoeForCausalLM
 * (app/convert_llama.c: chosen by the checkpoint's /args, or by config.json's model_type).
 * A T5 (pretrain_t5's checkpoint, or config.json's model_type "t5") converts to and from
 * T5ForConditionalGeneration (app/convert_t5.c) where the two compute the same function.
 * DeepSeek configs (n_shared_experts) are refused: their multi-head latent attention is not built.
 * A BERT (pretrain_bert: our pre-LN encoder) goes to and from MegatronBertForPreTraining, or
 * MegatronBertForMaskedLM without the binary head (app/convert_bert.c: chosen by the checkpoint's
 * encoder tensors, or config.json's model_type "megatron-bert"; "bert", post-LN, is refused).
 *   convert_checkpoint --to-hf --load CKPT_DIR|FILE.h5 --output HF_DIR [--dtype float32|bfloat16]
 *                      [--overwrite]
 *       writes HF_DIR/model.safetensors and HF_DIR/config.json (GPT2LMHeadModel; no lm_head
 *       when the embeddings are tied, as transformers saves it). A folder is read through its
 *       tracker; the file must be complete.
 *   convert_checkpoint --from-hf --input HF_DIR|FILE.safetensors --save CKPT_DIR
 *                      [--make-vocab-size-divisible-by 128] [--overwrite]
 *   convert_checkpoint --verify CKPT_DIR|FILE.h5
 *       checks every tensor of a complete checkpoint against its checksums (exit 1 naming the
 *       first damaged tensor and box); --to-hf checks them too before converting.
 *       writes CKPT_DIR/release.h5 and the tracker "release" (Megatron's name for a converted
 *       model): iteration 0, no optimizer state. Reads model.safetensors or a sharded
 *       model.safetensors.index.json, F32/F16/BF16/F64, names with or without "transformer.";
 *       lm_head.weight different from wte becomes an untied output layer.
 * The tensor mappings are in app/model/hf_gpt2_layout.h and app/model/hf_llama_layout.h (Mixtral's
 * too). Everything is validated (config against every
 * tensor shape, dtypes, unknown tensors) before anything is written, and outputs appear only
 * complete (write .tmp/.partial, fsync, rename). Runs as one process (directly or mpiexec -n 1).
 *
 * Megatron-LM's tools/checkpoint/convert.py flags work too: --loader llama_mistral|mixtral_hf
 * (Hugging Face, --checkpoint-type hf) --saver core|mcore --load-dir HF_DIR --save-dir CKPT_DIR is
 * --from-hf; --loader core|mcore|megatron --saver hf is --to-hf. Its layout and implementation flags
 * (--target-tensor-parallel-size, --model-size, --bf16, --loader-transformer-impl, ...) are
 * accepted, each saying why it changes nothing here (a checkpoint stores global tensors and
 * loads into any layout); a Megatron-to-Megatron conversion (resharding) is refused as not
 * needed, saying what to do instead. */
#include "app/convert_args.h"
#include "io/io_error.h"
#include "app/convert_hf_source.h"
#include "app/convert_llama.h"
#include "app/convert_bert.h"
#include "app/model/hf_bert_config.h"
#include "app/convert_t5.h"
#include "app/model/hf_t5_config.h"
#include "app/model/hf_llama_config.h"
#include "io/checkpoint_serial.h"
#include "app/core/error.h"
#include "io/checkpoint_checksum.h"
#include "app/core/options.h"
#include "app/model/hf_gpt2_config.h"
#include "app/model/hf_gpt2_layout.h"
#include "io/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct options {
    int to_hf, from_hf, overwrite;
    char load[CHECKPOINT_PATH_MAX], output[CHECKPOINT_PATH_MAX];
    char input[CHECKPOINT_PATH_MAX], save[CHECKPOINT_PATH_MAX];
    char verify[CHECKPOINT_PATH_MAX];
    char dtype[16];
    char max_shard_size[32];
    int64_t max_shard_bytes;  /* derived from --max-shard-size */
    int64_t vocab_divisible_by;
    int bfloat16;  /* derived from --dtype */
    /* Megatron's tools/checkpoint/convert.py */
    char model_type[8], loader[64], saver[64], checkpoint_type[8];
    char load_dir[CHECKPOINT_PATH_MAX], save_dir[CHECKPOINT_PATH_MAX];
} options;

#define AT(field) OPTION_AT(options, field)
#define MEGATRON_GROUP "Megatron-LM's tools/checkpoint/convert.py"
#define MEGATRON_NO_EFFECT "convert.py's flags with no effect here"
#define NO_LAYOUT "a checkpoint here stores every tensor in its global shape and loads into any --tensor-model-parallel-size/--pipeline-model-parallel-size: no resharding needed"
static const option_spec specs[] = {
    {"to-hf", "direction (give one)", OPTION_FLAG, AT(to_hf), .help = "our checkpoint -> Hugging Face GPT2LMHeadModel, or LlamaForCausalLM for a Llama-architecture model, MixtralForCausalLM for one with experts, Qwen2MoeForCausalLM for one with gated shared experts, MegatronBertForPreTraining (MegatronBertForMaskedLM without the binary head) for a pretrain_bert checkpoint, T5ForConditionalGeneration for a T5 (model.safetensors, config.json)"},
    {"from-hf", "direction (give one)", OPTION_FLAG, AT(from_hf), .help = "Hugging Face GPT-2, Llama, Mixtral, Qwen2-MoE, MegatronBert or T5 (config.json's model_type) -> CKPT_DIR/release.h5 and the tracker \"release\""},
    {"verify", "direction (give one)", OPTION_STRING, AT(verify), .metavar = "CKPT_DIR|FILE.h5", .help = "check every tensor of a checkpoint against its checksums, without converting"},
    {"load", "with --to-hf", OPTION_STRING, AT(load), .metavar = "CKPT_DIR|FILE.h5", .help = "the checkpoint a folder's tracker names, or one .h5 file"},
    {"output", "with --to-hf", OPTION_STRING, AT(output), .metavar = "HF_DIR", .help = "write HF_DIR/model.safetensors and HF_DIR/config.json"},
    {"dtype", "with --to-hf", OPTION_CHOICE, AT(dtype), "float32", .choices = "float32|bfloat16|fp32|bf16", .help = "tensor type of the safetensors file"},
    {"max-shard-size", "with --to-hf", OPTION_STRING, AT(max_shard_size), "5GB", .metavar = "SIZE", .help = "Llama and Mixtral export: past this size (bytes, or with KB/MB/GB, as save_pretrained's max_shard_size) write model-0000K-of-0000N.safetensors shards and model.safetensors.index.json"},
    {"input", "with --from-hf", OPTION_STRING, AT(input), .metavar = "HF_DIR|FILE.safetensors", .help = "model.safetensors, a sharded model.safetensors.index.json, or their folder"},
    {"save", "with --from-hf", OPTION_STRING, AT(save), .metavar = "CKPT_DIR", .help = "write CKPT_DIR/release.h5 and set the tracker to \"release\""},
    {"make-vocab-size-divisible-by", "with --from-hf", OPTION_INT64, AT(vocab_divisible_by), "128", .range = "[1, inf)", .help = "pad the embedding table with zero rows to a multiple of N (as Megatron)"},
    {"overwrite", "output", OPTION_FLAG, AT(overwrite), .help = "replace existing outputs"},
    {"model-type", MEGATRON_GROUP, OPTION_CHOICE, AT(model_type), .choices = "GPT|BERT", .help = "GPT (the GPT and Llama families) or BERT (pretrain_bert's, to and from MegatronBert); checked against what the files hold"},
    {"loader", MEGATRON_GROUP, OPTION_STRING, AT(loader), "megatron", .metavar = "NAME", .help = "llama_mistral or mixtral_hf (a Hugging Face checkpoint: as --from-hf), or core|mcore|megatron|legacy (ours)"},
    {"saver", MEGATRON_GROUP, OPTION_STRING, AT(saver), "megatron", .metavar = "NAME", .help = "core|mcore|megatron|legacy (ours), or hf (Hugging Face: as --to-hf)"},
    {"load-dir", MEGATRON_GROUP, OPTION_STRING, AT(load_dir), .metavar = "DIR", .help = "the checkpoint to read (Hugging Face folder or ours)"},
    {"save-dir", MEGATRON_GROUP, OPTION_STRING, AT(save_dir), .metavar = "DIR", .help = "where to write the converted checkpoint"},
    {"checkpoint-type", MEGATRON_GROUP, OPTION_CHOICE, AT(checkpoint_type), "hf", .choices = "hf|meta", .help = "the llama_mistral loader's source: hf (Meta's original format is not supported: convert it to Hugging Face first)"},
    {"target-tensor-parallel-size", MEGATRON_NO_EFFECT, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = NO_LAYOUT},
    {"target-pipeline-parallel-size", MEGATRON_NO_EFFECT, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = NO_LAYOUT},
    {"target-expert-parallel-size", MEGATRON_NO_EFFECT, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = NO_LAYOUT},
    {"model-size", MEGATRON_NO_EFFECT, OPTION_STRING, .flags = OPTION_NO_EFFECT, .metavar = "NAME", .help = "the shape comes from config.json"},
    {"tokenizer-model", MEGATRON_NO_EFFECT, OPTION_STRING, .flags = OPTION_NO_EFFECT, .metavar = "PATH", .help = "a checkpoint here holds no tokenizer: give --tokenizer-model to the programs that read text"},
    {"vocab-file", MEGATRON_NO_EFFECT, OPTION_STRING, .flags = OPTION_NO_EFFECT, .metavar = "PATH", .help = "the vocabulary size comes from config.json (padded by --make-vocab-size-divisible-by)"},
    {"true-vocab-size", MEGATRON_NO_EFFECT, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "the vocabulary size comes from config.json (padded by --make-vocab-size-divisible-by)"},
    {"bf16", MEGATRON_NO_EFFECT, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "a checkpoint here stores fp32 weights, converted exactly from F16/BF16 (--dtype chooses the Hugging Face side's type)"},
    {"fp16", MEGATRON_NO_EFFECT, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "a checkpoint here stores fp32 weights, converted exactly from F16/BF16 (--dtype chooses the Hugging Face side's type)"},
    {"loader-transformer-impl", MEGATRON_NO_EFFECT, OPTION_CHOICE, .choices = "local|transformer_engine", .flags = OPTION_NO_EFFECT, .help = "one parameter layout here, Megatron-Core's names"},
    {"saver-transformer-impl", MEGATRON_NO_EFFECT, OPTION_CHOICE, .choices = "local|transformer_engine", .flags = OPTION_NO_EFFECT, .help = "one parameter layout here, Megatron-Core's names"},
    {"position-embedding-type", MEGATRON_NO_EFFECT, OPTION_CHOICE, .choices = "learned_absolute|rope", .flags = OPTION_NO_EFFECT, .help = "the positions come from the checkpoint's /args or config.json"},
    {"megatron-path", MEGATRON_NO_EFFECT, OPTION_STRING, .flags = OPTION_NO_EFFECT, .metavar = "DIR", .help = "no Python: nothing to import"},
    {"max-queue-size", MEGATRON_NO_EFFECT, OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "one process converts tensor by tensor: no loader/saver queue"},
    {"no-checking", MEGATRON_NO_EFFECT, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "every tensor name and shape is always checked before anything is written"},
};

static const option_table table = {
    .usage = "--to-hf --load CKPT_DIR|FILE.h5 --output HF_DIR [--dtype float32|bfloat16] [--max-shard-size SIZE]\n"
             "                          [--overwrite]\n"
             "       convert_checkpoint --from-hf --input HF_DIR|FILE.safetensors --save CKPT_DIR\n"
             "                          [--make-vocab-size-divisible-by N] [--overwrite]\n"
             "       convert_checkpoint --verify CKPT_DIR|FILE.h5\n"
             "       convert_checkpoint --model-type GPT|BERT --loader llama_mistral|core --saver core|hf --load-dir DIR --save-dir DIR\n"
             "                          (Megatron-LM's tools/checkpoint/convert.py flags)",
    .description =
        "Converts a GPT model between our HDF5 checkpoint and Hugging Face GPT-2, a Llama-architecture\n"
        "model and Hugging Face LlamaForCausalLM, or one with experts and MixtralForCausalLM or\n"
        "Qwen2MoeForCausalLM, or a BERT and MegatronBertForPreTraining, as one process.\n"
        "Flags may also come from an args file (one flag per line, '#' starts a comment); the\n"
        "command line overrides it.\n",
    .specs = specs,
    .count = (int)(sizeof specs / sizeof specs[0]),
};

/* a convert.py plugin name without its "loader_"/"saver_" prefix: 'h' Hugging Face, 'm' ours, 0 other */
static int plugin_kind(const char *name, const char *prefix) {
    size_t n = strlen(prefix);
    if (!strncmp(name, prefix, n)) name += n;
    const char *hf[] = {"llama_mistral", "hf", "huggingface", "llama_hf", "mixtral_hf"};
    const char *ours[] = {"core", "mcore", "megatron", "legacy"};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++)
        if (!strcmp(name, hf[i])) return 'h';
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (!strcmp(name, ours[i])) return 'm';
    return 0;
}

/* Megatron's convert.py flags (--loader, --saver, --load-dir, --save-dir) as a direction */
static void megatron_direction(options *o) {
    if (o->to_hf || o->from_hf || o->verify[0] || o->load[0] || o->output[0] || o->input[0] || o->save[0])
        user_error("give either convert.py's --loader/--saver/--load-dir/--save-dir or --to-hf/--from-hf/--verify "
                   "with their flags, not both");
    if (!o->load_dir[0] || !o->save_dir[0]) user_error("--load-dir and --save-dir are both required (as in convert.py)");
    int loader = plugin_kind(o->loader, "loader_"), saver = plugin_kind(o->saver, "saver_");
    if (!loader)
        user_error("--loader %s is not supported here: llama_mistral or mixtral_hf (a Hugging Face GPT-2, "
                   "Llama-architecture or Mixtral checkpoint) or core|mcore|megatron|legacy (a checkpoint here)", o->loader);
    if (!saver)
        user_error("--saver %s is not supported here: core|mcore|megatron|legacy (a checkpoint here) or hf (Hugging "
                   "Face)", o->saver);
    if (loader == 'h' && !strcmp(o->checkpoint_type, "meta"))
        user_error("--checkpoint-type meta is not supported here: convert Meta's checkpoint to Hugging Face first "
                   "(transformers' convert_llama_weights_to_hf.py), then --checkpoint-type hf");
    if (loader == 'h' && saver == 'h') user_error("--loader %s --saver %s: both are Hugging Face; nothing to convert", o->loader, o->saver);
    if (loader == 'm' && saver == 'm')
        user_error("--loader %s --saver %s (resharding) is not needed here: a checkpoint stores every tensor in its "
                   "global shape and loads into any layout; pass --load %s with the new --tensor-model-parallel-size "
                   "and --pipeline-model-parallel-size directly", o->loader, o->saver, o->load_dir);
    if (loader == 'h') {
        o->from_hf = 1;
        snprintf(o->input, sizeof o->input, "%s", o->load_dir);
        snprintf(o->save, sizeof o->save, "%s", o->save_dir);
    } else {
        o->to_hf = 1;
        snprintf(o->load, sizeof o->load, "%s", o->load_dir);
        snprintf(o->output, sizeof o->output, "%s", o->save_dir);
    }
}

static options parse_options(int argc, char **argv) {
    options o;
    unsigned char given[sizeof specs / sizeof specs[0]];
    memset(&o, 0, sizeof o);
    options_parse_or_exit(&table, &o, given, argc, argv);
    if (options_given(&table, given, "loader") || options_given(&table, given, "saver") ||
        options_given(&table, given, "load-dir") || options_given(&table, given, "save-dir"))
        megatron_direction(&o);
    char no_effect[1024];
    if (options_no_effect_given(&table, given, no_effect, sizeof no_effect) > 0)
        printf("> accepted with no effect here (see --help): %s\n", no_effect);
    o.bfloat16 = !strcmp(o.dtype, "bfloat16") || !strcmp(o.dtype, "bf16");
    /* SIZE[KB|MB|GB] (decimal, as transformers' convert_file_size_to_int) */
    char *unit;
    double size = strtod(o.max_shard_size, &unit);
    double scale = !*unit ? 1 : !strcmp(unit, "KB") ? 1e3 : !strcmp(unit, "MB") ? 1e6 : !strcmp(unit, "GB") ? 1e9 : 0;
    if (!(size > 0) || scale == 0 || size * scale > 9e18)
        user_error("--max-shard-size '%s' is not a size (for example 5GB, 500MB, 1000000)", o.max_shard_size);
    o.max_shard_bytes = (int64_t)(size * scale);
    if (o.to_hf + o.from_hf + (o.verify[0] != 0) != 1)
        user_error("give exactly one of --to-hf and --from-hf, or --verify alone (try --help)");
    if (o.to_hf && (!o.load[0] || !o.output[0])) user_error("--to-hf needs --load and --output");
    if (o.from_hf && (!o.input[0] || !o.save[0])) user_error("--from-hf needs --input and --save");
    if (o.to_hf && (o.input[0] || o.save[0])) user_error("--input and --save go with --from-hf");
    if (o.from_hf && (o.load[0] || o.output[0])) user_error("--load and --output go with --to-hf");
    return o;
}


static void read_dims(const checkpoint_reader *reader, gpt2_dims *m, double *epsilon) {
    char err[error_max];
    m->num_layers = arg_positive_int(reader, "num_layers");
    m->hidden = arg_positive_int(reader, "hidden_size");
    m->heads = arg_positive_int(reader, "num_attention_heads");
    m->head_dim = checkpoint_has_int_arg(reader, "kv_channels") ? arg_positive_int(reader, "kv_channels")
                                                                 : m->hidden / m->heads;
    m->ffn_hidden = arg_positive_int(reader, "ffn_hidden_size");
    m->padded_vocab = arg_positive_int(reader, "padded_vocab_size");
    m->positions = arg_positive_int(reader, "max_position_embeddings");
    /* a Llama-family checkpoint (grouped-query attention, SwiGLU, no biases) has no GPT-2 layout */
    int64_t groups = m->heads, swiglu = 0, bias = 1;
    if (checkpoint_has_int_arg(reader, "num_query_groups")) checkpoint_read_int_arg(reader, "num_query_groups", &groups, err, sizeof err);
    if (checkpoint_has_int_arg(reader, "swiglu")) checkpoint_read_int_arg(reader, "swiglu", &swiglu, err, sizeof err);
    if (checkpoint_has_int_arg(reader, "add_bias_linear")) checkpoint_read_int_arg(reader, "add_bias_linear", &bias, err, sizeof err);
    if (groups != m->heads || swiglu || !bias)
        user_error("%s: a Llama-architecture checkpoint (num_query_groups %lld of %lld heads, swiglu %lld, "
                   "add_bias_linear %lld) has no Hugging Face GPT-2 layout", reader->path, (long long)groups,
                   (long long)m->heads, (long long)swiglu, (long long)bias);
    int64_t layernorm_1p = 0;
    if (checkpoint_has_int_arg(reader, "apply_layernorm_1p"))
        checkpoint_read_int_arg(reader, "apply_layernorm_1p", &layernorm_1p, err, sizeof err);
    if (layernorm_1p)
        user_error("%s: saved with --apply-layernorm-1p (norm weights stored as w - 1): the Hugging Face GPT-2 "
                   "export does not convert them", reader->path);
    int64_t untie = 0;
    if (checkpoint_read_int_arg(reader, "untie_embeddings_and_output_weights", &untie, err, sizeof err))
        user_error("%s", err);
    m->untied = untie != 0;
    m->vocab = arg_export_vocab(reader, m->padded_vocab);
    if (m->heads * m->head_dim != m->hidden)
        user_error("%s: kv_channels %lld x num_attention_heads %lld != hidden_size %lld; Hugging "
                   "Face GPT-2 needs them equal", reader->path, (long long)m->head_dim,
                   (long long)m->heads, (long long)m->hidden);
    if (checkpoint_read_double_arg(reader, "layernorm_epsilon", epsilon, err, sizeof err))
        user_error("%s", err);
}

/* writes path + ".tmp"; the caller renames it */
static void write_config_tmp(const char *path, const gpt2_dims *m, double epsilon, int bfloat16) {
    hf_gpt2_config config = {
        .vocab_size = m->vocab, .n_positions = m->positions, .n_embd = m->hidden,
        .n_layer = m->num_layers, .n_head = m->heads, .n_inner = m->ffn_hidden,
        .layer_norm_epsilon = epsilon, .tie_word_embeddings = !m->untied,
    };
    snprintf(config.torch_dtype, sizeof config.torch_dtype, "%s", bfloat16 ? "bfloat16" : "float32");
    char tmp[path_max + 8], err[error_max];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (hf_gpt2_config_write(tmp, &config, err, sizeof err)) {
        unlink(tmp);
        user_error("%s", err);
    }
}

/* checks the checksums of an open checkpoint; exits 1 naming the first damaged box */
static void verify_checksums(const checkpoint_reader *reader, int verbose) {
    char err[error_max] = "";
    int64_t tensors, boxes, unchecked;
    int64_t bad = checkpoint_verify_file(reader->file, reader->path, &tensors, &boxes, &unchecked, err, sizeof err);
    if (bad) {
        fprintf(stderr, "%s: error: %s (%lld damaged box%s in all)\n", program_name, err, (long long)bad,
                bad == 1 ? "" : "es");
        MPI_Finalize();
        exit(1);
    }
    if (!checkpoint_is_checksummed(reader->file))
        printf("note: %s has no checksums (saved before they existed): not verified\n", reader->path);
    else if (unchecked)
        user_error("%s: %lld tensor%s without checksums in a checksummed file: the file is damaged", reader->path,
                   (long long)unchecked, unchecked == 1 ? "" : "s");
    else if (verbose)
        printf("> %s: %s: %lld tensors, %lld boxes: every checksum matches\n", program_name, reader->path,
               (long long)tensors, (long long)boxes);
}

static void verify_only(const options *o) {
    char path[path_max], err[error_max];
    if (checkpoint_resolve(o->verify, path, sizeof path, err, sizeof err)) user_error("%s", err);
    checkpoint_reader reader;
    if (checkpoint_reader_open(path, &reader, err, sizeof err)) user_error("%s", err);
    verify_checksums(&reader, 1);
    checkpoint_reader_close(&reader);
}

static void export_to_hf(const options *o) {
    char path[path_max], err[error_max];
    if (checkpoint_resolve(o->load, path, sizeof path, err, sizeof err)) user_error("%s", err);
    checkpoint_reader reader;
    if (checkpoint_reader_open(path, &reader, err, sizeof err)) user_error("%s", err);
    verify_checksums(&reader, 0);
    if (t5_checkpoint(&reader)) {
        if (strcmp(o->max_shard_size, "5GB"))
            user_error("--max-shard-size applies to the Llama export; a T5 export is one model.safetensors");
        t5_export_to_hf(&reader, o->output, o->bfloat16, o->overwrite);
        checkpoint_reader_close(&reader);
        return;
    }
    const int bert = bert_checkpoint(&reader);
    if (o->model_type[0] && bert != !strcmp(o->model_type, "BERT"))
        user_error("--model-type %s, but %s holds a %s", o->model_type, path, bert ? "BERT (encoder.* tensors)" : "GPT");
    if (bert) {
        if (strcmp(o->max_shard_size, "5GB"))
            user_error("--max-shard-size applies to the Llama export; a BERT export is one model.safetensors");
        bert_export_to_hf(&reader, o->output, o->bfloat16, o->overwrite);
        checkpoint_reader_close(&reader);
        return;
    }
    if (llama_checkpoint(&reader)) {
        llama_export_to_hf(&reader, o->output, o->bfloat16, o->max_shard_bytes, o->overwrite);
        checkpoint_reader_close(&reader);
        return;
    }
    if (strcmp(o->max_shard_size, "5GB"))
        user_error("--max-shard-size applies to the Llama export; a GPT-2 export is one model.safetensors");
    gpt2_dims m = {0};
    double epsilon;
    read_dims(&reader, &m, &epsilon);
    int count;
    hf_gpt2_tensor *list = hf_gpt2_tensor_list(&m, &count);
    for (int i = 0; i < count; i++)  /* every shape checked before anything is written */
        if (checkpoint_check_tensor(&reader, list[i].ours, list[i].ndim, list[i].our_shape, err, sizeof err))
            user_error("%s", err);

    char model_path[path_max], config_path[path_max], config_tmp[path_max + 8];
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", o->output);
    snprintf(config_path, sizeof config_path, "%s/config.json", o->output);
    snprintf(config_tmp, sizeof config_tmp, "%s.tmp", config_path);
    convert_refuse_existing(model_path, o->overwrite);
    convert_refuse_existing(config_path, o->overwrite);

    /* the writer borrows every converted tensor until it writes them all */
    safetensors_writer *writer = safetensors_writer_create();
    safetensors_writer_set_metadata(writer, "format", "pt");
    void **converted = calloc((size_t)count, sizeof *converted);
    CHECK(converted, "out of memory");
    for (int i = 0; i < count; i++) {
        const hf_gpt2_tensor *t = &list[i];
        float *ours = malloc(sizeof(float) * (size_t)hf_gpt2_our_elements(t));
        float *hf = malloc(sizeof(float) * (size_t)hf_gpt2_hf_elements(t));
        CHECK(ours && hf, "out of memory converting %s", t->ours);
        if (checkpoint_reader_read_tensor(&reader, t->ours, t->ndim, t->our_shape, ours, err, sizeof err))
            user_error("%s", err);
        hf_gpt2_to_hf(t, &m, ours, hf);
        free(ours);
        converted[i] = hf;
        if (o->bfloat16) {
            int64_t n = hf_gpt2_hf_elements(t);
            uint16_t *narrow = malloc(sizeof(uint16_t) * (size_t)n);
            CHECK(narrow, "out of memory");
            for (int64_t e = 0; e < n; e++) narrow[e] = safetensors_float_to_bf16(hf[e]);
            free(hf);
            converted[i] = narrow;
        }
        if (safetensors_writer_add(writer, t->hf, o->bfloat16 ? SAFETENSORS_BF16 : SAFETENSORS_F32,
                                   t->ndim, t->hf_shape, converted[i], err, sizeof err))
            FATAL("%s", err);
    }
    checkpoint_reader_close(&reader);

    if (!convert_is_folder(o->output) && mkdir(o->output, 0777) != 0)
        user_error("%s: cannot create the folder: %s", o->output, strerror(errno));
    /* config first to a .tmp, then the model (atomic), then the config into place */
    write_config_tmp(config_path, &m, epsilon, o->bfloat16);
    if (safetensors_writer_write(writer, model_path, err, sizeof err)) {
        unlink(config_tmp);
        user_error("%s", err);
    }
    if (rename(config_tmp, config_path) != 0) {
        unlink(config_tmp);
        user_error("cannot rename %s to %s: %s", config_tmp, config_path, strerror(errno));
    }
    printf("> %s: %s -> %s: %lld layers, hidden %lld, %lld heads, vocab %lld (%lld padding rows "
           "dropped), %s, %s\n", program_name, path, o->output, (long long)m.num_layers,
           (long long)m.hidden, (long long)m.heads, (long long)m.vocab,
           (long long)(m.padded_vocab - m.vocab), m.untied ? "untied lm_head" : "tied embeddings",
           o->bfloat16 ? "bfloat16" : "float32");
    safetensors_writer_free(writer);
    for (int i = 0; i < count; i++) free(converted[i]);
    free(converted);
    free(list);
}

/* ---- Hugging Face -> ours ------------------------------------------------------------------ */
/* HF buffers that are not parameters: the causal mask and its fill value (older exports) */
static int is_ignored_buffer(const char *name) {
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
           (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

static const char *config_summary(const hf_source *s, const hf_gpt2_config *c, char *buffer, size_t size) {
    snprintf(buffer, size, "%s says n_layer %lld, n_embd %lld, n_head %lld, n_inner %lld, "
             "vocab_size %lld, n_positions %lld", s->config_path, (long long)c->n_layer,
             (long long)c->n_embd, (long long)c->n_head, (long long)c->n_inner,
             (long long)c->vocab_size, (long long)c->n_positions);
    return buffer;
}

static void import_from_hf(const options *o) {
    char err[error_max];
    hf_source s;
    hf_source_open(o->input, &s);
    const int bert = hf_config_is_bert(s.config_path);
    if (o->model_type[0] && bert != !strcmp(o->model_type, "BERT"))
        user_error("--model-type %s, but %s describes a %s", o->model_type, s.config_path,
                   bert ? "BERT (model_type megatron-bert or bert)" : "GPT-family model");
    if (bert) {
        bert_import_from_hf(&s, o->input, o->save, o->vocab_divisible_by, o->overwrite);
        hf_source_close(&s);
        return;
    }
    const char *shared = hf_config_shared_expert_key(s.config_path);
    if (shared)
        user_error("%s: \"%s\": DeepSeek's shared experts are not supported by the Hugging Face import (its "
                   "multi-head latent attention is not built); MixtralForCausalLM and Qwen2MoeForCausalLM are",
                   s.config_path, shared);
    if (hf_config_is_t5(s.config_path)) {
        t5_import_from_hf(&s, o->input, o->save, o->vocab_divisible_by, o->overwrite);
        hf_source_close(&s);
        return;
    }
    if (hf_config_is_llama(s.config_path)) {
        llama_import_from_hf(&s, o->input, o->save, o->vocab_divisible_by, o->overwrite);
        hf_source_close(&s);
        return;
    }
    hf_gpt2_config c;
    if (hf_gpt2_config_read(s.config_path, &c, err, sizeof err)) user_error("%s", err);
    gpt2_dims m = {
        .num_layers = c.n_layer, .hidden = c.n_embd, .heads = c.n_head,
        .head_dim = c.n_embd / c.n_head, .ffn_hidden = c.n_inner, .positions = c.n_positions,
        .vocab = c.vocab_size,
        .padded_vocab = (c.vocab_size + o->vocab_divisible_by - 1) / o->vocab_divisible_by *
                        o->vocab_divisible_by,
    };
    /* validate everything before writing: shapes and dtypes of every parameter, no strangers */
    const safetensors_file *wte_file;
    int64_t wte_shape[2] = {m.vocab, m.hidden};
    char summary[path_max + 256];
    config_summary(&s, &c, summary, sizeof summary);
    const safetensors_tensor *wte = hf_source_checked(&s, "transformer.wte.weight", 2, wte_shape, summary, &wte_file);
    m.untied = hf_source_lm_head_untied(&s, m.vocab, m.hidden, wte, wte_file, summary);
    if (m.untied && c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says tie_word_embeddings, but lm_head.weight differs from "
                "wte.weight: importing it as an untied output layer\n", program_name, s.config_path);
    if (!m.untied && !c.tie_word_embeddings)
        fprintf(stderr, "%s: note: %s says the embeddings are untied, but there is no distinct "
                "lm_head.weight: importing them tied\n", program_name, s.config_path);
    int count;
    hf_gpt2_tensor *list = hf_gpt2_tensor_list(&m, &count);
    const safetensors_tensor **sources = calloc((size_t)count, sizeof *sources);
    const safetensors_file **source_files = calloc((size_t)count, sizeof *source_files);
    CHECK(sources && source_files, "out of memory");
    for (int i = 0; i < count; i++)
        sources[i] = hf_source_checked(&s, list[i].hf, list[i].ndim, list[i].hf_shape, summary, &source_files[i]);
    for (int f = 0; f < s.num_files; f++)
        for (int i = 0; i < s.files[f].num_tensors; i++)
            if (!s.used[f][i] && !is_ignored_buffer(s.files[f].tensors[i].name))
                user_error("%s: tensor '%s' is not a parameter of the GPT-2 that %s describes "
                           "(n_layer %lld); is this a GPT2LMHeadModel or GPT2Model export?",
                           s.files[f].path, s.files[f].tensors[i].name, s.config_path,
                           (long long)c.n_layer);

    checkpoint_names release;
    checkpoint_writer *w = convert_release_writer(o->save, o->overwrite, &release);
    checkpoint_write_int_arg(w, "num_layers", m.num_layers);
    checkpoint_write_int_arg(w, "hidden_size", m.hidden);
    checkpoint_write_int_arg(w, "num_attention_heads", m.heads);
    checkpoint_write_int_arg(w, "kv_channels", m.head_dim);
    checkpoint_write_int_arg(w, "ffn_hidden_size", m.ffn_hidden);
    checkpoint_write_int_arg(w, "padded_vocab_size", m.padded_vocab);
    checkpoint_write_int_arg(w, "vocab_size", m.vocab);
    checkpoint_write_int_arg(w, "make_vocab_size_divisible_by", o->vocab_divisible_by);
    checkpoint_write_int_arg(w, "max_position_embeddings", m.positions);
    checkpoint_write_int_arg(w, "seq_length", m.positions);
    checkpoint_write_int_arg(w, "untie_embeddings_and_output_weights", m.untied);
    checkpoint_write_double_arg(w, "layernorm_epsilon", c.layer_norm_epsilon);
    checkpoint_write_string_arg(w, "tokenizer_type", "GPT2BPETokenizer");
    checkpoint_write_int_arg(w, "tensor_model_parallel_size", 1);
    checkpoint_write_int_arg(w, "pipeline_model_parallel_size", 1);
    checkpoint_write_int_arg(w, "data_parallel_size", 1);
    checkpoint_write_int_arg(w, "use_distributed_optimizer", 0);
    for (int i = 0; i < count; i++) {
        float *hf = hf_source_read_float32(source_files[i], sources[i]);
        float *ours = malloc(sizeof(float) * (size_t)hf_gpt2_our_elements(&list[i]));
        CHECK(ours, "out of memory converting %s", list[i].hf);
        hf_gpt2_from_hf(&list[i], &m, hf, ours);
        checkpoint_writer_write_tensor(w, list[i].ours, list[i].ndim, list[i].our_shape, ours);
        free(hf);
        free(ours);
    }
    convert_release_commit(w);
    printf("> %s: %s -> %s: %lld layers, hidden %lld, %lld heads, vocab %lld padded to %lld, %s "
           "(%d tensors from %d file%s)\n", program_name, o->input, release.file,
           (long long)m.num_layers, (long long)m.hidden, (long long)m.heads, (long long)m.vocab,
           (long long)m.padded_vocab, m.untied ? "untied output layer" : "tied embeddings", count,
           s.num_files, s.num_files == 1 ? "" : "s");
    free(sources);
    free(source_files);
    free(list);
    hf_source_close(&s);
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    program_name = "convert_checkpoint";
    hdf5_errors_setup(0); /* MTC_HDF5_DEBUG=1 prints HDF5's error stacks */
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    options o = parse_options(argc, argv);
    if (world_size != 1) user_error("runs as one process, not %d (mpiexec -n 1 or directly)", world_size);
    if (o.verify[0]) verify_only(&o);
    else if (o.to_hf) export_to_hf(&o);
    else import_from_hf(&o);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
