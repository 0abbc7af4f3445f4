/* flops.h: model FLOPs per iteration (Megatron-LM's num_floating_point_operations, for MFU)
 * and hardware FLOPs (the same plus the forward work that activation recomputation repeats,
 * for HFU). The one place both the training log and the performance harness take them from. */
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

/* achieved / peak; 0 when the peak is unknown (<= 0) */
double flops_utilization(double flops_per_second, double peak_flops_per_second);

#endif
