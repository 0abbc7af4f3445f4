/* non_persistent_checkpoint.c: see non_persistent_checkpoint.h. */
#include "app/training/non_persistent_checkpoint.h"
#include "app/checkpoint/local_checkpoint.h"
#include "app/core/error.h"
#include "app/model/gpt_sharded_state.h"
#include "app/optim/optimizer_sharded_state.h"
#include "app/training/checkpointing.h"
#include "io/checkpoint_format.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the scalars of a local checkpoint, in this order */
enum {
    SCALAR_ITERATION, SCALAR_CONSUMED_SAMPLES, SCALAR_CONSUMED_VALID_SAMPLES, SCALAR_SEED, SCALAR_LR_SKIPPED_STEPS,
    SCALAR_OPTIMIZER_STEP, SCALAR_LOSS_SCALE_BITS, SCALAR_GROWTH_TRACKER, SCALAR_HYSTERESIS_TRACKER, NUM_SCALARS
};

static int is_local(const args *a) { return !strcmp(a->non_persistent_ckpt_type, "local"); }

/* the training state's shards as data-parallel rank dp_rank declares them (which copies it writes) */
static void state_as(const trainer *t, int dp_rank, int with_moments, sharded_state *state) {
    gpt_sharded_state(&t->model, dp_rank, state);
    optimizer_sharded_state(&t->opt, &t->model, dp_rank, t->args->use_distributed_optimizer, with_moments, state);
}

/* The state of this rank and, for fully_parallel, which of its shards are replicas over data
 * parallelism: those data-parallel rank 0 writes and rank 1 does not (the same shards at the same
 * places on every data-parallel rank; NULL without such replicas). */
static int *local_state(const trainer *t, int with_moments, sharded_state *state) {
    state_as(t, t->topo.dp_cp->rank, with_moments, state);
    if (t->topo.dp_cp->size < 2 || t->args->num_experts) return NULL;
    sharded_state first = {0}, second = {0};
    state_as(t, 0, with_moments, &first);
    state_as(t, 1, with_moments, &second);
    CHECK(first.num_shards == state->num_shards && second.num_shards == state->num_shards,
          "the shard lists of data-parallel ranks differ");
    int *replicated = calloc((size_t)state->num_shards + 1, sizeof(int));
    CHECK(replicated, "out of host memory");
    for (int i = 0; i < state->num_shards; i++) replicated[i] = first.shards[i].write && !second.shards[i].write;
    sharded_state_free(&first);
    sharded_state_free(&second);
    return replicated;
}

void non_persistent_setup(trainer *t) {
    const args *a = t->args;
    if (!is_local(a)) return;
    const topology *topo = &t->topo;
    int64_t layout[LOCAL_CHECKPOINT_LAYOUT_FIELDS] = {topo->world_size, topo->tp_size, topo->pp_size, topo->dp_size,
                                                      topo->cp_size, topo->ep_size};
    t->local_checkpoint = calloc(1, sizeof(local_checkpoint));
    CHECK(t->local_checkpoint, "out of host memory");
    local_checkpoint_init(t->local_checkpoint, a->non_persistent_local_ckpt_dir, topo->world.mpi, topo->node,
                          topo->local_rank, layout, topo->dp_cp->mpi, !strcmp(a->non_persistent_local_ckpt_algo, "fully_parallel"));
    if (topo->world_rank == 0 && t->local_checkpoint->num_nodes < 2) {
        printf("WARNING: --non-persistent-ckpt-type local on one node: no replicas are kept (a rank's lost "
               "folder cannot be recovered)\n");
        fflush(stdout);
    }
}

void non_persistent_free(trainer *t) {
    if (!t->local_checkpoint) return;
    local_checkpoint_free(t->local_checkpoint);
    free(t->local_checkpoint);
    t->local_checkpoint = NULL;
}

/* the global type's folder: --non-persistent-global-ckpt-dir or base/non_persistent */
static void global_dir(const args *a, const char *base, char *out, size_t cap) {
    if (a->non_persistent_global_ckpt_dir[0]) snprintf(out, cap, "%s", a->non_persistent_global_ckpt_dir);
    else snprintf(out, cap, "%s/non_persistent", base);
}

/* rank 0: remove every iter_NNNNNNN.h5 in dir but the newest (Megatron's leave_ckpt_num=1) */
static void remove_older_global(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    long long newest = -1, iteration;
    struct dirent *entry;
    int used;
    while ((entry = readdir(d)))
        if (sscanf(entry->d_name, "iter_%lld.h5%n", &iteration, &used) == 1 && !entry->d_name[used] && iteration > newest)
            newest = iteration;
    rewinddir(d);
    char path[CHECKPOINT_PATH_MAX + 300];
    while ((entry = readdir(d)))
        if (sscanf(entry->d_name, "iter_%lld.h5%n", &iteration, &used) == 1 && !entry->d_name[used] && iteration < newest) {
            snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
            unlink(path);
        }
    closedir(d);
}

void non_persistent_save(trainer *t) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    if (!is_local(a)) {
        char dir[CHECKPOINT_PATH_MAX];
        global_dir(a, a->save, dir, sizeof dir);
        if (rank == 0) remove_older_global(dir);
        int64_t persistent = t->last_saved_iteration;  /* a non-persistent save is not --save's */
        checkpoint_save(t, dir);
        t->last_saved_iteration = persistent;
        return;
    }
    data_parallel_finish_param_gather(&t->dp);
    t->model.ops->synchronize();
    sharded_state state = {0};
    int *replicated = local_state(t, !a->no_save_optim, &state);
    int64_t scalars[NUM_SCALARS] = {0};
    scalars[SCALAR_ITERATION] = t->iteration;
    scalars[SCALAR_CONSUMED_SAMPLES] = t->consumed_samples;
    scalars[SCALAR_CONSUMED_VALID_SAMPLES] = t->consumed_valid_samples;
    scalars[SCALAR_SEED] = (int64_t)t->model.config.seed;
    scalars[SCALAR_LR_SKIPPED_STEPS] = t->lr_skipped_steps;
    scalars[SCALAR_OPTIMIZER_STEP] = t->opt.step;
    double scale = t->opt.scaler.scale;
    memcpy(&scalars[SCALAR_LOSS_SCALE_BITS], &scale, sizeof scale);
    scalars[SCALAR_GROWTH_TRACKER] = t->opt.scaler.growth_tracker;
    scalars[SCALAR_HYSTERESIS_TRACKER] = t->opt.scaler.hysteresis_tracker;
    uint64_t bytes = local_checkpoint_save(t->local_checkpoint, t->iteration, scalars, NUM_SCALARS, &state, replicated,
                                           t->model.ops);
    sharded_state_free(&state);
    free(replicated);
    double total = (double)bytes;
    t->comm->allreduce_double_host(&total, 1, COMM_SUM, &t->topo.world);
    if (rank == 0) {
        double seconds = MPI_Wtime() - start;
        printf("> saved local checkpoint at iteration %lld to %s: %.1f MB written by all ranks (own shards and "
               "replicas) in %.3f s\n", (long long)t->iteration, a->non_persistent_local_ckpt_dir, total / 1e6, seconds);
        fflush(stdout);
    }
}

/* rank 0 reads dir's tracker; -1 when none (every rank gets the answer) */
static int64_t tracker_iteration(const trainer *t, const char *dir) {
    int64_t iteration = -1;
    if (t->topo.world_rank == 0) {
        char err[CHECKPOINT_PATH_MAX + 256];
        if (checkpoint_tracker_read(dir, &iteration, err, sizeof err) != 0) iteration = -1;
    }
    CHECK_MPI(MPI_Bcast(&iteration, 1, MPI_INT64_T, 0, t->topo.world.mpi));
    return iteration;
}

/* loads the local set local_checkpoint_find found */
static void restore_local(trainer *t, int64_t iteration, const sharded_state *state, const int *replicated) {
    double start = MPI_Wtime();
    int64_t scalars[NUM_SCALARS];
    local_checkpoint_restore(t->local_checkpoint, state, replicated, scalars, NUM_SCALARS, t->model.ops);
    t->iteration = scalars[SCALAR_ITERATION];
    t->consumed_samples = scalars[SCALAR_CONSUMED_SAMPLES];
    t->consumed_valid_samples = scalars[SCALAR_CONSUMED_VALID_SAMPLES];
    if (!t->args->no_load_rng) t->model.config.seed = (uint64_t)scalars[SCALAR_SEED];
    t->lr_skipped_steps = scalars[SCALAR_LR_SKIPPED_STEPS];
    if (!t->args->no_load_optim) {
        t->opt.step = (int)scalars[SCALAR_OPTIMIZER_STEP];
        grad_scaler *scaler = &t->opt.scaler;
        if (scaler->enabled && scaler->dynamic) {
            double scale;
            memcpy(&scale, &scalars[SCALAR_LOSS_SCALE_BITS], sizeof scale);
            scaler->scale = (float)scale;
            scaler->growth_tracker = scalars[SCALAR_GROWTH_TRACKER];
            scaler->hysteresis_tracker = scalars[SCALAR_HYSTERESIS_TRACKER];
        }
    }
    if (t->opt.master) {
        /* mixed precision: the compute-dtype parameters from the loaded masters */
        optimizer_refresh_params(&t->opt, &t->model);
        data_parallel_start_param_gather(&t->dp);
        data_parallel_finish_param_gather(&t->dp);
    }
    t->model.ops->synchronize();
    if (t->topo.world_rank == 0) {
        printf("> loaded local checkpoint of iteration %lld from %s: consumed samples %lld, in %.3f s\n",
               (long long)iteration, t->args->non_persistent_local_ckpt_dir, (long long)t->consumed_samples,
               MPI_Wtime() - start);
        fflush(stdout);
    }
}

void checkpoint_load_newest(trainer *t) {
    const args *a = t->args;
    int rank0 = t->topo.world_rank == 0;
    int64_t persistent = tracker_iteration(t, a->load);
    if (a->non_persistent_ckpt_type[0] && a->finetune) {
        if (rank0) printf("> --finetune: non-persistent checkpoints are not looked at, loading --load %s\n", a->load);
        checkpoint_load(t, a->load);
        return;
    }
    if (!strcmp(a->non_persistent_ckpt_type, "global")) {
        char dir[CHECKPOINT_PATH_MAX];
        global_dir(a, a->load, dir, sizeof dir);
        int64_t non_persistent = tracker_iteration(t, dir);
        if (non_persistent >= 0 && non_persistent >= persistent) {
            if (rank0) printf("> loading the non-persistent checkpoint of iteration %lld from %s\n", (long long)non_persistent, dir);
            checkpoint_load(t, dir);
            t->last_saved_iteration = -1;  /* not --save's */
            return;
        }
        if (non_persistent >= 0 && rank0) printf("WARNING: non-persistent checkpoints are older than persistent checkpoint\n");
        checkpoint_load(t, a->load);
        return;
    }
    if (is_local(a)) {
        int load_optim = !a->no_load_optim;
        sharded_state state = {0};
        int *replicated = local_state(t, load_optim, &state);
        char why[LOCAL_CHECKPOINT_PATH_MAX + 1024];
        int64_t local = local_checkpoint_find(t->local_checkpoint, &state, replicated, NUM_SCALARS, why, sizeof why);
        if (local >= 0 && local >= persistent) {
            restore_local(t, local, &state, replicated);
        } else if (rank0) {
            if (local >= 0) printf("WARNING: non-persistent checkpoints are older than persistent checkpoint\n");
            else printf("> not loading a local checkpoint: %s; loading the newest global checkpoint from --load %s\n",
                        why, a->load);
        }
        fflush(stdout);
        sharded_state_free(&state);
        free(replicated);
        if (local >= 0 && local >= persistent) return;
    }
    checkpoint_load(t, a->load);
}
