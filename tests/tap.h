/* tap.h: minimal TAP producer for the C tests (automake's tap-driver.sh reads it).
 * tap_ok(cond, fmt, ...) prints "ok N - ..." or "not ok N - ..."; tap_skip(fmt, ...) prints
 * "ok N # SKIP ..." (a check this machine cannot make); tap_done() prints the plan and returns the
 * process exit code (0 when everything passed). */
#ifndef TAP_H
#define TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count = 0, tap_failed = 0;

static inline int tap_ok(int cond, const char *fmt, ...) {
    va_list ap;
    tap_count++;
    if (!cond) tap_failed++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return cond;
}

static inline void tap_skip(const char *fmt, ...) {
    va_list ap;
    tap_count++;
    printf("ok %d # SKIP ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline void tap_diag(const char *fmt, ...) {
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static inline int tap_done(void) {
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
