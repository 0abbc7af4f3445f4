/* microbatches.c: Megatron's number-of-micro-batches calculators (see microbatches.h). */
#include "app/training/microbatches.h"
#include "app/core/error.h"

#include <stdio.h>
#include <string.h>

int microbatches_init(microbatch_calculator *c, int64_t global_batch_size, int64_t micro_batch_size,
                      int64_t data_parallel_size, const int64_t *rampup, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->global_batch_size = global_batch_size;
    c->micro_batch_size = micro_batch_size;
    c->data_parallel_size = data_parallel_size;
    int64_t per_step = micro_batch_size * data_parallel_size;
    if (!rampup) {
        if (global_batch_size % per_step != 0)
            return error_format(err, errlen, "global batch size (%lld) is not divisible by micro batch size (%lld) "
                                "times data parallel size (%lld)", (long long)global_batch_size,
                                (long long)micro_batch_size, (long long)data_parallel_size);
        c->current_global_batch_size = global_batch_size;
        c->num_micro_batches = global_batch_size / per_step;
        return 0;
    }
    c->rampup = 1;
    c->start = rampup[0];
    c->increment = rampup[1];
    c->rampup_samples = rampup[2];
    if (global_batch_size <= 0)
        return error_format(err, errlen, "global batch size should be positive, got %lld.", (long long)global_batch_size);
    if (c->start <= 0)
        return error_format(err, errlen, "start batch size should be positive, got %lld.", (long long)c->start);
    if (c->increment <= 0)
        return error_format(err, errlen, "batch size increment should be positive, got %lld.", (long long)c->increment);
    if (c->rampup_samples < 0)
        return error_format(err, errlen, "ramp-up samples should be non-negative, got %lld.", (long long)c->rampup_samples);
    int64_t diff = global_batch_size - c->start;
    if (diff < 0)
        return error_format(err, errlen, "expected global batch size to be greater than or equal to start batch size, "
                            "got %lld and %lld", (long long)global_batch_size, (long long)c->start);
    if (diff % c->increment != 0)
        return error_format(err, errlen, "expected global batch size interval (%lld) to be divisible by global batch "
                            "size increment (%lld)", (long long)diff, (long long)c->increment);
    int64_t increments = diff / c->increment;
    /* Megatron divides by these and fails (ZeroDivisionError) at its first update */
    if (increments == 0)
        return error_format(err, errlen, "the start batch size equals the global batch size (%lld): nothing to ramp "
                            "up (Megatron divides by zero here); drop --rampup-batch-size", (long long)global_batch_size);
    c->samples_per_increment = (double)c->rampup_samples / (double)increments;
    if (c->rampup_samples == 0)
        return error_format(err, errlen, "ramp-up over 0 samples (Megatron divides by zero here); drop --rampup-batch-size");
    return microbatches_update(c, 0, 0, err, errlen);
}

int microbatches_update(microbatch_calculator *c, int64_t consumed_samples, int consistency_check,
                        char *err, size_t errlen) {
    if (!c->rampup) return 0;
    if (consumed_samples > c->rampup_samples) {
        c->current_global_batch_size = c->global_batch_size;
    } else {
        /* steps = int(consumed_samples / rampup_samples_per_increment) */
        int64_t steps = (int64_t)((double)consumed_samples / c->samples_per_increment);
        c->current_global_batch_size = c->start + steps * c->increment;
        CHECK(c->current_global_batch_size <= c->global_batch_size, "ramp-up passed the global batch size");
    }
    int64_t per_step = c->micro_batch_size * c->data_parallel_size;
    if (consistency_check && c->current_global_batch_size % per_step != 0)
        return error_format(err, errlen, "current global batch size (%lld) is not divisible by micro-batch-size (%lld) "
                            "timesdata parallel size (%lld)", (long long)c->current_global_batch_size,
                            (long long)c->micro_batch_size, (long long)c->data_parallel_size);
    c->num_micro_batches = c->current_global_batch_size / per_step;
    return 0;
}

int64_t microbatches_train_iters(const microbatch_calculator *c, int64_t train_samples) {
    if (!c->rampup) return train_samples / c->global_batch_size;
    microbatch_calculator k = *c;
    char err[256];
    int64_t iterations = 0, consumed = 0;
    while (consumed <= k.rampup_samples && consumed <= train_samples) {
        microbatches_update(&k, consumed, 0, err, sizeof err);
        consumed += k.current_global_batch_size;
        iterations++;
    }
    if (train_samples > consumed) iterations += (train_samples - consumed) / k.global_batch_size;
    return iterations;
}

int64_t microbatches_consumed_after(const microbatch_calculator *c, int64_t iterations) {
    microbatch_calculator k = *c;
    char err[256];
    int64_t consumed = 0;
    for (int64_t i = 0; i < iterations; i++) {
        microbatches_update(&k, consumed, 0, err, sizeof err);
        /* the running batch: micro-batches x micro batch x data-parallel */
        consumed += k.num_micro_batches * k.micro_batch_size * k.data_parallel_size;
    }
    return consumed;
}
