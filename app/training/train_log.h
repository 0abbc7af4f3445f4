/* train_log.h: Megatron's iteration log line and the same figures as JSON lines in
 * --metrics-file. Only rank 0 writes. */
#ifndef TRAIN_LOG_H
#define TRAIN_LOG_H

#include "app/core/timers_report.h"
#include "io/tensorboard_events.h"
#include "perf/metrics/papi_phases.h"

#include <stdint.h>
#include <stdio.h>

/* PAPI counts per phase, summed over ranks */
typedef struct phase_counts {
    int num_events;                                    /* 0: no counters */
    int ranks;                                         /* how many ranks the sums are over */
    int64_t iterations;                                /* how many iterations were counted */
    const char *event_names[PAPI_PHASES_MAX_EVENTS];
    long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS];   /* [phase][event] */
} phase_counts;

/* the MoE layers in an iteration's log (Megatron's track_moe_metrics): the load-balancing and z
 * losses without their coefficients, averaged over micro-batches and data-parallel ranks, as the
 * mean over the MoE layers and per layer, and the tokens each expert computed on in the global
 * batch */
typedef struct moe_log_stats {
    int num_layers, num_experts;
    int aux_loss, z_loss;           /* which losses are on */
    int per_layer;                  /* --moe-per-layer-logging: TensorBoard per layer too */
    double load_balancing_loss, z_loss_value; /* means over the MoE layers */
    const unsigned char *moe_layer; /* [num_layers] */
    const double *values;           /* [L] aux, [L] z, [L x E] tokens per expert */
} moe_log_stats;

typedef struct iteration_stats {
    int64_t iteration, train_iters;
    int64_t consumed_samples;
    double elapsed_ms_per_iteration;   /* averaged over the log interval */
    double tokens_per_second;
    double tflops_per_gpu;             /* model FLOPs (Megatron's throughput, MFU's numerator) */
    double hardware_tflops_per_gpu;    /* with recomputed work (HFU's numerator) */
    double peak_tflops;                /* per device; 0 when unknown (no MFU/HFU then) */
    double learning_rate;
    int global_batch_size;
    double lm_loss;                    /* averaged over the log interval */
    double sop_loss;                   /* pretrain_bert's sentence-order loss, likewise */
    int has_sop_loss;                  /* 0: none (GPT, --bert-no-binary-head) */
    double loss_scale;                 /* after this iteration's update (1 without a scaler) */
    double grad_norm;
    int has_grad_norm;                 /* 0 when an overflow skipped the step (Megatron's None) */
    double num_zeros;                  /* --log-num-zeros-in-grad: " num zeros: N |" */
    int has_num_zeros;                 /* 0: not asked for, or a skipped step (Megatron's None) */
    double params_norm;                /* --log-params-norm: " params norm: X |" */
    int has_params_norm;
    int tensorboard_throughput;        /* also the throughput scalar (--log-throughput with
                                        * --log-timers-to-tensorboard) */
    int64_t skipped_iterations, nan_iterations; /* in the log interval */
    const phase_counts *papi;          /* over the log interval; NULL when not counting */
    double peak_memory_bytes;          /* most backend memory held so far, the largest over ranks */
    const timers_table *timers;        /* --timing-log-level timers of the interval; NULL: none */
    double timer_iterations;           /* what they are averaged over */
    int timers_per_rank;               /* --timing-log-option all: every rank's time too */
    const moe_log_stats *moe;          /* NULL for dense models */
    const char *stragglers_json;       /* --log-straggler: the report's "stragglers": {...}, field; NULL: none */
} iteration_stats;

/* one iteration's TensorBoard scalars (Megatron's training_log at every iteration that
 * --tensorboard-log-interval divides); the optional ones are NAN when not asked for */
typedef struct tensorboard_step {
    int64_t iteration, consumed_samples;
    double learning_rate;              /* NAN: left out (--no-log-learning-rate-to-tensorboard) */
    int global_batch_size;
    double lm_loss;                    /* this iteration's */
    double sop_loss;                   /* pretrain_bert's sentence-order loss; NAN: none */
    double loss_scale;                 /* NAN: left out (--no-log-loss-scale-to-tensorboard) */
    double world_size;                 /* NAN: left out (no --log-world-size-to-tensorboard) */
    double grad_norm, num_zeros, params_norm; /* NAN: none (a skipped step, or not asked for) */
    int memory;                        /* --log-memory-to-tensorboard: this rank's backend memory */
} tensorboard_step;

/* the start-up, in seconds: from the earliest rank's process start to the end of each stage */
typedef struct startup_times {
    double process_start;      /* seconds since the epoch (the earliest rank's) */
    double initialized;        /* groups and communicators built: Megatron's "time to initialize megatron" */
    double data_setup;         /* the datasets' own time, the slowest rank's */
    double model_setup;        /* the model and optimizer's own time (initialization included), the slowest rank's */
    double training_start;     /* before the first training step */
    double first_iteration;    /* the end of the first iteration (its first plans and warm-up in it) */
} startup_times;

typedef struct train_log {
    FILE *metrics;   /* NULL when no --metrics-file */
    tensorboard_events tensorboard; /* its file is NULL when no --tensorboard-dir */
    int validation_ppl;              /* --log-validation-ppl-to-tensorboard */
    int64_t consumed_samples;        /* for the validation scalars "vs samples" */
} train_log;

/* open the metrics file (append, so nothing already written is lost); rank 0 only */
void train_log_open(train_log *log, const char *metrics_path);
void train_log_close(train_log *log);
/* also write the logged figures as TensorBoard scalars under Megatron's tags (--tensorboard-dir) */
void train_log_open_tensorboard(train_log *log, const char *dir);

void train_log_iteration(train_log *log, const iteration_stats *s);
/* the scalars of one iteration into --tensorboard-dir (nothing when none is open) */
void train_log_tensorboard_step(train_log *log, const tensorboard_step *s);
/* Megatron's print_datetime line: "[what] datetime: YYYY-MM-DD HH:MM:SS.ffffff" */
void train_log_datetime(const char *what);
/* after the first iteration: the start-up's stages as a line and a metrics record
 * {"split": "startup", ...} (seconds since the process started) */
void train_log_startup(train_log *log, const startup_times *s);
/* the whole run's PAPI counts per phase as a table on stdout */
void train_log_papi_table(const phase_counts *totals);
void train_log_validation(train_log *log, int64_t iteration, const char *when, double lm_loss, double sop_loss);
/* the same for any split ("validation" or "test"): Megatron's " validation loss WHEN | ..." line
 * (its words for the test set too) and a metrics line {"split": SPLIT, ...}; sop_loss: pretrain_bert's
 * sentence-order loss, printed after the lm loss as Megatron prints its loss_dict (NAN: none) */
void train_log_evaluation(train_log *log, const char *split, int64_t iteration, const char *when, double lm_loss,
                          double sop_loss);
/* whether the validation/test scalars carry their perplexity too (--log-validation-ppl-to-tensorboard)
 * and the consumed samples their "vs samples" scalars are plotted against */
void train_log_set_validation(train_log *log, int ppl, int64_t consumed_samples);

#endif
