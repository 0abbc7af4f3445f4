/* generation_lockstep.c: see generation_lockstep.h. One command is three broadcasts from rank 0
 * of MPI_COMM_WORLD: a header {command, batch, total prompt tokens}, then (to generate) the
 * parameters as bytes (every rank runs this same binary) with the prompt lengths, then the
 * prompts' tokens back to back. */
#include "app/inference/generation_lockstep.h"
#include "app/core/error.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { COMMAND_STOP = 0, COMMAND_GENERATE = 1 };

static int world_size(void) {
    int size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    return size;
}

/* a broadcast from rank 0 that the waiting ranks poll with sleeps (an idle server costs no CPU) */
static void broadcast(void *buf, int count, MPI_Datatype type) {
    MPI_Request request;
    CHECK_MPI(MPI_Ibcast(buf, count, type, 0, MPI_COMM_WORLD, &request));
    int done = 0;
    const struct timespec pause = {0, 1000 * 1000}; /* 1 ms */
    for (;;) {
        CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (done) return;
        nanosleep(&pause, NULL);
    }
}

int generate_lockstep(generator *g, int batch, int32_t *const *prompts, const int *prompt_lengths,
                      const generation_params *p, generation_result *r, char *err, size_t errlen) {
    if (world_size() == 1) return generate(g, batch, prompts, prompt_lengths, p, r, err, errlen);
    long long total = 0;
    for (int b = 0; b < batch; b++) total += prompt_lengths[b];
    if (total > INT_MAX) return error_format(err, errlen, "%lld prompt tokens: too many", total);
    int header[3] = {COMMAND_GENERATE, batch, (int)total};
    broadcast(header, 3, MPI_INT);
    generation_params params = *p;
    int *lengths = malloc(sizeof(int) * (size_t)batch);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
    CHECK(lengths && tokens, "out of host memory for %d prompts", batch);
    memcpy(lengths, prompt_lengths, sizeof(int) * (size_t)batch);
    for (int b = 0, at = 0; b < batch; at += prompt_lengths[b], b++)
        memcpy(tokens + at, prompts[b], sizeof(int32_t) * (size_t)prompt_lengths[b]);
    broadcast(&params, (int)sizeof params, MPI_BYTE);
    broadcast(lengths, batch, MPI_INT);
    broadcast(tokens, (int)total, MPI_INT32_T);
    free(lengths);
    free(tokens);
    return generate(g, batch, prompts, prompt_lengths, p, r, err, errlen);
}

long generation_follow(generator *g) {
    long followed = 0;
    for (;;) {
        int header[3];
        broadcast(header, 3, MPI_INT);
        if (header[0] == COMMAND_STOP) return followed;
        if (header[0] != COMMAND_GENERATE || header[1] < 1 || header[2] < 0)
            FATAL("lockstep generation: unknown command %d (batch %d, %d tokens) from rank 0", header[0], header[1], header[2]);
        int batch = header[1], total = header[2];
        generation_params params;
        int *lengths = malloc(sizeof(int) * (size_t)batch);
        int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
        int32_t **prompts = malloc(sizeof(int32_t *) * (size_t)batch);
        CHECK(lengths && tokens && prompts, "out of host memory for %d prompts", batch);
        broadcast(&params, (int)sizeof params, MPI_BYTE);
        broadcast(lengths, batch, MPI_INT);
        broadcast(tokens, total, MPI_INT32_T);
        for (int b = 0, at = 0; b < batch; at += lengths[b], b++) prompts[b] = tokens + at;
        generation_result result;
        char err[1024];
        /* the same call as rank 0's: a refusal there is one here too, before any collective */
        generate(g, batch, prompts, lengths, &params, &result, err, sizeof err);
        generation_result_free(&result);
        free(prompts);
        free(tokens);
        free(lengths);
        followed++;
    }
}

void generation_lockstep_stop(generator *g) {
    (void)g;
    if (world_size() == 1) return;
    int header[3] = {COMMAND_STOP, 0, 0};
    broadcast(header, 3, MPI_INT);
}
