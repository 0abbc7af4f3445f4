/* hdf5_corpus.h: our tokenized corpus as one parallel-HDF5 file (format in io/CORPUS_FORMAT.md).
 * The writer is collective over an MPI communicator (each rank writes its own token and offset
 * ranges); the reader is a plain serial open, so every rank can read any hyperslab on its own.
 * CHECK_HDF5 is the HDF5 error-checking macro for everything under io/. */
#ifndef HDF5_CORPUS_H
#define HDF5_CORPUS_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "app/core/error.h"
#include "io/hdf5_check.h"

enum { CORPUS_FORMAT_VERSION = 1 };

/* Megatron's DType.optimal_dtype: uint16 when the vocabulary has fewer than 65500 ids */
static inline int corpus_tokens_are_uint16(int64_t vocab_size) {
    return vocab_size > 0 && vocab_size < 65500;
}

typedef struct corpus_meta {
    char tokenizer_type[64];   /* "GPT2BPETokenizer", ... or "unknown" */
    int64_t vocab_size;        /* unpadded tokenizer vocabulary; 0 when unknown */
    int64_t eod_id;            /* end-of-document id; -1 when unknown */
    int tokens_uint16;         /* 1: /tokens is uint16, 0: int32 */
    int has_sentences;         /* 1: /sentence_offsets present (--split-sentences) */
    int append_eod;            /* 1: each document ends with eod_id */
    char json_key[64];
    char *sources;             /* input file names, one per line (malloc'd by the reader) */
} corpus_meta;

/* ---- writing (collective over comm) ---------------------------------------------------- */
typedef struct hdf5_corpus_writer hdf5_corpus_writer;

/* Creates path (truncating) with /tokens[num_tokens], /document_offsets[num_documents + 1]
 * and, when meta->has_sentences, /sentence_offsets[num_sentences + 1], plus the attributes.
 * Returns NULL with a message in err when the file cannot be created (same on every rank). */
hdf5_corpus_writer *hdf5_corpus_create(const char *path, MPI_Comm comm, const corpus_meta *meta,
                                       int64_t num_tokens, int64_t num_documents,
                                       int64_t num_sentences, char *err, size_t errlen);

/* Collective in shape: every rank calls each of these the same number of times (n may be 0).
 * tokens are in the file's type (uint16_t or int32_t per meta->tokens_uint16). */
void hdf5_corpus_write_tokens(hdf5_corpus_writer *w, int64_t first, const void *tokens, int64_t n);
void hdf5_corpus_write_document_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n);
void hdf5_corpus_write_sentence_offsets(hdf5_corpus_writer *w, int64_t first,
                                        const int64_t *offsets, int64_t n);
void hdf5_corpus_writer_close(hdf5_corpus_writer *w);

/* ---- reading (any single process) ------------------------------------------------------- */
typedef struct hdf5_corpus {
    hid_t file, tokens;
    char path[4096];
    corpus_meta meta;
    int64_t num_tokens, num_documents, num_sentences;
    int64_t *document_offsets;  /* [num_documents + 1], loaded at open */
    int64_t *sentence_offsets;  /* [num_sentences + 1] or NULL */
    int64_t max_token_id;       /* the writer's record of the largest id; -1 when absent (older file) */
    int checksummed;            /* the file has /checksums (root attribute checksum = "xxh3_64/range") */
} hdf5_corpus;

/* Opens and validates (datasets present, offsets monotone and ending at num_tokens and matching
 * their checksums, attributes readable). Returns NULL with "PATH: what is wrong" in err. */
hdf5_corpus *hdf5_corpus_open(const char *path, char *err, size_t errlen);

/* Reads every token once: checks each written range against its checksum (when the file has
 * them) and finds the largest id. 0, or -1 with "PATH: /tokens [a, b) ..." in err. */
int hdf5_corpus_scan_tokens(hdf5_corpus *c, int64_t *max_token_id, char *err, size_t errlen);

/* tokens[first .. first+n) converted to int32 */
void hdf5_corpus_read_tokens(hdf5_corpus *c, int64_t first, int64_t n, int32_t *out);
void hdf5_corpus_close(hdf5_corpus *c);

/* 1 when path starts with the HDF5 signature (lets callers tell a foreign file) */
int hdf5_corpus_is_hdf5(const char *path);

#endif
