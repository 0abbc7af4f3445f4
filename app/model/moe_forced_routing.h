/* moe_forced_routing.h: Megatron's benchmark routers (its moe_utils.py RandomSTE and
 * RandomSTEShared). With --moe-router-force-load-balancing the router's logits [N,E] are
 * replaced by standard normal draws, so that every expert gets about N k / E tokens whatever the
 * weights; --moe-router-force-biased STD does the same and adds a random per-expert bias b[E]
 * of std |STD| to every row, the same on every rank, to skew the routing on purpose. The
 * backward is the straight-through estimator: the logits' gradient reaches the router's weight
 * as if the draws were its logits (the backward reads the kept logits, which are the draws).
 *
 * The draws are Philox normals keyed by the seed and the router site's stream (iteration and
 * layer), at the micro-batch's place among the global batch's logits (first sample x T x E), so
 * a rank's draws do not depend on how many ranks share the batch; Megatron draws them from its
 * expert-parallel generator instead. The bias is keyed by iteration and layer (positive STD: a
 * new one each iteration, where Megatron draws one per forward pass) or by layer alone
 * (negative STD: one for the whole run, as Megatron caches it per layer). They are drawn on the
 * host and copied to the backend (N x E floats per layer; a benchmark feature). */
#ifndef MOE_FORCED_ROUTING_H
#define MOE_FORCED_ROUTING_H

#include "app/model/gpt_model.h"

/* the draws' key from the layer's input-jitter key (gpt_model.c: seed, stream of iteration,
 * layer and site, offset first sample x T x C): another stream, offset first sample x T x E */
dropout_rng moe_forced_routing_rng(const gpt_model *m, dropout_rng jitter);

/* overwrite logits[N,E] (fp32, backend memory) for global layer `layer`; rng: the site's key
 * (seed, stream of iteration and layer, offset of the micro-batch's first logit) */
void moe_force_router_logits(gpt_model *m, float *logits, int rows, dropout_rng rng, int layer);

#endif
