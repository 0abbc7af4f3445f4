/* hf_bert_config.h: Hugging Face MegatronBertConfig (config.json, model_type "megatron-bert") as
 * far as it defines our BERT: read with validation (refusing what our encoder does not compute:
 * relative positions, a decoder, an activation other than GeLU, more than two token types) and
 * written the way transformers writes it (sorted keys, indent 2).
 *
 * The activation: HF has one hidden_act for the MLP and the LM head's transform. The LM head
 * computes exact GeLU (Megatron-Core's BertLMHead: F.gelu); the encoder's MLP computes GeLU's
 * tanh approximation with Megatron's default bias-GeLU fusion (bias_gelu_impl) and exact GeLU
 * without it (--no-bias-gelu-fusion; the checkpoint's bias_gelu_fusion 0). The export writes
 * "gelu" for the latter (exact for both) and "gelu_new" for the former (the tanh form, exact for
 * every encoder layer; the LM head's transform then differs by the approximation, at most 4.7e-4
 * in an activation); the import takes "gelu" (recorded as bias_gelu_fusion 0), "gelu_new",
 * "gelu_pytorch_tanh" or "gelu_fast" (bias_gelu_fusion 1).
 *
 * BertConfig (model_type "bert", BertForPreTraining) is post-LN: a LayerNorm after each
 * residual sum and on the embeddings, which our pre-LN encoder (Megatron's) does not compute:
 * hf_bert_config_read refuses it, naming MegatronBert as what converts. */
#ifndef HF_BERT_CONFIG_H
#define HF_BERT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct hf_bert_config {
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
    int64_t max_position_embeddings, type_vocab_size;
    double layer_norm_eps, hidden_dropout_prob, attention_probs_dropout_prob;
    int tie_word_embeddings;
    int binary_head;             /* MegatronBertForPreTraining (1) or ForMaskedLM (0) */
    char hidden_act[32];
    char torch_dtype[16];        /* "float32", "bfloat16", ... */
} hf_bert_config;

/* 1 when the JSON file at path says "model_type": "megatron-bert" or "bert" (0 also for
 * unreadable files: the caller reports those) */
int hf_config_is_bert(const char *path);

/* Returns 0, or -1 with "PATH: what is wrong" in err (a "bert" config: why it is refused and
 * what converts instead). binary_head from "architectures": ...ForMaskedLM 0, else 1. */
int hf_bert_config_read(const char *path, hf_bert_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_bert_config_write(const char *path, const hf_bert_config *config, char *err, size_t errlen);

#endif
