/* grad_scaler.h: Megatron's loss scaler for --fp16 (megatron/core/optimizer/grad_scaler.py), the
 * state machine alone. The loss is multiplied by `scale` before the backward; the optimizer
 * multiplies the gradients by inv_scale, and a non-finite gradient anywhere skips the step and
 * reports found_inf to grad_scaler_update.
 *  - constant (--loss-scale S): the scale never changes;
 *  - dynamic (--fp16 without --loss-scale): on found_inf the growth tracker restarts and the
 *    hysteresis tracker counts down; once it reaches 0 the scale is multiplied by the backoff
 *    factor 0.5 (not below --min-loss-scale), again at every further overflow until a growth.
 *    After --loss-scale-window consecutive finite steps the scale doubles (growth factor 2) and
 *    the hysteresis tracker is refilled to --hysteresis.
 * The scale is an fp32 value, as Megatron's CUDA tensor is: the products round as they do there. */
#ifndef GRAD_SCALER_H
#define GRAD_SCALER_H

#include <stdint.h>

typedef struct grad_scaler {
    int enabled;              /* 0: no scaler, the scale is 1 (fp32 and bf16 without --loss-scale) */
    int dynamic;              /* 1: DynamicGradScaler, 0: ConstantGradScaler */
    float scale;
    float min_scale;          /* --min-loss-scale */
    double growth_interval;   /* --loss-scale-window (a float in Megatron, compared with == ) */
    int hysteresis;           /* --hysteresis */
    int64_t growth_tracker;   /* finite steps since the last overflow or growth */
    int64_t hysteresis_tracker; /* overflows left before the scale backs off */
} grad_scaler;

#define GRAD_SCALER_GROWTH_FACTOR 2.0f
#define GRAD_SCALER_BACKOFF_FACTOR 0.5f

/* no scaler: scale 1, update does nothing */
void grad_scaler_init_none(grad_scaler *s);
/* ConstantGradScaler(scale); scale > 0 */
void grad_scaler_init_constant(grad_scaler *s, float scale);
/* DynamicGradScaler(initial, min, 2.0, 0.5, window, hysteresis); the caller has checked
 * 0 < min <= initial, window > 0 and hysteresis > 0 (Megatron's asserts) */
void grad_scaler_init_dynamic(grad_scaler *s, float initial_scale, float min_scale, double growth_interval,
                              int hysteresis);

/* the loss scale (1 without a scaler) */
float grad_scaler_scale(const grad_scaler *s);
/* Megatron's inv_scale: 1/scale computed in double, rounded to fp32 */
float grad_scaler_inv_scale(const grad_scaler *s);
/* after the unscale and the (model- and data-parallel agreed) finite check of one step */
void grad_scaler_update(grad_scaler *s, int found_inf);

#endif
