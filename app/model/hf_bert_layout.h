/* hf_bert_layout.h: how our BERT parameters (pretrain_bert's encoder mode of the GPT parameter
 * table: Megatron-Core names, global shapes) map onto Hugging Face MegatronBertForPreTraining
 * (transformers' modeling_megatron_bert.py: Megatron's pre-LN BERT with a final LayerNorm), or
 * MegatronBertForMaskedLM for a --bert-no-binary-head model. L is a layer, V the tokenizer's
 * vocabulary (our padded rows dropped), C the hidden size:
 *   embedding.word_embeddings.weight [Vp, C]       bert.embeddings.word_embeddings.weight [V, C]
 *   embedding.position_embeddings.weight           bert.embeddings.position_embeddings.weight
 *   embedding.tokentype_embeddings.weight [2, C]   bert.embeddings.token_type_embeddings.weight
 *   encoder.layers.L.input_layernorm.{weight,bias}        bert.encoder.layer.L.attention.ln.*
 *   ...self_attention.linear_qkv.{weight,bias} [3HD, .]   ...attention.self.{query,key,value}.*
 *   ...self_attention.linear_proj.{weight,bias}           ...attention.output.dense.*
 *   ...pre_mlp_layernorm.{weight,bias}                    bert.encoder.layer.L.ln.*
 *   ...mlp.linear_fc1.{weight,bias}                       ...intermediate.dense.*
 *   ...mlp.linear_fc2.{weight,bias}                       ...output.dense.*
 *   encoder.final_layernorm.{weight,bias}          bert.encoder.ln.*
 *   lm_head.dense.{weight,bias}                    cls.predictions.transform.dense.*
 *   lm_head.layer_norm.{weight,bias}               cls.predictions.transform.LayerNorm.*
 *   output_layer.bias [Vp]                         cls.predictions.bias [V]
 *   output_layer.weight [Vp, C] (untied only)      cls.predictions.decoder.weight [V, C]
 *   pooler.dense.{weight,bias}                     bert.pooler.dense.*
 *   binary_head.{weight,bias} [2, C], [2]          cls.seq_relationship.*
 * With tied embeddings HF's decoder is the word embeddings (its _tied_weights_keys: not stored,
 * as save_pretrained leaves it out). Both sides store linear weights [out, in], so only rows
 * move: our linear_qkv rows are per head [q; k; v], D rows each (Megatron-Core's layout with one
 * query group per head, hf_llama_qkv_row), HF's query/key/value are H*D rows each, head-major.
 * Without the binary head our model has no token types; MegatronBertForMaskedLM always has
 * token_type_embeddings, so the export writes them as zeros [2, C] (adding nothing: the same
 * function) and the import requires them zero. */
#ifndef HF_BERT_LAYOUT_H
#define HF_BERT_LAYOUT_H

#include <stdint.h>

#include "app/model/hf_llama_layout.h"

typedef struct bert_dims {
    int64_t num_layers, hidden, heads, head_dim, ffn_hidden, positions;
    int64_t vocab, padded_vocab;   /* the tokenizer's, and ours padded for the embedding table */
    int binary_head;               /* tokentype embeddings, pooler, binary head */
    int untied;                    /* a separate output layer (HF cls.predictions.decoder.weight) */
} bert_dims;

/* HF's token_type_embeddings of a model without the binary head: no tensor of ours (ours[0] is
 * empty), zeros [2, C] on the HF side */
#define HF_BERT_ZERO_TOKEN_TYPES "bert.embeddings.token_type_embeddings.weight"

/* The tensors of a BERT of these dimensions, one per global parameter of the GPT parameter
 * table in encoder mode (pretraining heads), in our parameter order, each with llama_transform
 * LLAMA_COPY, LLAMA_VOCAB_ROWS or LLAMA_QKV (hf_llama_to_hf / hf_llama_from_hf with
 * bert_llama_dims convert them); without the binary head one more entry at the end, the zero
 * token types (HF_BERT_ZERO_TOKEN_TYPES, parts 1, ours ""). malloc'd, count in *count.
 * Dimensions beyond an int are a user error. */
hf_llama_tensor *hf_bert_tensor_list(const bert_dims *dims, int *count);

/* the llama_dims whose transforms convert BERT's tensors (one query group per head) */
llama_dims bert_llama_dims(const bert_dims *dims);

#endif
