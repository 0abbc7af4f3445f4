/* non_persistent_checkpoint.h: Megatron's non-persistent checkpoints (--non-persistent-save-interval,
 * --non-persistent-ckpt-type global|local) and the choice of what to load on restart
 * (checkpointing.py's _load_global_dist_base_checkpoint):
 *  - global: a normal checkpoint (checkpoint_save) into --non-persistent-global-ckpt-dir, default
 *    <save>/non_persistent; before each save rank 0 removes all but the newest one there, as
 *    Megatron's cleanup_old_non_persistent_checkpoint(leave_ckpt_num=1);
 *  - local: node-local files with peer replicas (app/checkpoint/local_checkpoint.h), holding the
 *    state each rank has and the scalars (iteration, consumed samples, seed, optimizer step, the
 *    dynamic loss scaler) in --non-persistent-local-ckpt-dir.
 * A non-persistent save does not count as --save's checkpoint: the exits and the end of training
 * still save a persistent one. Loading: the non-persistent checkpoint is loaded when it is at least
 * as new as --load's; a local set that is incomplete or of another layout is passed over with one
 * line saying why, and --load's global checkpoint is loaded instead. */
#ifndef NON_PERSISTENT_CHECKPOINT_H
#define NON_PERSISTENT_CHECKPOINT_H

#include "app/training/training.h"

/* collective: set up the local checkpoints' replica map (does nothing unless the type is local) */
void non_persistent_setup(trainer *t);
void non_persistent_free(trainer *t);

/* collective: save the non-persistent checkpoint of t->iteration */
void non_persistent_save(trainer *t);

/* collective: with --load, load the newest of --load's checkpoint and the non-persistent one
 * (checkpoint_load's messages and errors) */
void checkpoint_load_newest(trainer *t);

#endif
