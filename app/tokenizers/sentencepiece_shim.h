/* sentencepiece_shim.h: a C view of libsentencepiece's SentencePieceProcessor (a C++ class),
 * for the SentencePiece tokenizers (Llama2Tokenizer, SentencePieceTokenizer,
 * GPTSentencePieceTokenizer). The implementation is the one C++ file of the tree,
 * sentencepiece_shim.cc; no C++ exception crosses this interface. */
#ifndef SENTENCEPIECE_SHIM_H
#define SENTENCEPIECE_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spm_model spm_model;

/* Loads a tokenizer.model; NULL with "PATH: why" in err when it cannot. */
spm_model *spm_model_load(const char *path, char *err, size_t errlen);
void spm_model_free(spm_model *model);

/* Appends the ids of text[0..len) (UTF-8) to *ids as SentencePieceProcessor::Encode does
 * (no BOS/EOS added). 0, or -1 with a message in err. */
int spm_model_encode(spm_model *model, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                     size_t *cap, char *err, size_t errlen);

/* Text of ids (SentencePieceProcessor::Decode), malloc'd and NUL-terminated, its length in
 * *out_len; NULL when an id is out of range or memory runs out. */
char *spm_model_decode(spm_model *model, const int32_t *ids, size_t n, size_t *out_len);

int spm_model_piece_size(const spm_model *model); /* the vocabulary size */
int spm_model_bos(const spm_model *model);        /* -1 when the model has none */
int spm_model_eos(const spm_model *model);        /* -1 when the model has none */

#ifdef __cplusplus
}
#endif

#endif
