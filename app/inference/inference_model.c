/* inference_model.c: see inference_model.h. */
#include "config.h"
#include "app/inference/inference_model.h"
#include "app/checkpoint/dist_checkpoint.h"
#include "app/core/error.h"
#include "app/inference/inference_moe.h"
#include "app/model/gpt_sharded_state.h"
#include "app/model/moe_expert_bias.h"
#include "app/model/window_attention.h"
#include "io/hdf5_attributes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t required_int(checkpoint_file *f, const char *name) {
    int64_t value;
    if (checkpoint_get_int(f, "/args", name, &value) != 0)
        user_error("checkpoint %s lacks the attribute /args/%s", f->path, name);
    return value;
}

/* the model's shape from the checkpoint's /args */
static void config_from_checkpoint(checkpoint_file *f, inference_model *im, gpt_config *c, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->num_layers = (int)required_int(f, "num_layers");
    c->hidden_size = (int)required_int(f, "hidden_size");
    c->num_attention_heads = (int)required_int(f, "num_attention_heads");
    c->kv_channels = (int)required_int(f, "kv_channels");
    c->ffn_hidden_size = (int)required_int(f, "ffn_hidden_size");
    c->padded_vocab_size = (int)required_int(f, "padded_vocab_size");
    c->max_position_embeddings = (int)required_int(f, "max_position_embeddings");
    c->untie_embeddings_and_output_weights = (int)required_int(f, "untie_embeddings_and_output_weights");
    im->vocab_size = (int)required_int(f, "vocab_size");
    im->seq_length = (int)required_int(f, "seq_length");
    hid_t args = H5Oopen(f->file, "/args", H5P_DEFAULT);
    double eps = 1e-5;
    if (args < 0 || hdf5_read_scalar_attribute(args, "layernorm_epsilon", H5T_NATIVE_DOUBLE, 1, &eps) != 0)
        user_error("checkpoint %s lacks the attribute /args/layernorm_epsilon", f->path);
    char *type = hdf5_read_string_attribute(args, "tokenizer_type");
    snprintf(im->tokenizer_type, sizeof im->tokenizer_type, "%s", type ? type : "NullTokenizer");
    free(type);
    /* the architecture, under Megatron's argument names; checkpoints written before these
     * attributes existed are GPT (learned positions, LayerNorm, GeLU, biases, multi-head) */
    int64_t value;
    char *normalization = hdf5_read_string_attribute(args, "normalization");
    char *positions = hdf5_read_string_attribute(args, "position_embedding_type");
    int known_norm = !normalization || !strcmp(normalization, "LayerNorm") || !strcmp(normalization, "RMSNorm");
    int known_positions = !positions || !strcmp(positions, "learned_absolute") || !strcmp(positions, "rope") ||
                          !strcmp(positions, "none");
    if (!known_norm || !known_positions)
        user_error("checkpoint %s: unknown /args/normalization '%s' or position_embedding_type '%s'", f->path,
                   normalization ? normalization : "", positions ? positions : "");
    c->rmsnorm = normalization && !strcmp(normalization, "RMSNorm");
    c->position_embedding_type = !positions || !strcmp(positions, "learned_absolute") ? POSITION_LEARNED_ABSOLUTE
                                 : !strcmp(positions, "rope")                         ? POSITION_ROPE
                                                                                      : POSITION_NONE;
    free(normalization);
    free(positions);
    c->swiglu = checkpoint_get_int(f, "/args", "swiglu", &value) == 0 && value != 0;
    c->disable_bias_linear = checkpoint_get_int(f, "/args", "add_bias_linear", &value) == 0 && value == 0;
    /* the GeLU MLP's form: exact (erf) without the bias-GeLU fusion; a checkpoint from before
     * bias_gelu_fusion was recorded computed the tanh form */
    c->gelu_erf = !c->swiglu && checkpoint_get_int(f, "/args", "bias_gelu_fusion", &value) == 0 && value == 0;
    c->add_qkv_bias = checkpoint_get_int(f, "/args", "add_qkv_bias", &value) == 0 && value != 0;
    c->num_query_groups = checkpoint_get_int(f, "/args", "num_query_groups", &value) == 0 && value > 0
                              ? (int)value : c->num_attention_heads;
    c->rotary_interleaved = checkpoint_get_int(f, "/args", "rotary_interleaved", &value) == 0 && value != 0;
    if (checkpoint_get_int(f, "/args", "rotary_seq_len_interpolation_factor", &value) == 0 && value > 1)
        c->rotary_seq_len_interpolation_factor = (float)value;
    double rotary = 0.0;
    if (hdf5_read_scalar_attribute(args, "rotary_base", H5T_NATIVE_DOUBLE, 1, &rotary) == 0) c->rotary_base = (float)rotary;
    if (hdf5_read_scalar_attribute(args, "rotary_percent", H5T_NATIVE_DOUBLE, 1, &rotary) == 0) c->rotary_percent = (float)rotary;
    double scaling = 0.0;
    int layernorm_1p = checkpoint_get_int(f, "/args", "apply_layernorm_1p", &value) == 0 && value != 0;
    int rope_scaling = checkpoint_get_int(f, "/args", "use_rope_scaling", &value) == 0 && value != 0 &&
                       hdf5_read_scalar_attribute(args, "rope_scaling_factor", H5T_NATIVE_DOUBLE, 1, &scaling) == 0 &&
                       scaling > 0.0;
    H5Oclose(args);
    c->apply_layernorm_1p = layernorm_1p;                       /* norm weights stored as w - 1 */
    c->rope_scaling_factor = rope_scaling ? (float)scaling : 0.0f; /* Llama 3's frequency scaling */
    if (c->num_query_groups > c->num_attention_heads || c->num_attention_heads % c->num_query_groups != 0)
        user_error("checkpoint %s: %d attention heads do not split into %d query groups", f->path,
                   c->num_attention_heads, c->num_query_groups);
    im->moe_capacity_factor = inference_moe_config(f, c);
    /* sliding-window attention: the flags the training run was given (app/model/window_attention.h) */
    char *window_size = checkpoint_get_string(f, "/args", "window_size");
    char *skip_freq = checkpoint_get_string(f, "/args", "window_attn_skip_freq");
    char window_error[512];
    int window_bad = window_attention_configure(c, window_size ? window_size : "", skip_freq ? skip_freq : "",
                                                c->num_layers, NULL, 0, window_error, sizeof window_error);
    free(window_size);
    free(skip_freq);
    if (window_bad) user_error("checkpoint %s: /args: %s", f->path, window_error);
    c->layernorm_epsilon = (float)eps;
    c->seq_length = 1;          /* the training activations are not used: keep them small */
    c->micro_batch_size = 1;
    c->init_method_std = 0.02f;
    c->seed = seed;
    c->tp_size = c->pp_size = c->virtual_stages = c->activation_slots = 1;
    if (c->num_layers < 1 || c->hidden_size < 1 || c->num_attention_heads < 1 || c->kv_channels < 1 ||
        c->ffn_hidden_size < 1 || c->padded_vocab_size < 1 || c->max_position_embeddings < 1 ||
        im->vocab_size < 1 || im->vocab_size > c->padded_vocab_size)
        user_error("checkpoint %s: /args describe no valid model (layers %d, hidden %d, heads %d, vocabulary %d of %d)",
                   f->path, c->num_layers, c->hidden_size, c->num_attention_heads, im->vocab_size, c->padded_vocab_size);
}

/* MPI for host-memory backends; NCCL for device memory */
static const comm_ops *select_comm(const kernel_ops *ops) {
    if (ops->host_memory) return comm_mpi();
#ifdef HAVE_CUDA
    return comm_nccl();
#else
    FATAL("backend %s needs a device communication library, and this build has none", ops->name);
#endif
}

/* the groups the forward uses, for attaching and detaching the communication backend */
static int model_groups(inference_model *im, comm_group **groups) {
    int count = 0;
    comm_group *all[] = {&im->topo.world, &im->topo.tp, &im->topo.pp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->mpi != MPI_COMM_NULL) groups[count++] = all[i];
    if (im->topo.ep_size > 1) groups[count++] = &im->topo.ep_own; /* the experts' token all-to-all */
    return count;
}

/* the tp x pp (x ep) layout over MPI_COMM_WORLD, checked against the model. Expert parallelism
 * takes its ranks from the data-parallel dimension, as in training (Megatron's order
 * tp-cp-ep-dp-pp): ep replicas of the dense part, in lockstep on the same tokens, each holding
 * E/ep experts. */
static void parallel_setup(inference_model *im, gpt_config *c, const kernel_ops *ops, int tp_size, int pp_size,
                           int ep_size) {
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (world_size != tp_size * pp_size * ep_size)
        user_error("%d ranks started for --tensor-model-parallel-size %d x --pipeline-model-parallel-size %d x "
                   "--expert-model-parallel-size %d: generation runs one model on exactly tp x pp x ep ranks",
                   world_size, tp_size, pp_size, ep_size);
    if (ep_size > 1 && (c->num_experts == 0 || c->num_experts % ep_size))
        user_error("--expert-model-parallel-size %d needs a mixture-of-experts checkpoint whose experts it divides "
                   "(this one has %d)", ep_size, c->num_experts);
    int groups = c->num_query_groups;
    if (c->num_attention_heads % tp_size || groups % tp_size || c->ffn_hidden_size % tp_size ||
        c->padded_vocab_size % tp_size)
        user_error("--tensor-model-parallel-size %d does not divide the model (%d heads, %d query groups, ffn %d, "
                   "padded vocabulary %d)", tp_size, c->num_attention_heads, groups, c->ffn_hidden_size,
                   c->padded_vocab_size);
    if (c->num_experts > 0 && (c->moe_ffn_hidden_size % tp_size || c->moe_shared_expert_intermediate_size % tp_size))
        user_error("--tensor-model-parallel-size %d does not divide the experts' ffn %d or the shared experts' %d",
                   tp_size, c->moe_ffn_hidden_size, c->moe_shared_expert_intermediate_size);
    if (c->num_layers % pp_size)
        user_error("--pipeline-model-parallel-size %d does not divide the %d layers", pp_size, c->num_layers);
    if (tp_size * pp_size * ep_size == 1) return;
    parallel_layout layout = {tp_size, pp_size, ep_size, "tp-cp-ep-dp-pp", ep_size, 0, 1, 0};
    topology_create(&im->topo, &layout);
    im->parallel = 1;
    im->comm = select_comm(ops);
    comm_group *list[4];
    int n = model_groups(im, list);
    for (int i = 0; i < n; i++) im->comm->attach(list[i]);
    c->tp_size = im->topo.tp_size;
    c->tp_rank = im->topo.tp_rank;
    c->pp_size = im->topo.pp_size;
    c->pp_rank = im->topo.pp_rank;
    if (im->topo.ep_size > 1) {
        c->ep_size = im->topo.ep_size;
        c->ep_rank = im->topo.ep_rank;
        c->expert_dp_rank = im->topo.expert_dp_rank;
        c->ep_group = im->topo.ep;
    }
}

void inference_model_load(inference_model *im, const char *dir, const kernel_ops *ops, uint64_t seed, int tp_size,
                          int pp_size, int ep_size) {
    memset(im, 0, sizeof *im);
    im->self = (comm_group){.name = "tensor-parallel", .mpi = MPI_COMM_SELF, .rank = 0, .size = 1};
    dist_checkpoint c;
    /* every rank reads its own shards of the file alone */
    if (!dist_checkpoint_open(&c, dir, MPI_COMM_SELF, 0))
        user_error("--load %s: no checkpoint there (no %s)", dir, CHECKPOINT_TRACKER_NAME);
    snprintf(im->path, sizeof im->path, "%s", c.names.file);
    gpt_config config;
    config_from_checkpoint(&c.file, im, &config, seed);
    if (checkpoint_get_int(&c.file, "/", "iteration", &im->iteration) != 0) im->iteration = 0;
    parallel_setup(im, &config, ops, tp_size, pp_size, ep_size);
    gpt_model *m = &im->model;
    gpt_model_create(m, &config, ops, im->comm, im->parallel ? &im->topo.tp : &im->self);
    /* the fp32 weights: the parameters themselves on the CPU backend, a staging copy to round
     * into the compute dtype otherwise */
    float *weights = m->mixed_precision ? ops->alloc(sizeof(float) * m->num_elements) : (float *)m->param_buffer;
    sharded_state state = {0};
    gpt_declare_tensors(m, CHECKPOINT_MODEL_GROUP, &state);
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        gpt_add_param_range(&state, sharded_state_tensor(&state, CHECKPOINT_MODEL_GROUP, p->name, p->rows, p->cols),
                            p, 0, p->numel, weights + p->offset, 0);
    }
    moe_expert_bias_sharded_state(m, 0, &state);  /* the MoE layers' expert bias, when trained with one */
    dist_checkpoint_check(&c, &state);
    dist_checkpoint_read(&c, &state, ops);
    sharded_state_free(&state);
    dist_checkpoint_close(&c);
    if (m->mixed_precision) {
        ops->float_to_act(m->param_buffer, weights, m->num_elements);
        ops->release(weights);
    }
    ops->synchronize();
}

const comm_group *inference_model_pp_group(const inference_model *im) {
    return im->parallel && im->topo.pp_size > 1 ? &im->topo.pp : NULL;
}

int inference_model_rank(const inference_model *im) { return im->parallel ? im->topo.world_rank : 0; }

void inference_model_free(inference_model *im) {
    gpt_model_free(&im->model);
    if (im->parallel) {
        comm_group *list[4];
        int n = model_groups(im, list);
        for (int i = 0; i < n; i++) im->comm->detach(list[i]);
        topology_free(&im->topo);
    }
    memset(im, 0, sizeof *im);
}
