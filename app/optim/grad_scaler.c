/* grad_scaler.c: see grad_scaler.h; transcribed from Megatron's DynamicGradScaler.update. */
#include "app/optim/grad_scaler.h"

#include <string.h>

void grad_scaler_init_none(grad_scaler *s) {
    memset(s, 0, sizeof *s);
    s->scale = 1.0f;
    s->min_scale = 1.0f;
}

void grad_scaler_init_constant(grad_scaler *s, float scale) {
    grad_scaler_init_none(s);
    s->enabled = 1;
    s->scale = scale;
}

void grad_scaler_init_dynamic(grad_scaler *s, float initial_scale, float min_scale, double growth_interval,
                              int hysteresis) {
    grad_scaler_init_none(s);
    s->enabled = 1;
    s->dynamic = 1;
    s->scale = initial_scale;
    s->min_scale = min_scale;
    s->growth_interval = growth_interval;
    s->hysteresis = hysteresis;
    s->growth_tracker = 0;
    s->hysteresis_tracker = hysteresis;
}

float grad_scaler_scale(const grad_scaler *s) { return s->enabled ? s->scale : 1.0f; }

float grad_scaler_inv_scale(const grad_scaler *s) { return (float)(1.0 / (double)grad_scaler_scale(s)); }

void grad_scaler_update(grad_scaler *s, int found_inf) {
    if (!s->enabled || !s->dynamic) return;
    if (found_inf) {
        s->growth_tracker = 0;
        s->hysteresis_tracker -= 1;
        if (s->hysteresis_tracker <= 0) {
            float backed_off = s->scale * GRAD_SCALER_BACKOFF_FACTOR;
            s->scale = backed_off > s->min_scale ? backed_off : s->min_scale;
        }
    } else {
        s->growth_tracker += 1;
        if ((double)s->growth_tracker == s->growth_interval) {
            s->growth_tracker = 0;
            s->hysteresis_tracker = s->hysteresis;
            s->scale = s->scale * GRAD_SCALER_GROWTH_FACTOR;
        }
    }
}
