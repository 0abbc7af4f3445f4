/* nan_check.c: see nan_check.h. */
#include "app/training/nan_check.h"
#include "app/core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NOTE_MAX = 320, RANKS_LISTED = 8 };

/* the first of this rank's gradient tensors that holds a NaN or an infinity (NULL: none) and
 * how many of them do */
static const param_tensor *first_nonfinite_grad(const trainer *t, int *count, double *sum_squares) {
    const gpt_model *model = &t->model;
    const param_tensor *first = NULL;
    *count = 0;
    for (int i = 0; i < model->num_params; i++) {
        const param_tensor *p = &model->params[i];
        double s = model->ops->sum_squares(model->grad_buffer + p->offset, p->numel);
        if (isfinite(s)) continue;
        if (!first) {
            first = p;
            *sum_squares = s;
        }
        (*count)++;
    }
    return first;
}

/* every rank's note (empty: nothing to report) gathered on rank 0, which prints the headline
 * and the notes; then every rank leaves without saving */
static void stop_job(trainer *t, const char *headline, const char *note) __attribute__((noreturn));
static void stop_job(trainer *t, const char *headline, const char *note) {
    int rank = t->topo.world_rank, size = t->topo.world_size;
    char mine[NOTE_MAX];
    snprintf(mine, sizeof mine, "%s", note);
    char *all = rank == 0 ? malloc((size_t)size * NOTE_MAX) : NULL;
    CHECK(rank != 0 || all, "out of host memory for the NaN report");
    CHECK_MPI(MPI_Gather(mine, NOTE_MAX, MPI_CHAR, all, NOTE_MAX, MPI_CHAR, 0, MPI_COMM_WORLD));
    fflush(stdout);
    if (rank == 0) {
        char report[4096];
        int used = snprintf(report, sizeof report, "%s: error: %s", program_name, headline);
        int listed = 0, unlisted = 0;
        for (int r = 0; r < size; r++) {
            const char *n = all + (size_t)r * NOTE_MAX;
            if (!n[0]) continue;
            if (listed++ == RANKS_LISTED) unlisted = 1;
            if (unlisted) continue;
            used += snprintf(report + used, used < (int)sizeof report ? sizeof report - (size_t)used : 0,
                             "\n  rank %d: %s", r, n);
        }
        if (unlisted && used < (int)sizeof report)
            snprintf(report + used, sizeof report - (size_t)used, "\n  ... and %d more ranks", listed - RANKS_LISTED);
        fprintf(stderr, "%s\nstopping: nothing is saved from this state (the last checkpoint stays the newest); "
                        "--no-check-for-nan-in-loss-and-grad skips such steps instead\n", report);
        fflush(stderr);
        free(all);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Finalize();
    exit(1);
}

static void host_name(char *out, size_t size) {
    if (gethostname(out, size) != 0) snprintf(out, size, "?");
    out[size - 1] = '\0';
}

void nan_check_loss(trainer *t, int64_t iteration, double loss, double local_loss) {
    if (!t->args->check_for_nan_in_loss_and_grad || isfinite(loss)) return;
    char headline[256], note[NOTE_MAX] = "", host[64];
    snprintf(headline, sizeof headline, "the lm loss of iteration %lld is %g (found NaN or Inf in the forward "
             "loss; checked because --check-for-nan-in-loss-and-grad is on)", (long long)iteration, loss);
    host_name(host, sizeof host);
    if (!isfinite(local_loss))
        snprintf(note, sizeof note, "its share of the loss (last pipeline stage) is %g, node %s", local_loss, host);
    stop_job(t, headline, note);
}

void nan_check_grad_norm(trainer *t, int64_t iteration, double grad_norm) {
    if (!t->args->check_for_nan_in_loss_and_grad || isfinite(grad_norm)) return;
    char headline[256], note[NOTE_MAX] = "", host[64];
    snprintf(headline, sizeof headline, "the gradient norm of iteration %lld is %g after the data-parallel "
             "reduction (found NaN or Inf in the gradients, before the optimizer step)", (long long)iteration,
             grad_norm);
    host_name(host, sizeof host);
    int count = 0;
    double sum_squares = 0;
    const param_tensor *first = first_nonfinite_grad(t, &count, &sum_squares);
    if (first)
        snprintf(note, sizeof note, "first non-finite gradient %s (sum of squares %g), %d of its %d gradient "
                 "tensors non-finite, node %.40s", first->name, sum_squares, count, t->model.num_params, host);
    stop_job(t, headline, note);
}

void spiky_loss_check(spiky_loss_history *history, const trainer *t, int64_t iteration, double loss) {
    if (!t->args->check_for_spiky_loss || !isfinite(loss)) return;
    int64_t seen = history->count < SPIKY_LOSS_WINDOW ? history->count : SPIKY_LOSS_WINDOW;
    double largest = 0;
    for (int64_t i = 0; i < seen; i++)
        if (history->losses[i] > largest) largest = history->losses[i];
    if (seen > 0 && largest > 0 && loss > SPIKY_LOSS_FACTOR * largest && t->topo.world_rank == 0) {
        printf("WARNING: spiky loss at iteration %lld: lm loss %.6E is more than %dx the largest of the last "
               "%lld iterations (%.6E)\n", (long long)iteration, loss, SPIKY_LOSS_FACTOR, (long long)seen, largest);
        fflush(stdout);
    }
    history->losses[history->count % SPIKY_LOSS_WINDOW] = loss;
    history->count++;
}
