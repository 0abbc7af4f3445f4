/* fp8_linear.c: the fp8 emulation of the transformer layers' linear layers and their scaling
 * state (see fp8_linear.h). The state lives in backend memory as the checkpoint stores it; the
 * delayed-scaling update runs on the host once per step through copies, so any backend with the
 * fp8 ops serves. */
#include "app/model/fp8_linear.h"

#include "app/checkpoint/checkpoint_boxes.h"
#include "app/core/error.h"
#include "app/model/grad_first_write.h"
#include "io/checkpoint_format.h"
#include "kernels/fp8_recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per fp8 linear held here, `record` floats per tensor (input, weight, grad_output):
 * [scale, history 0 .. history_len - 1], the checkpoint's rows. Beside it, per tensor, the
 * scale_inv the quantization writes and the amax the step's quantizations record into. The
 * linears are numbered the layers' own first (FP8_GEMMS per fp8 layer), then the local experts'
 * (fc1 and fc2 of each local expert of each fp8 MoE layer), whose amaxes reduce over another group. */
typedef struct fp8_state {
    int *layer_linear;     /* [num_layers]: index of the layer's first linear here, or -1 */
    int *layer_experts;    /* [num_layers]: index of its first local expert's fc1 here, or -1 */
    int num_layer_linears; /* the layers' own linears: [0, num_layer_linears) */
    int num_linears;       /* all the fp8 linears held here */
    int local_experts;     /* experts of an MoE layer held here */
    size_t record;         /* 1 + history_len */
    float *state;          /* backend [num_linears][3][record] */
    float *scale_inv;      /* backend [num_linears x 3] x FP8_SCALE_STRIDE: each 256-byte aligned */
    float *amax;           /* backend [num_linears x 3] */
    float *current_amax;   /* backend [1]: tensorwise scaling's amax of the tensor at hand */
    float *host_state, *host_amax; /* host copies for the update */
    uint8_t *codes;        /* backend: the fp8 codes of the operand at hand */
    size_t code_bytes;
    void *copies[FP8_ROLES]; /* backend, compute dtype: the dequantized operands, by role */
    size_t copy_elements[FP8_ROLES];
    void *expert_rows[FP8_ROLES]; /* backend, compute dtype: the experts' row blocks (grown on demand) */
    size_t expert_row_elements[FP8_ROLES];
    void **expert_weights;        /* [local_experts] backend, compute dtype: their weights' images */
    const void **expert_weight_views; /* host [local_experts]: what fp8_expert_weights returns */
    size_t expert_weight_elements;
    int recording;
    int native;                       /* fp8_native: the layers' GEMMs as fp8 GEMMs */
    int experts_native;               /* and the experts' (unless MTC_FP8_EXPERTS_EMULATE=1) */
    uint8_t *native_codes[FP8_ROLES]; /* backend, with native: each role's codes [copy_elements] */
    uint8_t *native_transposed[FP8_ROLES]; /* and their transposes (the backward's operands) */
    /* the experts' fp8 GEMMs (fp8_expert_forward/backward with native): one expert's operand
     * codes and transposed codes at a time, by role (bytes: the weight's made with the state,
     * the row blocks' grown on demand) */
    uint8_t *expert_codes[FP8_ROLES], *expert_transposed[FP8_ROLES];
    size_t expert_code_bytes[FP8_ROLES];
    /* the step's weight codes (fp8_weight_cache): per layer linear [num_layer_linears], backend,
     * made on first use; valid from the step's first training quantization until the step ends */
    fp8_weight_cache weight_cache;
    uint8_t **weight_codes, **weight_transposed;
    size_t *weight_elements;
    unsigned char *weight_valid; /* host */
    /* the fused producers (fp8_input_codes): whether they run, and the input codes a producer
     * wrote for the next forward of linear pending_linear from pending_x (-1: none) */
    int fuse;
    int pending_linear;
    const void *pending_x;
    int pending_grad_linear; /* likewise the output-gradient codes and transposed codes */
    const void *pending_grad;
    int pending_input_t_linear; /* and the backward's input codes and transposed codes */
    const void *pending_input_t;
    int mlp_fused; /* fp8_mlp_backward_fused: with fuse, unless MTC_FP8_MLP_FUSED=0 */
} fp8_state;

/* floats between two tensors' scale_inv: cuBLASLt takes a scale pointer only 256-byte aligned
 * (kernels/cuda/cuda_fp8_gemm.cu), so the GEMMs read them where they are */
#define FP8_SCALE_STRIDE 64

static float *scale_inv_of(const fp8_state *f, size_t tensor) { return f->scale_inv + tensor * FP8_SCALE_STRIDE; }

static const char *const gemm_names[FP8_GEMMS] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                                  "mlp.linear_fc1", "mlp.linear_fc2"};

int fp8_layer_in_fp8(const gpt_config *c, int layer) {
    const gpt_fp8_config *f = &c->fp8;
    if (!f->enabled || layer < 0) return 0;
    return layer >= f->layers_at_start_in_bf16 && layer < c->num_layers - f->layers_at_end_in_bf16;
}

int fp8_layers_in_fp8(const gpt_config *c) {
    int count = 0;
    for (int layer = 0; layer < c->num_layers; layer++) count += fp8_layer_in_fp8(c, layer);
    return count;
}

static size_t max_size(const size_t *values, int count) {
    size_t best = 0;
    for (int i = 0; i < count; i++) if (values[i] > best) best = values[i];
    return best;
}

/* the fp8 linears of global layer `layer` held here: its own four, then 2 per local expert of an
 * MoE layer */
static void number_linears(gpt_model *m, fp8_state *f) {
    const gpt_config *c = &m->config;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < m->num_chunks; k++)
            for (int l = 0; l < m->chunks[k].num_layers; l++) {
                int layer = m->chunks[k].first_layer + l;
                if (!fp8_layer_in_fp8(c, layer)) continue;
                if (pass == 0) {
                    f->layer_linear[layer] = f->num_linears;
                    f->num_linears += FP8_GEMMS;
                } else if (gpt_layer_is_moe(c, layer)) {
                    f->layer_experts[layer] = f->num_linears;
                    f->num_linears += 2 * f->local_experts;
                }
            }
}

/* whether the fp8 layers run the fp8 GEMMs (fp8_native): the backend has them, and the
 * environment asks for them (fp8_native_requested) */
static int native_backend(const gpt_model *m) {
    const kernel_ops *ops = m->ops;
    return ops->fp8_linear_forward && ops->fp8_gemm && ops->fp8_transpose &&
           fp8_native_requested(strcmp(ops->name, "cpu") == 0);
}

int fp8_keeps_input_codes(const gpt_model *m, int layer, fp8_gemm gemm) {
    const gpt_config *c = &m->config;
    if (!fp8_layer_in_fp8(c, layer) || !native_backend(m) || c->fp8.recipe != FP8_RECIPE_DELAYED || !c->fp8.wgrad)
        return 0;
    if (c->recompute_layernorm || c->memory_efficient_layer_norm || c->tp_comm_overlap) return 0;
    if (gemm != FP8_GEMM_QKV && (gemm != FP8_GEMM_FC1 || gpt_layer_is_moe(c, layer))) return 0;
    const char *keep = getenv("MTC_FP8_KEEP_CODES");
    return !(keep && strcmp(keep, "0") == 0);
}

void fp8_state_allocate(gpt_model *m) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    if (!c->fp8.enabled) return;
    if (!ops->fp8_quantize || !ops->fp8_dequantize || !ops->fp8_amax)
        user_error("--fp8-format: the %s backend has no fp8 quantization kernels (kernel_ops.fp8_quantize)", ops->name);
    fp8_state *f = calloc(1, sizeof *f);
    CHECK(f, "out of host memory for the fp8 scaling state");
    f->layer_linear = malloc(sizeof(int) * (size_t)c->num_layers);
    f->layer_experts = malloc(sizeof(int) * (size_t)c->num_layers);
    CHECK(f->layer_linear && f->layer_experts, "out of host memory for the fp8 scaling state");
    for (int layer = 0; layer < c->num_layers; layer++) f->layer_linear[layer] = f->layer_experts[layer] = -1;
    f->local_experts = c->num_experts > 0 ? c->num_experts / (c->ep_size > 1 ? c->ep_size : 1) : 0;
    number_linears(m, f);
    f->num_layer_linears = 0;
    for (int layer = 0; layer < c->num_layers; layer++) f->num_layer_linears += f->layer_linear[layer] >= 0 ? FP8_GEMMS : 0;
    f->record = 1 + (size_t)c->fp8.amax_history_len;
    size_t tensors = (size_t)f->num_linears * FP8_ROLES;
    f->state = ops->alloc(sizeof(float) * (tensors * f->record + 1));
    f->scale_inv = ops->alloc(sizeof(float) * (tensors + 1) * FP8_SCALE_STRIDE);
    f->amax = ops->alloc(sizeof(float) * (tensors + 1));
    f->current_amax = ops->alloc(sizeof(float));
    f->host_state = calloc(tensors * f->record + 1, sizeof(float));
    f->host_amax = calloc(tensors + 1, sizeof(float));
    CHECK(f->host_state && f->host_amax, "out of host memory for the fp8 scaling state");
    for (size_t t = 0; t < tensors; t++) f->host_state[t * f->record] = 1.0f; /* TE's initial scale */
    ops->copy_from_host(f->state, f->host_state, sizeof(float) * tensors * f->record);
    /* the operands' sizes: GEMM inputs and output gradients [N, width], weights [OC, IC]; an MoE
     * layer's shared expert takes the MLP's slots */
    size_t N = (size_t)c->micro_batch_size * (size_t)c->seq_length, C = (size_t)c->hidden_size;
    size_t tp = (size_t)c->tp_size, groups = (size_t)(c->num_query_groups ? c->num_query_groups : c->num_attention_heads);
    size_t HD = (size_t)c->num_attention_heads * (size_t)c->kv_channels / tp;
    size_t QKV = HD + 2 * groups * (size_t)c->kv_channels / tp, F = (size_t)c->ffn_hidden_size / tp;
    size_t SF = (size_t)c->moe_shared_expert_intermediate_size / tp;
    size_t FC1 = c->swiglu ? 2 * F : F, SFC1 = c->swiglu ? 2 * SF : SF;
    size_t input_widths[] = {C, HD, F, SF}, output_widths[] = {QKV, C, FC1, SFC1};
    size_t weights[] = {QKV * C, C * HD, FC1 * C, C * F, SFC1 * C, C * SF};
    f->copy_elements[FP8_ROLE_INPUT] = N * max_size(input_widths, 4);
    f->copy_elements[FP8_ROLE_GRAD_OUTPUT] = N * max_size(output_widths, 4);
    f->copy_elements[FP8_ROLE_WEIGHT] = max_size(weights, 6);
    for (int r = 0; r < FP8_ROLES; r++)  /* the dequantized copies are made on first use (fp8_operand) */
        if (f->copy_elements[r] > f->code_bytes) f->code_bytes = f->copy_elements[r];
    if (f->local_experts > 0) {
        size_t etp = (size_t)(c->etp_size > 0 ? c->etp_size : c->tp_size);  /* an expert's split */
        size_t EF = (size_t)c->moe_ffn_hidden_size / etp, EFC1 = c->swiglu ? 2 * EF : EF;
        f->expert_weight_elements = (EFC1 > EF ? EFC1 : EF) * C;
        f->expert_weights = calloc((size_t)f->local_experts, sizeof(void *));
        f->expert_weight_views = calloc((size_t)f->local_experts, sizeof(void *));
        CHECK(f->expert_weights && f->expert_weight_views, "out of host memory for the fp8 expert weights");
        for (int e = 0; e < f->local_experts; e++)
            f->expert_weights[e] = ops->alloc(ops->act_bytes * f->expert_weight_elements);
        if (f->expert_weight_elements > f->code_bytes) f->code_bytes = f->expert_weight_elements;
    }
    f->recording = 1;
    f->native = native_backend(m);  /* the emulation's code buffer is made on first use (quantize_into) */
    for (int r = 0; r < FP8_ROLES && f->native; r++) {
        f->native_codes[r] = ops->alloc(f->copy_elements[r]);
        f->native_transposed[r] = ops->alloc(f->copy_elements[r]);
    }
    f->experts_native = f->native && !fp8_experts_emulation_requested();
    if (f->experts_native && f->local_experts > 0) {
        f->expert_codes[FP8_ROLE_WEIGHT] = ops->alloc(f->expert_weight_elements);
        f->expert_transposed[FP8_ROLE_WEIGHT] = ops->alloc(f->expert_weight_elements);
        f->expert_code_bytes[FP8_ROLE_WEIGHT] = f->expert_weight_elements;
    }
    f->weight_cache = f->native && c->fp8.recipe == FP8_RECIPE_DELAYED ? fp8_weight_cache_mode() : FP8_WEIGHT_CACHE_OFF;
    const char *fuse = getenv("MTC_FP8_FUSE");
    f->fuse = f->native && c->fp8.recipe == FP8_RECIPE_DELAYED && !(fuse && strcmp(fuse, "0") == 0);
    const char *mlp_fused = getenv("MTC_FP8_MLP_FUSED");
    f->mlp_fused = f->fuse && !(mlp_fused && strcmp(mlp_fused, "0") == 0);
    f->pending_linear = f->pending_grad_linear = f->pending_input_t_linear = -1;
    if (f->weight_cache != FP8_WEIGHT_CACHE_OFF && f->num_layer_linears > 0) {
        size_t count = (size_t)f->num_layer_linears;
        f->weight_codes = calloc(count, sizeof(uint8_t *));
        f->weight_transposed = calloc(count, sizeof(uint8_t *));
        f->weight_elements = calloc(count, sizeof(size_t));
        f->weight_valid = calloc(count, 1);
        CHECK(f->weight_codes && f->weight_transposed && f->weight_elements && f->weight_valid,
              "out of host memory for the fp8 weight codes");
    }
    m->fp8 = f;
}

/* an environment switch: unset, empty or "0" off, "1" on, another value one clear error */
static int env_switch(const char *name) {
    const char *value = getenv(name);
    if (!value || !*value || strcmp(value, "0") == 0) return 0;
    if (strcmp(value, "1") == 0) return 1;
    user_error("%s=%s: expected 0 or 1", name, value);
    return 0;
}

int fp8_native_requested(int cpu_backend) {
    if (env_switch("MTC_FP8_EMULATE")) return 0;
    return cpu_backend ? env_switch("MTC_FP8_NATIVE") : 1;
}

int fp8_experts_emulation_requested(void) { return env_switch("MTC_FP8_EXPERTS_EMULATE"); }

fp8_weight_cache fp8_weight_cache_mode(void) {
    const char *mode = getenv("MTC_FP8_WEIGHT_CACHE");
    if (!mode || !*mode || strcmp(mode, "off") == 0) return FP8_WEIGHT_CACHE_OFF; /* the default (fp8_linear.h) */
    if (strcmp(mode, "transposed") == 0) return FP8_WEIGHT_CACHE_TRANSPOSED;
    if (strcmp(mode, "both") == 0) return FP8_WEIGHT_CACHE_BOTH;
    if (strcmp(mode, "off") == 0) return FP8_WEIGHT_CACHE_OFF;
    user_error("MTC_FP8_WEIGHT_CACHE=%s: expected both, transposed or off", mode);
    return FP8_WEIGHT_CACHE_OFF;
}

void fp8_weights_changed(gpt_model *m) {
    fp8_state *f = m->fp8;
    if (f && f->weight_valid) memset(f->weight_valid, 0, (size_t)f->num_layer_linears);
}

void fp8_state_release(gpt_model *m) {
    fp8_state *f = m->fp8;
    if (!f) return;
    const kernel_ops *ops = m->ops;
    void *buffers[] = {f->state, f->scale_inv, f->amax, f->current_amax, f->codes, f->copies[0], f->copies[1],
                       f->copies[2], f->expert_rows[0], f->expert_rows[1], f->expert_rows[2], f->native_codes[0],
                       f->native_codes[1], f->native_codes[2], f->native_transposed[0], f->native_transposed[1],
                       f->native_transposed[2], f->expert_codes[0], f->expert_codes[1], f->expert_codes[2],
                       f->expert_transposed[0], f->expert_transposed[1], f->expert_transposed[2]};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) if (buffers[i]) ops->release(buffers[i]);
    for (int e = 0; e < f->local_experts && f->expert_weights; e++) ops->release(f->expert_weights[e]);
    for (int l = 0; l < f->num_layer_linears && f->weight_codes; l++) {
        if (f->weight_codes[l]) ops->release(f->weight_codes[l]);
        if (f->weight_transposed[l]) ops->release(f->weight_transposed[l]);
    }
    free(f->weight_codes);
    free(f->weight_transposed);
    free(f->weight_elements);
    free(f->weight_valid);
    free(f->expert_weights);
    free(f->expert_weight_views);
    free(f->host_state);
    free(f->host_amax);
    free(f->layer_linear);
    free(f->layer_experts);
    free(f);
    m->fp8 = NULL;
}

void fp8_set_recording(gpt_model *m, int recording) {
    if (m->fp8) m->fp8->recording = recording;
}

int fp8_wgrad_in_fp8(const gpt_model *m) { return m->config.fp8.wgrad; }

/* tensor `tensor` (linear x 3 + role) quantized: x [n] into the codes `codes`, its scale_inv
 * written and, while recording, its amax recorded; returns the tensor's format */
static int quantize_codes(gpt_model *m, size_t tensor, fp8_role role, const void *x, size_t n, uint8_t *codes) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    const gpt_config *c = &m->config;
    int format = fp8_tensor_format(c->fp8.hybrid, role == FP8_ROLE_GRAD_OUTPUT);
    float *scale = f->state + tensor * f->record;
    if (c->fp8.recipe == FP8_RECIPE_TENSORWISE) { /* the scale from this tensor's own amax, TE's epsilon 0 */
        float amax = 0.0f;
        ops->copy_from_host(f->current_amax, &amax, sizeof amax);
        ops->fp8_amax(f->current_amax, x, n);
        ops->copy_to_host(&amax, f->current_amax, sizeof amax);
        float current = fp8_current_scale(amax, format, 0.0f, 0);
        ops->copy_from_host(scale, &current, sizeof current);
    }
    ops->fp8_quantize(codes, f->recording ? f->amax + tensor : NULL, scale_inv_of(f, tensor), x, n, scale, format);
    return format;
}

/* tensor `tensor` quantized and dequantized: x [n] into out [n] (the emulation) */
static void quantize_into(gpt_model *m, size_t tensor, fp8_role role, const void *x, size_t n, void *out) {
    fp8_state *f = m->fp8;
    CHECK(n <= f->code_bytes || n == 0, "fp8 operand of %zu elements exceeds the code buffer (%zu)", n, f->code_bytes);
    if (!f->codes) f->codes = m->ops->alloc(f->code_bytes);
    int format = quantize_codes(m, tensor, role, x, n, f->codes);
    m->ops->fp8_dequantize(out, f->codes, n, scale_inv_of(f, tensor), format);
}

const void *fp8_operand(gpt_model *m, int layer, fp8_gemm gemm, fp8_role role, const void *x, size_t n) {
    fp8_state *f = m->fp8;
    if (!f || layer < 0 || f->layer_linear[layer] < 0) return x;
    CHECK(n <= f->copy_elements[role], "fp8 operand of %zu elements exceeds its scratch (%zu)", n, f->copy_elements[role]);
    if (!f->copies[role]) f->copies[role] = m->ops->alloc(m->ops->act_bytes * f->copy_elements[role]);
    quantize_into(m, (size_t)(f->layer_linear[layer] + (int)gemm) * FP8_ROLES + (size_t)role, role, x, n, f->copies[role]);
    return f->copies[role];
}

int fp8_experts_in_fp8(const gpt_model *m, int layer) {
    return m->fp8 && layer >= 0 && m->fp8->layer_experts[layer] >= 0;
}

/* the linear of local expert `expert`'s fc1 (which 0) or fc2 (1) */
static size_t expert_linear(const fp8_state *f, int layer, int expert, int which) {
    return (size_t)(f->layer_experts[layer] + 2 * expert + which);
}

const void *fp8_expert_rows(gpt_model *m, int layer, int which, fp8_role role, const void *x, const int *rows,
                            int groups, int width) {
    fp8_state *f = m->fp8;
    if (!fp8_experts_in_fp8(m, layer)) return x;
    const kernel_ops *ops = m->ops;
    size_t total = (size_t)rows[groups] * (size_t)width;
    if (total > f->expert_row_elements[role]) { /* the rows an expert receives vary: grow */
        if (f->expert_rows[role]) ops->release(f->expert_rows[role]);
        f->expert_rows[role] = ops->alloc(ops->act_bytes * total);
        f->expert_row_elements[role] = total;
        if (total > f->code_bytes) {
            if (f->codes) ops->release(f->codes);
            f->codes = NULL; /* made again at the new size on first use */
            f->code_bytes = total;
        }
    }
    for (int g = 0; g < groups; g++) {
        size_t first = (size_t)rows[g] * (size_t)width, n = (size_t)(rows[g + 1] - rows[g]) * (size_t)width;
        if (n == 0) continue;
        quantize_into(m, expert_linear(f, layer, g, which) * FP8_ROLES + (size_t)role, role, act_at(ops, (void *)x, first),
                      n, act_at(ops, f->expert_rows[role], first));
    }
    return f->expert_rows[role];
}

const void *const *fp8_expert_weights(gpt_model *m, int layer, int which, const void *const *weight, int groups,
                                      size_t numel) {
    fp8_state *f = m->fp8;
    if (!fp8_experts_in_fp8(m, layer)) return weight;
    CHECK(groups <= f->local_experts && numel <= f->expert_weight_elements,
          "fp8 expert weights: %d experts of %zu elements exceed the scratch (%d of %zu)", groups, numel,
          f->local_experts, f->expert_weight_elements);
    for (int g = 0; g < groups; g++) {
        quantize_into(m, expert_linear(f, layer, g, which) * FP8_ROLES + FP8_ROLE_WEIGHT, FP8_ROLE_WEIGHT, weight[g],
                      numel, f->expert_weights[g]);
        f->expert_weight_views[g] = f->expert_weights[g];
    }
    return f->expert_weight_views;
}

void fp8_matmul_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, float *dbias,
                         const void *dout, const void *x, const void *weight, int N, int IC, int OC) {
    const kernel_ops *ops = m->ops;
    if (!m->fp8 || layer < 0 || m->fp8->layer_linear[layer] < 0) {
        ops->matmul_backward(dx, dweight, dbias, dout, x, weight, N, IC, OC);
        return;
    }
    if (fp8_native(m, layer)) {  /* the fp8 GEMMs (the shared experts' in an MoE layer) */
        fp8_native_backward(m, layer, gemm, dx, dweight, dbias, dout, x, weight, N, IC, OC, NULL);
        return;
    }
    const void *dout_q = fp8_operand(m, layer, gemm, FP8_ROLE_GRAD_OUTPUT, dout, (size_t)N * (size_t)OC);
    if (dx)
        ops->matmul_backward(dx, NULL, NULL, dout_q, NULL,
                             fp8_operand(m, layer, gemm, FP8_ROLE_WEIGHT, weight, (size_t)OC * (size_t)IC), N, IC, OC);
    if (dweight) {
        int quantized = fp8_wgrad_in_fp8(m);
        const void *x_used = quantized ? fp8_operand(m, layer, gemm, FP8_ROLE_INPUT, x, (size_t)N * (size_t)IC) : x;
        ops->matmul_backward(NULL, dweight, NULL, quantized ? dout_q : dout, x_used, weight, N, IC, OC);
    }
    if (dbias) ops->matmul_backward(NULL, NULL, dbias, dout, NULL, weight, N, IC, OC);
}

int fp8_native(const gpt_model *m, int layer) {
    return m->fp8 && m->fp8->native && layer >= 0 && m->fp8->layer_linear[layer] >= 0;
}

/* the state index of role `role` of linear `gemm` of layer `layer` */
static size_t layer_tensor(const fp8_state *f, int layer, fp8_gemm gemm, fp8_role role) {
    return (size_t)(f->layer_linear[layer] + (int)gemm) * FP8_ROLES + (size_t)role;
}

/* tensor `tensor` (role `role`) of x [rows, cols] quantized into codes [rows, cols] and, unless
 * codes_t is NULL, their transpose codes_t [cols, rows] (in one pass where the backend has
 * fp8_quantize_transpose and the scale is known before: delayed scaling); returns the format */
static int quantize_rows(gpt_model *m, size_t tensor, fp8_role role, const void *x, int rows, int cols, uint8_t *codes,
                         uint8_t *codes_t) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    size_t n = (size_t)rows * (size_t)cols;
    if (!codes_t || !ops->fp8_quantize_transpose || m->config.fp8.recipe == FP8_RECIPE_TENSORWISE) {
        int format = quantize_codes(m, tensor, role, x, n, codes);
        if (codes_t) ops->fp8_transpose(codes_t, codes, rows, cols);
        return format;
    }
    int format = fp8_tensor_format(m->config.fp8.hybrid, role == FP8_ROLE_GRAD_OUTPUT);
    ops->fp8_quantize_transpose(codes, codes_t, f->recording ? f->amax + tensor : NULL, scale_inv_of(f, tensor), x, rows,
                                cols, f->state + tensor * f->record, format);
    return format;
}

/* role `role`'s codes of x [rows, cols] for linear `gemm` of layer `layer` into the role's
 * scratch (and their transpose [cols, rows] when asked); returns the format */
static int native_codes(gpt_model *m, int layer, fp8_gemm gemm, fp8_role role, const void *x, int rows, int cols,
                        int transposed) {
    fp8_state *f = m->fp8;
    size_t n = (size_t)rows * (size_t)cols, tensor = layer_tensor(f, layer, gemm, role);
    CHECK(n <= f->copy_elements[role], "fp8 operand of %zu elements exceeds its scratch (%zu)", n, f->copy_elements[role]);
    if (role == FP8_ROLE_INPUT) f->pending_linear = f->pending_input_t_linear = -1; /* a producer's codes are overwritten */
    if (role == FP8_ROLE_GRAD_OUTPUT) f->pending_grad_linear = -1;
    return quantize_rows(m, tensor, role, x, rows, cols, f->native_codes[role], transposed ? f->native_transposed[role] : NULL);
}

/* the weight's codes [OC, IC] (want_transposed 0) or transposed codes [IC, OC] (1) for the
 * GEMM at hand. With the step's weight cache (training micro-batches, delayed scaling: the
 * scale cannot change inside a step, nor the weights) the step's first call quantizes with the
 * transpose in one pass, recording the amax, and later calls (micro-batches, recompute, the
 * backward) reuse the codes: the same codes, and the amax, a max over identical values, the same.
 * Mode "transposed" keeps only the transposed codes; the forward's are quantized each time. */
static const uint8_t *weight_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *weight, int OC, int IC,
                                   int want_transposed) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    if (f->weight_cache == FP8_WEIGHT_CACHE_OFF || !f->recording) {
        native_codes(m, layer, gemm, FP8_ROLE_WEIGHT, weight, OC, IC, want_transposed);
        return want_transposed ? f->native_transposed[FP8_ROLE_WEIGHT] : f->native_codes[FP8_ROLE_WEIGHT];
    }
    size_t linear = (size_t)(f->layer_linear[layer] + (int)gemm), n = (size_t)OC * (size_t)IC;
    int both = f->weight_cache == FP8_WEIGHT_CACHE_BOTH;
    if (f->weight_valid[linear]) {
        if (want_transposed) return f->weight_transposed[linear];
        if (both) return f->weight_codes[linear];
        native_codes(m, layer, gemm, FP8_ROLE_WEIGHT, weight, OC, IC, 0);
        return f->native_codes[FP8_ROLE_WEIGHT];
    }
    if (!f->weight_transposed[linear]) {
        f->weight_transposed[linear] = ops->alloc(n);
        if (both) f->weight_codes[linear] = ops->alloc(n);
        f->weight_elements[linear] = n;
    }
    CHECK(f->weight_elements[linear] == n, "fp8 weight of linear %zu: %zu elements, its codes were made for %zu",
          linear, n, f->weight_elements[linear]);
    uint8_t *codes = both ? f->weight_codes[linear] : f->native_codes[FP8_ROLE_WEIGHT];
    size_t tensor = layer_tensor(f, layer, gemm, FP8_ROLE_WEIGHT);
    if (ops->fp8_quantize_transpose) {
        ops->fp8_quantize_transpose(codes, f->weight_transposed[linear], f->amax + tensor, scale_inv_of(f, tensor), weight,
                                    OC, IC, f->state + tensor * f->record, FP8_E4M3);
    } else {
        quantize_codes(m, tensor, FP8_ROLE_WEIGHT, weight, n, codes);
        ops->fp8_transpose(f->weight_transposed[linear], codes, OC, IC);
    }
    f->weight_valid[linear] = 1;
    return want_transposed ? f->weight_transposed[linear] : codes;
}

/* where a fused producer writes role `role`'s codes of n elements for linear `gemm` of `layer`:
 * the role's scratch, the tensor's amax (when recording), scale_inv, scale and format */
static fp8_output role_output(gpt_model *m, int layer, fp8_gemm gemm, fp8_role role, size_t n, uint8_t *codes) {
    fp8_state *f = m->fp8;
    CHECK(n <= f->copy_elements[role], "fp8 operand of %zu elements exceeds its scratch (%zu)", n,
          f->copy_elements[role]);
    size_t tensor = layer_tensor(f, layer, gemm, role);
    fp8_output q;
    q.codes = codes ? codes : f->native_codes[role];
    q.amax = f->recording ? f->amax + tensor : NULL;
    q.scale_inv = scale_inv_of(f, tensor);
    q.scale = f->state + tensor * f->record;
    q.format = fp8_tensor_format(m->config.fp8.hybrid, role == FP8_ROLE_GRAD_OUTPUT);
    return q;
}

int fp8_input_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *x, size_t n, fp8_output *q, uint8_t *x_codes) {
    fp8_state *f = m->fp8;
    if (!fp8_native(m, layer) || !f->fuse) return 0;
    *q = role_output(m, layer, gemm, FP8_ROLE_INPUT, n, x_codes);
    f->pending_linear = f->layer_linear[layer] + (int)gemm;
    f->pending_x = x;
    return 1;
}

/* fp8_grad_output_codes and fp8_input_transposed_codes: role `role`'s codes and transposed codes
 * of x [n] into *q and *codes_t, marked for the backward of `gemm` */
static int backward_codes(gpt_model *m, int layer, fp8_gemm gemm, fp8_role role, const void *x, size_t n,
                          fp8_output *q, uint8_t **codes_t) {
    fp8_state *f = m->fp8;
    if (!fp8_native(m, layer) || !f->fuse || !fp8_wgrad_in_fp8(m) || !m->ops->fp8_quantize_transpose) return 0;
    *q = role_output(m, layer, gemm, role, n, NULL);
    *codes_t = f->native_transposed[role];
    if (role == FP8_ROLE_GRAD_OUTPUT) {
        f->pending_grad_linear = f->layer_linear[layer] + (int)gemm;
        f->pending_grad = x;
    } else {
        f->pending_linear = -1;
        f->pending_input_t_linear = f->layer_linear[layer] + (int)gemm;
        f->pending_input_t = x;
    }
    return 1;
}

int fp8_grad_output_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *dout, size_t n, fp8_output *q,
                          uint8_t **codes_t) {
    return backward_codes(m, layer, gemm, FP8_ROLE_GRAD_OUTPUT, dout, n, q, codes_t);
}

int fp8_input_transposed_codes(gpt_model *m, int layer, fp8_gemm gemm, const void *x, size_t n, fp8_output *q,
                               uint8_t **codes_t) {
    return backward_codes(m, layer, gemm, FP8_ROLE_INPUT, x, n, q, codes_t);
}

void fp8_native_forward(gpt_model *m, int layer, fp8_gemm gemm, void *out, const void *x, const void *weight,
                        const void *bias, const void *residual, int N, int IC, int OC, uint8_t *x_codes) {
    fp8_state *f = m->fp8;
    if (f->pending_linear == f->layer_linear[layer] + (int)gemm && f->pending_x == x) {
        f->pending_linear = -1; /* the producer of x wrote its codes (fp8_input_codes) */
    } else if (x_codes) { /* the scratch, and a producer's codes in it, untouched */
        quantize_codes(m, layer_tensor(f, layer, gemm, FP8_ROLE_INPUT), FP8_ROLE_INPUT, x, (size_t)N * (size_t)IC,
                       x_codes);
    } else {
        native_codes(m, layer, gemm, FP8_ROLE_INPUT, x, N, IC, 0);
    }
    const uint8_t *w_codes = weight_codes(m, layer, gemm, weight, OC, IC, 0);
    m->ops->fp8_linear_forward(out, x_codes ? x_codes : f->native_codes[FP8_ROLE_INPUT],
                               scale_inv_of(f, layer_tensor(f, layer, gemm, FP8_ROLE_INPUT)), w_codes,
                               scale_inv_of(f, layer_tensor(f, layer, gemm, FP8_ROLE_WEIGHT)), bias, residual, N, IC, OC);
}

/* The weight gradient first, then the input gradient (dx may alias x: Megatron's in-place fc2
 * backward): dweight [OC,IC] (+)= Q(dout)^T . Q(x), the codes of dout^T [OC,N] with those of
 * x^T [IC,N] (fp32 added into, or written over on the step's first write); dx [N,IC] =
 * Q(dout) . Q(W), the codes of dout [N,OC] with those of W^T [IC,OC] */
void fp8_native_backward(gpt_model *m, int layer, fp8_gemm gemm, void *dx, float *dweight, float *dbias,
                         const void *dout, const void *x, const void *weight, int N, int IC, int OC,
                         const uint8_t *x_codes) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    int wgrad_fp8 = dweight && fp8_wgrad_in_fp8(m);
    const float *g_scale_inv = scale_inv_of(f, layer_tensor(f, layer, gemm, FP8_ROLE_GRAD_OUTPUT));
    int g_format = fp8_tensor_format(m->config.fp8.hybrid, 1);
    if (wgrad_fp8 && f->pending_grad_linear == f->layer_linear[layer] + (int)gemm && f->pending_grad == dout)
        f->pending_grad_linear = -1; /* its producer wrote the codes and their transpose (fp8_grad_output_codes) */
    else
        g_format = native_codes(m, layer, gemm, FP8_ROLE_GRAD_OUTPUT, dout, N, OC, wgrad_fp8);
    if (wgrad_fp8) {
        if (x_codes) /* the forward's codes of x, kept (fp8_keeps_input_codes) */
            ops->fp8_transpose(f->native_transposed[FP8_ROLE_INPUT], x_codes, N, IC);
        else if (f->pending_input_t_linear == f->layer_linear[layer] + (int)gemm && f->pending_input_t == x)
            f->pending_input_t_linear = -1; /* its producer wrote them (fp8_input_transposed_codes) */
        else
            native_codes(m, layer, gemm, FP8_ROLE_INPUT, x, N, IC, 1);
        if (grad_first_write_take(m, dweight)) ops->zero(dweight, sizeof(float) * (size_t)OC * (size_t)IC);
        ops->fp8_gemm(dweight, 1, f->native_transposed[FP8_ROLE_GRAD_OUTPUT], g_format, g_scale_inv,
                      f->native_transposed[FP8_ROLE_INPUT], FP8_E4M3,
                      scale_inv_of(f, layer_tensor(f, layer, gemm, FP8_ROLE_INPUT)), OC, N, IC);
    } else if (dweight) { /* --no-fp8-wgrad: the unquantized gradient and input */
        if (grad_first_write_take(m, dweight)) ops->matmul_backward_weight_overwrite(dweight, dout, x, N, IC, OC);
        else ops->matmul_backward(NULL, dweight, NULL, dout, x, weight, N, IC, OC);
    }
    if (dx) {
        const uint8_t *w_transposed = weight_codes(m, layer, gemm, weight, OC, IC, 1);
        ops->fp8_gemm(dx, 0, f->native_codes[FP8_ROLE_GRAD_OUTPUT], g_format, g_scale_inv, w_transposed, FP8_E4M3,
                      scale_inv_of(f, layer_tensor(f, layer, gemm, FP8_ROLE_WEIGHT)), N, OC, IC);
    }
    if (dbias) ops->matmul_backward(NULL, NULL, dbias, dout, NULL, weight, N, IC, OC);
}

int fp8_activation_codes_only(gpt_model *m, int layer) {
    return fp8_native(m, layer) && m->fp8->mlp_fused;
}

int fp8_mlp_backward_fused(gpt_model *m, int layer, int swiglu, float *fc2_dweight, float *fc1_dbias, void *dact,
                           void *dpre, const void *pre, const void *dout, const void *fc2_weight, int N, int F, int C) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    if (!fp8_native(m, layer) || !f->mlp_fused || !fp8_wgrad_in_fp8(m) || !ops->mlp_backward_fp8 ||
        !ops->fp8_quantize_transpose)
        return 0;
    size_t nc = (size_t)N * (size_t)C, nf = (size_t)N * (size_t)F;
    CHECK(nc <= f->copy_elements[FP8_ROLE_INPUT] && nc <= f->copy_elements[FP8_ROLE_GRAD_OUTPUT],
          "fp8 MLP backward: fc2's output gradient of %zu elements exceeds the scratch (%zu, %zu)", nc,
          f->copy_elements[FP8_ROLE_INPUT], f->copy_elements[FP8_ROLE_GRAD_OUTPUT]);
    /* fc2's output-gradient codes, their transpose aside in the input role's row codes (free: the
     * weight gradient needs only x's transposed codes, and fc1's backward makes its own after) */
    uint8_t *dout_t = f->native_codes[FP8_ROLE_INPUT];
    f->pending_linear = f->pending_grad_linear = -1;
    size_t g_tensor = layer_tensor(f, layer, FP8_GEMM_FC2, FP8_ROLE_GRAD_OUTPUT);
    int g_format = quantize_rows(m, g_tensor, FP8_ROLE_GRAD_OUTPUT, dout, N, C, f->native_codes[FP8_ROLE_GRAD_OUTPUT],
                                 dout_t);
    /* fc2's input gradient dact = Q(dout) Q(W) */
    const uint8_t *w_transposed = weight_codes(m, layer, FP8_GEMM_FC2, fc2_weight, C, F, 1);
    ops->fp8_gemm(dact, 0, f->native_codes[FP8_ROLE_GRAD_OUTPUT], g_format, scale_inv_of(f, g_tensor), w_transposed,
                  FP8_E4M3, scale_inv_of(f, layer_tensor(f, layer, FP8_GEMM_FC2, FP8_ROLE_WEIGHT)), N, C, F);
    /* the pass: x's transposed codes (fc2's input role), fc1's output-gradient codes and their
     * transpose (taken by fc1's fp8_native_backward with dout dpre), fc1's bias gradient */
    fp8_output qa = role_output(m, layer, FP8_GEMM_FC2, FP8_ROLE_INPUT, nf, NULL);
    fp8_output qg = role_output(m, layer, FP8_GEMM_FC1, FP8_ROLE_GRAD_OUTPUT, swiglu ? 2 * nf : nf, NULL);
    ops->mlp_backward_fp8(dpre, fc1_dbias, pre, dact, N, F, swiglu, &qa, f->native_transposed[FP8_ROLE_INPUT], &qg,
                          f->native_transposed[FP8_ROLE_GRAD_OUTPUT]);
    f->pending_input_t_linear = -1;
    f->pending_grad_linear = f->layer_linear[layer] + (int)FP8_GEMM_FC1;
    f->pending_grad = dpre;
    /* fc2's weight gradient dweight (+)= Q(dout)^T Q(x), fp8_native_backward's GEMM */
    if (grad_first_write_take(m, fc2_dweight)) ops->zero(fc2_dweight, sizeof(float) * (size_t)C * (size_t)F);
    ops->fp8_gemm(fc2_dweight, 1, dout_t, g_format, scale_inv_of(f, g_tensor), f->native_transposed[FP8_ROLE_INPUT],
                  FP8_E4M3, scale_inv_of(f, layer_tensor(f, layer, FP8_GEMM_FC2, FP8_ROLE_INPUT)), C, N, F);
    return 1;
}

/* ---- the experts' fp8 GEMMs (Megatron with TE's GroupedLinear: one fp8 GEMM per expert) ---- */

/* cuBLASLt's fp8 GEMMs read their operands K-contiguous with the leading dimension a multiple
 * of 16 bytes (and 16-byte aligned row blocks): an expert GEMM's widths IC and OC (each a K of
 * one of the three GEMMs, and the row pitch of a block's operands and output) must be multiples
 * of 16, else that expert linear stays emulated (the whole grouped GEMM, forward and backward;
 * fp8_experts_native_shapes). The third K, the weight gradient's, is a block's row count, any
 * number: its transposed codes are padded with zero codes to a multiple of 16 (exact: a zero
 * code is +0, its products add nothing), so every non-empty block runs as fp8 GEMMs. */
#define FP8_GEMM_ALIGN 16

int fp8_experts_native_shapes(int IC, int OC) { return IC % FP8_GEMM_ALIGN == 0 && OC % FP8_GEMM_ALIGN == 0; }

/* whether the local experts' GEMM of width IC -> OC in layer `layer` runs as fp8 GEMMs */
static int experts_native(const gpt_model *m, int layer, int IC, int OC) {
    return fp8_native(m, layer) && m->fp8->experts_native && fp8_experts_in_fp8(m, layer) &&
           fp8_experts_native_shapes(IC, OC);
}

static int round_up(int n, int to) { return (n + to - 1) / to * to; }

/* the row blocks' code buffers of role `role` hold at least `bytes` */
static void expert_codes_reserve(gpt_model *m, fp8_role role, size_t bytes) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    if (bytes <= f->expert_code_bytes[role]) return;
    if (f->expert_codes[role]) ops->release(f->expert_codes[role]);
    if (f->expert_transposed[role]) ops->release(f->expert_transposed[role]);
    f->expert_codes[role] = ops->alloc(bytes);
    f->expert_transposed[role] = ops->alloc(bytes);
    f->expert_code_bytes[role] = bytes;
}

/* the largest row block of rows[0..groups], rounded up for the padded transposes */
static int largest_block(const int *rows, int groups) {
    int most = 0;
    for (int g = 0; g < groups; g++) if (rows[g + 1] - rows[g] > most) most = rows[g + 1] - rows[g];
    return round_up(most, FP8_GEMM_ALIGN);
}

/* block x [n, width] of tensor `tensor` into the role's codes, and with `transposed` its
 * transpose [width, round_up(n)] with the padding rows' codes zero; returns the format */
static int expert_block_codes(gpt_model *m, size_t tensor, fp8_role role, const void *x, int n, int width,
                              int transposed) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    int padded = round_up(n, FP8_GEMM_ALIGN);
    uint8_t *codes = f->expert_codes[role], *codes_t = f->expert_transposed[role];
    if (!transposed || padded == n) return quantize_rows(m, tensor, role, x, n, width, codes, transposed ? codes_t : NULL);
    int format = quantize_rows(m, tensor, role, x, n, width, codes, NULL);
    ops->zero(codes + (size_t)n * (size_t)width, (size_t)(padded - n) * (size_t)width);
    ops->fp8_transpose(codes_t, codes, padded, width);
    return format;
}

/* out rows of expert g = Q(x rows) Q(W_g)^T, one fp8_linear_forward per non-empty block; every
 * expert's weight quantized (its amax recorded even without tokens, as the emulation's) */
static void expert_forward_native(gpt_model *m, int layer, int which, void *out, const void *x,
                                  const void *const *weight, const int *rows, int groups, int IC, int OC) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    CHECK(groups <= f->local_experts && (size_t)OC * (size_t)IC <= f->expert_code_bytes[FP8_ROLE_WEIGHT],
          "fp8 expert GEMM: %d experts of %d x %d exceed the scratch (%d of %zu)", groups, OC, IC, f->local_experts,
          f->expert_code_bytes[FP8_ROLE_WEIGHT]);
    expert_codes_reserve(m, FP8_ROLE_INPUT, (size_t)largest_block(rows, groups) * (size_t)IC);
    for (int g = 0; g < groups; g++) {
        size_t tensors = expert_linear(f, layer, g, which) * FP8_ROLES;
        int n = rows[g + 1] - rows[g];
        quantize_rows(m, tensors + FP8_ROLE_WEIGHT, FP8_ROLE_WEIGHT, weight[g], OC, IC, f->expert_codes[FP8_ROLE_WEIGHT],
                      NULL);
        if (n == 0) continue;
        quantize_rows(m, tensors + FP8_ROLE_INPUT, FP8_ROLE_INPUT, act_at(ops, (void *)x, (size_t)rows[g] * (size_t)IC),
                      n, IC, f->expert_codes[FP8_ROLE_INPUT], NULL);
        ops->fp8_linear_forward(act_at(ops, out, (size_t)rows[g] * (size_t)OC), f->expert_codes[FP8_ROLE_INPUT],
                                scale_inv_of(f, tensors + FP8_ROLE_INPUT), f->expert_codes[FP8_ROLE_WEIGHT],
                                scale_inv_of(f, tensors + FP8_ROLE_WEIGHT), NULL, NULL, n, IC, OC);
    }
}

/* fp8_native_backward's three GEMMs per non-empty block: dweight_g += Q(dout_g)^T Q(x_g) (fp32;
 * the unquantized operands with --no-fp8-wgrad; the first write of a pending gradient
 * overwrites, though the experts' never are: grad_first_write.c), dx_g = Q(dout_g) Q(W_g) */
static void expert_backward_native(gpt_model *m, int layer, int which, void *dx, float *const *dweight,
                                   const void *dout, const void *x, const void *const *weight, const int *rows,
                                   int groups, int IC, int OC) {
    fp8_state *f = m->fp8;
    const kernel_ops *ops = m->ops;
    int wgrad_fp8 = dweight && fp8_wgrad_in_fp8(m);
    if (dweight && !wgrad_fp8) ops->grouped_matmul_backward(NULL, dweight, dout, x, weight, rows, groups, IC, OC);
    size_t block = (size_t)largest_block(rows, groups);
    expert_codes_reserve(m, FP8_ROLE_GRAD_OUTPUT, block * (size_t)OC);
    if (wgrad_fp8) expert_codes_reserve(m, FP8_ROLE_INPUT, block * (size_t)IC);
    for (int g = 0; g < groups; g++) {
        size_t tensors = expert_linear(f, layer, g, which) * FP8_ROLES;
        int n = rows[g + 1] - rows[g], padded = round_up(n, FP8_GEMM_ALIGN);
        if (n == 0) continue;
        const float *g_scale_inv = scale_inv_of(f, tensors + FP8_ROLE_GRAD_OUTPUT);
        int g_format = expert_block_codes(m, tensors + FP8_ROLE_GRAD_OUTPUT, FP8_ROLE_GRAD_OUTPUT,
                                          act_at(ops, (void *)dout, (size_t)rows[g] * (size_t)OC), n, OC, wgrad_fp8);
        if (wgrad_fp8) {
            expert_block_codes(m, tensors + FP8_ROLE_INPUT, FP8_ROLE_INPUT,
                               act_at(ops, (void *)x, (size_t)rows[g] * (size_t)IC), n, IC, 1);
            if (grad_first_write_take(m, dweight[g])) ops->zero(dweight[g], sizeof(float) * (size_t)OC * (size_t)IC);
            ops->fp8_gemm(dweight[g], 1, f->expert_transposed[FP8_ROLE_GRAD_OUTPUT], g_format, g_scale_inv,
                          f->expert_transposed[FP8_ROLE_INPUT], FP8_E4M3, scale_inv_of(f, tensors + FP8_ROLE_INPUT), OC,
                          padded, IC);
        }
        if (dx) {
            quantize_rows(m, tensors + FP8_ROLE_WEIGHT, FP8_ROLE_WEIGHT, weight[g], OC, IC,
                          f->expert_codes[FP8_ROLE_WEIGHT], f->expert_transposed[FP8_ROLE_WEIGHT]);
            ops->fp8_gemm(act_at(ops, dx, (size_t)rows[g] * (size_t)IC), 0, f->expert_codes[FP8_ROLE_GRAD_OUTPUT],
                          g_format, g_scale_inv, f->expert_transposed[FP8_ROLE_WEIGHT], FP8_E4M3,
                          scale_inv_of(f, tensors + FP8_ROLE_WEIGHT), n, OC, IC);
        }
    }
}

void fp8_expert_forward(gpt_model *m, int layer, int which, void *out, const void *x, const void *const *weight,
                        const int *rows, int groups, int IC, int OC) {
    if (experts_native(m, layer, IC, OC)) {
        expert_forward_native(m, layer, which, out, x, weight, rows, groups, IC, OC);
        return;
    }
    m->ops->grouped_matmul_forward(out, fp8_expert_rows(m, layer, which, FP8_ROLE_INPUT, x, rows, groups, IC),
                                   fp8_expert_weights(m, layer, which, weight, groups, (size_t)OC * (size_t)IC), rows,
                                   groups, IC, OC);
}

void fp8_expert_backward(gpt_model *m, int layer, int which, void *dx, float *const *dweight, const void *dout,
                         const void *x, const void *const *weight, const int *rows, int groups, int IC, int OC) {
    const kernel_ops *ops = m->ops;
    if (experts_native(m, layer, IC, OC)) {
        expert_backward_native(m, layer, which, dx, dweight, dout, x, weight, rows, groups, IC, OC);
        return;
    }
    const void *dout_q = fp8_expert_rows(m, layer, which, FP8_ROLE_GRAD_OUTPUT, dout, rows, groups, OC);
    const void *const *weight_q = fp8_expert_weights(m, layer, which, weight, groups, (size_t)OC * (size_t)IC);
    if (fp8_wgrad_in_fp8(m)) {
        const void *x_q = fp8_expert_rows(m, layer, which, FP8_ROLE_INPUT, x, rows, groups, IC);
        ops->grouped_matmul_backward(dx, dweight, dout_q, x_q, weight_q, rows, groups, IC, OC);
        return;
    }
    ops->grouped_matmul_backward(dx, NULL, dout_q, x, weight_q, rows, groups, IC, OC);
    ops->grouped_matmul_backward(NULL, dweight, dout, x, weight, rows, groups, IC, OC);
}

void fp8_step_end(gpt_model *m, const comm_group *amax_group, const comm_group *expert_amax_group) {
    fp8_state *f = m->fp8;
    if (!f || m->config.fp8.recipe != FP8_RECIPE_DELAYED || f->num_linears == 0) return;
    const kernel_ops *ops = m->ops;
    size_t tensors = (size_t)f->num_linears * FP8_ROLES, layer_tensors = (size_t)f->num_layer_linears * FP8_ROLES;
    /* TE's reduce_amax: MAX over the amax reduction group (tensor x data x context parallel);
     * the experts' over the ranks that hold the same experts: the tensor-parallel group and the
     * expert-data-parallel one when the experts are split as the dense layers, else only
     * expert_amax_group (the expert tensor-parallel group x the expert-data-parallel one: the
     * tensor-parallel peers hold other experts, or other tokens' pieces of them) */
    int experts_split_over_tp = m->config.etp_size <= 0 || m->config.etp_size == m->config.tp_size;
    size_t tp_tensors = experts_split_over_tp ? tensors : layer_tensors;
    if (m->config.tp_size > 1 && tp_tensors > 0)
        m->comm->allreduce(f->amax, tp_tensors, COMM_FLOAT, COMM_MAX, m->tp_group);
    if (amax_group && amax_group->size > 1 && layer_tensors > 0)
        m->comm->allreduce(f->amax, layer_tensors, COMM_FLOAT, COMM_MAX, amax_group);
    if (expert_amax_group && expert_amax_group->size > 1 && tensors > layer_tensors)
        m->comm->allreduce(f->amax + layer_tensors, tensors - layer_tensors, COMM_FLOAT, COMM_MAX, expert_amax_group);
    ops->copy_to_host(f->host_amax, f->amax, sizeof(float) * tensors);
    ops->copy_to_host(f->host_state, f->state, sizeof(float) * tensors * f->record);
    const gpt_fp8_config *cfg = &m->config.fp8;
    for (size_t t = 0; t < tensors; t++) {
        float *scale = f->host_state + t * f->record, *history = scale + 1;
        history[0] = f->host_amax[t];
        int format = fp8_tensor_format(cfg->hybrid, (int)(t % FP8_ROLES) == FP8_ROLE_GRAD_OUTPUT);
        fp8_delayed_scaling_update(history, (size_t)cfg->amax_history_len, 1, scale,
                                   (fp8_amax_compute_algo)cfg->amax_compute_algo, format, cfg->margin);
    }
    ops->copy_from_host(f->state, f->host_state, sizeof(float) * tensors * f->record);
    ops->zero(f->amax, sizeof(float) * tensors);
    fp8_weights_changed(m); /* new scales, and the optimizer moves the weights next */
}

/* whether layer `layer` has linear `gemm` (an MoE layer's fc1 and fc2 are its shared expert's) */
static int layer_has_gemm(const gpt_config *c, int layer, int gemm) {
    return gemm < FP8_GEMM_FC1 || !gpt_layer_is_moe(c, layer) || c->moe_shared_expert_intermediate_size > 0;
}

void fp8_extra_state_name(const gpt_config *c, int layer, fp8_gemm gemm, char *out, size_t size) {
    int shared = gemm >= FP8_GEMM_FC1 && gpt_layer_is_moe(c, layer);
    snprintf(out, size, "decoder.layers.%d.%s%s._extra_state", layer, shared ? "mlp.shared_experts." : "",
             shared ? gemm_names[gemm] + 4 : gemm_names[gemm]);
}

void fp8_sharded_state(const gpt_model *m, int dp_rank, sharded_state *state) {
    const fp8_state *f = m->fp8;
    const gpt_config *c = &m->config;
    if (!f) return;
    size_t per_linear = FP8_ROLES * f->record;
    for (int layer = 0; layer < c->num_layers; layer++) {
        if (!fp8_layer_in_fp8(c, layer)) continue;
        for (int g = 0; g < FP8_GEMMS; g++) {
            if (!layer_has_gemm(c, layer, g)) continue;
            char name[PARAM_NAME_MAX];
            fp8_extra_state_name(c, layer, (fp8_gemm)g, name, sizeof name);
            int tensor = sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, name, FP8_ROLES, (int64_t)f->record);
            if (f->layer_linear[layer] < 0) continue;
            shard_block whole = {0, 0, (int64_t)f->record};
            sharded_state_add(state, tensor, shard_range_part(&whole, 0, per_linear),
                              f->state + (size_t)(f->layer_linear[layer] + g) * per_linear,
                              c->tp_rank == 0 && dp_rank == 0);
        }
        if (!gpt_layer_is_moe(c, layer)) continue;
        for (int which = 0; which < 2; which++) {  /* the experts: rows [3 e, 3 e + 3) are expert e's */
            char name[PARAM_NAME_MAX];
            snprintf(name, sizeof name, "decoder.layers.%d.mlp.experts.linear_fc%d._extra_state", layer, which + 1);
            int tensor = sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, name, (int64_t)c->num_experts * FP8_ROLES,
                                              (int64_t)f->record);
            if (f->layer_experts[layer] < 0) continue;
            for (int e = 0; e < f->local_experts; e++) {
                int global = (c->ep_size > 1 ? c->ep_rank : 0) * f->local_experts + e;
                shard_block block = {(int64_t)global * FP8_ROLES, 0, (int64_t)f->record};
                sharded_state_add(state, tensor, shard_range_part(&block, 0, per_linear),
                                  f->state + expert_linear(f, layer, e, which) * per_linear,
                                  (c->etp_size > 0 ? c->etp_rank : c->tp_rank) == 0 && c->expert_dp_rank == 0);
            }
        }
    }
}

void fp8_describe(const gpt_config *c, char *out, size_t size) {
    const gpt_fp8_config *f = &c->fp8;
    char recipe[128];
    if (f->recipe == FP8_RECIPE_DELAYED)
        snprintf(recipe, sizeof recipe, "delayed scaling (amax history %d, %s, margin %d)", f->amax_history_len,
                 f->amax_compute_algo == FP8_AMAX_MAX ? "max" : "most_recent", f->margin);
    else
        snprintf(recipe, sizeof recipe, "tensorwise current scaling");
    int count = fp8_layers_in_fp8(c);
    char which[128] = "";
    if (count > 0 && count < c->num_layers)
        snprintf(which, sizeof which, ": layers %d-%d, the first %d and the last %d in bf16", f->layers_at_start_in_bf16,
                 c->num_layers - f->layers_at_end_in_bf16 - 1, f->layers_at_start_in_bf16, f->layers_at_end_in_bf16);
    snprintf(out, size, "fp8: %s format (%s), %s, %s wgrad; %d of %d layers in fp8%s (their linear_qkv, linear_proj, "
             "linear_fc1, linear_fc2%s; attention%s and the output layer in the compute dtype)",
             f->hybrid ? "hybrid" : "e4m3", f->hybrid ? "E4M3 forward, E5M2 gradients" : "E4M3 everywhere", recipe,
             f->wgrad ? "fp8" : "high-precision", count, c->num_layers, which,
             c->num_experts > 0 ? ", the experts' and shared experts'" : "", c->num_experts > 0 ? ", the router" : "");
}
