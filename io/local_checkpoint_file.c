/* local_checkpoint_file.c: see local_checkpoint_file.h. */
#include "io/local_checkpoint_file.h"
#include "app/core/error.h"
#include "io/checkpoint_format.h" /* checkpoint_make_directory */
#include "io/io_fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

enum { TRAILER_BYTES = 24 };

void local_checkpoint_folder(char *out, size_t cap, const char *dir, int holder) {
    snprintf(out, cap, "%s/rank_%05d", dir, holder);
}

void local_checkpoint_path(char *out, size_t cap, const char *dir, int holder, int64_t iteration, int owner) {
    snprintf(out, cap, "%s/rank_%05d/iter_%07lld.rank_%05d.local", dir, holder, (long long)iteration, owner);
}

int local_checkpoint_parse_name(const char *name, int64_t *iteration, int *owner) {
    long long it;
    int rank, used = 0;
    if (sscanf(name, "iter_%lld.rank_%d.local%n", &it, &rank, &used) != 2 || used <= 0 || name[used] != '\0' ||
        it < 0 || rank < 0)
        return -1;
    *iteration = it;
    *owner = rank;
    return 0;
}

static void put_u64(unsigned char *at, uint64_t value) {
    for (int i = 0; i < 8; i++) at[i] = (unsigned char)(value >> (8 * i));
}

static uint64_t get_u64(const unsigned char *at) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value |= (uint64_t)at[i] << (8 * i);
    return value;
}

/* write all of data to fd */
static int write_all(int fd, const void *data, size_t bytes) {
    const char *p = data;
    while (bytes > 0) {
        if (io_fault_hit()) return -1;
        ssize_t n = write(fd, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

int local_checkpoint_file_write(const char *path, const void *payload, size_t bytes, char *err, size_t errlen) {
    char folder[LOCAL_CHECKPOINT_PATH_MAX], partial[LOCAL_CHECKPOINT_PATH_MAX + 16];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = '\0';
    if (slash && checkpoint_make_directory(folder, err, errlen) != 0) return -1;
    snprintf(partial, sizeof partial, "%s.partial", path);
    unsigned char trailer[TRAILER_BYTES];
    memcpy(trailer, LOCAL_CHECKPOINT_MAGIC, 8);
    put_u64(trailer + 8, bytes);
    put_u64(trailer + 16, XXH3_64bits(payload, bytes));
    int fd = io_fault_hit() ? -1 : open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return error_format(err, errlen, "cannot create %s: %s", partial, strerror(errno));
    int ok = write_all(fd, payload, bytes) == 0 && write_all(fd, trailer, sizeof trailer) == 0 && !io_fault_hit() &&
             (fsync(fd) == 0 || errno == EINVAL);
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok || io_fault_hit() || rename(partial, path) != 0) {
        if (ok) saved = errno;
        unlink(partial);
        return error_format(err, errlen, "cannot write %s: %s", path, strerror(saved));
    }
    if (slash) {
        int dir_fd = open(folder, O_RDONLY);
        if (dir_fd < 0 || (fsync(dir_fd) != 0 && errno != EINVAL)) {
            saved = errno;
            if (dir_fd >= 0) close(dir_fd);
            return error_format(err, errlen, "%s: cannot flush the folder: %s", folder, strerror(saved));
        }
        close(dir_fd);
    }
    return 0;
}

int local_checkpoint_file_read(const char *path, void **payload, size_t *bytes, int *missing, char *err,
                               size_t errlen) {
    *payload = NULL;
    *bytes = 0;
    *missing = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *missing = errno == ENOENT;
        return error_format(err, errlen, "%s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < TRAILER_BYTES) {
        fclose(f);
        return error_format(err, errlen, "%s: too short for a local checkpoint file (%lld bytes)", path,
                            (long long)st.st_size);
    }
    size_t total = (size_t)st.st_size, length = total - TRAILER_BYTES;
    unsigned char *data = malloc(total);
    if (!data) {
        fclose(f);
        return error_format(err, errlen, "%s: out of host memory for %zu bytes", path, total);
    }
    size_t got = fread(data, 1, total, f);
    fclose(f);
    const unsigned char *trailer = data + length;
    const char *why = got != total ? "cannot be read whole"
                      : memcmp(trailer, LOCAL_CHECKPOINT_MAGIC, 8) ? "lacks the MTCLOCAL trailer"
                      : get_u64(trailer + 8) != length ? "is truncated or extended (its length disagrees with its trailer)"
                      : get_u64(trailer + 16) != XXH3_64bits(data, length) ? "is damaged (its XXH3 checksum disagrees)"
                      : NULL;
    if (why) {
        free(data);
        return error_format(err, errlen, "%s %s", path, why);
    }
    *payload = data;
    *bytes = length;
    return 0;
}

static int compare_descending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int local_checkpoint_list_iterations(const char *dir, int holder, int64_t *iterations, int cap) {
    char folder[LOCAL_CHECKPOINT_PATH_MAX];
    local_checkpoint_folder(folder, sizeof folder, dir, holder);
    DIR *d = opendir(folder);
    if (!d) return 0;
    int count = 0;
    struct dirent *entry;
    int64_t found[256];
    while ((entry = readdir(d)) && count < (int)(sizeof found / sizeof found[0])) {
        int64_t iteration;
        int owner;
        if (local_checkpoint_parse_name(entry->d_name, &iteration, &owner) != 0) continue;
        int seen = 0;
        for (int i = 0; i < count; i++) seen |= found[i] == iteration;
        if (!seen) found[count++] = iteration;
    }
    closedir(d);
    qsort(found, (size_t)count, sizeof found[0], compare_descending);
    if (count > cap) count = cap;
    memcpy(iterations, found, sizeof found[0] * (size_t)count);
    return count;
}

int local_checkpoint_remove_others(const char *dir, int holder, int64_t keep) {
    char folder[LOCAL_CHECKPOINT_PATH_MAX], path[LOCAL_CHECKPOINT_PATH_MAX + 300];
    local_checkpoint_folder(folder, sizeof folder, dir, holder);
    DIR *d = opendir(folder);
    if (!d) return 0;
    int failures = 0;
    struct dirent *entry;
    while ((entry = readdir(d))) {
        int64_t iteration;
        int owner;
        size_t length = strlen(entry->d_name);
        int partial = length > 8 && !strcmp(entry->d_name + length - 8, ".partial") && !strncmp(entry->d_name, "iter_", 5);
        if (!partial && (local_checkpoint_parse_name(entry->d_name, &iteration, &owner) != 0 || iteration == keep))
            continue;
        snprintf(path, sizeof path, "%s/%s", folder, entry->d_name);
        failures += unlink(path) != 0 && errno != ENOENT;
    }
    closedir(d);
    return failures;
}
