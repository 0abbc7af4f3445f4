/* async_checkpoint.h: asynchronous checkpoint saves (Megatron's --async-save). The training
 * thread copies the shards this rank writes into host memory (the snapshot) and returns; a
 * background thread then writes the parallel-HDF5 file and commits it with
 * dist_checkpoint_write and dist_checkpoint_commit on the writer's own communicator (a duplicate
 * of the save's, so its collectives never match the training thread's). The commit protocol is
 * the synchronous one: the file is written as .partial, closed collectively, renamed and named by
 * the tracker by rank 0 only after every rank has written its part, so a job killed at any moment
 * leaves the newest complete checkpoint loadable. At most one save is in flight.
 *
 * Two threads call MPI at once: the process needs MPI_THREAD_MULTIPLE (async_checkpoint_init
 * refuses to start without it). HDF5 built for parallel I/O is not thread-safe, so the writer
 * and the corpus reader serialize their HDF5 calls with io/hdf5_lock.h; everything else the
 * training thread does with HDF5 (loading, the start of a save) happens while no writer runs.
 *
 * Cost: host memory for one copy of the state this rank writes (its share of the fp32 weights and
 * Adam's moments), kept between saves so that the next snapshot copies into warm pages. */
#ifndef ASYNC_CHECKPOINT_H
#define ASYNC_CHECKPOINT_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "app/checkpoint/dist_checkpoint.h"

typedef struct async_checkpoint {
    MPI_Comm comm;           /* the writer's communicator: create the save's file on it */
    int in_flight;           /* a save started and not yet joined */
    pthread_t thread;
    atomic_int finished;     /* set by the writer thread once its save is committed */
    dist_checkpoint save;    /* the save in flight */
    sharded_state state;     /* its shards, pointing into the snapshot */
    float *snapshot;         /* host copy of the written shards, kept between saves */
    void (*snapshot_release)(void *); /* the backend's page-locked release, or NULL: free */
    size_t snapshot_capacity; /* in floats */
    uint64_t snapshot_bytes; /* this save's snapshot */
    uint64_t bytes;          /* written by all ranks (after the commit) */
    double write_seconds;    /* the writer thread's time, from its start to the commit */
} async_checkpoint;

/* Collective over comm: duplicates it for the writer. Stops the job with a message when the MPI
 * library does not provide MPI_THREAD_MULTIPLE. */
void async_checkpoint_init(async_checkpoint *w, MPI_Comm comm);
/* Copies the shards of state this rank writes into the snapshot (ops: the backend's memory),
 * takes over state (freed when the save is joined) and the save c (created on w->comm, its
 * attributes written), and starts the writer thread. Nothing may be in flight. */
void async_checkpoint_start(async_checkpoint *w, dist_checkpoint *c, sharded_state *state, const kernel_ops *ops);
/* Not blocking: 1 when a save was in flight and has finished (it is joined now), else 0. */
int async_checkpoint_poll(async_checkpoint *w);
/* Waits for the save in flight, if any, and joins it; returns 1 when there was one. */
int async_checkpoint_wait(async_checkpoint *w);
/* waits for the save in flight, frees the snapshot and the communicator (collective) */
void async_checkpoint_free(async_checkpoint *w);

#endif
