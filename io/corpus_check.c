/* corpus_check.c: see corpus_check.h. */
#include "io/corpus_check.h"
#include "app/core/error.h"
#include "io/hdf5_corpus.h"
#include "io/mmap_indexed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- the scan cache: FILE.checked ---- */

static void cache_key(const char *file, char *key, size_t size) {
    struct stat st;
    if (stat(file, &st) != 0) {
        key[0] = '\0';
        return;
    }
    snprintf(key, size, "megatron-c corpus check v1 size=%lld mtime=%lld.%09ld", (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

/* the cached largest id of file, or -2 when there is no valid cache */
static int64_t cache_read(const char *file) {
    char path[4200], key[256], line[512];
    snprintf(path, sizeof path, "%s.checked", file);
    cache_key(file, key, sizeof key);
    FILE *f = fopen(path, "r");
    if (!f) return -2;
    long long max_id = -2;
    size_t n = strlen(key);
    if (!fgets(line, sizeof line, f) || !key[0] || strncmp(line, key, n) ||
        sscanf(line + n, " max_token_id=%lld", &max_id) != 1)
        max_id = -2;
    fclose(f);
    return max_id;
}

/* best effort: a folder we cannot write to means the next open scans again */
static int cache_write(const char *file, int64_t max_id) {
    char path[4200], tmp[4300], key[256];
    snprintf(path, sizeof path, "%s.checked", file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cache_key(file, key, sizeof key);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    int ok = fprintf(f, "%s max_token_id=%lld\n", key, (long long)max_id) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* ---- the first bad document ---- */

static void hdf5_first_bad(hdf5_corpus *c, int64_t vocab_size, char *err, size_t errlen) {
    const int64_t chunk = (int64_t)1 << 22;
    int32_t *buffer = malloc(sizeof(int32_t) * (size_t)chunk);
    CHECK(buffer, "out of memory");
    for (int64_t first = 0; first < c->num_tokens; first += chunk) {
        int64_t n = c->num_tokens - first < chunk ? c->num_tokens - first : chunk;
        hdf5_corpus_read_tokens(c, first, n, buffer);
        for (int64_t k = 0; k < n; k++) {
            if (buffer[k] >= 0 && buffer[k] < vocab_size) continue;
            int64_t at = first + k, lo = 0, hi = c->num_documents; /* the document holding token `at` */
            while (hi - lo > 1) {
                int64_t mid = (lo + hi) / 2;
                if (c->document_offsets[mid] <= at) lo = mid;
                else hi = mid;
            }
            error_format(err, errlen, "%s: document %lld (token %lld of it) has id %d, outside the vocabulary "
                         "[0, %lld): a corpus made with another tokenizer, or a damaged file", c->path, (long long)lo,
                         (long long)(at - c->document_offsets[lo]), buffer[k], (long long)vocab_size);
            free(buffer);
            return;
        }
    }
    free(buffer);
    error_format(err, errlen, "%s: its metadata gives a largest token id outside the vocabulary [0, %lld), but no "
                 "token is (damaged metadata?)", c->path, (long long)vocab_size);
}

/* largest id of a .bin (and the first id outside [0, vocab_size) when vocab_size > 0) */
static int64_t mmap_scan(const mmap_indexed *m, int64_t vocab_size, char *err, size_t errlen) {
    int64_t max_id = -1;
    size_t capacity = 0;
    int32_t *buffer = NULL;
    for (int64_t s = 0; s < m->num_sequences; s++) {
        int64_t n = m->sequence_lengths[s];
        if ((size_t)n > capacity) {
            free(buffer);
            capacity = (size_t)n;
            buffer = malloc(sizeof(int32_t) * capacity);
            CHECK(buffer, "out of memory");
        }
        mmap_indexed_read(m, s, 0, n, buffer);
        for (int64_t k = 0; k < n; k++) {
            int64_t id = buffer[k] < 0 ? INT64_MAX : buffer[k];
            if (id > max_id) max_id = id;
            if (vocab_size > 0 && (buffer[k] < 0 || buffer[k] >= vocab_size)) {
                error_format(err, errlen, "%s: document %lld (token %lld of it) has id %d, outside the vocabulary "
                             "[0, %lld): a corpus made with another tokenizer, or a damaged file", m->bin_path,
                             (long long)s, (long long)k, buffer[k], (long long)vocab_size);
                free(buffer);
                return max_id;
            }
        }
    }
    free(buffer);
    return max_id;
}

/* ---- one corpus ---- */

static int check_hdf5(const char *path, int64_t vocab_size, int verify, char *note, size_t notelen, char *err,
                      size_t errlen) {
    hdf5_corpus *c = hdf5_corpus_open(path, err, errlen);
    if (!c) return -1;
    int status = 0;
    if (c->num_documents == 0 || c->num_tokens == 0) {
        status = error_format(err, errlen, "%s: the corpus holds no documents (did preprocess_data read the right "
                              "--json-keys from its input?)", path);
        goto out;
    }
    int64_t max_id = -2;
    if (c->max_token_id >= 0 && (!verify || !c->checksummed)) max_id = c->max_token_id;
    else if ((max_id = cache_read(path)) < -1) {
        if (hdf5_corpus_scan_tokens(c, &max_id, err, errlen) != 0) {
            status = -1;
            goto out;
        }
        int cached = cache_write(path, max_id) == 0;
        snprintf(note, notelen, "%s: scanned %lld tokens once%s (largest id %lld)%s%s", path, (long long)c->num_tokens,
                 c->checksummed ? ", every range matches its checksum" : "", (long long)max_id,
                 cached ? "; cached in " : "", cached ? "FILE.checked" : "");
    }
    if (max_id >= vocab_size) {
        hdf5_first_bad(c, vocab_size, err, errlen);
        status = -1;
    }
out:
    hdf5_corpus_close(c);
    return status;
}

static int check_mmap(const char *prefix, int64_t vocab_size, char *note, size_t notelen, char *err,
                      size_t errlen) {
    mmap_indexed *m = mmap_indexed_open(prefix, err, errlen);
    if (!m) return -1;
    int status = 0;
    if (m->num_sequences == 0 || m->num_tokens == 0) {
        status = error_format(err, errlen, "%s: the corpus holds no documents", m->bin_path);
    } else {
        int64_t max_id = cache_read(m->bin_path);
        if (max_id < -1) {
            max_id = mmap_scan(m, 0, err, errlen);
            int cached = cache_write(m->bin_path, max_id) == 0;
            snprintf(note, notelen, "%s: scanned %lld tokens once (largest id %lld)%s", m->bin_path,
                     (long long)m->num_tokens, (long long)max_id, cached ? "; cached in FILE.checked" : "");
        }
        if (max_id >= vocab_size) {
            mmap_scan(m, vocab_size, err, errlen);
            status = -1;
        }
    }
    mmap_indexed_close(m);
    return status;
}

int corpus_check(const char *prefix, int64_t vocab_size, int verify_checksums, char *note, size_t notelen,
                 char *err, size_t errlen) {
    char h5[4200], bin[4200], idx[4200];
    size_t n = strlen(prefix);
    note[0] = '\0';
    snprintf(h5, sizeof h5, "%s.h5", prefix);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    if (n > 3 && !strcmp(prefix + n - 3, ".h5") && file_exists(prefix)) snprintf(h5, sizeof h5, "%s", prefix);
    if (file_exists(h5)) return check_hdf5(h5, vocab_size, verify_checksums, note, notelen, err, errlen);
    if (file_exists(bin) || file_exists(idx)) return check_mmap(prefix, vocab_size, note, notelen, err, errlen);
    return 0; /* the dataset's own open names what is missing */
}

void corpus_check_all(const char *const *prefixes, int count, int64_t vocab_size, int verify_checksums,
                      MPI_Comm comm) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char err[9000] = "", note[9000];
    int status = 0;
    for (int i = 0; rank == 0 && i < count && !status; i++) {
        status = corpus_check(prefixes[i], vocab_size, verify_checksums, note, sizeof note, err, sizeof err);
        if (!status && note[0]) printf("> --data-path: %s\n", note);
    }
    fflush(stdout);
    CHECK_MPI(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
    if (status) user_error("--data-path: %s", err);
}
