/* index_cache.h: Megatron-Core's index cache, file for file. A dataset of class C (GPTDataset,
 * BlendedDataset) for split S with unique description D (the JSON text of its identifiers) keeps
 * in the cache directory
 *     <md5(D)>-C-S-description.txt          D itself
 *     <md5(D)>-C-S-<array>.npy              each index array, numpy.save's bytes and dtype
 * (<md5(D)>-C-description.txt and <md5(D)>-C-<array>.npy for the BERT datasets, whose names
 * leave the split out) so a cache directory written by Megatron-LM and one written here are interchangeable. Ours
 * adds <md5(D)>-C-S-checksums.txt (Megatron ignores it): the XXH3 of every file above and a
 * hash of the corpus content, verified on load; a mismatch is reported naming the file and the
 * arrays are rebuilt. Files without a checksum list (written by Megatron) are range-checked
 * before use and then get one. */
#ifndef INDEX_CACHE_H
#define INDEX_CACHE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "app/data/npy_file.h"

enum { INDEX_MAX_ARRAYS = 4 };

typedef struct index_arrays {
    int count;
    int64_t *data[INDEX_MAX_ARRAYS];
    int64_t length[INDEX_MAX_ARRAYS];    /* values (rows x columns) */
    int columns[INDEX_MAX_ARRAYS];       /* 0: 1-D; 2: shape (length / 2, 2) */
    npy_dtype dtype[INDEX_MAX_ARRAYS];   /* on disk */
} index_arrays;

typedef void (*index_build_fn)(void *context, index_arrays *out);
/* 0 when loaded arrays are usable (shapes and value ranges), else -1 with why */
typedef int (*index_check_fn)(void *context, const index_arrays *arrays, char *why, size_t whylen);

typedef struct index_cache_stats { int loaded, built, rebuilt; } index_cache_stats;

typedef struct index_cache_request {
    const char *dir;          /* NULL or "": build in memory */
    int dir_is_default;       /* Megatron's <prefix>/cache/...: cannot write it -> warn, go on */
    const char *class_name;   /* "GPTDataset" */
    const char *split;        /* "train", "valid", "test" */
    int split_not_in_names;   /* Megatron's masked (BERT) datasets: <md5(D)>-C-<array>.npy */
    const char *description;  /* the unique description (JSON) */
    uint64_t content_hash;    /* the corpus content behind the arrays (ours, in checksums.txt) */
    int count;                /* arrays */
    const char *names[INDEX_MAX_ARRAYS]; /* "document_index", ... */
    index_build_fn build;
    index_check_fn check;
    void *context;
} index_cache_request;

/* Collective over comm. Without a directory every rank builds. With one, rank 0 loads the files
 * or (re)builds and writes them, then the others read them after a broadcast. `stats` counts
 * what rank 0 did; verbose prints it from rank 0. */
void index_cache_get(const index_cache_request *request, index_arrays *out, MPI_Comm comm,
                     index_cache_stats *stats, int verbose);

void index_arrays_free(index_arrays *a);

#endif
