/* finetune.c: finetune_bert (see finetune.h): the task data read on every rank after the
 * arguments, the epochs turned into --train-iters, rows handed to the trainer, and the accuracy
 * after each epoch. */
#include "app/tasks/finetune.h"
#include "app/tasks/task_data.h"

#include "app/core/error.h"
#include "app/data/numpy_random.h"
#include "app/training/pretrain_main.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PATHS = 64 };

typedef struct finetune_state {
    task_kind kind;
    task_dataset train;
    task_dataset valid[MAX_PATHS];
    char valid_names[MAX_PATHS][256];
    int num_valid;
    int current_valid;             /* the dataset that SPLIT_VALID rows come from */
    int choices;                   /* rows per sample */
    int samples_per_micro_batch;   /* --micro-batch-size as given (samples) */
    int data_parallel_size;
    int64_t iterations_per_epoch;
    int64_t samples_per_epoch;     /* iterations x samples per global batch */
    uint32_t seed;
    int epochs;
    int64_t *order;                /* the epoch's DistributedSampler order, padded */
    int64_t padded_count;
    int order_epoch;               /* the epoch `order` belongs to (-1: none yet) */
    int T;
    int rank;
} finetune_state;

/* --train-data "a b c" -> paths (pointing into words, a copy) */
static int split_paths(char *words, const char **paths) {
    int n = 0;
    for (char *w = strtok(words, " "); w; w = strtok(NULL, " ")) {
        if (n == MAX_PATHS) user_error("at most %d data paths", MAX_PATHS);
        paths[n++] = w;
    }
    return n;
}

/* tasks/glue/finetune.py and tasks/race/finetune.py's name_from_datapath */
static void dataset_name(task_kind kind, const char *path, char *out, size_t size) {
    const char *marker = kind == TASK_MNLI ? "MNLI" : "RACE", *tail = path, *hit;
    while ((hit = strstr(tail, marker))) tail = hit + 4;  /* split(marker)[-1] */
    size_t start = 0, end = strlen(tail);
    const char *strip_set = kind == TASK_MNLI ? ".tsv" : "";  /* MNLI: .strip('.tsv') strips those characters */
    while (start < end && strchr(strip_set, tail[start]) && tail[start]) start++;
    while (end > start && strchr(strip_set, tail[end - 1]) && tail[end - 1]) end--;
    while (start < end && tail[start] == '/') start++;  /* .strip('/') */
    while (end > start && tail[end - 1] == '/') end--;
    size_t n = 0;
    for (size_t i = start; i < end && n + 1 < size; i++)
        out[n++] = kind == TASK_MNLI ? (tail[i] == '_' ? '-' : tail[i]) : (tail[i] == '/' ? '-' : tail[i]);
    out[n] = '\0';
}

static void load_dataset(finetune_state *f, tokenizer *tok, const char *path, task_dataset *out) {
    char err[4096];
    const char *paths[1] = {path};
    if (task_dataset_load(f->kind, paths, 1, tok, f->T, out, err, sizeof err)) user_error("%s", err);
}

static void after_args(void *context, args *a, int argc, char **argv, int world_size) {
    finetune_state *f = context;
    CHECK(task_kind_parse(a->task, &f->kind) == 0, "--task %s passed validation", a->task);
    f->T = a->seq_length;
    f->choices = f->kind == TASK_RACE ? TASK_RACE_CHOICES : 1;
    f->seed = (uint32_t)a->seed;
    f->epochs = a->epochs;
    f->order_epoch = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &f->rank);
    if (a->num_micro_batches != 1)
        user_error("finetune_bert: --global-batch-size %d must be --micro-batch-size %d x data-parallel size %d "
                   "(Megatron's fine-tuning runs one micro-batch per iteration)", a->global_batch_size,
                   a->micro_batch_size, a->data_parallel_size);
    char err[1024];
    tokenizer *tok = tokenizer_create(a->tokenizer_type, a->vocab_file, a->merge_file, 0, err, sizeof err);
    if (!tok) user_error("%s", err);
    if (tokenizer_pad(tok) != 0)
        user_error("finetune_bert: the vocabulary's [PAD] has id %d; Megatron pads the token types with the pad id, "
                   "which must be 0 for the 2 token types", tokenizer_pad(tok));
    char *words = strdup(a->train_data), *valid_words = strdup(a->valid_data);
    CHECK(words && valid_words, "out of memory");
    const char *paths[MAX_PATHS];
    int n = split_paths(words, paths);
    char message[4096];
    if (f->rank == 0) printf(" > building %s dataset for training:\n", a->task);
    if (task_dataset_load(f->kind, paths, n, tok, f->T, &f->train, message, sizeof message)) user_error("%s", message);
    if (f->rank == 0) printf("  >> total number of samples: %lld\n", (long long)f->train.count);
    f->num_valid = split_paths(valid_words, paths);
    for (int i = 0; i < f->num_valid; i++) {
        load_dataset(f, tok, paths[i], &f->valid[i]);
        dataset_name(f->kind, paths[i], f->valid_names[i], sizeof f->valid_names[i]);
    }
    tokenizer_free(tok);
    free(words);
    free(valid_words);
    /* DistributedSampler pads to a multiple of the replicas; drop_last gives whole batches */
    f->data_parallel_size = a->data_parallel_size;
    f->samples_per_micro_batch = a->micro_batch_size;
    int64_t per_rank = (f->train.count + f->data_parallel_size - 1) / f->data_parallel_size;
    f->padded_count = per_rank * f->data_parallel_size;
    f->iterations_per_epoch = per_rank / f->samples_per_micro_batch;
    if (f->iterations_per_epoch == 0)
        user_error("--train-data holds %lld samples: fewer than one micro-batch of %d per data-parallel rank (%d ranks)",
                   (long long)f->train.count, f->samples_per_micro_batch, f->data_parallel_size);
    f->samples_per_epoch = f->iterations_per_epoch * f->samples_per_micro_batch * f->data_parallel_size;
    /* the arguments again, now with the iterations (the learning-rate schedule follows them) */
    args_set_task_train_iters((int64_t)a->epochs * f->iterations_per_epoch);
    args_parse(a, argc, argv, world_size);
    if (f->choices > 1) {  /* Megatron's sample_multiplier */
        a->micro_batch_size *= f->choices;
        a->global_batch_size *= f->choices;
    }
    if (f->rank == 0) {
        printf("> %s: %lld training samples, %lld iterations per epoch x %d epochs = %lld iterations; "
               "%d validation set%s\n", a->task, (long long)f->train.count, (long long)f->iterations_per_epoch,
               a->epochs, (long long)a->train_iters, f->num_valid, f->num_valid == 1 ? "" : "s");
        fflush(stdout);
    }
    f->order = malloc(sizeof(int64_t) * (size_t)f->padded_count);
    CHECK(f->order, "out of memory");
}

/* DistributedSampler's indices of epoch e: a permutation (seeded seed + e), padded with its start */
static void epoch_order(finetune_state *f, int epoch) {
    if (f->order_epoch == epoch) return;
    int64_t n = f->train.count;
    for (int64_t i = 0; i < n; i++) f->order[i] = i;
    numpy_random_state rng;
    numpy_random_seed(&rng, f->seed + (uint32_t)epoch);
    numpy_random_shuffle(&rng, f->order, n);
    for (int64_t i = n; i < f->padded_count; i++) f->order[i] = f->order[(i - n) % n];
    f->order_epoch = epoch;
}

static void put_row(const task_dataset *d, int64_t sample, int choice, int label, int b, int B, int *tokens,
                    int *targets, int choices) {
    size_t T = (size_t)d->seq_length, N = (size_t)B * T;
    size_t from = ((size_t)sample * (size_t)d->rows_per_sample + (size_t)choice) * T, to = (size_t)b * T;
    for (size_t i = 0; i < T; i++) {
        tokens[to + i] = d->ids[from + i];
        tokens[N + to + i] = d->types[from + i];
        tokens[2 * N + to + i] = d->paddings[from + i];
        targets[to + i] = 0;
        targets[N + to + i] = 0;
    }
    if (choice == 0) targets[2 * N + (size_t)(b / choices)] = label;
}

static void load_row(void *context, int split, int64_t index, int b, int *tokens, int *targets) {
    finetune_state *f = context;
    int B = f->samples_per_micro_batch * f->choices, choice = (int)(index % f->choices);
    int64_t position = index / f->choices;
    if (split == SPLIT_VALID) {  /* in order; past the end: padding samples (label -1, not counted) */
        const task_dataset *d = &f->valid[f->current_valid];
        int padding = position >= d->count;
        int64_t sample = padding ? 0 : position;
        put_row(d, sample, choice, padding ? -1 : d->labels[sample], b, B, tokens, targets, f->choices);
        return;
    }
    /* training: position p of the epoch's global batches -> (iteration k, rank r, row bb of its
     * micro-batch) -> the sampler's padded index (k mbs + bb) dp + r */
    int epoch = (int)(position / f->samples_per_epoch);
    int64_t p = position % f->samples_per_epoch, per_iteration = (int64_t)f->samples_per_micro_batch * f->data_parallel_size;
    int64_t k = p / per_iteration, r = (p % per_iteration) / f->samples_per_micro_batch, bb = p % f->samples_per_micro_batch;
    epoch_order(f, epoch);
    int64_t sample = f->order[(k * f->samples_per_micro_batch + bb) * f->data_parallel_size + r];
    put_row(&f->train, sample, choice, f->train.labels[sample], b, B, tokens, targets, f->choices);
}

/* tasks/eval_utils.py's accuracy_func_provider: every validation set in whole global batches */
static void report_accuracy(finetune_state *f, trainer *t, int epoch) {
    if (f->rank == 0) printf("calculating metrics ...\n");
    int64_t correct = 0, total = 0;
    int64_t rows_per_batch = (int64_t)t->args->global_batch_size;
    int64_t samples_per_batch = rows_per_batch / f->choices;
    for (int v = 0; v < f->num_valid; v++) {
        double start = MPI_Wtime();
        f->current_valid = v;
        int64_t right = 0, count = f->valid[v].count;
        for (int64_t first = 0; first < count; first += samples_per_batch) {
            trainer_forward_batch(t, SPLIT_VALID, first * f->choices);
            right += (int64_t)(t->last_task_correct + 0.5);
        }
        if (f->rank == 0)
            printf(" > |epoch: %d| metrics for %s: correct / total = %lld / %lld = %.4f %%, elapsed time (sec): %.3f\n",
                   epoch, f->valid_names[v], (long long)right, (long long)count, 100.0 * (double)right / (double)count,
                   MPI_Wtime() - start);
        correct += right;
        total += count;
    }
    if (f->rank == 0) {
        printf(" >> |epoch: %d| overall: correct / total = %lld / %lld = %.4f %%\n", epoch, (long long)correct,
               (long long)total, 100.0 * (double)correct / (double)total);
        fflush(stdout);
    }
}

static void after_iteration(void *context, trainer *t) {
    finetune_state *f = context;
    if (t->iteration % f->iterations_per_epoch != 0) return;
    int epoch = (int)(t->iteration / f->iterations_per_epoch) - 1;  /* the one just finished */
    report_accuracy(f, t, epoch);
    if (epoch + 1 < f->epochs && f->rank == 0) {
        printf("working on epoch %d ...\n", epoch + 2);
        fflush(stdout);
    }
}

static trainer_task_source source;

static void before_train(void *context, trainer *t) {
    finetune_state *f = context;
    source = (trainer_task_source){f, load_row, after_iteration};
    t->task = &source;
    if (t->iteration % f->iterations_per_epoch != 0)
        user_error("finetune_bert: --load resumes at iteration %lld, inside epoch %lld (%lld iterations each): "
                   "resuming within an epoch is not supported yet", (long long)t->iteration,
                   (long long)(t->iteration / f->iterations_per_epoch) + 1, (long long)f->iterations_per_epoch);
    if (f->rank == 0 && t->iteration < t->args->train_iters) {
        printf("working on epoch %lld ...\n", (long long)(t->iteration / f->iterations_per_epoch) + 1);
        fflush(stdout);
    }
}

int finetune_bert_main(int argc, char **argv) {
    static finetune_state state;
    pretrain_hooks hooks = {&state, after_args, before_train};
    int status = pretrain_main_with(argc, argv, "finetune_bert", &hooks);
    task_dataset_free(&state.train);
    for (int v = 0; v < state.num_valid; v++) task_dataset_free(&state.valid[v]);
    free(state.order);
    return status;
}
