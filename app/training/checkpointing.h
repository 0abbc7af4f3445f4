/* checkpointing.h: saving and loading the whole training state (Megatron's --save/--load) as one
 * parallel-HDF5 file per checkpoint, every tensor in its global shape (io/CHECKPOINT_FORMAT.md).
 * The glue of Megatron's training/checkpointing.py: the model and the optimizer describe their
 * shards (app/model/gpt_sharded_state.h, app/optim/optimizer_sharded_state.h), this file adds
 * the scalar state (arguments, iteration, consumed samples, RNG, scheduler, optimizer step),
 * applies --finetune, --no-load-optim, --no-load-rng and --no-save-optim, and
 * app/checkpoint/dist_checkpoint.h moves it all. Saving writes each tensor once; loading lets
 * every rank read exactly the part its own layout holds, so any TP/PP/DP layout loads any
 * checkpoint. */
#ifndef CHECKPOINTING_H
#define CHECKPOINTING_H

#include "app/training/training.h"

/* Stop the job (collective, one message) when --save's dir cannot be created or written in,
 * before any training is spent. */
void checkpoint_check_save_dir(const trainer *t, const char *dir);

/* Save iteration t->iteration under dir (collective). The file becomes visible, and the
 * tracker names it, only once it is complete and on disk. With --async-save the call returns once
 * this rank's state is copied into host memory, after waiting for the save before it if that one
 * is still being written; a background thread writes and commits the file
 * (app/checkpoint/async_checkpoint.h). */
void checkpoint_save(trainer *t, const char *dir);

/* --async-save (each does nothing without it): set up the writer (collective: a communicator of
 * its own, MPI_THREAD_MULTIPLE checked); after an iteration, note a save that has finished (not
 * blocking); wait for the save in flight (before the job ends or exits); wait and free. Rank 0
 * logs each finished save with its write time and the time training was blocked. */
void checkpoint_async_setup(trainer *t);
void checkpoint_async_poll(trainer *t);
void checkpoint_async_finish(trainer *t);
void checkpoint_async_free(trainer *t);

/* Load the checkpoint the tracker in dir names into the trainer (collective), honouring
 * --finetune, --no-load-optim and --no-load-rng. Returns 1 when loaded, 0 when dir holds no
 * tracker (training then starts from scratch, as Megatron does). Bad or mismatched checkpoints
 * stop the job with a message naming the file, the tensor and both shapes. */
int checkpoint_load(trainer *t, const char *dir);

#endif
