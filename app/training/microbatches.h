/* microbatches.h: Megatron's num_microbatches_calculator (megatron/core, before it was replaced by
 * step schedules): a constant global batch, or --rampup-batch-size START INCREMENT SAMPLES, where
 * the global batch grows from START by INCREMENT in (global - START) / INCREMENT equal steps of
 * SAMPLES / steps consumed samples each, then stays at --global-batch-size. Consumed samples
 * drive it, so a resumed run continues the same schedule. Also update_train_iters: the
 * iterations that --train-samples makes under a ramp-up. */
#ifndef MICROBATCHES_H
#define MICROBATCHES_H

#include <stddef.h>
#include <stdint.h>

typedef struct microbatch_calculator {
    int64_t global_batch_size, micro_batch_size, data_parallel_size;
    int rampup;                          /* 0: ConstantNumMicroBatchesCalculator */
    int64_t start, increment, rampup_samples;
    double samples_per_increment;        /* rampup_samples / ((global - start) / increment) */
    int64_t current_global_batch_size;   /* after the last update */
    int64_t num_micro_batches;           /* current global batch / (micro batch x data-parallel) */
} microbatch_calculator;

/* RampupBatchsizeNumMicroBatchesCalculator.__init__ (rampup NULL: the constant calculator),
 * including its first update(0, consistency_check=False). Returns 0, or -1 with Megatron's
 * assertion message in err. */
int microbatches_init(microbatch_calculator *c, int64_t global_batch_size, int64_t micro_batch_size,
                      int64_t data_parallel_size, const int64_t *rampup, char *err, size_t errlen);

/* update(consumed_samples, consistency_check): the global batch for this many consumed samples;
 * returns 0, or -1 with Megatron's message when the check finds the batch indivisible by
 * micro batch x data-parallel size */
int microbatches_update(microbatch_calculator *c, int64_t consumed_samples, int consistency_check,
                        char *err, size_t errlen);

/* training.update_train_iters for --train-samples: the ramp-up iterations (while consumed <=
 * ramp-up samples and <= train samples), then whole global batches of the rest */
int64_t microbatches_train_iters(const microbatch_calculator *c, int64_t train_samples);

/* the samples consumed after `iterations` iterations from zero */
int64_t microbatches_consumed_after(const microbatch_calculator *c, int64_t iterations);

#endif
