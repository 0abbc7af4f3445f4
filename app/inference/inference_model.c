/* inference_model.c: see inference_model.h. */
#include "app/inference/inference_model.h"
#include "app/checkpoint/dist_checkpoint.h"
#include "app/core/error.h"
#include "app/model/gpt_sharded_state.h"
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
    /* the architecture: generation runs GPT models (learned positions, LayerNorm, GeLU, biases,
     * multi-head attention); checkpoints written before these attributes existed are GPT */
    int64_t value;
    char *normalization = hdf5_read_string_attribute(args, "normalization");
    char *positions = hdf5_read_string_attribute(args, "position_embedding_type");
    int gpt = (!normalization || !strcmp(normalization, "LayerNorm")) &&
              (!positions || !strcmp(positions, "learned_absolute")) &&
              (checkpoint_get_int(f, "/args", "swiglu", &value) != 0 || value == 0) &&
              (checkpoint_get_int(f, "/args", "add_bias_linear", &value) != 0 || value == 1) &&
              (checkpoint_get_int(f, "/args", "num_query_groups", &value) != 0 || value == 0 ||
               value == c->num_attention_heads);
    free(normalization);
    free(positions);
    H5Oclose(args);
    if (!gpt)
        user_error("checkpoint %s is a Llama-style model (RoPE, RMSNorm, SwiGLU, grouped-query attention or no "
                   "biases): generation supports GPT models only so far", f->path);
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

void inference_model_load(inference_model *im, const char *dir, const kernel_ops *ops, uint64_t seed) {
    memset(im, 0, sizeof *im);
    im->self = (comm_group){.name = "tensor-parallel", .mpi = MPI_COMM_SELF, .rank = 0, .size = 1};
    dist_checkpoint c;
    if (!dist_checkpoint_open(&c, dir, MPI_COMM_SELF, 0))
        user_error("--load %s: no checkpoint there (no %s)", dir, CHECKPOINT_TRACKER_NAME);
    snprintf(im->path, sizeof im->path, "%s", c.names.file);
    gpt_config config;
    config_from_checkpoint(&c.file, im, &config, seed);
    if (checkpoint_get_int(&c.file, "/", "iteration", &im->iteration) != 0) im->iteration = 0;
    gpt_model *m = &im->model;
    gpt_model_create(m, &config, ops, NULL, &im->self);
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

void inference_model_free(inference_model *im) {
    gpt_model_free(&im->model);
    memset(im, 0, sizeof *im);
}
