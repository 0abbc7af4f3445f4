/* lr_schedule_test.c: Megatron's learning-rate schedule at chosen points of each style (and a
 * warm-up from --lr-warmup-init). */
#include "app/optim/lr_schedule.h"
#include "tests/tap.h"

#include <math.h>

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1e-30); }

int main(void) {
    lr_schedule s = {.max_lr = 1e-3, .min_lr = 1e-4, .warmup_iters = 10, .decay_iters = 110, .style = LR_LINEAR};
    tap_ok(lr_at(&s, 0) == 0.0, "warm-up starts at 0 (Megatron's first iteration uses lr 0)");
    tap_ok(close_to(lr_at(&s, 5), 5e-4), "warm-up is linear: half way gives half the peak");
    tap_ok(close_to(lr_at(&s, 10), 1e-3), "peak at the end of warm-up");
    tap_ok(close_to(lr_at(&s, 60), 1e-4 + 0.5 * 9e-4), "linear decay half way");
    tap_ok(close_to(lr_at(&s, 110), 1e-4), "linear decay reaches min-lr at lr-decay-iters");
    tap_ok(close_to(lr_at(&s, 500), 1e-4), "min-lr after lr-decay-iters");
    s.style = LR_COSINE;
    tap_ok(close_to(lr_at(&s, 60), 1e-4 + 0.5 * 9e-4), "cosine decay half way is the midpoint");
    tap_ok(close_to(lr_at(&s, 35), 1e-4 + 9e-4 * 0.5 * (1 + cos(M_PI * 0.25))), "cosine decay a quarter way");
    s.style = LR_CONSTANT;
    tap_ok(close_to(lr_at(&s, 80), 1e-3), "constant stays at the peak after warm-up");
    s.style = LR_LINEAR;
    s.init_lr = 2e-4; /* --lr-warmup-init: init_lr + (max_lr - init_lr) * step / warmup */
    tap_ok(close_to(lr_at(&s, 0), 2e-4) && close_to(lr_at(&s, 5), 6e-4) && close_to(lr_at(&s, 10), 1e-3),
           "--lr-warmup-init: the warm-up rises linearly from it to the peak");
    tap_ok(lr_decay_style_from_name("cosine") == LR_COSINE && lr_decay_style_from_name("step") == -1,
           "decay style names");
    return tap_done();
}
