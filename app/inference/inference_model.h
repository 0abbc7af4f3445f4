/* inference_model.h: a GPT model for generation and evaluation, read from a checkpoint (--load).
 * The architecture (layers, hidden size, heads, kv channels, ffn size, vocabulary, positions,
 * tied or untied output layer, layer-norm epsilon) comes from the checkpoint's /args, so a user
 * passes only the directory; the model is built whole on this one rank (tensor and pipeline size
 * 1) and the weights read from the file, whatever layout saved them (every tensor is stored in
 * its global shape). On the CUDA backend the fp32 weights are rounded into bf16. */
#ifndef INFERENCE_MODEL_H
#define INFERENCE_MODEL_H

#include <mpi.h>
#include <stdint.h>

#include "app/model/gpt_model.h"
#include "app/parallel/comm.h"
#include "kernels/kernels.h"

typedef struct inference_model {
    gpt_model model;
    comm_group self;         /* a one-rank tensor-parallel group (MPI_COMM_SELF) */
    int vocab_size;          /* the tokenizer's (unpadded) vocabulary size the checkpoint names */
    int seq_length;          /* the training sequence length */
    int64_t iteration;       /* the checkpoint's iteration */
    char tokenizer_type[32]; /* as saved ("NullTokenizer" when trained without a tokenizer) */
    char path[4200];         /* the checkpoint file */
} inference_model;

/* Reads the checkpoint that dir's tracker names on this rank alone (MPI_COMM_SELF) and builds
 * the model from its /args; stops with user_error when dir holds none or it lacks an argument. */
void inference_model_load(inference_model *im, const char *dir, const kernel_ops *ops, uint64_t seed);
void inference_model_free(inference_model *im);

#endif
