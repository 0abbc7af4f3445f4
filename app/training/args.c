/* args.c: table-driven parsing of Megatron-LM's flags (see args.h). One table lists every flag
 * with its group, type, default and help; parsing, --help and the start-up dump all read it. */
#include "config.h"

#include "app/training/args.h"
#include "app/core/error.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ARG_INT, ARG_INT64, ARG_U64, ARG_FLOAT, ARG_STRING, ARG_BOOL, ARG_LIST } arg_type;

typedef struct flag_spec {
    const char *name;      /* without the leading "--" */
    const char *group;
    arg_type type;
    size_t offset;         /* into struct args */
    size_t size;           /* for strings: buffer size */
    const char *default_value; /* NULL: unset (0 / empty / derived later) */
    const char *choices;   /* "a|b|c" for strings with fixed values */
    const char *help;
} flag_spec;

#define F(name, group, type, field, def, choices, help) \
    {name, group, type, offsetof(args, field), sizeof(((args *)0)->field), def, choices, help}

static const flag_spec flags[] = {
    F("num-layers", "network size", ARG_INT, num_layers, NULL, NULL, "number of transformer layers"),
    F("hidden-size", "network size", ARG_INT, hidden_size, NULL, NULL, "transformer hidden size"),
    F("num-attention-heads", "network size", ARG_INT, num_attention_heads, NULL, NULL, "number of attention heads"),
    F("ffn-hidden-size", "network size", ARG_INT, ffn_hidden_size, NULL, NULL, "MLP hidden size (default 4 * hidden size)"),
    F("kv-channels", "network size", ARG_INT, kv_channels, NULL, NULL, "projection size per head (default hidden size / heads)"),
    F("seq-length", "network size", ARG_INT, seq_length, NULL, NULL, "sequence length in tokens"),
    F("max-position-embeddings", "network size", ARG_INT, max_position_embeddings, NULL, NULL, "learned position embeddings (default seq length)"),
    F("vocab-size", "network size", ARG_INT, vocab_size, NULL, NULL, "vocabulary size (mock data / NullTokenizer)"),
    F("make-vocab-size-divisible-by", "network size", ARG_INT, make_vocab_size_divisible_by, "128", NULL, "pad the vocabulary to a multiple of this"),
    F("layernorm-epsilon", "network size", ARG_FLOAT, layernorm_epsilon, "1e-5", NULL, "layer norm epsilon"),
    F("untie-embeddings-and-output-weights", "network size", ARG_BOOL, untie_embeddings_and_output_weights, NULL, NULL, "separate output layer instead of the tied word embeddings"),

    F("hidden-dropout", "regularization", ARG_FLOAT, hidden_dropout, "0.1", NULL, "dropout on the transformer hidden state"),
    F("attention-dropout", "regularization", ARG_FLOAT, attention_dropout, "0.1", NULL, "dropout on the attention probabilities"),
    F("weight-decay", "regularization", ARG_FLOAT, weight_decay, "0.01", NULL, "decoupled weight decay (not on biases and norms)"),
    F("clip-grad", "regularization", ARG_FLOAT, clip_grad, "1.0", NULL, "clip gradients to this global L2 norm (0 disables)"),
    F("adam-beta1", "regularization", ARG_FLOAT, adam_beta1, "0.9", NULL, "Adam beta1"),
    F("adam-beta2", "regularization", ARG_FLOAT, adam_beta2, "0.999", NULL, "Adam beta2"),
    F("adam-eps", "regularization", ARG_FLOAT, adam_eps, "1e-8", NULL, "Adam epsilon"),

    F("micro-batch-size", "training", ARG_INT, micro_batch_size, NULL, NULL, "samples per micro-batch per data-parallel rank"),
    F("global-batch-size", "training", ARG_INT, global_batch_size, NULL, NULL, "samples per iteration (default micro batch * data-parallel size)"),
    F("train-iters", "training", ARG_INT64, train_iters, NULL, NULL, "iterations to train"),

    F("seed", "initialization", ARG_U64, seed, "1234", NULL, "random seed (initialization, dropout, data order)"),
    F("init-method-std", "initialization", ARG_FLOAT, init_method_std, "0.02", NULL, "standard deviation of the normal initialization"),

    F("lr", "learning rate", ARG_FLOAT, lr, NULL, NULL, "peak learning rate"),
    F("min-lr", "learning rate", ARG_FLOAT, min_lr, "0.0", NULL, "learning rate floor after decay"),
    F("lr-decay-style", "learning rate", ARG_STRING, lr_decay_style, "linear", "constant|linear|cosine", "decay shape after warm-up"),
    F("lr-warmup-iters", "learning rate", ARG_INT64, lr_warmup_iters, "0", NULL, "linear warm-up iterations"),
    F("lr-warmup-fraction", "learning rate", ARG_FLOAT, lr_warmup_fraction, "-1", NULL, "warm-up as a fraction of --lr-decay-iters"),
    F("lr-decay-iters", "learning rate", ARG_INT64, lr_decay_iters, NULL, NULL, "iterations to decay over (default train iters)"),

    F("eval-interval", "validation", ARG_INT64, eval_interval, "1000", NULL, "evaluate on the validation split every N iterations"),
    F("eval-iters", "validation", ARG_INT64, eval_iters, "100", NULL, "iterations (global batches) per evaluation"),

    F("mock-data", "data and dataloader", ARG_BOOL, mock_data, NULL, NULL, "deterministic synthetic tokens from the seed"),
    F("data-path", "data and dataloader", ARG_LIST, data_path, NULL, NULL, "corpus prefix(es), optionally weighted: PREFIX or W1 PREFIX1 W2 PREFIX2 ... (PREFIX.h5 or PREFIX.bin/.idx)"),
    F("split", "data and dataloader", ARG_STRING, split, "969, 30, 1", NULL, "train, validation, test proportions of the documents"),
    F("data-cache-path", "data and dataloader", ARG_STRING, data_cache_path, "", NULL, "directory for the built dataset indices"),
    F("tokenizer-type", "data and dataloader", ARG_STRING, tokenizer_type, "", "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer", "tokenizer of the corpus (gives the vocabulary size)"),
    F("vocab-file", "data and dataloader", ARG_STRING, vocab_file, "", NULL, "vocabulary (vocab.json for GPT-2, vocab.txt for WordPiece)"),
    F("merge-file", "data and dataloader", ARG_STRING, merge_file, "", NULL, "BPE merges (merges.txt)"),

    F("save", "checkpointing", ARG_STRING, save, "", NULL, "directory to save checkpoints in (one parallel-HDF5 file each)"),
    F("load", "checkpointing", ARG_STRING, load, "", NULL, "directory to load the latest checkpoint from (resharded to this run's layout)"),
    F("save-interval", "checkpointing", ARG_INT64, save_interval, "0", NULL, "save a checkpoint every N iterations (and always at the end)"),
    F("exit-interval", "checkpointing", ARG_INT64, exit_interval, "0", NULL, "save (with --save) and exit when the iteration is a multiple of N"),
    F("finetune", "checkpointing", ARG_BOOL, finetune, NULL, NULL, "load model weights only: iteration 0, fresh optimizer and RNG"),
    F("no-load-optim", "checkpointing", ARG_BOOL, no_load_optim, NULL, NULL, "do not load the optimizer state"),
    F("no-load-rng", "checkpointing", ARG_BOOL, no_load_rng, NULL, NULL, "do not load the RNG state (keep this run's --seed for dropout)"),
    F("no-save-optim", "checkpointing", ARG_BOOL, no_save_optim, NULL, NULL, "do not save the optimizer state"),
    F("ckpt-collective-io", "checkpointing", ARG_BOOL, ckpt_collective_io, NULL, NULL, "move tensor data with MPI-IO collective buffering (default: each rank writes its own pieces independently)"),
    F("exit-signal-handler", "checkpointing", ARG_BOOL, exit_signal_handler, NULL, NULL, "on SIGTERM (or SIGUSR1/SIGUSR2) save a checkpoint and exit cleanly"),

    F("log-interval", "logging", ARG_INT64, log_interval, "100", NULL, "print the iteration line every N iterations"),
    F("metrics-file", "logging", ARG_STRING, metrics_file, "", NULL, "also write each logged iteration as a JSON line here"),

    F("tensor-model-parallel-size", "distributed and run time", ARG_INT, tensor_model_parallel_size, "1", NULL, "tensor-parallel ranks"),
    F("pipeline-model-parallel-size", "distributed and run time", ARG_INT, pipeline_model_parallel_size, "1", NULL, "pipeline stages"),
    F("sequence-parallel", "distributed and run time", ARG_BOOL, sequence_parallel, NULL, NULL, "shard layer norms and dropout over the sequence inside the tensor-parallel group"),
    F("num-layers-per-virtual-pipeline-stage", "distributed and run time", ARG_INT, num_layers_per_virtual_pipeline_stage, NULL, NULL, "layers per virtual stage (interleaved 1F1B schedule)"),
    F("virtual-pipeline-model-parallel-size", "distributed and run time", ARG_INT, virtual_pipeline_model_parallel_size, NULL, NULL, "model chunks per pipeline stage (interleaved 1F1B schedule)"),
    F("use-distributed-optimizer", "distributed and run time", ARG_BOOL, use_distributed_optimizer, NULL, NULL, "shard optimizer state over data-parallel ranks (ZeRO-1)"),
    F("overlap-grad-reduce", "distributed and run time", ARG_BOOL, overlap_grad_reduce, NULL, NULL, "reduce a gradient bucket as soon as its gradients are complete"),
    F("overlap-param-gather", "distributed and run time", ARG_BOOL, overlap_param_gather, NULL, NULL, "gather updated parameters while the next forward runs (distributed optimizer)"),
    F("ddp-bucket-size", "distributed and run time", ARG_INT64, ddp_bucket_size, NULL, NULL, "gradient bucket size in elements (default max(40M, 1M x data-parallel size))"),
    F("parallel-order", "distributed and run time", ARG_STRING, parallel_order, "tp-cp-ep-dp-pp", NULL, "order of the parallel dimensions over ranks, fastest first"),
    F("deterministic-mode", "distributed and run time", ARG_BOOL, deterministic_mode, NULL, NULL, "bitwise reproducible: fixed-order reductions, no atomics"),
    F("device", "distributed and run time", ARG_STRING, device, "auto", "auto|cpu|cuda", "kernel backend (auto: cuda when a GPU is present, else cpu)"),
    F("peak-tflops", "logging", ARG_FLOAT, peak_tflops, "0", NULL, "peak dense TFLOP/s per device for MFU (default: recognized from the GPU name)"),
    F("dump-parameters", "logging", ARG_STRING, dump_parameters, "", NULL, "write every parameter in its global shape to PATH at the end (raw float32 with names)"),
};
#define NUM_FLAGS ((int)(sizeof(flags) / sizeof(flags[0])))

typedef struct parse_state {
    char *err;
    int errlen;
    unsigned char given[NUM_FLAGS]; /* set explicitly by file or command line */
} parse_state;

static int fail(parse_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parse_state *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, (size_t)st->errlen, fmt, ap);
    va_end(ap);
    return 1;
}

static const flag_spec *find_flag(const char *name, int *index) {
    for (int i = 0; i < NUM_FLAGS; i++)
        if (strcmp(flags[i].name, name) == 0) { *index = i; return &flags[i]; }
    return NULL;
}

static int in_choices(const char *value, const char *choices) {
    size_t n = strlen(value);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, value, n) == 0) return 1;
        if (!bar) break;
        c = bar + 1;
    }
    return 0;
}

/* store value (text) into the field of spec; `where` names the source for messages */
static int set_value(parse_state *st, args *a, const flag_spec *spec, const char *value,
                     const char *where) {
    char *field = (char *)a + spec->offset, *end = NULL;
    errno = 0;
    switch (spec->type) {
    case ARG_INT: {
        long v = strtol(value, &end, 10);
        if (*value == '\0' || *end != '\0' || errno || v < INT_MIN || v > INT_MAX)
            return fail(st, "%s--%s expects an integer, got '%s'", where, spec->name, value);
        *(int *)field = (int)v;
        break;
    }
    case ARG_INT64: {
        long long v = strtoll(value, &end, 10);
        if (*value == '\0' || *end != '\0' || errno)
            return fail(st, "%s--%s expects an integer, got '%s'", where, spec->name, value);
        *(int64_t *)field = v;
        break;
    }
    case ARG_U64: {
        unsigned long long v = strtoull(value, &end, 10);
        if (*value == '\0' || *value == '-' || *end != '\0' || errno)
            return fail(st, "%s--%s expects a non-negative integer, got '%s'", where, spec->name, value);
        *(uint64_t *)field = v;
        break;
    }
    case ARG_FLOAT: {
        double v = strtod(value, &end);
        if (*value == '\0' || *end != '\0' || errno || !isfinite(v))
            return fail(st, "%s--%s expects a number, got '%s'", where, spec->name, value);
        *(float *)field = (float)v;
        break;
    }
    case ARG_STRING:
        if (spec->choices && !in_choices(value, spec->choices))
            return fail(st, "%s--%s must be one of %s, got '%s'", where, spec->name, spec->choices, value);
        if (strlen(value) >= spec->size)
            return fail(st, "%s--%s value is too long (%zu characters, at most %zu)", where,
                        spec->name, strlen(value), spec->size - 1);
        strcpy(field, value);
        break;
    case ARG_BOOL:
        *(int *)field = 1;
        break;
    case ARG_LIST:
        if (strlen(value) >= spec->size)
            return fail(st, "%s--%s value is too long", where, spec->name);
        strcpy(field, value);
        break;
    }
    return 0;
}

static void set_defaults(args *a) {
    memset(a, 0, sizeof(*a));
    parse_state st = {.err = NULL, .errlen = 0};
    char dummy[8];
    st.err = dummy;
    st.errlen = sizeof dummy;
    for (int i = 0; i < NUM_FLAGS; i++)
        if (flags[i].default_value) set_value(&st, a, &flags[i], flags[i].default_value, "");
}

/* parse a token list (argv-like); `where_of(i)` describes token i's origin for messages */
static int parse_tokens(parse_state *st, args *a, int count, char **tokens, const char *file,
                        const int *lines, int only_args_file) {
    for (int i = 0; i < count; i++) {
        char where[ARGS_PATH_MAX + 32] = "";
        if (file) snprintf(where, sizeof where, "%s:%d: ", file, lines[i]);
        const char *tok = tokens[i];
        if (strncmp(tok, "--", 2) != 0)
            return fail(st, "%sunexpected argument '%s' (flags start with --)", where, tok);
        char name[128];
        const char *eq = strchr(tok + 2, '=');
        size_t len = eq ? (size_t)(eq - tok - 2) : strlen(tok + 2);
        if (len >= sizeof name) return fail(st, "%sunknown flag '%s'", where, tok);
        memcpy(name, tok + 2, len);
        name[len] = '\0';
        if (strcmp(name, "args-file") == 0) {
            if (file) return fail(st, "%s--args-file cannot appear inside an args file", where);
            if (!eq) i++; /* the value was handled by the caller */
            continue;
        }
        if (strcmp(name, "help") == 0) continue;
        int index = -1;
        const flag_spec *spec = find_flag(name, &index);
        if (!spec) return fail(st, "%sunknown flag '--%s' (see --help)", where, name);
        const char *value = NULL;
        char list[4096];
        if (spec->type == ARG_BOOL) {
            if (eq) return fail(st, "%s--%s takes no value", where, name);
        } else if (spec->type == ARG_LIST && !eq) {
            /* every following word up to the next flag */
            list[0] = '\0';
            while (i + 1 < count && strncmp(tokens[i + 1], "--", 2) != 0) {
                size_t used = strlen(list);
                if (used + strlen(tokens[i + 1]) + 2 > sizeof list)
                    return fail(st, "%s--%s has too many values", where, name);
                snprintf(list + used, sizeof list - used, "%s%s", used ? " " : "", tokens[++i]);
            }
            if (!list[0]) return fail(st, "%s--%s is missing its value", where, name);
            value = list;
        } else if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= count || strncmp(tokens[i + 1], "--", 2) == 0 ||
                (file && lines[i + 1] != lines[i]))
                return fail(st, "%s--%s is missing its value", where, name);
            value = tokens[++i];
        }
        if (only_args_file) continue;
        if (set_value(st, a, spec, value, where)) return 1;
        st->given[index] = 1;
    }
    return 0;
}

/* read an args file into tokens (split on whitespace; '#' starts a comment) */
static int parse_args_file(parse_state *st, args *a, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return fail(st, "cannot open args file '%s': %s", path, strerror(errno));
    int cap = 64, count = 0, line_no = 0, rc = 0;
    char **tokens = malloc(sizeof(char *) * (size_t)cap);
    int *lines = malloc(sizeof(int) * (size_t)cap);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line_no++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (count == cap) {
                cap *= 2;
                tokens = realloc(tokens, sizeof(char *) * (size_t)cap);
                lines = realloc(lines, sizeof(int) * (size_t)cap);
            }
            tokens[count] = strdup(t);
            lines[count++] = line_no;
        }
    }
    fclose(f);
    rc = parse_tokens(st, a, count, tokens, path, lines, 0);
    for (int i = 0; i < count; i++) free(tokens[i]);
    free(tokens);
    free(lines);
    return rc;
}

static int given(const parse_state *st, const char *name) {
    int index = -1;
    return find_flag(name, &index) && st->given[index];
}

/* fill derived values and check the combination; every message names the flags involved */
/* check the parallel layout against the model shape; derive data-parallel size and virtual stages */
static int validate_parallel(parse_state *st, args *a, int world_size) {
    int tp = a->tensor_model_parallel_size, pp = a->pipeline_model_parallel_size;
    if (tp <= 0) return fail(st, "--tensor-model-parallel-size must be positive, got %d", tp);
    if (pp <= 0) return fail(st, "--pipeline-model-parallel-size must be positive, got %d", pp);
    if (world_size % (tp * pp) != 0)
        return fail(st, "world size %d is not divisible by --tensor-model-parallel-size %d x --pipeline-model-parallel-size %d (= %d)",
                    world_size, tp, pp, tp * pp);
    a->data_parallel_size = world_size / (tp * pp);
    if (a->num_attention_heads % tp != 0)
        return fail(st, "--num-attention-heads %d is not divisible by --tensor-model-parallel-size %d",
                    a->num_attention_heads, tp);
    if (a->ffn_hidden_size % tp != 0)
        return fail(st, "--ffn-hidden-size %d is not divisible by --tensor-model-parallel-size %d",
                    a->ffn_hidden_size, tp);
    if (a->num_layers % pp != 0)
        return fail(st, "--num-layers %d is not divisible by --pipeline-model-parallel-size %d",
                    a->num_layers, pp);
    args_set_vocab_size(a, a->vocab_size);
    if (tp == 1) a->sequence_parallel = 0; /* as Megatron: nothing to shard */
    if (a->sequence_parallel && a->seq_length % tp != 0)
        return fail(st, "--seq-length %d is not divisible by --tensor-model-parallel-size %d (needed by --sequence-parallel)",
                    a->seq_length, tp);

    int layers_per_stage = a->num_layers / pp;
    if (given(st, "num-layers-per-virtual-pipeline-stage") && given(st, "virtual-pipeline-model-parallel-size"))
        return fail(st, "--num-layers-per-virtual-pipeline-stage and --virtual-pipeline-model-parallel-size cannot both be given");
    if (given(st, "num-layers-per-virtual-pipeline-stage")) {
        int per = a->num_layers_per_virtual_pipeline_stage;
        if (per <= 0 || layers_per_stage % per != 0)
            return fail(st, "--num-layers-per-virtual-pipeline-stage %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        per, layers_per_stage, a->num_layers, pp);
        a->virtual_pipeline_model_parallel_size = layers_per_stage / per;
    } else if (given(st, "virtual-pipeline-model-parallel-size")) {
        int vp = a->virtual_pipeline_model_parallel_size;
        if (vp <= 0 || layers_per_stage % vp != 0)
            return fail(st, "--virtual-pipeline-model-parallel-size %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        vp, layers_per_stage, a->num_layers, pp);
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage / vp;
    } else {
        a->virtual_pipeline_model_parallel_size = 1;
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage;
    }
    if (a->virtual_pipeline_model_parallel_size > 1 && pp == 1)
        return fail(st, "the interleaved schedule (virtual pipeline stages) needs --pipeline-model-parallel-size > 1");

    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        return fail(st, "--overlap-param-gather needs --use-distributed-optimizer");
    if (!given(st, "ddp-bucket-size")) {
        int64_t floor = (int64_t)1000000 * a->data_parallel_size;
        a->ddp_bucket_size = floor > 40000000 ? floor : 40000000;
    }
    if (a->ddp_bucket_size <= 0)
        return fail(st, "--ddp-bucket-size must be positive, got %lld", (long long)a->ddp_bucket_size);

    /* the order must name each of tp, cp, ep, dp, pp once */
    const char *dims[] = {"tp", "cp", "ep", "dp", "pp"};
    char order[sizeof a->parallel_order];
    snprintf(order, sizeof order, "%s", a->parallel_order);
    int seen[5] = {0}, count = 0;
    for (char *save = NULL, *tok = strtok_r(order, "-", &save); tok; tok = strtok_r(NULL, "-", &save), count++) {
        int k = 0;
        while (k < 5 && strcmp(tok, dims[k]) != 0) k++;
        if (k == 5 || seen[k]++)
            return fail(st, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    }
    if (count != 5)
        return fail(st, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    return 0;
}

static int validate(parse_state *st, args *a, int world_size) {
    static const char *required[] = {"num-layers", "hidden-size", "num-attention-heads",
                                     "seq-length", "micro-batch-size", "train-iters", "lr"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!given(st, required[i])) return fail(st, "--%s is required", required[i]);
    if (!a->mock_data && !a->data_path[0]) return fail(st, "no data source: pass --data-path PREFIX (or --mock-data)");
    if (a->mock_data && a->data_path[0]) return fail(st, "--mock-data and --data-path cannot both be given");
    if (a->mock_data && !given(st, "vocab-size")) return fail(st, "--vocab-size is required with --mock-data");
    if (a->data_path[0] && !a->tokenizer_type[0] && !given(st, "vocab-size"))
        return fail(st, "--data-path needs --tokenizer-type (with --vocab-file/--merge-file) or --vocab-size");
    if (!strcmp(a->tokenizer_type, "GPT2BPETokenizer") && (!a->vocab_file[0] || !a->merge_file[0]))
        return fail(st, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (!strncmp(a->tokenizer_type, "BertWordPiece", 13) && !a->vocab_file[0])
        return fail(st, "--tokenizer-type %s needs --vocab-file", a->tokenizer_type);

    struct { const char *name; long long value; } positive[] = {
        {"num-layers", a->num_layers}, {"hidden-size", a->hidden_size},
        {"num-attention-heads", a->num_attention_heads}, {"seq-length", a->seq_length},
        {"micro-batch-size", a->micro_batch_size}, {"train-iters", a->train_iters},
        {"make-vocab-size-divisible-by", a->make_vocab_size_divisible_by},
        {"log-interval", a->log_interval}, {"eval-interval", a->eval_interval},
    };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].value <= 0)
            return fail(st, "--%s must be positive, got %lld", positive[i].name, positive[i].value);
    if (given(st, "vocab-size") && a->vocab_size <= 0)
        return fail(st, "--vocab-size must be positive, got %d", a->vocab_size);
    if (a->eval_iters < 0) return fail(st, "--eval-iters must not be negative, got %lld", (long long)a->eval_iters);
    if (a->save_interval < 0) return fail(st, "--save-interval must not be negative, got %lld", (long long)a->save_interval);
    if (a->exit_interval < 0) return fail(st, "--exit-interval must not be negative, got %lld", (long long)a->exit_interval);
    if (a->save_interval > 0 && !a->save[0]) return fail(st, "--save-interval needs --save DIR");
    if (a->exit_signal_handler && !a->save[0]) return fail(st, "--exit-signal-handler needs --save DIR (where to save on the signal)");
    if ((a->finetune || a->no_load_optim || a->no_load_rng) && !a->load[0])
        return fail(st, "--%s needs --load DIR", a->finetune ? "finetune" : a->no_load_optim ? "no-load-optim" : "no-load-rng");
    if (a->no_save_optim && !a->save[0]) return fail(st, "--no-save-optim needs --save DIR");

    if (!given(st, "kv-channels")) {
        if (a->hidden_size % a->num_attention_heads != 0)
            return fail(st, "--hidden-size %d is not divisible by --num-attention-heads %d (or give --kv-channels)",
                        a->hidden_size, a->num_attention_heads);
        a->kv_channels = a->hidden_size / a->num_attention_heads;
    } else if (a->kv_channels <= 0) {
        return fail(st, "--kv-channels must be positive, got %d", a->kv_channels);
    }
    if (!given(st, "ffn-hidden-size")) a->ffn_hidden_size = 4 * a->hidden_size;
    else if (a->ffn_hidden_size <= 0) return fail(st, "--ffn-hidden-size must be positive, got %d", a->ffn_hidden_size);
    if (!given(st, "max-position-embeddings")) a->max_position_embeddings = a->seq_length;
    if (a->seq_length > a->max_position_embeddings)
        return fail(st, "--seq-length %d exceeds --max-position-embeddings %d", a->seq_length,
                    a->max_position_embeddings);

    if (a->hidden_dropout < 0 || a->hidden_dropout >= 1)
        return fail(st, "--hidden-dropout must be in [0, 1), got %g", a->hidden_dropout);
    if (a->attention_dropout < 0 || a->attention_dropout >= 1)
        return fail(st, "--attention-dropout must be in [0, 1), got %g", a->attention_dropout);
    if (a->adam_beta1 < 0 || a->adam_beta1 >= 1) return fail(st, "--adam-beta1 must be in [0, 1), got %g", a->adam_beta1);
    if (a->adam_beta2 < 0 || a->adam_beta2 >= 1) return fail(st, "--adam-beta2 must be in [0, 1), got %g", a->adam_beta2);
    if (a->adam_eps <= 0) return fail(st, "--adam-eps must be positive, got %g", a->adam_eps);
    if (a->weight_decay < 0) return fail(st, "--weight-decay must not be negative, got %g", a->weight_decay);
    if (a->clip_grad < 0) return fail(st, "--clip-grad must not be negative, got %g", a->clip_grad);
    if (a->init_method_std <= 0) return fail(st, "--init-method-std must be positive, got %g", a->init_method_std);
    if (a->layernorm_epsilon <= 0) return fail(st, "--layernorm-epsilon must be positive, got %g", a->layernorm_epsilon);

    if (a->lr < 0) return fail(st, "--lr must not be negative, got %g", a->lr);
    if (a->min_lr < 0 || a->min_lr > a->lr)
        return fail(st, "--min-lr %g must be between 0 and --lr %g", a->min_lr, a->lr);
    if (!given(st, "lr-decay-iters")) a->lr_decay_iters = a->train_iters;
    if (a->lr_decay_iters <= 0) return fail(st, "--lr-decay-iters must be positive, got %lld", (long long)a->lr_decay_iters);
    if (given(st, "lr-warmup-fraction") && given(st, "lr-warmup-iters"))
        return fail(st, "--lr-warmup-fraction and --lr-warmup-iters cannot both be given");
    if (given(st, "lr-warmup-fraction")) {
        if (a->lr_warmup_fraction < 0 || a->lr_warmup_fraction > 1)
            return fail(st, "--lr-warmup-fraction must be in [0, 1], got %g", a->lr_warmup_fraction);
        a->lr_warmup_iters = (int64_t)(a->lr_warmup_fraction * (double)a->lr_decay_iters);
    }
    if (a->lr_warmup_iters < 0) return fail(st, "--lr-warmup-iters must not be negative, got %lld", (long long)a->lr_warmup_iters);
    if (a->lr_warmup_iters > a->lr_decay_iters)
        return fail(st, "--lr-warmup-iters %lld exceeds --lr-decay-iters %lld",
                    (long long)a->lr_warmup_iters, (long long)a->lr_decay_iters);

    a->world_size = world_size;
    if (validate_parallel(st, a, world_size)) return 1;
    int per_step = a->micro_batch_size * a->data_parallel_size;
    if (!given(st, "global-batch-size")) a->global_batch_size = per_step;
    if (a->global_batch_size <= 0)
        return fail(st, "--global-batch-size must be positive, got %d", a->global_batch_size);
    if (a->global_batch_size % per_step != 0)
        return fail(st, "--global-batch-size %d is not a multiple of --micro-batch-size %d x data-parallel size %d (= %d)",
                    a->global_batch_size, a->micro_batch_size, a->data_parallel_size, per_step);
    a->num_micro_batches = a->global_batch_size / per_step;
    if (a->virtual_pipeline_model_parallel_size > 1 && a->num_micro_batches % a->pipeline_model_parallel_size != 0)
        return fail(st, "the interleaved schedule needs the number of micro-batches (%d = --global-batch-size %d / (--micro-batch-size %d x data-parallel size %d)) to be a multiple of --pipeline-model-parallel-size %d",
                    a->num_micro_batches, a->global_batch_size, a->micro_batch_size, a->data_parallel_size,
                    a->pipeline_model_parallel_size);

    if (a->peak_tflops < 0) return fail(st, "--peak-tflops must not be negative, got %g", a->peak_tflops);
#ifndef HAVE_CUDA
    if (strcmp(a->device, "cuda") == 0)
        return fail(st, "--device cuda: this build has no CUDA backend (configure found no CUDA toolkit); use --device cpu");
#endif
    return 0;
}

void args_set_vocab_size(args *a, int vocab_size) {
    int multiple = a->make_vocab_size_divisible_by * a->tensor_model_parallel_size;
    a->vocab_size = vocab_size;
    a->padded_vocab_size = (vocab_size + multiple - 1) / multiple * multiple;
}

int args_parse_checked(args *a, int argc, char **argv, int world_size, char *err, int errlen) {
    parse_state st;
    memset(&st, 0, sizeof st);
    st.err = err;
    st.errlen = errlen;
    set_defaults(a);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            args_print_help();
            return -1;
        }
    }
    /* first the args file(s), then the command line so that it overrides */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (strcmp(argv[i], "--args-file") == 0) {
            if (i + 1 >= argc) return fail(&st, "--args-file is missing its value");
            path = argv[++i];
        } else if (strncmp(argv[i], "--args-file=", 12) == 0) {
            path = argv[i] + 12;
        }
        if (path && parse_args_file(&st, a, path)) return 1;
    }
    if (parse_tokens(&st, a, argc - 1, argv + 1, NULL, NULL, 0)) return 1;
    return validate(&st, a, world_size);
}

void args_parse(args *a, int argc, char **argv, int world_size) {
    char err[2048];
    int rc = args_parse_checked(a, argc, argv, world_size, err, sizeof err);
    if (rc < 0) {
        MPI_Finalize();
        exit(0);
    }
    if (rc > 0) user_error("%s", err);
}

static void format_value(const args *a, const flag_spec *spec, char *out, size_t len) {
    const char *field = (const char *)a + spec->offset;
    switch (spec->type) {
    case ARG_INT: snprintf(out, len, "%d", *(const int *)field); break;
    case ARG_INT64: snprintf(out, len, "%lld", (long long)*(const int64_t *)field); break;
    case ARG_U64: snprintf(out, len, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case ARG_FLOAT: snprintf(out, len, "%g", *(const float *)field); break;
    case ARG_STRING:
    case ARG_LIST: snprintf(out, len, "%s", field[0] ? field : "None"); break;
    case ARG_BOOL: snprintf(out, len, "%s", *(const int *)field ? "True" : "False"); break;
    }
}

void args_print(const args *a) {
    printf("------------------------ arguments ------------------------\n");
    for (int i = 0; i < NUM_FLAGS; i++) {
        char value[ARGS_PATH_MAX + 8];
        format_value(a, &flags[i], value, sizeof value);
        char name[64];
        snprintf(name, sizeof name, "%s", flags[i].name);
        for (char *c = name; *c; c++) if (*c == '-') *c = '_';
        printf("  %s %.*s %s\n", name, (int)(48 - strlen(name)), "................................................", value);
    }
    printf("  %s %.*s %d\n", "data_parallel_size", 48 - 18, "................................................", a->data_parallel_size);
    printf("  %s %.*s %d\n", "padded_vocab_size", 48 - 17, "................................................", a->padded_vocab_size);
    printf("  %s %.*s %d\n", "num_micro_batches", 48 - 17, "................................................", a->num_micro_batches);
    printf("-------------------- end of arguments ---------------------\n");
}

void args_print_help(void) {
    printf("usage: %s [--args-file PATH] [--FLAG VALUE ...]\n\n"
           "Trains a GPT model with Megatron-LM's flags. Flags may also come from an args file\n"
           "(one flag per line, '#' starts a comment); the command line overrides the file.\n",
           program_name);
    const char *group = NULL;
    for (int i = 0; i < NUM_FLAGS; i++) {
        if (!group || strcmp(group, flags[i].group) != 0) {
            group = flags[i].group;
            printf("\n%s:\n", group);
        }
        char left[96];
        if (flags[i].type == ARG_BOOL) snprintf(left, sizeof left, "--%s", flags[i].name);
        else if (flags[i].choices) snprintf(left, sizeof left, "--%s {%s}", flags[i].name, flags[i].choices);
        else snprintf(left, sizeof left, "--%s %s", flags[i].name,
                      flags[i].type == ARG_LIST ? "[W] PREFIX ..." : flags[i].type == ARG_STRING ? "PATH"
                      : flags[i].type == ARG_FLOAT ? "X" : "N");
        printf("  %-46s %s", left, flags[i].help);
        if (flags[i].default_value && flags[i].type != ARG_BOOL && flags[i].default_value[0] &&
            strcmp(flags[i].default_value, "-1") != 0)
            printf(" (default %s)", flags[i].default_value);
        printf("\n");
    }
    printf("\nother:\n  %-46s %s\n  %-46s %s\n", "--args-file PATH", "read flags from PATH first",
           "--help", "show this help and exit");
}
