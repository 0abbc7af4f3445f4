/* train_log.c: see train_log.h. The text line follows Megatron's training_log(); the JSON
 * line carries full precision so that runs can be compared bit for bit. */
#include "app/training/train_log.h"
#include "app/core/error.h"
#include "perf/metrics/flops.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

void train_log_open(train_log *log, const char *metrics_path) {
    log->metrics = NULL;
    log->tensorboard.file = NULL;
    log->validation_ppl = 0;
    log->consumed_samples = 0;
    if (!metrics_path || !metrics_path[0]) return;
    log->metrics = fopen(metrics_path, "a");
    if (!log->metrics)
        user_error_local("cannot open --metrics-file '%s' for appending: %s", metrics_path, strerror(errno));
}

void train_log_close(train_log *log) {
    if (log->metrics) fclose(log->metrics);
    log->metrics = NULL;
    tensorboard_events_close(&log->tensorboard);
}

void train_log_open_tensorboard(train_log *log, const char *dir) {
    char err[4400];
    if (tensorboard_events_open(&log->tensorboard, dir, err, sizeof err) != 0) user_error_local("%s", err);
}

/* a scalar against the iteration and, when vs_samples, its "TAG vs samples" twin against the
 * consumed samples (Megatron plots most of training_log's scalars both ways) */
static void scalar(tensorboard_events *tb, const char *tag, double value, const tensorboard_step *s, int vs_samples) {
    tensorboard_events_scalar(tb, tag, value, s->iteration);
    if (!vs_samples) return;
    char twin[96];
    snprintf(twin, sizeof twin, "%s vs samples", tag);
    tensorboard_events_scalar(tb, twin, value, s->consumed_samples);
}

void train_log_tensorboard_step(train_log *log, const tensorboard_step *s) {
    tensorboard_events *tb = &log->tensorboard;
    if (!tb->file) return;
    if (!isnan(s->learning_rate)) scalar(tb, "learning-rate", s->learning_rate, s, 1);
    scalar(tb, "batch-size", s->global_batch_size, s, 1);
    scalar(tb, "lm loss", s->lm_loss, s, 1);
    if (!isnan(s->sop_loss)) scalar(tb, "sop loss", s->sop_loss, s, 1);
    if (!isnan(s->loss_scale)) scalar(tb, "loss-scale", s->loss_scale, s, 1);
    if (!isnan(s->world_size)) scalar(tb, "world-size", s->world_size, s, 1);
    if (!isnan(s->grad_norm)) scalar(tb, "grad-norm", s->grad_norm, s, 1);
    if (!isnan(s->num_zeros)) scalar(tb, "num-zeros", s->num_zeros, s, 1);
    if (!isnan(s->params_norm)) scalar(tb, "params-norm", s->params_norm, s, 1);
    if (s->memory) {
        /* no caching allocator: what is reserved is what is allocated */
        scalar(tb, "mem-reserved-bytes", (double)kernels_memory_allocated(), s, 0);
        scalar(tb, "mem-allocated-bytes", (double)kernels_memory_allocated(), s, 0);
        scalar(tb, "mem-max-allocated-bytes", (double)kernels_memory_peak(), s, 0);
        scalar(tb, "mem-allocated-count", (double)kernels_memory_count(), s, 0);
    }
}

void train_log_set_validation(train_log *log, int ppl, int64_t consumed_samples) {
    log->validation_ppl = ppl;
    log->consumed_samples = consumed_samples;
}

/* Megatron's MoE scalars: the means over MoE layers, and per layer with --moe-per-layer-logging */
static void tensorboard_moe(tensorboard_events *tb, const moe_log_stats *m, int64_t iteration) {
    if (!m) return;
    if (m->aux_loss) tensorboard_events_scalar(tb, "load_balancing_loss", m->load_balancing_loss, iteration);
    if (m->z_loss) tensorboard_events_scalar(tb, "z_loss", m->z_loss_value, iteration);
    if (!m->per_layer) return;
    for (int l = 0; l < m->num_layers; l++) {
        if (!m->moe_layer[l]) continue;
        char tag[64];
        if (m->aux_loss) {
            snprintf(tag, sizeof tag, "moe/load_balancing_loss_layer_%d", l);
            tensorboard_events_scalar(tb, tag, m->values[l], iteration);
        }
        if (m->z_loss) {
            snprintf(tag, sizeof tag, "moe/z_loss_layer_%d", l);
            tensorboard_events_scalar(tb, tag, m->values[m->num_layers + l], iteration);
        }
    }
}

/* "load_balancing_loss": x, "z_loss": y, "moe_layers": [{"layer": l, ..., "tokens_per_expert": [...]}], */
static void write_moe_json(FILE *out, const moe_log_stats *m) {
    if (!m) return;
    int L = m->num_layers;
    if (m->aux_loss) fprintf(out, "\"load_balancing_loss\": %.17g, ", m->load_balancing_loss);
    if (m->z_loss) fprintf(out, "\"z_loss\": %.17g, ", m->z_loss_value);
    fprintf(out, "\"moe_layers\": [");
    int first = 1;
    for (int l = 0; l < L; l++) {
        if (!m->moe_layer[l]) continue;
        fprintf(out, "%s{\"layer\": %d, \"load_balancing_loss\": %.17g, \"z_loss\": %.17g, \"tokens_per_expert\": [",
                first ? "" : ", ", l, m->values[l], m->values[L + l]);
        for (int e = 0; e < m->num_experts; e++)
            fprintf(out, "%s%.0f", e ? ", " : "", m->values[2 * L + l * m->num_experts + e]);
        fprintf(out, "]}");
        first = 0;
    }
    fprintf(out, "], ");
}

/* "YYYY-MM-DD HH:MM:SS" of the local time at seconds since the epoch */
static void timestamp(char *buf, size_t len, time_t seconds) {
    struct tm tm;
    localtime_r(&seconds, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* "papi": {"phase": {"event": count, ...}, ...}, "papi_ranks": N, "papi_iterations": counted, */
static void write_papi_json(FILE *out, const phase_counts *papi) {
    if (!papi || papi->num_events == 0) return;
    fprintf(out, "\"papi\": {");
    for (int phase = 0; phase < PHASE_COUNT; phase++) {
        fprintf(out, "%s\"%s\": {", phase ? ", " : "", run_phase_name((run_phase)phase));
        for (int e = 0; e < papi->num_events; e++)
            fprintf(out, "%s\"%s\": %lld", e ? ", " : "", papi->event_names[e],
                    papi->counts[phase * PAPI_PHASES_MAX_EVENTS + e]);
        fprintf(out, "}");
    }
    fprintf(out, "}, \"papi_ranks\": %d, \"papi_iterations\": %lld, ", papi->ranks, (long long)papi->iterations);
}

void train_log_iteration(train_log *log, const iteration_stats *s) {
    char when[32], mfu_field[64] = "", mfu_json[128] = "";
    timestamp(when, sizeof when, time(NULL));
    /* model (hardware) FLOP utilization: achieved model (hardware) / peak dense TFLOP/s per device */
    if (s->peak_tflops > 0) {
        double mfu = flops_utilization(s->tflops_per_gpu, s->peak_tflops);
        double hfu = flops_utilization(s->hardware_tflops_per_gpu, s->peak_tflops);
        snprintf(mfu_field, sizeof mfu_field, " | MFU: %.2f%% | HFU: %.2f%%", 100.0 * mfu, 100.0 * hfu);
        snprintf(mfu_json, sizeof mfu_json, "\"mfu\": %.6f, \"hfu\": %.6f, \"peak_tflops\": %.3f, ", mfu, hfu,
                 s->peak_tflops);
    }
    char moe_field[96] = "";  /* Megatron's track_moe_metrics string: two decimals */
    if (s->moe && s->moe->aux_loss) snprintf(moe_field, sizeof moe_field, " load_balancing_loss: %.2f |", s->moe->load_balancing_loss);
    if (s->moe && s->moe->z_loss)
        snprintf(moe_field + strlen(moe_field), sizeof moe_field - strlen(moe_field), " z_loss: %.2f |", s->moe->z_loss_value);
    char sop_field[48] = "";  /* pretrain_bert's loss_dict: "lm loss", then "sop loss" */
    if (s->has_sop_loss) snprintf(sop_field, sizeof sop_field, " sop loss: %.6E |", s->sop_loss);
    char grad_norm_field[160] = "";
    int used = 0;
    if (s->has_grad_norm) used += snprintf(grad_norm_field, sizeof grad_norm_field, " grad norm: %.3f |", s->grad_norm);
    if (s->has_num_zeros)
        used += snprintf(grad_norm_field + used, sizeof grad_norm_field - (size_t)used, " num zeros: %.0f |", s->num_zeros);
    if (s->has_params_norm)
        snprintf(grad_norm_field + used, sizeof grad_norm_field - (size_t)used, " params norm: %.3f |", s->params_norm);
    printf(" [%s] iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f"
           " | throughput per GPU (TFLOP/s/GPU): %.3f%s | tokens per second: %.1f | learning rate: %.6E"
           " | global batch size: %5d | lm loss: %.6E |%s%s loss scale: %.1f |%s"
           " number of skipped iterations: %3lld | number of nan iterations: %3lld |\n",
           when, (long long)s->iteration, (long long)s->train_iters, (long long)s->consumed_samples,
           s->elapsed_ms_per_iteration, s->tflops_per_gpu, mfu_field, s->tokens_per_second, s->learning_rate,
           s->global_batch_size, s->lm_loss, sop_field, moe_field, s->loss_scale, grad_norm_field, (long long)s->skipped_iterations,
           (long long)s->nan_iterations);
    fflush(stdout);
    if (s->tensorboard_throughput) tensorboard_events_scalar(&log->tensorboard, "throughput", s->tflops_per_gpu, s->iteration);
    tensorboard_moe(&log->tensorboard, s->moe, s->iteration);
    if (log->metrics) {
        fprintf(log->metrics,
                "{\"split\": \"train\", \"iteration\": %lld, \"consumed_samples\": %lld, "
                "\"elapsed_ms_per_iteration\": %.3f, \"tokens_per_second\": %.3f, "
                "\"tflops_per_gpu\": %.9e, \"model_tflops_per_gpu\": %.9e, \"hardware_tflops_per_gpu\": %.9e, "
                "%s",
                (long long)s->iteration, (long long)s->consumed_samples, s->elapsed_ms_per_iteration,
                s->tokens_per_second, s->tflops_per_gpu, s->tflops_per_gpu, s->hardware_tflops_per_gpu, mfu_json);
        write_papi_json(log->metrics, s->papi);
        write_moe_json(log->metrics, s->moe);
        if (s->stragglers_json) fputs(s->stragglers_json, log->metrics);
        if (s->timers) timers_table_write_json(log->metrics, s->timers, s->timer_iterations, s->timers_per_rank);
        if (s->has_sop_loss) fprintf(log->metrics, "\"sop_loss\": %.17g, ", isfinite(s->sop_loss) ? s->sop_loss : -1.0);
        fprintf(log->metrics,
                "\"learning_rate\": %.17g, \"global_batch_size\": %d, "
                "\"lm_loss\": %.17g, \"loss_scale\": %.17g, \"grad_norm\": %.17g, \"skipped_iterations\": %lld, "
                "\"nan_iterations\": %lld, \"peak_memory_gib\": %.4f}\n",
                s->learning_rate, s->global_batch_size,
                isfinite(s->lm_loss) ? s->lm_loss : -1.0, isfinite(s->loss_scale) ? s->loss_scale : -1.0,
                s->has_grad_norm && isfinite(s->grad_norm) ? s->grad_norm : -1.0,
                (long long)s->skipped_iterations, (long long)s->nan_iterations, s->peak_memory_bytes / 1073741824.0);
        fflush(log->metrics);
    }
}

void train_log_datetime(const char *what) {
    struct timeval now;
    gettimeofday(&now, NULL);
    char when[32];
    timestamp(when, sizeof when, now.tv_sec);
    printf("[%s] datetime: %s.%06ld \n", what, when, (long)now.tv_usec);
    fflush(stdout);
}

void train_log_startup(train_log *log, const startup_times *s) {
    printf("> start-up (seconds since the first process started): initialized %.3f, data %.3f and model %.3f "
           "set up, training started %.3f, first step done %.3f\n", s->initialized, s->data_setup,
           s->model_setup, s->training_start, s->first_iteration);
    fflush(stdout);
    if (!log->metrics) return;
    fprintf(log->metrics,
            "{\"split\": \"startup\", \"time_to_initialize_s\": %.6f, \"data_setup_s\": %.6f, "
            "\"model_setup_s\": %.6f, \"time_to_training_start_s\": %.6f, \"time_to_first_iteration_s\": %.6f}\n",
            s->initialized, s->data_setup, s->model_setup, s->training_start, s->first_iteration);
    fflush(log->metrics);
}

void train_log_papi_table(const phase_counts *totals) {
    if (totals->num_events == 0) return;
    printf("> PAPI counts per phase (whole run: %lld counted iterations, summed over %d ranks):\n  %-12s",
           (long long)totals->iterations, totals->ranks, "phase");
    for (int e = 0; e < totals->num_events; e++) printf(" %16s", totals->event_names[e]);
    printf("\n");
    for (int phase = 0; phase < PHASE_COUNT; phase++) {
        printf("  %-12s", run_phase_name((run_phase)phase));
        for (int e = 0; e < totals->num_events; e++)
            printf(" %16lld", totals->counts[phase * PAPI_PHASES_MAX_EVENTS + e]);
        printf("\n");
    }
    fflush(stdout);
}

void train_log_evaluation(train_log *log, const char *split, int64_t iteration, const char *when, double lm_loss,
                          double sop_loss) {
    double ppl = exp(lm_loss < 20.0 ? lm_loss : 20.0);
    int test = !strcmp(split, "test");
    char sop_field[96] = "";
    if (!isnan(sop_loss))
        snprintf(sop_field, sizeof sop_field, " sop loss value: %.6E | sop loss PPL: %.6E |", sop_loss,
                 exp(sop_loss < 20.0 ? sop_loss : 20.0));
    printf("-----------------------------------------------------------------------------------------------\n"
           " validation loss %s | lm loss value: %.6E | lm loss PPL: %.6E |%s\n"
           "-----------------------------------------------------------------------------------------------\n",
           when, lm_loss, ppl, sop_field);
    fflush(stdout);
    /* Megatron writes the test loss under the validation tags too; ours get their own; the
     * perplexity only with --log-validation-ppl-to-tensorboard */
    char tag[64];
    const char *base = test ? "lm loss test" : "lm loss validation";
    tensorboard_events_scalar(&log->tensorboard, base, lm_loss, iteration);
    snprintf(tag, sizeof tag, "%s vs samples", base);
    tensorboard_events_scalar(&log->tensorboard, tag, lm_loss, log->consumed_samples);
    if (log->validation_ppl) {
        snprintf(tag, sizeof tag, "%s ppl", base);
        tensorboard_events_scalar(&log->tensorboard, tag, ppl, iteration);
        snprintf(tag, sizeof tag, "%s ppl vs samples", base);
        tensorboard_events_scalar(&log->tensorboard, tag, ppl, log->consumed_samples);
    }
    if (log->metrics) {
        fprintf(log->metrics, "{\"split\": \"%s\", \"iteration\": %lld, \"lm_loss\": %.17g, \"lm_loss_ppl\": %.17g",
                split, (long long)iteration, lm_loss, ppl);
        if (!isnan(sop_loss)) fprintf(log->metrics, ", \"sop_loss\": %.17g", sop_loss);
        fprintf(log->metrics, "}\n");
        fflush(log->metrics);
    }
}

void train_log_validation(train_log *log, int64_t iteration, const char *when, double lm_loss, double sop_loss) {
    train_log_evaluation(log, "validation", iteration, when, lm_loss, sop_loss);
}
