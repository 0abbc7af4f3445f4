/* train_timers.c: see train_timers.h. Where each timer runs here:
 *   forward-backward              training.c: the schedule and the gradient synchronization after it
 *   all-grads-sync, embedding-grads-all-reduce, layernorm-grads-all-reduce
 *                                 app/optim/data_parallel.c (finish_grad_sync)
 *   optimizer                     training.c: gradient norm, AdamW, parameter gather
 *   optimizer-clip-main-grad      app/optim/optimizer.c (the global norm; clipping is fused into
 *                                 the AdamW launch, as the copy of masters into the bf16 parameters is)
 *   optimizer-inner-step          app/optim/optimizer.c
 *   params-all-gather             app/optim/data_parallel.c (distributed optimizer without overlap)
 *   forward-compute, backward-compute, batch-generator and the send/recv timers
 *                                 app/training/pipeline_schedule.c (training steps only: evaluation
 *                                 is not timed, as Megatron clears config.timers for it) */
#include "app/training/train_timers.h"

#include "app/core/error.h"
#include "app/parallel/timeout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Megatron's training_log(): timers_to_log at --timing-log-level >= 1, then >= 2 */
static const char *const level_1_names[] = {
    "forward-backward", "layernorm-grads-all-reduce", "embedding-grads-all-reduce", "all-grads-sync",
    "params-all-gather", "optimizer-copy-to-main-grad", "optimizer-unscale-and-check-inf",
    "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step",
    "optimizer-copy-main-to-model-params", "optimizer",
};
static const char *const level_2_names[] = {
    "batch-generator", "forward-compute", "backward-compute", "forward-recv", "forward-send", "backward-recv",
    "backward-send", "forward-send-forward-recv", "forward-send-backward-recv", "backward-send-forward-recv",
    "backward-send-backward-recv", "forward-backward-send-forward-backward-recv",
};

void train_timers_setup(const args *a, const kernel_ops *ops) {
    timers_configure(a->timing_log_level, !a->no_barrier_with_level_1_timing, ops->synchronize, comm_timed_wait);
}

int train_timers_names(int log_level, const char **names, int capacity) {
    int count = 0;
    size_t n1 = sizeof level_1_names / sizeof level_1_names[0], n2 = sizeof level_2_names / sizeof level_2_names[0];
    for (size_t i = 0; log_level >= 1 && i < n1 && count < capacity; i++) names[count++] = level_1_names[i];
    for (size_t i = 0; log_level >= 2 && i < n2 && count < capacity; i++) names[count++] = level_2_names[i];
    return count;
}

void train_timers_collect(timers_table *table, const args *a) {
    const char *names[TIMERS_MAX];
    int count = train_timers_names(a->timing_log_level, names, TIMERS_MAX);
    timers_table_gather(table, names, count, 1, MPI_COMM_WORLD, comm_timed_wait);
}

void train_timers_log(train_log *log, const timers_table *table, const args *a, int64_t iteration,
                      double iterations, double seconds_per_iteration) {
    if (a->log_timers_to_tensorboard) {
        /* Megatron's Timers.write: the maximum over ranks, in seconds per iteration */
        tensorboard_events_scalar(&log->tensorboard, "iteration-time", seconds_per_iteration, iteration);
        for (int i = 0; i < table->num_names; i++) {
            double min, max;
            if (!timers_table_min_max(table, i, iterations, &min, &max)) continue;
            char tag[TIMERS_NAME_MAX + 8];
            snprintf(tag, sizeof tag, "%s-time", table->names[i]);
            tensorboard_events_scalar(&log->tensorboard, tag, max, iteration);
        }
    }
    /* the longest text: every rank's line of every timer ("all") */
    size_t len = 128 + (size_t)table->num_names * ((size_t)table->num_ranks + 1) * (TIMERS_NAME_MAX + 64);
    char *text = malloc(len);
    CHECK(text, "out of host memory for the timers' report");
    int option = timers_log_option_from_name(a->timing_log_option);
    if (timers_table_format(table, (timers_log_option)option, iterations, text, len) > 0) {
        printf("%s\n", text);
        fflush(stdout);
    }
    free(text);
}
