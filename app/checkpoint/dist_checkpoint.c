/* dist_checkpoint.c: see dist_checkpoint.h. */
#include "app/checkpoint/dist_checkpoint.h"
#include "app/checkpoint/checkpoint_transfer.h"
#include "app/core/error.h"
#include "io/checkpoint_checksum.h"
#include "io/hdf5_lock.h"
#include "io/io_error.h"
#include "io/io_fault.h"

#include <stdio.h>
#include <sys/stat.h>

enum { error_max = CHECKPOINT_PATH_MAX + 512 };

static int rank_of(MPI_Comm comm) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    return rank;
}

/* ---- save ---- */

void dist_checkpoint_create(dist_checkpoint *c, const char *dir, int64_t iteration,
                            int64_t consumed_train_samples, MPI_Comm comm, int collective_io) {
    char err[error_max];
    c->comm = comm;
    if (checkpoint_names_for(&c->names, dir, iteration, err, sizeof err) != 0) user_error("--save %s", err);
    checkpoint_file_create(&c->file, c->names.partial, comm, collective_io);
    checkpoint_header_write(c->file.file, iteration, consumed_train_samples, 0);
    checkpoint_mark_checksummed(c->file.file);
}

/* the file's size, from above: fp32 data, the gap before each dataset of 64 KiB or more that
 * starts it on a 1 MiB boundary (io/checkpoint_file.c; MPI-IO's data sieving may write the gaps,
 * so they count), a per-tensor checksum dataset and HDF5's metadata */
static uint64_t estimated_file_bytes(const sharded_state *state) {
    uint64_t bytes = 64 << 10;  /* superblock, root group, attributes */
    for (int i = 0; i < state->num_tensors; i++) {
        const checkpoint_tensor *t = &state->tensors[i];
        uint64_t data = (uint64_t)t->rows * (uint64_t)(t->cols ? t->cols : 1) * sizeof(float);
        bytes += data + (data >= (1 << 16) ? 1 << 20 : 0) + 2048;  /* header, links, checksum table */
    }
    return bytes;
}

void dist_checkpoint_write(dist_checkpoint *c, const sharded_state *state, const kernel_ops *ops) {
    hdf5_lock();
    checkpoint_file_reserve(&c->file, estimated_file_bytes(state));
    hdf5_unlock();
    checkpoint_transfer(&c->file, state, ops, c->comm, 1, 0);
}

uint64_t dist_checkpoint_commit(dist_checkpoint *c) {
    hdf5_lock();
    checkpoint_header_set_complete(c->file.file);
    uint64_t bytes = c->file.bytes;
    checkpoint_file_close(&c->file);
    hdf5_unlock();
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, c->comm));
    char err[error_max];
    if (rank_of(c->comm) == 0 && checkpoint_commit(&c->names, err, sizeof err) != 0) {
        char line[error_max + 32];
        snprintf(line, sizeof line, "saving checkpoint: %s", err);
        io_fail_line(line);
    }
    io_fault_save_end();
    io_error_set_file(NULL, NULL);
    CHECK_MPI(MPI_Barrier(c->comm));
    return bytes;
}

/* ---- load ---- */

int dist_checkpoint_open(dist_checkpoint *c, const char *dir, MPI_Comm comm, int collective_io) {
    char err[error_max];
    int rank = rank_of(comm);
    c->comm = comm;
    c->verify_checksums = 1;
    c->boxes_verified = 0;
    int64_t tracker[2] = {0, 0}; /* checkpoint_tracker_read's status, the iteration */
    if (rank == 0) {
        int status = checkpoint_tracker_read(dir, &tracker[1], err, sizeof err);
        if (status < 0) user_error_local("%s", err);
        tracker[0] = status;
    }
    CHECK_MPI(MPI_Bcast(tracker, 2, MPI_INT64_T, 0, comm));
    if (tracker[0] == CHECKPOINT_NO_TRACKER) return 0;
    if (checkpoint_names_for(&c->names, dir, tracker[1], err, sizeof err) != 0) user_error("%s", err);
    struct stat st;
    int missing = rank == 0 ? stat(c->names.file, &st) != 0 : 0;
    CHECK_MPI(MPI_Bcast(&missing, 1, MPI_INT, 0, comm));
    if (missing) user_error("%s names %s, which does not exist", c->names.tracker, c->names.file);
    if (checkpoint_file_open(&c->file, c->names.file, comm, collective_io, err, sizeof err) != 0)
        user_error("%s (a save that did not finish?): refusing to load it", err);
    if (checkpoint_header_check(c->file.file, c->names.file, err, sizeof err) != CHECKPOINT_HEADER_OK)
        user_error("%s", err);
    return 1;
}

static void shape_text(char *out, size_t size, int64_t rows, int64_t cols) {
    if (cols) snprintf(out, size, "[%lld, %lld]", (long long)rows, (long long)cols);
    else snprintf(out, size, "[%lld]", (long long)rows);
}

void dist_checkpoint_check(dist_checkpoint *c, const sharded_state *state) {
    char want[64], found[64];
    for (int t = 0; t < state->num_tensors; t++) {
        const checkpoint_tensor *tensor = &state->tensors[t];
        int64_t rows, cols;
        shape_text(want, sizeof want, tensor->rows, tensor->cols);
        if (checkpoint_tensor_shape(&c->file, tensor->name, &rows, &cols) != 0)
            user_error("checkpoint %s has no tensor %s (this model needs it with shape %s)", c->file.path,
                       tensor->name, want);
        if (rows != tensor->rows || cols != tensor->cols) {
            shape_text(found, sizeof found, rows, cols);
            user_error("checkpoint %s: tensor %s has shape %s, but this model's is %s", c->file.path, tensor->name,
                       found, want);
        }
    }
}

void dist_checkpoint_read(dist_checkpoint *c, const sharded_state *state, const kernel_ops *ops) {
    int64_t boxes = checkpoint_transfer(&c->file, state, ops, c->comm, 0, c->verify_checksums);
    if (boxes < 0 && rank_of(c->comm) == 0) {
        printf("note: checkpoint %s has no checksums (saved before they existed): loading it unverified\n",
               c->file.path);
        fflush(stdout);
    }
    if (boxes >= 0) {
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &boxes, 1, MPI_INT64_T, MPI_SUM, c->comm));
        c->boxes_verified = boxes;
    }
}

uint64_t dist_checkpoint_close(dist_checkpoint *c) {
    uint64_t bytes = c->file.bytes;
    checkpoint_file_close(&c->file);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, c->comm));
    return bytes;
}
