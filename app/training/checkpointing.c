/* checkpointing.c: see checkpointing.h. A rank's share of a global tensor is described as boxes
 * of the global index space (io/checkpoint_file.h): a parameter shard is one box; an optimizer
 * range of the distributed optimizer can start and end inside rows of a column-split tensor, so
 * it becomes up to three boxes (partial first row, full rows, partial last row), whose
 * elements in global row-major order are exactly the range's elements in local order.
 *
 * Every transfer goes through one host staging buffer of at most CHECKPOINT_PIECE_ELEMENTS
 * floats: the parts are cut into pieces of whole rows of that size. So the host memory a save or
 * load needs is bounded, and the kernel's file I/O only ever touches the staging buffer, which
 * is warm after the first piece (copying to or from memory the kernel has not touched before is
 * several times slower on virtual machines; measured in perf/results/checkpoint-bandwidth-*). */
#include "app/training/checkpointing.h"
#include "io/checkpoint_file.h"
#include "app/core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- which part of a global tensor a local range is ---- */

/* local elements [lo, hi) of p's shard, as boxes of p's global tensor */
static tensor_part range_part(const param_tensor *p, size_t lo, size_t hi) {
    tensor_part part = {0};
    if (lo >= hi) return part;
    int64_t width = p->cols ? p->local_cols : 1;
    int64_t row0 = p->split == SHARD_ROWS ? p->shard_start : 0;
    int64_t col0 = p->split == SHARD_COLS ? p->shard_start : 0;
    int64_t first_row = (int64_t)lo / width, first_col = (int64_t)lo % width;
    int64_t last_row = (int64_t)(hi - 1) / width, last_col = (int64_t)(hi - 1) % width;
    if (first_row == last_row) {
        part.boxes[part.num_boxes++] = (tensor_box){row0 + first_row, col0 + first_col, 1, last_col - first_col + 1};
        return part;
    }
    int64_t full_first = first_row, full_last = last_row;
    if (first_col != 0) {
        part.boxes[part.num_boxes++] = (tensor_box){row0 + first_row, col0 + first_col, 1, width - first_col};
        full_first++;
    }
    if (last_col != width - 1) full_last--;
    if (full_last >= full_first)
        part.boxes[part.num_boxes++] = (tensor_box){row0 + full_first, col0, full_last - full_first + 1, width};
    if (last_col != width - 1)
        part.boxes[part.num_boxes++] = (tensor_box){row0 + last_row, col0, 1, last_col + 1};
    return part;
}

/* what one rank moves for one global tensor: a part and where it lives in backend memory */
typedef struct piece {
    tensor_part part;
    float *source; /* backend memory, tensor_part_elements(&part) floats */
} piece;

#define CHECKPOINT_PIECE_ELEMENTS ((size_t)8 << 20) /* 32 MiB of floats */

/* the piece size: CHECKPOINT_PIECE_ELEMENTS, or MTC_CKPT_PIECE_ELEMENTS (tests cut tiny models
 * into many pieces with it) */
static size_t piece_elements(void) {
    const char *text = getenv("MTC_CKPT_PIECE_ELEMENTS");
    long long n = text ? atoll(text) : 0;
    return n > 0 ? (size_t)n : CHECKPOINT_PIECE_ELEMENTS;
}

typedef struct tensor_plan {
    int num_pieces, capacity;
    piece *pieces;
} tensor_plan;

/* the state a checkpoint stores per tensor */
typedef enum { STATE_MODEL, STATE_EXP_AVG, STATE_EXP_AVG_SQ, NUM_STATES } state_kind;
static const char *state_group[NUM_STATES] = {"/model", "/optimizer/exp_avg", "/optimizer/exp_avg_sq"};

typedef struct checkpoint_plan {
    int num_globals;
    global_parameter *globals;
    tensor_plan *tensors[NUM_STATES]; /* [num_globals] each */
    int *max_pieces[NUM_STATES];      /* over all ranks */
    size_t staging_elements;
} checkpoint_plan;

static int global_index_of(const checkpoint_plan *plan, const char *name) {
    for (int i = 0; i < plan->num_globals; i++)
        if (!strcmp(plan->globals[i].name, name)) return i;
    FATAL("parameter %s is not in the model's global list", name);
}

static void append_piece(checkpoint_plan *plan, tensor_plan *tp, tensor_box box, float *source) {
    if (tp->num_pieces == tp->capacity) {
        tp->capacity = tp->capacity ? 2 * tp->capacity : 4;
        tp->pieces = realloc(tp->pieces, sizeof(piece) * (size_t)tp->capacity);
        CHECK(tp->pieces, "out of host memory for the checkpoint plan");
    }
    piece *pc = &tp->pieces[tp->num_pieces++];
    memset(pc, 0, sizeof *pc);
    pc->part.boxes[0] = box;
    pc->part.num_boxes = 1;
    pc->source = source;
    size_t n = tensor_part_elements(&pc->part);
    if (n > plan->staging_elements) plan->staging_elements = n;
}

/* the part's boxes in memory order, cut into pieces of whole rows of at most
 * piece_elements() elements (at least one row each) */
static void add_piece(checkpoint_plan *plan, state_kind kind, int global, tensor_part part, float *source) {
    tensor_plan *tp = &plan->tensors[kind][global];
    size_t limit = piece_elements();
    for (int b = 0; b < part.num_boxes; b++) {
        tensor_box box = part.boxes[b];
        int64_t rows_per_piece = (int64_t)(limit / (size_t)(box.cols > 0 ? box.cols : 1));
        if (rows_per_piece < 1) rows_per_piece = 1;
        for (int64_t r = 0; r < box.rows; r += rows_per_piece) {
            tensor_box cut = box;
            cut.row = box.row + r;
            cut.rows = box.rows - r < rows_per_piece ? box.rows - r : rows_per_piece;
            append_piece(plan, tp, cut, source);
            source += (size_t)cut.rows * (size_t)cut.cols;
        }
    }
}

/* Saving: every tensor once. Loading: every part this rank holds, copies included.
 * The model state is the fp32 weights: the parameters themselves on an fp32 backend, the
 * optimizer's master weights (over its ranges, like the Adam moments) in mixed precision. */
static void plan_create(checkpoint_plan *plan, const trainer *t, int saving) {
    const gpt_model *m = &t->model;
    const optimizer *opt = &t->opt;
    memset(plan, 0, sizeof *plan);
    plan->num_globals = gpt_global_parameters(&m->config, NULL);
    plan->globals = malloc(sizeof(global_parameter) * (size_t)plan->num_globals);
    CHECK(plan->globals, "out of host memory for the checkpoint plan");
    gpt_global_parameters(&m->config, plan->globals);
    for (int k = 0; k < NUM_STATES; k++) {
        plan->tensors[k] = calloc((size_t)plan->num_globals, sizeof(tensor_plan));
        plan->max_pieces[k] = calloc((size_t)plan->num_globals, sizeof(int));
        CHECK(plan->tensors[k] && plan->max_pieces[k], "out of host memory for the checkpoint plan");
    }
    int distributed = t->args->use_distributed_optimizer;
    for (int i = 0; !opt->master && i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        int unique = param_is_primary_copy(p, t->topo.tp_rank);
        if (saving && !(unique && t->topo.dp_rank == 0)) continue;
        add_piece(plan, STATE_MODEL, global_index_of(plan, p->name), range_part(p, 0, p->numel),
                  (float *)m->param_buffer + p->offset);
    }
    for (int r = 0; r < opt->num_ranges; r++) {
        const optimizer_range *range = &opt->ranges[r];
        const param_tensor *p = &m->params[range->param];
        int unique = param_is_primary_copy(p, t->topo.tp_rank);
        if (saving && !(unique && (distributed || t->topo.dp_rank == 0))) continue;
        size_t lo = range->offset - p->offset;
        tensor_part part = range_part(p, lo, lo + range->length);
        int g = global_index_of(plan, p->name);
        if (opt->master) add_piece(plan, STATE_MODEL, g, part, optimizer_master(opt, m, range));
        add_piece(plan, STATE_EXP_AVG, g, part, opt->exp_avg + range->state_offset);
        add_piece(plan, STATE_EXP_AVG_SQ, g, part, opt->exp_avg_sq + range->state_offset);
    }
    for (int k = 0; k < NUM_STATES; k++) {
        for (int g = 0; g < plan->num_globals; g++) plan->max_pieces[k][g] = plan->tensors[k][g].num_pieces;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, plan->max_pieces[k], plan->num_globals, MPI_INT, MPI_MAX,
                                t->topo.world.mpi));
    }
}

static void plan_free(checkpoint_plan *plan) {
    for (int k = 0; k < NUM_STATES; k++) {
        for (int g = 0; g < plan->num_globals; g++) free(plan->tensors[k][g].pieces);
        free(plan->tensors[k]);
        free(plan->max_pieces[k]);
    }
    free(plan->globals);
}

/* collective transfer of one state of every tensor through the staging buffer (host memory) */
static void move_state(checkpoint_file *f, const checkpoint_plan *plan, state_kind kind,
                       const kernel_ops *ops, float *staging, int saving) {
    char path[256];
    for (int g = 0; g < plan->num_globals; g++) {
        const global_parameter *gp = &plan->globals[g];
        snprintf(path, sizeof path, "%s/%s", state_group[kind], gp->name);
        if (saving) checkpoint_create_tensor(f, path, gp->rows, gp->cols);
        const tensor_plan *tp = &plan->tensors[kind][g];
        for (int j = 0; j < plan->max_pieces[kind][g]; j++) {
            tensor_part none = {0};
            const piece *pc = j < tp->num_pieces ? &tp->pieces[j] : NULL;
            const tensor_part *part = pc ? &pc->part : &none;
            size_t bytes = sizeof(float) * tensor_part_elements(part);
            if (saving) {
                if (bytes) ops->copy_to_host(staging, pc->source, bytes);
                checkpoint_write_tensor(f, path, part, staging);
            } else {
                checkpoint_read_tensor(f, path, part, staging);
                if (bytes) ops->copy_from_host(pc->source, staging, bytes);
            }
        }
    }
}

/* ---- files: names, fsync, the tracker ---- */

static void checkpoint_name(char *out, size_t size, const char *dir, int64_t iteration) {
    if (iteration < 0) snprintf(out, size, "%s/release.h5", dir);
    else snprintf(out, size, "%s/iter_%07lld.h5", dir, (long long)iteration);
}

static void fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) FATAL("cannot open %s to flush it: %s", path, strerror(errno));
    if (fsync(fd) != 0 && errno != EINVAL) FATAL("fsync of %s failed: %s", path, strerror(errno));
    close(fd);
}

static void make_directories(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                user_error_local("--save %s: cannot create directory %s: %s", dir, path, strerror(errno));
            *p = c;
            if (c == '\0') break;
        }
    }
}

/* rank 0: replace the tracker atomically (temporary file, fsync, rename, fsync directory) */
static void write_tracker(const char *dir, int64_t iteration) {
    char tracker[4096], temporary[4200];
    snprintf(tracker, sizeof tracker, "%s/%s", dir, CHECKPOINT_TRACKER);
    snprintf(temporary, sizeof temporary, "%s.tmp", tracker);
    FILE *f = fopen(temporary, "w");
    if (!f) FATAL("cannot write %s: %s", temporary, strerror(errno));
    fprintf(f, "%lld\n", (long long)iteration);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) FATAL("cannot flush %s: %s", temporary, strerror(errno));
    fclose(f);
    if (rename(temporary, tracker) != 0) FATAL("cannot rename %s to %s: %s", temporary, tracker, strerror(errno));
    fsync_path(dir);
}

/* the tracker's iteration: -1 for "release", -2 when there is no tracker; bad content stops */
static int64_t read_tracker(const char *dir) {
    char tracker[4096], line[64] = "";
    snprintf(tracker, sizeof tracker, "%s/%s", dir, CHECKPOINT_TRACKER);
    FILE *f = fopen(tracker, "r");
    if (!f) return -2;
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!strcmp(line, "release")) return -1;
    char *end = NULL;
    long long iteration = strtoll(line, &end, 10);
    if (!line[0] || *end != '\0' || iteration < 0)
        user_error_local("%s: expected an iteration number or 'release', found '%s'", tracker, line);
    return iteration;
}

int64_t checkpoint_latest_iteration(const char *dir) {
    int64_t iteration = read_tracker(dir);
    return iteration == -2 ? -1 : iteration;
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

/* MTC_FAULT_PAUSE_IN_SAVE=SECONDS: fault injection for the crash-safety test; every rank
 * pauses halfway through writing, so that a rank can be killed mid-save */
static void fault_pause(int rank) {
    const char *pause = getenv("MTC_FAULT_PAUSE_IN_SAVE");
    if (!pause || atoi(pause) <= 0) return;
    if (rank == 0) {
        fprintf(stderr, "checkpoint: pausing %d s in the middle of a save (MTC_FAULT_PAUSE_IN_SAVE)\n", atoi(pause));
        fflush(stderr);
    }
    sleep((unsigned)atoi(pause));
}

void checkpoint_save(trainer *t, const char *dir) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    data_parallel_finish_param_gather(&t->dp);
    t->model.ops->synchronize();
    if (rank == 0) make_directories(dir);
    CHECK_MPI(MPI_Barrier(t->topo.world.mpi));

    char final_path[4096], partial_path[4200];
    checkpoint_name(final_path, sizeof final_path, dir, t->iteration);
    snprintf(partial_path, sizeof partial_path, "%s.partial", final_path);
    checkpoint_file f;
    checkpoint_file_create(&f, partial_path, t->topo.world.mpi, a->ckpt_collective_io);
    checkpoint_put_string(&f, "/", "format", CHECKPOINT_FORMAT_NAME);
    checkpoint_put_int(&f, "/", "format_version", CHECKPOINT_FORMAT_VERSION);
    checkpoint_put_int(&f, "/", "complete", 0);
    checkpoint_put_int(&f, "/", "iteration", t->iteration);
    checkpoint_put_int(&f, "/", "consumed_train_samples", t->consumed_samples);
    checkpoint_put_int(&f, "/", "consumed_valid_samples", 0);
    put_args(&f, t);
    checkpoint_put_int(&f, "/rng", "seed", (int64_t)t->model.config.seed);
    checkpoint_put_int(&f, "/lr_scheduler", "num_steps", t->iteration);
    checkpoint_put_double(&f, "/lr_scheduler", "max_lr", t->lr.max_lr);
    checkpoint_put_double(&f, "/lr_scheduler", "min_lr", t->lr.min_lr);
    checkpoint_put_string(&f, "/lr_scheduler", "decay_style", a->lr_decay_style);
    checkpoint_put_int(&f, "/lr_scheduler", "warmup_iters", t->lr.warmup_iters);
    checkpoint_put_int(&f, "/lr_scheduler", "decay_iters", t->lr.decay_iters);

    checkpoint_plan plan;
    plan_create(&plan, t, 1);
    float *staging = malloc(sizeof(float) * (plan.staging_elements ? plan.staging_elements : 1));
    CHECK(staging, "out of host memory for checkpoint staging");
    move_state(&f, &plan, STATE_MODEL, t->model.ops, staging, 1);
    fault_pause(rank);
    if (!a->no_save_optim) {
        checkpoint_put_int(&f, "/optimizer", "step", t->opt.step);
        checkpoint_put_int(&f, "/optimizer", "master_weights_in_model", 1);
        move_state(&f, &plan, STATE_EXP_AVG, t->model.ops, staging, 1);
        move_state(&f, &plan, STATE_EXP_AVG_SQ, t->model.ops, staging, 1);
    }
    free(staging);
    plan_free(&plan);
    checkpoint_put_int(&f, "/", "complete", 1);
    uint64_t bytes = f.bytes;
    checkpoint_file_close(&f);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, t->topo.world.mpi));

    /* commit: the file on disk, then its final name, then the tracker */
    if (rank == 0) {
        fsync_path(partial_path);
        if (rename(partial_path, final_path) != 0)
            FATAL("cannot rename %s to %s: %s", partial_path, final_path, strerror(errno));
        fsync_path(dir);
        write_tracker(dir, t->iteration);
    }
    CHECK_MPI(MPI_Barrier(t->topo.world.mpi));
    t->last_saved_iteration = t->iteration;
    double seconds = MPI_Wtime() - start;
    if (rank == 0) {
        printf("> saved checkpoint at iteration %lld to %s: %.1f MB of tensors in %.2f s (%.2f GB/s)\n",
               (long long)t->iteration, final_path, (double)bytes / 1e6, seconds, (double)bytes / seconds / 1e9);
        fflush(stdout);
    }
}

/* ---- load ---- */

static void shape_text(char *out, size_t size, int64_t rows, int64_t cols) {
    if (cols) snprintf(out, size, "[%lld, %lld]", (long long)rows, (long long)cols);
    else snprintf(out, size, "[%lld]", (long long)rows);
}

/* every tensor of this model exists with its global shape; the architecture matches */
static void check_compatible(checkpoint_file *f, const checkpoint_plan *plan, const trainer *t, int load_optim) {
    const args *a = t->args;
    char path[256], want[64], found[64];
    for (int k = 0; k < (load_optim ? NUM_STATES : 1); k++) {
        for (int g = 0; g < plan->num_globals; g++) {
            const global_parameter *gp = &plan->globals[g];
            snprintf(path, sizeof path, "%s/%s", state_group[k], gp->name);
            int64_t rows, cols;
            shape_text(want, sizeof want, gp->rows, gp->cols);
            if (checkpoint_tensor_shape(f, path, &rows, &cols) != 0)
                user_error("checkpoint %s has no tensor %s (this model needs it with shape %s)", f->path, path, want);
            if (rows != gp->rows || cols != gp->cols) {
                shape_text(found, sizeof found, rows, cols);
                user_error("checkpoint %s: tensor %s has shape %s, but this model's is %s", f->path, path, found, want);
            }
        }
    }
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

int checkpoint_load(trainer *t, const char *dir) {
    const args *a = t->args;
    int rank = t->topo.world_rank;
    double start = MPI_Wtime();
    int64_t iteration = rank == 0 ? read_tracker(dir) : 0;
    CHECK_MPI(MPI_Bcast(&iteration, 1, MPI_INT64_T, 0, t->topo.world.mpi));
    if (iteration == -2) {
        if (rank == 0) {
            printf("WARNING: could not find the metadata file %s/%s: not loading any checkpoint, "
                   "training starts from random initialization\n", dir, CHECKPOINT_TRACKER);
            fflush(stdout);
        }
        return 0;
    }
    char path[4096], err[4200];
    checkpoint_name(path, sizeof path, dir, iteration);
    struct stat st;
    int missing = rank == 0 ? stat(path, &st) != 0 : 0;
    CHECK_MPI(MPI_Bcast(&missing, 1, MPI_INT, 0, t->topo.world.mpi));
    if (missing) user_error("%s/%s names %s, which does not exist", dir, CHECKPOINT_TRACKER, path);
    checkpoint_file f;
    if (checkpoint_file_open(&f, path, t->topo.world.mpi, a->ckpt_collective_io, err, sizeof err) != 0)
        user_error("%s (a save that did not finish?): refusing to load it", err);
    char format[64] = "";
    int64_t version = 0, complete = 0;
    if (checkpoint_get_string(&f, "/", "format", format, sizeof format) != 0 || strcmp(format, CHECKPOINT_FORMAT_NAME) != 0)
        user_error("%s is not a megatron-c checkpoint (root attribute 'format' is '%s')", path, format);
    if (checkpoint_get_int(&f, "/", "format_version", &version) != 0 || version != CHECKPOINT_FORMAT_VERSION)
        user_error("%s has format version %lld; this build reads version %d", path, (long long)version, CHECKPOINT_FORMAT_VERSION);
    if (checkpoint_get_int(&f, "/", "complete", &complete) != 0 || complete != 1)
        user_error("%s is incomplete (its save did not finish): refusing to load it", path);

    int finetune = a->finetune;
    int load_optim = !finetune && !a->no_load_optim;
    if (load_optim && !checkpoint_has_group(&f, "/optimizer"))
        user_error("%s holds no optimizer state (saved with --no-save-optim): pass --no-load-optim or --finetune", path);
    checkpoint_plan plan;
    plan_create(&plan, t, 0);
    check_compatible(&f, &plan, t, load_optim);
    float *staging = malloc(sizeof(float) * (plan.staging_elements ? plan.staging_elements : 1));
    CHECK(staging, "out of host memory for checkpoint staging");
    move_state(&f, &plan, STATE_MODEL, t->model.ops, staging, 0);
    if (load_optim) {
        int64_t step = 0;
        if (checkpoint_get_int(&f, "/optimizer", "step", &step) != 0) user_error("%s lacks /optimizer/step", path);
        t->opt.step = (int)step;
        move_state(&f, &plan, STATE_EXP_AVG, t->model.ops, staging, 0);
        move_state(&f, &plan, STATE_EXP_AVG_SQ, t->model.ops, staging, 0);
    }
    free(staging);
    plan_free(&plan);
    if (t->opt.master) {
        /* mixed precision: the compute-dtype parameters from the loaded masters */
        optimizer_refresh_params(&t->opt, &t->model);
        data_parallel_start_param_gather(&t->dp);
        data_parallel_finish_param_gather(&t->dp);
    }
    if (!finetune) {
        int64_t stored_iteration = 0, consumed = 0;
        if (checkpoint_get_int(&f, "/", "iteration", &stored_iteration) != 0 ||
            checkpoint_get_int(&f, "/", "consumed_train_samples", &consumed) != 0)
            user_error("%s lacks the iteration or consumed_train_samples attribute", path);
        t->iteration = stored_iteration;
        t->consumed_samples = consumed;
        if (!a->no_load_rng) {
            int64_t seed;
            if (checkpoint_get_int(&f, "/rng", "seed", &seed) != 0) user_error("%s lacks /rng/seed (pass --no-load-rng)", path);
            t->model.config.seed = (uint64_t)seed;
        }
    }
    uint64_t bytes = f.bytes;
    checkpoint_file_close(&f);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, t->topo.world.mpi));
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
