/* pipeline_schedule.h: runs one global batch's micro-batches through this rank's model chunks
 * in pipeline order. With one stage this is forward then backward per micro-batch; with several
 * it is 1F1B (warm-up forwards, steady one-forward-one-backward, cool-down backwards); with
 * virtual stages it is Megatron's interleaved 1F1B. Activations and their gradients move between
 * stages point to point (sends never block; receives wait for their data). */
#ifndef PIPELINE_SCHEDULE_H
#define PIPELINE_SCHEDULE_H

#include "app/optim/data_parallel.h"
#include "app/model/gpt_model.h"
#include "app/parallel/topology.h"

typedef struct micro_batch_source {
    void *context;
    /* host tokens and targets [B*T] of micro-batch m, and its dropout identity */
    void (*load)(void *context, int micro_batch, const int **tokens, const int **targets,
                 micro_batch_rng *rng);
} micro_batch_source;

/* One step of a stage's schedule: the forward or the backward of one micro-batch on one of the
 * stage's model chunks (virtual stages; chunk 0 when there is no interleaving). */
typedef enum pipeline_step_kind { PIPELINE_FORWARD, PIPELINE_BACKWARD } pipeline_step_kind;
typedef struct pipeline_step {
    pipeline_step_kind kind;
    int micro_batch, model_chunk;
} pipeline_step;

/* The order in which stage pp_stage of pp_size, holding virtual_stages model chunks, computes
 * the num_micro_batches micro-batches of one global batch (forwards only when forward_only):
 * Megatron-Core's forward_backward_no_pipelining (pp_size 1), _without_interleaving (1F1B) or
 * _with_interleaving (virtual_stages > 1). Writes the steps to out unless out is NULL and returns
 * their count (num_micro_batches * virtual_stages, twice that with backwards), or -1 for
 * arguments Megatron rejects (the interleaved schedule needs pp_size > 1 and num_micro_batches a
 * multiple of pp_size). Pure: no communication, no model. */
int pipeline_schedule_steps(int pp_size, int pp_stage, int virtual_stages, int num_micro_batches,
                            int forward_only, pipeline_step *out);

/* activation slots to allocate per chunk: the most micro-batches any stage's training steps hold
 * on one chunk between their forward and their backward (forward-only steps hold one) */
int pipeline_activation_slots(int pp_size, int virtual_stages, int num_micro_batches);

/* Run this rank's steps of pipeline_schedule_steps, in that order, receiving each step's input
 * and sending its output. forward_only: evaluation (no backward). Returns the sum of per-token losses
 * computed on this rank (non-zero only on the last stage); micro_batch_losses (NULL: not asked
 * for) receives each micro-batch's. dp may be NULL for forward_only. With dp->tree
 * (--deterministic-mode) each micro-batch's gradients are cleared before it and folded into the
 * fixed tree after its backward (app/optim/fixed_tree_reduce.h). */
double pipeline_run(gpt_model *model, data_parallel *dp, const comm_ops *comm, const topology *topo,
                    int num_micro_batches, int forward_only, const micro_batch_source *source,
                    float grad_scale, double *micro_batch_losses);

#endif
