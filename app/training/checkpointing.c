/* checkpointing.c: see checkpointing.h. */
#include "app/training/checkpointing.h"
#include "app/checkpoint/async_checkpoint.h"
#include "app/checkpoint/dist_checkpoint.h"
#include "app/core/error.h"
#include "app/model/fp8_linear.h"
#include "app/model/gpt_sharded_state.h"
#include "app/optim/optimizer_sharded_state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the tensors of the training state: the model's fp32 weights (the parameters, or the
 * optimizer's masters in mixed precision), with_fp8 the fp8 linear layers' scaling state
 * (nothing without --fp8-format) and, with_moments, Adam's moments */
static void training_sharded_state(const trainer *t, int with_moments, int with_fp8, sharded_state *state) {
    gpt_sharded_state(&t->model, t->topo.dp_cp->rank, state);
    if (with_fp8) fp8_sharded_state(&t->model, t->topo.dp_cp->rank, state);
    optimizer_sharded_state(&t->opt, &t->model, t->topo.dp_cp->rank, t->args->use_distributed_optimizer,
                            with_moments, state);
}

/* Loading into an fp8 run: whether the checkpoint holds the scaling state of this run's fp8
 * linear layers (then it is loaded); a checkpoint without any (a bf16 run's) leaves the fresh
 * state (scales 1, empty histories) with a note; one holding only some of them (other
 * --first-last-layers-bf16 counts) is refused, naming the first missing. Loading an fp8
 * checkpoint into a run without fp8: a note that its scaling state is not used. */
static int fp8_state_to_load(trainer *t, dist_checkpoint *c) {
    const args *a = t->args;
    int rank0 = t->topo.world_rank == 0;
    char *stored_format = checkpoint_get_string(&c->file, "/args", "fp8");
    int stored_fp8 = stored_format && stored_format[0];
    if (!a->fp8_format[0]) {
        if (stored_fp8 && rank0)
            printf("> the checkpoint was trained with --fp8-format %s: its fp8 scaling state (the linear layers' "
                   "_extra_state) is not used, as this run trains without fp8\n", stored_format);
        free(stored_format);
        return 0;
    }
    free(stored_format);
    sharded_state fp8_only = {0};
    fp8_sharded_state(&t->model, t->topo.dp_cp->rank, &fp8_only);
    int present = 0, first_missing = -1;
    for (int i = 0; i < fp8_only.num_tensors; i++) {
        int64_t rows, cols;
        if (checkpoint_tensor_shape(&c->file, fp8_only.tensors[i].name, &rows, &cols) == 0) present++;
        else if (first_missing < 0) first_missing = i;
    }
    if (present > 0 && first_missing >= 0)
        user_error("%s holds the fp8 scaling state of some linear layers but not %s (saved with other "
                   "--first-last-layers-bf16 layer counts?)", c->names.file, fp8_only.tensors[first_missing].name);
    if (present == 0 && fp8_only.num_tensors > 0 && rank0)
        printf("> the checkpoint holds no fp8 scaling state (trained without --fp8-format): the fp8 linear layers "
               "start from fresh scaling state (scales 1, empty amax histories)\n");
    sharded_state_free(&fp8_only);
    return present > 0;
}

/* finetune_bert's --pretrained-checkpoint: the model tensors the file holds are loaded, the others
 * (the task head; the tokentype embeddings and pooler of a --bert-no-binary-head checkpoint) keep
 * their initialization, each named once, as Megatron's Classification.load_state_dict warns */
static void keep_tensors_in_file(dist_checkpoint *c, sharded_state *state, int rank0) {
    int *new_index = malloc(sizeof(int) * (size_t)(state->num_tensors ? state->num_tensors : 1));
    CHECK(new_index, "out of host memory");
    int kept = 0;
    for (int i = 0; i < state->num_tensors; i++) {
        int64_t rows, cols;
        if (checkpoint_tensor_shape(&c->file, state->tensors[i].name, &rows, &cols) != 0) {
            new_index[i] = -1;
            if (rank0)
                printf("***WARNING*** could not find %s in the pretrained checkpoint %s, initializing to random\n",
                       state->tensors[i].name, c->names.file);
            continue;
        }
        new_index[i] = kept;
        state->tensors[kept++] = state->tensors[i];
    }
    state->num_tensors = kept;
    int shards = 0;
    for (int s = 0; s < state->num_shards; s++) {
        if (new_index[state->shards[s].tensor] < 0) continue;
        state->shards[shards] = state->shards[s];
        state->shards[shards++].tensor = new_index[state->shards[s].tensor];
    }
    state->num_shards = shards;
    free(new_index);
    if (rank0) fflush(stdout);
}

/* ---- save ---- */

/* a float flag as the user wrote it (0.01, not 0.009999999776 from the float's bits) */
static double as_given(float value) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", value);
    return strtod(text, NULL);
}

static void put_args(checkpoint_file *f, const trainer *t) {
    const args *a = t->args;
    struct { const char *name; int64_t value; } ints[] = {
        {"num_layers", a->num_layers}, {"hidden_size", a->hidden_size},
        {"num_attention_heads", a->num_attention_heads}, {"kv_channels", a->kv_channels},
        {"ffn_hidden_size", a->ffn_hidden_size}, {"padded_vocab_size", a->padded_vocab_size},
        {"vocab_size", a->vocab_size}, {"max_position_embeddings", a->max_position_embeddings},
        {"seq_length", a->seq_length},
        {"untie_embeddings_and_output_weights", a->untie_embeddings_and_output_weights},
        {"tensor_model_parallel_size", t->topo.tp_size}, {"pipeline_model_parallel_size", t->topo.pp_size},
        {"data_parallel_size", t->topo.dp_size}, {"use_distributed_optimizer", a->use_distributed_optimizer},
        /* the Llama family's options, under Megatron's argument names */
        {"num_query_groups", a->num_query_groups}, {"group_query_attention", a->group_query_attention},
        {"swiglu", a->swiglu}, {"add_bias_linear", !a->disable_bias_linear}, {"add_qkv_bias", a->add_qkv_bias},
        {"bias_gelu_fusion", a->bias_gelu_fusion},  /* the MLP's GeLU: tanh, else exact (erf) */
        {"rotary_interleaved", a->rotary_interleaved}, {"use_rope_scaling", a->use_rope_scaling},
        {"apply_layernorm_1p", a->apply_layernorm_1p},
        /* T5's relative position bias (the flags' values, as Megatron's args keep them) */
        {"relative_attention_num_buckets", a->relative_attention_num_buckets},
        {"relative_attention_max_distance", a->relative_attention_max_distance},
        /* mixture of experts (0: a dense model) */
        {"num_experts", a->num_experts}, {"moe_ffn_hidden_size", a->num_experts ? a->moe_ffn_hidden_size : 0},
        {"moe_router_topk", a->num_experts ? a->moe_router_topk : 0},
        {"moe_shared_expert_intermediate_size", a->num_experts ? a->moe_shared_expert_intermediate_size : 0},
        {"moe_shared_expert_gate", a->num_experts ? a->moe_shared_expert_gate : 0},
        {"moe_router_enable_expert_bias", a->num_experts ? a->moe_router_enable_expert_bias : 0},
        {"moe_router_pre_softmax", a->num_experts ? a->moe_router_pre_softmax : 0},
        {"moe_router_num_groups", a->num_experts ? a->moe_router_num_groups : 0},
        {"moe_router_group_topk", a->num_experts ? a->moe_router_group_topk : 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) checkpoint_put_int(f, "/args", ints[i].name, ints[i].value);
    if (a->t5) {  /* Megatron's T5 arguments (num_layers and seq_length above are the encoder's) */
        checkpoint_put_int(f, "/args", "encoder_num_layers", a->num_layers);
        checkpoint_put_int(f, "/args", "decoder_num_layers", a->decoder_num_layers);
        checkpoint_put_int(f, "/args", "encoder_seq_length", a->seq_length);
        checkpoint_put_int(f, "/args", "decoder_seq_length", a->decoder_seq_length);
    }
    if (a->num_experts) {
        checkpoint_put_string(f, "/args", "moe_layer_freq", a->moe_layer_freq);
        checkpoint_put_string(f, "/args", "moe_router_score_function", a->moe_router_score_function);
        /* the routing and losses Hugging Face export checks (app/convert_llama.c); Megatron's names */
        checkpoint_put_double(f, "/args", "moe_router_topk_scaling_factor", as_given(a->moe_router_topk_scaling_factor));
        checkpoint_put_double(f, "/args", "moe_expert_capacity_factor", as_given(a->moe_expert_capacity_factor));
        checkpoint_put_double(f, "/args", "moe_aux_loss_coeff", as_given(a->moe_aux_loss_coeff));
        checkpoint_put_double(f, "/args", "moe_z_loss_coeff", as_given(a->moe_z_loss_coeff));
    }
    /* sliding-window attention as given (Megatron keeps args.window_size, a tuple, and
     * args.window_attn_skip_freq); generation reads them back (app/inference/inference_model.c) */
    if (a->window_size[0]) checkpoint_put_string(f, "/args", "window_size", a->window_size);
    if (a->window_attn_skip_freq[0]) checkpoint_put_string(f, "/args", "window_attn_skip_freq", a->window_attn_skip_freq);
    checkpoint_put_double(f, "/args", "layernorm_epsilon", a->layernorm_epsilon);
    checkpoint_put_string(f, "/args", "normalization", a->normalization);
    checkpoint_put_string(f, "/args", "position_embedding_type", a->position_embedding_type);
    checkpoint_put_double(f, "/args", "rotary_base", a->rotary_base);
    checkpoint_put_double(f, "/args", "rotary_percent", a->rotary_percent);
    /* generation reads it back (app/inference/inference_model.c) */
    checkpoint_put_int(f, "/args", "rotary_seq_len_interpolation_factor", a->rotary_seq_len_interpolation_factor);
    checkpoint_put_double(f, "/args", "rope_scaling_factor", a->rope_scaling_factor);
    checkpoint_put_double(f, "/args", "hidden_dropout", a->hidden_dropout);
    checkpoint_put_double(f, "/args", "attention_dropout", a->attention_dropout);
    checkpoint_put_string(f, "/args", "tokenizer_type", a->tokenizer_type[0] ? a->tokenizer_type : "NullTokenizer");
    /* Megatron's args.fp8 (--fp8-format; "" without): a run loading the checkpoint tells its
     * fp8 scaling state (the linear layers' _extra_state tensors) from none */
    checkpoint_put_string(f, "/args", "fp8", a->fp8_format);
    if (a->fp8_format[0]) {
        checkpoint_put_string(f, "/args", "fp8_recipe", a->fp8_recipe);
        checkpoint_put_int(f, "/args", "fp8_amax_history_len", a->fp8_amax_history_len);
    }
}

static void put_scalar_state(checkpoint_file *f, const trainer *t) {
    const args *a = t->args;
    put_args(f, t);
    checkpoint_put_int(f, "/", "consumed_valid_samples", t->consumed_valid_samples);
    checkpoint_put_int(f, "/rng", "seed", (int64_t)t->model.config.seed);
    checkpoint_put_int(f, "/lr_scheduler", "num_steps", t->iteration);
    checkpoint_put_double(f, "/lr_scheduler", "max_lr", t->lr.max_lr);
    checkpoint_put_double(f, "/lr_scheduler", "min_lr", t->lr.min_lr);
    checkpoint_put_string(f, "/lr_scheduler", "decay_style", a->lr_decay_style);
    checkpoint_put_int(f, "/lr_scheduler", "warmup_iters", t->lr.warmup_iters);
    checkpoint_put_int(f, "/lr_scheduler", "decay_iters", t->lr.decay_iters);
    checkpoint_put_int(f, "/lr_scheduler", "skipped_steps", t->lr_skipped_steps);
    /* Megatron's weight-decay schedule: constant here (start_wd = end_wd = --weight-decay) */
    checkpoint_put_double(f, "/lr_scheduler", "start_wd", t->opt.weight_decay);
    checkpoint_put_double(f, "/lr_scheduler", "end_wd", t->opt.weight_decay);
    checkpoint_put_string(f, "/lr_scheduler", "wd_incr_style", "constant");
    /* --decoupled-lr: the embedding and output layer's group, Megatron's param-group max_lr and
     * min_lr saved with the optimizer state (the rest of its schedule is the one above) */
    if (t->decoupled_lr.max_lr >= 0) {
        checkpoint_put_double(f, "/lr_scheduler", "decoupled_max_lr", t->decoupled_lr.max_lr);
        checkpoint_put_double(f, "/lr_scheduler", "decoupled_min_lr", t->decoupled_lr.min_lr);
    }
    if (!a->no_save_optim) {
        checkpoint_put_int(f, "/optimizer", "step", t->opt.step);
        /* /model holds the fp32 weights the optimizer steps on, in mixed precision too */
        checkpoint_put_int(f, "/optimizer", "master_weights_in_model", 1);
        /* Megatron's optimizer state_dict()['grad_scaler']: the dynamic scaler's state (the
         * constant one's is empty) */
        const grad_scaler *scaler = &t->opt.scaler;
        if (scaler->enabled && scaler->dynamic) {
            checkpoint_put_double(f, "/optimizer/grad_scaler", "scale", scaler->scale);
            checkpoint_put_int(f, "/optimizer/grad_scaler", "growth_tracker", scaler->growth_tracker);
            checkpoint_put_int(f, "/optimizer/grad_scaler", "hysteresis_tracker", scaler->hysteresis_tracker);
        }
    }
}

void checkpoint_check_save_dir(const trainer *t, const char *dir) {
    char err[CHECKPOINT_PATH_MAX + 256] = "";
    int failed = 0;
    if (t->topo.world_rank == 0) {
        failed = checkpoint_make_directory(dir, err, sizeof err) != 0;
        if (!failed) {
            /* create and remove a file: a read-only or full file system shows here, not at the
             * first save after hours of training */
            char probe[CHECKPOINT_PATH_MAX + 64];
            snprintf(probe, sizeof probe, "%s/.write_test.%ld", dir, (long)getpid());
            FILE *f = fopen(probe, "w");
            if (!f || fclose(f) != 0)
                failed = error_format(err, sizeof err, "cannot write in %s: %s", dir, strerror(errno)) != 0;
            if (f) unlink(probe);
        }
    }
    CHECK_MPI(MPI_Bcast(&failed, 1, MPI_INT, 0, t->topo.world.mpi));
    CHECK_MPI(MPI_Bcast(err, sizeof err, MPI_CHAR, 0, t->topo.world.mpi));
    if (failed) user_error("--save %s: %s", dir, err);
}

/* ---- asynchronous saves (--async-save) ---- */

/* the writer's state with what the log line needs of the save in flight */
typedef struct async_save_state {
    async_checkpoint writer;
    int64_t iteration;
    double blocked_seconds;
    char file[CHECKPOINT_PATH_MAX + 32];   /* checkpoint_names' file */
} async_save_state;

void checkpoint_async_setup(trainer *t) {
    if (!t->args->async_save) return;
    t->async_save = calloc(1, sizeof(async_save_state));
    CHECK(t->async_save, "out of host memory");
    async_checkpoint_init(&t->async_save->writer, t->topo.world.mpi);
}

/* rank 0's line once a save's writer has committed it */
static void report_async_save(const trainer *t) {
    const async_save_state *s = t->async_save;
    if (t->topo.world_rank != 0) return;
    double seconds = s->writer.write_seconds;
    printf("> saved checkpoint at iteration %lld to %s asynchronously: %.1f MB of tensors written in %.2f s in the "
           "background (%.2f GB/s); training was blocked %.3f s\n", (long long)s->iteration, s->file,
           (double)s->writer.bytes / 1e6, seconds, seconds > 0 ? (double)s->writer.bytes / seconds / 1e9 : 0.0,
           s->blocked_seconds);
    fflush(stdout);
}

void checkpoint_async_poll(trainer *t) {
    if (t->async_save && async_checkpoint_poll(&t->async_save->writer)) report_async_save(t);
}

void checkpoint_async_finish(trainer *t) {
    if (t->async_save && async_checkpoint_wait(&t->async_save->writer)) report_async_save(t);
}

void checkpoint_async_free(trainer *t) {
    if (!t->async_save) return;
    checkpoint_async_finish(t);
    async_checkpoint_free(&t->async_save->writer);
    free(t->async_save);
    t->async_save = NULL;
}

void checkpoint_save(trainer *t, const char *dir) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    async_save_state *async = t->async_save;
    if (async) {
        /* at most one save in flight: this one waits for the one before (Megatron warns alike) */
        checkpoint_async_poll(t);
        if (async->writer.in_flight && rank == 0) {
            printf("WARNING: Starting a checkpoint save before previous has finished. Consider increasing the "
                   "checkpoint interval.\n");
            fflush(stdout);
        }
        checkpoint_async_finish(t);
    }
    data_parallel_finish_param_gather(&t->dp);
    t->model.ops->synchronize();
    char err[CHECKPOINT_PATH_MAX + 256];
    if (rank == 0 && checkpoint_make_directory(dir, err, sizeof err) != 0) user_error_local("--save %s: %s", dir, err);
    t->comm->barrier(&t->topo.world);   /* under --distributed-timeout-minutes: a stopped rank ends the job */

    dist_checkpoint c;
    /* an asynchronous save's file lives on the writer's communicator from its creation on; the
     * attributes are written here, while no writer runs */
    MPI_Comm comm = async ? async->writer.comm : t->topo.world.mpi;
    dist_checkpoint_create(&c, dir, t->iteration, t->consumed_samples, comm, a->ckpt_collective_io);
    put_scalar_state(&c.file, t);
    sharded_state state = {0};
    training_sharded_state(t, !a->no_save_optim, 1, &state);
    if (async) {
        async_checkpoint_start(&async->writer, &c, &state, t->model.ops);
        t->last_saved_iteration = t->iteration;
        async->iteration = t->iteration;
        async->blocked_seconds = MPI_Wtime() - start;
        snprintf(async->file, sizeof async->file, "%s", c.names.file);
        if (rank == 0) {
            printf("> saving checkpoint at iteration %lld to %s asynchronously: training blocked %.3f s "
                   "(rank 0 copied %.1f MB of its state to host memory)\n", (long long)t->iteration, c.names.file,
                   async->blocked_seconds, (double)async->writer.snapshot_bytes / 1e6);
            fflush(stdout);
        }
        return;
    }
    dist_checkpoint_write(&c, &state, t->model.ops);
    sharded_state_free(&state);
    uint64_t bytes = dist_checkpoint_commit(&c);

    t->last_saved_iteration = t->iteration;
    double seconds = MPI_Wtime() - start;
    if (rank == 0) {
        printf("> saved checkpoint at iteration %lld to %s: %.1f MB of tensors in %.2f s (%.2f GB/s)\n",
               (long long)t->iteration, c.names.file, (double)bytes / 1e6, seconds, (double)bytes / seconds / 1e9);
        fflush(stdout);
    }
}

/* ---- load ---- */

/* the conflicts between a checkpoint and this run, "what = stored (this run: value)" joined by
 * ", " into one message (what does not fit is left out; count still tells that there are some) */
typedef struct conflict_list {
    char text[2048];
    size_t used;
    int count;
} conflict_list;

static void conflict_add(conflict_list *c, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void conflict_add(conflict_list *c, const char *format, ...) {
    if (c->count++ && c->used < sizeof c->text)
        c->used += (size_t)snprintf(c->text + c->used, sizeof c->text - c->used, ", ");
    if (c->used >= sizeof c->text) return;
    va_list ap;
    va_start(ap, format);
    c->used += (size_t)vsnprintf(c->text + c->used, sizeof c->text - c->used, format, ap);
    va_end(ap);
}

/* Megatron's check_checkpoint_args: the model the checkpoint was saved from is this run's,
 * every conflicting flag named at once (shapes alone cannot tell some apart: the layer count
 * with pipeline stages, the heads). Skipped with --finetune, as in Megatron. */
static void check_checkpoint_args(checkpoint_file *f, const args *a) {
    struct { const char *name, *flag; int64_t value; } model[] = {
        {"num_layers", "--num-layers", a->num_layers},
        {"hidden_size", "--hidden-size", a->hidden_size},
        {"num_attention_heads", "--num-attention-heads", a->num_attention_heads},
        {"kv_channels", "--kv-channels", a->kv_channels},
        {"ffn_hidden_size", "--ffn-hidden-size", a->ffn_hidden_size},
        {"max_position_embeddings", "--max-position-embeddings", a->max_position_embeddings},
        {"padded_vocab_size", "the padded vocabulary size (--vocab-size, --make-vocab-size-divisible-by)", a->padded_vocab_size},
        {"untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights", a->untie_embeddings_and_output_weights},
    };
    conflict_list c = {0};
    for (size_t i = 0; i < sizeof model / sizeof model[0]; i++) {
        int64_t stored;
        if (checkpoint_get_int(f, "/args", model[i].name, &stored) != 0)
            user_error("checkpoint %s lacks the attribute /args/%s", f->path, model[i].name);
        if (stored != model[i].value)
            conflict_add(&c, "%s = %lld (this run: %lld)", model[i].flag, (long long)stored, (long long)model[i].value);
    }
    /* the Llama options; a checkpoint from before them holds a GPT (multi-head, GeLU, biases) */
    struct { const char *name, *flag; int64_t value, absent; } llama[] = {
        {"num_query_groups", "--num-query-groups", a->num_query_groups, a->num_attention_heads},
        {"swiglu", "--swiglu", a->swiglu, 0},
        {"add_bias_linear", "--disable-bias-linear (add_bias_linear)", !a->disable_bias_linear, 1},
        {"add_qkv_bias", "--add-qkv-bias", a->add_qkv_bias, 0},
        {"apply_layernorm_1p", "--apply-layernorm-1p", a->apply_layernorm_1p, 0},
        {"relative_attention_num_buckets", "--relative-attention-num-buckets", a->relative_attention_num_buckets, 32},
        {"relative_attention_max_distance", "--relative-attention-max-distance", a->relative_attention_max_distance, 128},
        {"num_experts", "--num-experts", a->num_experts, 0},
        {"moe_ffn_hidden_size", "--moe-ffn-hidden-size", a->num_experts ? a->moe_ffn_hidden_size : 0, 0},
        {"moe_shared_expert_intermediate_size", "--moe-shared-expert-intermediate-size",
         a->num_experts ? a->moe_shared_expert_intermediate_size : 0, 0},
        {"moe_shared_expert_gate", "--moe-shared-expert-gate", a->num_experts ? a->moe_shared_expert_gate : 0, 0},
        {"moe_router_enable_expert_bias", "--moe-router-enable-expert-bias",
         a->num_experts ? a->moe_router_enable_expert_bias : 0, 0},
    };
    for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++) {
        int64_t stored;
        if (checkpoint_get_int(f, "/args", llama[i].name, &stored) != 0) stored = llama[i].absent;
        /* query groups: multi-head attention on both sides is no conflict, whatever the head count */
        int64_t stored_heads;
        if (i == 0 && checkpoint_get_int(f, "/args", "num_attention_heads", &stored_heads) == 0 &&
            (stored == 0 || stored == stored_heads) && a->num_query_groups == a->num_attention_heads)
            continue;
        if (stored != llama[i].value)
            conflict_add(&c, "%s = %lld (this run: %lld)", llama[i].flag, (long long)stored, (long long)llama[i].value);
    }
    /* a GeLU MLP's form (SwiGLU has none); a checkpoint from before it was recorded computed the
     * tanh form, which --use-checkpoint-args keeps */
    int64_t fusion = 1;
    checkpoint_get_int(f, "/args", "bias_gelu_fusion", &fusion);
    if (!a->swiglu && (fusion != 0) != (a->bias_gelu_fusion != 0))
        conflict_add(&c, "the MLP's GeLU = %s (bias_gelu_fusion %lld; this run: %s from %s; --use-checkpoint-args takes the checkpoint's)",
                     fusion ? "tanh approximation" : "exact erf", (long long)fusion,
                     a->bias_gelu_fusion ? "tanh approximation" : "exact erf",
                     a->bias_gelu_fusion ? "the bias-GeLU fusion" : a->disable_bias_linear ? "--disable-bias-linear" : "--no-bias-gelu-fusion");
    struct { const char *name, *flag, *value, *absent; } strings[] = {
        {"normalization", "--normalization", a->normalization, "LayerNorm"},
        {"position_embedding_type", "--position-embedding-type", a->position_embedding_type, "learned_absolute"},
    };
    int stored_rope = 0;
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        char *stored = checkpoint_get_string(f, "/args", strings[i].name);
        const char *was = stored ? stored : strings[i].absent;
        if (strcmp(was, strings[i].value) != 0) conflict_add(&c, "%s = %s (this run: %s)", strings[i].flag, was, strings[i].value);
        if (i == 1) stored_rope = !strcmp(was, "rope");
        free(stored);
    }
    /* rotary embeddings on both sides: the same frequencies (the rope scaling of Llama 3.x
     * included; Megatron's own check does not look at these, its --use-checkpoint-args takes all
     * but the scaling), as the model computes another function with others */
    if (stored_rope && !strcmp(a->position_embedding_type, "rope")) {
        int64_t interleaved = 0, scaling = 0;
        double base = 10000, percent = 1.0, factor = 8.0;
        checkpoint_get_int(f, "/args", "rotary_interleaved", &interleaved);
        checkpoint_get_int(f, "/args", "use_rope_scaling", &scaling);
        checkpoint_get_double(f, "/args", "rotary_base", &base);
        checkpoint_get_double(f, "/args", "rotary_percent", &percent);
        checkpoint_get_double(f, "/args", "rope_scaling_factor", &factor);
        if (base != (double)a->rotary_base) conflict_add(&c, "--rotary-base = %.17g (this run: %d)", base, a->rotary_base);
        if (percent != (double)a->rotary_percent)
            conflict_add(&c, "--rotary-percent = %.9g (this run: %.9g)", percent, (double)a->rotary_percent);
        if (interleaved != a->rotary_interleaved)
            conflict_add(&c, "--rotary-interleaved = %lld (this run: %d)", (long long)interleaved, a->rotary_interleaved);
        if (scaling != a->use_rope_scaling)
            conflict_add(&c, "--use-rope-scaling = %lld (this run: %d)", (long long)scaling, a->use_rope_scaling);
        else if (scaling && factor != (double)a->rope_scaling_factor)
            conflict_add(&c, "--rope-scaling-factor = %.9g (this run: %.9g)", factor, (double)a->rope_scaling_factor);
    }
    char *tokenizer = checkpoint_get_string(f, "/args", "tokenizer_type");
    const char *ours = a->tokenizer_type[0] ? a->tokenizer_type : "NullTokenizer";
    if (tokenizer && strcmp(tokenizer, ours) != 0) conflict_add(&c, "--tokenizer-type = %s (this run: %s)", tokenizer, ours);
    free(tokenizer);
    if (c.count)
        user_error("checkpoint %s was saved with arguments that conflict with this run's: %s; "
                   "pass matching flags, or --finetune to load only the weights", f->path, c.text);
}

/* a decoupled learning rate for a message: "none" without --decoupled-lr */
static const char *decoupled_text(double value, char *out, size_t cap) {
    if (value < 0) snprintf(out, cap, "none");
    else snprintf(out, cap, "%g", value);
    return out;
}

/* Megatron's OptimizerParamScheduler.load_state_dict: the learning-rate schedule stored with
 * the optimizer state must equal this run's, unless --override-opt-param-scheduler (this run's
 * flags win) or --use-checkpoint-opt_param-scheduler (the checkpoint's values are taken). The
 * --decoupled-lr group's peak and floor (Megatron keeps them as the max_lr and min_lr of its
 * optimizer param group) and the weight decay (start_wd, end_wd) follow the same rule; Megatron's
 * wd_incr_steps (--train-iters times the batch) is not compared, as a constant decay ignores it.
 * Megatron-Core itself matches saved param groups to this run's by max_lr and min_lr before
 * either flag is read, so it refuses any change of
 * --decoupled-lr/--decoupled-min-lr (or of --lr/--min-lr) even with them; here the flags have
 * the meaning Megatron's checkpointing.py gives them. */
static void load_scheduler(checkpoint_file *f, trainer *t) {
    const args *a = t->args;
    if (a->override_opt_param_scheduler) return;
    lr_schedule stored = t->lr;
    char *style = checkpoint_get_string(f, "/lr_scheduler", "decay_style");
    int64_t warmup, decay;
    if (!style || checkpoint_get_double(f, "/lr_scheduler", "max_lr", &stored.max_lr) != 0 ||
        checkpoint_get_double(f, "/lr_scheduler", "min_lr", &stored.min_lr) != 0 ||
        checkpoint_get_int(f, "/lr_scheduler", "warmup_iters", &warmup) != 0 ||
        checkpoint_get_int(f, "/lr_scheduler", "decay_iters", &decay) != 0 || lr_decay_style_from_name(style) < 0)
        user_error("checkpoint %s lacks a readable /lr_scheduler (max_lr, min_lr, warmup_iters, decay_iters, "
                   "decay_style): pass --override-opt-param-scheduler", f->path);
    stored.warmup_iters = warmup;
    stored.decay_iters = decay;
    stored.style = (lr_decay_style)lr_decay_style_from_name(style);
    /* the decoupled group: the same schedule with its own peak and floor; none when absent */
    lr_schedule stored_decoupled = stored;
    stored_decoupled.max_lr = -1;
    if (checkpoint_get_double(f, "/lr_scheduler", "decoupled_max_lr", &stored_decoupled.max_lr) == 0 &&
        checkpoint_get_double(f, "/lr_scheduler", "decoupled_min_lr", &stored_decoupled.min_lr) != 0)
        user_error("checkpoint %s holds /lr_scheduler/decoupled_max_lr without decoupled_min_lr", f->path);
    /* the weight decay, where the checkpoint has it (Megatron: 'start_wd' in state_dict) */
    double start_wd = t->opt.weight_decay, end_wd = t->opt.weight_decay;
    int has_wd = checkpoint_get_double(f, "/lr_scheduler", "start_wd", &start_wd) == 0;
    if (has_wd && (checkpoint_get_double(f, "/lr_scheduler", "end_wd", &end_wd) != 0 || end_wd != start_wd))
        user_error("checkpoint %s holds a weight-decay schedule (/lr_scheduler start_wd, end_wd) other than a constant "
                   "one: pass --override-opt-param-scheduler", f->path);
    if (a->use_checkpoint_opt_param_scheduler) {
        t->lr = stored;
        t->decoupled_lr = stored_decoupled;
        if (start_wd != (double)t->opt.weight_decay) optimizer_set_weight_decay(&t->opt, (float)start_wd);
        free(style);
        return;
    }
    conflict_list c = {0};
    if (stored.max_lr != t->lr.max_lr) conflict_add(&c, "--lr = %g (this run: %g)", stored.max_lr, t->lr.max_lr);
    if (stored.min_lr != t->lr.min_lr) conflict_add(&c, "--min-lr = %g (this run: %g)", stored.min_lr, t->lr.min_lr);
    if (stored.warmup_iters != t->lr.warmup_iters)
        conflict_add(&c, "--lr-warmup-iters = %lld (this run: %lld)", (long long)stored.warmup_iters,
                     (long long)t->lr.warmup_iters);
    if (stored.decay_iters != t->lr.decay_iters)
        conflict_add(&c, "--lr-decay-iters = %lld (this run: %lld)", (long long)stored.decay_iters,
                     (long long)t->lr.decay_iters);
    if (stored.style != t->lr.style) conflict_add(&c, "--lr-decay-style = %s (this run: %s)", style, a->lr_decay_style);
    if (start_wd != (double)t->opt.weight_decay)
        conflict_add(&c, "--weight-decay = %g (this run: %g)", start_wd, (double)t->opt.weight_decay);
    char was[32], now[32];
    if (stored_decoupled.max_lr != t->decoupled_lr.max_lr)
        conflict_add(&c, "--decoupled-lr = %s (this run: %s)", decoupled_text(stored_decoupled.max_lr, was, sizeof was),
                     decoupled_text(t->decoupled_lr.max_lr, now, sizeof now));
    else if (stored_decoupled.max_lr >= 0 && stored_decoupled.min_lr != t->decoupled_lr.min_lr &&
             /* a floor that is --min-lr on both sides is reported as --min-lr */
             !(stored_decoupled.min_lr == stored.min_lr && t->decoupled_lr.min_lr == t->lr.min_lr))
        conflict_add(&c, "--decoupled-min-lr = %g (this run: %g)", stored_decoupled.min_lr, t->decoupled_lr.min_lr);
    free(style);
    if (c.count)
        user_error("checkpoint %s holds a learning-rate schedule that conflicts with this run's: %s; pass "
                   "--override-opt-param-scheduler to use this run's flags or --use-checkpoint-opt_param-scheduler "
                   "to use the checkpoint's", f->path, c.text);
}

/* Megatron's load_state_dict for the grad scaler, with its warnings where the checkpoint and
 * the run disagree about having one */
static void load_grad_scaler(checkpoint_file *f, trainer *t) {
    grad_scaler *scaler = &t->opt.scaler;
    int stored = checkpoint_has_group(f, "/optimizer/grad_scaler");
    int rank0 = t->topo.world_rank == 0;
    if (!stored) {
        if (scaler->enabled && scaler->dynamic && rank0)
            printf("***WARNING*** found a checkpoint without a dynamic grad scaler state, will not load grad scaler "
                   "(the loss scale starts at --initial-loss-scale %g) ...\n", (double)scaler->scale);
        return;
    }
    if (!scaler->enabled || !scaler->dynamic) {
        if (rank0)
            printf("***WARNING*** found the grad scaler in the checkpoint but this run's is %s. Skipping loading "
                   "grad scaler ...\n", scaler->enabled ? "constant (--loss-scale)" : "None (no --fp16)");
        return;
    }
    double scale;
    int64_t growth, hysteresis;
    if (checkpoint_get_double(f, "/optimizer/grad_scaler", "scale", &scale) != 0 ||
        checkpoint_get_int(f, "/optimizer/grad_scaler", "growth_tracker", &growth) != 0 ||
        checkpoint_get_int(f, "/optimizer/grad_scaler", "hysteresis_tracker", &hysteresis) != 0)
        user_error("%s: /optimizer/grad_scaler lacks scale, growth_tracker or hysteresis_tracker", f->path);
    scaler->scale = (float)scale;
    scaler->growth_tracker = growth;
    scaler->hysteresis_tracker = hysteresis;
}

/* iteration, consumed samples and (unless --no-load-rng) the seed */
static void load_progress(checkpoint_file *f, trainer *t) {
    int64_t stored_iteration = 0, consumed = 0;
    if (checkpoint_get_int(f, "/", "iteration", &stored_iteration) != 0 ||
        checkpoint_get_int(f, "/", "consumed_train_samples", &consumed) != 0)
        user_error("%s lacks the iteration or consumed_train_samples attribute", f->path);
    t->iteration = stored_iteration;
    t->consumed_samples = consumed;
    /* older checkpoints: no skipped steps */
    if (checkpoint_get_int(f, "/lr_scheduler", "skipped_steps", &t->lr_skipped_steps) != 0) t->lr_skipped_steps = 0;
    /* a checkpoint without it (older ones) loads 0; then Megatron's backward compatibility:
     * the evaluations an unbroken iteration-based run would have made so far */
    int64_t consumed_valid = 0;
    if (checkpoint_get_int(f, "/", "consumed_valid_samples", &consumed_valid) != 0) consumed_valid = 0;
    const args *a = t->args;
    if (stored_iteration > 0 && consumed_valid == 0 && !a->train_samples && a->eval_interval > 0)
        consumed_valid = stored_iteration / a->eval_interval * a->eval_iters * a->global_batch_size;
    t->consumed_valid_samples = consumed_valid;
    if (!t->args->no_load_rng) {
        int64_t seed;
        if (checkpoint_get_int(f, "/rng", "seed", &seed) != 0) user_error("%s lacks /rng/seed (pass --no-load-rng)", f->path);
        t->model.config.seed = (uint64_t)seed;
    }
}

int checkpoint_load(trainer *t, const char *dir) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    dist_checkpoint c;
    if (!dist_checkpoint_open(&c, dir, t->topo.world.mpi, a->ckpt_collective_io)) {
        if (a->exit_on_missing_checkpoint)
            user_error("--exit-on-missing-checkpoint: --load %s holds no checkpoint (no %s/%s)", dir, dir,
                       CHECKPOINT_TRACKER_NAME);
        if (rank == 0) {
            printf("WARNING: could not find the metadata file %s/%s: not loading any checkpoint, "
                   "training starts from random initialization\n", dir, CHECKPOINT_TRACKER_NAME);
            fflush(stdout);
        }
        return 0;
    }
    c.verify_checksums = !a->no_verify_checksums;
    const char *path = c.names.file;
    int finetune = a->finetune;
    int load_optim = !finetune && !a->no_load_optim;
    if (load_optim && !checkpoint_has_group(&c.file, "/optimizer"))
        user_error("%s holds no optimizer state (saved with --no-save-optim): pass --no-load-optim or --finetune", path);
    sharded_state state = {0};
    training_sharded_state(t, load_optim, fp8_state_to_load(t, &c), &state);
    if (a->bert_task && finetune) keep_tensors_in_file(&c, &state, rank == 0);
    dist_checkpoint_check(&c, &state);
    if (!finetune) check_checkpoint_args(&c.file, a);
    if (load_optim) load_scheduler(&c.file, t);
    dist_checkpoint_read(&c, &state, t->model.ops);
    sharded_state_free(&state);
    if (load_optim) {
        int64_t step = 0;
        if (checkpoint_get_int(&c.file, "/optimizer", "step", &step) != 0) user_error("%s lacks /optimizer/step", path);
        t->opt.step = (int)step;
        load_grad_scaler(&c.file, t);
    }
    if (t->opt.master) {
        /* mixed precision: the compute-dtype parameters from the loaded masters */
        optimizer_refresh_params(&t->opt, &t->model);
        data_parallel_start_param_gather(&t->dp);
        data_parallel_finish_param_gather(&t->dp);
    }
    if (!finetune) load_progress(&c.file, t);
    uint64_t bytes = dist_checkpoint_close(&c);
    t->model.ops->synchronize();
    /* this iteration's checkpoint already exists where --save would write it again */
    if (a->save[0] && !strcmp(a->save, dir)) t->last_saved_iteration = t->iteration;
    double seconds = MPI_Wtime() - start;
    if (rank == 0) {
        printf("> loaded checkpoint %s%s: iteration %lld, consumed samples %lld, %.1f MB of tensors in %.2f s (%.2f GB/s)\n",
               path, finetune ? " (weights only: --finetune)" : load_optim ? "" : " (without optimizer state)",
               (long long)t->iteration, (long long)t->consumed_samples, (double)bytes / 1e6, seconds,
               (double)bytes / seconds / 1e9);
        fflush(stdout);
    }
    return 1;
}
