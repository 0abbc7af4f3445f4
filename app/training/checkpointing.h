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
 * tracker names it, only once it is complete and on disk. */
void checkpoint_save(trainer *t, const char *dir);

/* Load the checkpoint the tracker in dir names into the trainer (collective), honouring
 * --finetune, --no-load-optim and --no-load-rng. Returns 1 when loaded, 0 when dir holds no
 * tracker (training then starts from scratch, as Megatron does). Bad or mismatched checkpoints
 * stop the job with a message naming the file, the tensor and both shapes. */
int checkpoint_load(trainer *t, const char *dir);

#endif
