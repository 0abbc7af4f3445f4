/* dist_checkpoint.h: collective save and load of a sharded_state as one parallel-HDF5
 * checkpoint (Megatron's dist_checkpointing.save/load), every tensor in its global shape, in the
 * format and by the commit protocol of io/checkpoint_format.h. Every call is collective over
 * comm. The scalar attributes (arguments, RNG, scheduler, optimizer step) go in and come out
 * through checkpoint_put_* / checkpoint_get_int on `file` (io/checkpoint_file.h).
 *   saving:  dist_checkpoint_create, attributes, dist_checkpoint_write, dist_checkpoint_commit
 *   loading: dist_checkpoint_open, dist_checkpoint_check, attributes, dist_checkpoint_read,
 *            dist_checkpoint_close
 * Every tensor carries XXH3 checksums of the boxes written (io/checkpoint_checksum.h), verified
 * on load unless verify_checksums is cleared; a file saved before checksums loads with a note.
 * Bad checkpoints (a corrupt tracker, a tensor whose bytes do not match its checksum, a missing or incomplete file, a tensor of another shape)
 * stop the job with user_error naming the file, the tensor and both shapes; failures of the
 * file system while saving abort it (FATAL). */
#ifndef DIST_CHECKPOINT_H
#define DIST_CHECKPOINT_H

#include <mpi.h>
#include <stdint.h>

#include "app/checkpoint/sharded_state.h"
#include "io/checkpoint_file.h"
#include "io/checkpoint_format.h"
#include "kernels/kernels.h"

typedef struct dist_checkpoint {
    checkpoint_file file;
    checkpoint_names names;
    MPI_Comm comm;
    int verify_checksums;    /* loading: check each tensor's checksums (set by open; 0 skips) */
    int64_t boxes_verified;  /* loading: checksum records verified, all ranks */
} dist_checkpoint;

/* Creates names.partial for iteration `iteration` in dir, which must exist on every rank
 * (checkpoint_make_directory), with the root attributes (complete = 0). */
void dist_checkpoint_create(dist_checkpoint *c, const char *dir, int64_t iteration,
                            int64_t consumed_train_samples, MPI_Comm comm, int collective_io);
/* creates every tensor of state and writes the shards marked for writing (ops NULL: their data is
 * host memory, app/checkpoint/async_checkpoint.h) */
void dist_checkpoint_write(dist_checkpoint *c, const sharded_state *state, const kernel_ops *ops);
/* Sets complete = 1, closes the file, and commits it (one rank): the file becomes names.file and
 * the tracker names it. Returns the tensor bytes all ranks wrote. */
uint64_t dist_checkpoint_commit(dist_checkpoint *c);

/* Opens the checkpoint dir's tracker names and checks its root attributes. Returns 1, or 0 when
 * dir has no tracker (nothing to load). */
int dist_checkpoint_open(dist_checkpoint *c, const char *dir, MPI_Comm comm, int collective_io);
/* every tensor of state is in the file with its global shape */
void dist_checkpoint_check(dist_checkpoint *c, const sharded_state *state);
/* reads every shard of state (copies included) */
void dist_checkpoint_read(dist_checkpoint *c, const sharded_state *state, const kernel_ops *ops);
/* closes the file; returns the tensor bytes all ranks read */
uint64_t dist_checkpoint_close(dist_checkpoint *c);

#endif
