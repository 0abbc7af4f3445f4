/* training.h: the training loop (Megatron's train()): gradient accumulation over micro-batches,
 * data-parallel gradient reduction, clipping, AdamW, the LR schedule, logging and evaluation. */
#ifndef TRAINING_H
#define TRAINING_H

#include "args.h"
#include "comm.h"
#include "gpt_model.h"
#include "optimizer.h"
#include "lr_schedule.h"
#include "train_log.h"

typedef struct trainer {
    const args *args;
    const comm_ops *comm;
    comm_group world;
    comm_group data_parallel;
    gpt_model model;
    optimizer opt;
    lr_schedule lr;
    train_log log;
    int64_t iteration;
    int64_t consumed_samples;
    int64_t skipped_iterations, nan_iterations;
    int *host_tokens, *host_targets; /* one micro-batch, [B*T] each */
    int *sample_buffer;              /* one sample, seq_length + 1 tokens */
} trainer;

/* build groups, model, optimizer from the parsed arguments */
void trainer_setup(trainer *t, const args *a, const kernel_ops *ops);
/* run --train-iters iterations; returns the final validation loss (NaN when none) */
double trainer_train(trainer *t);
void trainer_teardown(trainer *t);

#endif
