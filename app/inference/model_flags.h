/* model_flags.h: the model and tokenizer flags that Megatron-LM's inference and evaluation
 * scripts pass (tools/run_text_generation_server.py, tasks/main.py, examples/inference/...:
 * --num-layers, --hidden-size, --num-attention-heads, --max-position-embeddings, --swiglu,
 * --normalization, --fp16, --use-checkpoint-args, ...), as rows that the generation server and
 * the evaluation tool put into their option tables. The model here always comes from the
 * checkpoint's /args, so these flags are statements about the checkpoint:
 *  - a shape or architecture flag the user gives is compared with the checkpoint, and one that
 *    contradicts it stops the program naming both values ("--num-layers 24, but the checkpoint
 *    ... has num_layers 2"); a boolean flag left out says nothing (as Megatron's
 *    --use-checkpoint-args, which takes the architecture from the checkpoint);
 *  - flags that change nothing here (precision, kernel fusion and implementation switches,
 *    dropout, optimizer and RNG loading) are OPTION_NO_EFFECT rows, each saying why, named on a
 *    start-up line by model_flags_report. */
#ifndef MODEL_FLAGS_H
#define MODEL_FLAGS_H

#include <stddef.h>

#include "app/core/options.h"
#include "app/inference/inference_model.h"

typedef struct model_flags {
    int num_layers, hidden_size, num_attention_heads, kv_channels, ffn_hidden_size;
    int max_position_embeddings, vocab_size, make_vocab_size_divisible_by;
    int group_query_attention, num_query_groups;
    int swiglu, disable_bias_linear, untie_embeddings_and_output_weights, apply_layernorm_1p;
    int use_rotary_position_embeddings, no_position_embedding, use_rope_scaling, rotary_base;
    float rotary_percent, rope_scaling_factor, norm_epsilon, layernorm_epsilon;
    char normalization[16], position_embedding_type[32];
    char tokenizer_model[1024];
    /* mixture of experts and Qwen2's attention biases */
    int num_experts, moe_ffn_hidden_size, moe_router_topk, moe_shared_expert_intermediate_size, add_qkv_bias;
} model_flags;

#define MODEL_FLAGS_GROUP "model (checked against the checkpoint)"
#define MODEL_FLAGS_CHECKED "; the model comes from the checkpoint: a value that differs from it is refused"

/* the rows of a program whose argument struct `type` holds a model_flags `member` */
#define MODEL_FLAG_SPECS(type, member)                                                                                  \
    {"num-layers", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.num_layers), .range = "[1, inf)", .help = "transformer layers" MODEL_FLAGS_CHECKED}, \
    {"hidden-size", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.hidden_size), .range = "[1, inf)", .help = "hidden size" MODEL_FLAGS_CHECKED}, \
    {"num-attention-heads", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.num_attention_heads), .range = "[1, inf)", .help = "attention heads" MODEL_FLAGS_CHECKED}, \
    {"kv-channels", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.kv_channels), .range = "[1, inf)", .help = "projection size per head" MODEL_FLAGS_CHECKED}, \
    {"ffn-hidden-size", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.ffn_hidden_size), .range = "[1, inf)", .help = "MLP hidden size" MODEL_FLAGS_CHECKED}, \
    {"max-position-embeddings", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.max_position_embeddings), .range = "[1, inf)", .help = "longest sequence the model takes" MODEL_FLAGS_CHECKED}, \
    {"vocab-size", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.vocab_size), .range = "[1, inf)", .help = "the tokenizer's vocabulary size" MODEL_FLAGS_CHECKED}, \
    {"make-vocab-size-divisible-by", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.make_vocab_size_divisible_by), .range = "[1, inf)", .help = "the padded vocabulary of the checkpoint must be a multiple of it"}, \
    {"group-query-attention", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.group_query_attention), .help = "grouped-query attention with --num-query-groups (default 1, as Megatron)" MODEL_FLAGS_CHECKED}, \
    {"num-query-groups", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.num_query_groups), "1", .range = "[1, inf)", .help = "key/value heads" MODEL_FLAGS_CHECKED}, \
    {"swiglu", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.swiglu), .help = "SwiGLU MLP" MODEL_FLAGS_CHECKED}, \
    {"disable-bias-linear", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.disable_bias_linear), .help = "no biases in the linear layers" MODEL_FLAGS_CHECKED}, \
    {"untie-embeddings-and-output-weights", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.untie_embeddings_and_output_weights), .help = "separate output layer" MODEL_FLAGS_CHECKED}, \
    {"apply-layernorm-1p", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.apply_layernorm_1p), .help = "zero-centred norm weights" MODEL_FLAGS_CHECKED}, \
    {"normalization", MODEL_FLAGS_GROUP, OPTION_CHOICE, OPTION_AT(type, member.normalization), .choices = "LayerNorm|RMSNorm", .help = "the norm of every layer" MODEL_FLAGS_CHECKED}, \
    {"norm-epsilon", MODEL_FLAGS_GROUP, OPTION_FLOAT, OPTION_AT(type, member.norm_epsilon), .range = "(0, inf)", .help = "norm epsilon" MODEL_FLAGS_CHECKED}, \
    {"layernorm-epsilon", MODEL_FLAGS_GROUP, OPTION_FLOAT, OPTION_AT(type, member.layernorm_epsilon), .range = "(0, inf)", .help = "older name of --norm-epsilon" MODEL_FLAGS_CHECKED}, \
    {"position-embedding-type", MODEL_FLAGS_GROUP, OPTION_CHOICE, OPTION_AT(type, member.position_embedding_type), .choices = "learned_absolute|rope|none", .help = "positions" MODEL_FLAGS_CHECKED}, \
    {"use-rotary-position-embeddings", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.use_rotary_position_embeddings), .help = "deprecated spelling of --position-embedding-type rope" MODEL_FLAGS_CHECKED}, \
    {"no-position-embedding", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.no_position_embedding), .help = "deprecated: no learned position table (rope or none)" MODEL_FLAGS_CHECKED}, \
    {"rotary-base", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.rotary_base), .range = "[1, inf)", .help = "base of the rotary frequencies" MODEL_FLAGS_CHECKED}, \
    {"rotary-percent", MODEL_FLAGS_GROUP, OPTION_FLOAT, OPTION_AT(type, member.rotary_percent), .range = "(0, 1]", .help = "fraction of each head's channels that rotate" MODEL_FLAGS_CHECKED}, \
    {"use-rope-scaling", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.use_rope_scaling), .help = "Llama 3.x's rope scaling" MODEL_FLAGS_CHECKED}, \
    {"rope-scaling-factor", MODEL_FLAGS_GROUP, OPTION_FLOAT, OPTION_AT(type, member.rope_scaling_factor), .range = "(0, inf)", .help = "the factor of --use-rope-scaling" MODEL_FLAGS_CHECKED}, \
    {"num-experts", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.num_experts), .range = "[1, inf)", .help = "experts per MoE layer" MODEL_FLAGS_CHECKED}, \
    {"moe-ffn-hidden-size", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.moe_ffn_hidden_size), .range = "[1, inf)", .help = "an expert's MLP hidden size" MODEL_FLAGS_CHECKED}, \
    {"moe-router-topk", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.moe_router_topk), .range = "[1, inf)", .help = "experts per token" MODEL_FLAGS_CHECKED}, \
    {"moe-shared-expert-intermediate-size", MODEL_FLAGS_GROUP, OPTION_INT, OPTION_AT(type, member.moe_shared_expert_intermediate_size), .range = "[1, inf)", .help = "the shared experts' hidden size" MODEL_FLAGS_CHECKED}, \
    {"add-qkv-bias", MODEL_FLAGS_GROUP, OPTION_FLAG, OPTION_AT(type, member.add_qkv_bias), .help = "a bias on the QKV projection" MODEL_FLAGS_CHECKED}, \
    {"tokenizer-model", "tokenizer", OPTION_STRING, OPTION_AT(type, member.tokenizer_model), .metavar = "PATH", .help = "HuggingFaceTokenizer: tokenizer.json or its directory; Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer: tokenizer.model"}, \
    MODEL_NO_EFFECT_SPECS

#define MODEL_NO_EFFECT_GROUP "accepted from Megatron-LM's scripts, no effect here"
#define MODEL_NO_EFFECT_SPECS                                                                                           \
    {"use-checkpoint-args", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the model's shape and architecture always come from the checkpoint here; the shape flags given are checked against it"}, \
    {"use-mp-args-from-checkpoint-args", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "a checkpoint here stores global tensors and loads into the layout of --tensor-model-parallel-size and --pipeline-model-parallel-size, whatever layout saved it"}, \
    {"fp16", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "inference computes in fp32 on --device cpu and in bf16 on cuda, from the checkpoint's fp32 weights, whatever the training precision"}, \
    {"bf16", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "inference computes in fp32 on --device cpu and in bf16 on cuda, from the checkpoint's fp32 weights, whatever the training precision"}, \
    {"no-load-optim", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "inference reads only the model's weights"}, \
    {"no-load-rng", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "inference reads only the model's weights"}, \
    {"hidden-dropout", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .range = "[0, 1)", .flags = OPTION_NO_EFFECT, .help = "inference runs without dropout"}, \
    {"attention-dropout", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .range = "[0, 1)", .flags = OPTION_NO_EFFECT, .help = "inference runs without dropout"}, \
    {"sequence-parallel", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "inference keeps whole sequences on every tensor-parallel rank (the same results)"}, \
    {"distributed-backend", MODEL_NO_EFFECT_GROUP, OPTION_CHOICE, .choices = "nccl|gloo", .flags = OPTION_NO_EFFECT, .help = "the collectives follow --device: NCCL on cuda, MPI on cpu"}, \
    {"distributed-timeout-minutes", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .range = "[0, inf)", .flags = OPTION_NO_EFFECT, .help = "a rank that fails ends the job (MPI_Abort), so no rank waits forever"}, \
    {"use-cpu-initialization", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "every weight is read from the checkpoint"}, \
    {"use-mcore-models", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the model is Megatron-Core's GPTModel already (its parameter names and layout)"}, \
    {"transformer-impl", MODEL_NO_EFFECT_GROUP, OPTION_CHOICE, .choices = "local|transformer_engine|inference_optimized", .flags = OPTION_NO_EFFECT, .help = "one implementation of the layers here, the same math as both"}, \
    {"attention-backend", MODEL_NO_EFFECT_GROUP, OPTION_CHOICE, .choices = "flash|fused|unfused|local|auto", .flags = OPTION_NO_EFFECT, .help = "attention is the CPU reference on --device cpu and flash attention on cuda (the same softmax(QK^T/sqrt(d))V)"}, \
    {"use-flash-attn", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the CUDA backend always uses flash attention"}, \
    {"no-masked-softmax-fusion", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "kernel fusion changes speed, not results, and the kernels here are fixed"}, \
    {"no-bias-gelu-fusion", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the MLP's GeLU form (tanh with the fusion, exact erf without) is the checkpoint's (its bias_gelu_fusion)"}, \
    {"no-bias-dropout-fusion", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "kernel fusion changes speed, not results, and the kernels here are fixed"}, \
    {"attention-softmax-in-fp32", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the attention softmax is always computed in fp32"}, \
    {"moe-grouped-gemm", MODEL_NO_EFFECT_GROUP, OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the experts' GEMMs are always grouped here (the same results)"}, \
    {"moe-token-dispatcher-type", MODEL_NO_EFFECT_GROUP, OPTION_CHOICE, .choices = "allgather|alltoall|flex", .flags = OPTION_NO_EFFECT, .help = "with --expert-model-parallel-size the rows reach their experts by the all-to-all (the same results)"}, \
    {"moe-router-load-balancing-type", MODEL_NO_EFFECT_GROUP, OPTION_STRING, .flags = OPTION_NO_EFFECT, .help = "inference computes no load-balancing loss (Megatron-Core's InferenceTopKRouter)"}, \
    {"moe-aux-loss-coeff", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "inference computes no load-balancing loss"}, \
    {"moe-z-loss-coeff", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "inference computes no z loss"}, \
    {"moe-input-jitter-eps", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "inference routes without input jitter (Megatron-Core's InferenceTopKRouter)"}, \
    {"moe-expert-capacity-factor", MODEL_NO_EFFECT_GROUP, OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "inference drops no tokens (Megatron-Core's InferenceTopKRouter); the start-up line says when the checkpoint was trained with a capacity"}

/* Stops with user_error naming the flag, its value and the checkpoint's when a flag the user
 * gave contradicts the model im was read from (the same on every rank). */
void model_flags_check(const option_table *table, const unsigned char *given, const model_flags *flags,
                       const inference_model *im);

/* rank 0: one line naming the flags given that change nothing here (see --help for why) */
void model_flags_report(const option_table *table, const unsigned char *given);

#endif
