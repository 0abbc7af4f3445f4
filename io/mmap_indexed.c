/* mmap_indexed.c: Megatron's MMIDIDX .bin/.idx pair: validated mmap reader and a writer that
 * produces byte-identical files to Megatron's IndexedDatasetBuilder (see mmap_indexed.h). */
#include "io/mmap_indexed.h"
#include "app/core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char index_magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
enum { header_size = 9 + 8 + 1 + 8 + 8 };

int mmap_dtype_size(int code) {
    switch (code) {
    case MMAP_DTYPE_UINT8: case MMAP_DTYPE_INT8: return 1;
    case MMAP_DTYPE_INT16: case MMAP_DTYPE_UINT16: return 2;
    case MMAP_DTYPE_INT32: case MMAP_DTYPE_FLOAT32: return 4;
    case MMAP_DTYPE_INT64: case MMAP_DTYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static void *map_file(const char *path, size_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *size = (size_t)st.st_size;
    void *map = NULL;
    if (*size == 0) {
        map = calloc(1, 8);  /* an empty .bin is legal: nothing to map */
    } else {
        map = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            snprintf(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            map = NULL;
        }
    }
    close(fd);
    return map;
}

static void unmap(void *map, size_t size) {
    if (!map) return;
    if (size == 0) free(map);
    else munmap(map, size);
}

static uint64_t read_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

mmap_indexed *mmap_indexed_open(const char *prefix, char *err, size_t errlen) {
    mmap_indexed *m = calloc(1, sizeof *m);
    CHECK(m, "out of memory");
    snprintf(m->idx_path, sizeof m->idx_path, "%s.idx", prefix);
    snprintf(m->bin_path, sizeof m->bin_path, "%s.bin", prefix);
    const char *path = m->idx_path;
    m->idx_map = map_file(m->idx_path, &m->idx_size, err, errlen);
    if (!m->idx_map) goto fail;
    const unsigned char *p = m->idx_map;
    if (m->idx_size < header_size || memcmp(p, index_magic, 9) != 0) {
        snprintf(err, errlen, "%s: not a Megatron index file (wrong magic: expected "
                 "\"MMIDIDX\\0\\0\")", path);
        goto fail;
    }
    uint64_t version = read_u64(p + 9);
    if (version != 1) {
        snprintf(err, errlen, "%s: index version %llu, only version 1 is supported", path,
                 (unsigned long long)version);
        goto fail;
    }
    m->dtype_code = p[17];
    m->dtype_size = mmap_dtype_size(m->dtype_code);
    if (m->dtype_size == 0 || m->dtype_code == MMAP_DTYPE_FLOAT32 ||
        m->dtype_code == MMAP_DTYPE_FLOAT64) {
        snprintf(err, errlen, "%s: dtype code %d is not an integer token type", path,
                 m->dtype_code);
        goto fail;
    }
    uint64_t sequences = read_u64(p + 18), documents = read_u64(p + 26);
    if (sequences > (1ull << 40) || documents > (1ull << 40) ||
        header_size + sequences * 12 + documents * 8 > m->idx_size) {
        snprintf(err, errlen, "%s: header says %llu sequences and %llu document indices, which "
                 "need %llu bytes, but the file has %zu (truncated?)", path,
                 (unsigned long long)sequences, (unsigned long long)documents,
                 (unsigned long long)(header_size + sequences * 12 + documents * 8), m->idx_size);
        goto fail;
    }
    if (documents < 1) {
        snprintf(err, errlen, "%s: no document indices (needs at least the leading 0)", path);
        goto fail;
    }
    m->num_sequences = (int64_t)sequences;
    m->num_documents = (int64_t)documents - 1;
    /* numpy.frombuffer reads these unaligned-safe; our offsets 34 + 4S are 2-aligned only, so
     * the arrays are copied when misaligned */
    const unsigned char *lengths_at = p + header_size;
    const unsigned char *pointers_at = lengths_at + 4 * sequences;
    const unsigned char *documents_at = pointers_at + 8 * sequences;
    int32_t *lengths = malloc(4 * sequences + 1);
    int64_t *pointers = malloc(8 * sequences + 1), *docs = malloc(8 * documents);
    CHECK(lengths && pointers && docs, "out of memory reading %s", path);
    memcpy(lengths, lengths_at, 4 * sequences);
    memcpy(pointers, pointers_at, 8 * sequences);
    memcpy(docs, documents_at, 8 * documents);
    m->sequence_lengths = lengths;
    m->sequence_pointers = pointers;
    m->document_indices = docs;

    path = m->bin_path;
    m->bin_map = map_file(m->bin_path, &m->bin_size, err, errlen);
    if (!m->bin_map) goto fail;
    int64_t expected = 0;
    for (int64_t i = 0; i < m->num_sequences; i++) {
        if (lengths[i] < 0 || pointers[i] != expected) {
            snprintf(err, errlen, "%s: sequence %lld has length %d at byte %lld, expected byte "
                     "%lld (damaged index)", m->idx_path, (long long)i, lengths[i],
                     (long long)pointers[i], (long long)expected);
            goto fail;
        }
        expected += (int64_t)lengths[i] * m->dtype_size;
    }
    if ((size_t)expected != m->bin_size) {
        snprintf(err, errlen, "%s: is %zu bytes but %s describes %lld bytes (%lld tokens of %d "
                 "bytes): the pair does not match or a file is truncated", m->bin_path,
                 m->bin_size, m->idx_path, (long long)expected,
                 (long long)(expected / m->dtype_size), m->dtype_size);
        goto fail;
    }
    m->num_tokens = expected / m->dtype_size;
    for (int64_t i = 0; i <= m->num_documents; i++) {
        if (docs[i] < 0 || docs[i] > m->num_sequences || (i > 0 && docs[i] < docs[i - 1])) {
            snprintf(err, errlen, "%s: document index %lld is %lld, outside [previous, %lld] "
                     "(damaged index)", m->idx_path, (long long)i, (long long)docs[i],
                     (long long)m->num_sequences);
            goto fail;
        }
    }
    return m;
fail:
    mmap_indexed_close(m);
    return NULL;
}

void mmap_indexed_close(mmap_indexed *m) {
    if (!m) return;
    unmap(m->idx_map, m->idx_size);
    unmap(m->bin_map, m->bin_size);
    free((void *)m->sequence_lengths);
    free((void *)m->sequence_pointers);
    free((void *)m->document_indices);
    free(m);
}

void mmap_indexed_read(const mmap_indexed *m, int64_t sequence, int64_t offset, int64_t n,
                       int32_t *out) {
    CHECK(sequence >= 0 && sequence < m->num_sequences && offset >= 0 &&
          offset + n <= m->sequence_lengths[sequence],
          "%s: read of [%lld, %lld) outside sequence %lld of length %d", m->bin_path,
          (long long)offset, (long long)(offset + n), (long long)sequence,
          m->sequence_lengths[sequence]);
    const unsigned char *at = (const unsigned char *)m->bin_map + m->sequence_pointers[sequence] +
                              offset * m->dtype_size;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *e = at + i * m->dtype_size;
        switch (m->dtype_code) {
        case MMAP_DTYPE_UINT8: out[i] = e[0]; break;
        case MMAP_DTYPE_INT8: out[i] = (int8_t)e[0]; break;
        case MMAP_DTYPE_UINT16: out[i] = (int32_t)(e[0] | e[1] << 8); break;
        case MMAP_DTYPE_INT16: out[i] = (int16_t)(e[0] | e[1] << 8); break;
        case MMAP_DTYPE_INT32: { int32_t v; memcpy(&v, e, 4); out[i] = v; break; }
        default: { int64_t v; memcpy(&v, e, 8); out[i] = (int32_t)v; break; }
        }
    }
}

/* ---- writer ------------------------------------------------------------------------------ */
struct mmap_indexed_writer {
    char prefix[4096], bin_tmp[4200];
    FILE *bin;
    int dtype_code, dtype_size;
    int32_t *lengths;
    int64_t num_sequences, lengths_cap;
    int64_t *document_indices;
    int64_t num_document_indices, documents_cap;
    unsigned char *scratch;
    size_t scratch_cap;
};

mmap_indexed_writer *mmap_indexed_writer_create(const char *prefix, int dtype_code, char *err,
                                                size_t errlen) {
    mmap_indexed_writer *w = calloc(1, sizeof *w);
    CHECK(w, "out of memory");
    snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
    snprintf(w->bin_tmp, sizeof w->bin_tmp, "%s.bin.tmp", prefix);
    w->dtype_code = dtype_code;
    w->dtype_size = mmap_dtype_size(dtype_code);
    CHECK(w->dtype_size > 0, "bad dtype code %d", dtype_code);
    w->bin = fopen(w->bin_tmp, "wb");
    if (!w->bin) {
        snprintf(err, errlen, "%s: cannot create: %s", w->bin_tmp, strerror(errno));
        free(w);
        return NULL;
    }
    w->documents_cap = 1024;
    w->document_indices = malloc(sizeof(int64_t) * (size_t)w->documents_cap);
    CHECK(w->document_indices, "out of memory");
    w->document_indices[0] = 0;  /* Megatron's builder starts document_indices with [0] */
    w->num_document_indices = 1;
    return w;
}

int mmap_indexed_writer_add_item(mmap_indexed_writer *w, const int32_t *tokens, int64_t n) {
    size_t bytes = (size_t)n * (size_t)w->dtype_size;
    if (bytes > w->scratch_cap) {
        w->scratch_cap = bytes * 2;
        w->scratch = realloc(w->scratch, w->scratch_cap);
        CHECK(w->scratch, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        unsigned char *e = w->scratch + i * w->dtype_size;
        int64_t v = tokens[i];
        for (int b = 0; b < w->dtype_size; b++) e[b] = (unsigned char)(v >> (8 * b));
    }
    if (bytes && fwrite(w->scratch, 1, bytes, w->bin) != bytes) return -1;
    if (w->num_sequences == w->lengths_cap) {
        w->lengths_cap = w->lengths_cap ? 2 * w->lengths_cap : 1024;
        w->lengths = realloc(w->lengths, sizeof(int32_t) * (size_t)w->lengths_cap);
        CHECK(w->lengths, "out of memory");
    }
    CHECK(n <= INT32_MAX, "sequence of %lld tokens does not fit the int32 length", (long long)n);
    w->lengths[w->num_sequences++] = (int32_t)n;
    return 0;
}

int mmap_indexed_writer_end_document(mmap_indexed_writer *w) {
    if (w->num_document_indices == w->documents_cap) {
        w->documents_cap *= 2;
        w->document_indices = realloc(w->document_indices,
                                      sizeof(int64_t) * (size_t)w->documents_cap);
        CHECK(w->document_indices, "out of memory");
    }
    w->document_indices[w->num_document_indices++] = w->num_sequences;
    return 0;
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int mmap_indexed_writer_finalize(mmap_indexed_writer *w, char *err, size_t errlen) {
    int status = -1;
    char idx_tmp[4200], idx_path[4200], bin_path[4200];
    snprintf(idx_tmp, sizeof idx_tmp, "%s.idx.tmp", w->prefix);
    snprintf(idx_path, sizeof idx_path, "%s.idx", w->prefix);
    snprintf(bin_path, sizeof bin_path, "%s.bin", w->prefix);
    if (fclose(w->bin) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", w->bin_tmp, strerror(errno));
        w->bin = NULL;
        goto done;
    }
    w->bin = NULL;
    FILE *idx = fopen(idx_tmp, "wb");
    if (!idx) {
        snprintf(err, errlen, "%s: cannot create: %s", idx_tmp, strerror(errno));
        goto done;
    }
    unsigned char header[header_size];
    memcpy(header, index_magic, 9);
    put_u64(header + 9, 1);
    header[17] = (unsigned char)w->dtype_code;
    put_u64(header + 18, (uint64_t)w->num_sequences);
    put_u64(header + 26, (uint64_t)w->num_document_indices);
    int ok = fwrite(header, 1, header_size, idx) == header_size;
    ok = ok && fwrite(w->lengths, 4, (size_t)w->num_sequences, idx) == (size_t)w->num_sequences;
    int64_t pointer = 0;  /* _IndexWriter._sequence_pointers: running byte offsets */
    for (int64_t i = 0; ok && i < w->num_sequences; i++) {
        ok = fwrite(&pointer, 8, 1, idx) == 1;
        pointer += (int64_t)w->lengths[i] * w->dtype_size;
    }
    ok = ok && fwrite(w->document_indices, 8, (size_t)w->num_document_indices, idx) ==
                   (size_t)w->num_document_indices;
    if (fclose(idx) != 0) ok = 0;
    if (!ok) {
        snprintf(err, errlen, "%s: write failed: %s", idx_tmp, strerror(errno));
        goto done;
    }
    if (rename(w->bin_tmp, bin_path) != 0 || rename(idx_tmp, idx_path) != 0) {
        snprintf(err, errlen, "%s: cannot rename the finished files into place: %s", w->prefix,
                 strerror(errno));
        goto done;
    }
    status = 0;
done:
    if (w->bin) fclose(w->bin);
    free(w->lengths);
    free(w->document_indices);
    free(w->scratch);
    free(w);
    return status;
}
