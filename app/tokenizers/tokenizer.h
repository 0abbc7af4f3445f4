/* tokenizer.h: Megatron-LM compatible tokenizers (GPT2BPETokenizer, BertWordPieceLowerCase,
 * BertWordPieceCase, NullTokenizer, HuggingFaceTokenizer for byte-level BPE tokenizer.json,
 * Llama2Tokenizer / SentencePieceTokenizer / GPTSentencePieceTokenizer through libsentencepiece)
 * behind one opaque handle.
 *
 * A tokenizer keeps scratch buffers and a BPE cache, so use one handle per thread. */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tokenizer tokenizer;

/* Builds a tokenizer of the given Megatron type name.
 *   GPT2BPETokenizer       vocab_file = vocab.json, merge_file = merges.txt
 *   BertWordPieceLowerCase vocab_file = vocab.txt (merge_file unused)
 *   BertWordPieceCase      vocab_file = vocab.txt (merge_file unused)
 *   NullTokenizer          null_vocab_size = --vocab-size (files unused)
 * Returns NULL and writes a message naming the file and the problem into err. */
tokenizer *tokenizer_create(const char *type, const char *vocab_file, const char *merge_file,
                            int null_vocab_size, char *err, size_t errlen);
/* The same with Megatron's --tokenizer-model, which these types read:
 *   HuggingFaceTokenizer   a directory with tokenizer.json (and tokenizer_config.json, whose
 *                          eos_token is the EOD), or the tokenizer.json file; encode adds the
 *                          post-processor's tokens (Llama 3's BOS) as tokenizer(text) does
 *   Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer
 *                          a SentencePiece tokenizer.model; no BOS added, EOD = the model's EOS
 * tokenizer_eod is -1 when the tokenizer names no end of document. */
tokenizer *tokenizer_create_with_model(const char *type, const char *vocab_file,
                                       const char *merge_file, const char *tokenizer_model,
                                       int null_vocab_size, char *err, size_t errlen);
void tokenizer_free(tokenizer *tok);

/* Appends the ids of text[0..len) to the growable buffer *ids (n_ids used, cap allocated;
 * realloc'd as needed, so a streaming caller can reuse it). Returns 0, or -1 on error
 * (out of memory, or input a NullTokenizer cannot parse); see tokenizer_last_error. */
int tokenizer_encode(tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                     size_t *cap);

/* Text of ids, malloc'd and NUL-terminated; the caller frees it. NULL when an id is out of
 * range or memory runs out. GPT-2 output is raw bytes and may hold NULs or invalid UTF-8:
 * tokenizer_decode_bytes also returns the length. */
char *tokenizer_decode(tokenizer *tok, const int32_t *ids, size_t n);
char *tokenizer_decode_bytes(tokenizer *tok, const int32_t *ids, size_t n, size_t *out_len);

const char *tokenizer_type(const tokenizer *tok);
int tokenizer_vocab_size(const tokenizer *tok); /* unpadded, as Megatron's tokenizer.vocab_size */
int tokenizer_eod(const tokenizer *tok);

/* BERT special ids; -1 for tokenizers without them. bos/eos are Megatron's added [BOS]/[EOS]. */
int tokenizer_cls(const tokenizer *tok);
int tokenizer_sep(const tokenizer *tok);
int tokenizer_pad(const tokenizer *tok);
int tokenizer_mask(const tokenizer *tok);
int tokenizer_unk(const tokenizer *tok);
int tokenizer_bos(const tokenizer *tok);
int tokenizer_eos(const tokenizer *tok);

/* The message of the last failed encode/decode ("" when none). */
const char *tokenizer_last_error(const tokenizer *tok);

#endif
