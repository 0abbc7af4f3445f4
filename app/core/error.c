/* error.c: the fatal-error and user-error paths described in error.h. */
#include "app/core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

/* ---- the bound on an abort ----
 * MPI_Abort asks the launcher to end the job and waits for its answer; a launcher that stopped
 * (a hung mpiexec proxy, a stuck node daemon) never answers, and the rank would wait forever.
 * A detached thread armed before anything that can block (the message, the flushes, the
 * abort) ends the process with _exit after the grace period, whatever the main thread does. */
static atomic_int watchdog_armed;
static int watchdog_code;
static int watchdog_seconds;

static void *abort_watchdog(void *unused) {
    (void)unused;
    struct timespec left = {watchdog_seconds, 0};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
    _exit(watchdog_code);
}

void error_abort_watchdog(int code, int seconds) {
    if (atomic_exchange(&watchdog_armed, 1)) return;
    watchdog_code = code;
    watchdog_seconds = seconds;
    pthread_attr_t attr;
    pthread_t thread;
    int started = pthread_attr_init(&attr) == 0 && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&thread, &attr, abort_watchdog, NULL) == 0;
    if (!started) alarm((unsigned)seconds + 1);  /* no thread: SIGALRM's default action ends the process */
}

void error_flush_stdout(void) {
    /* a stdout that the launcher no longer drains must not hold the error message back:
     * flush without blocking (what does not fit is lost; the job is ending) */
    int fd = fileno(stdout), flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    fflush(stdout);
    if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(fd, F_SETFL, flags);
}

void error_abort_job(int code) {
    error_abort_watchdog(code, ERROR_ABORT_GRACE_SECONDS);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        error_flush_stdout();
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
    error_abort_watchdog(1, ERROR_ABORT_GRACE_SECONDS + 1);  /* the message and the flushes are bounded too */
    error_flush_stdout();
    fprintf(stderr, "[rank %d] %s: FATAL at %s:%d: %s\n", world_rank(), program_name, file, line,
            message);
    fflush(stderr);
    error_abort_job(1);
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
    error_abort_watchdog(2, ERROR_ABORT_GRACE_SECONDS + 1);
    error_flush_stdout();
    fprintf(stderr, "[rank %d] %s: error: %s\n", world_rank(), program_name, message); /* one write */
    fflush(stderr);
    error_abort_job(2);
}
