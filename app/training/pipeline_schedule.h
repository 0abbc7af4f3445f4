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

/* micro-batches this rank keeps in flight per chunk (activation slots to allocate) */
int pipeline_activation_slots(int pp_size, int virtual_stages, int num_micro_batches);

/* Run the schedule. forward_only: evaluation (no backward). Returns the sum of per-token losses
 * computed on this rank (non-zero only on the last stage). dp may be NULL for forward_only. */
double pipeline_run(gpt_model *model, data_parallel *dp, const comm_ops *comm, const topology *topo,
                    int num_micro_batches, int forward_only, const micro_batch_source *source,
                    float grad_scale);

#endif
