/* checkpoint_file.h: the parallel-HDF5 side of distributed checkpoints (io/CHECKPOINT_FORMAT.md).
 * Every call here is collective over the file's communicator: all ranks create the same
 * datasets in the same order, and every rank calls every tensor transfer, with an empty
 * selection when it has nothing to move. A rank's part of a global 2-D tensor is a list of boxes
 * (rectangles of the global index space) whose elements, in row-major order of the global tensor,
 * are contiguous in the rank's memory. This layer knows nothing about models: app/checkpoint/
 * turns the shards that models and optimizers describe into boxes. The format around the tensors
 * (names, tracker, commit, root attributes) is io/checkpoint_format.h. */
#ifndef CHECKPOINT_FILE_H
#define CHECKPOINT_FILE_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct checkpoint_file {
    hid_t file;
    hid_t transfer;   /* collective data-transfer property list */
    MPI_Comm comm;
    char path[4096];
    uint64_t bytes;   /* tensor bytes this rank moved */
} checkpoint_file;

/* a rectangle [row, row+rows) x [col, col+cols) of a global tensor (vectors: col 0, cols 1) */
typedef struct tensor_box {
    int64_t row, col, rows, cols;
} tensor_box;

#define TENSOR_MAX_BOXES 3

typedef struct tensor_part {
    int num_boxes;               /* 0: this rank moves nothing */
    tensor_box boxes[TENSOR_MAX_BOXES];
} tensor_part;

/* create (truncate) path for writing; aborts naming the path if it cannot be created.
 * collective_io: tensor transfers through MPI-IO collective buffering (1) or independent (0). */
void checkpoint_file_create(checkpoint_file *f, const char *path, MPI_Comm comm, int collective_io);
/* make sure the file system has room for about `bytes` more (collective; rank 0 asks). Space
 * that runs out in the middle of a parallel-HDF5 save can leave the ranks in different HDF5
 * collectives at H5Fclose, a hang; so rank 0 allocates a sidecar file of that size
 * (fallocate(2), which also meets quotas; free blocks from statvfs where the file system cannot
 * allocate ahead) and deletes it again. When the space is not there it deletes the file being
 * created and ends the job with one line naming it and the reason. */
void checkpoint_file_reserve(checkpoint_file *f, uint64_t bytes);
/* open for reading; returns 0, or -1 with a message in err when the file is not an HDF5 file */
int checkpoint_file_open(checkpoint_file *f, const char *path, MPI_Comm comm, int collective_io, char *err,
                         size_t errlen);
void checkpoint_file_close(checkpoint_file *f);

/* groups and attributes ("group" is "/" or a path like "/args"; groups are created on demand),
 * stored as io/hdf5_attributes.h stores them (int64, double, fixed-length UTF-8 strings) */
void checkpoint_make_group(checkpoint_file *f, const char *group);
int checkpoint_has_group(checkpoint_file *f, const char *group);
void checkpoint_put_int(checkpoint_file *f, const char *group, const char *name, int64_t value);
void checkpoint_put_double(checkpoint_file *f, const char *group, const char *name, double value);
void checkpoint_put_string(checkpoint_file *f, const char *group, const char *name, const char *value);
/* returns 0, or -1 when the attribute is missing or not an integer (value untouched) */
int checkpoint_get_int(checkpoint_file *f, const char *group, const char *name, int64_t *value);
/* the same for a double (an integer attribute converts); a string comes back malloc'd, or NULL */
int checkpoint_get_double(checkpoint_file *f, const char *group, const char *name, double *value);
char *checkpoint_get_string(checkpoint_file *f, const char *group, const char *name);

/* float32 tensors of global shape [rows, cols] (cols == 0: a vector of rows elements) */
void checkpoint_create_tensor(checkpoint_file *f, const char *path, int64_t rows, int64_t cols);
void checkpoint_write_tensor(checkpoint_file *f, const char *path, const tensor_part *part,
                             const float *data);
/* shape of a stored tensor: returns 0, or -1 when it does not exist (cols = 0 for vectors) */
int checkpoint_tensor_shape(checkpoint_file *f, const char *path, int64_t *rows, int64_t *cols);
void checkpoint_read_tensor(checkpoint_file *f, const char *path, const tensor_part *part, float *data);

/* elements covered by a part */
size_t tensor_part_elements(const tensor_part *part);

#endif
