/* optimizer.h: AdamW over the model's flat buffers with global-norm gradient clipping.
 * Mixed precision (Megatron's): gradients are fp32 and the step runs on fp32 master weights;
 * with a 16-bit compute dtype (bf16, or fp16 with --fp16) the masters are a separate buffer over
 * the optimizer's ranges (so the distributed optimizer shards them with the Adam moments) and the
 * step writes the 16-bit parameters back; with fp32 parameters (CPU backend) the parameters are
 * the masters.
 * The optimizer works on a list of ranges of the flat buffers: every parameter without the
 * distributed optimizer, or this data-parallel rank's shard of every bucket with it. Adam
 * moments exist only for those ranges. Weight decay skips biases and layer-norm parameters
 * (Megatron's default); the gradient norm counts every parameter of the model once.
 * With a loss scaler (--fp16, --loss-scale) the gradients arrive multiplied by the loss scale:
 * optimizer_prepare_grads unscales them and decides, for every rank at once, whether the step
 * is skipped (Megatron's MixedPrecisionOptimizer.prepare_grads). */
#ifndef OPTIMIZER_H
#define OPTIMIZER_H

#include "app/optim/data_parallel.h"
#include "app/optim/grad_scaler.h"
#include "app/model/gpt_model.h"

typedef struct optimizer_range {
    size_t offset;       /* into the flat parameter and gradient buffers */
    size_t length;
    size_t state_offset; /* into exp_avg / exp_avg_sq */
    int weight_decay;    /* 1: decayed */
    int norm_counted;    /* 0 for copies held elsewhere too (tensor-parallel replicas, tied copy) */
    int param;           /* index into the model's parameter table */
    int embedding_or_output; /* the word embeddings or the output layer (Megatron's
                              * is_embedding_or_output_parameter): --decoupled-lr applies */
    int expert;              /* an MoE expert's tensor */
} optimizer_range;

typedef struct optimizer {
    float beta1, beta2, eps, weight_decay, clip_grad;
    int step;                /* optimizer steps taken */
    optimizer_range *ranges;
    int num_ranges;
    size_t state_elements;
    float *exp_avg;          /* Adam first moment, backend memory */
    float *exp_avg_sq;       /* Adam second moment */
    float *master;           /* fp32 master weights [state_elements], NULL when the params are */
    tensor_range *update_ranges; /* the ranges as multi-tensor tables (adjacent ones merged): */
    int num_update_ranges;       /* those at the learning rate, */
    tensor_range *embedding_ranges; /* the embedding and output layer's (--decoupled-lr) */
    int num_embedding_ranges;
    tensor_range *norm_ranges;   /* the ranges counted in the gradient norm, merged likewise */
    int num_norm_ranges;
    tensor_range *expert_norm_ranges; /* with expert groups set: the experts' ranges of the norm */
    int num_expert_norm_ranges;
    const comm_group *expert_norm_group; /* NULL, or the ranks holding one copy of every expert */
    const comm_group *overflow_group;    /* where a found overflow is agreed (NULL: norm_group) */
    const comm_ops *comm;
    const comm_group *norm_group; /* ranks whose partial squared norms add up to the global one;
                                   * also the group that agrees on found_inf (Megatron's
                                   * grad_stats_parallel_group) */
    grad_scaler scaler;          /* none unless the caller sets one after optimizer_create */
    /* --deterministic-mode's fixed tree (optimizer_use_fixed_tree): the norm by its blocks */
    const fixed_tree *tree;
    int tree_distributed;
    const comm_group *tree_data_parallel, *tree_model_parallel;
} optimizer;

/* dp: the data-parallel layer whose shards to update, or NULL for every parameter */
void optimizer_create(optimizer *opt, const gpt_model *model, const data_parallel *dp,
                      const comm_group *norm_group, const comm_ops *comm, float beta1, float beta2,
                      float eps, float weight_decay, float clip_grad);

/* expert parallelism without the distributed optimizer: the experts' squared gradients add over
 * expert_norm_group (tp x ep x pp: one copy of every expert) instead of norm_group, and an
 * overflow is agreed over overflow_group (the world) */
void optimizer_set_expert_groups(optimizer *opt, const comm_group *expert_norm_group, const comm_group *overflow_group);
void optimizer_free(optimizer *opt, const gpt_model *model);
/* the gradient norm by fixed_tree_sum_squares: blocks of the gradient buffer summed in one order
 * at any data-parallel size; distributed: the ranges are this rank's shard, completed over
 * data_parallel; then summed over model_parallel */
void optimizer_use_fixed_tree(optimizer *opt, const fixed_tree *tree, int distributed,
                              const comm_group *data_parallel, const comm_group *model_parallel);
/* another weight decay for the decayed ranges (--use-checkpoint-opt_param-scheduler takes the
 * checkpoint's) */
void optimizer_set_weight_decay(optimizer *opt, float weight_decay);

/* with a loss scaler: check this rank's gradients over the optimizer's ranges for NaN/Inf, take
 * the MAX of that flag over norm_group, multiply the gradients by the scaler's inv_scale (when
 * none overflowed) and update the scaler. Returns found_inf: 1 when the step must be skipped
 * (the same answer on every rank). Without a scaler: 0, nothing touched. Collective. */
int optimizer_prepare_grads(optimizer *opt, gpt_model *model);

/* L2 norm of the model's whole gradient, each parameter counted once (collective) */
double optimizer_grad_norm(const optimizer *opt, const gpt_model *model);

/* L2 norm of the model's parameters, each counted once: the fp32 masters where there are
 * (Megatron's calc_params_l2_norm), else the parameters themselves (collective; --log-params-norm) */
double optimizer_params_norm(const optimizer *opt, const gpt_model *model);

/* how many gradient elements are exactly zero, each parameter counted once (collective;
 * Megatron's count_zeros_fp32 for --log-num-zeros-in-grad) */
double optimizer_grad_zeros(const optimizer *opt, const gpt_model *model);

/* clip (if the norm exceeds --clip-grad) and take one AdamW step at learning rate lr on the
 * optimizer's ranges. Returns 0, or 1 when the norm is not finite and the step was skipped. */
int optimizer_step(optimizer *opt, gpt_model *model, double grad_norm, double lr);
/* the same with Megatron's --decoupled-lr: the embedding and output layer ranges step at
 * embedding_lr, the others at lr */
int optimizer_step_decoupled(optimizer *opt, gpt_model *model, double grad_norm, double lr, double embedding_lr);

/* the fp32 master weights of range r (backend memory) */
float *optimizer_master(const optimizer *opt, const gpt_model *model, const optimizer_range *r);

/* params = masters over the optimizer's ranges (after loading masters from a checkpoint; the
 * distributed optimizer then gathers the other shards) */
void optimizer_refresh_params(const optimizer *opt, gpt_model *model);

/* bytes of parameters, gradients and optimizer state per parameter held on this rank */
double optimizer_bytes_per_parameter(const optimizer *opt, const gpt_model *model);

#endif
