/* hdf5_corpus.c: create/write (collective, MPI-IO) and open/read (serial) our HDF5 corpus.
 * Layout and attributes are documented in io/CORPUS_FORMAT.md. */
#include "io/hdf5_corpus.h"
#include "io/hdf5_attributes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hdf5_corpus_writer {
    hid_t file, tokens, document_offsets, sentence_offsets, transfer;
    int tokens_uint16;
};

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
}

void hdf5_corpus_write_document_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n) {
    write_range(w, w->document_offsets, H5T_NATIVE_INT64, first, offsets, n);
}

void hdf5_corpus_write_sentence_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n) {
    CHECK(w->sentence_offsets >= 0, "the corpus was created without sentence offsets");
    write_range(w, w->sentence_offsets, H5T_NATIVE_INT64, first, offsets, n);
}

void hdf5_corpus_writer_close(hdf5_corpus_writer *w) {
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
    hid_t filespace = H5Dget_space(c->tokens);
    CHECK_HDF5(filespace);
    hsize_t start = (hsize_t)first, count = (hsize_t)n;
    CHECK_HDF5(H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &start, NULL, &count, NULL));
    hid_t memspace = H5Screate_simple(1, &count, NULL);
    CHECK_HDF5(memspace);
    CHECK_HDF5(H5Dread(c->tokens, H5T_NATIVE_INT32, memspace, filespace, H5P_DEFAULT, out));
    CHECK_HDF5(H5Sclose(memspace));
    CHECK_HDF5(H5Sclose(filespace));
}

void hdf5_corpus_close(hdf5_corpus *c) {
    if (!c) return;
    if (c->tokens >= 0) H5Dclose(c->tokens);
    if (c->file >= 0) H5Fclose(c->file);
    free(c->document_offsets);
    free(c->sentence_offsets);
    free(c->meta.sources);
    free(c);
}
