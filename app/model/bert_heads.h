/* bert_heads.h: the BERT-specific parts of Megatron-Core's BertModel around its encoder (the
 * encoder itself is GPT's pre-LN transformer block with bidirectional attention under a
 * key-padding mask, kernel op attention_padded_*):
 *   embedding.tokentype_embeddings.weight [2, C]   added to the word and position embeddings
 *                                                 (num_tokentypes 2 with the binary head, else 0)
 *   lm_head.dense.weight/bias [C, C], [C]          BertLMHead: dense, exact GeLU, layer norm,
 *   lm_head.layer_norm.weight/bias [C]             then output_layer: the word embeddings
 *   output_layer.bias [V]                          (tied) and this bias, over the vocabulary
 *   pooler.dense.weight/bias [C, C], [C]           Pooler: the [CLS] row, dense, tanh
 *   binary_head.weight/bias [2, C], [2]            the sentence-order logits
 * and pretrain_bert.py's loss: lm_loss = sum(per-token loss x loss_mask) / sum(loss_mask),
 * sop_loss = the mean cross entropy of the binary logits against is_random, loss = lm + sop.
 * The LM head runs on the masked rows only (the other rows' logits take no part in the loss:
 * the same loss and gradients as Megatron's full-sequence logits). Under tensor parallelism
 * (Megatron-Core's layout) the output layer and its bias are split by vocabulary rows, its cross
 * entropy is vocab-parallel, and the dense, norm, pooler and binary head are whole on every rank
 * (their inputs and gradients the same everywhere: the output layer's input gradient is
 * all-reduced). Compute goes through kernel_ops only, communication through tensor_parallel.h. */
#ifndef BERT_HEADS_H
#define BERT_HEADS_H

#include <stddef.h>
#include <stdint.h>

#include "app/parallel/tensor_parallel.h"
#include "kernels/kernels.h"

typedef struct bert_heads_config {
    int hidden_size;          /* C */
    int padded_vocab_size;    /* V (all ranks; the output layer holds V/tp rows here) */
    int binary_head;          /* !--bert-no-binary-head: tokentype embeddings, pooler, binary head */
    float layernorm_epsilon;
    /* inspection (tests/tools/bert_logits): when set, host copies of the LM head's logits
     * [M, V/tp] (the masked rows in order, this rank's vocabulary columns) and of the binary
     * head's [B, 2], taken before the loss; NULL in training */
    float *capture_lm_logits, *capture_binary_logits;
} bert_heads_config;

/* the heads' parameters (compute dtype) or their gradients (fp32), as pointers into buffers;
 * tokentype_embeddings, pooler_* and binary_* NULL without the binary head */
typedef struct bert_heads_view {
    void *tokentype_embeddings;
    void *lm_dense_weight, *lm_dense_bias, *lm_norm_weight, *lm_norm_bias;
    void *output_bias;
    void *pooler_weight, *pooler_bias;
    void *binary_weight, *binary_bias;
    void *task_weight, *task_bias;   /* finetune_bert's classification_head / multichoice_head */
} bert_heads_view;

/* one micro-batch of B samples of T tokens, in backend memory (bert_batch_upload) */
typedef struct bert_batch {
    int B, T;
    int *text, *types;        /* [B T] token ids and token types */
    int *key_valid;           /* [B T] the padding mask (attention_padded_*) */
    int masked_count;         /* M: positions with loss_mask 1 */
    int *masked_rows;         /* [M] row b T + t of each, ascending */
    int *masked_labels;       /* [M] their labels */
    int *masked_slot;         /* [B T] index into masked_rows, -1 elsewhere */
    int *cls_rows;            /* [B] row b T (the pooled [CLS] token) */
    int *cls_slot;            /* [B T] b at row b T, -1 elsewhere */
    int *is_random;           /* [B] the sentence-order targets */
} bert_batch;

/* a micro-batch on the host, as the BERT dataset gives its fields (app/data/bert_dataset.h):
 * [B T] arrays, sample after sample, and is_random [B] */
typedef struct bert_host_batch {
    const int64_t *text, *types, *labels, *padding_mask, *loss_mask;
    const int *is_random;
} bert_host_batch;

/* copies a micro-batch of B samples of T tokens into backend memory, into out's buffer when it
 * holds one of the same B and T (a zeroed bert_batch the first time); frees with
 * bert_batch_free. Labels must lie in [0, V) where loss_mask is 1 (checked: exits through
 * user_error naming the sample). */
void bert_batch_upload(const kernel_ops *ops, const bert_host_batch *host, int B, int T,
                       int padded_vocab_size, bert_batch *out);
void bert_batch_free(const kernel_ops *ops, bert_batch *batch);

/* hidden[B T, C] += the token types' embeddings (scratch: [B T, C] compute dtype) */
void bert_tokentype_forward(const kernel_ops *ops, void *hidden, const bert_batch *batch,
                            const void *tokentype_embeddings, void *scratch, int C);
/* dtokentype_embeddings += from dhidden[B T, C] */
void bert_tokentype_backward(const kernel_ops *ops, float *dtokentype_embeddings,
                             const void *dhidden, const bert_batch *batch, int C);

/* The heads' forward and backward on the encoder's output hidden[B T, C] (after its final
 * layer norm, whole on every tensor-parallel rank): *lm_loss and *sop_loss (0 without the
 * binary head; *lm_loss 0 with no masked position). tp: the tensor-parallel group (NULL: one
 * rank); word_embeddings and the output bias are this rank's V/tp vocabulary rows. With
 * with_backward, dhidden[B T, C] (overwritten; the same on every rank) = the gradient of
 * loss_scale (lm_loss + sop_loss), grads and dword_embeddings (the tied output layer's)
 * accumulated; without it (evaluation) nothing but the losses is written. */
void bert_heads_forward_backward(const kernel_ops *ops, const tensor_parallel_comm *tp,
                                 const bert_heads_config *cfg, const bert_batch *batch,
                                 const void *hidden, const void *word_embeddings,
                                 const bert_heads_view *params, const bert_heads_view *grads,
                                 float *dword_embeddings, void *dhidden, float loss_scale,
                                 int with_backward, float *lm_loss, float *sop_loss);
/* the heads' scratch buffers, kept from call to call (bert_heads.c), released: at the model's end */
void bert_heads_workspace_release(void);

#endif
