/* fp8_config.h: what a run's FP8 training is (Megatron's --fp8-* flags, TransformerConfig's fp8
 * fields), part of gpt_config; the scaling state and the emulation are app/model/fp8_linear.h. */
#ifndef FP8_CONFIG_H
#define FP8_CONFIG_H

typedef enum { FP8_RECIPE_DELAYED = 0, FP8_RECIPE_TENSORWISE = 1 } fp8_recipe_kind;

typedef struct gpt_fp8_config {
    int enabled;                /* --fp8-format given */
    int hybrid;                 /* --fp8-format hybrid: E5M2 gradients (e4m3: E4M3 everywhere) */
    fp8_recipe_kind recipe;     /* --fp8-recipe delayed | tensorwise */
    int margin;                 /* --fp8-margin */
    int amax_history_len;       /* --fp8-amax-history-len */
    int amax_compute_algo;      /* --fp8-amax-compute-algo: fp8_amax_compute_algo (kernels/fp8_recipe.h) */
    int wgrad;                  /* 1 unless --no-fp8-wgrad: the weight gradient's GEMM in fp8 too */
    int layers_at_start_in_bf16, layers_at_end_in_bf16; /* --first-last-layers-bf16's (0 without) */
} gpt_fp8_config;

#endif
