/* gpt_model.h: the GPT model (pre-LN decoder, tied or untied output layer) with Megatron-Core's
 * options for the Llama family (learned, rotary or no position embeddings; LayerNorm or RMSNorm;
 * GeLU or SwiGLU MLP; multi-head or grouped-query attention; linear biases or none), as this
 * rank holds it: its tensor-parallel shard of its pipeline stage's model chunks, over one
 * flat parameter buffer and one flat gradient buffer.
 *
 * Every parameter has a Megatron-style name, a global shape, the part of it this rank holds, and
 * an offset into the flat buffers; names, shapes, splits and initialization come from the rows of
 * the parameter table (gpt_parameter_table.h), in its order. Element i of the global tensor P is drawn from
 * philox(seed, stream(P's name), i), so the model is the same whatever the parallel layout.
 * Tensor parallelism splits QKV and fc1 by output rows (column-parallel), proj and fc2 by input
 * columns (row-parallel, bias added after the reduction) and the vocabulary by rows; sequence
 * parallelism keeps the residual stream, layer norms and dropout on 1/tp of the token rows.
 * Compute goes through kernel_ops only; communication through comm_ops only. */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "app/model/bert_heads.h"
#include "app/model/gpt_parameter_table.h"
#include "app/model/fp8_config.h"
#include "app/parallel/comm.h"
#include "kernels/kernels.h"

/* which transformer layers --recompute-granularity full recomputes (--recompute-method) */
typedef enum { RECOMPUTE_METHOD_NONE, RECOMPUTE_METHOD_UNIFORM, RECOMPUTE_METHOD_BLOCK } recompute_method;

/* --position-embedding-type (relative: T5's relative position bias, app/model/relative_position.h) */
typedef enum { POSITION_LEARNED_ABSOLUTE, POSITION_ROPE, POSITION_NONE, POSITION_RELATIVE } position_embedding_type;

/* --cp-comm-type: keys and values passed around the ring (p2p), all-gathered (allgather), or
 * heads exchanged for the sequence by all-to-all (a2a) */
typedef enum { CP_COMM_P2P = 0, CP_COMM_ALLGATHER = 1, CP_COMM_A2A = 2, CP_COMM_A2A_P2P = 3 } cp_comm_kind;

/* the most layers a mixture-of-experts model may have (gpt_config.moe_layer) */
#define GPT_MAX_MOE_LAYERS 1024

/* where the dropout masks of one micro-batch come from */
typedef struct micro_batch_rng {
    uint64_t iteration;      /* training iteration (0 for evaluation) */
    int64_t first_sample;    /* index of the micro-batch's first sample within the global batch */
    int training;            /* 0: evaluation, no dropout */
} micro_batch_rng;

typedef struct gpt_config {
    /* encoder mode (Megatron-Core's BertModel, pretrain_bert): bidirectional attention under the
     * key-padding mask (kernel op attention_padded_*), the block named "encoder", tokentype
     * embeddings (with the binary head), and BERT's heads and loss in place of the output layer
     * and the per-token cross entropy (bert_heads.h); the inputs are packed (gpt_chunk_forward) */
    int bert;
    int bert_binary_head;     /* !--bert-no-binary-head: tokentype embeddings, pooler, binary head */
    /* finetune_bert (Megatron's tasks/main.py): the task head in place of the LM and binary heads
     * (bert_task_head.h): its outputs per row (MNLI 3: classification_head; RACE 1:
     * multichoice_head), 0 when pretraining; rows per sample (RACE 4 choices, else 1) */
    int bert_task_outputs;
    int bert_task_choices;
    /* encoder-decoder mode (Megatron-Core's T5Model, pretrain_t5; app/model/gpt_model_t5.inc):
     * layers [0, t5_encoder_layers) are the encoder (bidirectional attention under the
     * encoder's padding mask, named encoder.layers.N), the others the decoder (causal
     * self-attention, cross-attention over the encoder's output under that mask, MLP; named
     * decoder.layers.N - E); both stacks share the word and position embeddings, each has its
     * final norm, and the LM head is the tied output layer with a bias. The two stacks run on
     * sequences of t5_encoder_seq_length and t5_decoder_seq_length rows; seq_length is the
     * one of the stack being computed (the encoder's outside a forward or backward). One
     * chunk: no pipeline parallelism (Megatron refuses it for T5 too). */
    int t5;
    int t5_encoder_layers;
    int t5_encoder_seq_length, t5_decoder_seq_length;
    int num_layers;
    int hidden_size;          /* C */
    int num_attention_heads;  /* H (all ranks) */
    int kv_channels;          /* D, per-head size */
    int ffn_hidden_size;      /* F (all ranks) */
    int padded_vocab_size;    /* V (all ranks) */
    int max_position_embeddings;
    int seq_length;           /* T */
    int micro_batch_size;     /* B */
    float layernorm_epsilon;  /* --norm-epsilon, for LayerNorm and RMSNorm */
    int num_query_groups;     /* G (all ranks) of grouped-query attention; 0 or H: multi-head */
    position_embedding_type position_embedding_type;
    /* T5 with POSITION_RELATIVE: --relative-attention-num-buckets (the tables' rows) and
     * --relative-attention-max-distance */
    int relative_attention_num_buckets;
    int relative_attention_max_distance;
    float rotary_base;        /* RoPE: --rotary-base (10000 when 0) */
    float rotary_percent;     /* RoPE: --rotary-percent (1 when 0) */
    int rotary_interleaved;
    float rotary_seq_len_interpolation_factor; /* 0 or 1: none */
    float rope_scaling_factor; /* Llama 3's rope scaling (--use-rope-scaling): its factor; 0: none */
    int rmsnorm;              /* --normalization RMSNorm (else LayerNorm) */
    int apply_layernorm_1p;   /* --apply-layernorm-1p: norm weights stored as w - 1 (zero at start) */
    int swiglu;               /* --swiglu: fc1 has 2F rows [gate; up] */
    int gelu_erf;             /* a GeLU MLP computes F.gelu's exact erf form (Megatron without the
                               * bias-GeLU fusion: --no-bias-gelu-fusion, --disable-bias-linear);
                               * 0: the tanh approximation (bias_gelu_impl). app/model/mlp_gelu.h */
    int disable_bias_linear;  /* --disable-bias-linear: no biases in the linear layers */
    int add_qkv_bias;         /* --add-qkv-bias: linear_qkv has a bias even with disable_bias_linear */
    /* mixture of experts (app/model/moe_layer.h): num_experts 0 is a dense model; otherwise the
     * layers l with moe_layer[l] set replace the MLP by a router and num_experts experts of
     * moe_ffn_hidden_size (each split over tensor parallelism as the dense MLP is) */
    int num_experts;
    int moe_ffn_hidden_size;
    moe_router_spec moe_router;
    float moe_input_jitter_eps;   /* 0: none */
    /* shared experts (Megatron-Core's SharedExpertMLP, app/model/moe_shared_expert.h): a dense
     * MLP of this width on every token of an MoE layer, added to the routed experts' output
     * (0: none); with the gate its output is scaled by sigmoid(x . gate_weight) per token */
    int moe_shared_expert_intermediate_size;
    int moe_shared_expert_gate;
    /* --moe-shared-expert-overlap: with expert parallelism the shared experts compute while the
     * all-to-alls are in flight (moe_layer.c; the same results) */
    int moe_shared_expert_overlap;
    /* aux-loss-free load balancing (app/model/moe_expert_bias.h): a per-layer expert bias for
     * the top-k choice, moved by update_rate towards balance after every training step */
    int moe_router_enable_expert_bias;
    float moe_router_bias_update_rate;
    /* Megatron's benchmark routers (app/model/moe_forced_routing.h): random logits
     * (--moe-router-force-load-balancing, or --moe-router-force-biased), plus a random expert
     * bias of std |moe_router_force_biased| when that is given */
    int moe_apply_probs_on_input;  /* top-1: the routing weight scales the expert's input row
                                    * instead of its output (Megatron's moe_apply_probs_on_input) */
    int moe_router_force_random;
    int moe_router_force_biased_given;
    float moe_router_force_biased;
    int moe_pad_expert_input_to_capacity; /* with a capacity: Megatron pads every expert's rows to
                                           * it (the results do not change; the bias's counts do) */
    unsigned char moe_layer[GPT_MAX_MOE_LAYERS];
    /* sliding-window attention (Megatron's --window-size LEFT,RIGHT with Transformer Engine's
     * causal attention, RIGHT then 0; gpt_layer_window): with window_size_given, a windowed
     * layer's query at position t sees the keys at t - window_left .. t (window_left -1:
     * unbounded). Every layer is windowed unless --window-attn-skip-freq says otherwise:
     * window_attn_skip_freq N > 0 makes layers N, 2N, ... (1-based) full attention; with
     * window_attn_pattern set, window_attn_layer[l] (0-based) is 1 for the windowed layers. */
    int window_size_given;
    int window_left;
    int window_attn_skip_freq;
    int window_attn_pattern;
    unsigned char window_attn_layer[GPT_MAX_MOE_LAYERS];
    gpt_fp8_config fp8;       /* FP8 training of the layers' linear layers (app/model/fp8_linear.h) */
    float init_method_std;
    float hidden_dropout;
    float attention_dropout;
    int untie_embeddings_and_output_weights;
    uint64_t seed;
    /* activation recomputation (Megatron's --recompute-*): selective keeps no attention-core
     * state (softmax statistics or probabilities) per micro-batch and recomputes it in the
     * backward; full keeps only the input of each group of recompute_num_layers layers
     * (uniform) or of each of a chunk's first recompute_num_layers layers (block) and runs the
     * group's forward again before its backward. T5: each stack (encoder, decoder) on its own,
     * as Megatron-Core's two TransformerBlocks; selective recomputes the cross-attention's core
     * too (Megatron's CrossAttention checkpoints core_attn like SelfAttention) */
    int recompute_selective;
    /* --recompute-modules layernorm (selective): the two norms' outputs (the qkv and fc1 GEMMs'
     * inputs, [N,C] each per layer) are not kept; the backward runs the norm (and, with
     * sequence parallelism, its gather) again from the kept input and statistics, bit for bit */
    int recompute_layernorm;
    /* --recompute-modules moe_act (selective): the experts' activation (fc2's input) is computed
     * again in the backward from fc1's kept output even where --keep-mlp-activation keeps the
     * dense MLP's; without --keep-mlp-activation that is what every layer does already */
    int recompute_moe_act;
    /* --recompute-modules moe (or --moe-layer-recompute): an MoE layer keeps nothing of its own
     * beyond its input (the pre-MLP norm output, kept anyway); the backward runs the layer's
     * forward again from it (router, dispatch, experts, shared experts) into one set of
     * activations shared by all layers, bit for bit the forward's */
    int recompute_moe;
    /* --recompute-modules shared_experts: the shared experts' fc1 output (and gate values) live in
     * one set for all layers; the backward runs the shared experts' forward again from the layer's
     * input before their backward */
    int recompute_shared_experts;
    recompute_method recompute_method;
    int recompute_num_layers;
    /* --keep-mlp-activation(-num-layers): in the first keep_mlp_activation_layers layers of each
     * model chunk (0: none; INT_MAX: all), keep the MLP's activation (GeLU or SwiGLU output,
     * fc2's input) for the backward instead of computing it again there ([N,F/tp] per layer) */
    int keep_mlp_activation_layers;
    /* --memory-efficient-layer-norm (Apex's memory-efficient kernels): the norms' backward works
     * from their outputs (kept for the GEMMs after them) instead of their inputs, so the residual
     * stream's values ([n,C] twice per layer) are kept only where a recomputation needs them */
    int memory_efficient_layer_norm;
    /* --cross-entropy-chunk-rows: token rows per pass of the output layer and the cross entropy
     * (their backward runs in the same pass, so only one chunk's logits exist at a time); 0:
     * the fewest chunks of at most 2 GiB of logits each */
    int loss_chunk_rows;
    /* parallel layout */
    int tp_size, tp_rank, sequence_parallel;
    int tp_comm_overlap;       /* --tp-comm-overlap: sequence-parallel collectives as one-sided block
                                * copies overlapped with row blocks of the GEMMs (needs
                                * sequence_parallel; app/parallel/tp_overlap.h) */
    int tp_comm_overlap_disable_ag, tp_comm_overlap_disable_rs; /* keep NCCL for the all-gathers /
                                * the reduce-scatters (--disable-tp-comm-overlap-ag/-rs) */
    int pp_size, pp_rank, virtual_stages;   /* virtual_stages = model chunks per stage */
    int ep_size, ep_rank;      /* expert parallelism: this rank holds experts [ep_rank E/ep, +E/ep) */
    int expert_dp_rank;        /* this rank among those holding the same experts (0: writes them) */
    int etp_size, etp_rank;    /* expert tensor parallelism: the ranks splitting each expert (0:
                                * tp_size, tp_rank); with etp_size 1 < tp_size each expert is
                                * whole here and each tensor-parallel rank dispatches its own
                                * share of the tokens (moe_layer.h) */
    const struct comm_group *ep_group; /* the expert-parallel group (ep_size > 1) */
    /* context parallelism (app/model/context_parallel.h): cp_size ranks share each sequence,
     * this one holding pieces cp_rank and 2 cp_size - 1 - cp_rank of its 2 cp_size equal pieces;
     * seq_length is then the rows of a sequence held here (the global length / cp_size).
     * cp_comm_type[l]: how layer l's attention communicates (--cp-comm-type, cp_comm_kind);
     * cp_a2a_size: a2a+p2p's inner (all-to-all) group size, --hierarchical-context-parallel-sizes' first */
    int cp_size, cp_rank, cp_a2a_size;
    const struct comm_group *cp_group;
    unsigned char cp_comm_type[GPT_MAX_MOE_LAYERS];
    int activation_slots;     /* micro-batches in flight per chunk (pipeline schedules) */
    int64_t bucket_size;      /* elements per gradient bucket (data parallelism) */
    int bucket_alignment;     /* bucket lengths are padded to a multiple of this (data-parallel size) */
} gpt_config;

/* 1 when global layer `layer` of the config is an MoE layer */
static inline int gpt_layer_is_moe(const gpt_config *c, int layer) {
    return c->num_experts > 0 && layer >= 0 && layer < GPT_MAX_MOE_LAYERS && c->moe_layer[layer];
}

/* the sliding window of global layer `layer`'s attention (the kernels' window_left): -1 for
 * none (every earlier key), else the keys at most that many positions back (Megatron-Core's
 * is_layer_window_attention, layer_number = layer + 1) */
static inline int gpt_layer_window(const gpt_config *c, int layer) {
    if (!c->window_size_given || c->window_left < 0) return -1;
    if (c->window_attn_pattern)
        return layer >= 0 && layer < GPT_MAX_MOE_LAYERS && c->window_attn_layer[layer] ? c->window_left : -1;
    if (c->window_attn_skip_freq > 0 && (layer + 1) % c->window_attn_skip_freq == 0) return -1;
    return c->window_left;
}

typedef struct param_tensor {
    char name[PARAM_NAME_MAX];
    size_t offset;       /* in elements, into the flat buffers */
    size_t numel;        /* elements held here */
    int rows, cols;      /* global shape; cols == 0 for vectors */
    int local_rows, local_cols;
    shard_dim split;     /* how tensor parallelism splits it */
    int shard_start;     /* first global row (SHARD_ROWS) or column (SHARD_COLS) held here;
                          * with row_blocks > 1, the first row held within each block */
    int row_blocks;      /* SHARD_ROWS tensors made of equal blocks each split over tensor
                          * parallelism (SwiGLU's fc1 [gate; up]: 2); else 1 */
    int no_weight_decay; /* biases and layer-norm parameters (Megatron's rule) */
    int tp_replicated;   /* every tensor-parallel rank holds the same values */
    int sequence_parallel_grad; /* with --sequence-parallel its gradient is partial per rank */
    int embedding_copy;  /* the last stage's copy of the tied word embeddings */
    int chunk;           /* model chunk it belongs to */
    int bucket;          /* gradient bucket */
    int layer;           /* global layer; -1 embedding, num_layers for the final part */
    int expert;          /* an MoE layer's expert tensor: the expert's global index; else -1 */
    const parameter_row *row; /* its row of the parameter table */
} param_tensor;

/* a contiguous range of the flat buffers reduced together over data-parallel ranks */
typedef struct grad_bucket {
    size_t start, length;    /* length padded to a multiple of bucket_alignment */
    int first_param, num_params;
    int expert;              /* holds expert parameters, reduced over the expert-data-parallel
                              * ranks (a bucket holds experts only or none) */
} grad_bucket;

/* pointers of one transformer layer into a flat buffer: the parameters (compute dtype) or the
 * gradients (fp32; the same view type, its pointers passed where kernels take float *). Each
 * field is bound by the table row whose view_offset names it. */
typedef struct layer_view {
    void *input_layernorm_weight, *input_layernorm_bias; /* biases NULL with RMSNorm, and the
                                                          * linear ones with --disable-bias-linear */
    void *qkv_weight, *qkv_bias;                 /* [(H+2G)*D/tp, C], per group {q..., k, v} */
    void *proj_weight, *proj_bias;               /* [C, H*D/tp], bias [C] */
    void *pre_mlp_layernorm_weight, *pre_mlp_layernorm_bias;
    void *fc1_weight, *fc1_bias;                 /* [F/tp, C]; SwiGLU [2F/tp, C]: [gate; up] shards */
    void *fc2_weight, *fc2_bias;                 /* [C, F/tp], bias [C] */
    /* MoE layers instead of fc1 and fc2 (app/model/moe_layer.h) */
    void *router_weight;                         /* [E, C], whole on every rank */
    void **expert_fc1_weight;                    /* [E] of [FC1m/tp, C]: expert e's fc1 shard
                                                  * (SwiGLU: [gate; up] shards); NULL where not held */
    void **expert_fc2_weight;                    /* [E] of [C, Fm/tp] */
    void *shared_fc1_weight;                     /* [FC1s/tp, C] shared experts' fc1 shard (SwiGLU:
                                                  * [gate; up] shards), NULL without them */
    void *shared_fc2_weight;                     /* [C, Fs/tp] */
    void *shared_gate_weight;                    /* [1, C], whole on every rank; NULL without the gate */
    /* T5's decoder layers: the cross-attention block (Megatron-Core's CrossAttention) */
    void *pre_cross_attn_layernorm_weight, *pre_cross_attn_layernorm_bias;
    void *cross_q_weight, *cross_q_bias;         /* linear_q [H*D/tp, C] */
    void *cross_kv_weight, *cross_kv_bias;       /* linear_kv [2*H*D/tp, C]: per head {k, v} */
    void *cross_proj_weight, *cross_proj_bias;   /* linear_proj [C, H*D/tp], bias [C] */
} layer_view;

/* a chunk's parameters (or gradients) as pointers into one flat buffer; NULL where not held */
typedef struct model_view {
    void *word_embeddings;      /* [V/tp, C] */
    void *position_embeddings;  /* [max_pos, C]; NULL unless learned_absolute */
    layer_view *layers;          /* the chunk's layers */
    void *final_layernorm_weight, *final_layernorm_bias;
    void *output_layer;         /* [V/tp, C]; the word embeddings (or their copy) when tied */
    void *encoder_final_layernorm_weight, *encoder_final_layernorm_bias; /* T5 */
    void *lm_head_bias;         /* T5: lm_head.output_layer.bias [V/tp] */
    void *encoder_relative_bias, *decoder_relative_bias; /* T5 with relative positions: the
                                 * stacks' tables [num_buckets, H], whole on every rank */
    bert_heads_view bert;       /* encoder mode: the tokentype embeddings (first chunk) and BERT's
                                 * heads (last chunk); output_bias [V/tp] */
} model_view;

/* what one micro-batch's forward keeps for its backward (rows: N = B*T; n = N/tp with SP);
 * `void *` buffers are in the compute dtype */
typedef struct layer_activations {
    void *input;                  /* residual stream entering the layer [n,C] */
    void *ln1;                     /* ln1 gathered [N,C] (where its fp8 codes are kept: the shared scratch) */
    uint8_t *ln1_codes, *ln2_codes; /* [N,C] the fp8 codes of ln1 and ln2 kept for the backward
                                   * (fp8_keeps_input_codes), else NULL; only fp8 GEMMs read them
                                   * (a recompute group's, made when any layer keeps codes, go
                                   * unread by its other layers) */
    float *ln1_mean, *ln1_rstd;    /* fp32 statistics [n] (mean unused by RMSNorm) */
    void *qkv;                    /* [N,(H+2G)D/tp], q and k rotated with RoPE */
    void *attention_out;          /* [N,HD/tp] */
    void *attention_workspace;
    void *residual_mid;           /* input + dropout(proj) [n,C] */
    void *ln2;
    float *ln2_mean, *ln2_rstd;
    void *fc1_out;                /* pre-activation [N,F/tp] ([N,2F/tp] with SwiGLU) */
    void *activation;             /* its GeLU or SwiGLU [N,F/tp], fc2's input: only in layers
                                   * that keep it (else the backward computes it again);
                                   * the backward then reuses it for the activation's gradient */
    struct t5_cross_activations *cross; /* T5's decoder layers: the cross-attention block's
                                   * (gpt_model_t5.inc); NULL elsewhere */
    struct moe_activations *moe;  /* what an MoE layer keeps (app/model/moe_layer.h); NULL in
                                   * dense models */
} layer_activations;

typedef struct activation_slot {
    int *tokens, *targets;         /* [N] */
    layer_activations *layers;
    void *output;                 /* residual stream after the chunk's last layer [n,C] */
    void *lnf;                     /* post-process: lnf gathered [N,C] */
    float *lnf_mean, *lnf_rstd;
    void *logits;                 /* [R,V/tp] for R rows of the loss (all N unless chunked),
                                   * overwritten by dlogits in the loss pass */
    void *d_lnf;                  /* chunked loss only: dL/d(lnf gathered) [N,C], this rank's
                                   * partial sum, made in the forward for the backward */
    float *losses, *row_max, *sum_exp_and_target; /* fp32 [N], [N], [2N] */
    /* encoder mode: the padding mask [N] (every chunk), the token types [N] (first chunk); on
     * the last chunk the micro-batch's masked positions and targets, and d_lnf [N,C] holds
     * dL/d(lnf gathered), the same on every tensor-parallel rank */
    int *key_valid, *types;
    bert_batch bert;
    struct t5_slot *t5;           /* T5: the decoder's inputs and the encoder's output */
} activation_slot;

typedef struct model_chunk {
    int first_layer, num_layers;   /* global index of its first layer, and how many */
    /* full recompute, per stack of layers (one; T5: the encoder's and the decoder's, each a
     * TransformerBlock that checkpoints its own layers in Megatron-Core's T5Model) */
    int recomputed_layers[2];      /* the stack's first layers whose activations are recomputed */
    int recompute_group[2];        /* in groups of this many layers (uniform: N, block: 1) */
    int pre_process, post_process; /* holds the embedding / the output layer and loss */
    int first_param, num_params;   /* its range of the parameter table */
    int *layer_first_param;        /* [num_layers + 1]: where each layer's tensors start in the
                                    * parameter table (the last entry: the final part's); MoE and
                                    * dense layers hold different tensors, and with expert
                                    * parallelism a rank holds only its experts */
    model_view weights, grads;
    activation_slot *slots;        /* config.activation_slots of them */
} model_chunk;

/* hooks the data-parallel layer installs: parameters [first, first+count) are about to be
 * read by a forward, or their gradients are complete for this micro-batch */
typedef struct model_hooks {
    void *context;
    void (*params_needed)(void *context, int first_param, int count);
    void (*grads_ready)(void *context, int first_param, int count);
} model_hooks;

/* backward scratch shared by all chunks and slots */
typedef struct backward_scratch {
    void *d_residual;     /* [n,C]: dL/d(residual stream); received from / sent to neighbours */
    void *d_hidden;       /* [n,C] */
    void *d_full;         /* [N,C] */
    void *d_attention;    /* [N,HD/tp] */
    void *d_qkv;          /* [N,(H+2G)D/tp] */
    void *d_ffn_a, *d_ffn_b; /* [N,F/tp], [N,fc1 rows/tp]; d_ffn_a also holds the forward's
                              * activation (fc2's input) and the backward's recomputed one.
                              * When every layer keeps its activation it takes d_ffn_a's
                              * place (NULL), and with GeLU d_ffn_b's too */
    void *forward_full;   /* [N,C] forward temporary (row-parallel partial sums) */
    void *forward_rows;   /* [n,C] forward temporary */
    void *norm_ones, *norm_weight; /* [C], --apply-layernorm-1p only: ones, and a norm's 1 + w */
    /* activation recomputation: the activations of one group of recomputed layers (shared by
     * every chunk and slot; a group's first layer keeps its own input in the slot), and with
     * selective recompute the one attention workspace of every layer */
    layer_activations *recompute_layers[2]; /* per stack (T5: encoder, decoder): [recompute_group] */
    int num_recompute_layers[2];
    void *attention_workspace;  /* selective: for the longer stack */
    void *norm_out;       /* [N,C] (T5: the longer stack's), recompute_layernorm only: every layer's ln1 and ln2 */
    void *tp_received;    /* [N,C], tp_comm_overlap only: the peers' partial sums of this rank's rows */
    /* [n,C] x 3, memory_efficient_layer_norm only: the residual stream between stored layers (two,
     * in turn) and a layer's sum after its attention block, which no backward reads then */
    void *residual_rows[3];
} backward_scratch;

/* rows of the residual stream held here that are contiguous in the micro-batch (gpt_model.c's
 * plan_row_runs): local rows [local_row, local_row + rows) are global rows global_row.. of the
 * micro-batch numbered b x (whole sequence length) + position */
typedef struct hidden_row_run {
    size_t local_row;
    int rows;
    uint64_t global_row;
} hidden_row_run;

/* a weight matrix whose gradient a step writes over instead of clearing (grad_first_write.c) */
typedef struct grad_first_write_entry {
    size_t offset, numel;  /* its gradient's place in the flat buffer */
    int param;
    int pending;           /* this step has not written it yet */
} grad_first_write_entry;

typedef struct gpt_model {
    gpt_config config;
    const kernel_ops *ops;
    const comm_ops *comm;
    const comm_group *tp_group;
    param_tensor *params;
    int num_params;
    size_t num_elements;       /* length of the flat buffers, bucket padding included */
    size_t num_parameters;     /* parameters held here (no padding) */
    grad_bucket *buckets;
    int num_buckets;
    void *param_buffer;        /* backend memory, compute dtype (bf16 or fp16 on CUDA, fp32 on cpu) */
    float *grad_buffer;        /* backend memory, fp32 (Megatron's main_grad) */
    int mixed_precision;       /* compute dtype is not fp32: the optimizer keeps fp32 masters */
    comm_dtype act_dtype;      /* the compute dtype, for communication */
    model_chunk *chunks;
    int num_chunks;
    backward_scratch scratch;
    model_hooks hooks;
    int local_rows;            /* n: token rows of the residual stream held here */
    float *host_losses;        /* [N] */
    comm_request *tp_requests; /* [tp], tp_comm_overlap only: a step's fetches, by peer */
    int tp_last_step_rs;       /* the last tensor-parallel step was a block reduce-scatter */
    float *capture_logits;     /* host [N,V/tp]: when set, the last chunk copies its logits here
                                * before the loss (inspection tools); NULL in training. Encoder
                                * mode: the LM head's [masked rows, V/tp] (bert_heads.h) */
    float *capture_binary_logits; /* encoder mode, host [B,2]: likewise the binary head's logits */
    grad_first_write_entry *first_write; /* by offset; see gpt_model_start_grads */
    int num_first_write;
    size_t *clear_ranges;      /* [2 x num_clear_ranges]: offset and length of what a step clears */
    int num_clear_ranges;
    struct moe_scratch *moe_scratch; /* MoE models: the experts' work buffers (moe_layer.h) */
    struct moe_activations *shared_experts_recomputed; /* recompute_shared_experts: the layer
                                                        * whose shared-expert buffers all share */
    struct moe_activations *moe_recomputed; /* recompute_moe: the one set of MoE activations every
                                             * layer's forward writes and its backward recomputes */
    float *moe_expert_bias;    /* --moe-router-enable-expert-bias: [num_layers x E] fp32 backend
                                * memory, the rows of the layers held here in use (moe_expert_bias.h);
                                * NULL otherwise */
    double *moe_tokens_per_expert; /* with it: host [num_layers x E], this rank's routed tokens
                                * since the last bias update */
    float grad_scale;          /* the last forward's grad_scale (the MoE losses' backward reads it) */
    hidden_row_run *row_runs;  /* the runs hidden dropout draws its mask by */
    int num_row_runs;
    struct context_parallel_scratch *cp_scratch; /* context parallelism's ring buffers (context_parallel.h) */
    micro_batch_rng bert_task_rng;      /* finetune_bert: the micro-batch's rng, for the head's dropout */
    double bert_task_correct;           /* finetune_bert: samples the head classified right (summed) */
    double bert_lm_loss, bert_sop_loss; /* encoder mode: the sums of the micro-batches' lm and sop
                                * losses since the caller last cleared them (last chunk) */
    struct t5_state *t5;       /* T5: the two stacks' row plans and shared buffers (gpt_model_t5.inc) */
    double t5_loss_sum, t5_loss_tokens; /* T5: the masked loss sum and the loss-mask tokens of
                                * the micro-batches since the caller last cleared them */
    struct fp8_state *fp8;     /* --fp8-format: the linear layers' scaling state (fp8_linear.h); NULL otherwise */
} gpt_model;

/* Lay out this rank's parameters (chunks of its stage, its tensor-parallel shard), allocate
 * them, the gradients and the activation slots; initialize from the seed. */
void gpt_model_create(gpt_model *model, const gpt_config *config, const kernel_ops *ops,
                      const comm_ops *comm, const comm_group *tp_group);
void gpt_model_free(gpt_model *model);

/* Forward one micro-batch through one chunk into activation slot `slot`. The first chunk reads
 * host tokens; other chunks read their input from gpt_chunk_input(). The last chunk computes
 * the loss (targets on the host) and returns the SUM of per-token losses, leaving dL/dlogits
 * scaled by grad_scale for the backward; others return 0 and leave their output in
 * gpt_chunk_output(). Encoder mode (config.bert), on every chunk: tokens [3 N] are the text,
 * the token types and the padding mask, targets [2 N + B] the labels, the loss mask and the
 * sentence-order targets is_random (bert_dataset.h's fields); the last chunk returns this
 * micro-batch's lm_loss + sop_loss (pretrain_bert's loss: means over its masked positions and
 * its samples) and adds each to model->bert_lm_loss / bert_sop_loss; grad_scale is then the
 * factor of that loss. T5 mode (config.t5; one chunk): tokens [2 B Te + B Td] are the encoder
 * text, the decoder text and the encoder's padding mask (1: a token), targets [2 B Td] the labels
 * and the loss mask; it returns the micro-batch's masked mean loss (grad_scale its factor) and
 * adds the masked sum and the mask's tokens to model->t5_loss_sum / t5_loss_tokens.
 * with_backward: gpt_chunk_backward follows (a chunked loss then
 * accumulates the output layer's weight gradient here, one chunk of logits at a time); 0 for
 * forward-only passes (evaluation, inspection), which leave the gradients alone. */
double gpt_chunk_forward(gpt_model *model, int chunk, int slot, const int *tokens,
                         const int *targets, micro_batch_rng rng, float grad_scale, int with_backward);

/* A training step's start: clears the gradients except the weight matrices, whose first
 * weight-gradient write of the step then overwrites them (grad_first_write.c); beside the
 * forward where the backend can (kernel_ops.zero_beside). Without it the backward accumulates
 * into whatever the gradients hold. */
void gpt_model_start_grads(gpt_model *model);

/* Backward of the forward held in `slot`. Chunks other than the last read dL/d(output) from
 * gpt_grad_buffer(); on return, chunks other than the first leave dL/d(input) there. Parameter
 * gradients accumulate into the gradient buffer (after gpt_model_start_grads, a weight
 * matrix's first write of the step overwrites). */
void gpt_chunk_backward(gpt_model *model, int chunk, int slot, micro_batch_rng rng);

void *gpt_chunk_input(gpt_model *model, int chunk, int slot);   /* [n,C] compute dtype */
void *gpt_chunk_output(gpt_model *model, int chunk, int slot);  /* [n,C] */
void *gpt_grad_buffer(gpt_model *model);                        /* [n,C] */

/* the initial (seed) values of local elements [lo, hi) of parameter `param`, computed by the
 * backend straight into backend memory dst: the compute dtype (fp32_dst 0) or fp32 (fp32_dst 1:
 * the optimizer's master weights start from the unrounded values) */
void gpt_param_initialize(const gpt_model *model, int param, size_t lo, size_t hi, void *dst, int fp32_dst);

/* the rotary embedding of the config (--rotary-percent, --rotary-base, ...), from position 0 */
rope_spec gpt_rope_spec(const gpt_config *config);

/* FNV-1a hash of the parameter bytes (bitwise-reproducibility checks in the log) */
uint64_t gpt_model_parameter_hash(const gpt_model *model);

/* 1 when this rank's copy of p is the one that counts once (written to checkpoints and dumps,
 * counted in norms and parameter totals): not the last stage's tied-embedding copy, and for
 * tensors every tensor-parallel rank holds whole, only tensor-parallel rank 0's */
static inline int param_is_primary_copy(const param_tensor *p, int tp_rank) {
    return !p->embedding_copy && !(p->tp_replicated && tp_rank != 0);
}

/* 1 when p is the word-embedding tensor that the output layer reuses with tied embeddings
 * (either stage's copy): its gradients are summed over the embedding group first */
static inline int param_is_tied_embedding(const param_tensor *p) {
    const parameter_table *table = gpt_parameter_table();
    return p->row == &table->rows[table->tied_output_row];
}

/* this rank's place among the data-parallel replicas of p: the data-parallel rank, or for an
 * expert the expert-data-parallel rank (replica 0 writes checkpoints and dumps) */
static inline int param_replica_rank(const param_tensor *p, const gpt_config *c, int dp_rank) {
    return p->expert >= 0 ? c->expert_dp_rank : dp_rank;
}

/* global element index of local element e of parameter p (layout-independent numbering) */
shard_map param_shard_map(const param_tensor *p);
uint64_t param_global_index(const param_tensor *p, size_t e);

#endif
