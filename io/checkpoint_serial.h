/* checkpoint_serial.h: whole-tensor, single-process access to our HDF5 checkpoint
 * (io/CHECKPOINT_FORMAT.md) for offline tools such as convert_checkpoint. Training reads and
 * writes checkpoints collectively elsewhere; this side only needs /args, /model and the root
 * attributes, read or written with the default (serial) HDF5 driver. File names, the tracker,
 * the commit protocol and the root attributes are io/checkpoint_format.h's. Bad input comes back
 * as -1 with one message naming the file; HDF5 failures on files we create abort (CHECK_HDF5). */
#ifndef CHECKPOINT_SERIAL_H
#define CHECKPOINT_SERIAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "io/checkpoint_format.h"

/* ---- reading ------------------------------------------------------------------------------ */
/* Turns --load's argument into a checkpoint file: a .h5 file is itself; a folder is read
 * through its tracker (an iteration -> iter_NNNNNNN.h5, "release" -> release.h5). */
int checkpoint_resolve(const char *dir_or_file, char *path, size_t path_size, char *err,
                       size_t errlen);

typedef struct checkpoint_reader {
    char path[CHECKPOINT_PATH_MAX];
    hid_t file, args, model;
} checkpoint_reader;

/* Opens a checkpoint file and checks format, format_version and complete = 1. */
int checkpoint_reader_open(const char *path, checkpoint_reader *reader, char *err, size_t errlen);
void checkpoint_reader_close(checkpoint_reader *reader);

/* /args attributes: an integer, a number (integer or floating point) */
int checkpoint_read_int_arg(const checkpoint_reader *reader, const char *name, int64_t *value,
                            char *err, size_t errlen);
int checkpoint_read_double_arg(const checkpoint_reader *reader, const char *name, double *value,
                               char *err, size_t errlen);
int checkpoint_has_int_arg(const checkpoint_reader *reader, const char *name);
/* a string attribute of /args, malloc'd, or NULL when it is missing */
char *checkpoint_read_string_arg(const checkpoint_reader *reader, const char *name);

/* Does /model/<name> exist? */
int checkpoint_has_tensor(const checkpoint_reader *reader, const char *name);
/* Checks that /model/<name> exists with exactly this shape; the message gives both shapes. */
int checkpoint_check_tensor(const checkpoint_reader *reader, const char *name, int ndim,
                            const int64_t *shape, char *err, size_t errlen);
/* Reads /model/<name> (checked as above) as float32 into out. */
int checkpoint_reader_read_tensor(const checkpoint_reader *reader, const char *name, int ndim,
                           const int64_t *shape, float *out, char *err, size_t errlen);

/* ---- writing ------------------------------------------------------------------------------ */
typedef struct checkpoint_writer checkpoint_writer;

/* Creates the folder dir and DIR/iter_NNNNNNN.h5.partial (DIR/release.h5.partial for
 * CHECKPOINT_RELEASE) with the root attributes (complete = 0 until commit) and the groups /args
 * and /model. Returns NULL with a message when the folder or file cannot be created. */
checkpoint_writer *checkpoint_writer_create(const char *dir, int64_t iteration, char *err, size_t errlen);
void checkpoint_write_int_arg(checkpoint_writer *writer, const char *name, int64_t value);
void checkpoint_write_double_arg(checkpoint_writer *writer, const char *name, double value);
void checkpoint_write_string_arg(checkpoint_writer *writer, const char *name, const char *value);
/* an int64 attribute of a group under the root ("rng", "lr_scheduler") */
void checkpoint_write_group_int(checkpoint_writer *writer, const char *group, const char *name,
                                int64_t value);
/* /model/<name>, float32, contiguous, in this global shape */
void checkpoint_writer_write_tensor(checkpoint_writer *writer, const char *name, int ndim,
                             const int64_t *shape, const float *data);
/* Sets complete = 1, closes the file and commits it (checkpoint_commit: fsync, rename, tracker).
 * Frees the writer. */
int checkpoint_writer_commit(checkpoint_writer *writer, char *err, size_t errlen);
/* Closes and deletes the .partial file. Frees the writer. */
void checkpoint_writer_abandon(checkpoint_writer *writer);

#endif
