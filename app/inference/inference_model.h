/* inference_model.h: a GPT or Llama model for generation and evaluation, read from a checkpoint
 * (--load). The architecture (layers, hidden size, heads, query groups, kv channels, ffn size,
 * vocabulary, positions: learned or rotary with their base, percent, interpolation and Llama 3
 * scaling (--use-rope-scaling), LayerNorm or RMSNorm (zero-centred with --apply-layernorm-1p),
 * GeLU or SwiGLU, biases or none, tied or untied output layer, norm epsilon) comes from the
 * checkpoint's /args, so a user passes only the directory. The model is built in the
 * layout asked for (--tensor-model-parallel-size x --pipeline-model-parallel-size
 * [x --expert-model-parallel-size] ranks, all of MPI_COMM_WORLD; 1 x 1 on one rank by default) and every rank reads its shard from the file,
 * whatever layout saved it (every tensor is stored in its global shape). On the CUDA backend the
 * fp32 weights are rounded into bf16. A mixture-of-experts checkpoint brings its experts, router
 * (and expert bias) and shared experts (inference_moe.h). */
#ifndef INFERENCE_MODEL_H
#define INFERENCE_MODEL_H

#include <mpi.h>
#include <stdint.h>

#include "app/model/gpt_model.h"
#include "app/parallel/comm.h"
#include "app/parallel/topology.h"
#include "kernels/kernels.h"

typedef struct inference_model {
    gpt_model model;
    comm_group self;         /* a one-rank tensor-parallel group (MPI_COMM_SELF), one rank alone */
    topology topo;           /* the model-parallel layout when it has several ranks */
    int parallel;            /* topo is built (tp * pp > 1) */
    const comm_ops *comm;    /* its communication (MPI or NCCL); NULL alone */
    int vocab_size;          /* the tokenizer's (unpadded) vocabulary size the checkpoint names */
    int seq_length;          /* the training sequence length */
    int64_t iteration;       /* the checkpoint's iteration */
    double moe_capacity_factor; /* a mixture of experts trained with token dropping: its capacity
                                 * factor (inference routes dropless: inference_moe.h); else 0 */
    char tokenizer_type[32]; /* as saved ("NullTokenizer" when trained without a tokenizer) */
    char path[4200];         /* the checkpoint file */
} inference_model;

/* Reads the checkpoint that dir's tracker names and builds the model from its /args over
 * tp_size x pp_size x ep_size ranks (the size of MPI_COMM_WORLD; collective over it when larger
 * than one; ep_size > 1: expert parallelism of a mixture of experts, ep_size replicas of the
 * dense part in lockstep, each rank holding num_experts / ep_size experts);
 * stops with user_error when dir holds none, it lacks an argument, or the layout does not fit
 * the model or the ranks. */
void inference_model_load(inference_model *im, const char *dir, const kernel_ops *ops, uint64_t seed, int tp_size,
                          int pp_size, int ep_size);
void inference_model_free(inference_model *im);

/* the pipeline group of a model of several stages, else NULL (gpt_inference_create's) */
const comm_group *inference_model_pp_group(const inference_model *im);

/* this rank's place in MPI_COMM_WORLD: 0 serves and reports, the others follow */
int inference_model_rank(const inference_model *im);

#endif
