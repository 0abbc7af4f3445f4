/* lr_schedule.c: see lr_schedule.h. Warm-up is linear from 0; cosine decay uses
 * coeff = (1 + cos(pi * ratio)) / 2 with ratio = (step - warmup) / (decay - warmup). */
#include "app/optim/lr_schedule.h"

#include <math.h>
#include <string.h>

int lr_decay_style_from_name(const char *name) {
    if (strcmp(name, "constant") == 0) return LR_CONSTANT;
    if (strcmp(name, "linear") == 0) return LR_LINEAR;
    if (strcmp(name, "cosine") == 0) return LR_COSINE;
    return -1;
}

double lr_at(const lr_schedule *s, int64_t step) {
    if (s->warmup_iters > 0 && step <= s->warmup_iters)
        return s->init_lr + (s->max_lr - s->init_lr) * (double)step / (double)s->warmup_iters;
    if (s->style == LR_CONSTANT) return s->max_lr;
    if (step > s->decay_iters) return s->min_lr;
    double ratio = (double)(step - s->warmup_iters) / (double)(s->decay_iters - s->warmup_iters);
    double coeff = s->style == LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(M_PI * ratio) + 1.0);
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}
