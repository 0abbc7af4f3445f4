/* index_cache.c: Megatron-Core's index cache files plus our checksum list (see index_cache.h). */
#include "app/data/index_cache.h"
#include "app/core/error.h"
#include "app/data/py_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

enum { PATH_BYTES = 4600, BASE_BYTES = 4400 };

void index_arrays_free(index_arrays *a) {
    for (int i = 0; i < a->count; i++) free(a->data[i]);
    memset(a, 0, sizeof *a);
}

static void file_path(char *out, const char *base, const char *suffix) {
    snprintf(out, PATH_BYTES, "%.4400s-%.100s", base, suffix);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* XXH3 of a file's bytes; -1 when it cannot be read */
static int file_xxh3(const char *path, uint64_t *hash) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    XXH3_state_t *state = XXH3_createState();
    CHECK(state, "out of memory");
    XXH3_64bits_reset(state);
    unsigned char buffer[1 << 16];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, f)) > 0) XXH3_64bits_update(state, buffer, n);
    int bad = ferror(f);
    fclose(f);
    *hash = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return bad ? -1 : 0;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t capacity = 4096, length = 0, n;
    char *text = malloc(capacity);
    CHECK(text, "out of memory");
    while ((n = fread(text + length, 1, capacity - length - 1, f)) > 0) {
        length += n;
        if (length + 1 == capacity) {
            capacity *= 2;
            text = realloc(text, capacity);
            CHECK(text, "out of memory");
        }
    }
    fclose(f);
    text[length] = '\0';
    return text;
}

static int write_text(const char *path, const char *text, char *err, size_t errlen) {
    char tmp[PATH_BYTES + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return error_format(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n, saved = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved = errno; }
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved = errno;
        remove(tmp);
        return error_format(err, errlen, "cannot write %s: %s", path, strerror(saved ? saved : EIO));
    }
    return 0;
}

/* the file suffixes of a request: description.txt, then NAME.npy for each array */
static void suffixes(const index_cache_request *r, char names[][64]) {
    snprintf(names[0], 64, "description.txt");
    for (int i = 0; i < r->count; i++) snprintf(names[i + 1], 64, "%s.npy", r->names[i]);
}

/* checksums.txt: "megatron-c index cache checksums v1", "content HEX", then "HEX  SUFFIX" */
static int write_checksums(const index_cache_request *r, const char *base, char *err, size_t errlen) {
    char names[INDEX_MAX_ARRAYS + 1][64], path[PATH_BYTES], text[2048];
    suffixes(r, names);
    int at = snprintf(text, sizeof text, "megatron-c index cache checksums v1\ncontent %016" PRIx64 "\n",
                      r->content_hash);
    for (int i = 0; i <= r->count; i++) {
        uint64_t hash;
        file_path(path, base, names[i]);
        if (file_xxh3(path, &hash) != 0) return error_format(err, errlen, "cannot read back %s", path);
        at += snprintf(text + at, sizeof text - (size_t)at, "%016" PRIx64 "  %s\n", hash, names[i]);
    }
    file_path(path, base, "checksums.txt");
    return write_text(path, text, err, errlen);
}

/* 0: every file matches its checksum; 1: no checksum list; -1: a mismatch (why names it) */
static int verify_checksums(const index_cache_request *r, const char *base, char *why, size_t whylen) {
    char path[PATH_BYTES], names[INDEX_MAX_ARRAYS + 1][64];
    file_path(path, base, "checksums.txt");
    char *text = read_text(path);
    if (!text) return 1;
    suffixes(r, names);
    int status = 0;
    unsigned long long content = 0;
    char *line = strstr(text, "\ncontent ");
    if (strncmp(text, "megatron-c index cache checksums v1\n", 36) || !line ||
        sscanf(line + 9, "%16llx", &content) != 1) {
        status = error_format(why, whylen, "%s is damaged", path);
        goto done;
    }
    if (content != r->content_hash) {
        status = error_format(why, whylen, "%s: the indices were built from other corpus contents", path);
        goto done;
    }
    for (int i = 0; i <= r->count; i++) {
        char pattern[400];
        snprintf(pattern, sizeof pattern, "  %s\n", names[i]);
        char *at = strstr(text, pattern);
        unsigned long long stored;
        if (!at || at - text < 16 || sscanf(at - 16, "%16llx", &stored) != 1) {
            status = error_format(why, whylen, "%s lists no checksum for %s", path, names[i]);
            goto done;
        }
        uint64_t hash;
        file_path(path, base, names[i]);
        if (file_xxh3(path, &hash) != 0 || hash != stored) {
            status = error_format(why, whylen, "checksum mismatch in %s (XXH3 %016" PRIx64 ", recorded %016llx)",
                                  path, hash, stored);
            goto done;
        }
    }
done:
    free(text);
    return status;
}

/* 0: loaded (*checked: 1 when a checksum list vouched for the files); 1: files missing;
 * -1: present but unusable (why says which file and what) */
static int load(const index_cache_request *r, const char *base, index_arrays *out, int *checked,
                char *why, size_t whylen) {
    char path[PATH_BYTES], names[INDEX_MAX_ARRAYS + 1][64];
    suffixes(r, names);
    memset(out, 0, sizeof *out);
    for (int i = 0; i <= r->count; i++) {
        file_path(path, base, names[i]);
        if (!is_file(path)) return 1;
    }
    file_path(path, base, names[0]);
    char *description = read_text(path);
    int same = description && !strcmp(description, r->description);
    free(description);
    if (!same) return error_format(why, whylen, "%s differs from this run's dataset description", path);
    int verified = verify_checksums(r, base, why, whylen);
    if (verified < 0) return -1;
    *checked = verified == 0;
    out->count = r->count;
    for (int i = 0; i < r->count; i++) {
        int64_t rows;
        file_path(path, base, names[i + 1]);
        if (npy_read(path, &out->data[i], &rows, &out->columns[i], &out->dtype[i], why, whylen) != 0) {
            index_arrays_free(out);
            return -1;
        }
        out->length[i] = rows * (out->columns[i] > 0 ? out->columns[i] : 1);
    }
    if (r->check(r->context, out, why, whylen) != 0) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", why);
        error_format(why, whylen, "%s*: %s", base, detail);
        index_arrays_free(out);
        return -1;
    }
    return 0;
}

/* mkdir -p (Megatron's os.makedirs(path_to_cache, exist_ok=True)) */
static int make_directories(const char *dir) {
    char path[PATH_BYTES];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
            *p = saved;
            if (saved == '\0') return 0;
        }
    }
}

static int save(const index_cache_request *r, const char *base, const index_arrays *a, char *err,
                size_t errlen) {
    char path[PATH_BYTES], names[INDEX_MAX_ARRAYS + 1][64];
    suffixes(r, names);
    if (make_directories(r->dir) != 0)
        return error_format(err, errlen, "cannot create the directory %s: %s", r->dir, strerror(errno));
    /* the checksum list goes last and is removed first: a half-written set never verifies */
    file_path(path, base, "checksums.txt");
    remove(path);
    file_path(path, base, names[0]);
    if (write_text(path, r->description, err, errlen) != 0) return -1;
    for (int i = 0; i < r->count; i++) {
        file_path(path, base, names[i + 1]);
        int columns = a->columns[i];
        int64_t rows = columns > 0 ? a->length[i] / columns : a->length[i];
        if (npy_write(path, a->dtype[i], a->data[i], rows, columns, err, errlen) != 0) return -1;
    }
    return write_checksums(r, base, err, errlen);
}

void index_cache_get(const index_cache_request *r, index_arrays *out, MPI_Comm comm,
                     index_cache_stats *stats, int verbose) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    memset(out, 0, sizeof *out);
    if (!r->dir || !r->dir[0]) {
        r->build(r->context, out);
        if (rank == 0 && stats) stats->built++;
        return;
    }
    char hash[33], base[BASE_BYTES], why[1024] = "", err[1024] = "";
    md5_hex(r->description, strlen(r->description), hash);
    if (r->split_not_in_names) snprintf(base, sizeof base, "%s/%s-%s", r->dir, hash, r->class_name);
    else snprintf(base, sizeof base, "%s/%s-%s-%s", r->dir, hash, r->class_name, r->split);
    int status = 0;   /* 0: files usable by all; 1: in memory (default dir not writable) */
    if (rank == 0) {
        int checked = 0, found = load(r, base, out, &checked, why, sizeof why);
        if (found == 0) {
            if (stats) stats->loaded++;
            if (verbose) printf(" > loaded the %s %s indices from %s-*\n", r->class_name, r->split, base);
            /* a cache written by Megatron-LM passed the range checks: record its checksums */
            if (!checked && write_checksums(r, base, err, sizeof err) != 0)
                fprintf(stderr, "%s: warning: %s\n", program_name, err);
        } else {
            if (found < 0) {
                fprintf(stderr, "%s: warning: index cache unusable: %s; rebuilding it\n", program_name, why);
                if (stats) stats->rebuilt++;
            } else if (stats) {
                stats->built++;
            }
            r->build(r->context, out);
            if (save(r, base, out, err, sizeof err) != 0) {
                if (!r->dir_is_default) status = -1;
                else {
                    status = 1;
                    fprintf(stderr, "%s: warning: Megatron's default index cache: %s; keeping the %s %s "
                            "indices in memory (--data-cache-path names another directory)\n",
                            program_name, err, r->class_name, r->split);
                }
            } else if (verbose) {
                printf(" > built the %s %s indices and wrote %s-*\n", r->class_name, r->split, base);
            }
        }
    }
    CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
    /* every rank ends (user_error prints rank 0's message, the one that knows it) */
    if (status < 0) user_error("--data-cache-path %s: %s", r->dir, err);
    if (rank != 0) {
        int checked = 0;
        if (status != 0 || load(r, base, out, &checked, why, sizeof why) != 0) {
            if (status == 0)
                fprintf(stderr, "[rank %d] %s: warning: cannot read back the index cache (%s); building locally\n",
                        rank, program_name, why);
            r->build(r->context, out);
        }
    }
}
