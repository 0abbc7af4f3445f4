/* inference_moe.c: see inference_moe.h. */
#include "app/inference/inference_moe.h"
#include "app/core/error.h"
#include "app/model/moe_layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int moe_int(checkpoint_file *f, const char *name, int required, int64_t low) {
    int64_t value = 0;
    if (checkpoint_get_int(f, "/args", name, &value) != 0) {
        if (required) user_error("checkpoint %s is a mixture-of-experts model but lacks /args/%s", f->path, name);
        return 0;
    }
    if (value < low || value > (1 << 30))
        user_error("checkpoint %s: /args/%s %lld is out of range", f->path, name, (long long)value);
    return (int)value;
}

double inference_moe_config(checkpoint_file *f, gpt_config *c) {
    int64_t experts = 0;
    if (checkpoint_get_int(f, "/args", "num_experts", &experts) != 0 || experts <= 0) return 0.0;
    c->num_experts = moe_int(f, "num_experts", 1, 1);
    c->moe_ffn_hidden_size = moe_int(f, "moe_ffn_hidden_size", 1, 1);
    moe_router_spec *r = &c->moe_router;
    memset(r, 0, sizeof *r);
    r->num_experts = c->num_experts;
    r->topk = moe_int(f, "moe_router_topk", 1, 1);
    if (r->topk > c->num_experts)
        user_error("checkpoint %s: /args/moe_router_topk %d exceeds num_experts %d", f->path, r->topk, c->num_experts);
    r->pre_softmax = moe_int(f, "moe_router_pre_softmax", 0, 0) != 0;
    r->num_groups = moe_int(f, "moe_router_num_groups", 0, 0);
    r->group_topk = moe_int(f, "moe_router_group_topk", 0, 0);
    if (r->num_groups > 0 && (c->num_experts % r->num_groups || r->group_topk < 1 || r->group_topk > r->num_groups))
        user_error("checkpoint %s: /args/moe_router_num_groups %d and moe_router_group_topk %d do not fit %d experts",
                   f->path, r->num_groups, r->group_topk, c->num_experts);
    double scaling = 0.0, capacity = 0.0;
    if (checkpoint_get_double(f, "/args", "moe_router_topk_scaling_factor", &scaling) == 0 && scaling > 0.0)
        r->topk_scaling_factor = (float)scaling;
    if (checkpoint_get_double(f, "/args", "moe_expert_capacity_factor", &capacity) != 0 || capacity < 0.0)
        capacity = 0.0;
    char *score = checkpoint_get_string(f, "/args", "moe_router_score_function");
    if (!score || !strcmp(score, "softmax")) r->score_function = MOE_SCORE_SOFTMAX;
    else if (!strcmp(score, "sigmoid")) r->score_function = MOE_SCORE_SIGMOID;
    else if (!strcmp(score, "sqrtsoftplus")) r->score_function = MOE_SCORE_SQRTSOFTPLUS;
    else user_error("checkpoint %s: unknown /args/moe_router_score_function '%s'", f->path, score);
    free(score);
    c->moe_shared_expert_intermediate_size = moe_int(f, "moe_shared_expert_intermediate_size", 0, 0);
    c->moe_shared_expert_gate = moe_int(f, "moe_shared_expert_gate", 0, 0) != 0;
    c->moe_router_enable_expert_bias = moe_int(f, "moe_router_enable_expert_bias", 0, 0) != 0;
    char *pattern = checkpoint_get_string(f, "/args", "moe_layer_freq");
    if (!pattern) user_error("checkpoint %s is a mixture-of-experts model but lacks /args/moe_layer_freq", f->path);
    char err[512];
    if (moe_layer_pattern_parse(pattern, c->num_layers, c->moe_layer, err, sizeof err) != 0)
        user_error("checkpoint %s: /args/moe_layer_freq: %s", f->path, err);
    free(pattern);
    return capacity;
}

void inference_moe_report(const gpt_config *c, double capacity_factor) {
    if (c->num_experts <= 0) return;
    int moe_layers = 0;
    for (int l = 0; l < c->num_layers; l++) moe_layers += gpt_layer_is_moe(c, l);
    printf("> mixture of experts: %d experts of ffn %d, top-%d, in %d of %d layers%s; routed dropless",
           c->num_experts, c->moe_ffn_hidden_size, c->moe_router.topk, moe_layers, c->num_layers,
           c->moe_shared_expert_intermediate_size > 0 ? ", shared experts" : "");
    if (capacity_factor > 0.0)
        printf(" (trained with --moe-expert-capacity-factor %g: inference keeps every token's top-k experts, as "
               "Megatron-Core's InferenceTopKRouter)", capacity_factor);
    printf("\n");
}
