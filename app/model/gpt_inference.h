/* gpt_inference.h: the GPT model's forward for generation: a batch of new tokens at positions
 * [past, past+Tq) of B sequences, through the same parameters (gpt_model.h's views) and
 * kernel_ops as training, with a key/value cache per layer so that earlier positions are not
 * recomputed. Dropout is off. Both families of gpt_model.h: GPT (learned positions, LayerNorm,
 * GeLU, biases, multi-head) and Llama (RoPE at the cache position, RMSNorm, SwiGLU,
 * grouped-query attention with one cached key/value head per group, no biases, untied output).
 *
 * Model parallelism as in training, every rank of the model-parallel group calling the forward
 * with the same tokens (lockstep): tensor parallelism splits heads, groups, the MLP and the
 * vocabulary (all-reduce after the embedding and each row-parallel matmul, logits gathered);
 * pipeline parallelism passes the residual stream from stage to stage, and only the last stage
 * (every rank of its tensor-parallel group) has the logits. What the callers need of them
 * travels to the other stages through gpt_inference_share, computed first on the last stage (a
 * sequence's next-token logits, the log-probabilities of the prompt's tokens), never the full
 * [B*Tq, vocabulary] logits of a prefill: Megatron's forward_step/communication likewise
 * broadcast only what sampling needs from the last stage.
 *
 * Mixture-of-experts layers (num_experts > 0) run their router and experts forward-only
 * (moe_inference_forward: no jitter, no losses, no capacity dropping), each token alone: the
 * cached forward of a token gives what the full forward gives. The experts are split over the
 * tensor-parallel ranks as in training (each rank's partial sums reduced as fc2's are), and with
 * expert parallelism (the model's ep_group; every rank of it holds E/ep experts and calls the
 * forward with the same tokens) the rows reach their experts by the training all-to-all. */
#ifndef GPT_INFERENCE_H
#define GPT_INFERENCE_H

#include <mpi.h>
#include <stdint.h>

#include "app/model/gpt_model.h"

typedef struct gpt_inference {
    gpt_model *model;
    const comm_group *pp_group; /* the pipeline group (NULL: one stage) */
    int max_batch;       /* sequences the cache holds */
    int max_len;         /* positions per sequence (<= --max-position-embeddings) */
    int max_rows;        /* token rows (B*Tq) one forward takes */
    void **k_cache, **v_cache; /* per local layer [max_batch, max_len, G/tp, D], compute dtype */
    int *tokens;         /* backend [max_rows] */
    void *x, *x_mid, *ln, *qkv, *attention, *fc1, *gelu, *out_rows, *logits;
    float *mean, *rstd;
    void *norm_ones, *norm_weight; /* --apply-layernorm-1p: ones and 1 + w [hidden], else NULL */
    uint64_t shared_bytes; /* bytes the last stage broadcast through gpt_inference_share (its ranks count) */
    float *local_logits, *gathered_logits; /* host [max_rows, V/tp] and [tp, max_rows, V/tp] (tp > 1) */
    struct moe_activations *moe; /* MoE models: the forward-only MoE buffers every layer shares, else NULL */
} gpt_inference;

/* Buffers for batches of up to max_batch sequences of up to max_len positions, at most
 * max_rows new tokens per forward. The model is one chunk per rank (no virtual stages); with
 * pipeline parallelism pp_group is the model's pipeline group (and its tensor-parallel group
 * and comm_ops those of gpt_model_create), else NULL. */
void gpt_inference_create(gpt_inference *inf, gpt_model *model, const comm_group *pp_group, int max_batch,
                          int max_len, int max_rows);
void gpt_inference_free(gpt_inference *inf);

/* Runs tokens[B*Tq] (host, row-major [B,Tq]) at positions [past, past+Tq) of sequences 0..B-1,
 * storing their keys and values in the cache (positions < past must hold the same sequences'
 * earlier tokens), and writes the output layer's logits [B*Tq, padded vocab] to host fp32 on the
 * last pipeline stage (every rank of the model-parallel group calls it with the same arguments;
 * on the other stages host_logits is left as it was). */
void gpt_inference_forward(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits);

/* The same, with logits for each sequence's last new position only: host_logits [B, padded
 * vocab] (generation without log-probabilities: the output layer on B rows, not B*Tq) */
void gpt_inference_forward_last(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits);

/* The same with greedy decoding on the device: next_tokens[B] (host) = each sequence's
 * highest-scoring next token among ids [0, vocab_size), the lowest id on ties (sample_token's
 * top_k 1 rule), on the last pipeline stage. Only B (max, id) pairs leave the device and cross
 * tensor-parallel ranks, not [B, vocabulary] logits. */
void gpt_inference_forward_greedy(gpt_inference *inf, const int *tokens, int B, int Tq, int past, int vocab_size,
                                  int *next_tokens);

/* 1 on the ranks of the last pipeline stage (those that have the logits) */
int gpt_inference_last_stage(const gpt_inference *inf);

/* buffer[count] of type from the last pipeline stage to every stage (collective over the
 * pipeline group; nothing with one stage); the bytes add to shared_bytes on the last stage */
void gpt_inference_share(gpt_inference *inf, void *buffer, size_t count, MPI_Datatype type);

#endif
