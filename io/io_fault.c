/* io_fault.c: see io_fault.h. */
#include "io/io_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int active;          /* inside a save, with MTC_FAIL_IO_CALL set */
static long long calls, fail_at;
static int my_rank, injected;

void io_fault_save_begin(int rank) {
    const char *call = getenv("MTC_FAIL_IO_CALL");
    const char *on_rank = getenv("MTC_FAIL_IO_RANK");
    active = call != NULL && (on_rank ? atoi(on_rank) : 0) == rank;
    calls = 0;
    fail_at = call ? atoll(call) : 0;
    my_rank = rank;
    injected = 0;
}

void io_fault_save_end(void) {
    if (active && fail_at == 0) {
        fprintf(stderr, "io_fault: %lld calls on rank %d\n", calls, my_rank);
        fflush(stderr);
    }
    active = 0;
}

static int chosen_errno(void) {
    const char *name = getenv("MTC_FAIL_IO_ERRNO");
    if (!name || !strcmp(name, "ENOSPC")) return ENOSPC;
    if (!strcmp(name, "EDQUOT")) return EDQUOT;
    if (!strcmp(name, "EROFS")) return EROFS;
    return EIO;
}

int io_fault_hit(void) {
    if (!active) return 0;
    if (++calls != fail_at) return 0;
    injected = chosen_errno();
    errno = injected;
    return 1;
}

int io_fault_errno(void) { return injected; }
