/* checkpoint_checksum.h: the checksums of a checkpoint's tensors (io/CHECKPOINT_FORMAT.md,
 * "Checksums"). Every box a rank writes gets a record (row, col, rows, cols, XXH3-64 of the box's
 * float32 bytes in row-major order), stored in the dataset /checksums/<tensor path> (uint64
 * [records, 5]); the root attribute `checksum` = "xxh3_64/box" says the file has them. A reader
 * verifies a record by hashing exactly that box: after reading it when its own box is the same
 * (a load in the saving layout), or in an extra read otherwise (another layout, the converter's
 * --verify). Collective calls take the checkpoint_file (io/checkpoint_file.h); the serial
 * verifier takes a plain HDF5 file. */
#ifndef CHECKPOINT_CHECKSUM_H
#define CHECKPOINT_CHECKSUM_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "io/checkpoint_file.h"

#define CHECKPOINT_CHECKSUM_KIND "xxh3_64/box"
#define CHECKPOINT_CHECKSUM_GROUP "/checksums"

typedef struct box_checksum {
    uint64_t row, col, rows, cols, hash;
} box_checksum;

/* XXH3-64 of n float32 values (the bytes as stored: little-endian IEEE, as in memory here) */
uint64_t checksum_floats(const float *data, size_t n);

/* the checksum dataset's path for a tensor path ("/model/x" -> "/checksums/model/x") */
void checksum_path(char *out, size_t size, const char *tensor);

/* collective: creates /checksums/<tensor> with `total` records and writes this rank's `count`
 * records at row `offset` (ranks' offsets are an exclusive scan of their counts) */
void checkpoint_write_checksums(checkpoint_file *f, const char *tensor, const box_checksum *mine, int64_t count,
                                int64_t offset, int64_t total);
/* marks the file as checksummed (root attribute `checksum`) */
void checkpoint_mark_checksummed(hid_t file);
/* 1 when the root attribute `checksum` names our kind, 0 when absent (an older file) */
int checkpoint_is_checksummed(hid_t file);

/* reads every record of a tensor (every rank reads all of them); returns the count, or -1 when the
 * tensor has no checksum dataset. *records is malloc'ed (NULL when 0). */
int64_t checkpoint_read_checksums(checkpoint_file *f, const char *tensor, box_checksum **records);

/* serial: verifies every record of every tensor of an open file (the converter's --verify).
 * Returns the number of bad boxes (0: all good) with the first problem in err; *tensors and
 * *boxes count what was checked, *unchecked the float datasets that have no checksums. */
int64_t checkpoint_verify_file(hid_t file, const char *path, int64_t *tensors, int64_t *boxes, int64_t *unchecked,
                               char *err, size_t errlen);

#endif
