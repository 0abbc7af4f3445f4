/* checkpointing.c: see checkpointing.h. */
#include "app/training/checkpointing.h"
#include "app/checkpoint/dist_checkpoint.h"
#include "app/core/error.h"
#include "app/model/gpt_sharded_state.h"
#include "app/optim/optimizer_sharded_state.h"

#include <stdio.h>
#include <string.h>

/* the tensors of the training state: the model's fp32 weights (the parameters, or the
 * optimizer's masters in mixed precision) and, with_moments, Adam's moments */
static void training_sharded_state(const trainer *t, int with_moments, sharded_state *state) {
    gpt_sharded_state(&t->model, t->topo.dp_rank, state);
    optimizer_sharded_state(&t->opt, &t->model, t->topo.dp_rank, t->args->use_distributed_optimizer,
                            with_moments, state);
}

/* ---- save ---- */

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
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) checkpoint_put_int(f, "/args", ints[i].name, ints[i].value);
    checkpoint_put_double(f, "/args", "layernorm_epsilon", a->layernorm_epsilon);
    checkpoint_put_string(f, "/args", "tokenizer_type", a->tokenizer_type[0] ? a->tokenizer_type : "NullTokenizer");
}

static void put_scalar_state(checkpoint_file *f, const trainer *t) {
    const args *a = t->args;
    put_args(f, t);
    checkpoint_put_int(f, "/rng", "seed", (int64_t)t->model.config.seed);
    checkpoint_put_int(f, "/lr_scheduler", "num_steps", t->iteration);
    checkpoint_put_double(f, "/lr_scheduler", "max_lr", t->lr.max_lr);
    checkpoint_put_double(f, "/lr_scheduler", "min_lr", t->lr.min_lr);
    checkpoint_put_string(f, "/lr_scheduler", "decay_style", a->lr_decay_style);
    checkpoint_put_int(f, "/lr_scheduler", "warmup_iters", t->lr.warmup_iters);
    checkpoint_put_int(f, "/lr_scheduler", "decay_iters", t->lr.decay_iters);
    if (!a->no_save_optim) {
        checkpoint_put_int(f, "/optimizer", "step", t->opt.step);
        /* /model holds the fp32 weights the optimizer steps on, in mixed precision too */
        checkpoint_put_int(f, "/optimizer", "master_weights_in_model", 1);
    }
}

void checkpoint_save(trainer *t, const char *dir) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    data_parallel_finish_param_gather(&t->dp);
    t->model.ops->synchronize();
    char err[CHECKPOINT_PATH_MAX + 256];
    if (rank == 0 && checkpoint_make_directory(dir, err, sizeof err) != 0) user_error_local("--save %s: %s", dir, err);
    CHECK_MPI(MPI_Barrier(t->topo.world.mpi));

    dist_checkpoint c;
    dist_checkpoint_create(&c, dir, t->iteration, t->consumed_samples, t->topo.world.mpi, a->ckpt_collective_io);
    put_scalar_state(&c.file, t);
    sharded_state state = {0};
    training_sharded_state(t, !a->no_save_optim, &state);
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

/* the architecture matches (tensor shapes cannot tell these apart) */
static void check_architecture(checkpoint_file *f, const args *a) {
    struct { const char *name, *flag; int64_t value; } arch[] = {
        {"num_layers", "--num-layers", a->num_layers},
        {"num_attention_heads", "--num-attention-heads", a->num_attention_heads},
        {"untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights", a->untie_embeddings_and_output_weights},
    };
    for (size_t i = 0; i < sizeof arch / sizeof arch[0]; i++) {
        int64_t stored;
        if (checkpoint_get_int(f, "/args", arch[i].name, &stored) != 0)
            user_error("checkpoint %s lacks the attribute /args/%s", f->path, arch[i].name);
        if (stored != arch[i].value)
            user_error("checkpoint %s was saved with %s = %lld, this run has %lld", f->path, arch[i].flag,
                       (long long)stored, (long long)arch[i].value);
    }
}

/* iteration, consumed samples and (unless --no-load-rng) the seed */
static void load_progress(checkpoint_file *f, trainer *t) {
    int64_t stored_iteration = 0, consumed = 0;
    if (checkpoint_get_int(f, "/", "iteration", &stored_iteration) != 0 ||
        checkpoint_get_int(f, "/", "consumed_train_samples", &consumed) != 0)
        user_error("%s lacks the iteration or consumed_train_samples attribute", f->path);
    t->iteration = stored_iteration;
    t->consumed_samples = consumed;
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
    training_sharded_state(t, load_optim, &state);
    dist_checkpoint_check(&c, &state);
    check_architecture(&c.file, a);
    dist_checkpoint_read(&c, &state, t->model.ops);
    sharded_state_free(&state);
    if (load_optim) {
        int64_t step = 0;
        if (checkpoint_get_int(&c.file, "/optimizer", "step", &step) != 0) user_error("%s lacks /optimizer/step", path);
        t->opt.step = (int)step;
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
