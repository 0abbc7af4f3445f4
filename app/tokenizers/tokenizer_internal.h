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
