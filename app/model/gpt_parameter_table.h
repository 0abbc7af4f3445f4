/* gpt_parameter_table.h: a model family's parameters as rows of one table, and the GPT family's
 * table. Everything that lists parameters derives from the rows: the global list
 * (gpt_global_parameters, which checkpoints and parameter dumps read), this rank's layout, buckets
 * and buffer views (gpt_model.c), and the Hugging Face GPT-2 layout (hf_gpt2_layout.c). A new
 * model family (Llama: RMSNorm without bias, SwiGLU fc1 of 2F rows, grouped-query qkv, untied
 * output) adds a table and the dimensions it needs, not edits in each of those places.
 *
 * A row is one tensor of the embedding, of every transformer layer, or of the final part. Its
 * shape is written in the config's dimensions (model_dim), so the same row serves every size. */
#ifndef GPT_PARAMETER_TABLE_H
#define GPT_PARAMETER_TABLE_H

#include <stddef.h>

#include "app/model/hf_gpt2_layout.h"

struct gpt_config;

/* how tensor parallelism splits a tensor: by output rows (column-parallel), by input columns
 * (row-parallel), or not at all (every tensor-parallel rank holds it whole) */
typedef enum { SHARD_NONE = -1, SHARD_ROWS = 0, SHARD_COLS = 1 } shard_dim;

/* INIT_SCALED_NORMAL: std / sqrt(2 * num_layers), Megatron's output_layer_init_method */
typedef enum { INIT_NORMAL, INIT_SCALED_NORMAL, INIT_ONES, INIT_ZEROS } init_kind;

/* the part of the model a row belongs to; a pipeline stage holds the embedding when it is the
 * first, its layers, and the final part when it is the last */
typedef enum { PART_EMBEDDING, PART_LAYER, PART_FINAL } model_part;

/* one dimension of a global shape, in terms of the config */
typedef enum {
    DIM_NONE,       /* the columns of a vector */
    DIM_HIDDEN,     /* C = hidden_size */
    DIM_QKV,        /* (H + 2G)*D: every query head, and a key and value head per query group */
    DIM_ATTENTION,  /* H*D = num_attention_heads * kv_channels */
    DIM_CROSS_KV,   /* 2*H*D: T5's cross-attention linear_kv, per head its key then value */
    DIM_FFN,        /* F = ffn_hidden_size */
    DIM_FC1,        /* fc1's outputs: F, or 2F with SwiGLU (blocks [gate; up], each split over TP) */
    DIM_VOCAB,      /* V = padded_vocab_size */
    DIM_POSITIONS,  /* max_position_embeddings */
    DIM_EXPERTS,    /* E = num_experts */
    DIM_MOE_FC1,    /* an expert's fc1 outputs: Fm, or 2 Fm with SwiGLU (blocks [gate; up]) */
    DIM_MOE_FFN,    /* Fm = moe_ffn_hidden_size */
    DIM_SHARED_FC1, /* the shared experts' fc1 outputs: Fs, or 2 Fs with SwiGLU (blocks [gate; up]) */
    DIM_SHARED_FFN, /* Fs = moe_shared_expert_intermediate_size */
    DIM_ONE,        /* 1 (the shared experts' gate: one output) */
    DIM_TWO,        /* 2 (BERT's token types and sentence-order classes) */
    DIM_TASK_OUTPUTS, /* finetune_bert's head outputs per row (gpt_config.bert_task_outputs) */
    DIM_HEADS,      /* H = num_attention_heads */
    DIM_RELATIVE_BUCKETS /* --relative-attention-num-buckets */
} model_dim;

/* which models have the row: ROW_ALWAYS, or the bitwise OR of conditions that must all hold */
enum {
    ROW_ALWAYS = 0,
    ROW_UNTIED_ONLY = 1,        /* --untie-embeddings-and-output-weights */
    ROW_LEARNED_POSITIONS = 2,  /* --position-embedding-type learned_absolute */
    ROW_LAYERNORM = 4,          /* --normalization LayerNorm */
    ROW_RMSNORM = 8,            /* --normalization RMSNorm */
    ROW_LINEAR_BIAS = 16,       /* not --disable-bias-linear */
    ROW_DENSE_MLP = 32,         /* layer rows: a layer with a dense MLP */
    ROW_MOE = 64,               /* layer rows: an MoE layer (--num-experts, --moe-layer-freq) */
    ROW_SHARED_EXPERT = 128,    /* --moe-shared-expert-intermediate-size */
    ROW_SHARED_GATE = 256,      /* --moe-shared-expert-gate */
    ROW_BERT = 512,             /* encoder mode (gpt_config.bert): BERT's LM head */
    ROW_BERT_BINARY = 1024,     /* encoder mode with the binary head: tokentype embeddings,
                                 * pooler, binary head */
    ROW_QKV_BIAS = 2048,        /* linear_qkv's bias: not --disable-bias-linear, or --add-qkv-bias */
    ROW_BERT_PRETRAIN = 4096,   /* encoder mode, pretraining (no task head): LM and binary heads */
    ROW_BERT_CLASSIFY = 8192,   /* finetune_bert, one row per sample: classification_head */
    ROW_BERT_MULTICHOICE = 16384, /* finetune_bert, a row per choice: multichoice_head */
    ROW_T5 = 32768,             /* encoder-decoder mode (gpt_config.t5) */
    ROW_T5_DECODER = 65536,     /* layer rows: a T5 decoder layer (its cross-attention block) */
    ROW_TIED_ONLY = 131072,     /* not --untie-embeddings-and-output-weights */
    ROW_RELATIVE_POSITIONS = 262144 /* --position-embedding-type relative (T5) */
};
typedef unsigned row_presence;

typedef struct parameter_row {
    model_part part;
    const char *name;           /* Megatron name; layer rows: what follows "<layer_prefix>.N." */
    model_dim rows, cols;       /* global shape; cols DIM_NONE for vectors */
    shard_dim split;
    init_kind init;
    int no_weight_decay;        /* Megatron's rule: biases and norm parameters */
    int sequence_parallel_grad; /* tensor-parallel replicated and applied to token rows: with
                                 * --sequence-parallel each rank's gradient covers its rows only */
    row_presence presence;
    size_t view_offset;         /* offsetof the pointer it binds: in model_view (embedding and
                                 * final rows) or in layer_view (layer rows) */
    const char *hf_name;        /* Hugging Face GPT-2 name; layer rows: what follows
                                 * "<hf_layer_prefix>.N." */
    hf_transform hf_transform;  /* from our layout to the Hugging Face one */
    int per_expert;             /* one tensor per expert of an MoE layer: the name holds "%d", the
                                 * expert's global index, and view_offset binds a pointer array */
} parameter_row;

typedef struct parameter_table {
    const parameter_row *rows;  /* embedding rows, layer rows, final rows, in the global order */
    int count;
    const char *layer_prefix;     /* "decoder.layers" */
    const char *hf_layer_prefix;  /* "transformer.h" */
    int tied_output_row;          /* with tied embeddings, the row whose tensor the output layer
                                   * reuses (the word embeddings) */
} parameter_table;

/* the GPT family, Llama's options included: pre-LN layers with LayerNorm or RMSNorm, biases or
 * none, learned positions or none (RoPE has no parameters), tied or untied output */
const parameter_table *gpt_parameter_table(void);

/* the size of a dimension for a config (0 for DIM_NONE) */
int model_dim_size(model_dim dim, const struct gpt_config *config);

/* how many equal blocks a dimension is made of, each split over tensor parallelism on its own
 * (2 for SwiGLU's fc1 rows, else 1) */
int model_dim_blocks(model_dim dim, const struct gpt_config *config);

/* the query groups of a config: num_query_groups, or the heads when that is 0 */
int gpt_query_groups(const struct gpt_config *config);

/* 1 when models of this config have the row (in global layer `layer`, for layer rows: MoE and
 * dense layers have different MLP rows; -1 for the other parts) */
int parameter_row_present(const parameter_row *row, const struct gpt_config *config, int layer);

/* a row's full name in layer `layer` (ignored outside PART_LAYER) for expert `expert` (per-expert
 * rows; ignored otherwise): Megatron's, or Hugging Face's */
void parameter_row_name(const parameter_table *table, const parameter_row *row, int layer, int expert, char *out,
                        size_t size);
void parameter_row_hf_name(const parameter_table *table, const parameter_row *row, int layer,
                           char *out, size_t size);

/* how many tensors of one part (of global layer `layer`, for PART_LAYER) a model of this
 * config has (a per-expert row counts once per expert) */
int parameter_table_part_count(const parameter_table *table, model_part part,
                               const struct gpt_config *config, int layer);

/* one tensor of the whole model, in the global order (embedding, layers, final part) */
#define PARAM_NAME_MAX 96
typedef struct global_parameter {
    char name[PARAM_NAME_MAX];
    int layer;           /* -1 embedding, num_layers for the final part */
    int expert;          /* per-expert rows: the expert's global index; else -1 */
    int rows, cols;      /* cols == 0 for vectors */
    int row_blocks;      /* model_dim_blocks of its rows */
    shard_dim split;
    init_kind init;
    const parameter_row *row;  /* the table row it comes from */
} global_parameter;

/* the global tensors of a model of this config, one per present row and layer, in order;
 * returns their count (out may be NULL to count). In encoder mode the block is Megatron-Core's
 * BertModel's "encoder": "decoder." in a name becomes "encoder." */
int parameter_table_globals(const parameter_table *table, const struct gpt_config *config,
                            global_parameter *out);

/* the same from the GPT table */
int gpt_global_parameters(const struct gpt_config *config, global_parameter *out);

#endif
