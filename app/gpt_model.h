/* gpt_model.h: the GPT model (pre-LN decoder, learned positions, tied or untied output layer)
 * over one flat parameter buffer and one flat gradient buffer. Every parameter has a
 * Megatron-style name, a global shape and an offset into the flat buffers; initialization draws
 * element i of parameter P from philox(seed, stream(P's name), i), so the model is the same
 * whatever the parallel layout or backend. Compute goes through kernel_ops only. */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

typedef struct gpt_config {
    int num_layers;
    int hidden_size;          /* C */
    int num_attention_heads;  /* H */
    int kv_channels;          /* D, per-head size */
    int ffn_hidden_size;      /* F */
    int padded_vocab_size;    /* V */
    int max_position_embeddings;
    int seq_length;           /* T */
    int micro_batch_size;     /* B */
    float layernorm_epsilon;
    float init_method_std;
    float hidden_dropout;
    float attention_dropout;
    int untie_embeddings_and_output_weights;
    uint64_t seed;
} gpt_config;

#define PARAM_NAME_MAX 96

typedef struct param_tensor {
    char name[PARAM_NAME_MAX];
    size_t offset;       /* in elements, into the flat buffers */
    size_t numel;
    int rows, cols;      /* global shape; cols == 0 for vectors */
    int no_weight_decay; /* biases and layer-norm parameters (Megatron's rule) */
} param_tensor;

/* pointers of one transformer layer into a flat buffer (parameters or gradients) */
typedef struct layer_view {
    float *input_layernorm_weight, *input_layernorm_bias;
    float *qkv_weight, *qkv_bias;                 /* [3*H*D, C], per head {q,k,v} */
    float *proj_weight, *proj_bias;               /* [C, H*D] */
    float *pre_mlp_layernorm_weight, *pre_mlp_layernorm_bias;
    float *fc1_weight, *fc1_bias;                 /* [F, C] */
    float *fc2_weight, *fc2_bias;                 /* [C, F] */
} layer_view;

/* all parameters (or gradients) as pointers into one flat buffer */
typedef struct model_view {
    float *word_embeddings;      /* [V, C] */
    float *position_embeddings;  /* [max_pos, C] */
    layer_view *layers;          /* num_layers */
    float *final_layernorm_weight, *final_layernorm_bias;
    float *output_layer;         /* [V, C]; = word_embeddings when tied */
} model_view;

/* what one micro-batch's forward keeps for its backward, plus scratch for the backward */
typedef struct layer_activations {
    float *input;                  /* residual stream entering the layer [N,C] */
    float *ln1, *ln1_mean, *ln1_rstd;
    float *qkv;                    /* [N,3HD] */
    float *attention_out;          /* [N,HD] */
    void *attention_workspace;
    float *residual_mid;           /* input + dropout(proj) [N,C] */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc1_out;                /* pre-GeLU [N,F] */
    float *gelu_out;               /* [N,F] */
} layer_activations;

typedef struct activations {
    int *tokens, *targets;         /* [N] */
    layer_activations *layers;
    float *final_input;            /* residual stream after the last layer [N,C] */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;                 /* [N,V], overwritten by dlogits in the loss pass */
    float *losses, *row_max, *sum_exp, *target_logit; /* [N] */
    /* backward scratch */
    float *d_residual, *d_hidden, *d_ln, *d_attention, *d_qkv, *d_ffn_a, *d_ffn_b;
    float *scratch_hidden;         /* [N,C] forward temporary */
} activations;

typedef struct gpt_model {
    gpt_config config;
    const kernel_ops *ops;
    param_tensor *params;
    int num_params;
    size_t num_elements;       /* length of the flat buffers */
    float *param_buffer;       /* backend memory */
    float *grad_buffer;        /* backend memory */
    model_view weights, grads;
    activations act;
    float *host_losses;        /* [N] host copy of per-token losses */
} gpt_model;

/* where the dropout masks of one micro-batch come from */
typedef struct micro_batch_rng {
    uint64_t iteration;      /* training iteration (or an evaluation stream) */
    int64_t first_sample;    /* index of the micro-batch's first sample within the global batch */
    int training;            /* 0: evaluation, no dropout */
} micro_batch_rng;

/* Lay out and allocate parameters, gradients and activations; initialize from the seed. */
void gpt_model_create(gpt_model *model, const gpt_config *config, const kernel_ops *ops);
void gpt_model_free(gpt_model *model);

/* Forward one micro-batch (host tokens/targets [B*T]); returns the SUM of per-token losses.
 * When backward follows, grad_scale is dLoss/d(per-token loss) (1 / tokens in the global batch). */
double gpt_model_forward(gpt_model *model, const int *tokens, const int *targets,
                         micro_batch_rng rng, float grad_scale);

/* Backward of the last forward: accumulates into the gradient buffer. */
void gpt_model_backward(gpt_model *model, micro_batch_rng rng);

/* FNV-1a hash of the parameter bytes (bitwise-reproducibility checks in the log) */
uint64_t gpt_model_parameter_hash(const gpt_model *model);

#endif
