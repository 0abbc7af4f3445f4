/* error.c: the fatal-error and user-error paths described in error.h. */
#include "app/core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const char *program_name = "pretrain_gpt";

static int world_rank(void) {
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* The launcher (Hydra, Slurm) forwards a rank's stderr asynchronously, and MPI_Abort can end the
 * job before it has: the message just written would be lost. Pausing a moment before the abort
 * lets it through; nothing is waiting on a rank that is about to end the job anyway. */
static const struct timespec message_delivery_pause = {0, 500 * 1000 * 1000};

static void abort_job(int code) __attribute__((noreturn));
static void abort_job(int code) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        fflush(stdout);
        fflush(stderr);
        nanosleep(&message_delivery_pause, NULL);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    exit(code);
}

/* the message is formatted first and written with one call, so that the lines of ranks failing
 * together do not interleave */
void fatal_at(const char *file, int line, const char *fmt, ...) {
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "[rank %d] %s: FATAL at %s:%d: %s\n", world_rank(), program_name, file, line,
            message);
    fflush(stderr);
    abort_job(1);
}

void error_report_fatal(const char *file, int line, const char *message) {
    fatal_at(file, line, "%s", message);
}

void mpi_check_at(int err, const char *call, const char *file, int line) {
    if (err == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fatal_at(file, line, "%s failed: %s", call, msg);
}

int error_format(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void user_error(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    if (world_rank() == 0) {
        fprintf(stderr, "%s: error: ", program_name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n");
        fflush(stderr);
    }
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
    exit(2);
}

void user_error_local(const char *fmt, ...) {
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "[rank %d] %s: error: %s\n", world_rank(), program_name, message); /* one write */
    fflush(stderr);
    abort_job(2);
}
