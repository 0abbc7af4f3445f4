/* moe_forced_routing.c: random router logits and the random expert bias of Megatron's
 * --moe-router-force-load-balancing and --moe-router-force-biased (see moe_forced_routing.h). */
#include "app/model/moe_forced_routing.h"

#include "app/core/error.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdlib.h>

dropout_rng moe_forced_routing_rng(const gpt_model *m, dropout_rng jitter) {
    const gpt_config *c = &m->config;
    dropout_rng r = jitter;
    r.p = 0.0f;
    r.stream = philox_stream_mix(jitter.stream, philox_stream_of_name("moe_router_force_load_balancing"));
    r.offset = jitter.offset / (uint64_t)c->hidden_size * (uint64_t)c->num_experts;
    return r;
}

void moe_force_router_logits(gpt_model *m, float *logits, int rows, dropout_rng rng, int layer) {
    const gpt_config *c = &m->config;
    const int E = c->num_experts;
    size_t n = (size_t)rows * (size_t)E;
    float *host = malloc(sizeof(float) * (n ? n : 1)), *bias = calloc((size_t)E, sizeof(float));
    CHECK(host && bias, "out of host memory for the forced router logits");
    if (c->moe_router_force_biased_given) {
        float std = fabsf(c->moe_router_force_biased);
        uint64_t stream = c->moe_router_force_biased < 0.0f
                              ? philox_stream_mix(philox_stream_of_name("moe_router_force_biased"), (uint64_t)(layer + 1))
                              : philox_stream_mix(rng.stream, philox_stream_of_name("moe_router_force_biased"));
        for (int e = 0; e < E; e++) bias[e] = std * philox_normal(rng.seed, stream, (uint64_t)e);
    }
    for (size_t i = 0; i < n; i++) host[i] = philox_normal(rng.seed, rng.stream, rng.offset + i) + bias[i % (size_t)E];
    m->ops->copy_from_host(logits, host, sizeof(float) * n);
    free(host);
    free(bias);
}
