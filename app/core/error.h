/* error.h: uniform error handling (PETSc style). Every library call is checked through one macro
 * per library; a failure names the call, the rank, the file and line, and aborts the whole job
 * with MPI_Abort so that no rank is left hanging. User mistakes (flags, configs, input files) go
 * through user_error(), which prints one message (from rank 0 when all ranks see the same input). */
#ifndef ERROR_H
#define ERROR_H

#include <mpi.h>
#include <stddef.h>

/* abort the job: "[rank R] FATAL at file:line: message" on stderr, then MPI_Abort(…, 1) */
void fatal_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define FATAL(...) fatal_at(__FILE__, __LINE__, __VA_ARGS__)

/* the same for a message already formatted: the handler a lower layer reports through. Programs
 * that use the kernels install it right after MPI_Init, so a failed allocation or CUDA call
 * names the rank and ends the job like any FATAL:
 *     kernels_set_error_handler(error_report_fatal);   (kernels/kernels.h) */
void error_report_fatal(const char *file, int line, const char *message) __attribute__((noreturn));

/* check an MPI call; on failure name it with MPI's error string */
void mpi_check_at(int err, const char *call, const char *file, int line);
#define CHECK_MPI(call) mpi_check_at((call), #call, __FILE__, __LINE__)

/* a condition that must hold; names the failing expression */
#define CHECK(cond, ...) do { if (!(cond)) fatal_at(__FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Bad user input seen identically by every rank (flags, config files): rank 0 prints
 * "pretrain_gpt: error: message", every rank finalizes MPI and exits with status 2. */
void user_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Bad user input seen by this rank only (a file only it reads): print and abort the job. */
void user_error_local(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Ends the job from a failing rank, its message already on stderr: flushes stdout without
 * blocking, pauses so that the launcher can forward the message, then MPI_Abort(code), or
 * exit(code) outside MPI. The abort is bounded: a rank whose abort has not ended it within
 * ERROR_ABORT_GRACE_SECONDS (a launcher that stopped never answers MPI_Abort) exits by itself
 * with _exit(code). */
enum { ERROR_ABORT_GRACE_SECONDS = 5 };
void error_abort_job(int code) __attribute__((noreturn));

/* Arms that bound early, before writing a message that could block (a stderr nobody drains):
 * after `seconds` the process ends with _exit(code). The first call arms it; later ones do
 * nothing. */
void error_abort_watchdog(int code, int seconds);

/* fflush(stdout) that never blocks (an undrained pipe loses what does not fit) */
void error_flush_stdout(void);

/* Recoverable errors (bad input a caller may report its own way) travel as a message buffer
 * passed down with its size, `char *err, size_t errlen`, in every layer; a function that fails
 * writes one line there and returns -1. error_format is the one way to do that:
 *     if (n < 0) return error_format(err, errlen, "%s: bad count %d", path, n); */
int error_format(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* program name used in messages (set once by main) */
extern const char *program_name;

#endif
