/* local_checkpoint.h: node-local checkpoints with peer replicas (Megatron's
 * --non-persistent-ckpt-type local, nvidia-resiliency-ext's LocalCheckpointManager). Every rank
 * writes the state it holds (its shards of the flat buffers: fp32 weights, Adam's moments, and the
 * scalars: iteration, consumed samples, RNG seed, optimizer step...) into its own file under the
 * node-local folder (io/local_checkpoint_file.h), then sends the same bytes over MPI to its
 * replica holder: the rank at the same local position on the next node, node (n + 1) mod N (the
 * nodes as app/parallel/topology.h found them, MTC_PRETEND_RANKS_PER_NODE included), which keeps
 * them in its folder. On one node there is no replica (a node loss takes both).
 *
 * --non-persistent-local-ckpt-algo: atomic saves everything a rank holds; fully_parallel (the
 * default) leaves out the shards that are replicas over data parallelism (the caller marks them:
 * the copies data-parallel rank 0 also holds), so data-parallel rank r > 0 saves only what is its
 * own, and loading broadcasts those shards from data-parallel rank 0 of each group (mixture of
 * experts saves as atomic).
 *
 * Commit protocol: each file appears whole or not at all (rename after fsync); an iteration's
 * set is complete when every rank's file is there, its own or the replica; only after every rank
 * has written its file and the replicas it keeps (an all-reduce) does a rank remove the files of
 * older iterations. A save killed at any moment thus leaves the previous complete set in place,
 * and loading takes the newest complete set, using a replica wherever a rank's own file is
 * missing or damaged. A set saved by another layout (world size, TP, PP, DP, CP, EP) or another
 * model (another list of shards) is never loaded: local checkpoints are not resharded. */
#ifndef LOCAL_CHECKPOINT_H
#define LOCAL_CHECKPOINT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "app/checkpoint/sharded_state.h"
#include "io/local_checkpoint_file.h"
#include "kernels/kernels.h"

enum {
    LOCAL_CHECKPOINT_LAYOUT_FIELDS = 6,  /* world size, tp, pp, dp, cp, ep */
    LOCAL_CHECKPOINT_MAX_SCALARS = 32,
};

typedef struct local_checkpoint {
    char dir[LOCAL_CHECKPOINT_PATH_MAX];
    MPI_Comm comm;            /* every rank (the world) */
    int rank, size, num_nodes;
    int *holder;              /* [size]: the rank keeping each rank's replica; -1: none (one node) */
    int fully_parallel;
    MPI_Comm dp_comm;         /* fully_parallel: the data-parallel group the left-out shards come from */
    int dp_rank;              /* this rank's place in it (0 saves the replicated shards) */
    int64_t layout[LOCAL_CHECKPOINT_LAYOUT_FIELDS];
    /* loading: the payload found by local_checkpoint_find, this rank's (own or its replica) */
    unsigned char *found;
    size_t found_bytes;
} local_checkpoint;

/* Collective over comm: learns every rank's node and local rank, and picks each rank's replica
 * holder. layout: this run's world size, tp, pp, dp, cp and ep sizes (saved, and compared when
 * loading). */
void local_checkpoint_init(local_checkpoint *lc, const char *dir, MPI_Comm comm, int node, int local_rank,
                           const int64_t layout[LOCAL_CHECKPOINT_LAYOUT_FIELDS], MPI_Comm dp_comm, int fully_parallel);
void local_checkpoint_free(local_checkpoint *lc);

/* Collective: saves iteration's state: scalars[num_scalars] and the shards of state, less those
 * with replicated[i] set under fully_parallel (state's data is backend memory: ops copies it).
 * Returns the bytes this rank wrote (its file and the replicas it keeps). Stops the job with a
 * message naming the file when it cannot be written. */
uint64_t local_checkpoint_save(local_checkpoint *lc, int64_t iteration, const int64_t *scalars, int num_scalars,
                               const sharded_state *state, const int *replicated, const kernel_ops *ops);

/* Collective: finds the newest complete set of this layout and model (state: this run's shards,
 * replicated as when saving), trying older ones when the newest is incomplete; each rank gets its
 * file's bytes (from its replica holder where its own file is gone). Returns the iteration, or -1
 * with why (the same line on every rank) saying why none can be loaded. Ranks print one WARNING
 * line per file found damaged; rank 0 one line per incomplete set passed over. */
int64_t local_checkpoint_find(local_checkpoint *lc, const sharded_state *state, const int *replicated,
                              int num_scalars, char *why, size_t whylen);

/* Collective: loads the set local_checkpoint_find found into state's shards and scalars (the
 * fully_parallel shards broadcast over the data-parallel group), then drops it. */
void local_checkpoint_restore(local_checkpoint *lc, const sharded_state *state, const int *replicated,
                              int64_t *scalars, int num_scalars, const kernel_ops *ops);

#endif
