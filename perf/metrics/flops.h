/* flops.h: model FLOPs per iteration (Megatron-LM's num_floating_point_operations, for MFU)
 * and hardware FLOPs (the same plus the forward work that activation recomputation repeats,
 * for HFU), for the GPT-style decoder (pretrain_gpt: GPT, Llama, MoE), BERT (pretrain_bert,
 * finetune_bert) and T5 (pretrain_t5). The one place both the training log and the performance
 * harness take them from. */
#ifndef PERF_FLOPS_H
#define PERF_FLOPS_H

/* a GPT-style decoder's shape and the work of one iteration */
typedef struct model_shape {
    int num_layers;
    int hidden_size;
    int num_attention_heads;
    int num_query_groups;        /* grouped-query attention; = heads for multi-head attention */
    int kv_channels;             /* projection size per head (hidden / heads by default) */
    int ffn_hidden_size;         /* dense MLP hidden size */
    int swiglu;                  /* gated MLP: h -> 2 ffn and ffn -> h (3 GEMMs of h x ffn) */
    int padded_vocab_size;       /* the logits GEMM */
    int seq_length;
    int causal;                  /* 1: only half of QK^T and softmax(QK^T)V is work (Megatron) */
    /* mixture of experts; num_experts 0: every MLP is dense */
    int num_experts;
    int moe_layer_freq;          /* layer i is MoE when i % freq == 0 (Megatron's integer form) */
    int moe_layers;              /* > 0: how many layers are MoE (a --moe-layer-freq pattern); overrides freq */
    int moe_router_topk;         /* experts each token is routed to */
    int moe_ffn_hidden_size;     /* per expert */
    int moe_shared_expert_intermediate_size;  /* 0: no shared experts */
} model_shape;

typedef enum recompute_granularity {
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,         /* core attention (QK^T, softmax, x V) is recomputed */
    RECOMPUTE_FULL,              /* whole transformer layers are recomputed */
} recompute_granularity;

typedef struct recompute_spec {
    recompute_granularity granularity;
    int num_layers;              /* full: layers whose forward runs twice (all: num_layers) */
} recompute_spec;

typedef struct iteration_flops {
    double model;                /* MFU's numerator: forward + backward, nothing recomputed */
    double hardware;             /* HFU's numerator: model + recomputed forward work */
} iteration_flops;

/* FLOPs of one iteration of global_batch_size sequences of shape->seq_length tokens;
 * recompute NULL means none (hardware == model) */
iteration_flops flops_per_iteration(const model_shape *shape, double global_batch_size,
                                    const recompute_spec *recompute);

/* BERT's heads on its encoder (Megatron-Core's BertModel; finetune_bert's task models) */
typedef struct bert_heads_shape {
    int lm_head;                 /* BertLMHead (dense h x h) and the logits over the vocabulary, on
                                  * every token: pretrain_bert; 0: finetune_bert (no LM head) */
    int pooled_outputs;          /* 0: no pooler; else the pooler (dense h x h on each row's [CLS]
                                  * token) and a head of this many outputs per row: 2 the binary
                                  * (sentence-order) head, K classes (MNLI), 1 per choice (RACE) */
} bert_heads_shape;

/* BERT: the encoder's layers as flops_per_iteration counts them but with bidirectional attention
 * (encoder->causal is ignored: never halved), plus the heads; global_batch_size counts rows of
 * encoder->seq_length tokens (a RACE sample is a row per choice). Recomputation repeats the
 * layers' forward work only (the heads sit outside the checkpointed layers). */
iteration_flops bert_flops_per_iteration(const model_shape *encoder, const bert_heads_shape *heads,
                                         double global_batch_size, const recompute_spec *recompute);

/* T5 (Megatron-Core's T5Model): `encoder` gives the encoder stack (num_layers, seq_length) and
 * what both stacks share (hidden, heads, groups, kv_channels, ffn, swiglu, padded vocabulary;
 * causal and the MoE fields are ignored: T5 has dense MLPs); the decoder stack has
 * decoder_num_layers layers over decoder_seq_length tokens, each with causal self-attention,
 * cross-attention over the encoder's output and the MLP; the logits are on the decoder's tokens */
typedef struct encoder_decoder_shape {
    model_shape encoder;
    int decoder_num_layers;
    int decoder_seq_length;
} encoder_decoder_shape;

/* FLOPs of one iteration of global_batch_size samples; full recomputation repeats the forward of
 * the first recompute->num_layers layers of each stack (capped at the stack's layers),
 * selective the core attention of every layer (self- and cross-attention) */
iteration_flops t5_flops_per_iteration(const encoder_decoder_shape *shape, double global_batch_size,
                                       const recompute_spec *recompute);

/* achieved / peak; 0 when the peak is unknown (<= 0) */
double flops_utilization(double flops_per_second, double peak_flops_per_second);

#endif
