/* fp8_recipe.h: Transformer Engine's delayed-scaling recipe (DelayedScaling; Megatron's
 * --fp8-recipe delayed with --fp8-amax-history-len, --fp8-amax-compute-algo and --fp8-margin),
 * the host-side math of issue 43, on host arrays.
 *
 * Each fp8 tensor has a scale and an amax history of history_len entries. Entry 0 is the slot the
 * current step records into (fp8_quantize's amax, reduced with MAX over the amax-reduction group
 * by the caller); fp8_delayed_scaling_update then does what TE's
 * amax_and_scale_update_after_reduction (transformer_engine/common/recipe/delayed_scaling.cu,
 * the fused update Megatron runs) does, per scale:
 *  - last = history[0]. When last is 0 nothing happens (no roll, the scale stays).
 *  - Otherwise the history rolls: new[i] = old[i + 1] for 0 < i < len - 1, new[len - 1] = last,
 *    new[0] = 0 (the next step's slot), and amax = last (most_recent) or the fmaxf of the rolled
 *    values old[1..len-1] and last (max; fmaxf: a NaN entry is passed over).
 *  - scale = fp8_max * 2^-margin / amax when amax is finite and > 0, else the old scale; an
 *    infinite result (amax below fp8_max / FLT_MAX) becomes FLT_MAX.
 * The history is laid out as TE's: [history_len][num_scales], row-major. */
#ifndef FP8_RECIPE_H
#define FP8_RECIPE_H

#include <stddef.h>

#include "kernels/fp8_format.h"

typedef enum fp8_amax_compute_algo { FP8_AMAX_MAX = 0, FP8_AMAX_MOST_RECENT = 1 } fp8_amax_compute_algo;

#ifdef __cplusplus
extern "C" {
#endif
/* "max" or "most_recent" (Megatron's --fp8-amax-compute-algo choices) into *algo; returns 0, or
 * -1 for any other name (the caller reports it) */
int fp8_amax_compute_algo_parse(const char *name, fp8_amax_compute_algo *algo);
/* the fp8 format of a tensor under --fp8-format: e4m3 everywhere (hybrid 0), or hybrid (1):
 * E4M3 in the forward (inputs, weights), E5M2 for the gradients of the backward */
int fp8_tensor_format(int hybrid, int is_gradient);
/* fp8_max(format) * 2^-margin: the value the scale maps an amax to */
float fp8_scaled_max(int format, int margin);
/* the delayed-scaling update above on history[history_len][num_scales] and scale[num_scales];
 * a bad argument (history_len 0, unknown format or algo) ends through kernels_fatal */
void fp8_delayed_scaling_update(float *history, size_t history_len, size_t num_scales, float *scale,
                                fp8_amax_compute_algo algo, int format, int margin);
/* per-tensor current scaling (--fp8-recipe tensorwise; TE's Float8CurrentScaling,
 * compute_scale_from_amax in transformer_engine/common/recipe/recipe_common.cuh): the scale from
 * this tensor's own amax, floored at epsilon (TE's amax_epsilon, default 0): fp8_max / amax in
 * one rounding, 1 when amax is 0, infinite or NaN, FLT_MAX when the quotient overflows; with
 * force_pow_2 (NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES) the mantissa bits are cleared, i.e. the
 * scale rounds down to a power of two */
float fp8_current_scale(float amax, int format, float epsilon, int force_pow_2);
#ifdef __cplusplus
}
#endif

#endif /* FP8_RECIPE_H */
