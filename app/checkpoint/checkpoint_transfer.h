/* checkpoint_transfer.h: the tensor data of a sharded_state moved between backend memory and an
 * open checkpoint file (collective), for app/checkpoint/dist_checkpoint.c.
 *
 * Every transfer goes through one host staging buffer: each shard's boxes are cut into pieces of
 * whole rows of at most CHECKPOINT_PIECE_ELEMENTS floats (tensor_part_pieces), so the host memory
 * a save or load needs is bounded, and the kernel's file I/O only ever touches the staging
 * buffer, which is warm after the first piece (copying to or from memory the kernel has not
 * touched before is several times slower on virtual machines; measured in
 * perf/results/io/checkpoint-bandwidth-*). Every rank makes as many transfer calls per tensor as
 * the rank with the most pieces of it, with empty selections once it has none left. */
#ifndef CHECKPOINT_TRANSFER_H
#define CHECKPOINT_TRANSFER_H

#include <mpi.h>

#include "app/checkpoint/sharded_state.h"
#include "io/checkpoint_file.h"
#include "kernels/kernels.h"

#define CHECKPOINT_PIECE_ELEMENTS ((size_t)8 << 20) /* 32 MiB of floats */

/* Saving: create every tensor of the state in its order and write the shards this rank writes.
 * Saving also stores one XXH3 checksum record per piece written (io/checkpoint_checksum.h).
 * Loading: read every shard this rank holds; with verify, check the checksums of what was read
 * (app/checkpoint/checkpoint_verify.h). Returns the boxes this rank verified, or -1 when verify
 * was asked but the file has no checksums (an older checkpoint). Environment (tests):
 *   MTC_CKPT_PIECE_ELEMENTS=N    pieces of at most N elements instead of CHECKPOINT_PIECE_ELEMENTS;
 *   MTC_FAULT_PAUSE_IN_SAVE=S    every rank pauses S seconds halfway through writing the tensors,
 *                                so that a rank can be killed mid-save;
 *   MTC_FAULT_WRITE_DELAY_MS=N   a save sleeps N ms before each tensor (a slow writer).
 * ops NULL: the shards' data is host memory (an asynchronous save's snapshot), copied with memcpy.
 * Saving takes the HDF5 lock (io/hdf5_lock.h) around each HDF5 call, so that it may run in a
 * background thread while the training thread reads HDF5 corpora. */
int64_t checkpoint_transfer(checkpoint_file *f, const sharded_state *state, const kernel_ops *ops, MPI_Comm comm,
                            int saving, int verify);

#endif
