/* train_log_test.c: the metrics JSON line of a logged iteration: model and hardware TFLOP/s,
 * MFU and HFU against the peak, and the "papi" object {phase: {event: count}} (written here from
 * made-up counts, so the format is checked on machines where PAPI cannot count). */
#include "app/training/train_log.h"
#include "tests/tap.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char path[] = "/tmp/train_log_test.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    train_log log;
    train_log_open(&log, path);
    phase_counts papi = {.num_events = 2, .ranks = 2, .event_names = {"PAPI_TOT_INS", "PAPI_TOT_CYC"}};
    for (int phase = 0; phase < PHASE_COUNT; phase++)
        for (int e = 0; e < 2; e++) papi.counts[phase * PAPI_PHASES_MAX_EVENTS + e] = 1000LL * (phase + 1) + e;
    iteration_stats s = {.iteration = 2, .train_iters = 4, .consumed_samples = 32, .elapsed_ms_per_iteration = 10,
                         .tokens_per_second = 1e5, .tflops_per_gpu = 400, .hardware_tflops_per_gpu = 500,
                         .peak_tflops = 1000, .learning_rate = 1e-3, .global_batch_size = 16, .lm_loss = 5,
                         .grad_norm = 1, .papi = &papi};
    train_log_iteration(&log, &s);
    s.papi = NULL;
    s.peak_tflops = 0;
    train_log_iteration(&log, &s);
    train_log_close(&log);

    FILE *f = fopen(path, "r");
    char line[4096];
    json_error_t error;
    json_t *first = fgets(line, sizeof line, f) ? json_loads(line, 0, &error) : NULL;
    json_t *second = fgets(line, sizeof line, f) ? json_loads(line, 0, &error) : NULL;
    fclose(f);
    unlink(path);
    tap_ok(first && second, "both metrics lines are JSON");
    if (!first || !second) return tap_done();
    tap_ok(json_real_value(json_object_get(first, "tflops_per_gpu")) == 400 &&
           json_real_value(json_object_get(first, "model_tflops_per_gpu")) == 400 &&
           json_real_value(json_object_get(first, "hardware_tflops_per_gpu")) == 500,
           "tflops_per_gpu (Megatron's) = model_tflops_per_gpu; hardware_tflops_per_gpu beside it");
    tap_ok(fabs(json_real_value(json_object_get(first, "mfu")) - 0.4) < 1e-12 &&
           fabs(json_real_value(json_object_get(first, "hfu")) - 0.5) < 1e-12 &&
           json_real_value(json_object_get(first, "peak_tflops")) == 1000, "mfu 0.4 and hfu 0.5 of a 1000 TFLOP/s peak");
    json_t *counts = json_object_get(first, "papi");
    int phases_ok = json_object_size(counts) == PHASE_COUNT;
    for (int phase = 0; phase < PHASE_COUNT; phase++) {
        json_t *p = json_object_get(counts, run_phase_name((run_phase)phase));
        phases_ok = phases_ok && json_integer_value(json_object_get(p, "PAPI_TOT_INS")) == 1000LL * (phase + 1) &&
                    json_integer_value(json_object_get(p, "PAPI_TOT_CYC")) == 1000LL * (phase + 1) + 1;
    }
    tap_ok(phases_ok && json_integer_value(json_object_get(first, "papi_ranks")) == 2,
           "papi: every phase with every event's count, and the number of ranks summed");
    tap_ok(!json_object_get(second, "papi") && !json_object_get(second, "mfu") && !json_object_get(second, "hfu"),
           "no counters: no papi object; no peak: no mfu/hfu");
    json_decref(first);
    json_decref(second);
    train_log_papi_table(&papi);
    return tap_done();
}
