/* args.c: pretrain_gpt's flags (see args.h): Megatron-LM's names in one table for the option
 * engine (app/core/options.h), which parses them, checks each value and prints --help; this file
 * adds the defaults that derive from other flags and the checks that involve several flags. */
#include "config.h"

#include "app/training/args.h"
#include "app/core/error.h"
#include "app/core/options.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(field) OPTION_AT(args, field)

static const option_spec specs[] = {
    {"num-layers", "network size", OPTION_INT, AT(num_layers), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "number of transformer layers"},
    {"hidden-size", "network size", OPTION_INT, AT(hidden_size), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "transformer hidden size"},
    {"num-attention-heads", "network size", OPTION_INT, AT(num_attention_heads), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "number of attention heads"},
    {"ffn-hidden-size", "network size", OPTION_INT, AT(ffn_hidden_size), .range = "[1, inf)", .help = "MLP hidden size (default 4 * hidden size)"},
    {"kv-channels", "network size", OPTION_INT, AT(kv_channels), .range = "[1, inf)", .help = "projection size per head (default hidden size / heads)"},
    {"seq-length", "network size", OPTION_INT, AT(seq_length), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "sequence length in tokens"},
    {"max-position-embeddings", "network size", OPTION_INT, AT(max_position_embeddings), .range = "[1, inf)", .help = "learned position embeddings (default seq length)"},
    {"vocab-size", "network size", OPTION_INT, AT(vocab_size), .range = "[1, inf)", .help = "vocabulary size (mock data / NullTokenizer)"},
    {"make-vocab-size-divisible-by", "network size", OPTION_INT, AT(make_vocab_size_divisible_by), "128", .range = "[1, inf)", .help = "pad the vocabulary to a multiple of this"},
    {"layernorm-epsilon", "network size", OPTION_FLOAT, AT(layernorm_epsilon), "1e-5", .range = "(0, inf)", .help = "layer norm epsilon"},
    {"untie-embeddings-and-output-weights", "network size", OPTION_FLAG, AT(untie_embeddings_and_output_weights), .help = "separate output layer instead of the tied word embeddings"},

    {"hidden-dropout", "regularization", OPTION_FLOAT, AT(hidden_dropout), "0.1", .range = "[0, 1)", .help = "dropout on the transformer hidden state"},
    {"attention-dropout", "regularization", OPTION_FLOAT, AT(attention_dropout), "0.1", .range = "[0, 1)", .help = "dropout on the attention probabilities"},
    {"weight-decay", "regularization", OPTION_FLOAT, AT(weight_decay), "0.01", .range = "[0, inf)", .help = "decoupled weight decay (not on biases and norms)"},
    {"clip-grad", "regularization", OPTION_FLOAT, AT(clip_grad), "1.0", .range = "[0, inf)", .help = "clip gradients to this global L2 norm (0 disables)"},
    {"adam-beta1", "regularization", OPTION_FLOAT, AT(adam_beta1), "0.9", .range = "[0, 1)", .help = "Adam beta1"},
    {"adam-beta2", "regularization", OPTION_FLOAT, AT(adam_beta2), "0.999", .range = "[0, 1)", .help = "Adam beta2"},
    {"adam-eps", "regularization", OPTION_FLOAT, AT(adam_eps), "1e-8", .range = "(0, inf)", .help = "Adam epsilon"},

    {"micro-batch-size", "training", OPTION_INT, AT(micro_batch_size), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "samples per micro-batch per data-parallel rank"},
    {"global-batch-size", "training", OPTION_INT, AT(global_batch_size), .range = "[1, inf)", .help = "samples per iteration (default micro batch * data-parallel size)"},
    {"train-iters", "training", OPTION_INT64, AT(train_iters), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "iterations to train"},

    {"seed", "initialization", OPTION_UINT64, AT(seed), "1234", .help = "random seed (initialization, dropout, data order)"},
    {"init-method-std", "initialization", OPTION_FLOAT, AT(init_method_std), "0.02", .range = "(0, inf)", .help = "standard deviation of the normal initialization"},

    {"lr", "learning rate", OPTION_FLOAT, AT(lr), .range = "[0, inf)", .flags = OPTION_REQUIRED, .help = "peak learning rate"},
    {"min-lr", "learning rate", OPTION_FLOAT, AT(min_lr), "0.0", .help = "learning rate floor after decay"},
    {"lr-decay-style", "learning rate", OPTION_CHOICE, AT(lr_decay_style), "linear", .choices = "constant|linear|cosine", .help = "decay shape after warm-up"},
    {"lr-warmup-iters", "learning rate", OPTION_INT64, AT(lr_warmup_iters), "0", .range = "[0, inf)", .help = "linear warm-up iterations"},
    {"lr-warmup-fraction", "learning rate", OPTION_FLOAT, AT(lr_warmup_fraction), .range = "[0, 1]", .help = "warm-up as a fraction of --lr-decay-iters"},
    {"lr-decay-iters", "learning rate", OPTION_INT64, AT(lr_decay_iters), .range = "[1, inf)", .help = "iterations to decay over (default train iters)"},

    {"eval-interval", "validation", OPTION_INT64, AT(eval_interval), "1000", .range = "[1, inf)", .help = "evaluate on the validation split every N iterations"},
    {"eval-iters", "validation", OPTION_INT64, AT(eval_iters), "100", .range = "[0, inf)", .help = "iterations (global batches) per evaluation"},

    {"mock-data", "data and dataloader", OPTION_FLAG, AT(mock_data), .help = "deterministic synthetic tokens from the seed"},
    {"data-path", "data and dataloader", OPTION_LIST, AT(data_path), .metavar = "[W] PREFIX ...", .help = "corpus prefix(es), optionally weighted: PREFIX or W1 PREFIX1 W2 PREFIX2 ... (PREFIX.h5 or PREFIX.bin/.idx)"},
    {"split", "data and dataloader", OPTION_STRING, AT(split), "969, 30, 1", .metavar = "A,B,C", .help = "train, validation, test proportions of the documents"},
    {"data-cache-path", "data and dataloader", OPTION_STRING, AT(data_cache_path), .help = "directory for the built dataset indices"},
    {"tokenizer-type", "data and dataloader", OPTION_CHOICE, AT(tokenizer_type), .choices = "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer", .help = "tokenizer of the corpus (gives the vocabulary size)"},
    {"vocab-file", "data and dataloader", OPTION_STRING, AT(vocab_file), .help = "vocabulary (vocab.json for GPT-2, vocab.txt for WordPiece)"},
    {"merge-file", "data and dataloader", OPTION_STRING, AT(merge_file), .help = "BPE merges (merges.txt)"},

    {"save", "checkpointing", OPTION_STRING, AT(save), .help = "directory to save checkpoints in (one parallel-HDF5 file each)"},
    {"load", "checkpointing", OPTION_STRING, AT(load), .help = "directory to load the latest checkpoint from (resharded to this run's layout)"},
    {"save-interval", "checkpointing", OPTION_INT64, AT(save_interval), "0", .range = "[0, inf)", .help = "save a checkpoint every N iterations (and always at the end)"},
    {"exit-interval", "checkpointing", OPTION_INT64, AT(exit_interval), "0", .range = "[0, inf)", .help = "save (with --save) and exit when the iteration is a multiple of N"},
    {"finetune", "checkpointing", OPTION_FLAG, AT(finetune), .help = "load model weights only: iteration 0, fresh optimizer and RNG"},
    {"no-load-optim", "checkpointing", OPTION_FLAG, AT(no_load_optim), .help = "do not load the optimizer state"},
    {"no-load-rng", "checkpointing", OPTION_FLAG, AT(no_load_rng), .help = "do not load the RNG state (keep this run's --seed for dropout)"},
    {"no-save-optim", "checkpointing", OPTION_FLAG, AT(no_save_optim), .help = "do not save the optimizer state"},
    {"hdf5-debug", "checkpointing", OPTION_FLAG, AT(hdf5_debug), .help = "print HDF5's own error stack when an HDF5 call fails (default: one line naming the file, the call and the reason; not a Megatron flag)"},
    {"no-verify-checksums", "checkpointing", OPTION_FLAG, AT(no_verify_checksums), .help = "skip checking checkpoint tensors and corpus token ranges against their checksums (not a Megatron flag)"},
    {"ckpt-collective-io", "checkpointing", OPTION_FLAG, AT(ckpt_collective_io), .help = "move tensor data with MPI-IO collective buffering (default: each rank writes its own pieces independently)"},
    {"exit-signal-handler", "checkpointing", OPTION_FLAG, AT(exit_signal_handler), .help = "on SIGTERM (or SIGUSR1/SIGUSR2) save a checkpoint and exit cleanly"},

    {"log-interval", "logging", OPTION_INT64, AT(log_interval), "100", .range = "[1, inf)", .help = "print the iteration line every N iterations"},
    {"metrics-file", "logging", OPTION_STRING, AT(metrics_file), .help = "also write each logged iteration as a JSON line here"},
    {"papi-events", "logging", OPTION_STRING, AT(papi_events), .metavar = "EV1,EV2,...", .help = "count these PAPI events per phase (data, forward, backward, grad_reduce, optimizer, checkpoint), summed over ranks, into --metrics-file and a table at the end; 'default': PAPI_TOT_INS,PAPI_TOT_CYC,PAPI_L2_TCM,PAPI_L3_TCM"},

    {"tensor-model-parallel-size", "distributed and run time", OPTION_INT, AT(tensor_model_parallel_size), "1", .range = "[1, inf)", .help = "tensor-parallel ranks"},
    {"pipeline-model-parallel-size", "distributed and run time", OPTION_INT, AT(pipeline_model_parallel_size), "1", .range = "[1, inf)", .help = "pipeline stages"},
    {"sequence-parallel", "distributed and run time", OPTION_FLAG, AT(sequence_parallel), .help = "shard layer norms and dropout over the sequence inside the tensor-parallel group"},
    {"num-layers-per-virtual-pipeline-stage", "distributed and run time", OPTION_INT, AT(num_layers_per_virtual_pipeline_stage), .help = "layers per virtual stage (interleaved 1F1B schedule)"},
    {"virtual-pipeline-model-parallel-size", "distributed and run time", OPTION_INT, AT(virtual_pipeline_model_parallel_size), .help = "model chunks per pipeline stage (interleaved 1F1B schedule)"},
    {"use-distributed-optimizer", "distributed and run time", OPTION_FLAG, AT(use_distributed_optimizer), .help = "shard optimizer state over data-parallel ranks (ZeRO-1)"},
    {"overlap-grad-reduce", "distributed and run time", OPTION_FLAG, AT(overlap_grad_reduce), .help = "reduce a gradient bucket as soon as its gradients are complete"},
    {"overlap-param-gather", "distributed and run time", OPTION_FLAG, AT(overlap_param_gather), .help = "gather updated parameters while the next forward runs (distributed optimizer)"},
    {"ddp-bucket-size", "distributed and run time", OPTION_INT64, AT(ddp_bucket_size), .range = "[1, inf)", .help = "gradient bucket size in elements (default max(40M, 1M x data-parallel size))"},
    {"parallel-order", "distributed and run time", OPTION_STRING, AT(parallel_order), "tp-cp-ep-dp-pp", .metavar = "ORDER", .help = "order of the parallel dimensions over ranks, fastest first"},
    {"deterministic-mode", "distributed and run time", OPTION_FLAG, AT(deterministic_mode), .help = "bitwise reproducible: fixed-order reductions, no atomics"},
    {"device", "distributed and run time", OPTION_CHOICE, AT(device), "auto", .choices = "auto|cpu|cuda", .help = "kernel backend (auto: cuda when a GPU is present, else cpu)"},
    {"peak-tflops", "logging", OPTION_FLOAT, AT(peak_tflops), .range = "[0, inf)", .help = "peak dense TFLOP/s per device for MFU (default: recognized from the GPU name)"},
    {"dump-parameters", "logging", OPTION_STRING, AT(dump_parameters), .help = "write every parameter in its global shape to PATH at the end (raw float32 with names)"},
};
#define NUM_FLAGS ((int)(sizeof specs / sizeof specs[0]))

static const option_table table = {
    .usage = "[--args-file PATH] [--FLAG VALUE ...]",
    .description = "Trains a GPT model with Megatron-LM's flags. Flags may also come from an args file\n"
                   "(one flag per line, '#' starts a comment); the command line overrides the file.\n",
    .specs = specs,
    .count = NUM_FLAGS,
};

/* what the cross-flag checks need: which flags were given, and where a message goes */
typedef struct check_state {
    const unsigned char *given;
    char *err;
    size_t errlen;
} check_state;

static int given(const check_state *st, const char *name) {
    return options_given(&table, st->given, name);
}

/* check the parallel layout against the model shape; derive data-parallel size and virtual stages */
static int validate_parallel(check_state *st, args *a, int world_size) {
    int tp = a->tensor_model_parallel_size, pp = a->pipeline_model_parallel_size;
    if (world_size % (tp * pp) != 0)
        return error_format(st->err, st->errlen, "world size %d is not divisible by --tensor-model-parallel-size %d x --pipeline-model-parallel-size %d (= %d)",
                    world_size, tp, pp, tp * pp);
    a->data_parallel_size = world_size / (tp * pp);
    if (a->num_attention_heads % tp != 0)
        return error_format(st->err, st->errlen, "--num-attention-heads %d is not divisible by --tensor-model-parallel-size %d",
                    a->num_attention_heads, tp);
    if (a->ffn_hidden_size % tp != 0)
        return error_format(st->err, st->errlen, "--ffn-hidden-size %d is not divisible by --tensor-model-parallel-size %d",
                    a->ffn_hidden_size, tp);
    if (a->num_layers % pp != 0)
        return error_format(st->err, st->errlen, "--num-layers %d is not divisible by --pipeline-model-parallel-size %d",
                    a->num_layers, pp);
    args_set_vocab_size(a, a->vocab_size);
    if (tp == 1) a->sequence_parallel = 0; /* as Megatron: nothing to shard */
    if (a->sequence_parallel && a->seq_length % tp != 0)
        return error_format(st->err, st->errlen, "--seq-length %d is not divisible by --tensor-model-parallel-size %d (needed by --sequence-parallel)",
                    a->seq_length, tp);

    int layers_per_stage = a->num_layers / pp;
    if (given(st, "num-layers-per-virtual-pipeline-stage") && given(st, "virtual-pipeline-model-parallel-size"))
        return error_format(st->err, st->errlen, "--num-layers-per-virtual-pipeline-stage and --virtual-pipeline-model-parallel-size cannot both be given");
    if (given(st, "num-layers-per-virtual-pipeline-stage")) {
        int per = a->num_layers_per_virtual_pipeline_stage;
        if (per <= 0 || layers_per_stage % per != 0)
            return error_format(st->err, st->errlen, "--num-layers-per-virtual-pipeline-stage %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        per, layers_per_stage, a->num_layers, pp);
        a->virtual_pipeline_model_parallel_size = layers_per_stage / per;
    } else if (given(st, "virtual-pipeline-model-parallel-size")) {
        int vp = a->virtual_pipeline_model_parallel_size;
        if (vp <= 0 || layers_per_stage % vp != 0)
            return error_format(st->err, st->errlen, "--virtual-pipeline-model-parallel-size %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        vp, layers_per_stage, a->num_layers, pp);
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage / vp;
    } else {
        a->virtual_pipeline_model_parallel_size = 1;
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage;
    }
    if (a->virtual_pipeline_model_parallel_size > 1 && pp == 1)
        return error_format(st->err, st->errlen, "the interleaved schedule (virtual pipeline stages) needs --pipeline-model-parallel-size > 1");

    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        return error_format(st->err, st->errlen, "--overlap-param-gather needs --use-distributed-optimizer");
    if (!given(st, "ddp-bucket-size")) {
        int64_t floor = (int64_t)1000000 * a->data_parallel_size;
        a->ddp_bucket_size = floor > 40000000 ? floor : 40000000;
    }

    /* the order must name each of tp, cp, ep, dp, pp once */
    const char *dims[] = {"tp", "cp", "ep", "dp", "pp"};
    char order[sizeof a->parallel_order];
    snprintf(order, sizeof order, "%s", a->parallel_order);
    int seen[5] = {0}, count = 0;
    for (char *save = NULL, *tok = strtok_r(order, "-", &save); tok; tok = strtok_r(NULL, "-", &save), count++) {
        int k = 0;
        while (k < 5 && strcmp(tok, dims[k]) != 0) k++;
        if (k == 5 || seen[k]++)
            return error_format(st->err, st->errlen, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    }
    if (count != 5)
        return error_format(st->err, st->errlen, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    return 0;
}

/* fill derived values and check the combinations (each value alone was checked against the
 * table); every message names the flags involved */
static int validate(check_state *st, args *a, int world_size) {
    if (!a->mock_data && !a->data_path[0]) return error_format(st->err, st->errlen, "no data source: pass --data-path PREFIX (or --mock-data)");
    if (a->mock_data && a->data_path[0]) return error_format(st->err, st->errlen, "--mock-data and --data-path cannot both be given");
    if (a->mock_data && !given(st, "vocab-size")) return error_format(st->err, st->errlen, "--vocab-size is required with --mock-data");
    if (a->data_path[0] && !a->tokenizer_type[0] && !given(st, "vocab-size"))
        return error_format(st->err, st->errlen, "--data-path needs --tokenizer-type (with --vocab-file/--merge-file) or --vocab-size");
    if (!strcmp(a->tokenizer_type, "GPT2BPETokenizer") && (!a->vocab_file[0] || !a->merge_file[0]))
        return error_format(st->err, st->errlen, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (!strncmp(a->tokenizer_type, "BertWordPiece", 13) && !a->vocab_file[0])
        return error_format(st->err, st->errlen, "--tokenizer-type %s needs --vocab-file", a->tokenizer_type);

    if (a->save_interval > 0 && !a->save[0]) return error_format(st->err, st->errlen, "--save-interval needs --save DIR");
    if (a->exit_signal_handler && !a->save[0]) return error_format(st->err, st->errlen, "--exit-signal-handler needs --save DIR (where to save on the signal)");
    if ((a->finetune || a->no_load_optim || a->no_load_rng) && !a->load[0])
        return error_format(st->err, st->errlen, "--%s needs --load DIR", a->finetune ? "finetune" : a->no_load_optim ? "no-load-optim" : "no-load-rng");
    if (a->no_save_optim && !a->save[0]) return error_format(st->err, st->errlen, "--no-save-optim needs --save DIR");

    if (!given(st, "kv-channels")) {
        if (a->hidden_size % a->num_attention_heads != 0)
            return error_format(st->err, st->errlen, "--hidden-size %d is not divisible by --num-attention-heads %d (or give --kv-channels)",
                        a->hidden_size, a->num_attention_heads);
        a->kv_channels = a->hidden_size / a->num_attention_heads;
    }
    if (!given(st, "ffn-hidden-size")) a->ffn_hidden_size = 4 * a->hidden_size;
    if (!given(st, "max-position-embeddings")) a->max_position_embeddings = a->seq_length;
    if (a->seq_length > a->max_position_embeddings)
        return error_format(st->err, st->errlen, "--seq-length %d exceeds --max-position-embeddings %d", a->seq_length,
                    a->max_position_embeddings);

    if (a->min_lr < 0 || a->min_lr > a->lr)
        return error_format(st->err, st->errlen, "--min-lr %g must be between 0 and --lr %g", a->min_lr, a->lr);
    if (!given(st, "lr-decay-iters")) a->lr_decay_iters = a->train_iters;
    if (given(st, "lr-warmup-fraction") && given(st, "lr-warmup-iters"))
        return error_format(st->err, st->errlen, "--lr-warmup-fraction and --lr-warmup-iters cannot both be given");
    if (given(st, "lr-warmup-fraction"))
        a->lr_warmup_iters = (int64_t)(a->lr_warmup_fraction * (double)a->lr_decay_iters);
    else
        a->lr_warmup_fraction = -1;
    if (a->lr_warmup_iters > a->lr_decay_iters)
        return error_format(st->err, st->errlen, "--lr-warmup-iters %lld exceeds --lr-decay-iters %lld",
                    (long long)a->lr_warmup_iters, (long long)a->lr_decay_iters);

    a->world_size = world_size;
    if (validate_parallel(st, a, world_size)) return -1;
    int per_step = a->micro_batch_size * a->data_parallel_size;
    if (!given(st, "global-batch-size")) a->global_batch_size = per_step;
    if (a->global_batch_size % per_step != 0)
        return error_format(st->err, st->errlen, "--global-batch-size %d is not a multiple of --micro-batch-size %d x data-parallel size %d (= %d)",
                    a->global_batch_size, a->micro_batch_size, a->data_parallel_size, per_step);
    a->num_micro_batches = a->global_batch_size / per_step;
    if (a->virtual_pipeline_model_parallel_size > 1 && a->num_micro_batches % a->pipeline_model_parallel_size != 0)
        return error_format(st->err, st->errlen, "the interleaved schedule needs the number of micro-batches (%d = --global-batch-size %d / (--micro-batch-size %d x data-parallel size %d)) to be a multiple of --pipeline-model-parallel-size %d",
                    a->num_micro_batches, a->global_batch_size, a->micro_batch_size, a->data_parallel_size,
                    a->pipeline_model_parallel_size);

#ifndef HAVE_CUDA
    if (strcmp(a->device, "cuda") == 0)
        return error_format(st->err, st->errlen, "--device cuda: this build has no CUDA backend (configure found no CUDA toolkit); use --device cpu");
#endif
    return 0;
}

void args_set_vocab_size(args *a, int vocab_size) {
    int multiple = a->make_vocab_size_divisible_by * a->tensor_model_parallel_size;
    a->vocab_size = vocab_size;
    a->padded_vocab_size = (vocab_size + multiple - 1) / multiple * multiple;
}

int args_parse_checked(args *a, int argc, char **argv, int world_size, char *err, size_t errlen) {
    unsigned char flags_given[NUM_FLAGS];
    memset(a, 0, sizeof *a);
    int rc = options_parse(&table, a, flags_given, argc, argv, err, errlen);
    if (rc) return rc;
    check_state st = {flags_given, err, errlen};
    return validate(&st, a, world_size);
}

void args_parse(args *a, int argc, char **argv, int world_size) {
    char err[2048];
    int rc = args_parse_checked(a, argc, argv, world_size, err, sizeof err);
    if (rc == OPTIONS_HELP) {
        int rank;
        CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        if (rank == 0) args_print_help();
        MPI_Finalize();
        exit(0);
    }
    if (rc) user_error("%s", err);
}

void args_print(const args *a) {
    printf("------------------------ arguments ------------------------\n");
    for (int i = 0; i < NUM_FLAGS; i++) {
        char value[ARGS_PATH_MAX + 8];
        options_format_value(&specs[i], a, value, sizeof value);
        char name[64];
        snprintf(name, sizeof name, "%s", specs[i].name);
        for (char *c = name; *c; c++) if (*c == '-') *c = '_';
        printf("  %s %.*s %s\n", name, (int)(48 - strlen(name)), "................................................", value);
    }
    printf("  %s %.*s %d\n", "data_parallel_size", 48 - 18, "................................................", a->data_parallel_size);
    printf("  %s %.*s %d\n", "padded_vocab_size", 48 - 17, "................................................", a->padded_vocab_size);
    printf("  %s %.*s %d\n", "num_micro_batches", 48 - 17, "................................................", a->num_micro_batches);
    printf("-------------------- end of arguments ---------------------\n");
}

void args_print_help(void) { options_print_help(&table); }
