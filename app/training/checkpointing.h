/* checkpointing.h: saving and loading the whole training state (Megatron's --save/--load) as one
 * parallel-HDF5 file per checkpoint, every tensor in its global shape (io/CHECKPOINT_FORMAT.md).
 * Saving writes each tensor once (one data-parallel replica, one tensor-parallel rank for
 * replicated tensors, never the tied-embedding copy); loading lets every rank read exactly the
 * part its own layout holds, so any TP/PP/DP layout loads any checkpoint. */
#ifndef CHECKPOINTING_H
#define CHECKPOINTING_H

#include "app/training/training.h"

/* Save iteration t->iteration under dir (collective). The file becomes visible, and the
 * tracker names it, only once it is complete and on disk. */
void checkpoint_save(trainer *t, const char *dir);

/* Load the checkpoint the tracker in dir names into the trainer (collective), honouring
 * --finetune, --no-load-optim and --no-load-rng. Returns 1 when loaded, 0 when dir holds no
 * tracker (training then starts from scratch, as Megatron does). Bad or mismatched checkpoints
 * stop the job with a message naming the file, the tensor and both shapes. */
int checkpoint_load(trainer *t, const char *dir);

/* iteration of the newest complete checkpoint in dir: -1 when there is none */
int64_t checkpoint_latest_iteration(const char *dir);

#endif
