/* training.h: the training loop (Megatron's train()): the pipeline schedule over the global
 * batch's micro-batches, gradient synchronization over data-parallel ranks, clipping, AdamW, the
 * LR schedule, logging and evaluation. */
#ifndef TRAINING_H
#define TRAINING_H

#include "app/training/args.h"
#include "app/data/gpt_dataset.h"
#include "app/parallel/comm.h"
#include "app/optim/data_parallel.h"
#include "app/model/gpt_model.h"
#include "app/optim/lr_schedule.h"
#include "app/optim/optimizer.h"
#include "app/parallel/topology.h"
#include "app/training/train_log.h"
#include "app/training/microbatches.h"
#include "app/training/straggler.h"

struct trainer;
/* finetune_bert (app/tasks): the task's samples in place of a corpus, and a call after every
 * iteration (the end-of-epoch accuracy) */
typedef struct trainer_task_source {
    void *context;
    /* row `index` of the split's row stream (training: consumed rows + position in the global
     * batch; a RACE sample's choices are consecutive rows) into row b of the packed micro-batch:
     * tokens [3 B T] text, types, padding mask; targets [2 B T] zero (no masked LM) and, at
     * 2 B T + b / choices, the sample's label (bert_task_head.h) */
    void (*load_row)(void *context, int split, int64_t index, int b, int *tokens, int *targets);
    void (*after_iteration)(void *context, struct trainer *t);
} trainer_task_source;

typedef struct trainer {
    const args *args;
    const comm_ops *comm;
    topology topo;
    gpt_model model;
    data_parallel dp;
    optimizer opt;
    lr_schedule lr;
    lr_schedule decoupled_lr;  /* the embedding and output layer's (--decoupled-lr); max_lr < 0: none */
    train_log log;
    int64_t iteration;
    int64_t consumed_samples;
    int64_t consumed_valid_samples;  /* where the validation iterator stands (Megatron's args) */
    microbatch_calculator batches;   /* the global batch of each iteration (--rampup-batch-size) */
    int64_t skipped_iterations, nan_iterations; /* in the current log interval (Megatron resets them) */
    int64_t lr_skipped_steps;        /* schedule steps not taken: iterations an overflow skipped (or their samples
                                      * with --train-samples); the schedule stands that far behind */
    fixed_tree *tree;                /* --deterministic-mode's summation order over the global batch, or NULL */
    double *micro_batch_losses;      /* [micro-batches] their loss sums, for the tree */
    struct async_save_state *async_save; /* --async-save's writer (app/training/checkpointing.c); NULL without */
    struct local_checkpoint *local_checkpoint; /* --non-persistent-ckpt-type local (non_persistent_checkpoint.h) */
    int64_t last_saved_iteration;    /* iteration of the last checkpoint saved or loaded (-1: none) */
    int exited_early;                /* stopped by --exit-interval, --exit-duration-in-mins or the exit signal */
    double job_start;                /* seconds since the epoch when the job started (earliest rank) */
    startup_times startup;           /* process start to the first iteration, for the log and the metrics */
    double last_heartbeat;           /* MPI_Wtime of rank 0's last log or heartbeat line */
    double local_loss_sum;           /* this rank's share of the last global batch's loss sum */
    /* the micro-batch being loaded */
    int split;
    int64_t batch_start;
    uint64_t rng_iteration;
    int training;
    int *host_tokens, *host_targets; /* one micro-batch, [B*T] each */
    int32_t *sample_buffer;          /* one sample, seq_length + 1 tokens */
    int loaded_micro_batch;
    gpt_datasets *data;              /* --data-path corpora; NULL with --mock-data */
    char *data_words;                /* --data-path split into words (data's paths point here) */
    phase_counts papi_totals;        /* --papi-events over the whole run (sums on rank 0) */
    int64_t papi_sampled;            /* iterations counted since the last collection */
    double *moe_last;                /* MoE models: the last iteration's layer log (moe_log_take) */
    int moe_last_micro_batches;      /* ... over this many micro-batches */
    straggler_detector straggler;    /* --log-straggler: per-rank section times for the report */
    /* pretrain_bert: one micro-batch's BERT sample fields (host_tokens holds text, types and padding
     * mask [3 B T], host_targets labels, loss mask [2 B T] and is_random [B]: gpt_chunk_forward's
     * encoder mode), and the last global batch's mean lm and sop losses */
    bert_sample bert_fields;
    int64_t *bert_arrays;
    /* pretrain_t5: one T5 sample's fields (gpt_chunk_forward's T5 packing: see load_t5_sample) */
    t5_sample t5_fields;
    int64_t *t5_arrays;
    double last_lm_loss, last_sop_loss;
    const trainer_task_source *task; /* finetune_bert: set after trainer_setup; NULL otherwise */
    double last_task_correct;        /* finetune_bert: samples classified right in the last global batch */
    double evaluation_sop_loss;      /* the last evaluation's mean sop loss (NAN: not BERT's binary head) */
} trainer;

/* build groups, model, optimizer from the parsed arguments, then load --load (collective) */
void trainer_setup(trainer *t, const args *a, const kernel_ops *ops);
/* run --train-iters iterations; returns the final validation loss (NaN when none) */
double trainer_train(trainer *t);
void trainer_teardown(trainer *t);
/* forward only (no dropout, no update) over one global batch of the split from row batch_start
 * (finetune_bert's evaluation); returns its mean loss, t->last_task_correct its correct samples */
double trainer_forward_batch(trainer *t, int split, int64_t batch_start);

#endif
