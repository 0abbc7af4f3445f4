/* lr_schedule.h: Megatron's learning-rate schedule (linear warm-up from init_lr, then constant, linear or
 * cosine decay to --min-lr over --lr-decay-iters). */
#ifndef LR_SCHEDULE_H
#define LR_SCHEDULE_H

#include <stdint.h>

typedef enum { LR_CONSTANT, LR_LINEAR, LR_COSINE } lr_decay_style;

typedef struct lr_schedule {
    double max_lr, min_lr;
    double init_lr;            /* where the warm-up starts (--lr-warmup-init; Megatron's default 0) */
    int64_t warmup_iters, decay_iters;
    lr_decay_style style;
} lr_schedule;

/* parse "constant" | "linear" | "cosine"; returns -1 for anything else */
int lr_decay_style_from_name(const char *name);

/* learning rate after `steps_done` optimizer steps, i.e. the one iteration steps_done+1 uses
 * (Megatron's OptimizerParamScheduler.get_lr with num_steps = steps_done) */
double lr_at(const lr_schedule *s, int64_t steps_done);

#endif
