/* io_error.c: see io_error.h. */
#include "io/io_error.h"
#include "app/core/error.h"
#include "io/io_fault.h"

#include <errno.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int debug_stack;
static char current_file[4096], current_activity[64];

void hdf5_errors_setup(int debug) {
    const char *env = getenv("MTC_HDF5_DEBUG");
    debug_stack = debug || (env && atoi(env) > 0);
    if (!debug_stack) H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

int hdf5_errors_debug(void) { return debug_stack; }

void io_error_set_file(const char *path, const char *activity) {
    snprintf(current_file, sizeof current_file, "%s", path ? path : "");
    snprintf(current_activity, sizeof current_activity, "%s", activity && path ? activity : "");
}

/* ---- the errno behind an HDF5 failure ---- */
static const int known_errors[] = {ENOSPC, EDQUOT, EROFS, EIO, EACCES, EFBIG, ENOENT, EBADF, EPERM, EISDIR, ENOTDIR};

typedef struct failure { int errnum; char mpi_text[128]; } failure;

static herr_t find_errno(unsigned n, const H5E_error2_t *e, void *data) {
    (void)n;
    failure *f = data;
    int *found = &f->errnum;
    const char *mpi = e->desc ? strstr(e->desc, "MPI error string is '") : NULL;
    if (mpi && !f->mpi_text[0]) {
        mpi += strlen("MPI error string is '");
        size_t len = strcspn(mpi, ",'\n");
        snprintf(f->mpi_text, sizeof f->mpi_text, "%.*s", (int)len, mpi);
    }
    if (*found || !e->desc) return 0;
    const char *at = strstr(e->desc, "errno = ");
    if (at && atoi(at + 8) > 0) {
        *found = atoi(at + 8);
        return 0;
    }
    for (size_t i = 0; i < sizeof known_errors / sizeof known_errors[0]; i++)
        if (strstr(e->desc, strerror(known_errors[i]))) {
            *found = known_errors[i];
            return 0;
        }
    return 0;
}

static failure last_failure;

int hdf5_failure_errno(void) {
    memset(&last_failure, 0, sizeof last_failure);
    if (io_fault_errno()) return io_fault_errno();
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_errno, &last_failure);
    return last_failure.errnum ? last_failure.errnum : EIO;
}

/* ---- one line per job ---- */
static int world_rank(void) {
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

static void report_once(const char *message) __attribute__((noreturn));
static void report_once(const char *message) {
    int rank = world_rank();
    /* bounded whatever blocks: the pause below, the message, the abort (app/core/error.h) */
    error_abort_watchdog(1, ERROR_ABORT_GRACE_SECONDS + 3);
    /* rank 0 speaks and aborts; another rank waits long enough for rank 0's abort to end it
     * when rank 0 failed too, and speaks (naming itself) when it failed alone */
    if (rank != 0) {
        struct timespec pause = {2, 0};
        nanosleep(&pause, NULL);
        fprintf(stderr, "%s: error: %s (rank %d)\n", program_name, message, rank);
    } else {
        fprintf(stderr, "%s: error: %s\n", program_name, message);
    }
    fflush(stderr);
    error_abort_job(1);
}

void io_fail(const char *file, const char *operation, int errnum) {
    char message[8192];
    /* no errno on HDF5's stack but an MPI-IO message ("Invalid file name"): that one */
    const char *reason = errnum == EIO && !last_failure.errnum && last_failure.mpi_text[0] ? last_failure.mpi_text
                                                                                         : strerror(errnum);
    snprintf(message, sizeof message, "%s%s%s: %s failed: %s", current_activity, current_activity[0] ? " " : "",
             file, operation, reason);
    report_once(message);
}

void io_fail_line(const char *message) { report_once(message); }

void hdf5_fail(const char *call, const char *source, int line) {
    int errnum = hdf5_failure_errno();
    if (debug_stack) H5Eprint2(H5E_DEFAULT, stderr);
    /* "H5Dwrite(dataset, ...)" -> "H5Dwrite"; "HDF5_IO(H5Dwrite(...))" -> "H5Dwrite"; other text as it is */
    char operation[256];
    if (!strncmp(call, "HDF5_IO(", 8)) call += 8;
    size_t n = strspn(call, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
    if (call[n] != '(') n = strlen(call);
    snprintf(operation, sizeof operation, "%.*s", (int)(n < sizeof operation ? n : sizeof operation - 1), call);
    if (current_file[0]) io_fail(current_file, operation, errnum);
    char message[1024];
    snprintf(message, sizeof message, "HDF5 call %s failed at %s:%d: %s", operation, source, line, strerror(errnum));
    report_once(message);
}
