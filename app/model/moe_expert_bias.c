/* moe_expert_bias.c: the expert bias of aux-loss-free load balancing (see moe_expert_bias.h):
 * its buffers, the token counts, Megatron's update rule, its checkpoint tensors. The update runs
 * on the host (E values per layer, once per iteration) through copies, so any backend serves. */
#include "app/model/moe_expert_bias.h"

#include "app/checkpoint/checkpoint_boxes.h"
#include "app/core/error.h"
#include "io/checkpoint_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t bias_length(const gpt_config *c) { return (size_t)c->num_layers * (size_t)c->num_experts; }

void moe_expert_bias_allocate(gpt_model *m) {
    const gpt_config *c = &m->config;
    if (c->num_experts <= 0 || !c->moe_router_enable_expert_bias) return;
    m->moe_expert_bias = m->ops->alloc(sizeof(float) * bias_length(c));  /* zero-filled: Megatron's start */
    m->moe_tokens_per_expert = calloc(bias_length(c), sizeof(double));
    CHECK(m->moe_tokens_per_expert, "out of host memory for the expert bias's token counts");
}

void moe_expert_bias_release(gpt_model *m) {
    if (m->moe_expert_bias) m->ops->release(m->moe_expert_bias);
    free(m->moe_tokens_per_expert);
    m->moe_expert_bias = NULL;
    m->moe_tokens_per_expert = NULL;
}

const float *moe_expert_bias_of(const gpt_model *m, int layer) {
    return m->moe_expert_bias ? m->moe_expert_bias + (size_t)layer * (size_t)m->config.num_experts : NULL;
}

void moe_expert_bias_count(gpt_model *m, int layer, const int *expert_rows) {
    if (!m->moe_tokens_per_expert) return;
    const gpt_config *c = &m->config;
    int E = c->num_experts;
    double *counts = m->moe_tokens_per_expert + (size_t)layer * (size_t)E;
    if (c->moe_pad_expert_input_to_capacity && c->moe_router.capacity_factor > 0.0f) {
        /* Megatron counts the padded routing map: min(capacity, tokens) for every expert */
        int N = c->micro_batch_size * c->seq_length;
        double capacity = ceil((double)N * c->moe_router.topk / E * c->moe_router.capacity_factor);
        for (int e = 0; e < E; e++) counts[e] += capacity < N ? capacity : N;
        return;
    }
    for (int e = 0; e < E; e++) counts[e] += expert_rows[e + 1] - expert_rows[e];
}

/* the MoE layers this rank holds, in chunk order: their global indices into layers[], the count */
static int held_moe_layers(const gpt_model *m, int *layers) {
    int n = 0;
    for (int k = 0; k < m->num_chunks; k++)
        for (int l = 0; l < m->chunks[k].num_layers; l++) {
            int layer = m->chunks[k].first_layer + l;
            if (gpt_layer_is_moe(&m->config, layer)) layers[n++] = layer;
        }
    return n;
}

void moe_expert_bias_update(gpt_model *m, const comm_group *dp_group) {
    if (!m->moe_expert_bias) return;
    const gpt_config *c = &m->config;
    int E = c->num_experts;
    int *layers = malloc(sizeof(int) * (size_t)c->num_layers);
    double *counts = malloc(sizeof(double) * bias_length(c));
    float *bias = malloc(sizeof(float) * (size_t)E);
    CHECK(layers && counts && bias, "out of host memory for the expert bias update");
    int n = held_moe_layers(m, layers);
    /* the global batch's counts: this rank's, summed over the data-parallel ranks (one call) */
    for (int i = 0; i < n; i++)
        memcpy(counts + (size_t)i * E, m->moe_tokens_per_expert + (size_t)layers[i] * E, sizeof(double) * (size_t)E);
    if (dp_group && dp_group->size > 1 && n > 0)
        m->comm->allreduce_double_host(counts, (size_t)n * (size_t)E, COMM_SUM, dp_group);
    const float rate = c->moe_router_bias_update_rate;
    for (int i = 0; i < n; i++) {
        const double *count = counts + (size_t)i * E;
        double total = 0.0;
        for (int e = 0; e < E; e++) total += count[e];
        float *device = m->moe_expert_bias + (size_t)layers[i] * E;
        m->ops->copy_to_host(bias, device, sizeof(float) * (size_t)E);
        /* b + sign(mean - count) * rate, in fp32 as Megatron's (the counts are integers: the
         * sign is exact) */
        for (int e = 0; e < E; e++) {
            double offset = total / E - count[e];
            float sign = offset > 0 ? 1.0f : offset < 0 ? -1.0f : 0.0f;
            bias[e] = bias[e] + sign * rate;
        }
        m->ops->copy_from_host(device, bias, sizeof(float) * (size_t)E);
    }
    memset(m->moe_tokens_per_expert, 0, sizeof(double) * bias_length(c));
    free(layers);
    free(counts);
    free(bias);
}

void moe_expert_bias_name(int layer, char *out, size_t size) {
    snprintf(out, size, "%s.%d.mlp.router.expert_bias", gpt_parameter_table()->layer_prefix, layer);
}

void moe_expert_bias_sharded_state(const gpt_model *m, int dp_rank, sharded_state *state) {
    const gpt_config *c = &m->config;
    if (!m->moe_expert_bias) return;
    int *held = calloc((size_t)c->num_layers, sizeof(int));
    CHECK(held, "out of host memory for the expert bias's checkpoint tensors");
    for (int k = 0; k < m->num_chunks; k++)
        for (int l = 0; l < m->chunks[k].num_layers; l++) held[m->chunks[k].first_layer + l] = 1;
    shard_block whole = {0, 0, 1};
    for (int layer = 0; layer < c->num_layers; layer++) {
        if (!gpt_layer_is_moe(c, layer)) continue;
        char name[PARAM_NAME_MAX];
        moe_expert_bias_name(layer, name, sizeof name);
        int tensor = sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, name, c->num_experts, 0);
        if (held[layer])
            sharded_state_add(state, tensor, shard_range_part(&whole, 0, (size_t)c->num_experts),
                              (float *)moe_expert_bias_of(m, layer), c->tp_rank == 0 && dp_rank == 0);
    }
    free(held);
}
