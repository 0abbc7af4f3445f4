/* microbatches_test.c: Megatron's batch-size ramp-up calculator (app/training/microbatches.h)
 * against values worked out by hand from RampupBatchsizeNumMicroBatchesCalculator.update and
 * training.update_train_iters, and its refusals with Megatron's messages. */
#include "app/training/microbatches.h"
#include "tests/tap.h"

#include <string.h>

int main(void) {
    microbatch_calculator c;
    char err[512];

    /* --global-batch-size 16 --rampup-batch-size 4 4 48, micro batch 2, 2 data-parallel ranks:
     * 3 increments of 16 samples: 4 below 16 consumed, 8 below 32, 12 below 48, 16 from 48 (int(48 / 16) = 3) */
    int64_t ramp[3] = {4, 4, 48};
    tap_ok(microbatches_init(&c, 16, 2, 2, ramp, err, sizeof err) == 0, "4 4 48 up to 16 is accepted");
    tap_ok(c.current_global_batch_size == 4 && c.num_micro_batches == 1, "it starts at 4 (1 micro-batch of 2 x 2 ranks)");
    const int64_t consumed[] = {0, 15, 16, 31, 32, 47, 48, 49, 1000};
    const int64_t expect[] = {4, 4, 8, 8, 12, 12, 16, 16, 16};
    int all = 1;
    for (int i = 0; i < 9; i++) {
        microbatches_update(&c, consumed[i], 1, err, sizeof err);
        all &= c.current_global_batch_size == expect[i] && c.num_micro_batches == expect[i] / 4;
    }
    tap_ok(all, "global batch 4,4,8,8,12,12,16,16,16 at 0,15,16,31,32,47,48,49,1000 consumed samples");
    /* the iterations: 4 4 4 4 (to 16) 8 8 (to 32) 12 12 (to 56 > 48), then (200 - 56) / 16 = 9 */
    tap_ok(microbatches_train_iters(&c, 200) == 17, "--train-samples 200 makes 17 iterations (got %lld)",
           (long long)microbatches_train_iters(&c, 200));
    tap_ok(microbatches_consumed_after(&c, 8) == 56 && microbatches_consumed_after(&c, 17) == 200,
           "56 samples consumed after 8 iterations, 200 after 17");

    /* 8 8 100 up to 32: increments of 100 / 3 = 33.3 samples; int(67 / 33.3) = 2 */
    int64_t ramp2[3] = {8, 8, 100};
    tap_ok(microbatches_init(&c, 32, 2, 2, ramp2, err, sizeof err) == 0, "8 8 100 up to 32 is accepted");
    const int64_t consumed2[] = {0, 33, 34, 66, 67, 99, 100, 101};
    const int64_t expect2[] = {8, 8, 16, 16, 24, 24, 32, 32};
    all = 1;
    for (int i = 0; i < 8; i++) {
        microbatches_update(&c, consumed2[i], 1, err, sizeof err);
        all &= c.current_global_batch_size == expect2[i];
    }
    tap_ok(all, "global batch 8,8,16,16,24,24,32,32 at 0,33,34,66,67,99,100,101 consumed samples");
    /* 8 8 8 8 8 16 16 24 24 (to 120 > 100), then (1000 - 120) / 32 = 27 */
    tap_ok(microbatches_train_iters(&c, 1000) == 36, "--train-samples 1000 makes 36 iterations");
    /* Megatron's loop runs while consumed <= train samples: 6 iterations reach 56 > 50 */
    tap_ok(microbatches_train_iters(&c, 50) == 6, "--train-samples 50 makes 6 iterations (Megatron overshoots to 56)");

    /* the constant calculator */
    tap_ok(microbatches_init(&c, 16, 2, 2, NULL, err, sizeof err) == 0 && c.num_micro_batches == 4 &&
           microbatches_train_iters(&c, 100) == 6, "without a ramp-up: 4 micro-batches, 100 samples make 6 iterations");

    /* refusals, in Megatron's words */
    int64_t odd[3] = {6, 4, 48};
    tap_ok(microbatches_init(&c, 18, 2, 2, odd, err, sizeof err) == 0, "6 4 48 up to 18 is accepted at first");
    tap_ok(microbatches_update(&c, 0, 1, err, sizeof err) != 0 &&
           strstr(err, "current global batch size (6) is not divisible by micro-batch-size (2)") != NULL,
           "... but batch 6 is not divisible by micro batch 2 x 2 ranks (%s)", err);
    int64_t big[3] = {32, 4, 48};
    tap_ok(microbatches_init(&c, 16, 2, 2, big, err, sizeof err) != 0 &&
           strstr(err, "expected global batch size to be greater than or equal to start batch size") != NULL,
           "a start above the global batch is refused (%s)", err);
    int64_t uneven[3] = {4, 8, 48};
    tap_ok(microbatches_init(&c, 16, 2, 2, uneven, err, sizeof err) != 0 &&
           strstr(err, "global batch size interval (12) to be divisible by global batch size increment (8)") != NULL,
           "an interval not divisible by the increment is refused (%s)", err);
    int64_t none[3] = {16, 4, 48};
    tap_ok(microbatches_init(&c, 16, 2, 2, none, err, sizeof err) != 0, "a start equal to the global batch is refused (%s)", err);
    int64_t zero[3] = {4, 0, 48};
    tap_ok(microbatches_init(&c, 16, 2, 2, zero, err, sizeof err) != 0 &&
           strstr(err, "batch size increment should be positive") != NULL, "a zero increment is refused (%s)", err);
    return tap_done();
}
