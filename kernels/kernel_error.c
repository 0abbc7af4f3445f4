/* kernel_error.c: how a kernel backend reports a failure (see "errors" in kernels/kernels.h).
 * Checks in kernels/ call kernels_fatal(); it formats the message and passes it to the handler
 * the application installed (error_report_fatal: rank, file, line, MPI_Abort), or to the default
 * below when none is installed. The default's abort() is the only one in the tree. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"

static void default_error_handler(const char *file, int line, const char *message)
    __attribute__((noreturn));
static void default_error_handler(const char *file, int line, const char *message) {
    fflush(stdout);
    fprintf(stderr, "FATAL at %s:%d: %s\n", file, line, message);
    fflush(stderr);
    abort();
}

static kernel_error_handler installed_handler = NULL;

kernel_error_handler kernels_set_error_handler(kernel_error_handler handler) {
    kernel_error_handler previous = installed_handler;
    installed_handler = handler;
    return previous;
}

void kernels_fatal(const char *file, int line, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (installed_handler != NULL) installed_handler(file, line, message);
    /* no handler, or one that returned: a failed kernel cannot go on */
    default_error_handler(file, line, message);
}
