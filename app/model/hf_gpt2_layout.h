/* hf_gpt2_layout.h: how our GPT parameters (Megatron names and layouts, global shapes) map onto
 * Hugging Face GPT-2 (GPT2LMHeadModel) tensors, and the element permutations between them. The
 * names and transforms are columns of the GPT parameter table (gpt_parameter_table.c); the list
 * below drives both directions of convert_checkpoint. For example:
 *   embedding.word_embeddings.weight  [Vp, C]     transformer.wte.weight  [V, C] (padding rows dropped)
 *   ...self_attention.linear_qkv.weight [3HD, C]  transformer.h.L.attn.c_attn.weight [C, 3HD]
 *   ...mlp.linear_fc1.weight [F, C]               transformer.h.L.mlp.c_fc.weight [C, F]
 *   output_layer.weight [Vp, C] (untied only)     lm_head.weight [V, C] (untied only)
 * HF's Conv1D stores weights as [in, out], ours (like torch.nn.Linear) as [out, in]: transposed.
 * Our qkv rows are grouped per head, [h][{q,k,v}][d] (Megatron); HF's c_attn output columns are
 * [all q | all k | all v], each head-major: row h*3D + s*D + d is column s*H*D + h*D + d. */
#ifndef HF_GPT2_LAYOUT_H
#define HF_GPT2_LAYOUT_H

#include <stdint.h>

typedef struct gpt2_dims {
    int64_t num_layers, hidden, heads, head_dim, ffn_hidden, positions;
    int64_t vocab, padded_vocab;   /* the tokenizer's, and ours padded for the embedding table */
    int untied;                    /* 1: a separate output layer (HF lm_head.weight) */
} gpt2_dims;

typedef enum hf_transform {
    HF_COPY,        /* same layout */
    HF_TRANSPOSE,   /* 2-D [a, b] <-> [b, a] */
    HF_QKV_WEIGHT,  /* per-head rows <-> q|k|v columns, transposed */
    HF_QKV_BIAS,    /* per-head entries <-> q|k|v entries */
    HF_VOCAB_ROWS   /* our padded_vocab rows <-> HF's vocab rows (padding dropped / zero) */
} hf_transform;

typedef struct hf_gpt2_tensor {
    char ours[96];        /* Megatron name, as in /model */
    char hf[96];          /* HF name, with the "transformer." prefix where HF has one */
    hf_transform transform;
    int ndim;
    int64_t our_shape[2], hf_shape[2];
} hf_gpt2_tensor;

/* The tensors of a model of these dimensions, one per global parameter of the GPT table, in our
 * parameter order; malloc'd list, count in *count. Dimensions beyond an int are a user error. */
hf_gpt2_tensor *hf_gpt2_tensor_list(const gpt2_dims *dims, int *count);

/* elements of one side of a tensor */
int64_t hf_gpt2_our_elements(const hf_gpt2_tensor *t);
int64_t hf_gpt2_hf_elements(const hf_gpt2_tensor *t);

/* ours[our_shape] -> hf[hf_shape], and back (HF_VOCAB_ROWS fills padding rows with zeros) */
void hf_gpt2_to_hf(const hf_gpt2_tensor *t, const gpt2_dims *dims, const float *ours, float *hf);
void hf_gpt2_from_hf(const hf_gpt2_tensor *t, const gpt2_dims *dims, const float *hf, float *ours);

/* the HF c_attn column of our qkv row */
int64_t hf_gpt2_qkv_column(int64_t row, int64_t heads, int64_t head_dim);

#endif
