/* cpu_memory.c: "device" memory of the CPU backend is plain host memory: zero-filled buffers,
 * memcpy for every copy direction, and nothing to synchronize.
 * Buffers are written at allocation (not calloc's lazily mapped zero pages), so they are resident
 * from the start, like device memory: a job that does not fit fails at start-up rather than at
 * some page fault later, and the cost of first touching fresh pages is paid here, not inside
 * the first iteration or a checkpoint load. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

/* memset through a volatile pointer: compilers turn malloc + memset(0) into calloc, whose pages
 * stay unmapped until first written */
static void *(*const volatile fill_memory)(void *, int, size_t) = memset;

void *cpu_alloc(size_t bytes) {
    /* malloc(0) may return NULL; hand out a valid 1-byte block instead so NULL always means OOM */
    void *ptr = malloc(bytes ? bytes : 1);
    if (ptr == NULL) KERNELS_FATAL("cpu backend: out of memory allocating %zu bytes", bytes);
    fill_memory(ptr, 0, bytes ? bytes : 1);
    kernels_memory_record_alloc(ptr, bytes);
    return ptr;
}

void cpu_release(void *ptr) {
    kernels_memory_record_release(ptr);
    free(ptr);
}

void cpu_zero(void *ptr, size_t bytes) {
    if (bytes) memset(ptr, 0, bytes);
}

void cpu_copy_to_host(void *host_dst, const void *src, size_t bytes) {
    if (bytes) memcpy(host_dst, src, bytes);
}

void cpu_copy_from_host(void *dst, const void *host_src, size_t bytes) {
    if (bytes) memcpy(dst, host_src, bytes);
}

void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
}

void cpu_synchronize(void) {}
