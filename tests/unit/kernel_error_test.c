/* kernel_error_test.c: the kernels' one error path (kernels/kernels.h, kernels/kernel_error.c).
 *  1. A real failure inside the CPU backend (ops->alloc of an impossible size) reaches the
 *     installed handler, with the file and line of the check in kernels/cpu/cpu_memory.c and a
 *     message naming the size; the handler longjmps back, so the test goes on.
 *  2. kernels_fatal formats its message and passes file and line through unchanged.
 *  3. kernels_set_error_handler returns the handler it replaces.
 *  4. With no handler installed, the default prints "FATAL at file:line: message" to stderr and
 *     aborts (SIGABRT); a handler that returns falls back to the same default. Both run in a
 *     child process whose stderr the test reads. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "tests/tap.h"

/* under AddressSanitizer an impossible malloc must return NULL (as glibc's does), not abort */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* what the test handler saw */
static struct {
    int calls;
    char file[256];
    int line;
    char message[1024];
} seen;
static jmp_buf back_to_test;

static void recording_handler(const char *file, int line, const char *message) {
    seen.calls++;
    snprintf(seen.file, sizeof seen.file, "%s", file);
    seen.line = line;
    snprintf(seen.message, sizeof seen.message, "%s", message);
    longjmp(back_to_test, 1);
}

static void returning_handler(const char *file, int line, const char *message) {
    (void)file, (void)line, (void)message; /* breaks the contract: returns */
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static const size_t impossible_bytes = SIZE_MAX / 2;

/* 1: a failed allocation in the CPU backend goes to the installed handler */
static void check_cpu_alloc_failure(void) {
    const kernel_ops *ops = kernels_cpu();
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%zu", impossible_bytes);
    memset(&seen, 0, sizeof seen);
    kernels_set_error_handler(recording_handler);
    volatile int returned = 0;
    if (setjmp(back_to_test) == 0) {
        void *ptr = ops->alloc(impossible_bytes);
        returned = 1; /* not reached when the error path works */
        ops->release(ptr);
    }
    kernels_set_error_handler(NULL);
    tap_ok(seen.calls == 1 && !returned, "cpu alloc of %zu bytes calls the installed handler once (calls %d)",
           impossible_bytes, seen.calls);
    tap_ok(ends_with(seen.file, "kernels/cpu/cpu_memory.c") && seen.line > 0,
           "the handler is told the file and line of the check: %s:%d", seen.file, seen.line);
    tap_ok(strstr(seen.message, "out of memory") != NULL && strstr(seen.message, size_text) != NULL,
           "the message names the failure and the size: \"%s\"", seen.message);
}

/* 2 and 3: formatting, file and line, and the previous handler */
static void check_fatal_formats_and_passes_through(void) {
    memset(&seen, 0, sizeof seen);
    kernel_error_handler previous = kernels_set_error_handler(recording_handler);
    tap_ok(previous == NULL, "no handler is installed at start (the default is in effect)");
    if (setjmp(back_to_test) == 0) kernels_fatal("some/file.cu", 42, "%s failed: %d of %zu", "call()", 3, (size_t)7);
    tap_ok(seen.calls == 1 && strcmp(seen.file, "some/file.cu") == 0 && seen.line == 42 &&
           strcmp(seen.message, "call() failed: 3 of 7") == 0,
           "kernels_fatal formats the message and passes file and line: %s:%d: %s", seen.file,
           seen.line, seen.message);
    previous = kernels_set_error_handler(NULL);
    tap_ok(previous == recording_handler, "kernels_set_error_handler returns the handler it replaces");
}

/* 4: run the failing allocation in a child with `handler` installed (NULL: the default);
 * returns its wait status and what it wrote to stderr */
static int child_alloc_failure(kernel_error_handler handler, char *err, size_t errlen) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        kernels_set_error_handler(handler);
        kernels_cpu()->alloc(impossible_bytes);
        _exit(0); /* not reached when the error path works */
    }
    close(pipe_fds[1]);
    size_t used = 0;
    ssize_t got;
    while (used + 1 < errlen && (got = read(pipe_fds[0], err + used, errlen - 1 - used)) > 0) used += (size_t)got;
    err[used] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void check_default_handler(void) {
    char err[2048];
    int status = child_alloc_failure(NULL, err, sizeof err);
    tap_ok(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
           "without a handler the failure aborts the process (SIGABRT)");
    tap_ok(strstr(err, "FATAL at ") != NULL && strstr(err, "kernels/cpu/cpu_memory.c:") != NULL &&
           strstr(err, "out of memory") != NULL,
           "the default handler prints \"FATAL at file:line: message\": %.*s", (int)strcspn(err, "\n"), err);
    status = child_alloc_failure(returning_handler, err, sizeof err);
    tap_ok(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(err, "FATAL at ") != NULL,
           "a handler that returns falls back to the default: the process still aborts");
}

int main(void) {
    check_fatal_formats_and_passes_through();
    check_cpu_alloc_failure();
    check_default_handler();
    return tap_done();
}
