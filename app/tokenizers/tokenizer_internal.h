/* tokenizer_internal.h: what tokenizer.c (the factory) needs from each tokenizer implementation,
 * and the growable id buffer they share. Not part of the public interface. */
#ifndef TOKENIZER_INTERNAL_H
#define TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Appends one id to a growable buffer; 0, or -1 when out of memory. */
static inline int token_ids_push(int32_t **ids, size_t *n_ids, size_t *cap, int32_t id) {
    if (*n_ids == *cap) {
        size_t new_cap = *cap ? *cap * 2 : 256;
        int32_t *grown = realloc(*ids, new_cap * sizeof **ids);
        if (!grown) return -1;
        *ids = grown;
        *cap = new_cap;
    }
    (*ids)[(*n_ids)++] = id;
    return 0;
}

/* GPT-2 byte-level BPE (tokenizer_gpt2.c). */
typedef struct gpt2_bpe gpt2_bpe;
gpt2_bpe *gpt2_bpe_load(const char *vocab_file, const char *merge_file, char *err, size_t errlen);
void gpt2_bpe_free(gpt2_bpe *bpe);
int gpt2_bpe_encode(gpt2_bpe *bpe, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                    size_t *cap);
char *gpt2_bpe_decode(const gpt2_bpe *bpe, const int32_t *ids, size_t n, size_t *out_len);
int gpt2_bpe_vocab_size(const gpt2_bpe *bpe);
int gpt2_bpe_token_id(const gpt2_bpe *bpe, const char *token); /* -1 when absent */
/* GPT-2's split pattern, as Python's regex module reads it */
extern const char gpt2_bpe_pattern[];
/* The same byte-level BPE from a tokenizer.json's model.vocab (object) and model.merges ("a b"
 * strings or ["a", "b"] pairs), split by pattern (Python/Rust regex syntax; NULL: no split);
 * ignore_merges as Hugging Face's BPE. what names the file in messages. */
typedef struct json_t json_t;
gpt2_bpe *gpt2_bpe_from_json(json_t *vocab, json_t *merges, const char *pattern, int ignore_merges,
                             const char *what, char *err, size_t errlen);

/* Hugging Face tokenizer.json, byte-level BPE (tokenizer_hf.c). model_path: a directory with
 * tokenizer.json (and tokenizer_config.json for the EOS), or the tokenizer.json file. */
typedef struct hf_tokenizer hf_tokenizer;
hf_tokenizer *hf_tokenizer_load(const char *model_path, char *err, size_t errlen);
void hf_tokenizer_free(hf_tokenizer *hf);
int hf_tokenizer_encode(hf_tokenizer *hf, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                        size_t *cap);
char *hf_tokenizer_decode(const hf_tokenizer *hf, const int32_t *ids, size_t n, size_t *out_len);
int hf_tokenizer_vocab_size(const hf_tokenizer *hf); /* len(tokenizer): vocabulary + added tokens */
int hf_tokenizer_eod(const hf_tokenizer *hf);        /* tokenizer_config.json's eos_token; -1: none */
int hf_tokenizer_bos(const hf_tokenizer *hf);        /* the post-processor's first token; -1: none */

/* BERT WordPiece (tokenizer_wordpiece.c). */
typedef struct wordpiece wordpiece;
typedef struct {
    int cls, sep, pad, mask, unk, bos, eos;
} wordpiece_special_ids;
wordpiece *wordpiece_load(const char *vocab_file, int lower_case, char *err, size_t errlen);
void wordpiece_free(wordpiece *wp);
int wordpiece_encode(wordpiece *wp, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                     size_t *cap);
char *wordpiece_decode(const wordpiece *wp, const int32_t *ids, size_t n, size_t *out_len);
int wordpiece_vocab_size(const wordpiece *wp);
wordpiece_special_ids wordpiece_specials(const wordpiece *wp);

#endif
