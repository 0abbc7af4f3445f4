/* gpt_parameter_table.c: the GPT family's parameter table, Llama's options included (see
 * gpt_parameter_table.h), and the expansion of a table into the global parameter list of a
 * config. */
#include "app/model/gpt_parameter_table.h"

#include "app/model/gpt_model.h"

#include <stdio.h>
#include <string.h>

#define MODEL_VIEW(field) offsetof(model_view, field)
#define LAYER_VIEW(field) offsetof(layer_view, field)

/* Megatron-Core's GPT (pre-LN, learned positions) and Hugging Face GPT2LMHeadModel, with the
 * Llama options: RMSNorm weights take Megatron-Core's names of norms fused into the following
 * linear layer (linear_qkv.layer_norm_weight, linear_fc1.layer_norm_weight; no bias), RoPE has
 * no parameters, --disable-bias-linear drops the linear biases, SwiGLU doubles fc1's rows.
 * HF's Conv1D stores weights [in, out], ours (torch.nn.Linear) [out, in]: transposed; our qkv
 * rows are grouped per head, HF's c_attn columns are q|k|v (hf_gpt2_layout.h). Rows only Llama
 * models have carry no GPT-2 name. */
#define LN ROW_LAYERNORM
#define RMS ROW_RMSNORM
#define BIAS ROW_LINEAR_BIAS
#define DENSE ROW_DENSE_MLP
#define MOE ROW_MOE
#define SHARED ROW_SHARED_EXPERT
#define GATE ROW_SHARED_GATE
#define BERT ROW_BERT
#define BINARY ROW_BERT_BINARY
#define PRE ROW_BERT_PRETRAIN
#define CROSS (ROW_T5 | ROW_T5_DECODER)
static const parameter_row gpt_rows[] = {
/*   part            name                                  rows           cols           split       init                no_wd sp_grad presence */
    {PART_EMBEDDING, "embedding.word_embeddings.weight",     DIM_VOCAB,     DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, ROW_ALWAYS,
     MODEL_VIEW(word_embeddings),          "transformer.wte.weight",  HF_VOCAB_ROWS, 0},
    {PART_EMBEDDING, "embedding.position_embeddings.weight", DIM_POSITIONS, DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, ROW_LEARNED_POSITIONS,
     MODEL_VIEW(position_embeddings),      "transformer.wpe.weight",  HF_COPY, 0},
    {PART_EMBEDDING, "embedding.tokentype_embeddings.weight", DIM_TWO,      DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, BERT | BINARY,
     MODEL_VIEW(bert.tokentype_embeddings), NULL,                     HF_COPY, 0},
    /* T5's relative position bias (Megatron-Core's T5Model: one RelativePositionEmbedding per
     * stack, an nn.Embedding(num_buckets, heads) from init_method, whole on every
     * tensor-parallel rank; registered after the embedding, before the encoder) */
    {PART_EMBEDDING, "encoder_relative_pos_emb.relative_attention_bias.weight", DIM_RELATIVE_BUCKETS, DIM_HEADS, SHARD_NONE, INIT_NORMAL, 0, 0, ROW_T5 | ROW_RELATIVE_POSITIONS,
     MODEL_VIEW(encoder_relative_bias),    NULL,                      HF_COPY, 0},
    {PART_EMBEDDING, "decoder_relative_pos_emb.relative_attention_bias.weight", DIM_RELATIVE_BUCKETS, DIM_HEADS, SHARD_NONE, INIT_NORMAL, 0, 0, ROW_T5 | ROW_RELATIVE_POSITIONS,
     MODEL_VIEW(decoder_relative_bias),    NULL,                      HF_COPY, 0},

    {PART_LAYER,     "input_layernorm.weight",               DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, LN,
     LAYER_VIEW(input_layernorm_weight),   "ln_1.weight",             HF_COPY, 0},
    {PART_LAYER,     "input_layernorm.bias",                 DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, LN,
     LAYER_VIEW(input_layernorm_bias),     "ln_1.bias",               HF_COPY, 0},
    {PART_LAYER,     "self_attention.linear_qkv.layer_norm_weight", DIM_HIDDEN, DIM_NONE,  SHARD_NONE, INIT_ONES,          1, 1, RMS,
     LAYER_VIEW(input_layernorm_weight),   NULL,                      HF_COPY, 0},
    {PART_LAYER,     "self_attention.linear_qkv.weight",     DIM_QKV,       DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, ROW_ALWAYS,
     LAYER_VIEW(qkv_weight),               "attn.c_attn.weight",      HF_QKV_WEIGHT, 0},
    {PART_LAYER,     "self_attention.linear_qkv.bias",       DIM_QKV,       DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, ROW_QKV_BIAS,
     LAYER_VIEW(qkv_bias),                 "attn.c_attn.bias",        HF_QKV_BIAS, 0},
    {PART_LAYER,     "self_attention.linear_proj.weight",    DIM_HIDDEN,    DIM_ATTENTION, SHARD_COLS, INIT_SCALED_NORMAL, 0, 0, ROW_ALWAYS,
     LAYER_VIEW(proj_weight),              "attn.c_proj.weight",      HF_TRANSPOSE, 0},
    {PART_LAYER,     "self_attention.linear_proj.bias",      DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, BIAS,
     LAYER_VIEW(proj_bias),                "attn.c_proj.bias",        HF_COPY, 0},
    /* T5's decoder layers: Megatron-Core's pre_cross_attn_layernorm and CrossAttention
     * (linear_q, linear_kv with per head its key then value rows, linear_proj) */
    {PART_LAYER,     "pre_cross_attn_layernorm.weight",      DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, CROSS,
     LAYER_VIEW(pre_cross_attn_layernorm_weight), NULL,               HF_COPY, 0},
    {PART_LAYER,     "pre_cross_attn_layernorm.bias",        DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, CROSS | LN,
     LAYER_VIEW(pre_cross_attn_layernorm_bias), NULL,                 HF_COPY, 0},
    /* linear_q: the decoder's queries, column-parallel */
    {PART_LAYER,     "cross_attention.linear_q.weight",      DIM_ATTENTION, DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, CROSS,
     LAYER_VIEW(cross_q_weight),           NULL,                      HF_COPY, 0},
    {PART_LAYER,     "cross_attention.linear_q.bias",        DIM_ATTENTION, DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, CROSS | BIAS,
     LAYER_VIEW(cross_q_bias),             NULL,                      HF_COPY, 0},
    /* linear_kv: the encoder output's keys and values, column-parallel by whole heads */
    {PART_LAYER,     "cross_attention.linear_kv.weight",     DIM_CROSS_KV,  DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, CROSS,
     LAYER_VIEW(cross_kv_weight),          NULL,                      HF_COPY, 0},
    {PART_LAYER,     "cross_attention.linear_kv.bias",       DIM_CROSS_KV,  DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, CROSS | BIAS,
     LAYER_VIEW(cross_kv_bias),            NULL,                      HF_COPY, 0},
    /* linear_proj: row-parallel, the bias added after the reduction */
    {PART_LAYER,     "cross_attention.linear_proj.weight",   DIM_HIDDEN,    DIM_ATTENTION, SHARD_COLS, INIT_SCALED_NORMAL, 0, 0, CROSS,
     LAYER_VIEW(cross_proj_weight),        NULL,                      HF_COPY, 0},
    {PART_LAYER,     "cross_attention.linear_proj.bias",     DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, CROSS | BIAS,
     LAYER_VIEW(cross_proj_bias),          NULL,                      HF_COPY, 0},
    {PART_LAYER,     "pre_mlp_layernorm.weight",             DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, LN,
     LAYER_VIEW(pre_mlp_layernorm_weight), "ln_2.weight",             HF_COPY, 0},
    {PART_LAYER,     "pre_mlp_layernorm.bias",               DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, LN,
     LAYER_VIEW(pre_mlp_layernorm_bias),   "ln_2.bias",               HF_COPY, 0},
    {PART_LAYER,     "pre_mlp_layernorm.weight",             DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, RMS | MOE,
     LAYER_VIEW(pre_mlp_layernorm_weight), NULL,                      HF_COPY, 0},
    {PART_LAYER,     "mlp.linear_fc1.layer_norm_weight",     DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, RMS | DENSE,
     LAYER_VIEW(pre_mlp_layernorm_weight), NULL,                      HF_COPY, 0},
    {PART_LAYER,     "mlp.linear_fc1.weight",                DIM_FC1,       DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, DENSE,
     LAYER_VIEW(fc1_weight),               "mlp.c_fc.weight",         HF_TRANSPOSE, 0},
    {PART_LAYER,     "mlp.linear_fc1.bias",                  DIM_FC1,       DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, BIAS | DENSE,
     LAYER_VIEW(fc1_bias),                 "mlp.c_fc.bias",           HF_COPY, 0},
    {PART_LAYER,     "mlp.linear_fc2.weight",                DIM_HIDDEN,    DIM_FFN,       SHARD_COLS, INIT_SCALED_NORMAL, 0, 0, DENSE,
     LAYER_VIEW(fc2_weight),               "mlp.c_proj.weight",       HF_TRANSPOSE, 0},
    {PART_LAYER,     "mlp.linear_fc2.bias",                  DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, BIAS | DENSE,
     LAYER_VIEW(fc2_bias),                 "mlp.c_proj.bias",         HF_COPY, 0},
    /* MoE layers (Megatron-Core's TopKRouter and SequentialMLP experts, under the experts'
     * global index) */
    {PART_LAYER,     "mlp.router.weight",                    DIM_EXPERTS,   DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, MOE,
     LAYER_VIEW(router_weight),            NULL,                      HF_COPY, 0},
    {PART_LAYER,     "mlp.experts.local_experts.%d.linear_fc1.weight", DIM_MOE_FC1, DIM_HIDDEN, SHARD_ROWS, INIT_NORMAL, 0, 0, MOE,
     LAYER_VIEW(expert_fc1_weight),        NULL,                      HF_COPY, 1},
    {PART_LAYER,     "mlp.experts.local_experts.%d.linear_fc2.weight", DIM_HIDDEN, DIM_MOE_FFN, SHARD_COLS, INIT_SCALED_NORMAL, 0, 0, MOE,
     LAYER_VIEW(expert_fc2_weight),        NULL,                      HF_COPY, 1},
    /* shared experts (Megatron-Core's SharedExpertMLP: a dense MLP without biases, split over
     * tensor parallelism as the dense one; its gate weight [1, C] is whole on every rank) */
    {PART_LAYER,     "mlp.shared_experts.linear_fc1.weight", DIM_SHARED_FC1, DIM_HIDDEN,   SHARD_ROWS, INIT_NORMAL,        0, 0, MOE | SHARED,
     LAYER_VIEW(shared_fc1_weight),        NULL,                      HF_COPY, 0},
    {PART_LAYER,     "mlp.shared_experts.linear_fc2.weight", DIM_HIDDEN,    DIM_SHARED_FFN, SHARD_COLS, INIT_SCALED_NORMAL, 0, 0, MOE | SHARED,
     LAYER_VIEW(shared_fc2_weight),        NULL,                      HF_COPY, 0},
    {PART_LAYER,     "mlp.shared_experts.gate_weight",       DIM_ONE,       DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, MOE | SHARED | GATE,
     LAYER_VIEW(shared_gate_weight),       NULL,                      HF_COPY, 0},

    {PART_FINAL,     "decoder.final_layernorm.weight",       DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, ROW_ALWAYS,
     MODEL_VIEW(final_layernorm_weight),   "transformer.ln_f.weight", HF_COPY, 0},
    {PART_FINAL,     "decoder.final_layernorm.bias",         DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, LN,
     MODEL_VIEW(final_layernorm_bias),     "transformer.ln_f.bias",   HF_COPY, 0},
    {PART_FINAL,     "output_layer.weight",                  DIM_VOCAB,     DIM_HIDDEN,    SHARD_ROWS, INIT_NORMAL,        0, 0, ROW_UNTIED_ONLY,
     MODEL_VIEW(output_layer),             "lm_head.weight",          HF_VOCAB_ROWS, 0},
    /* BERT's heads (Megatron-Core's BertLMHead, output_layer bias, Pooler, binary_head:
     * get_linear_layer's weights from init_method, zero biases; whole on every tensor-parallel
     * rank but the output bias, split by vocabulary rows as the output layer) */
    {PART_FINAL,     "lm_head.dense.weight",                 DIM_HIDDEN,    DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, BERT | PRE,
     MODEL_VIEW(bert.lm_dense_weight),     NULL,                      HF_COPY, 0},
    {PART_FINAL,     "lm_head.dense.bias",                   DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 0, BERT | PRE,
     MODEL_VIEW(bert.lm_dense_bias),       NULL,                      HF_COPY, 0},
    {PART_FINAL,     "lm_head.layer_norm.weight",            DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 0, BERT | PRE,
     MODEL_VIEW(bert.lm_norm_weight),      NULL,                      HF_COPY, 0},
    {PART_FINAL,     "lm_head.layer_norm.bias",              DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 0, BERT | PRE,
     MODEL_VIEW(bert.lm_norm_bias),        NULL,                      HF_COPY, 0},
    {PART_FINAL,     "output_layer.bias",                    DIM_VOCAB,     DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, BERT | PRE,
     MODEL_VIEW(bert.output_bias),         NULL,                      HF_COPY, 0},
    {PART_FINAL,     "pooler.dense.weight",                  DIM_HIDDEN,    DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, BERT | BINARY,
     MODEL_VIEW(bert.pooler_weight),       NULL,                      HF_COPY, 0},
    {PART_FINAL,     "pooler.dense.bias",                    DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 0, BERT | BINARY,
     MODEL_VIEW(bert.pooler_bias),         NULL,                      HF_COPY, 0},
    {PART_FINAL,     "binary_head.weight",                   DIM_TWO,       DIM_HIDDEN,    SHARD_NONE, INIT_NORMAL,        0, 0, BERT | BINARY | PRE,
     MODEL_VIEW(bert.binary_weight),       NULL,                      HF_COPY, 0},
    {PART_FINAL,     "binary_head.bias",                     DIM_TWO,       DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 0, BERT | BINARY | PRE,
     MODEL_VIEW(bert.binary_bias),         NULL,                      HF_COPY, 0},
    /* finetune_bert's task heads (Megatron's legacy Classification and MultipleChoice:
     * get_linear_layer(hidden, outputs, init_method), zero bias; whole on every rank) */
    {PART_FINAL,     "classification_head.weight",           DIM_TASK_OUTPUTS, DIM_HIDDEN, SHARD_NONE, INIT_NORMAL,        0, 0, BERT | BINARY | ROW_BERT_CLASSIFY,
     MODEL_VIEW(bert.task_weight),         NULL,                      HF_COPY, 0},
    {PART_FINAL,     "classification_head.bias",             DIM_TASK_OUTPUTS, DIM_NONE,   SHARD_NONE, INIT_ZEROS,         1, 0, BERT | BINARY | ROW_BERT_CLASSIFY,
     MODEL_VIEW(bert.task_bias),           NULL,                      HF_COPY, 0},
    {PART_FINAL,     "multichoice_head.weight",              DIM_TASK_OUTPUTS, DIM_HIDDEN, SHARD_NONE, INIT_NORMAL,        0, 0, BERT | BINARY | ROW_BERT_MULTICHOICE,
     MODEL_VIEW(bert.task_weight),         NULL,                      HF_COPY, 0},
    {PART_FINAL,     "multichoice_head.bias",                DIM_TASK_OUTPUTS, DIM_NONE,   SHARD_NONE, INIT_ZEROS,         1, 0, BERT | BINARY | ROW_BERT_MULTICHOICE,
     MODEL_VIEW(bert.task_bias),           NULL,                      HF_COPY, 0},
    /* T5 (Megatron-Core's T5Model): the encoder block's final norm, and T5LMHead's output
     * layer bias, which it has with tied embeddings only (ColumnParallelLinear's bias =
     * share_embeddings_and_output_weights); untied, its weight is output_layer.weight's row,
     * named lm_head.output_layer.weight */
    {PART_FINAL,     "encoder.final_layernorm.weight",       DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ONES,          1, 1, ROW_T5,
     MODEL_VIEW(encoder_final_layernorm_weight), NULL,                HF_COPY, 0},
    {PART_FINAL,     "encoder.final_layernorm.bias",         DIM_HIDDEN,    DIM_NONE,      SHARD_NONE, INIT_ZEROS,         1, 1, ROW_T5 | LN,
     MODEL_VIEW(encoder_final_layernorm_bias), NULL,                  HF_COPY, 0},
    {PART_FINAL,     "lm_head.output_layer.bias",            DIM_VOCAB,     DIM_NONE,      SHARD_ROWS, INIT_ZEROS,         1, 0, ROW_T5 | ROW_TIED_ONLY,
     MODEL_VIEW(lm_head_bias),             NULL,                      HF_COPY, 0},
};
#undef LN
#undef RMS
#undef BIAS
#undef DENSE
#undef MOE
#undef SHARED
#undef GATE
#undef PRE
#undef BERT
#undef BINARY
#undef CROSS

static const parameter_table gpt_table = {
    gpt_rows, (int)(sizeof gpt_rows / sizeof gpt_rows[0]), "decoder.layers", "transformer.h", 0,
};

const parameter_table *gpt_parameter_table(void) { return &gpt_table; }

int gpt_query_groups(const gpt_config *c) {
    return c->num_query_groups > 0 ? c->num_query_groups : c->num_attention_heads;
}

int model_dim_size(model_dim dim, const gpt_config *c) {
    switch (dim) {
    case DIM_NONE: return 0;
    case DIM_HIDDEN: return c->hidden_size;
    case DIM_QKV: return (c->num_attention_heads + 2 * gpt_query_groups(c)) * c->kv_channels;
    case DIM_ATTENTION: return c->num_attention_heads * c->kv_channels;
    case DIM_CROSS_KV: return 2 * c->num_attention_heads * c->kv_channels;
    case DIM_FFN: return c->ffn_hidden_size;
    case DIM_FC1: return (c->swiglu ? 2 : 1) * c->ffn_hidden_size;
    case DIM_VOCAB: return c->padded_vocab_size;
    case DIM_POSITIONS: return c->max_position_embeddings;
    case DIM_EXPERTS: return c->num_experts;
    case DIM_MOE_FC1: return (c->swiglu ? 2 : 1) * c->moe_ffn_hidden_size;
    case DIM_MOE_FFN: return c->moe_ffn_hidden_size;
    case DIM_SHARED_FC1: return (c->swiglu ? 2 : 1) * c->moe_shared_expert_intermediate_size;
    case DIM_SHARED_FFN: return c->moe_shared_expert_intermediate_size;
    case DIM_ONE: return 1;
    case DIM_TWO: return 2;
    case DIM_TASK_OUTPUTS: return c->bert_task_outputs;
    case DIM_HEADS: return c->num_attention_heads;
    case DIM_RELATIVE_BUCKETS: return c->relative_attention_num_buckets;
    }
    return 0;
}

int model_dim_blocks(model_dim dim, const gpt_config *c) {
    return (dim == DIM_FC1 || dim == DIM_MOE_FC1 || dim == DIM_SHARED_FC1) && c->swiglu ? 2 : 1;
}

int parameter_row_present(const parameter_row *row, const gpt_config *c, int layer) {
    unsigned held = ROW_ALWAYS;
    if (row->part == PART_LAYER) held |= gpt_layer_is_moe(c, layer) ? ROW_MOE : ROW_DENSE_MLP;
    held |= c->untie_embeddings_and_output_weights ? ROW_UNTIED_ONLY : ROW_TIED_ONLY;
    if (c->position_embedding_type == POSITION_LEARNED_ABSOLUTE) held |= ROW_LEARNED_POSITIONS;
    if (c->position_embedding_type == POSITION_RELATIVE) held |= ROW_RELATIVE_POSITIONS;
    held |= c->rmsnorm ? ROW_RMSNORM : ROW_LAYERNORM;
    if (!c->disable_bias_linear) held |= ROW_LINEAR_BIAS;
    if (!c->disable_bias_linear || c->add_qkv_bias) held |= ROW_QKV_BIAS;
    if (c->moe_shared_expert_intermediate_size > 0) held |= ROW_SHARED_EXPERT;
    if (c->moe_shared_expert_intermediate_size > 0 && c->moe_shared_expert_gate) held |= ROW_SHARED_GATE;
    if (c->bert) held |= ROW_BERT;
    int task = c->bert && c->bert_task_outputs > 0;
    if (c->bert && (c->bert_binary_head || task)) held |= ROW_BERT_BINARY;  /* tasks: tokentypes and pooler */
    if (c->bert && !task) held |= ROW_BERT_PRETRAIN;
    if (task) held |= c->bert_task_choices > 1 ? ROW_BERT_MULTICHOICE : ROW_BERT_CLASSIFY;
    if (c->t5) held |= ROW_T5;
    if (c->t5 && row->part == PART_LAYER && layer >= c->t5_encoder_layers) held |= ROW_T5_DECODER;
    return (row->presence & ~held) == 0;
}

int parameter_table_part_count(const parameter_table *t, model_part part, const gpt_config *c, int layer) {
    int count = 0;
    for (int r = 0; r < t->count; r++)
        if (t->rows[r].part == part && parameter_row_present(&t->rows[r], c, layer))
            count += t->rows[r].per_expert ? c->num_experts : 1;
    return count;
}

/* "<prefix>.<layer>.<name>" for layer rows, the name itself for the others; a per-expert row's
 * name holds the expert's index */
static void full_name(char *out, size_t size, const parameter_row *row, const char *layer_prefix,
                      const char *name, int layer, int expert) {
    char own[64];  /* a row's own name (Megatron's are at most 60 characters) */
    if (row->per_expert) snprintf(own, sizeof own, name, expert);
    else snprintf(own, sizeof own, "%s", name);
    if (row->part == PART_LAYER) snprintf(out, size, "%s.%d.%s", layer_prefix, layer, own);
    else snprintf(out, size, "%s", own);
}

void parameter_row_name(const parameter_table *t, const parameter_row *row, int layer, int expert, char *out,
                        size_t size) {
    full_name(out, size, row, t->layer_prefix, row->name, layer, expert);
}

void parameter_row_hf_name(const parameter_table *t, const parameter_row *row, int layer, char *out, size_t size) {
    full_name(out, size, row, t->hf_layer_prefix, row->hf_name, layer, 0);
}

/* T5's layer names: the first t5_encoder_layers are Megatron-Core's encoder.layers.N, the others
 * decoder.layers.(N - encoder layers) */
static void t5_layer_name(const parameter_table *t, const parameter_row *row, const gpt_config *c, int layer,
                          char *out, size_t size) {
    int decoder = layer >= c->t5_encoder_layers;
    full_name(out, size, row, decoder ? t->layer_prefix : "encoder.layers", row->name,
              decoder ? layer - c->t5_encoder_layers : layer, -1);
}

/* the rows of one part, each once (embedding, final) or once per layer, appended at out[count] */
static int expand_part(const parameter_table *t, const gpt_config *c, model_part part, int first_layer,
                       int layers, global_parameter *out, int count) {
    for (int layer = first_layer; layer < first_layer + layers; layer++)
        for (int r = 0; r < t->count; r++) {
            const parameter_row *row = &t->rows[r];
            if (row->part != part || !parameter_row_present(row, c, layer)) continue;
            for (int expert = 0; expert < (row->per_expert ? c->num_experts : 1); expert++, count++) {
                if (!out) continue;
                global_parameter *g = &out[count];
                parameter_row_name(t, row, layer, row->per_expert ? expert : -1, g->name, sizeof g->name);
                if (c->bert && !strncmp(g->name, "decoder.", 8)) memcpy(g->name, "encoder.", 8);
                if (c->t5 && row->part == PART_LAYER) t5_layer_name(t, row, c, layer, g->name, sizeof g->name);
                if (c->t5 && !strcmp(row->name, "output_layer.weight")) snprintf(g->name, sizeof g->name, "lm_head.%s", row->name);
                g->layer = layer;
                g->expert = row->per_expert ? expert : -1;
                g->rows = model_dim_size(row->rows, c);
                g->cols = model_dim_size(row->cols, c);
                g->row_blocks = model_dim_blocks(row->rows, c);
                g->split = row->split;
                g->init = row->init;
                g->row = row;
            }
        }
    return count;
}

int parameter_table_globals(const parameter_table *t, const gpt_config *c, global_parameter *out) {
    int count = expand_part(t, c, PART_EMBEDDING, -1, 1, out, 0);
    count = expand_part(t, c, PART_LAYER, 0, c->num_layers, out, count);
    return expand_part(t, c, PART_FINAL, c->num_layers, 1, out, count);
}

int gpt_global_parameters(const gpt_config *c, global_parameter *out) {
    return parameter_table_globals(&gpt_table, c, out);
}
