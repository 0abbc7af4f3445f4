/* gpt_model.c: this rank's part of the GPT model, forward and backward, through kernel_ops and
 * comm_ops (see gpt_model.h for the layout).
 *
 * One layer (pre-LN, as Megatron's GPT), with the tensor-parallel collectives:
 *   ln1 = gather(LN(x)); qkv = ln1 Wqkv^T + b          (column-parallel: local query groups)
 *   q, k = rope(q, k) with RoPE; a = attention(qkv); x' = x + dropout(reduce(a Wproj^T) + b)
 *   ln2 = gather(LN(x')); h = act(ln2 W1^T + b1); y = x' + dropout(reduce(h W2^T) + b2)
 * LN is LayerNorm or RMSNorm, act is GeLU or SwiGLU (fc1's local rows are [gate; up] shards),
 * biases are absent with --disable-bias-linear, and grouped-query attention splits whole query
 * groups (their query heads, key and value) over tensor-parallel ranks as Megatron-Core does.
 * gather/reduce are all-gather/reduce-scatter over the token rows with sequence parallelism, and
 * identity/all-reduce without it; in backward each becomes the other (Megatron's mappings:
 * app/parallel/tensor_parallel.h).
 * Embedding: x0 = dropout(reduce(wte_local[token] + wpe[position] on tp rank 0)); head:
 * logits_local = gather(LN(xL)) Wout_local^T and the vocab-parallel cross-entropy.
 *
 * With --tp-comm-overlap (sequence parallelism) the all-gather into a column-parallel GEMM and the
 * reduce-scatter after a row-parallel one are one-sided block copies (app/parallel/tp_overlap.h)
 * overlapped with the GEMM split by token row blocks: the norm writes its rows into this rank's
 * block of ln1/ln2, the GEMM runs on that block while the peers' blocks arrive; a row-parallel
 * GEMM makes the peers' blocks first and posts them, then its own while their partials of this
 * rank's rows arrive. The backward does the duals for the attention projection and fc2 (gather
 * of the output gradient with the input-gradient GEMM by blocks, fc2's with the activation's
 * backward; the weight gradient after) and every column-parallel linear (input-gradient GEMM by
 * blocks with the reduce-scatter, the weight gradient while the partials arrive).
 *
 * T5's encoder-decoder mode (gpt_config.t5) lives in gpt_model_t5.inc, included at the end: its
 * two stacks run these layers (the decoder's with a cross-attention block between attention and
 * MLP) on sequences of their own lengths. */
#include "app/model/gpt_model.h"
#include "app/model/bert_encoder.h"
#include "app/model/context_parallel.h"
#include "app/model/fp8_linear.h"
#include "app/model/grad_first_write.h"
#include "app/model/moe_expert_bias.h"
#include "app/model/moe_layer.h"
#include "app/model/mlp_gelu.h"
#include "app/model/relative_position.h"
#include "app/model/t5_activations.h"
#include "app/core/hash.h"
#include "app/core/error.h"
#include "app/parallel/tensor_parallel.h"
#include "app/parallel/tp_overlap.h"
#include "kernels/philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ layout and initialization */

typedef struct layout_builder {
    gpt_model *model;
    int capacity;
    int bucket_open;          /* a bucket is being filled */
    int chunk;
} layout_builder;

static void close_bucket(layout_builder *b) {
    gpt_model *m = b->model;
    if (!b->bucket_open) return;
    grad_bucket *bucket = &m->buckets[m->num_buckets - 1];
    size_t align = (size_t)m->config.bucket_alignment;
    bucket->length = m->num_elements - bucket->start;
    bucket->length = (bucket->length + align - 1) / align * align;
    m->num_elements = bucket->start + bucket->length;
    b->bucket_open = 0;
}

/* append this rank's shard of a global parameter to the layout */
static void add_param(layout_builder *b, const global_parameter *g) {
    gpt_model *m = b->model;
    const gpt_config *c = &m->config;
    if (m->num_params == b->capacity) {
        b->capacity = b->capacity ? 2 * b->capacity : 64;
        m->params = realloc(m->params, sizeof(param_tensor) * (size_t)b->capacity);
        m->buckets = realloc(m->buckets, sizeof(grad_bucket) * (size_t)b->capacity);
        CHECK(m->params && m->buckets, "out of host memory for the parameter list");
    }
    param_tensor *p = &m->params[m->num_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", g->name);
    p->rows = g->rows;
    p->cols = g->cols;
    p->split = g->split;
    p->row_blocks = p->split == SHARD_ROWS && g->row_blocks > 1 ? g->row_blocks : 1;
    /* an expert is split over the expert tensor-parallel ranks (Megatron's
     * --expert-tensor-parallel-size; 1: whole on every rank, held by no tensor-parallel peer) */
    int split_size = c->tp_size, split_rank = c->tp_rank;
    if (g->expert >= 0 && c->etp_size > 0) split_size = c->etp_size, split_rank = c->etp_rank;
    p->local_rows = p->split == SHARD_ROWS ? p->rows / split_size : p->rows;
    p->local_cols = p->split == SHARD_COLS ? p->cols / split_size : p->cols;
    p->shard_start = p->split == SHARD_ROWS ? split_rank * (p->local_rows / p->row_blocks)
                   : p->split == SHARD_COLS ? split_rank * p->local_cols : 0;
    p->numel = (size_t)p->local_rows * (size_t)(p->cols ? p->local_cols : 1);
    p->no_weight_decay = g->row->no_weight_decay;
    p->tp_replicated = p->split == SHARD_NONE;
    p->sequence_parallel_grad = c->sequence_parallel && g->row->sequence_parallel_grad;
    p->chunk = b->chunk;
    p->layer = g->layer;
    p->expert = g->expert;
    p->row = g->row;

    size_t bucket_used = b->bucket_open ? m->num_elements - m->buckets[m->num_buckets - 1].start : 0;
    if (b->bucket_open && bucket_used + p->numel > (size_t)c->bucket_size) close_bucket(b);
    /* expert and other parameters reduce over different groups: never in one bucket */
    if (b->bucket_open && m->buckets[m->num_buckets - 1].expert != (p->expert >= 0)) close_bucket(b);
    if (!b->bucket_open) {
        grad_bucket *bucket = &m->buckets[m->num_buckets++];
        bucket->start = m->num_elements;
        bucket->first_param = m->num_params;
        bucket->num_params = 0;
        bucket->expert = p->expert >= 0;
        b->bucket_open = 1;
    }
    m->buckets[m->num_buckets - 1].num_params++;
    p->bucket = m->num_buckets - 1;
    p->offset = m->num_elements;
    m->num_elements += p->numel;
    m->num_parameters += p->numel;
    m->num_params++;
}

/* Megatron's interleaved assignment: chunk k of stage s holds layers
 * [k*L/vp + s*L/(vp*pp), +L/(vp*pp)); the embedding sits on chunk 0 of stage 0, the output
 * layer on the last chunk of the last stage. */
static void plan_chunks(gpt_model *m) {
    const gpt_config *c = &m->config;
    int per_chunk = c->num_layers / (c->virtual_stages * c->pp_size);
    m->num_chunks = c->virtual_stages;
    m->chunks = calloc((size_t)m->num_chunks, sizeof(model_chunk));
    CHECK(m->chunks, "out of host memory for model chunks");
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        ch->first_layer = k * (c->num_layers / c->virtual_stages) + c->pp_rank * per_chunk;
        ch->num_layers = per_chunk;
        ch->pre_process = k == 0 && c->pp_rank == 0;
        ch->post_process = k == m->num_chunks - 1 && c->pp_rank == c->pp_size - 1;
        /* Megatron's TransformerBlock._checkpointed_forward over the chunk's layers (T5: over
         * each stack's, one TransformerBlock each, pipeline parallelism refused): uniform
         * checkpoints every layer in groups of N (the last group may be shorter), block the
         * first N layers one by one and stores the rest whole */
        for (int stack = 0; stack < (c->t5 ? 2 : 1); stack++) {
            int layers = !c->t5 ? per_chunk : stack ? c->num_layers - c->t5_encoder_layers : c->t5_encoder_layers;
            int n = c->recompute_num_layers > 0 ? c->recompute_num_layers : 1;
            if (n > layers) n = layers;
            if (c->recompute_method == RECOMPUTE_METHOD_UNIFORM) {
                ch->recomputed_layers[stack] = layers;
                ch->recompute_group[stack] = n;
            } else if (c->recompute_method == RECOMPUTE_METHOD_BLOCK) {
                ch->recomputed_layers[stack] = n;
                ch->recompute_group[stack] = 1;
            }
        }
    }
}

/* 1 when the chunk holds the global parameter: the embedding on the first stage's first chunk,
 * the final part on the last stage's last chunk, a layer on the chunk it is assigned to */
static int chunk_holds(const model_chunk *ch, const global_parameter *g) {
    switch (g->row->part) {
    case PART_EMBEDDING: return ch->pre_process;
    case PART_FINAL: return ch->post_process;
    case PART_LAYER: return g->layer >= ch->first_layer && g->layer < ch->first_layer + ch->num_layers;
    }
    return 0;
}

/* 1 when this rank holds the global parameter's expert (expert parallelism), or it is no expert */
static int expert_held(const gpt_config *c, const global_parameter *g) {
    if (g->expert < 0 || c->ep_size <= 1) return 1;
    int per_rank = c->num_experts / c->ep_size;
    return g->expert / per_rank == c->ep_rank;
}

/* this rank's parameter list: for each chunk, the global parameters it holds, in global
 * order, sharded over tensor-parallel ranks; the last stage adds its tied-embedding copy */
static void build_layout(gpt_model *m) {
    const gpt_config *c = &m->config;
    const parameter_table *table = gpt_parameter_table();
    int total = parameter_table_globals(table, c, NULL);
    global_parameter *globals = malloc(sizeof(global_parameter) * (size_t)total);
    CHECK(globals, "out of host memory for the parameter list");
    parameter_table_globals(table, c, globals);
    const global_parameter *tied_source = NULL;
    for (int i = 0; i < total; i++)
        if (globals[i].row == &table->rows[table->tied_output_row]) tied_source = &globals[i];
    layout_builder b = {m, 0, 0, 0};
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        b.chunk = k;
        ch->first_param = m->num_params;
        for (int i = 0; i < total; i++)
            if (chunk_holds(ch, &globals[i]) && expert_held(c, &globals[i])) add_param(&b, &globals[i]);
        if (ch->post_process && !ch->pre_process && !c->untie_embeddings_and_output_weights) {
            /* the last stage's copy of the tied embeddings: same name, hence same values */
            add_param(&b, tied_source);
            m->params[m->num_params - 1].embedding_copy = 1;
        }
        ch->num_params = m->num_params - ch->first_param;
        close_bucket(&b); /* buckets do not cross chunks */
        /* where each layer's tensors start (the parameter list is in layer order) */
        ch->layer_first_param = malloc(sizeof(int) * (size_t)(ch->num_layers + 1));
        CHECK(ch->layer_first_param, "out of host memory for the layer table");
        int i = ch->first_param;
        while (i < ch->first_param + ch->num_params && m->params[i].row->part == PART_EMBEDDING) i++;
        for (int l = 0; l <= ch->num_layers; l++) {
            while (i < ch->first_param + ch->num_params && m->params[i].row->part == PART_LAYER &&
                   m->params[i].layer < ch->first_layer + l)
                i++;
            ch->layer_first_param[l] = i;
        }
    }
    free(globals);
}

/* where the shard's elements sit in the global tensor (kernels/kernels.h: shard_global_index) */
shard_map param_shard_map(const param_tensor *p) {
    shard_map map = {
        .cols = p->cols, .local_cols = p->local_cols,
        .rows_held = p->row_blocks > 0 ? p->local_rows / p->row_blocks : p->local_rows,
        .rows_per_block = p->row_blocks > 0 ? p->rows / p->row_blocks : p->rows,
        .shard_start = p->shard_start,
        .split_rows = p->split == SHARD_ROWS, .split_cols = p->split == SHARD_COLS,
    };
    return map;
}

uint64_t param_global_index(const param_tensor *p, size_t e) {
    shard_map map = param_shard_map(p);
    return shard_global_index(&map, e);
}

/* element i of every global parameter comes from philox(seed, stream(name), i) */
void gpt_param_initialize(const gpt_model *m, int param, size_t lo, size_t hi, void *dst, int fp32_dst) {
    const gpt_config *c = &m->config;
    const param_tensor *p = &m->params[param];
    /* T5: Megatron's decoder config is a copy of the encoder's, num_layers the encoder's */
    float scaled_std = c->init_method_std / sqrtf(2.0f * (float)(c->t5 ? c->t5_encoder_layers : c->num_layers));
    switch (p->row->init) {
    case INIT_NORMAL:
    case INIT_SCALED_NORMAL:
        m->ops->init_normal(dst, fp32_dst, param_shard_map(p), c->seed, philox_stream_of_name(p->name),
                            p->row->init == INIT_SCALED_NORMAL ? scaled_std : c->init_method_std, lo, hi - lo);
        break;
    case INIT_ONES: m->ops->fill(dst, fp32_dst, c->apply_layernorm_1p ? 0.0f : 1.0f, hi - lo); break; /* stored as w - 1 */
    case INIT_ZEROS: m->ops->fill(dst, fp32_dst, 0.0f, hi - lo); break;
    }
}

/* the parameters in the compute dtype (bf16-rounded on CUDA; the fp32 masters of the optimizer
 * start from the same values), computed by the backend where they live */
static void initialize_parameters(gpt_model *m) {
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        gpt_param_initialize(m, i, 0, p->numel, act_at(m->ops, m->param_buffer, p->offset), 0);
    }
}

/* point a chunk's model_view at a flat buffer: each parameter binds the view field its table
 * row names (in the layer_view of its layer for layer rows); the last stage's tied-embedding copy
 * binds the output layer, and a single stage's tied output layer is its word embeddings */
static void bind_view(model_view *v, const gpt_model *m, const model_chunk *ch, void *buffer,
                      size_t element_bytes) {
    char *base = buffer;
    v->layers = calloc((size_t)ch->num_layers, sizeof(layer_view));
    CHECK(v->layers, "out of host memory for layer views");
    for (int i = ch->first_param; i < ch->first_param + ch->num_params; i++) {
        const param_tensor *p = &m->params[i];
        char *view = p->row->part == PART_LAYER ? (char *)&v->layers[p->layer - ch->first_layer] : (char *)v;
        size_t field = p->embedding_copy ? offsetof(model_view, output_layer) : p->row->view_offset;
        void *at = base + element_bytes * p->offset;
        if (p->row->per_expert) {  /* an entry of the layer's array of experts */
            void ***experts = (void ***)(view + field);
            if (!*experts) *experts = calloc((size_t)m->config.num_experts, sizeof(void *));
            CHECK(*experts, "out of host memory for the expert views");
            (*experts)[p->expert] = at;
        } else {
            *(void **)(view + field) = at;
        }
    }
    if (ch->post_process && !v->output_layer) v->output_layer = v->word_embeddings;
}

/* ------------------------------------------------------------------ activations */

static float *alloc_floats(const kernel_ops *ops, size_t n) { return ops->alloc(sizeof(float) * n); }
static void *alloc_acts(const kernel_ops *ops, size_t n) { return ops->alloc(ops->act_bytes * n); }

/* --tp-comm-overlap is in effect (it needs sequence parallelism and more than one rank); for the
 * all-gathers (ag) and reduce-scatters (rs) unless --disable-tp-comm-overlap-ag/-rs */
static int overlapped(const gpt_model *m) {
    return m->config.tp_comm_overlap && m->config.sequence_parallel && m->config.tp_size > 1;
}
static int overlapped_ag(const gpt_model *m) { return overlapped(m) && !m->config.tp_comm_overlap_disable_ag; }
static int overlapped_rs(const gpt_model *m) { return overlapped(m) && !m->config.tp_comm_overlap_disable_rs; }

/* A block reduce-scatter rewrites its partials buffer before it waits for anything, so it must
 * not follow another on the same buffer directly: the peers' copies of the previous partials are
 * known to be done only once this rank has waited on a later post of theirs (the rule of
 * app/parallel/comm_window_cuda.c). Layers alternate gathers and reduce-scatters; the one place
 * two reduce-scatters meet is a stage's back-to-back backward passes under pipeline parallelism
 * (the first layer's qkv, then the output layer's of the next micro-batch). Such a second one runs
 * as an NCCL collective, which every rank reaches only after its fetches. */
static int rs_by_blocks(const gpt_model *m) { return overlapped_rs(m) && !m->tp_last_step_rs; }

/* bytes of one rank's block of token rows of a [N,cols] tensor */
static size_t row_block_bytes(const gpt_model *m, int cols) {
    return m->ops->act_bytes * (size_t)m->local_rows * (size_t)cols;
}

/* sizes every buffer below is made of */
typedef struct shapes {
    int B, T, C, H, Hl, D, HDl, Fl, V, Vl, N, n;
    int Gl;     /* local query groups */
    int QKVl;   /* local qkv rows: (Hl + 2 Gl) * D */
    int FC1l;   /* local fc1 rows: Fl, or 2 Fl with SwiGLU */
} shapes;

static shapes model_shapes(const gpt_model *m) {
    const gpt_config *c = &m->config;
    shapes s;
    s.B = c->micro_batch_size;
    s.T = c->seq_length;
    s.C = c->hidden_size;
    s.H = c->num_attention_heads;
    s.Hl = s.H / c->tp_size;
    s.D = c->kv_channels;
    s.HDl = s.Hl * s.D;
    s.Fl = c->ffn_hidden_size / c->tp_size;
    s.Gl = gpt_query_groups(c) / c->tp_size;
    s.QKVl = (s.Hl + 2 * s.Gl) * s.D;
    s.FC1l = (c->swiglu ? 2 : 1) * s.Fl;
    s.V = c->padded_vocab_size;
    s.Vl = s.V / c->tp_size;
    s.N = s.B * s.T;
    s.n = m->local_rows;
    return s;
}

/* the encoder-decoder mode's parts (gpt_model_t5.inc, included at the end) */
enum { T5_ENCODER = 0, T5_DECODER = 1 };
static void t5_use_stack(gpt_model *m, int decoder);
static void t5_use_longer_stack(gpt_model *m);
static int t5_decoder_layer(const gpt_model *m, int layer);
static const int *layer_key_valid(const gpt_model *m, const activation_slot *slot, int layer);
static void t5_state_create(gpt_model *m);
static void t5_scratch_allocate(gpt_model *m);
static void t5_state_free(gpt_model *m);
static struct t5_cross_activations *t5_cross_allocate(gpt_model *m, int own_workspace);
static void t5_cross_release(gpt_model *m, struct t5_cross_activations *x, int own_workspace);
static void t5_cross_workspace_allocate(gpt_model *m);
static void t5_slot_allocate(gpt_model *m, activation_slot *slot);
static void t5_slot_free(gpt_model *m, activation_slot *slot);
static void t5_cross_forward(gpt_model *m, const activation_slot *slot, struct t5_cross_activations *x,
                             const layer_view *lw, const void *x1, int layer, micro_batch_rng rng);
static void t5_cross_backward(gpt_model *m, const activation_slot *slot, struct t5_cross_activations *x,
                              const layer_view *lw, const layer_view *lg, const void *x1, int layer, micro_batch_rng rng,
                              int core_again);
static double t5_chunk_forward(gpt_model *m, model_chunk *ch, activation_slot *slot, const int *tokens,
                               const int *targets, micro_batch_rng rng, float grad_scale, int with_backward);
static void t5_chunk_backward(gpt_model *m, model_chunk *ch, activation_slot *slot, micro_batch_rng rng);
static double t5_loss_tokens(const gpt_model *m, const activation_slot *slot);
static void t5_mask_rows(gpt_model *m, activation_slot *slot, int r0, int rows);
static double t5_masked_loss(gpt_model *m, activation_slot *slot);

/* 1 when some layer of the model has a dense MLP (not all layers are MoE layers) */
static int has_dense_mlp(const gpt_model *m) {
    for (int l = 0; l < m->config.num_layers; l++)
        if (!gpt_layer_is_moe(&m->config, l)) return 1;
    return 0;
}

/* whether some layer keeps linear `gemm`'s input as fp8 codes (fp8_keeps_input_codes) */
static int any_layer_keeps_codes(const gpt_model *m, fp8_gemm gemm) {
    for (int layer = 0; layer < m->config.num_layers; layer++)
        if (fp8_keeps_input_codes(m, layer, gemm)) return 1;
    return 0;
}

/* the buffers of one layer's activations except its input; the attention workspace only when
 * own_workspace (selective recompute shares one), the MLP's activation only when keep; with
 * recompute_layernorm both norm outputs are the one shared scratch.norm_out; shared_mid: the
 * buffer for the sum after the attention block when no backward reads it
 * (memory_efficient_layer_norm), NULL to give the layer its own */
static void allocate_layer(gpt_model *m, layer_activations *la, int layer, int own_workspace, int keep, void *shared_mid) {
    const kernel_ops *ops = m->ops;
    shapes s = model_shapes(m);
    size_t N = (size_t)s.N, n = (size_t)s.n, C = (size_t)s.C;
    int norms_kept = !m->config.recompute_layernorm;
    /* fp8 codes kept in place of the norms' outputs (a recompute group, layer -1, serves layers of
     * either kind: it keeps both) */
    int codes1 = layer >= 0 ? fp8_keeps_input_codes(m, layer, FP8_GEMM_QKV) : any_layer_keeps_codes(m, FP8_GEMM_QKV);
    int codes2 = layer >= 0 ? fp8_keeps_input_codes(m, layer, FP8_GEMM_FC1) : any_layer_keeps_codes(m, FP8_GEMM_FC1);
    la->ln1_codes = codes1 ? ops->alloc(N * C) : NULL;
    la->ln2_codes = codes2 ? ops->alloc(N * C) : NULL;
    la->ln1 = norms_kept && !(codes1 && layer >= 0) ? alloc_acts(ops, N * C) : m->scratch.norm_out;
    la->ln1_mean = alloc_floats(ops, n);
    la->ln1_rstd = alloc_floats(ops, n);
    la->qkv = alloc_acts(ops, N * (size_t)s.QKVl);
    la->attention_out = alloc_acts(ops, N * (size_t)s.HDl);
    la->attention_workspace = own_workspace ? ops->alloc(ops->attention_workspace_bytes(s.B, s.T, s.Hl, s.D))
                                            : m->scratch.attention_workspace;
    la->residual_mid = shared_mid ? shared_mid : alloc_acts(ops, n * C);
    la->ln2 = norms_kept && !(codes2 && layer >= 0) ? alloc_acts(ops, N * C) : m->scratch.norm_out;
    la->ln2_mean = alloc_floats(ops, n);
    la->ln2_rstd = alloc_floats(ops, n);
    la->fc1_out = has_dense_mlp(m) ? alloc_acts(ops, N * (size_t)s.FC1l) : NULL;
    la->activation = keep && has_dense_mlp(m) ? alloc_acts(ops, N * (size_t)s.Fl) : NULL;
    if (m->config.num_experts > 0) {
        if (m->config.recompute_moe && m->moe_recomputed) {
            la->moe = m->moe_recomputed;  /* written by every layer's forward, recomputed in its backward */
            return;
        }
        la->moe = calloc(1, sizeof *la->moe);
        CHECK(la->moe, "out of host memory for the MoE activations");
        int recomputed = m->config.recompute_moe || m->config.recompute_moe_act;
        moe_activations_allocate(m, la->moe, keep && !recomputed);
        if (m->config.recompute_moe) m->moe_recomputed = la->moe;
    }
}

static void release_layer(gpt_model *m, layer_activations *la, int own_workspace) {
    int own_mid = la->residual_mid != m->scratch.residual_rows[2];
    void *shared_norm = m->scratch.norm_out;
    void *buffers[] = {la->ln1 != shared_norm ? la->ln1 : NULL, la->ln1_mean, la->ln1_rstd, la->qkv, la->attention_out,
                       own_workspace ? la->attention_workspace : NULL, own_mid ? la->residual_mid : NULL,
                       la->ln2 != shared_norm ? la->ln2 : NULL, la->ln2_mean, la->ln2_rstd, la->fc1_out, la->activation,
                       la->ln1_codes, la->ln2_codes};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) if (buffers[i]) m->ops->release(buffers[i]);
    if (la->moe && la->moe != m->moe_recomputed) {
        moe_activations_release(m, la->moe);
        free(la->moe);
    }
}

/* the recompute stack of layer l of the chunk (T5's decoder layers: 1, every other layer: 0)
 * and the layer's index in it */
static int layer_stack(const gpt_model *m, const model_chunk *ch, int l) {
    return t5_decoder_layer(m, ch->first_layer + l);
}
static int stack_index(const gpt_model *m, const model_chunk *ch, int l) {
    return layer_stack(m, ch, l) ? ch->first_layer + l - m->config.t5_encoder_layers : l;
}

/* 1 when layer l of the chunk is recomputed (full), and then its index within its group, and
 * whether it is its group's last */
static int layer_recomputed(const gpt_model *m, const model_chunk *ch, int l) {
    return stack_index(m, ch, l) < ch->recomputed_layers[layer_stack(m, ch, l)];
}
static int index_in_group(const gpt_model *m, const model_chunk *ch, int l) {
    return stack_index(m, ch, l) % ch->recompute_group[layer_stack(m, ch, l)];
}
static int group_last(const gpt_model *m, const model_chunk *ch, int l) {
    int stack = layer_stack(m, ch, l);
    return layer_recomputed(m, ch, l) && (stack_index(m, ch, l) == ch->recomputed_layers[stack] - 1 ||
                                          index_in_group(m, ch, l) == ch->recompute_group[stack] - 1);
}

/* token rows per pass of the loss (gpt_config.loss_chunk_rows; automatic: the fewest equal
 * chunks of at most 2 GiB of logits: GPT-2 124M at micro-batch 32 x 1024 in 2, GPT 1.3B at
 * 8 x 2048 in one pass, where 2 chunks measured 0.6% slower,
 * perf/results/training/mlp-activation-and-loss-chunks-h100-2026-11-26.md) */
static int loss_chunk_rows(const gpt_model *m) {
    shapes s = model_shapes(m);
    int rows = m->config.loss_chunk_rows;
    if (rows <= 0) {
        double bytes = (double)s.N * s.Vl * m->ops->act_bytes, limit = 2048.0 * 1024.0 * 1024.0;
        int chunks = (int)ceil(bytes / limit);
        rows = (s.N + chunks - 1) / chunks;
    }
    return rows < s.N ? rows : s.N;
}

/* A slot keeps every activation of the layers it stores. Of a recomputed group it keeps only the
 * first layer's input: the other buffers are the model's one set of recompute buffers (per
 * stack: T5's encoder and decoder layers differ in rows and parts), which the forward
 * overwrites (micro-batch after micro-batch) and the backward refills by running the group's
 * forward again. */
static void allocate_slot(gpt_model *m, const model_chunk *ch, activation_slot *slot) {
    const kernel_ops *ops = m->ops;
    shapes s = model_shapes(m);
    size_t N = (size_t)s.N, n = (size_t)s.n, C = (size_t)s.C;
    slot->layers = calloc((size_t)ch->num_layers, sizeof(layer_activations));
    CHECK(slot->layers, "out of host memory for activation tables");
    for (int l = 0; l < ch->num_layers; l++) {
        layer_activations *la = &slot->layers[l];
        if (m->t5) t5_use_stack(m, t5_decoder_layer(m, ch->first_layer + l));  /* its stack's rows */
        if (layer_recomputed(m, ch, l)) {  /* its stack's set (T5's decoder set: with the cross-attention's) */
            *la = m->scratch.recompute_layers[layer_stack(m, ch, l)][index_in_group(m, ch, l)];
            if (index_in_group(m, ch, l) == 0) la->input = alloc_acts(ops, n * C);
            continue;
        }
        /* with the memory-efficient norms a stored layer's input and middle sum are read by the
         * forward only: the shared rows, in turn (the chunk's first input stays the slot's own:
         * the pipeline receives into it) */
        void **shared = m->config.memory_efficient_layer_norm ? m->scratch.residual_rows : NULL;
        la->input = shared && l > 0 ? shared[l % 2] : alloc_acts(ops, n * C);
        allocate_layer(m, la, ch->first_layer + l, !m->config.recompute_selective,
                       l < m->config.keep_mlp_activation_layers, shared ? shared[2] : NULL);
        if (t5_decoder_layer(m, ch->first_layer + l)) la->cross = t5_cross_allocate(m, !m->config.recompute_selective);
    }
    if (m->t5) {  /* the encoder's tokens and padding mask; the decoder's output and loss */
        t5_slot_allocate(m, slot);
        slot->tokens = ops->alloc(sizeof(int) * N);
        slot->key_valid = ops->alloc(sizeof(int) * N);
        t5_use_stack(m, T5_DECODER);
        s = model_shapes(m);
        N = (size_t)s.N;
        n = (size_t)s.n;
    } else if (ch->pre_process) {
        slot->tokens = ops->alloc(sizeof(int) * N);
    }
    slot->output = alloc_acts(ops, n * C);
    if (m->config.bert) {
        slot->key_valid = ops->alloc(sizeof(int) * N);
        if (ch->pre_process) slot->types = ops->alloc(sizeof(int) * N);
    }
    if (ch->post_process && m->config.bert) {  /* BERT's heads make their own logits (bert_heads.c) */
        slot->lnf = alloc_acts(ops, N * C);
        slot->lnf_mean = alloc_floats(ops, n);
        slot->lnf_rstd = alloc_floats(ops, n);
        slot->d_lnf = alloc_acts(ops, N * C);
    } else if (ch->post_process) {
        slot->targets = ops->alloc(sizeof(int) * N);
        slot->lnf = alloc_acts(ops, N * C);
        slot->lnf_mean = alloc_floats(ops, n);
        slot->lnf_rstd = alloc_floats(ops, n);
        size_t rows = (size_t)loss_chunk_rows(m);
        slot->logits = alloc_acts(ops, rows * (size_t)s.Vl);
        slot->d_lnf = rows < N ? alloc_acts(ops, N * C) : NULL;
        slot->losses = alloc_floats(ops, N);
        slot->row_max = alloc_floats(ops, N);
        slot->sum_exp_and_target = alloc_floats(ops, 2 * N);
    }
    if (m->t5) t5_use_stack(m, T5_ENCODER);
}

static void free_slot(gpt_model *m, const model_chunk *ch, activation_slot *slot) {
    const kernel_ops *ops = m->ops;
    for (int l = 0; l < ch->num_layers; l++) {
        layer_activations *la = &slot->layers[l];
        if (layer_recomputed(m, ch, l)) {
            if (index_in_group(m, ch, l) == 0) ops->release(la->input);
            continue;
        }
        if (l == 0 || !m->config.memory_efficient_layer_norm) ops->release(la->input);
        release_layer(m, la, !m->config.recompute_selective);
        t5_cross_release(m, la->cross, !m->config.recompute_selective);
    }
    void *buffers[] = {slot->output, slot->tokens, slot->targets, slot->lnf, slot->lnf_mean,
                       slot->lnf_rstd, slot->logits, slot->d_lnf, slot->losses, slot->row_max,
                       slot->sum_exp_and_target, slot->key_valid, slot->types};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) if (buffers[i]) ops->release(buffers[i]);
    if (slot->bert.text) bert_batch_free(ops, &slot->bert);
    t5_slot_free(m, slot);
    free(slot->layers);
}

static void allocate_scratch(gpt_model *m) {
    const kernel_ops *ops = m->ops;
    shapes s = model_shapes(m);
    size_t N = (size_t)s.N, n = (size_t)s.n, C = (size_t)s.C;
    backward_scratch *b = &m->scratch;
    b->d_residual = alloc_acts(ops, n * C);
    b->d_hidden = alloc_acts(ops, n * C);
    b->d_full = alloc_acts(ops, N * C);
    b->d_attention = alloc_acts(ops, N * (size_t)s.HDl);
    b->d_qkv = alloc_acts(ops, N * (size_t)s.QKVl);
    int keep_all = 1; /* every layer keeps its MLP activation: no layer needs the scratch */
    for (int k = 0; k < m->num_chunks; k++)
        if (m->chunks[k].num_layers > m->config.keep_mlp_activation_layers) keep_all = 0;
    /* --tp-comm-overlap's fc2 backward by row blocks writes fc2's input gradient beside a kept
     * activation (which the weight gradient reads afterwards), so it needs both */
    if (overlapped_ag(m)) keep_all = 0;
    b->d_ffn_a = keep_all ? NULL : alloc_acts(ops, N * (size_t)s.Fl);
    b->d_ffn_b = keep_all && !m->config.swiglu ? NULL : alloc_acts(ops, N * (size_t)s.FC1l);
    b->forward_full = alloc_acts(ops, N * C);
    b->forward_rows = alloc_acts(ops, n * C);
    if (m->config.apply_layernorm_1p) {
        float *ones = malloc(sizeof(float) * C);
        CHECK(ones, "out of host memory");
        for (size_t i = 0; i < C; i++) ones[i] = 1.0f;
        b->norm_ones = alloc_acts(ops, C);
        b->norm_weight = alloc_acts(ops, C);
        ops->copy_from_host_float(b->norm_ones, ones, C);
        free(ones);
    }
    m->host_losses = malloc(sizeof(float) * N);
    CHECK(m->host_losses, "out of host memory for losses");
}

/* the bytes of the attention workspace of either stack (T5), or the model's */
static size_t attention_workspace_largest(gpt_model *m) {
    size_t most = 0;
    for (int stack = 0; stack < (m->t5 ? 2 : 1); stack++) {
        if (m->t5) t5_use_stack(m, stack);
        shapes s = model_shapes(m);
        size_t bytes = m->ops->attention_workspace_bytes(s.B, s.T, s.Hl, s.D);
        if (bytes > most) most = bytes;
    }
    if (m->t5) t5_use_stack(m, T5_ENCODER);
    return most;
}

/* the buffers recomputation shares, before the slots that point into them: one group of layer
 * activations per stack (inputs of all but its first layer included; T5's decoder group with
 * its cross-attention's), with selective recompute the attention workspace (and T5's
 * cross-attention's), with recompute_layernorm the norms' output; and with
 * memory_efficient_layer_norm the residual rows the stored layers' forward shares */
static void allocate_recompute_scratch(gpt_model *m) {
    backward_scratch *b = &m->scratch;
    if (m->config.recompute_selective) {
        b->attention_workspace = m->ops->alloc(attention_workspace_largest(m));
        t5_cross_workspace_allocate(m);
    }
    t5_use_longer_stack(m);
    shapes s = model_shapes(m);
    if (m->config.recompute_layernorm || any_layer_keeps_codes(m, FP8_GEMM_QKV) || any_layer_keeps_codes(m, FP8_GEMM_FC1))
        b->norm_out = alloc_acts(m->ops, (size_t)s.N * s.C);
    if (m->config.memory_efficient_layer_norm)
        for (int k = 0; k < 3; k++) b->residual_rows[k] = alloc_acts(m->ops, (size_t)s.n * s.C);
    for (int stack = 0; stack < 2; stack++) {
        for (int k = 0; k < m->num_chunks; k++)
            if (m->chunks[k].recomputed_layers[stack] > 0 && m->chunks[k].recompute_group[stack] > b->num_recompute_layers[stack])
                b->num_recompute_layers[stack] = m->chunks[k].recompute_group[stack];
        if (b->num_recompute_layers[stack] == 0) continue;
        if (m->t5) t5_use_stack(m, stack);
        s = model_shapes(m);
        b->recompute_layers[stack] = calloc((size_t)b->num_recompute_layers[stack], sizeof(layer_activations));
        CHECK(b->recompute_layers[stack], "out of host memory for the recompute buffers");
        for (int j = 0; j < b->num_recompute_layers[stack]; j++) {
            layer_activations *la = &b->recompute_layers[stack][j];
            if (j > 0) la->input = alloc_acts(m->ops, (size_t)s.n * s.C);
            allocate_layer(m, la, -1, 1, m->config.keep_mlp_activation_layers > 0, NULL);
            if (stack == T5_DECODER && m->t5) la->cross = t5_cross_allocate(m, 1);
        }
    }
    if (m->t5) t5_use_stack(m, T5_ENCODER);
}

static void free_recompute_scratch(gpt_model *m) {
    backward_scratch *b = &m->scratch;
    for (int stack = 0; stack < 2; stack++) {
        for (int j = 0; j < b->num_recompute_layers[stack]; j++) {
            if (j > 0) m->ops->release(b->recompute_layers[stack][j].input);
            release_layer(m, &b->recompute_layers[stack][j], 1);
            t5_cross_release(m, b->recompute_layers[stack][j].cross, 1);
        }
        free(b->recompute_layers[stack]);
    }
    if (b->attention_workspace) m->ops->release(b->attention_workspace);
    if (b->norm_out) m->ops->release(b->norm_out);
    for (int k = 0; k < 3; k++)
        if (b->residual_rows[k]) m->ops->release(b->residual_rows[k]);
}

/* --tp-comm-overlap: every buffer a fetch reads or writes is registered with the tensor-parallel
 * group's windows, once, in the same order on every rank (the same sizes: symmetric) */
static void register_windows(gpt_model *m) {
    if (!overlapped(m)) return;
    shapes s = model_shapes(m);
    backward_scratch *b = &m->scratch;
    size_t full = m->ops->act_bytes * (size_t)s.N * s.C, rows = row_block_bytes(m, s.C);
    const comm_group *g = m->tp_group;
    m->tp_requests = calloc((size_t)m->config.tp_size, sizeof(comm_request));
    CHECK(m->tp_requests, "out of host memory");
    b->tp_received = alloc_acts(m->ops, (size_t)s.N * s.C);
    m->comm->window_register(b->forward_full, full, g);
    m->comm->window_register(b->tp_received, full, g);
    m->comm->window_register(b->d_full, full, g);
    m->comm->window_register(b->d_hidden, rows, g);
    m->comm->window_register(b->d_residual, rows, g);
    for (int j = 0; j < b->num_recompute_layers[0]; j++) {  /* (not T5, which refuses --tp-comm-overlap) */
        m->comm->window_register(b->recompute_layers[0][j].ln1, full, g);
        m->comm->window_register(b->recompute_layers[0][j].ln2, full, g);
    }
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        for (int slot = 0; slot < m->config.activation_slots; slot++) {
            activation_slot *sl = &ch->slots[slot];
            for (int l = 0; l < ch->num_layers; l++) {
                m->comm->window_register(sl->layers[l].ln1, full, g);
                m->comm->window_register(sl->layers[l].ln2, full, g);
            }
            if (ch->post_process) m->comm->window_register(sl->lnf, full, g);
        }
    }
}

static void plan_row_runs(gpt_model *m);

void gpt_model_create(gpt_model *m, const gpt_config *config, const kernel_ops *ops,
                      const comm_ops *comm, const comm_group *tp_group) {
    memset(m, 0, sizeof(*m));
    m->config = *config;
    if (m->config.activation_slots < 1) m->config.activation_slots = 1;
    if (m->config.bucket_alignment < 1) m->config.bucket_alignment = 1;
    if (m->config.bucket_size < 1) m->config.bucket_size = INT64_MAX;
    if (m->config.virtual_stages < 1) m->config.virtual_stages = 1;
    if (m->config.tp_size < 1) m->config.tp_size = 1;
    if (m->config.pp_size < 1) m->config.pp_size = 1;
    if (m->config.cp_size < 1) m->config.cp_size = 1;
    m->ops = ops;
    m->comm = comm;
    m->tp_group = tp_group;
    if (m->config.position_embedding_type == POSITION_RELATIVE && !m->config.t5)
        user_error("--position-embedding-type relative is T5's relative position bias (pretrain_t5, Megatron-Core's "
                   "T5Model); %s has none: use learned_absolute, rope or none", m->config.bert ? "BERT" : "GPT");
    CHECK(!(m->config.memory_efficient_layer_norm && m->config.recompute_layernorm),
          "the memory-efficient norms' backward needs the norms' outputs, which recompute_layernorm does not keep");
    if (m->config.window_size_given && m->config.window_left >= 0 && !ops->attention_window)
        user_error("--window-size: the %s backend's attention kernels have no sliding window yet; run on the CPU "
                   "backend (--device cpu)", ops->name);
    int N = config->micro_batch_size * config->seq_length;
    m->local_rows = m->config.sequence_parallel ? N / m->config.tp_size : N;
    if (m->config.t5) t5_state_create(m);  /* the two stacks' rows */
    else plan_row_runs(m);
    plan_chunks(m);
    build_layout(m);
    m->mixed_precision = ops->act_bytes != sizeof(float);
    m->act_dtype = ops->act_dtype == KERNEL_FP16 ? COMM_FP16 : ops->act_dtype == KERNEL_BF16 ? COMM_BF16 : COMM_FLOAT;
    m->param_buffer = alloc_acts(ops, m->num_elements);
    m->grad_buffer = alloc_floats(ops, m->num_elements);
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        bind_view(&ch->weights, m, ch, m->param_buffer, ops->act_bytes);
        bind_view(&ch->grads, m, ch, m->grad_buffer, sizeof(float));
    }
    allocate_recompute_scratch(m);
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        ch->slots = calloc((size_t)m->config.activation_slots, sizeof(activation_slot));
        CHECK(ch->slots, "out of host memory for activation slots");
        for (int s = 0; s < m->config.activation_slots; s++) allocate_slot(m, ch, &ch->slots[s]);
    }
    initialize_parameters(m);
    t5_use_longer_stack(m);  /* T5: the scratch holds either stack's rows */
    allocate_scratch(m);
    if (m->t5) {
        t5_scratch_allocate(m);
        t5_use_stack(m, T5_ENCODER);
    }
    if (m->config.num_experts > 0) {
        if (!ops->moe_route_forward)
            user_error("--num-experts: mixture of experts runs on the CPU backend for now (--device cpu); its %s kernels are not built yet",
                       ops->name);
        moe_scratch_allocate(m);
        moe_expert_bias_allocate(m);
    }
    if (m->config.gelu_erf && !m->config.swiglu && (!ops->gelu_erf_forward || !ops->gelu_erf_backward))
        user_error("the MLP's exact GeLU (--no-bias-gelu-fusion or --disable-bias-linear) needs the erf GeLU kernels, "
                   "which the %s backend lacks", ops->name);
    if (m->config.bert) {
        if (!ops->attention_padded_forward || !ops->gelu_erf_forward || !ops->tanh_forward)
            user_error("BERT needs the kernels of its padded bidirectional attention and heads, which the %s "
                       "backend lacks", ops->name);
        if (m->config.cp_size > 1 || m->config.num_experts > 0)
            user_error("BERT with %s is not supported: its encoder runs without context parallelism and "
                       "mixture of experts", m->config.cp_size > 1 ? "context parallelism" : "--num-experts");
    }
    fp8_state_allocate(m);
    context_parallel_scratch_allocate(m);
    register_windows(m);
    grad_first_write_setup(m);
}

void gpt_model_free(gpt_model *m) {
    const kernel_ops *ops = m->ops;
    if (m->config.bert) bert_heads_workspace_release();
    for (int k = 0; k < m->num_chunks; k++) {
        model_chunk *ch = &m->chunks[k];
        for (int s = 0; s < m->config.activation_slots; s++) free_slot(m, ch, &ch->slots[s]);
        free(ch->slots);
        for (int l = 0; l < ch->num_layers; l++) {
            free(ch->weights.layers[l].expert_fc1_weight);
            free(ch->weights.layers[l].expert_fc2_weight);
            free(ch->grads.layers[l].expert_fc1_weight);
            free(ch->grads.layers[l].expert_fc2_weight);
        }
        free(ch->weights.layers);
        free(ch->grads.layers);
        free(ch->layer_first_param);
    }
    free_recompute_scratch(m);
    if (m->moe_recomputed) {
        moe_activations_release(m, m->moe_recomputed);
        free(m->moe_recomputed);
        m->moe_recomputed = NULL;
    }
    moe_scratch_release(m);
    moe_expert_bias_release(m);
    fp8_state_release(m);
    backward_scratch *b = &m->scratch;
    void *buffers[] = {b->d_residual, b->d_hidden, b->d_full, b->d_attention, b->d_qkv, b->d_ffn_a,
                       b->d_ffn_b, b->forward_full, b->forward_rows, m->param_buffer, m->grad_buffer,
                       b->tp_received};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) if (buffers[i]) ops->release(buffers[i]);
    if (b->norm_ones) ops->release(b->norm_ones);
    if (b->norm_weight) ops->release(b->norm_weight);
    free(m->chunks);
    free(m->params);
    free(m->buckets);
    free(m->host_losses);
    free(m->tp_requests);
    t5_state_free(m);
    free(m->row_runs);
    context_parallel_scratch_release(m);
    grad_first_write_free(m);
    memset(m, 0, sizeof(*m));
}

void *gpt_chunk_input(gpt_model *m, int chunk, int slot) { return m->chunks[chunk].slots[slot].layers[0].input; }
void *gpt_chunk_output(gpt_model *m, int chunk, int slot) { return m->chunks[chunk].slots[slot].output; }
void *gpt_grad_buffer(gpt_model *m) { return m->scratch.d_residual; }

/* ------------------------------------------------------------------ tensor-parallel regions */

/* The residual stream is this rank's token rows (all N rows without sequence parallelism). A
 * column-parallel matmul enters the tensor-parallel region from it, and a row-parallel one
 * leaves the region back to it, through the mappings of app/parallel/tensor_parallel.h. */

static tensor_parallel_comm tensor_parallel_of(const gpt_model *m) {
    tensor_parallel_comm tp = {m->comm, m->tp_group, m->ops};
    return tp;
}

/* the weight a norm multiplies by: its parameter, or 1 + the parameter with
 * --apply-layernorm-1p (Megatron-Core's zero-centered gamma; the gradient of the stored w - 1 is
 * that of the effective weight, so the backward takes the same 1 + w) */
static const void *norm_weight(gpt_model *m, const void *weight) {
    if (!m->config.apply_layernorm_1p) return weight;
    m->ops->add(m->scratch.norm_weight, weight, m->scratch.norm_ones, (size_t)m->config.hidden_size);
    return m->scratch.norm_weight;
}

/* the norm of this rank's rows into out [n,C] */
static void normalize(gpt_model *m, void *out, float *mean, float *rstd, const void *x, const void *weight,
                      const void *bias) {
    const gpt_config *c = &m->config;
    shapes s = model_shapes(m);
    weight = norm_weight(m, weight);
    if (c->rmsnorm) m->ops->rmsnorm_forward(out, rstd, x, weight, s.n, s.C, c->layernorm_epsilon);
    else m->ops->layernorm_forward(out, mean, rstd, x, weight, bias, s.n, s.C, c->layernorm_epsilon);
}

/* tp_gather_start, remembering that the last step was a gather */
static void window_gather_start(gpt_model *m, void *full, const void *own, size_t block_bytes) {
    tensor_parallel_comm tp = tensor_parallel_of(m);
    m->tp_last_step_rs = 0;
    tp_gather_start(&tp, full, own, block_bytes, m->tp_requests);
}

/* this rank's rows of a norm's output made whole for a column-parallel matmul: its block with
 * sequence parallelism, otherwise all of it */
static void *own_norm_rows(const gpt_model *m, const void *full_out) {
    size_t offset = m->config.sequence_parallel ? (size_t)m->config.tp_rank * row_block_bytes(m, m->config.hidden_size) : 0;
    return (char *)full_out + offset;
}

/* norm_and_gather with --tp-comm-overlap: the rows go straight into this rank's block of
 * full_out and the all-gather is started; gathered_matmul_forward or tp_gather_finish ends it */
static void norm_and_gather_start(gpt_model *m, void *full_out, float *mean, float *rstd, const void *x,
                                  const void *weight, const void *bias) {
    void *own = own_norm_rows(m, full_out);
    normalize(m, own, mean, rstd, x, weight, bias);
    window_gather_start(m, full_out, own, row_block_bytes(m, m->config.hidden_size));
}

/* layer norm on this rank's rows, made whole for a column-parallel matmul: with sequence
 * parallelism the normalized rows are all-gathered into full_out, otherwise written there */
static void norm_and_gather(gpt_model *m, void *full_out, float *mean, float *rstd, const void *x,
                            const void *weight, const void *bias) {
    const gpt_config *c = &m->config;
    tensor_parallel_comm tp = tensor_parallel_of(m);
    shapes s = model_shapes(m);
    if (overlapped_ag(m)) {
        norm_and_gather_start(m, full_out, mean, rstd, x, weight, bias);
        tp_gather_finish(&tp, m->tp_requests);
        return;
    }
    void *normalized = c->sequence_parallel ? m->scratch.forward_rows : full_out;
    normalize(m, normalized, mean, rstd, x, weight, bias);
    if (c->sequence_parallel) gather_from_sequence_parallel_region(&tp, normalized, full_out, s.N, s.C, m->act_dtype);
    else copy_to_tensor_parallel_region(&tp, normalized);
}

/* norm_and_gather before linear `gemm` of fp8 layer `layer`: where nothing lies between the norm
 * and the fp8 GEMM (no sequence-parallel gather) and the backend has the fused norm, the norm
 * writes the linear's input codes too (fp8_input_codes); otherwise norm_and_gather */
static void fp8_norm_and_gather(gpt_model *m, int layer, fp8_gemm gemm, void *full_out, float *mean, float *rstd,
                                const void *x, const void *weight, const void *bias, uint8_t *codes) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    shapes s = model_shapes(m);
    fp8_output q;
    int fused = c->rmsnorm ? ops->rmsnorm_forward_fp8 != NULL : ops->layernorm_forward_fp8 != NULL;
    if (c->sequence_parallel || overlapped_ag(m) || s.n != s.N || !fused ||
        !fp8_input_codes(m, layer, gemm, full_out, (size_t)s.N * (size_t)s.C, &q, codes)) {
        norm_and_gather(m, full_out, mean, rstd, x, weight, bias);
        return;
    }
    weight = norm_weight(m, weight);
    if (c->rmsnorm) ops->rmsnorm_forward_fp8(full_out, rstd, x, weight, s.n, s.C, c->layernorm_epsilon, &q);
    else ops->layernorm_forward_fp8(full_out, mean, rstd, x, weight, bias, s.n, s.C, c->layernorm_epsilon, &q);
    tensor_parallel_comm tp = tensor_parallel_of(m);
    copy_to_tensor_parallel_region(&tp, full_out);
}

/* the activation of fp8 layer `layer`'s MLP, fc2's input: out [N, width] = gelu(x) (swiglu 0) or
 * swiglu(x) (x [N, 2 width]), writing fc2's input codes too where the backend has the fused op
 * (fp8_input_codes); otherwise the plain op (fc2 quantizes it) */
static void fp8_activation_forward(gpt_model *m, int layer, int swiglu, void *out, const void *x, int N, int width) {
    const kernel_ops *ops = m->ops;
    size_t n = (size_t)N * (size_t)width;
    fp8_output q;
    if (swiglu) {
        if (ops->swiglu_forward_fp8 && fp8_input_codes(m, layer, FP8_GEMM_FC2, out, n, &q, NULL))
            ops->swiglu_forward_fp8(out, x, N, width, &q);
        else ops->swiglu_forward(out, x, N, width);
        return;
    }
    /* in scratch (not kept for the backward) the GeLU writes only the codes: nothing reads its
     * bf16 values (fc2's GEMM takes the codes, the backward makes them again from fc1_out) */
    if (!m->config.gelu_erf && ops->gelu_forward_fp8 && fp8_input_codes(m, layer, FP8_GEMM_FC2, out, n, &q, NULL))
        ops->gelu_forward_fp8(out == m->scratch.d_ffn_a && fp8_activation_codes_only(m, layer) ? NULL : out, x, n, &q);
    else mlp_gelu_forward(ops, m->config.gelu_erf, out, x, n);
}

/* norm_and_gather before a column-parallel GEMM made by gathered_matmul_forward: with
 * --tp-comm-overlap only started (the GEMM waits for each block), otherwise whole */
static void norm_and_gather_for_matmul(gpt_model *m, void *full_out, float *mean, float *rstd, const void *x,
                                       const void *weight, const void *bias) {
    if (overlapped_ag(m)) norm_and_gather_start(m, full_out, mean, rstd, x, weight, bias);
    else norm_and_gather(m, full_out, mean, rstd, x, weight, bias);
}

/* the column-parallel GEMM out[N,OC] = full_in W^T + bias (gelu_out = gelu(out) when not NULL)
 * after norm_and_gather_start: by row blocks as they arrive, this rank's first (bias and GeLU
 * apply per row, so per block); whole: full_in is complete already (norm_and_gather) */
static void gathered_matmul_forward(gpt_model *m, int layer, fp8_gemm gemm, void *out, void *gelu_out,
                                    const void *full_in, const void *weight, const void *bias, int OC, int whole,
                                    uint8_t *codes) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    if (fp8_native(m, layer)) {  /* whole: the gathered rows are quantized at once (codes: kept there) */
        fp8_native_forward(m, layer, gemm, out, full_in, weight, bias, NULL, s.N, s.C, OC, codes);
        if (gelu_out) fp8_activation_forward(m, layer, 0, gelu_out, out, s.N, OC);
        return;
    }
    if (whole || !overlapped_ag(m)) {
        mlp_matmul_gelu_forward(ops, m->config.gelu_erf, out, gelu_out, full_in, weight, bias, s.N, s.C, OC);
        return;
    }
    tensor_parallel_comm tp = tensor_parallel_of(m);
    size_t n = (size_t)s.n;
    for (int i = 0; i < m->config.tp_size; i++) {
        int k = tp_gather_order(&tp, i);
        tp_gather_wait(&tp, k, m->tp_requests);
        mlp_matmul_gelu_forward(ops, m->config.gelu_erf, act_at(ops, out, k * n * OC),
                                gelu_out ? act_at(ops, gelu_out, k * n * OC) : NULL,
                                act_at(ops, (void *)full_in, k * n * s.C), weight, bias, s.n, s.C, OC);
    }
    tp_gather_finish(&tp, m->tp_requests);
}

/* backward of the norm of norm_and_gather: dx += dL/dx, parameter gradients +=, and with
 * dx_colsum (residual_bias_grad: LayerNorm only, NULL with RMSNorm) the column sums of the
 * updated dx +=. From the norm's input x, or with --memory-efficient-layer-norm from its output,
 * this rank's rows of full_out (where norm_and_gather put them) */
static void norm_backward(gpt_model *m, void *dx, float *dweight, float *dbias, float *dx_colsum, const void *dout,
                          const void *x, const void *full_out, const void *weight, const void *bias,
                          const float *mean, const float *rstd) {
    const gpt_config *c = &m->config;
    shapes s = model_shapes(m);
    weight = norm_weight(m, weight);
    if (c->memory_efficient_layer_norm) {
        const void *y = own_norm_rows(m, full_out);
        if (c->rmsnorm) m->ops->rmsnorm_backward_from_output(dx, dweight, dout, y, weight, rstd, s.n, s.C, c->layernorm_epsilon);
        else
            m->ops->layernorm_backward_from_output(dx, dweight, dbias, dx_colsum, dout, y, weight, bias, rstd, s.n, s.C,
                                                   c->layernorm_epsilon);
    } else if (c->rmsnorm) {
        m->ops->rmsnorm_backward(dx, dweight, dout, x, weight, rstd, s.n, s.C);
    } else {
        m->ops->layernorm_backward(dx, dweight, dbias, dx_colsum, dout, x, weight, mean, rstd, s.n, s.C);
    }
}

/* The bias gradient of a linear layer whose output joins the residual stream (the attention
 * projection, fc2) is the column sum of the residual-stream gradient there, when no dropout
 * stands between (hidden dropout 0). The layer norm's backward that makes that gradient then
 * sums it in its own pass (kernel_ops.layernorm_backward's dx_colsum) instead of a pass over it
 * of its own. Returns the gradient to sum into (bias_grad), or NULL where the bias gradient
 * keeps its own pass: no bias, dropout, RMSNorm (whose backward has no such sums). */
static float *residual_bias_grad(const gpt_model *m, void *bias_grad) {
    return bias_grad && !m->config.rmsnorm && m->config.hidden_dropout == 0.0f ? (float *)bias_grad : NULL;
}

/* whether layer l's fc2 bias gradient comes from the norm backward above it: layer l + 1's
 * input norm, or the final norm for the chunk's last layer (on the last stage) */
static int fc2_bias_by_norm(const gpt_model *m, const model_chunk *ch, int l) {
    return residual_bias_grad(m, ch->grads.layers[l].fc2_bias) && (l + 1 < ch->num_layers || ch->post_process);
}

/* Megatron-Core's RotaryEmbedding of this config: the first kv_channels * --rotary-percent
 * channels of each head */
static rope_spec rope_of(const gpt_config *c) {
    rope_spec r;
    float percent = c->rotary_percent > 0.0f ? c->rotary_percent : 1.0f;
    r.rotary_dim = percent < 1.0f ? (int)((float)c->kv_channels * percent) : c->kv_channels;
    r.interleaved = c->rotary_interleaved;
    r.position_start = 0;
    r.base = c->rotary_base > 0.0f ? c->rotary_base : 10000.0f;
    r.position_scale = c->rotary_seq_len_interpolation_factor > 0.0f ? 1.0f / c->rotary_seq_len_interpolation_factor : 1.0f;
    r.scaling_factor = c->rope_scaling_factor;
    return r;
}

rope_spec gpt_rope_spec(const gpt_config *config) { return rope_of(config); }

/* backward of norm_and_gather's region entry: the gradient [N,C] of the whole normalized rows,
 * summed over tensor-parallel ranks, for this rank's rows: reduce-scatter into `rows` with
 * sequence parallelism, all-reduce in place otherwise; returns where it is */
static void *reduce_gathered_grad(gpt_model *m, void *d_full, void *d_rows) {
    tensor_parallel_comm tp = tensor_parallel_of(m);
    shapes s = model_shapes(m);
    if (m->config.sequence_parallel)
        return gather_from_sequence_parallel_region_backward(&tp, d_full, d_rows, s.N, s.C, m->act_dtype);
    return copy_to_tensor_parallel_region_backward(&tp, d_full, s.N, s.C, m->act_dtype);
}

/* kernel_ops.matmul_backward, with the weight gradient written over when this is its step's
 * first write (grad_first_write.h): the same parts in the same order */
static void linear_backward(gpt_model *m, void *dx, float *dweight, float *dbias, const void *dout, const void *x,
                            const void *weight, int N, int IC, int OC) {
    const kernel_ops *ops = m->ops;
    if (!dweight || !grad_first_write_take(m, dweight)) {
        ops->matmul_backward(dx, dweight, dbias, dout, x, weight, N, IC, OC);
        return;
    }
    if (dx) ops->matmul_backward(dx, NULL, NULL, dout, NULL, weight, N, IC, OC);
    ops->matmul_backward_weight_overwrite(dweight, dout, x, N, IC, OC);
    if (dbias) ops->matmul_backward(NULL, NULL, dbias, dout, NULL, weight, N, IC, OC);
}

/* kernel_ops.matmul_backward_gelu likewise: a kept x is read by the weight gradient before dpre
 * (maybe x) is written; otherwise x is made first. The exact GeLU (mlp_gelu.h) does the same by
 * the plain GEMMs and the elementwise backward. */
static void gelu_linear_backward(gpt_model *m, void *dpre, float *dweight, const void *dout, void *x, const void *pre,
                                 const void *weight, int N, int IC, int OC, int x_kept) {
    const kernel_ops *ops = m->ops;
    if (m->config.gelu_erf) {
        if (!x_kept) ops->gelu_erf_forward(x, pre, (size_t)N * (size_t)IC);
        if (dweight) linear_backward(m, NULL, dweight, NULL, dout, x, weight, N, IC, OC);
        ops->matmul_backward(dpre, NULL, NULL, dout, NULL, weight, N, IC, OC);  /* dpre may be x: after */
        ops->gelu_erf_backward(dpre, pre, dpre, (size_t)N * (size_t)IC);
        return;
    }
    if (!dweight || !grad_first_write_take(m, dweight)) {
        ops->matmul_backward_gelu(dpre, dweight, dout, x, pre, weight, N, IC, OC, x_kept);
        return;
    }
    if (x_kept) ops->matmul_backward_weight_overwrite(dweight, dout, x, N, IC, OC);
    ops->matmul_backward_gelu(dpre, NULL, dout, x, pre, weight, N, IC, OC, x_kept);
    if (!x_kept) ops->matmul_backward_weight_overwrite(dweight, dout, x, N, IC, OC);
}

/* the operands of a linear layer's forward: the input [N,IC] and the weight [OC,IC] as its GEMM
 * reads them, their fp8 images in a layer in fp8 (fp8_linear.h) */
typedef struct linear_operands {
    const void *input, *weight;
} linear_operands;

static linear_operands forward_operands(gpt_model *m, int layer, fp8_gemm gemm, const void *x, const void *weight,
                                        int IC, int OC) {
    shapes s = model_shapes(m);
    if (fp8_native(m, layer)) {  /* the fp8 GEMM quantizes them itself */
        linear_operands o = {x, weight};
        return o;
    }
    linear_operands o = {fp8_operand(m, layer, gemm, FP8_ROLE_INPUT, x, (size_t)s.N * (size_t)IC),
                         fp8_operand(m, layer, gemm, FP8_ROLE_WEIGHT, weight, (size_t)OC * (size_t)IC)};
    return o;
}

/* linear_backward of a layer in fp8 (fp8_linear.h): dweight += Q(dout)^T Q(x) (dout^T x with
 * --no-fp8-wgrad; skipped when NULL), then dx = Q(dout) Q(W) (skipped when dx is NULL; it may
 * alias x), dbias += the column sums of the unquantized dout (TE's bgrad; skipped when NULL) */
static void fp8_linear_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, float *dbias,
                                const void *dout, const void *x, const void *weight, int N, int IC, int OC,
                                const uint8_t *x_codes) {
    if (fp8_native(m, layer)) {
        fp8_native_backward(m, layer, gemm, dx, dweight, dbias, dout, x, weight, N, IC, OC, x_codes);
        return;
    }
    const void *dout_q = fp8_operand(m, layer, gemm, FP8_ROLE_GRAD_OUTPUT, dout, (size_t)N * (size_t)OC);
    if (dweight) {  /* first: dx may alias x (fc2's in-place backward) */
        int quantized = fp8_wgrad_in_fp8(m);
        const void *x_used = quantized ? fp8_operand(m, layer, gemm, FP8_ROLE_INPUT, x, (size_t)N * (size_t)IC) : x;
        linear_backward(m, NULL, dweight, NULL, quantized ? dout_q : dout, x_used, weight, N, IC, OC);
    }
    if (dx)
        linear_backward(m, dx, NULL, NULL, dout_q, NULL,
                        fp8_operand(m, layer, gemm, FP8_ROLE_WEIGHT, weight, (size_t)OC * (size_t)IC), N, IC, OC);
    if (dbias) linear_backward(m, NULL, NULL, dbias, dout, NULL, weight, N, IC, OC);
}

/* the backward of a column-parallel linear whose input [N,C] was gathered (norm_and_gather):
 * the input and weight gradients, then the input gradient's reduction over tensor-parallel
 * ranks (reduce_gathered_grad). With MTC_TP_COMM_OVERLAP=1 the reduction runs on the group's side
 * stream while the weight and bias gradients are computed, as Megatron's
 * LinearWithGradAccumulationAndAsyncCommunication does: the same operations, so the same bits.
 * Returns this rank's rows. */
/* Off unless MTC_TP_COMM_OVERLAP=1: on two H200s (NVLink) the overlapped reduction made the TP2
 * step of GPT 1.3B 1.3% slower (the NCCL kernel and the weight-gradient GEMM share the SMs;
 * perf/results/scaling/tp-overlap-h200x2-2026-11-23.md). Same bits either way. The --tp-comm-overlap
 * flag (sequence parallelism) takes precedence: its copy-engine reduce-scatter by row blocks,
 * 8.5-9% faster at TP2 (perf/results/scaling/tp-comm-overlap-h100x2-2026-11-26.md). */
static int tp_comm_overlap(void) {
    static int value = -1;
    if (value < 0) {
        const char *text = getenv("MTC_TP_COMM_OVERLAP");
        value = text && strcmp(text, "1") == 0;
    }
    return value;
}

static void *column_parallel_backward(gpt_model *m, int layer, fp8_gemm gemm, float *dweight, float *dbias,
                                      const void *dout, const void *x, const void *weight, int OC,
                                      const uint8_t *x_codes) {
    shapes s = model_shapes(m);
    backward_scratch *b = &m->scratch;
    if (fp8_layer_in_fp8(&m->config, layer)) {  /* not by row blocks with --tp-comm-overlap */
        m->tp_last_step_rs = 0;
        fp8_linear_backward(m, layer, gemm, b->d_full, dweight, dbias, dout, x, weight, s.N, s.C, OC, x_codes);
        return reduce_gathered_grad(m, b->d_full, b->d_hidden);
    }
    if (rs_by_blocks(m)) {  /* --tp-comm-overlap: input gradient by row blocks, peers' first */
        const kernel_ops *ops = m->ops;
        tensor_parallel_comm tp = tensor_parallel_of(m);
        size_t n = (size_t)s.n, block = row_block_bytes(m, s.C);
        for (int i = 1; i < m->config.tp_size; i++) {
            int k = tp_reduce_scatter_order(&tp, i);
            linear_backward(m, act_at(ops, b->d_full, k * n * s.C), NULL, NULL, act_at(ops, (void *)dout, k * n * OC),
                            NULL, weight, s.n, s.C, OC);
            tp_reduce_scatter_post(&tp, b->d_full, k, block);
        }
        tp_reduce_scatter_fetch(&tp, b->d_full, b->tp_received, block, m->tp_requests);
        int r = m->config.tp_rank;
        linear_backward(m, act_at(ops, b->d_full, r * n * s.C), NULL, NULL, act_at(ops, (void *)dout, r * n * OC),
                        NULL, weight, s.n, s.C, OC);
        linear_backward(m, NULL, dweight, dbias, dout, x, weight, s.N, s.C, OC);  /* while the partials arrive */
        tp_reduce_scatter_finish(&tp, b->d_hidden, b->d_full, b->tp_received, n * s.C, block, m->tp_requests);
        m->tp_last_step_rs = 1;
        return b->d_hidden;
    }
    m->tp_last_step_rs = 0;
    if (m->config.tp_size == 1 || !tp_comm_overlap()) {
        linear_backward(m, b->d_full, dweight, dbias, dout, x, weight, s.N, s.C, OC);
        return reduce_gathered_grad(m, b->d_full, b->d_hidden);
    }
    tensor_parallel_comm tp = tensor_parallel_of(m);
    comm_request request;
    memset(&request, 0, sizeof request);
    linear_backward(m, b->d_full, NULL, NULL, dout, x, weight, s.N, s.C, OC);
    void *rows = m->config.sequence_parallel
                     ? gather_from_sequence_parallel_region_backward_start(&tp, b->d_full, b->d_hidden, s.N, s.C,
                                                                           m->act_dtype, &request)
                     : copy_to_tensor_parallel_region_backward_start(&tp, b->d_full, s.N, s.C, m->act_dtype, &request);
    linear_backward(m, NULL, dweight, dbias, dout, x, weight, s.N, s.C, OC);
    tp.comm->wait(&request);
    return rows;
}

/* sum row-parallel partial results [N,C] over tensor-parallel ranks; returns this rank's rows:
 * reduce-scatter into `rows` with sequence parallelism, all-reduce in place otherwise */
static void *reduce_to_rows(gpt_model *m, void *partial_full, void *rows) {
    tensor_parallel_comm tp = tensor_parallel_of(m);
    shapes s = model_shapes(m);
    if (m->config.sequence_parallel)
        return reduce_scatter_to_sequence_parallel_region(&tp, partial_full, rows, s.N, s.C, m->act_dtype);
    return reduce_from_tensor_parallel_region(&tp, partial_full, s.N, s.C, m->act_dtype);
}

/* backward of reduce_to_rows: this rank's row gradients made whole [N,C] */
static void *gather_rows(gpt_model *m, void *rows, void *full) {
    tensor_parallel_comm tp = tensor_parallel_of(m);
    shapes s = model_shapes(m);
    if (m->config.sequence_parallel)
        return reduce_scatter_to_sequence_parallel_region_backward(&tp, rows, full, s.N, s.C, m->act_dtype);
    return reduce_from_tensor_parallel_region_backward(&tp, rows);
}

/* a row-parallel GEMM's partial sums of in[N,IC] W^T, summed over tensor-parallel ranks for this
 * rank's rows (reduce_to_rows); returns where they are. With --tp-comm-overlap by row blocks:
 * the peers' blocks first, each posted when made, then this rank's while the peers' partials of
 * its rows arrive, summed in rank order into forward_rows. */
static void *row_parallel_forward(gpt_model *m, int layer, fp8_gemm gemm, const void *in, const void *weight, int IC) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    if (!rs_by_blocks(m) || fp8_native(m, layer)) {  /* fp8 GEMMs: not by row blocks */
        m->tp_last_step_rs = 0;
        if (fp8_native(m, layer)) fp8_native_forward(m, layer, gemm, b->forward_full, in, weight, NULL, NULL, s.N, IC, s.C, NULL);
        else ops->matmul_forward(b->forward_full, NULL, in, weight, NULL, s.N, IC, s.C);
        return reduce_to_rows(m, b->forward_full, b->forward_rows);
    }
    tensor_parallel_comm tp = tensor_parallel_of(m);
    size_t n = (size_t)s.n, block = row_block_bytes(m, s.C);
    for (int i = 1; i < m->config.tp_size; i++) {
        int k = tp_reduce_scatter_order(&tp, i);
        ops->matmul_forward(act_at(ops, b->forward_full, k * n * s.C), NULL, act_at(ops, (void *)in, k * n * IC), weight,
                            NULL, s.n, IC, s.C);
        tp_reduce_scatter_post(&tp, b->forward_full, k, block);
    }
    tp_reduce_scatter_fetch(&tp, b->forward_full, b->tp_received, block, m->tp_requests);
    int r = m->config.tp_rank;
    ops->matmul_forward(act_at(ops, b->forward_full, r * n * s.C), NULL, act_at(ops, (void *)in, r * n * IC), weight,
                        NULL, s.n, IC, s.C);
    tp_reduce_scatter_finish(&tp, b->forward_rows, b->forward_full, b->tp_received, n * s.C, block, m->tp_requests);
    m->tp_last_step_rs = 1;
    return b->forward_rows;
}

/* the backward of row_parallel_forward: d_rows [n,C] made whole (gather_rows), then
 * dx[N,IC] = d_full W and dweight += d_full^T x. With --tp-comm-overlap the input gradient runs
 * by row blocks as the peers' rows arrive, this rank's first; the weight gradient after. */
static void row_parallel_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, void *d_rows,
                                  const void *x, const void *weight, int IC) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    if (!overlapped_ag(m) || fp8_layer_in_fp8(&m->config, layer)) {
        void *d_full = gather_rows(m, d_rows, b->d_full);
        if (fp8_layer_in_fp8(&m->config, layer))
            fp8_linear_backward(m, layer, gemm, dx, dweight, NULL, d_full, x, weight, s.N, IC, s.C, NULL);
        else
            linear_backward(m, dx, dweight, NULL, d_full, x, weight, s.N, IC, s.C);
        return;
    }
    tensor_parallel_comm tp = tensor_parallel_of(m);
    size_t n = (size_t)s.n;
    window_gather_start(m, b->d_full, d_rows, row_block_bytes(m, s.C));
    for (int i = 0; i < m->config.tp_size; i++) {
        int k = tp_gather_order(&tp, i);
        tp_gather_wait(&tp, k, m->tp_requests);
        linear_backward(m, act_at(ops, dx, k * n * IC), NULL, NULL, act_at(ops, b->d_full, k * n * s.C), NULL, weight,
                        s.n, IC, s.C);
    }
    tp_gather_finish(&tp, m->tp_requests);
    linear_backward(m, NULL, dweight, NULL, b->d_full, x, weight, s.N, IC, s.C);
}

/* ------------------------------------------------------------------ dropout streams */

enum { SITE_EMBEDDING = 1, SITE_ATTENTION_PROBS, SITE_ATTENTION_OUT, SITE_MLP_OUT, SITE_MOE_JITTER, SITE_CROSS_PROBS,
       SITE_CROSS_OUT };

/* Mask element index = (first sample, row, column) numbered over the whole micro-batch: the
 * same element gets the same mask whatever the micro-batch size, data-parallel split or
 * sequence-parallel shard. */
static dropout_rng site_rng(const gpt_model *m, micro_batch_rng rng, int layer, int site, float p,
                            uint64_t elements_per_sample, uint64_t local_offset) {
    dropout_rng r;
    r.p = rng.training ? p : 0.0f;
    r.seed = m->config.seed;
    r.stream = philox_stream_mix(philox_stream_mix(rng.iteration, (uint64_t)(layer + 1)), (uint64_t)site);
    r.offset = (uint64_t)rng.first_sample * elements_per_sample + local_offset;
    return r;
}

/* dropout on this rank's rows of the hidden state: the micro-batch's mask; each run of rows
 * (m->row_runs) draws its part at its rows' global place (run_rng) */
static dropout_rng hidden_rng(const gpt_model *m, micro_batch_rng rng, int layer, int site) {
    const gpt_config *c = &m->config;
    uint64_t C = (uint64_t)c->hidden_size;
    return site_rng(m, rng, layer, site, c->hidden_dropout, (uint64_t)c->seq_length * (uint64_t)c->cp_size * C, 0);
}

/* The residual-stream rows held here as runs contiguous among the micro-batch's rows numbered
 * b x (global sequence length) + position: one run (the sequence-parallel shard, or all rows)
 * without context parallelism; with it a run per piece of each sequence, cut where the
 * sequence-parallel shard starts or ends. A hidden dropout mask drawn run by run is then the
 * one of the same rows on one rank. */
static void plan_row_runs(gpt_model *m) {
    const gpt_config *c = &m->config;
    size_t first = c->sequence_parallel ? (size_t)c->tp_rank * (size_t)m->local_rows : 0;
    size_t last = first + (size_t)m->local_rows;
    int pieces = c->cp_size > 1 ? 2 : 1, piece_rows = c->seq_length / pieces;
    attention_span span = {1, c->seq_length, {0, 0}};
    if (c->cp_size > 1) span = context_parallel_span(c, c->cp_rank);
    m->row_runs = calloc((size_t)(c->micro_batch_size * pieces), sizeof(hidden_row_run));
    CHECK(m->row_runs, "out of host memory");
    m->num_row_runs = 0;
    for (int b = 0; b < c->micro_batch_size; b++)
        for (int p = 0; p < pieces; p++) {
            size_t lo = (size_t)b * c->seq_length + (size_t)p * piece_rows, hi = lo + (size_t)piece_rows;
            if (lo < first) lo = first;
            if (hi > last) hi = last;
            if (lo >= hi) continue;
            size_t piece_start = (size_t)b * c->seq_length + (size_t)p * piece_rows;
            uint64_t global = (uint64_t)b * (uint64_t)(c->seq_length * c->cp_size) + (uint64_t)span.start[p] + (lo - piece_start);
            hidden_row_run *run = &m->row_runs[m->num_row_runs];
            if (m->num_row_runs > 0 && run[-1].global_row + (uint64_t)run[-1].rows == global) {  /* continues the last */
                run[-1].rows += (int)(hi - lo);
                continue;
            }
            run->local_row = lo - first;
            run->rows = (int)(hi - lo);
            run->global_row = global;
            m->num_row_runs++;
        }
}

/* the mask of run k of the rows held here */
static dropout_rng run_rng(const gpt_model *m, dropout_rng rng, int k) {
    rng.offset += m->row_runs[k].global_row * (uint64_t)m->config.hidden_size;
    return rng;
}

/* the router's input jitter of an MoE layer: over the gathered rows [N,C] */
static dropout_rng moe_jitter_rng(const gpt_model *m, micro_batch_rng rng, int layer) {
    const gpt_config *c = &m->config;
    return site_rng(m, rng, layer, SITE_MOE_JITTER, 0.0f, (uint64_t)c->seq_length * (uint64_t)c->hidden_size, 0);
}

static dropout_rng attention_rng(const gpt_model *m, micro_batch_rng rng, int layer) {
    const gpt_config *c = &m->config;
    uint64_t T = (uint64_t)c->seq_length * (uint64_t)c->cp_size;  /* the whole sequence's */
    return site_rng(m, rng, layer, SITE_ATTENTION_PROBS, c->attention_dropout,
                    (uint64_t)c->num_attention_heads * T * T, 0);
}

/* the residual join (bias, dropout, add) fuses into the output GEMM when nothing stands between
 * them: no dropout and no tensor-parallel reduction (Megatron's bias-dropout-add at p = 0, TP 1) */
static int residual_fused(const gpt_model *m, dropout_rng out_rng) {
    return out_rng.p == 0.0f && m->config.tp_size == 1 && m->ops->matmul_forward_residual != NULL;
}

/* out = residual + dropout(rows + bias) over this rank's rows, in one pass where the backend has
 * it (rows is scratch and may be overwritten) */
static void bias_dropout_add(gpt_model *m, void *out, const void *residual, void *rows, const void *bias,
                             dropout_rng rng) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    for (int k = 0; k < m->num_row_runs; k++) {
        const hidden_row_run *run = &m->row_runs[k];
        size_t at = run->local_row * (size_t)s.C, size = (size_t)run->rows * s.C;
        void *out_k = act_at(ops, out, at), *rows_k = act_at(ops, rows, at);
        const void *residual_k = act_at(ops, (void *)residual, at);
        if (ops->bias_dropout_add) {
            ops->bias_dropout_add(out_k, residual_k, rows_k, bias, run->rows, s.C, run_rng(m, rng, k));
            continue;
        }
        if (bias) ops->bias_add(rows_k, bias, run->rows, s.C);
        ops->dropout_forward(rows_k, rows_k, size, run_rng(m, rng, k));
        ops->add(out_k, residual_k, rows_k, size);
    }
}

/* dropout_forward over this rank's rows [n,C], run by run (out may alias x) */
static void dropout_rows(gpt_model *m, void *out, const void *x, dropout_rng rng) {
    for (int k = 0; k < m->num_row_runs; k++) {
        size_t at = m->row_runs[k].local_row * (size_t)m->config.hidden_size;
        m->ops->dropout_forward(act_at(m->ops, out, at), act_at(m->ops, (void *)x, at),
                                (size_t)m->row_runs[k].rows * (size_t)m->config.hidden_size, run_rng(m, rng, k));
    }
}

/* dropout_backward over this rank's rows [n,C], run by run (dx may alias dout) */
static void dropout_backward_runs(gpt_model *m, void *dx, const void *dout, dropout_rng rng) {
    for (int k = 0; k < m->num_row_runs; k++) {
        size_t at = m->row_runs[k].local_row * (size_t)m->config.hidden_size;
        m->ops->dropout_backward(act_at(m->ops, dx, at), act_at(m->ops, (void *)dout, at),
                                 (size_t)m->row_runs[k].rows * (size_t)m->config.hidden_size, run_rng(m, rng, k));
    }
}

/* dropout's backward into scratch; at p = 0 it is the identity, and the gradient is used where
 * it is (read-only until the next norm_backward accumulates into it). bias_grad (NULL: none
 * here) is the bias gradient of the row-parallel linear below the dropout: += the column sums
 * of the result. With dropout and this rank's rows in one run, both in one pass
 * (kernel_ops.dropout_bias_backward, the bits of the two passes). */
static void *dropout_backward_rows(gpt_model *m, void *scratch, void *dout, dropout_rng rng, float *bias_grad) {
    shapes s = model_shapes(m);
    if (rng.p == 0.0f) {
        if (bias_grad) m->ops->bias_backward(bias_grad, dout, s.n, s.C);
        return dout;
    }
    if (bias_grad && m->ops->dropout_bias_backward && m->num_row_runs == 1 && m->row_runs[0].local_row == 0 &&
        m->row_runs[0].rows == s.n) {
        m->ops->dropout_bias_backward(scratch, bias_grad, dout, s.n, s.C, run_rng(m, rng, 0));
        return scratch;
    }
    dropout_backward_runs(m, scratch, dout, rng);
    if (bias_grad) m->ops->bias_backward(bias_grad, scratch, s.n, s.C);
    return scratch;
}

static void params_needed(gpt_model *m, int first, int count) {
    if (m->hooks.params_needed) m->hooks.params_needed(m->hooks.context, first, count);
}

static void grads_ready(gpt_model *m, int first, int count) {
    grad_first_write_settle(m, first, count);
    if (m->hooks.grads_ready) m->hooks.grads_ready(m->hooks.context, first, count);
}

/* before the first write to the parameter gradients: a clearing queued beside the forward
 * (kernel_ops.zero_beside) is done */
static void grads_writable(gpt_model *m) {
    if (m->ops->zero_join) m->ops->zero_join();
}

/* a chunk's parameters run: embedding (first chunk), each layer's, final part (last chunk) */
static int part_param_count(const gpt_model *m, model_part part) {
    return parameter_table_part_count(gpt_parameter_table(), part, &m->config, -1);
}
static int layer_first_param(const model_chunk *ch, int l) { return ch->layer_first_param[l]; }
static int layer_param_count(const model_chunk *ch, int l) {
    return ch->layer_first_param[l + 1] - ch->layer_first_param[l];
}
static int output_first_param(const model_chunk *ch) { return layer_first_param(ch, ch->num_layers); }
static int output_param_count(const model_chunk *ch) {
    return ch->first_param + ch->num_params - output_first_param(ch);
}

/* ------------------------------------------------------------------ forward */

/* RoPE on qkv (backward: its transpose on dqkv), at the global positions of the rows held here */
static void rope_rows(gpt_model *m, void *qkv, int backward) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    if (c->cp_size > 1) context_parallel_rope(m, qkv, rope_of(c), backward);
    else if (backward) m->ops->rope_backward(qkv, s.B, s.T, s.Hl, s.Gl, s.D, rope_of(c));
    else m->ops->rope_forward(qkv, s.B, s.T, s.Hl, s.Gl, s.D, rope_of(c));
}

/* out[N,C] += the learned position embeddings of the rows' positions */
static void position_embedding_forward(gpt_model *m, void *out, const void *wpe) {
    shapes s = model_shapes(m);
    if (m->config.cp_size > 1) context_parallel_position_embedding_forward(m, out, wpe);
    else m->ops->position_embedding_forward(out, wpe, s.B, s.T, s.C, 0);
}

/* the attention core of a layer: la->attention_out and the workspace its backward reads (over
 * the whole sequence with context parallelism: ring attention) */
static void attention_core_forward(gpt_model *m, layer_activations *la, int layer, micro_batch_rng rng,
                                   const int *key_valid) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    if (m->t5 && m->t5->relative_bias[0])  /* T5's relative position bias: padded encoder, causal decoder */
        m->ops->attention_bias_forward(la->attention_out, la->attention_workspace, la->qkv, key_valid,
                                       m->t5->relative_bias[m->t5->decoder], t5_decoder_layer(m, layer), s.B, s.T,
                                       s.Hl, s.Gl, s.D, c->tp_rank * s.Hl, s.H, attention_rng(m, rng, layer));
    else if (key_valid)  /* encoder mode: every key but the padding */
        m->ops->attention_padded_forward(la->attention_out, la->attention_workspace, la->qkv, key_valid, s.B, s.T,
                                         s.Hl, s.Gl, s.D, c->tp_rank * s.Hl, s.H, attention_rng(m, rng, layer));
    else if (c->cp_size > 1)
        context_parallel_attention_forward(m, layer, la->attention_out, la->attention_workspace, la->qkv,
                                           attention_rng(m, rng, layer));
    else
        m->ops->attention_forward(la->attention_out, la->attention_workspace, la->qkv, s.B, s.T, s.Hl, s.Gl, s.D,
                                  c->tp_rank * s.Hl, s.H, gpt_layer_window(c, layer), attention_rng(m, rng, layer));
}

/* the embedding of tokens (backend memory) into out, the first layer's input; its dropout stream
 * is "layer" embedding_layer: -1 (T5's decoder embedding: -2) */
static void embedding_forward(gpt_model *m, model_chunk *ch, activation_slot *slot, const int *tokens, void *out,
                              micro_batch_rng rng, int embedding_layer) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const model_view *w = &ch->weights;
    if (embedding_layer == -1) params_needed(m, ch->first_param, part_param_count(m, PART_EMBEDDING));
    void *full = m->scratch.forward_full;
    m->ops->embedding_forward(full, tokens, w->word_embeddings, s.N, s.C, c->tp_rank * s.Vl, s.Vl);
    if (c->tp_rank == 0 && w->position_embeddings)
        position_embedding_forward(m, full, w->position_embeddings);
    if (c->tp_rank == 0 && w->bert.tokentype_embeddings) {  /* BERT: + the token types' (d_full: free here) */
        m->ops->embedding_forward(m->scratch.d_full, slot->types, w->bert.tokentype_embeddings, s.N, s.C, 0, 2);
        m->ops->add(full, full, m->scratch.d_full, (size_t)s.N * s.C);
    }
    void *rows = reduce_to_rows(m, full, m->scratch.forward_rows);
    dropout_rows(m, out, rows, hidden_rng(m, rng, embedding_layer, SITE_EMBEDDING));
}

/* where layer l writes the residual stream it produces: the next layer's input, or the chunk's
 * (T5's last encoder layer: the encoder's output) */
static void *layer_output(const gpt_model *m, model_chunk *ch, activation_slot *slot, int l) {
    if (m->config.t5 && ch->first_layer + l == m->config.t5_encoder_layers - 1) return slot->t5->encoder_output;
    return l + 1 < ch->num_layers ? slot->layers[l + 1].input : slot->output;
}

static void layer_forward(gpt_model *m, model_chunk *ch, activation_slot *slot, int l, micro_batch_rng rng,
                          void *out) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    layer_activations *la = &slot->layers[l];
    const layer_view *lw = &ch->weights.layers[l];
    int layer = ch->first_layer + l;
    params_needed(m, layer_first_param(ch, l), layer_param_count(ch, l));

    /* attention block; an fp8 layer quantizes the gathered rows whole (with --tp-comm-overlap its
     * column-parallel GEMMs do not start on the first blocks) */
    int fp8 = fp8_layer_in_fp8(c, layer);
    uint8_t *ln1_codes = la->ln1_codes, *ln2_codes = la->ln2_codes; /* NULL unless kept (allocate_layer) */
    if (fp8)
        fp8_norm_and_gather(m, layer, FP8_GEMM_QKV, la->ln1, la->ln1_mean, la->ln1_rstd, la->input,
                            lw->input_layernorm_weight, lw->input_layernorm_bias, ln1_codes);
    else
        norm_and_gather_for_matmul(m, la->ln1, la->ln1_mean, la->ln1_rstd, la->input, lw->input_layernorm_weight,
                                   lw->input_layernorm_bias);
    linear_operands qkv_in = forward_operands(m, layer, FP8_GEMM_QKV, la->ln1, lw->qkv_weight, s.C, s.QKVl);
    gathered_matmul_forward(m, layer, FP8_GEMM_QKV, la->qkv, NULL, qkv_in.input, qkv_in.weight, lw->qkv_bias, s.QKVl, fp8,
                            ln1_codes);
    if (c->position_embedding_type == POSITION_ROPE) rope_rows(m, la->qkv, 0);
    attention_core_forward(m, la, layer, rng, layer_key_valid(m, slot, layer));
    dropout_rng out_rng = hidden_rng(m, rng, layer, SITE_ATTENTION_OUT);
    linear_operands proj_in = forward_operands(m, layer, FP8_GEMM_PROJ, la->attention_out, lw->proj_weight, s.HDl, s.C);
    if (residual_fused(m, out_rng) && fp8_native(m, layer)) {
        fp8_native_forward(m, layer, FP8_GEMM_PROJ, la->residual_mid, proj_in.input, proj_in.weight, lw->proj_bias,
                           la->input, s.N, s.HDl, s.C, NULL);
    } else if (residual_fused(m, out_rng)) {
        ops->matmul_forward_residual(la->residual_mid, proj_in.input, proj_in.weight, lw->proj_bias, la->input,
                                     s.N, s.HDl, s.C);
    } else {
        void *rows = row_parallel_forward(m, layer, FP8_GEMM_PROJ, proj_in.input, proj_in.weight, s.HDl);
        bias_dropout_add(m, la->residual_mid, la->input, rows, lw->proj_bias, out_rng);
    }
    /* T5's decoder layers: the cross-attention block between, whose output the MLP block takes */
    void *mlp_input = la->residual_mid;
    if (la->cross) {
        t5_cross_forward(m, slot, la->cross, lw, la->residual_mid, layer, rng);
        mlp_input = la->cross->residual;
    }

    /* MLP block; unless kept (--keep-mlp-activation) the activation lives in scratch until fc2
     * has read it (the backward recomputes it from fc1_out, the pre-activation, which saves
     * [N,F/tp] per layer) */
    if (gpt_layer_is_moe(c, layer)) {  /* the experts' partial sums, reduced as fc2's are */
        norm_and_gather(m, la->ln2, la->ln2_mean, la->ln2_rstd, mlp_input, lw->pre_mlp_layernorm_weight,
                        lw->pre_mlp_layernorm_bias);
        moe_layer_forward(m, la->moe, lw, la->ln2, m->scratch.forward_full, moe_jitter_rng(m, rng, layer), rng.training,
                          layer);
        void *rows = reduce_to_rows(m, m->scratch.forward_full, m->scratch.forward_rows);
        bias_dropout_add(m, out, mlp_input, rows, NULL, hidden_rng(m, rng, layer, SITE_MLP_OUT));
        return;
    }
    if (fp8)
        fp8_norm_and_gather(m, layer, FP8_GEMM_FC1, la->ln2, la->ln2_mean, la->ln2_rstd, mlp_input,
                            lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias, ln2_codes);
    else
        norm_and_gather_for_matmul(m, la->ln2, la->ln2_mean, la->ln2_rstd, mlp_input,
                                   lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias);
    void *activation = la->activation ? la->activation : m->scratch.d_ffn_a;
    linear_operands fc1_in = forward_operands(m, layer, FP8_GEMM_FC1, la->ln2, lw->fc1_weight, s.C, s.FC1l);
    if (c->swiglu) {
        gathered_matmul_forward(m, layer, FP8_GEMM_FC1, la->fc1_out, NULL, fc1_in.input, fc1_in.weight, lw->fc1_bias, s.FC1l, fp8,
                                ln2_codes);
        if (fp8_native(m, layer)) fp8_activation_forward(m, layer, 1, activation, la->fc1_out, s.N, s.Fl);
        else ops->swiglu_forward(activation, la->fc1_out, s.N, s.Fl);
    } else {
        gathered_matmul_forward(m, layer, FP8_GEMM_FC1, la->fc1_out, activation, fc1_in.input, fc1_in.weight, lw->fc1_bias, s.Fl, fp8,
                                ln2_codes);
    }
    out_rng = hidden_rng(m, rng, layer, SITE_MLP_OUT);
    linear_operands fc2_in = forward_operands(m, layer, FP8_GEMM_FC2, activation, lw->fc2_weight, s.Fl, s.C);
    if (residual_fused(m, out_rng) && fp8_native(m, layer)) {
        fp8_native_forward(m, layer, FP8_GEMM_FC2, out, fc2_in.input, fc2_in.weight, lw->fc2_bias, mlp_input,
                           s.N, s.Fl, s.C, NULL);
    } else if (residual_fused(m, out_rng)) {
        ops->matmul_forward_residual(out, fc2_in.input, fc2_in.weight, lw->fc2_bias, mlp_input, s.N, s.Fl, s.C);
    } else {
        void *rows = row_parallel_forward(m, layer, FP8_GEMM_FC2, fc2_in.input, fc2_in.weight, s.Fl);
        bias_dropout_add(m, out, mlp_input, rows, lw->fc2_bias, out_rng);
    }
}

/* vocab-parallel cross entropy of rows [r0, r0 + rows) whose logits are in slot->logits: losses,
 * and dL/dlogits (times grad_scale) in place of the logits. The statistics of the rows sit
 * together in slot->row_max and slot->sum_exp_and_target (sum_exp then target logit, 2 x rows
 * from 2 r0), so each all-reduce is one call. */
static void cross_entropy_rows(gpt_model *m, activation_slot *slot, int r0, int rows, float grad_scale) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    int vocab_start = m->config.tp_rank * s.Vl;
    float *losses = slot->losses + r0, *row_max = slot->row_max + r0;
    float *sum_exp = slot->sum_exp_and_target + 2 * (size_t)r0, *target_logit = sum_exp + rows;
    const int *targets = slot->targets + r0;
    if (m->config.tp_size == 1 && ops->cross_entropy_fused) {  /* the whole vocabulary here: one pass */
        ops->cross_entropy_fused(losses, slot->logits, row_max, sum_exp, target_logit, targets, rows, s.Vl, grad_scale);
        return;
    }
    ops->cross_entropy_max(row_max, slot->logits, rows, s.Vl);
    tensor_parallel_comm tp = tensor_parallel_of(m);
    vocab_parallel_statistics_allreduce(&tp, row_max, (size_t)rows, COMM_MAX);
    ops->cross_entropy_sum_exp(sum_exp, target_logit, slot->logits, row_max, targets, rows, s.Vl, vocab_start);
    vocab_parallel_statistics_allreduce(&tp, sum_exp, 2 * (size_t)rows, COMM_SUM);
    ops->cross_entropy_loss_grad(losses, slot->logits, row_max, sum_exp, target_logit, targets, rows, s.Vl,
                                 vocab_start, grad_scale);
}

/* final layer norm, output layer and vocab-parallel cross-entropy; returns the loss sum. Unless
 * all rows fit one chunk (loss_chunk_rows), each chunk's logits are made, turned into dlogits
 * and (with_backward) used at once: dL/d(lnf) of its rows into slot->d_lnf, and the output
 * layer's weight gradient accumulated, so the logits of one chunk exist at a time. */
static double loss_forward(gpt_model *m, model_chunk *ch, activation_slot *slot, float grad_scale, int with_backward) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    const model_view *w = &ch->weights, *g = &ch->grads;
    params_needed(m, output_first_param(ch), output_param_count(ch));
    norm_and_gather(m, slot->lnf, slot->lnf_mean, slot->lnf_rstd, slot->output, w->final_layernorm_weight, w->final_layernorm_bias);
    if (m->config.bert) {  /* BERT's heads on the gathered rows, their backward at once */
        if (with_backward) grads_writable(m);
        return bert_encoder_heads(m, ch, slot, grad_scale, with_backward);
    }
    int chunk_rows = loss_chunk_rows(m);
    size_t row_bytes = ops->act_bytes * (size_t)s.C;
    if (m->t5) grad_scale /= (float)t5_loss_tokens(m, slot);  /* the micro-batch's masked mean */
    for (int r0 = 0; r0 < s.N; r0 += chunk_rows) {
        int rows = s.N - r0 < chunk_rows ? s.N - r0 : chunk_rows;
        const void *lnf_rows = (const char *)slot->lnf + (size_t)r0 * row_bytes;
        ops->matmul_forward(slot->logits, NULL, lnf_rows, w->output_layer, w->lm_head_bias, rows, s.C, s.Vl);
        if (m->capture_logits)
            ops->copy_to_host_float(m->capture_logits + (size_t)r0 * s.Vl, slot->logits, (size_t)rows * (size_t)s.Vl);
        cross_entropy_rows(m, slot, r0, rows, grad_scale);
        if (m->t5) t5_mask_rows(m, slot, r0, rows);
        if (slot->d_lnf && with_backward) {
            grads_writable(m);
            linear_backward(m, (char *)slot->d_lnf + (size_t)r0 * row_bytes, NULL, NULL, slot->logits, NULL,
                            w->output_layer, rows, s.C, s.Vl);
            linear_backward(m, NULL, g->output_layer, g->lm_head_bias, slot->logits, lnf_rows, w->output_layer, rows,
                            s.C, s.Vl);
        }
    }
    ops->copy_to_host(m->host_losses, slot->losses, sizeof(float) * (size_t)s.N);
    if (m->t5) return t5_masked_loss(m, slot);
    double loss_sum = 0.0;
    for (int i = 0; i < s.N; i++) loss_sum += m->host_losses[i];
    return loss_sum;
}

double gpt_chunk_forward(gpt_model *m, int chunk, int slot_index, const int *tokens,
                         const int *targets, micro_batch_rng rng, float grad_scale, int with_backward) {
    model_chunk *ch = &m->chunks[chunk];
    activation_slot *slot = &ch->slots[slot_index];
    size_t N = (size_t)m->config.micro_batch_size * (size_t)m->config.seq_length;
    m->grad_scale = grad_scale;
    if (m->t5) return t5_chunk_forward(m, ch, slot, tokens, targets, rng, grad_scale, with_backward);
    if (m->config.bert) bert_encoder_inputs(m, ch, slot, tokens, targets);
    m->bert_task_rng = rng;
    fp8_set_recording(m, rng.training);  /* training micro-batches record their fp8 amaxes */
    if (ch->pre_process) {
        m->ops->copy_from_host(slot->tokens, tokens, sizeof(int) * N);
        embedding_forward(m, ch, slot, slot->tokens, slot->layers[0].input, rng, -1);
    }
    for (int l = 0; l < ch->num_layers; l++) layer_forward(m, ch, slot, l, rng, layer_output(m, ch, slot, l));
    if (!ch->post_process) return 0.0;
    if (!m->config.bert) m->ops->copy_from_host(slot->targets, targets, sizeof(int) * N);  /* BERT's: slot->bert */
    return loss_forward(m, ch, slot, grad_scale, with_backward);
}

/* ------------------------------------------------------------------ backward */

static void loss_backward(gpt_model *m, model_chunk *ch, activation_slot *slot) {
    shapes s = model_shapes(m);
    const kernel_ops *ops = m->ops;
    const model_view *w = &ch->weights, *g = &ch->grads;
    backward_scratch *b = &m->scratch;
    /* slot->logits holds dL/dlogits; a chunked loss made dL/d(lnf) and the weight gradient already */
    /* BERT's d_lnf is whole on every rank: this rank's rows of it */
    void *d_rows = m->config.bert ? own_norm_rows(m, slot->d_lnf)
                 : slot->d_lnf ? reduce_gathered_grad(m, slot->d_lnf, b->d_hidden)
                               : column_parallel_backward(m, -1, FP8_GEMM_QKV, g->output_layer, g->lm_head_bias, slot->logits,
                                                          slot->lnf, w->output_layer, s.Vl, NULL);
    ops->zero(b->d_residual, ops->act_bytes * (size_t)s.n * s.C);
    float *last_fc2_bias = ch->num_layers > 0 ? residual_bias_grad(m, g->layers[ch->num_layers - 1].fc2_bias) : NULL;
    norm_backward(m, b->d_residual, g->final_layernorm_weight, g->final_layernorm_bias, last_fc2_bias, d_rows,
                  slot->output, slot->lnf, w->final_layernorm_weight, w->final_layernorm_bias, slot->lnf_mean,
                  slot->lnf_rstd);
    /* T5: the encoder's final norm is in the final part too; ready after the decoder's backward */
    if (!m->t5) grads_ready(m, output_first_param(ch), output_param_count(ch));
}

/* the MLP backward's fc2 part with --tp-comm-overlap (row_parallel_backward's counterpart):
 * d_rows [n,C] is all-gathered into d_full by the copy engines while fc2's input gradient and
 * the activation's backward run on the row blocks already here, this rank's first; fc2's weight
 * gradient after, over all rows. dL/d(fc1_out) goes to b->d_ffn_b (a kept activation is not
 * overwritten: the weight gradient reads it last), fc2's input gradient through b->d_ffn_a. The
 * same operations per row as the unsplit path, so on the CPU the same bits. */
static void fc2_backward_by_blocks(gpt_model *m, const layer_activations *la, const layer_view *lw,
                                   const layer_view *lg, void *d_rows) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    tensor_parallel_comm tp = tensor_parallel_of(m);
    size_t n = (size_t)s.n;
    window_gather_start(m, b->d_full, d_rows, row_block_bytes(m, s.C));
    for (int i = 0; i < c->tp_size; i++) {
        int k = tp_gather_order(&tp, i);
        tp_gather_wait(&tp, k, m->tp_requests);
        size_t row0 = (size_t)k * n;
        void *d_full_k = act_at(ops, b->d_full, row0 * s.C);
        if (c->swiglu) {  /* fc2's input gradient, then the SwiGLU's backward */
            linear_backward(m, act_at(ops, b->d_ffn_a, row0 * s.Fl), NULL, NULL, d_full_k, NULL, lw->fc2_weight,
                            s.n, s.Fl, s.C);
            ops->swiglu_backward(act_at(ops, b->d_ffn_b, row0 * s.FC1l), act_at(ops, la->fc1_out, row0 * s.FC1l),
                                 act_at(ops, b->d_ffn_a, row0 * s.Fl), s.n, s.Fl);
        } else {  /* fc2's input gradient with the GeLU's backward; gelu(fc1_out) again unless kept */
            void *x_k = la->activation ? act_at(ops, la->activation, row0 * s.Fl) : act_at(ops, b->d_ffn_a, row0 * s.Fl);
            gelu_linear_backward(m, act_at(ops, b->d_ffn_b, row0 * s.Fl), NULL, d_full_k, x_k,
                                 act_at(ops, la->fc1_out, row0 * s.Fl), lw->fc2_weight, s.n, s.Fl, s.C,
                                 la->activation != NULL);
        }
    }
    tp_gather_finish(&tp, m->tp_requests);
    void *x = la->activation;
    if (!x) {  /* fc2's input: gelu(fc1_out) is in d_ffn_a already; SwiGLU's output is made again */
        x = b->d_ffn_a;
        if (c->swiglu) ops->swiglu_forward(x, la->fc1_out, s.N, s.Fl);
    }
    linear_backward(m, NULL, lg->fc2_weight, NULL, b->d_full, x, lw->fc2_weight, s.N, s.Fl, s.C);
}

/* b->d_residual carries dL/d(residual stream) down through the layer */
/* --recompute-modules layernorm: the pre-MLP norm's gathered output again, the MLP's input,
 * from the MLP block's input (in T5's decoder layers the cross-attention's output) */
static void pre_mlp_norm_again(gpt_model *m, layer_activations *la, const layer_view *lw) {
    if (m->config.recompute_layernorm)
        norm_and_gather(m, la->ln2, la->ln2_mean, la->ln2_rstd, la->cross ? la->cross->residual : la->residual_mid,
                        lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias);
}

/* fc2 and the activation's backward of a layer in fp8 from d_hidden (dense_mlp_backward's first
 * part): fc2's weight gradient from its input (kept, or made again in d_ffn_a), then its input
 * gradient written over that input (its last reader), then the activation's backward; returns
 * dL/d(fc1_out) (d_ffn_b, or the kept GeLU output in place when every layer keeps it). Where the
 * activation is made again and the backend fuses the pass (fp8_mlp_backward_fused; not the exact
 * GeLU), fc2's input gradient first into d_ffn_a, then one pass writing only the codes the GEMMs
 * read and fc1's bias gradient (*fc1_bias then NULL: done), then fc2's weight gradient; dL/d(fc1_out)
 * is then only in its codes (d_ffn_b names it for fc1's backward). */
static void *fp8_fc2_backward(gpt_model *m, layer_activations *la, const layer_view *lw, const layer_view *lg,
                              int layer, void *d_hidden, float **fc1_bias) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    size_t n = (size_t)s.N * (size_t)s.Fl;
    void *d_full = gather_rows(m, d_hidden, b->d_full);
    if (!la->activation && b->d_ffn_a && b->d_ffn_b && (c->swiglu || !c->gelu_erf) &&
        fp8_mlp_backward_fused(m, layer, c->swiglu, lg->fc2_weight, *fc1_bias, b->d_ffn_a, b->d_ffn_b, la->fc1_out,
                               d_full, lw->fc2_weight, s.N, s.Fl, s.C)) {
        *fc1_bias = NULL;
        return b->d_ffn_b;
    }
    void *x = la->activation;
    fp8_output q;
    uint8_t *codes_t;
    if (!x) {  /* made again, with fc2's input codes and their transpose where the backend fuses them */
        x = b->d_ffn_a;
        if (c->swiglu && ops->swiglu_forward_fp8_transpose &&
            fp8_input_transposed_codes(m, layer, FP8_GEMM_FC2, x, n, &q, &codes_t))
            ops->swiglu_forward_fp8_transpose(x, la->fc1_out, s.N, s.Fl, &q, codes_t);
        else if (c->swiglu) ops->swiglu_forward(x, la->fc1_out, s.N, s.Fl);
        else if (!c->gelu_erf && ops->gelu_forward_fp8_transpose &&
                 fp8_input_transposed_codes(m, layer, FP8_GEMM_FC2, x, n, &q, &codes_t))
            ops->gelu_forward_fp8_transpose(x, la->fc1_out, s.N, s.Fl, &q, codes_t);
        else mlp_gelu_forward(ops, c->gelu_erf, x, la->fc1_out, n);
    }
    /* the weight gradient reads x before the input gradient overwrites it */
    fp8_linear_backward(m, layer, FP8_GEMM_FC2, x, lg->fc2_weight, NULL, d_full, x, lw->fc2_weight, s.N, s.Fl, s.C, NULL);
    void *d_pre = b->d_ffn_b ? b->d_ffn_b : x;
    if (c->swiglu && d_pre != x && ops->swiglu_backward_fp8 &&
        fp8_grad_output_codes(m, layer, FP8_GEMM_FC1, d_pre, 2 * n, &q, &codes_t))
        ops->swiglu_backward_fp8(d_pre, la->fc1_out, x, s.N, s.Fl, &q, codes_t); /* with fc1's output-gradient codes */
    else if (c->swiglu) ops->swiglu_backward(d_pre, la->fc1_out, x, s.N, s.Fl);
    else if (!c->gelu_erf && ops->gelu_backward_fp8 && fp8_grad_output_codes(m, layer, FP8_GEMM_FC1, d_pre, n, &q, &codes_t))
        ops->gelu_backward_fp8(d_pre, la->fc1_out, x, s.N, s.Fl, &q, codes_t); /* with fc1's output-gradient codes */
    else mlp_gelu_backward(ops, c->gelu_erf, d_pre, la->fc1_out, x, n);
    return d_pre;
}

/* the dense MLP's backward from d_hidden (dL/d(MLP output) on this rank's rows, after the
 * dropout, whose backward also made fc2's bias gradient): fc2, the activation, fc1; returns
 * dL/d(norm output) on this rank's rows */
static void *dense_mlp_backward(gpt_model *m, model_chunk *ch, activation_slot *slot, int l, void *d_hidden) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    layer_activations *la = &slot->layers[l];
    const layer_view *lw = &ch->weights.layers[l], *lg = &ch->grads.layers[l];
    void *d_pre = b->d_ffn_b;  /* dL/d(fc1_out) */
    float *fc1_bias = lg->fc1_bias;  /* NULL once the fused fp8 pass has summed it */
    if (fp8_layer_in_fp8(c, ch->first_layer + l)) {
        d_pre = fp8_fc2_backward(m, la, lw, lg, ch->first_layer + l, d_hidden, &fc1_bias);
    } else if (overlapped_ag(m)) {
        fc2_backward_by_blocks(m, la, lw, lg, d_hidden);
    } else {
    void *d_full = gather_rows(m, d_hidden, b->d_full);
    if (c->swiglu && la->activation) {  /* fc2's weight gradient from the kept activation, which
                                         * then receives fc2's input gradient */
        linear_backward(m, NULL, lg->fc2_weight, NULL, d_full, la->activation, lw->fc2_weight, s.N, s.Fl, s.C);
        linear_backward(m, la->activation, NULL, NULL, d_full, NULL, lw->fc2_weight, s.N, s.Fl, s.C);
        ops->swiglu_backward(d_pre, la->fc1_out, la->activation, s.N, s.Fl);
    } else if (c->swiglu) {  /* fc2's input gradient, the SwiGLU's backward, then its output again for fc2's weight
                              * (in the same pass, over the input gradient it has read) */
        linear_backward(m, b->d_ffn_a, NULL, NULL, d_full, NULL, lw->fc2_weight, s.N, s.Fl, s.C);
        ops->swiglu_backward_remake(d_pre, b->d_ffn_a, la->fc1_out, b->d_ffn_a, s.N, s.Fl);
        linear_backward(m, NULL, lg->fc2_weight, NULL, d_full, b->d_ffn_a, lw->fc2_weight, s.N, s.Fl, s.C);
    } else if (la->activation) {  /* the kept gelu(fc1_out) receives dL/d(fc1_out) once fc2's weight gradient has read it */
        d_pre = la->activation;
        gelu_linear_backward(m, d_pre, lg->fc2_weight, d_full, la->activation, la->fc1_out, lw->fc2_weight, s.N, s.Fl,
                             s.C, 1);
    } else {  /* d_ffn_a receives gelu(fc1_out), fc2's input */
        gelu_linear_backward(m, d_pre, lg->fc2_weight, d_full, b->d_ffn_a, la->fc1_out, lw->fc2_weight, s.N, s.Fl,
                             s.C, 0);
    }
    }
    pre_mlp_norm_again(m, la, lw);
    return column_parallel_backward(m, ch->first_layer + l, FP8_GEMM_FC1, lg->fc1_weight, fc1_bias, d_pre, la->ln2,
                                    lw->fc1_weight, s.FC1l,
                                    la->ln2_codes);
}

/* the MoE MLP's backward (moe_layer.h), likewise */
static void *moe_mlp_backward(gpt_model *m, model_chunk *ch, activation_slot *slot, int l, void *d_hidden,
                              micro_batch_rng rng) {
    backward_scratch *b = &m->scratch;
    layer_activations *la = &slot->layers[l];
    const layer_view *lw = &ch->weights.layers[l], *lg = &ch->grads.layers[l];
    int layer = ch->first_layer + l;
    void *d_full = gather_rows(m, d_hidden, b->d_full);
    pre_mlp_norm_again(m, la, lw);
    if (m->config.recompute_moe)  /* the layer's forward again from its input (forward_full is free now) */
        moe_layer_forward(m, la->moe, lw, la->ln2, b->forward_full, moe_jitter_rng(m, rng, layer), rng.training, layer);
    void *d_input = moe_layer_backward(m, la->moe, lw, lg, la->ln2, d_full, moe_jitter_rng(m, rng, layer), rng.training,
                                       layer);
    return reduce_gathered_grad(m, d_input, b->d_hidden);
}

static void layer_backward(gpt_model *m, model_chunk *ch, activation_slot *slot, int l, micro_batch_rng rng) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    backward_scratch *b = &m->scratch;
    layer_activations *la = &slot->layers[l];
    const layer_view *lw = &ch->weights.layers[l], *lg = &ch->grads.layers[l];
    int layer = ch->first_layer + l;

    /* MLP block: y = x' + dropout(reduce(act(fc1(gather(LN(x')))) W2^T) + b2), or the experts */
    /* the dense fc2's bias gradient with the dropout's backward, unless the norm above sums it */
    float *fc2_bias_grad =
        !gpt_layer_is_moe(c, layer) && lg->fc2_bias && !fc2_bias_by_norm(m, ch, l) ? lg->fc2_bias : NULL;
    void *d_hidden = dropout_backward_rows(m, b->d_hidden, b->d_residual,
                                           hidden_rng(m, rng, layer, SITE_MLP_OUT), fc2_bias_grad);
    void *d_rows = gpt_layer_is_moe(c, layer) ? moe_mlp_backward(m, ch, slot, l, d_hidden, rng)
                                              : dense_mlp_backward(m, ch, slot, l, d_hidden);
    /* the MLP block's input: after the attention block, or in T5's decoder the cross-attention's */
    void *mlp_input = la->cross ? la->cross->residual : la->residual_mid;
    norm_backward(m, b->d_residual, lg->pre_mlp_layernorm_weight, lg->pre_mlp_layernorm_bias,
                  residual_bias_grad(m, la->cross ? lg->cross_proj_bias : lg->proj_bias), d_rows, mlp_input, la->ln2,
                  lw->pre_mlp_layernorm_weight, lw->pre_mlp_layernorm_bias, la->ln2_mean, la->ln2_rstd);
    /* selective: the attention cores' state again (a fully recomputed layer has it already) */
    int core_again = c->recompute_selective && !layer_recomputed(m, ch, l);
    if (la->cross) t5_cross_backward(m, slot, la->cross, lw, lg, la->residual_mid, layer, rng, core_again);

    /* attention block: x' = x + dropout(reduce(attention(rope(gather(LN(x)) Wqkv^T)) Wproj^T) + b) */
    d_hidden = dropout_backward_rows(m, b->d_hidden, b->d_residual,
                                     hidden_rng(m, rng, layer, SITE_ATTENTION_OUT),
                                     lg->proj_bias && !residual_bias_grad(m, lg->proj_bias) ? lg->proj_bias : NULL);
    row_parallel_backward(m, layer, FP8_GEMM_PROJ, b->d_attention, lg->proj_weight, d_hidden, la->attention_out,
                          lw->proj_weight, s.HDl);
    const int *key_valid = layer_key_valid(m, slot, layer);
    if (core_again) attention_core_forward(m, la, layer, rng, key_valid);
    /* the qkv bias gradient comes with the attention's backward, unless RoPE changes d_qkv after it */
    float *qkv_bias_grad = c->position_embedding_type == POSITION_ROPE ? NULL : lg->qkv_bias;
    if (m->t5 && m->t5->relative_bias[0]) {  /* T5's relative position bias: its gradient summed per stack */
        ops->attention_bias_backward(b->d_qkv, qkv_bias_grad, m->t5->relative_dbias[m->t5->decoder], b->d_attention,
                                     la->qkv, key_valid, t5_decoder_layer(m, layer), la->attention_workspace, s.B,
                                     s.T, s.Hl, s.Gl, s.D, c->tp_rank * s.Hl, s.H, attention_rng(m, rng, layer));
    } else if (key_valid) {  /* encoder mode */
        ops->attention_padded_backward(b->d_qkv, qkv_bias_grad, b->d_attention, la->qkv, la->attention_out,
                                       key_valid, la->attention_workspace, s.B, s.T, s.Hl, s.Gl, s.D,
                                       c->tp_rank * s.Hl, s.H, attention_rng(m, rng, layer));
    } else if (c->cp_size > 1) {
        context_parallel_attention_backward(m, layer, b->d_qkv, b->d_attention, la->qkv, la->attention_out,
                                            la->attention_workspace, attention_rng(m, rng, layer));
        if (qkv_bias_grad) ops->bias_backward(qkv_bias_grad, b->d_qkv, s.N, s.QKVl);
    } else {
        ops->attention_backward(b->d_qkv, qkv_bias_grad, b->d_attention, la->qkv, la->attention_out,
                                la->attention_workspace, s.B, s.T, s.Hl, s.Gl, s.D, c->tp_rank * s.Hl, s.H,
                                gpt_layer_window(c, layer), attention_rng(m, rng, layer));
    }
    if (c->position_embedding_type == POSITION_ROPE) rope_rows(m, b->d_qkv, 1);
    if (c->recompute_layernorm)  /* the qkv GEMM's input, again */
        norm_and_gather(m, la->ln1, la->ln1_mean, la->ln1_rstd, la->input, lw->input_layernorm_weight,
                        lw->input_layernorm_bias);
    d_rows = column_parallel_backward(m, layer, FP8_GEMM_QKV, lg->qkv_weight, qkv_bias_grad ? NULL : lg->qkv_bias,
                                      b->d_qkv, la->ln1, lw->qkv_weight, s.QKVl,
                                      la->ln1_codes);
    /* the layer below's fc2 bias gradient (none below T5's first decoder layer: the embedding) */
    int below = l > 0 && !(c->t5 && layer == c->t5_encoder_layers);
    norm_backward(m, b->d_residual, lg->input_layernorm_weight, lg->input_layernorm_bias,
                  below ? residual_bias_grad(m, ch->grads.layers[l - 1].fc2_bias) : NULL, d_rows, la->input,
                  la->ln1, lw->input_layernorm_weight, lw->input_layernorm_bias, la->ln1_mean, la->ln1_rstd);
    grads_ready(m, layer_first_param(ch, l), layer_param_count(ch, l));
}

/* the backward of embedding_forward (the same tokens and embedding_layer); the embedding's
 * gradients are ready after the last one (-1) */
static void embedding_backward(gpt_model *m, model_chunk *ch, activation_slot *slot, const int *tokens,
                               micro_batch_rng rng, int embedding_layer) {
    shapes s = model_shapes(m);
    const gpt_config *c = &m->config;
    backward_scratch *b = &m->scratch;
    const model_view *g = &ch->grads;
    dropout_backward_runs(m, b->d_hidden, b->d_residual, hidden_rng(m, rng, embedding_layer, SITE_EMBEDDING));
    void *d_full = gather_rows(m, b->d_hidden, b->d_full);
    m->ops->embedding_backward(g->word_embeddings, d_full, tokens, s.N, s.C, c->tp_rank * s.Vl, s.Vl);
    if (g->position_embeddings) {
        if (c->cp_size > 1) context_parallel_position_embedding_backward(m, g->position_embeddings, d_full);
        else m->ops->position_embedding_backward(g->position_embeddings, d_full, s.B, s.T, s.C, 0);
    }
    if (g->bert.tokentype_embeddings)  /* whole on every rank, as the position embeddings */
        m->ops->embedding_backward(g->bert.tokentype_embeddings, d_full, slot->types, s.N, s.C, 0, 2);
    if (embedding_layer == -1) grads_ready(m, ch->first_param, part_param_count(m, PART_EMBEDDING));
}

/* full recompute: before the backward of the last layer of a recomputed group, run the group's
 * forward again from its kept input with the same dropout streams (hence the same activations,
 * bit for bit); its last layer's output is not needed and goes to d_hidden, free between the
 * backward of two layers (d_residual carries the gradient) */
static void recompute_group_forward(gpt_model *m, model_chunk *ch, activation_slot *slot, int last,
                                    micro_batch_rng rng) {
    for (int l = last - index_in_group(m, ch, last); l <= last; l++)
        layer_forward(m, ch, slot, l, rng, l < last ? layer_output(m, ch, slot, l) : m->scratch.d_hidden);
}

/* the backward of layer l, after its group's forward again where it is its recomputed group's
 * last layer (the chunk's stack of l in use) */
static void layer_backward_recomputing(gpt_model *m, model_chunk *ch, activation_slot *slot, int l,
                                       micro_batch_rng rng) {
    if (group_last(m, ch, l)) recompute_group_forward(m, ch, slot, l, rng);
    layer_backward(m, ch, slot, l, rng);
}

void gpt_chunk_backward(gpt_model *m, int chunk, int slot_index, micro_batch_rng rng) {
    model_chunk *ch = &m->chunks[chunk];
    activation_slot *slot = &ch->slots[slot_index];
    grads_writable(m);
    if (m->t5) {
        t5_chunk_backward(m, ch, slot, rng);
        return;
    }
    if (ch->post_process) loss_backward(m, ch, slot);
    for (int l = ch->num_layers - 1; l >= 0; l--) layer_backward_recomputing(m, ch, slot, l, rng);
    if (ch->pre_process) embedding_backward(m, ch, slot, slot->tokens, rng, -1);
}

uint64_t gpt_model_parameter_hash(const gpt_model *m) {
    size_t bytes = m->ops->act_bytes * m->num_elements;
    unsigned char *host = malloc(bytes);
    CHECK(host, "out of host memory hashing parameters");
    m->ops->copy_to_host(host, m->param_buffer, bytes);
    uint64_t h = hash_fnv1a(HASH_FNV1A_OFFSET, host, bytes);
    free(host);
    return h;
}

#include "app/model/gpt_model_t5.inc"
