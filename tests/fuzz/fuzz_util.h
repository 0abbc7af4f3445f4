/* fuzz_util.h: what the libFuzzer targets of tests/fuzz share: the input written to a file in a
 * private temporary folder (most parsers take a path), created once per process. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline const char *fuzz_dir(void) {
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/mtc-fuzz.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

/* writes bytes to fuzz_dir()/name and returns the path (a static buffer per name slot) */
static inline const char *fuzz_file(int slot, const char *name, const uint8_t *data, size_t size) {
    static char paths[4][512];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return paths[slot];
}

/* splits the input at the first "\n----\n" into two parts (the second empty when absent) */
static inline size_t fuzz_split(const uint8_t *data, size_t size, size_t *second) {
    static const char marker[] = "\n----\n";
    for (size_t i = 0; i + 6 <= size; i++)
        if (!memcmp(data + i, marker, 6)) {
            *second = i + 6;
            return i;
        }
    *second = size;
    return size;
}

#endif
