/* mmap_indexed.h: Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx, "MMIDIDX" format of
 * megatron/core/datasets/indexed_dataset.py), read through mmap and written exactly as
 * Megatron's IndexedDatasetBuilder writes it.
 *
 * .idx layout (little-endian): 9-byte magic "MMIDIDX\0\0", u64 version = 1, u8 dtype code,
 * u64 sequence count S, u64 document count D (= documents + 1), int32 sequence_lengths[S],
 * int64 sequence_pointers[S] (byte offsets into .bin), int64 document_indices[D] (sequence
 * index where each document starts, then S). .bin holds the tokens back to back. */
#ifndef MMAP_INDEXED_H
#define MMAP_INDEXED_H

#include <stddef.h>
#include <stdint.h>

/* Megatron's DType codes */
enum {
    MMAP_DTYPE_UINT8 = 1, MMAP_DTYPE_INT8 = 2, MMAP_DTYPE_INT16 = 3, MMAP_DTYPE_INT32 = 4,
    MMAP_DTYPE_INT64 = 5, MMAP_DTYPE_FLOAT64 = 6, MMAP_DTYPE_FLOAT32 = 7, MMAP_DTYPE_UINT16 = 8
};

/* bytes per element of a dtype code, 0 when the code is unknown */
int mmap_dtype_size(int dtype_code);

typedef struct mmap_indexed {
    char bin_path[4096], idx_path[4096];
    int dtype_code, dtype_size;
    int64_t num_sequences, num_documents;   /* num_documents = document_indices length - 1 */
    const int32_t *sequence_lengths;        /* [num_sequences], into the mapped .idx */
    const int64_t *sequence_pointers;       /* [num_sequences] byte offsets into .bin */
    const int64_t *document_indices;        /* [num_documents + 1] */
    int64_t num_tokens;
    void *idx_map, *bin_map;
    size_t idx_size, bin_size;
} mmap_indexed;

/* Opens PREFIX.idx / PREFIX.bin and validates magic, version, dtype, sizes against the file
 * lengths, pointers against lengths, document indices. NULL with "FILE: what" in err. */
mmap_indexed *mmap_indexed_open(const char *prefix, char *err, size_t errlen);
void mmap_indexed_close(mmap_indexed *m);

/* tokens [offset, offset+n) of sequence `sequence`, converted to int32 (integer dtypes only) */
void mmap_indexed_read(const mmap_indexed *m, int64_t sequence, int64_t offset, int64_t n,
                       int32_t *out);

/* ---- writer (IndexedDatasetBuilder) ------------------------------------------------------ */
typedef struct mmap_indexed_writer mmap_indexed_writer;

/* Writes PREFIX.bin.tmp / PREFIX.idx.tmp, renamed to PREFIX.bin / PREFIX.idx by finalize. */
mmap_indexed_writer *mmap_indexed_writer_create(const char *prefix, int dtype_code, char *err,
                                                size_t errlen);
/* add_item: one sequence (a sentence, or a whole document); end_document: close a document */
int mmap_indexed_writer_add_item(mmap_indexed_writer *w, const int32_t *tokens, int64_t n);
int mmap_indexed_writer_end_document(mmap_indexed_writer *w);
/* writes the .idx, renames both files; returns 0 or -1 with a message in err */
int mmap_indexed_writer_finalize(mmap_indexed_writer *w, char *err, size_t errlen);

#endif
