/* hdf5_corpus.c: create/write (collective, MPI-IO) and open/read (serial) our HDF5 corpus.
 * Layout and attributes are documented in io/CORPUS_FORMAT.md. */
#include "io/hdf5_corpus.h"
#include "io/hdf5_lock.h"
#include "io/hdf5_attributes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* the checksum records of one dataset this rank wrote: (first, count, xxh3) per call */
typedef struct range_records {
    uint64_t *data;   /* 3 per record */
    int64_t count, capacity;
} range_records;

enum { TOKENS, DOCUMENT_OFFSETS, SENTENCE_OFFSETS, CORPUS_DATASETS };
static const char *const dataset_names[CORPUS_DATASETS] = {"tokens", "document_offsets", "sentence_offsets"};

struct hdf5_corpus_writer {
    hid_t file, tokens, document_offsets, sentence_offsets, transfer;
    int tokens_uint16;
    MPI_Comm comm;
    int64_t max_token_id;                      /* this rank's largest id (-1: none yet) */
    range_records records[CORPUS_DATASETS];
};

static void add_record(range_records *r, int64_t first, int64_t n, const void *bytes, size_t size) {
    if (n <= 0) return;
    if (r->count == r->capacity) {
        r->capacity = r->capacity ? 2 * r->capacity : 16;
        r->data = realloc(r->data, sizeof(uint64_t) * 3 * (size_t)r->capacity);
        CHECK(r->data, "out of memory for corpus checksums");
    }
    uint64_t *record = r->data + 3 * r->count++;
    record[0] = (uint64_t)first;
    record[1] = (uint64_t)n;
    record[2] = XXH3_64bits(bytes, size);
}

/* ---- writer ------------------------------------------------------------------------------ */
static hid_t create_1d(hid_t file, const char *name, hid_t type, int64_t length) {
    hsize_t dims = (hsize_t)length;
    hid_t space = H5Screate_simple(1, &dims, NULL);
    CHECK_HDF5(space);
    hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_HDF5(dataset);
    CHECK_HDF5(H5Sclose(space));
    return dataset;
}

hdf5_corpus_writer *hdf5_corpus_create(const char *path, MPI_Comm comm, const corpus_meta *meta,
                                       int64_t num_tokens, int64_t num_documents,
                                       int64_t num_sentences, char *err, size_t errlen) {
    hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_HDF5(access);
    CHECK_HDF5(H5Pset_fapl_mpio(access, comm, MPI_INFO_NULL));
    H5E_auto2_t old_handler;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_handler, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, access);
    H5Eset_auto2(H5E_DEFAULT, old_handler, old_data);
    CHECK_HDF5(H5Pclose(access));
    if (file < 0) {
        snprintf(err, errlen, "%s: cannot create the HDF5 file (does the folder exist and is it "
                 "writable?)", path);
        return NULL;
    }
    hdf5_corpus_writer *w = calloc(1, sizeof *w);
    CHECK(w, "out of memory");
    w->file = file;
    w->tokens_uint16 = meta->tokens_uint16;
    w->comm = comm;
    w->max_token_id = -1;
    w->tokens = create_1d(file, "tokens", meta->tokens_uint16 ? H5T_STD_U16LE : H5T_STD_I32LE,
                          num_tokens);
    w->document_offsets = create_1d(file, "document_offsets", H5T_STD_I64LE, num_documents + 1);
    w->sentence_offsets = -1;
    if (meta->has_sentences)
        w->sentence_offsets = create_1d(file, "sentence_offsets", H5T_STD_I64LE,
                                        num_sentences + 1);

    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    CHECK_HDF5(root);
    hdf5_write_int_attribute(root, "format_version", CORPUS_FORMAT_VERSION);
    hdf5_write_string_attribute(root, "format", "megatron-c tokenized corpus");
    hdf5_write_string_attribute(root, "tokenizer_type", meta->tokenizer_type);
    hdf5_write_int_attribute(root, "vocab_size", meta->vocab_size);
    hdf5_write_int_attribute(root, "eod_id", meta->eod_id);
    hdf5_write_int_attribute(root, "append_eod", meta->append_eod);
    hdf5_write_int_attribute(root, "split_sentences", meta->has_sentences);
    hdf5_write_string_attribute(root, "json_key", meta->json_key);
    hdf5_write_string_attribute(root, "sources", meta->sources ? meta->sources : "");
    hdf5_write_int_attribute(root, "num_tokens", num_tokens);
    hdf5_write_int_attribute(root, "num_documents", num_documents);
    hdf5_write_int_attribute(root, "num_sentences", meta->has_sentences ? num_sentences : num_documents);
    CHECK_HDF5(H5Gclose(root));

    /* independent MPI-IO: each rank writes one large contiguous block per call, where ROMIO's
     * two-phase collective buffering only adds a shuffle (2 ranks, 180 MB: 1.9 s collective,
     * 0.2 s independent); the calls stay collective in shape so either mode works */
    w->transfer = H5Pcreate(H5P_DATASET_XFER);
    CHECK_HDF5(w->transfer);
    CHECK_HDF5(H5Pset_dxpl_mpio(w->transfer, H5FD_MPIO_INDEPENDENT));
    return w;
}

/* collective write of buffer[0..n) at [first, first+n) of a 1-D dataset (n may be 0) */
static void write_range(hdf5_corpus_writer *w, hid_t dataset, hid_t memtype, int64_t first,
                        const void *buffer, int64_t n) {
    hid_t filespace = H5Dget_space(dataset);
    CHECK_HDF5(filespace);
    hsize_t count = (hsize_t)(n > 0 ? n : 1), start = (hsize_t)first;
    hid_t memspace = H5Screate_simple(1, &count, NULL);
    CHECK_HDF5(memspace);
    static const int64_t dummy[1];
    if (n > 0) {
        CHECK_HDF5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &count, NULL));
    } else {
        CHECK_HDF5(H5Sselect_none(filespace));
        CHECK_HDF5(H5Sselect_none(memspace));
        buffer = dummy;
    }
    CHECK_HDF5(H5Dwrite(dataset, memtype, memspace, filespace, w->transfer, buffer));
    CHECK_HDF5(H5Sclose(memspace));
    CHECK_HDF5(H5Sclose(filespace));
}

void hdf5_corpus_write_tokens(hdf5_corpus_writer *w, int64_t first, const void *tokens,
                              int64_t n) {
    write_range(w, w->tokens, w->tokens_uint16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_INT32, first,
                tokens, n);
    size_t size = w->tokens_uint16 ? 2 : 4;
    add_record(&w->records[TOKENS], first, n, tokens, size * (size_t)(n > 0 ? n : 0));
    for (int64_t i = 0; i < n; i++) {
        int64_t id = w->tokens_uint16 ? ((const uint16_t *)tokens)[i] : ((const int32_t *)tokens)[i];
        if (id > w->max_token_id) w->max_token_id = id;
    }
}

void hdf5_corpus_write_document_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n) {
    write_range(w, w->document_offsets, H5T_NATIVE_INT64, first, offsets, n);
    add_record(&w->records[DOCUMENT_OFFSETS], first, n, offsets, sizeof(int64_t) * (size_t)(n > 0 ? n : 0));
}

void hdf5_corpus_write_sentence_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n) {
    CHECK(w->sentence_offsets >= 0, "the corpus was created without sentence offsets");
    write_range(w, w->sentence_offsets, H5T_NATIVE_INT64, first, offsets, n);
    add_record(&w->records[SENTENCE_OFFSETS], first, n, offsets, sizeof(int64_t) * (size_t)(n > 0 ? n : 0));
}

/* collective: /checksums/<name> (uint64 [records, 3]: first, count, xxh3 of the elements' bytes
 * as stored), every rank's records at the offset of an exclusive scan of their counts */
static void write_checksums(hdf5_corpus_writer *w, int which) {
    range_records *r = &w->records[which];
    int64_t offset = 0, total = 0;
    CHECK_MPI(MPI_Exscan(&r->count, &offset, 1, MPI_INT64_T, MPI_SUM, w->comm));
    CHECK_MPI(MPI_Allreduce(&r->count, &total, 1, MPI_INT64_T, MPI_SUM, w->comm));
    int rank;
    CHECK_MPI(MPI_Comm_rank(w->comm, &rank));
    if (rank == 0) offset = 0;
    char path[64];
    snprintf(path, sizeof path, "/checksums/%s", dataset_names[which]);
    hsize_t dims[2] = {(hsize_t)total, 3};
    hid_t space = H5Screate_simple(2, dims, NULL);
    CHECK_HDF5(space);
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    CHECK_HDF5(links);
    CHECK_HDF5(H5Pset_create_intermediate_group(links, 1));
    hid_t dataset = H5Dcreate2(w->file, path, H5T_STD_U64LE, space, links, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_HDF5(dataset);
    hsize_t count[2] = {(hsize_t)(r->count ? r->count : 1), 3}, start[2] = {(hsize_t)offset, 0};
    hid_t memory = H5Screate_simple(2, count, NULL);
    CHECK_HDF5(memory);
    static const uint64_t dummy[3];
    if (r->count) {
        CHECK_HDF5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
    } else {
        CHECK_HDF5(H5Sselect_none(space));
        CHECK_HDF5(H5Sselect_none(memory));
    }
    CHECK_HDF5(H5Dwrite(dataset, H5T_NATIVE_UINT64, memory, space, w->transfer, r->count ? r->data : dummy));
    CHECK_HDF5(H5Sclose(memory));
    CHECK_HDF5(H5Dclose(dataset));
    CHECK_HDF5(H5Pclose(links));
    CHECK_HDF5(H5Sclose(space));
    free(r->data);
}

void hdf5_corpus_writer_close(hdf5_corpus_writer *w) {
    for (int which = 0; which < CORPUS_DATASETS; which++)
        if (which != SENTENCE_OFFSETS || w->sentence_offsets >= 0) write_checksums(w, which);
    int64_t max_id = w->max_token_id;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &max_id, 1, MPI_INT64_T, MPI_MAX, w->comm));
    hdf5_write_int_attribute(w->file, "max_token_id", max_id);
    hdf5_write_string_attribute(w->file, "checksum", "xxh3_64/range");
    CHECK_HDF5(H5Pclose(w->transfer));
    CHECK_HDF5(H5Dclose(w->tokens));
    CHECK_HDF5(H5Dclose(w->document_offsets));
    if (w->sentence_offsets >= 0) CHECK_HDF5(H5Dclose(w->sentence_offsets));
    CHECK_HDF5(H5Fclose(w->file));
    free(w);
}

/* ---- reader ------------------------------------------------------------------------------ */
int hdf5_corpus_is_hdf5(const char *path) {
    static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(head, 1, 8, f);
    fclose(f);
    return got == 8 && memcmp(head, signature, 8) == 0;
}

/* opens a 1-D integer dataset and returns its length, or -1 with a message */
static hid_t open_1d(hdf5_corpus *c, const char *name, int64_t *length, char *err, size_t errlen) {
    if (H5Lexists(c->file, name, H5P_DEFAULT) <= 0) {
        snprintf(err, errlen, "%s: no /%s dataset (not a megatron-c corpus?)", c->path, name);
        return -1;
    }
    hid_t dataset = H5Dopen2(c->file, name, H5P_DEFAULT);
    if (dataset < 0) {
        snprintf(err, errlen, "%s: cannot open /%s", c->path, name);
        return -1;
    }
    hid_t space = H5Dget_space(dataset), type = H5Dget_type(dataset);
    hsize_t dims[2] = {0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    int is_int = type >= 0 && H5Tget_class(type) == H5T_INTEGER;
    if (rank == 1) H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (rank != 1 || !is_int) {
        snprintf(err, errlen, "%s: /%s is not a 1-D integer dataset", c->path, name);
        H5Dclose(dataset);
        return -1;
    }
    *length = (int64_t)dims[0];
    return dataset;
}

/* the checksum records of a dataset ([n, 3]: first, count, xxh3), malloc'd; -1 when absent */
static int64_t read_records(hdf5_corpus *c, const char *name, uint64_t **records) {
    char path[64];
    snprintf(path, sizeof path, "/checksums/%s", name);
    *records = NULL;
    if (H5Lexists(c->file, "/checksums", H5P_DEFAULT) <= 0 || H5Lexists(c->file, path, H5P_DEFAULT) <= 0) return -1;
    hid_t dataset = H5Dopen2(c->file, path, H5P_DEFAULT);
    if (dataset < 0) return -1;
    hid_t space = H5Dget_space(dataset);
    hsize_t dims[2] = {0, 0};
    int ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 2 && H5Sget_simple_extent_dims(space, dims, NULL) == 2 &&
             dims[1] == 3;
    if (space >= 0) H5Sclose(space);
    if (ok && dims[0]) {
        *records = malloc(sizeof(uint64_t) * 3 * dims[0]);
        CHECK(*records, "out of memory for checksums");
        ok = H5Dread(dataset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, *records) >= 0;
    }
    H5Dclose(dataset);
    if (!ok) {
        free(*records);
        *records = NULL;
        return -1;
    }
    return (int64_t)dims[0];
}

/* checks an array already in memory against its records; 0, or -1 with a message */
static int verify_in_memory(hdf5_corpus *c, const char *name, const void *data, size_t size, int64_t length,
                            char *err, size_t errlen) {
    if (!c->checksummed) return 0;
    uint64_t *records;
    int64_t n = read_records(c, name, &records);
    if (n < 0) return error_format(err, errlen, "%s: /%s has no checksums in a checksummed file (damaged?)", c->path, name);
    int status = 0;
    for (int64_t i = 0; i < n && !status; i++) {
        uint64_t first = records[3 * i], count = records[3 * i + 1];
        if (first + count > (uint64_t)length || first + count < first)
            status = error_format(err, errlen, "%s: /checksums/%s names elements [%llu, %llu) of %lld", c->path, name,
                                  (unsigned long long)first, (unsigned long long)(first + count), (long long)length);
        else if (XXH3_64bits((const char *)data + first * size, count * size) != records[3 * i + 2])
            status = error_format(err, errlen, "%s: /%s elements [%llu, %llu) do not match their checksum: the file "
                                  "is damaged", c->path, name, (unsigned long long)first,
                                  (unsigned long long)(first + count));
    }
    free(records);
    return status;
}

int hdf5_corpus_scan_tokens(hdf5_corpus *c, int64_t *max_token_id, char *err, size_t errlen) {
    H5E_auto2_t old_handler;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_handler, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    uint64_t *records = NULL;
    int64_t n = c->checksummed ? read_records(c, "tokens", &records) : -1;
    H5Eset_auto2(H5E_DEFAULT, old_handler, old_data);
    if (c->checksummed && n < 0)
        return error_format(err, errlen, "%s: /tokens has no checksums in a checksummed file (damaged?)", c->path);
    const int64_t chunk = (int64_t)1 << 24;
    size_t size = c->meta.tokens_uint16 ? 2 : 4;
    void *buffer = NULL;
    size_t capacity = 0;
    int64_t max_id = -1;
    int status = 0;
    /* with checksums: one range per record (they tile /tokens); without: fixed chunks */
    int64_t pieces = n >= 0 ? n : (c->num_tokens + chunk - 1) / chunk;
    for (int64_t i = 0; i < pieces && !status; i++) {
        int64_t first = n >= 0 ? (int64_t)records[3 * i] : i * chunk;
        int64_t count = n >= 0 ? (int64_t)records[3 * i + 1] : (c->num_tokens - first < chunk ? c->num_tokens - first : chunk);
        if (first < 0 || count < 0 || first + count > c->num_tokens) {
            status = error_format(err, errlen, "%s: /checksums/tokens names tokens [%lld, %lld) of %lld", c->path,
                                  (long long)first, (long long)(first + count), (long long)c->num_tokens);
            break;
        }
        if ((size_t)count * size > capacity) {
            free(buffer);
            capacity = (size_t)count * size;
            buffer = malloc(capacity);
            CHECK(buffer, "out of memory scanning %s", c->path);
        }
        hid_t filespace = H5Dget_space(c->tokens);
        CHECK_HDF5(filespace);
        hsize_t start = (hsize_t)first, length = (hsize_t)(count ? count : 1);
        hid_t memspace = H5Screate_simple(1, &length, NULL);
        CHECK_HDF5(memspace);
        if (count) CHECK_HDF5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &length, NULL));
        else {
            CHECK_HDF5(H5Sselect_none(filespace));
            CHECK_HDF5(H5Sselect_none(memspace));
        }
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        herr_t read = H5Dread(c->tokens, c->meta.tokens_uint16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_INT32, memspace,
                              filespace, H5P_DEFAULT, count ? buffer : (void *)&capacity);
        H5Eset_auto2(H5E_DEFAULT, old_handler, old_data);
        H5Sclose(memspace);
        H5Sclose(filespace);
        if (read < 0) {
            status = error_format(err, errlen, "%s: cannot read /tokens [%lld, %lld) (truncated file?)", c->path,
                                  (long long)first, (long long)(first + count));
            break;
        }
        if (n >= 0 && XXH3_64bits(buffer, (size_t)count * size) != records[3 * i + 2])
            status = error_format(err, errlen, "%s: /tokens [%lld, %lld) do not match their checksum: the file is "
                                  "damaged", c->path, (long long)first, (long long)(first + count));
        for (int64_t k = 0; k < count; k++) {
            int64_t id = size == 2 ? ((const uint16_t *)buffer)[k] : ((const int32_t *)buffer)[k];
            if (id > max_id) max_id = id;
        }
    }
    free(buffer);
    free(records);
    *max_token_id = max_id;
    return status;
}

/* reads a whole offsets dataset and checks it runs monotonically from 0 to num_tokens */
static int64_t *load_offsets(hdf5_corpus *c, const char *name, int64_t *count, char *err,
                             size_t errlen) {
    int64_t length;
    hid_t dataset = open_1d(c, name, &length, err, errlen);
    if (dataset < 0) return NULL;
    if (length < 1) {
        snprintf(err, errlen, "%s: /%s is empty (needs at least the leading 0)", c->path, name);
        H5Dclose(dataset);
        return NULL;
    }
    int64_t *offsets = malloc((size_t)length * sizeof *offsets);
    CHECK(offsets, "out of memory reading %s", name);
    if (H5Dread(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets) < 0) {
        snprintf(err, errlen, "%s: cannot read /%s (truncated file?)", c->path, name);
        free(offsets);
        H5Dclose(dataset);
        return NULL;
    }
    H5Dclose(dataset);
    if (verify_in_memory(c, name, offsets, sizeof *offsets, length, err, errlen) != 0) {
        free(offsets);
        return NULL;
    }
    const char *problem = NULL;
    if (offsets[0] != 0) problem = "does not start at 0";
    else if (offsets[length - 1] != c->num_tokens) problem = "does not end at the token count";
    for (int64_t i = 1; !problem && i < length; i++)
        if (offsets[i] < offsets[i - 1]) problem = "is not monotone";
    if (problem) {
        snprintf(err, errlen, "%s: /%s %s (%lld tokens, last offset %lld)", c->path, name,
                 problem, (long long)c->num_tokens, (long long)offsets[length - 1]);
        free(offsets);
        return NULL;
    }
    *count = length - 1;
    return offsets;
}

hdf5_corpus *hdf5_corpus_open(const char *path, char *err, size_t errlen) {
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        snprintf(err, errlen, "%s: cannot open for reading", path);
        return NULL;
    }
    fclose(probe);
    if (!hdf5_corpus_is_hdf5(path)) {
        snprintf(err, errlen, "%s: not an HDF5 file (no HDF5 signature)", path);
        return NULL;
    }
    hdf5_corpus *c = calloc(1, sizeof *c);
    CHECK(c, "out of memory");
    snprintf(c->path, sizeof c->path, "%s", path);
    c->tokens = -1;
    H5E_auto2_t old_handler;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_handler, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int ok = 0;
    c->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (c->file < 0) {
        snprintf(err, errlen, "%s: HDF5 cannot open it (truncated or damaged file?)", path);
        goto done;
    }
    hid_t root = H5Gopen2(c->file, "/", H5P_DEFAULT);
    int64_t version = 0;
    if (root < 0 || hdf5_read_scalar_attribute(root, "format_version", H5T_NATIVE_INT64, 0, &version) < 0) {
        snprintf(err, errlen, "%s: no format_version attribute (an HDF5 file, but not a "
                 "megatron-c corpus)", path);
        if (root >= 0) H5Gclose(root);
        goto done;
    }
    if (version != CORPUS_FORMAT_VERSION) {
        snprintf(err, errlen, "%s: corpus format version %lld, this build reads version %d",
                 path, (long long)version, CORPUS_FORMAT_VERSION);
        H5Gclose(root);
        goto done;
    }
    int64_t value;
    char *text = hdf5_read_string_attribute(root, "tokenizer_type");
    snprintf(c->meta.tokenizer_type, sizeof c->meta.tokenizer_type, "%s", text ? text : "unknown");
    free(text);
    text = hdf5_read_string_attribute(root, "json_key");
    snprintf(c->meta.json_key, sizeof c->meta.json_key, "%s", text ? text : "");
    free(text);
    c->meta.sources = hdf5_read_string_attribute(root, "sources");
    c->meta.vocab_size = hdf5_read_scalar_attribute(root, "vocab_size", H5T_NATIVE_INT64, 0, &value) == 0 ? value : 0;
    c->meta.eod_id = hdf5_read_scalar_attribute(root, "eod_id", H5T_NATIVE_INT64, 0, &value) == 0 ? value : -1;
    c->meta.append_eod = hdf5_read_scalar_attribute(root, "append_eod", H5T_NATIVE_INT64, 0, &value) == 0 ? (int)value : 0;
    c->max_token_id = hdf5_read_scalar_attribute(root, "max_token_id", H5T_NATIVE_INT64, 0, &value) == 0 ? value : -1;
    text = H5Aexists(root, "checksum") > 0 ? hdf5_read_string_attribute(root, "checksum") : NULL;
    c->checksummed = text && !strcmp(text, "xxh3_64/range");
    free(text);
    H5Gclose(root);

    c->tokens = open_1d(c, "tokens", &c->num_tokens, err, errlen);
    if (c->tokens < 0) goto done;
    hid_t type = H5Dget_type(c->tokens);
    c->meta.tokens_uint16 = H5Tget_size(type) == 2 && H5Tget_sign(type) == H5T_SGN_NONE;
    H5Tclose(type);
    c->document_offsets = load_offsets(c, "document_offsets", &c->num_documents, err, errlen);
    if (!c->document_offsets) goto done;
    if (H5Lexists(c->file, "sentence_offsets", H5P_DEFAULT) > 0) {
        c->meta.has_sentences = 1;
        c->sentence_offsets = load_offsets(c, "sentence_offsets", &c->num_sentences, err, errlen);
        if (!c->sentence_offsets) goto done;
    } else {
        c->num_sentences = c->num_documents;
    }
    ok = 1;
done:
    H5Eset_auto2(H5E_DEFAULT, old_handler, old_data);
    if (!ok) {
        hdf5_corpus_close(c);
        return NULL;
    }
    return c;
}

void hdf5_corpus_read_tokens(hdf5_corpus *c, int64_t first, int64_t n, int32_t *out) {
    if (n <= 0) return;
    CHECK(first >= 0 && first + n <= c->num_tokens, "%s: token range [%lld, %lld) out of [0, %lld)",
          c->path, (long long)first, (long long)(first + n), (long long)c->num_tokens);
    hdf5_lock(); /* an asynchronous checkpoint writer may be inside HDF5 (io/hdf5_lock.h) */
    hid_t filespace = H5Dget_space(c->tokens);
    CHECK_HDF5(filespace);
    hsize_t start = (hsize_t)first, count = (hsize_t)n;
    CHECK_HDF5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &count, NULL));
    hid_t memspace = H5Screate_simple(1, &count, NULL);
    CHECK_HDF5(memspace);
    CHECK_HDF5(H5Dread(c->tokens, H5T_NATIVE_INT32, memspace, filespace, H5P_DEFAULT, out));
    CHECK_HDF5(H5Sclose(memspace));
    CHECK_HDF5(H5Sclose(filespace));
    hdf5_unlock();
}

void hdf5_corpus_close(hdf5_corpus *c) {
    if (!c) return;
    hdf5_lock();
    if (c->tokens >= 0) H5Dclose(c->tokens);
    if (c->file >= 0) H5Fclose(c->file);
    hdf5_unlock();
    free(c->document_offsets);
    free(c->sentence_offsets);
    free(c->meta.sources);
    free(c);
}
