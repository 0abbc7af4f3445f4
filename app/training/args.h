/* args.h: the run's arguments, with Megatron-LM's flag names and meanings.
 * Flags come from the command line and optionally from a file (--args-file PATH, one flag per
 * line, '#' comments); the command line overrides the file. The option engine
 * (app/core/options.h) parses and checks each flag from args.c's table; args.c adds the derived
 * defaults and the cross-flag checks. Everything happens before any allocation; a bad flag stops
 * the job with one message naming it. */
#ifndef ARGS_H
#define ARGS_H

#include <stddef.h>
#include <stdint.h>

#define ARGS_PATH_MAX 1024

typedef struct args {
    /* network size */
    int num_layers;
    int hidden_size;
    int num_attention_heads;
    int ffn_hidden_size;          /* default 4 * hidden_size */
    int kv_channels;              /* default hidden_size / num_attention_heads */
    int seq_length;
    int max_position_embeddings;  /* default seq_length */
    int vocab_size;               /* with --mock-data / NullTokenizer */
    int vocab_size_flag;          /* --vocab-size as given (vocab_size may come from the tokenizer) */
    int make_vocab_size_divisible_by;
    int padded_vocab_size;        /* derived: vocab_size rounded up */
    float layernorm_epsilon;      /* --norm-epsilon (alias --layernorm-epsilon) */
    int untie_embeddings_and_output_weights;
    /* the Llama family's options (Megatron-Core's TransformerConfig) */
    char position_embedding_type[24];   /* learned_absolute | rope | none | relative (T5) */
    int relative_attention_num_buckets; /* T5's relative position bias: its buckets */
    int relative_attention_max_distance; /* and the distance from which all share the last */
    int use_rotary_position_embeddings; /* deprecated alias of --position-embedding-type rope */
    int no_position_embedding;          /* deprecated; accepted with rope only, as Megatron */
    int rotary_base;
    float rotary_percent;
    int rotary_interleaved;
    int rotary_seq_len_interpolation_factor; /* 0: none */
    int use_rope_scaling;               /* Llama 3's frequency scaling of RoPE */
    float rope_scaling_factor;
    char normalization[16];             /* LayerNorm | RMSNorm */
    int apply_layernorm_1p;             /* norm weights stored as w - 1 */
    int swiglu;
    int group_query_attention;
    int num_query_groups;         /* derived: num_attention_heads without --group-query-attention */
    int disable_bias_linear;
    int add_qkv_bias;         /* --add-qkv-bias: the QKV projection keeps its bias */
    int no_bias_gelu_fusion;  /* --no-bias-gelu-fusion */
    int bias_gelu_fusion;     /* derived, Megatron's args.bias_gelu_fusion: no --no-bias-gelu-fusion and
                               * linear biases; without it a GeLU MLP is exact (erf), with it tanh */
    int bias_gelu_fusion_from_checkpoint; /* --use-checkpoint-args set bias_gelu_fusion (absent: 1) */
    char window_size[64];     /* --window-size "LEFT,RIGHT" ("": none; app/model/window_attention.h) */
    char window_attn_skip_freq[256]; /* --window-attn-skip-freq "N" or a Python list expression ("": none) */

    /* regularization */
    float hidden_dropout;
    float attention_dropout;
    float weight_decay;
    float clip_grad;
    float adam_beta1;
    float adam_beta2;
    float adam_eps;

    /* training */
    int micro_batch_size;
    int global_batch_size;        /* default micro_batch_size * data-parallel size */
    int64_t train_iters;          /* derived from --train-samples when that is given */
    int64_t train_samples;        /* 0: iteration-based (--train-iters) */
    /* activation recomputation (Megatron's meanings; validated in args.c) */
    int recompute_activations;    /* = --recompute-granularity selective */
    int keep_mlp_activation;      /* keep the MLP's GeLU/SwiGLU output for the backward */
    int keep_mlp_activation_num_layers; /* ... in the first N layers of each stage (0: as above) */
    int memory_efficient_layer_norm; /* the norms' backward from their outputs (Apex's memory-efficient kernels) */
    int cross_entropy_chunk_rows; /* token rows per pass of the output layer + loss (0: automatic) */
    char recompute_granularity[16]; /* "" (none) | full | selective */
    char recompute_modules[128];  /* selective: what it recomputes, space separated (core_attn, layernorm) */
    char recompute_method[16];    /* "" | uniform | block (full only) */
    int recompute_num_layers;     /* full: layers per group (uniform) or per stage (block) */
    char rampup_batch_size[96];   /* --rampup-batch-size START INCREMENT SAMPLES ("": none) */
    int has_rampup;
    int64_t rampup[3];            /* parsed: start batch, increment, ramp-up samples */

    /* initialization */
    uint64_t seed;
    float init_method_std;

    /* learning rate */
    float lr;
    float min_lr;
    float decoupled_lr;           /* --decoupled-lr: the embedding and output layer's peak; < 0: none */
    float decoupled_min_lr;       /* --decoupled-min-lr; < 0: --min-lr */
    char lr_decay_style[16];      /* constant | linear | cosine */
    float lr_warmup_init;         /* the learning rate the warm-up starts from */
    int64_t lr_warmup_iters;
    float lr_warmup_fraction;     /* < 0 when not given */
    int64_t lr_decay_iters;       /* default train_iters */
    int64_t lr_warmup_samples;    /* sample-based schedule (with --train-samples) */
    int64_t lr_decay_samples;     /* default train_samples */

    /* validation */
    int64_t eval_interval;
    int64_t eval_iters;

    /* data */
    int mock_data;
    char data_path[4096];         /* "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..." (Megatron's nargs) */
    char train_data_path[4096];   /* per-split blends (Megatron's blend_per_split) */
    char valid_data_path[4096];
    char test_data_path[4096];
    char per_split_data_args_path[ARGS_PATH_MAX]; /* JSON {"train": ..., "valid": ..., "test": ...} */
    char print_sample[64];        /* SPLIT:I[-J]: print those samples' token ids and exit */
    char split[64];
    char data_cache_path[ARGS_PATH_MAX];
    char tokenizer_type[32];
    char vocab_file[ARGS_PATH_MAX];
    char merge_file[ARGS_PATH_MAX];
    char tokenizer_model[ARGS_PATH_MAX]; /* tokenizer.json (or its directory), or a SentencePiece model */

    /* BERT (pretrain_bert; refused by pretrain_gpt) */
    int bert;                     /* derived: the program is pretrain_bert (encoder mode) */
    int bert_no_binary_head;      /* no sentence-order head, no tokentype embeddings */
    /* BERT fine-tuning (finetune_bert, Megatron's tasks/main.py; refused elsewhere) */
    int bert_task;                /* derived: the program is finetune_bert */
    char task[16];                /* --task MNLI or RACE */
    char train_data[4096];        /* --train-data PATH ...: MNLI TSV files, RACE directories */
    char valid_data[4096];        /* --valid-data PATH ... */
    char pretrained_checkpoint[ARGS_PATH_MAX]; /* the BERT checkpoint the model starts from */
    int epochs;                   /* passes over the training data (train_iters follows) */
    float mask_prob;              /* masked-LM rate of the BERT dataset */
    float short_seq_prob;         /* rate of shortened target lengths */
    /* T5 (pretrain_t5; refused elsewhere): num_layers and seq_length are the encoder's */
    int t5;                       /* derived: the program is pretrain_t5 (encoder-decoder mode) */
    int encoder_num_layers, decoder_num_layers;
    int encoder_seq_length, decoder_seq_length;
    int vocab_extra_ids;

    /* checkpointing */
    char save[ARGS_PATH_MAX];     /* directory to save checkpoints in */
    char load[ARGS_PATH_MAX];     /* directory to load the latest checkpoint from */
    int64_t save_interval;        /* save every N iterations (0: only at the end / on exit) */
    int64_t exit_interval;        /* save and exit when the iteration is a multiple of N */
    int finetune;                 /* load weights only; iteration, optimizer and RNG start fresh */
    int no_load_optim, no_load_rng, no_save_optim;
    int async_save;               /* --async-save: checkpoints written by a background thread */
    /* non-persistent checkpoints (app/training/non_persistent_checkpoint.h) */
    int64_t non_persistent_save_interval;      /* 0: none */
    char non_persistent_ckpt_type[16];         /* global, local, or "" (none) */
    char non_persistent_global_ckpt_dir[ARGS_PATH_MAX];
    char non_persistent_local_ckpt_dir[ARGS_PATH_MAX];
    char non_persistent_local_ckpt_algo[16];   /* fully_parallel or atomic */
    int exit_signal_handler;      /* SIGTERM/SIGUSR1/SIGUSR2: save a checkpoint, then exit */
    int ckpt_collective_io;       /* MPI-IO collective buffering for tensor data */
    char ckpt_format[16];         /* torch_dist (the only one accepted: parallel HDF5 here) */
    int override_opt_param_scheduler;       /* the scheduler from this run's flags, not the checkpoint */
    int use_checkpoint_opt_param_scheduler; /* the scheduler from the checkpoint, not the flags */
    int use_checkpoint_args;      /* the model's shape from the checkpoint in --load (checkpoint_args.h) */
    char from_checkpoint[1024];   /* what --use-checkpoint-args took, for the start-up log */

    /* robustness: NaN policy, time and hang limits */
    int check_for_nan_in_loss_and_grad; /* stop on a non-finite loss or gradient norm (default) */
    int no_check_for_nan_in_loss_and_grad;
    int check_for_spiky_loss;     /* warn when the loss jumps above 10x the recent largest */
    float exit_duration_in_mins;  /* save and exit after this many minutes since the job started (0: no limit) */
    float distributed_timeout_minutes; /* a collective wait longer than this ends the job */
    float heartbeat_interval;     /* seconds between heartbeat lines (0: none) */
    int log_straggler;            /* --log-straggler: the straggler report at every log line */
    int disable_straggler_on_startup; /* the report starts off (and stays off: no controller here) */
    int straggler_minmax_count;   /* ranks named as slowest and as fastest */
    int no_verify_checksums;      /* load without checking tensor checksums */
    int hdf5_debug;               /* print HDF5 error stacks */

    /* logging */
    int64_t log_interval;
    char metrics_file[ARGS_PATH_MAX];
    char tensorboard_dir[ARGS_PATH_MAX]; /* TensorBoard event file directory; "": none */
    char papi_events[ARGS_PATH_MAX]; /* PAPI events counted per phase; "": none, "default": a set */
    int64_t papi_sample_interval; /* count one iteration in N (0: the log interval) */
    int timing_log_level;         /* 0: the iteration time; 1, 2: Megatron's phase timers */
    char timing_log_option[16];   /* max | minmax | all */
    int log_timers_to_tensorboard;
    int no_barrier_with_level_1_timing;
    /* Megatron's TensorBoard switches (training_log): scalars at every iteration that
     * --tensorboard-log-interval divides */
    int64_t tensorboard_log_interval;
    int log_params_norm;          /* params-norm: L2 norm of the fp32 parameters (also in the log line) */
    int log_num_zeros_in_grad;    /* num-zeros: zero gradient elements (also in the log line) */
    int log_validation_ppl_to_tensorboard; /* lm loss validation ppl */
    int log_memory_to_tensorboard; /* mem-reserved-bytes, mem-allocated-bytes, ... */
    int log_world_size_to_tensorboard; /* world-size */
    int no_log_loss_scale_to_tensorboard;
    int no_log_learning_rate_to_tensorboard;
    int exit_on_missing_checkpoint; /* --load without a checkpoint is an error, not a fresh start */ /* leave out learning-rate (an older Megatron flag) */ /* leave out loss-scale (written by default) */
    int log_throughput;           /* with --log-timers-to-tensorboard: the throughput scalar */
    int profile;                  /* --profile: cudaProfilerStart/Stop around a step range */
    int profile_step_start, profile_step_end;
    char profile_ranks[256];      /* global ranks, space separated */

    /* mixed precision */
    int bf16;                     /* the CUDA backend computes in bf16 always; the CPU in fp32 */
    int fp16;                     /* Megatron's fp16 with loss scaling; the CPU backend only (fp32 compute) */
    float loss_scale;             /* --loss-scale: a constant scaler; 0: not given (Megatron's None) */
    float initial_loss_scale, min_loss_scale; /* the dynamic scaler's (--fp16 without --loss-scale) */
    float loss_scale_window;      /* finite steps before the scale doubles */
    int hysteresis;               /* overflows before the scale halves */
    /* FP8 training (app/model/fp8_linear.h; Megatron's TransformerConfig fp8 fields) */
    char fp8_format[16];          /* --fp8-format e4m3 | hybrid; "" without fp8 */
    char fp8_recipe[16];          /* delayed | tensorwise (blockwise, mxfp8, custom refused) */
    int fp8_margin, fp8_interval, fp8_amax_history_len;
    char fp8_amax_compute_algo[16]; /* max | most_recent */
    int no_fp8_wgrad;             /* the weight gradient's GEMM in high precision */
    int first_last_layers_bf16, num_layers_at_start_in_bf16, num_layers_at_end_in_bf16;
    int fp8_param_gather;         /* with the distributed optimizer (the emulation gathers fp32) */

    /* distributed and run-time */
    int tensor_model_parallel_size;
    int pipeline_model_parallel_size;
    int sequence_parallel;
    int tp_comm_overlap;
    int disable_tp_comm_overlap_ag, disable_tp_comm_overlap_rs;
    int num_layers_per_virtual_pipeline_stage;
    int virtual_pipeline_model_parallel_size; /* derived when per-stage layers are given; 1 = no interleaving */
    int use_distributed_optimizer;
    int overlap_grad_reduce;
    int overlap_param_gather;
    int64_t ddp_bucket_size;      /* elements; default max(40M, 1M x data-parallel size) */
    char parallel_order[32];      /* e.g. tp-cp-ep-dp-pp, fastest first */
    int deterministic_mode;
    int no_gemm_tuning; /* cuda: the heuristic's first algorithm, untimed (also under deterministic_mode) */
    char device[8];               /* auto | cpu | cuda (auto: cuda when a GPU is present) */
    int context_parallel_size;    /* ranks that split each sequence (Megatron's context parallelism) */
    char cp_comm_type[256];       /* p2p, allgather, a2a or a2a+p2p, one for every layer or one per layer */
    char hierarchical_context_parallel_sizes[64]; /* "N1 N2" for a2a+p2p (empty: none) */
    int hierarchical_cp_sizes[2]; /* parsed by the validation: {inner a2a size, outer ring size}, 0 0 when none */
    int expert_model_parallel_size; /* 1 only (expert parallelism is not built yet) */
    int expert_tensor_parallel_size; /* tensor-parallel ranks of each expert: the TP size */

    /* mixture of experts (Megatron-Core's MoELayer; app/model/moe_layer.h) */
    int num_experts;              /* 0: dense model */
    int moe_ffn_hidden_size;      /* each expert's F (default --ffn-hidden-size) */
    char moe_layer_freq[256];     /* "N" (every N-th layer from layer 0) or a Python list expression */
    int moe_router_topk;
    char moe_router_score_function[16]; /* softmax | sigmoid | sqrtsoftplus */
    int moe_router_pre_softmax;
    float moe_router_topk_scaling_factor; /* 0: none */
    char moe_router_dtype[8];     /* "" | fp32 (the router always computes in fp32 here) */
    int moe_router_num_groups, moe_router_group_topk; /* group-limited routing; 0: off */
    char moe_router_load_balancing_type[32]; /* aux_loss | seq_aux_loss | none */
    float moe_aux_loss_coeff, moe_z_loss_coeff, moe_input_jitter_eps; /* 0: off */
    float moe_expert_capacity_factor;     /* 0: dropless */
    char moe_token_drop_policy[16];       /* probs | position */
    int moe_pad_expert_input_to_capacity;
    char moe_token_dispatcher_type[16];   /* alltoall | allgather */
    int moe_grouped_gemm;
    int moe_per_layer_logging;
    int moe_shared_expert_intermediate_size; /* 0: no shared experts */
    int moe_shared_expert_gate, moe_shared_expert_overlap;
    int moe_router_enable_expert_bias;
    float moe_router_bias_update_rate;
    int moe_apply_probs_on_input;
    int moe_layer_recompute;              /* Megatron's deprecated spelling of --recompute-modules moe */
    int moe_router_force_load_balancing;  /* random router logits (benchmarks) */
    float moe_router_force_biased;        /* std of a random expert bias (< 0: drawn once per layer) */
    int moe_router_force_biased_given;    /* --moe-router-force-biased was given (0 is a valid std) */
    unsigned char moe_layer[1024]; /* derived from --moe-layer-freq: 1 for MoE layers (GPT_MAX_MOE_LAYERS) */
    float peak_tflops;            /* per-GPU peak for MFU; 0: from the GPU's name (cuda only) */
    char dump_parameters[ARGS_PATH_MAX]; /* write every global parameter here at the end */

    /* Megatron-LM flags given that have no effect here ("--a, --b"), for the start-up log */
    char no_effect_flags[16384];

    /* derived from the world */
    int world_size;
    int data_parallel_size;
    int num_micro_batches;        /* global / (micro * dp) (after any --rampup-batch-size) */
} args;

/* Parse argv (and any --args-file) into a; validate against world_size. Calls user_error() on
 * any problem; on --help rank 0 prints the help and every rank exits 0. */
void args_parse(args *a, int argc, char **argv, int world_size);

/* Parse without MPI side effects: returns 0 on success, -1 with a message in err, or
 * OPTIONS_HELP when --help was asked for (nothing printed). Used by args_parse and tests. */
int args_parse_checked(args *a, int argc, char **argv, int world_size, char *err, size_t errlen);

/* Before MPI_Init: 1 when --async-save is on the command line or in a regular --args-file (a pipe
 * is not read twice), so that main asks MPI for MPI_THREAD_MULTIPLE. */
int args_want_async_save(int argc, char **argv);

/* Set the vocabulary size once known (from the tokenizer) and pad it as Megatron does:
 * to a multiple of --make-vocab-size-divisible-by x tensor-parallel size. */
void args_set_vocab_size(args *a, int vocab_size);
/* finetune_bert: the iterations its epochs take, for the next args_parse (the first parse, before
 * the data are read, puts 1) */
void args_set_task_train_iters(int64_t iterations);

/* 1 when selective recompute (--recompute-granularity selective) recomputes MODULE, one of
 * --recompute-modules' words (core_attn, layernorm) */
int args_recompute_module(const args *a, const char *module);

/* Fill the architecture options of a model config (position embeddings, RoPE, norm, SwiGLU,
 * query groups, linear biases) from the flags. */
struct gpt_config;
void gpt_config_set_architecture(struct gpt_config *config, const args *a);

/* Print "  name ..... value" for every argument (rank 0 at start-up, as Megatron does). */
void args_print(const args *a);

/* Print --help, flags grouped like Megatron's argument groups. */
void args_print_help(void);

/* pretrain_gpt's option table (the tests walk it) */
struct option_table;
const struct option_table *args_option_table(void);

#endif
