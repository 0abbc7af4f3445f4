/* t5_activations.h: what gpt_model's encoder-decoder mode (gpt_config.t5,
 * app/model/gpt_model_t5.inc) keeps beside GPT's activations: a decoder layer's cross-attention
 * block, a slot's decoder inputs and encoder output, and the model's per-stack row plans and
 * gradient scratch. */
#ifndef T5_ACTIVATIONS_H
#define T5_ACTIVATIONS_H

#include "app/model/gpt_model.h"

/* what a decoder layer's cross-attention block keeps for its backward */
typedef struct t5_cross_activations {
    void *ln;                 /* pre_cross_attn_layernorm output gathered [N_dec, C] */
    float *ln_mean, *ln_rstd; /* [n_dec] */
    void *q;                  /* [N_dec, HD/tp] */
    void *kv;                 /* [N_enc, 2HD/tp] */
    void *out;                /* the attention's output [N_dec, HD/tp] */
    void *workspace;          /* probabilities [B, H/tp, Td, Te] */
    void *residual;           /* x2 [n_dec, C]: the MLP block's input */
} t5_cross_activations;

/* a slot's encoder-decoder inputs and the encoder's output */
typedef struct t5_slot {
    int *decoder_tokens;      /* [N_dec] backend memory */
    int *loss_mask;           /* [N_dec] host: 1 where the label counts */
    void *encoder_output;     /* the last encoder layer's output [n_enc, C] */
    void *encoder_lnf;        /* its final norm gathered [N_enc, C] */
    float *encoder_lnf_mean, *encoder_lnf_rstd; /* [n_enc] */
} t5_slot;

typedef struct t5_state {
    hidden_row_run *row_runs[2]; /* the hidden-dropout runs of the encoder's and the decoder's rows */
    int num_row_runs[2];
    int decoder;                 /* the stack in use */
    void *d_encoder;             /* dL/d(encoder_lnf) [N_enc, C], summed over the decoder layers */
    void *d_q, *d_kv;            /* cross-attention gradients [N_dec, HD/tp], [N_enc, 2HD/tp] */
    void *cross_workspace;       /* selective recompute: every decoder layer's cross-attention
                                  * workspace, made again in its backward; NULL without */
    /* relative positions (POSITION_RELATIVE; app/model/relative_position.h), per stack: the
     * buckets [T, T] (host), the bias of this rank's heads [H/tp, T, T] (fp32 backend memory)
     * made from the stack's table at each forward, and its gradient summed over the stack's
     * layers in the backward (fp32 backend memory); NULL without */
    int *relative_buckets[2];
    float *relative_bias[2], *relative_dbias[2];
} t5_state;

#endif
