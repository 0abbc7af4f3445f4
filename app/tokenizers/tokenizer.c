/* tokenizer.c: the tokenizer factory (Megatron's build_tokenizer by type name), the shared
 * accessors, and NullTokenizer (ids written as whitespace-separated integers). */
#include "app/tokenizers/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app/tokenizers/sentencepiece_shim.h"
#include "app/tokenizers/tokenizer_internal.h"

enum tokenizer_kind { kind_gpt2, kind_wordpiece, kind_null, kind_hf, kind_sentencepiece };

struct tokenizer {
    enum tokenizer_kind kind;
    const char *type_name;
    gpt2_bpe *gpt2;
    wordpiece *wordpiece;
    hf_tokenizer *hf;
    spm_model *sentencepiece;
    int vocab_size, eod;
    wordpiece_special_ids special;
    char last_error[256];
};

static const char valid_types[] =
    "GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase, NullTokenizer, "
    "HuggingFaceTokenizer, Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer";

tokenizer *tokenizer_create(const char *type, const char *vocab_file, const char *merge_file,
                            int null_vocab_size, char *err, size_t errlen) {
    return tokenizer_create_with_model(type, vocab_file, merge_file, NULL, null_vocab_size, err, errlen);
}

tokenizer *tokenizer_create_with_model(const char *type, const char *vocab_file,
                                       const char *merge_file, const char *tokenizer_model,
                                       int null_vocab_size, char *err, size_t errlen) {
    tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        snprintf(err, errlen, "tokenizer: out of memory");
        return NULL;
    }
    tok->special = (wordpiece_special_ids){-1, -1, -1, -1, -1, -1, -1};
    if (!type) type = "(none)";
    if (strcmp(type, "GPT2BPETokenizer") == 0) {
        tok->kind = kind_gpt2;
        tok->type_name = "GPT2BPETokenizer";
        tok->gpt2 = gpt2_bpe_load(vocab_file, merge_file, err, errlen);
        if (!tok->gpt2) goto fail;
        tok->vocab_size = gpt2_bpe_vocab_size(tok->gpt2);
        tok->eod = gpt2_bpe_token_id(tok->gpt2, "<|endoftext|>");
        if (tok->eod < 0) {
            snprintf(err, errlen, "GPT-2 vocab file %s: has no <|endoftext|> token (the EOD id)",
                     vocab_file);
            goto fail;
        }
    } else if (strcmp(type, "BertWordPieceLowerCase") == 0 ||
               strcmp(type, "BertWordPieceCase") == 0) {
        int lower_case = strcmp(type, "BertWordPieceLowerCase") == 0;
        tok->kind = kind_wordpiece;
        tok->type_name = lower_case ? "BertWordPieceLowerCase" : "BertWordPieceCase";
        if (!vocab_file) {
            snprintf(err, errlen, "%s needs a vocab file (vocab.txt)", tok->type_name);
            goto fail;
        }
        tok->wordpiece = wordpiece_load(vocab_file, lower_case, err, errlen);
        if (!tok->wordpiece) goto fail;
        tok->vocab_size = wordpiece_vocab_size(tok->wordpiece);
        tok->special = wordpiece_specials(tok->wordpiece);
        tok->eod = tok->special.eos; /* Megatron: eod is the added [EOS] */
    } else if (strcmp(type, "NullTokenizer") == 0) {
        tok->kind = kind_null;
        tok->type_name = "NullTokenizer";
        if (null_vocab_size <= 0) {
            snprintf(err, errlen, "NullTokenizer needs --vocab-size > 0 (got %d)",
                     null_vocab_size);
            goto fail;
        }
        /* Megatron: ids 0..N-1 are text, N is EOD, so the vocabulary holds N + 1 ids */
        tok->vocab_size = null_vocab_size + 1;
        tok->eod = null_vocab_size;
    } else if (strcmp(type, "HuggingFaceTokenizer") == 0) {
        tok->kind = kind_hf;
        tok->type_name = "HuggingFaceTokenizer";
        tok->hf = hf_tokenizer_load(tokenizer_model, err, errlen);
        if (!tok->hf) goto fail;
        tok->vocab_size = hf_tokenizer_vocab_size(tok->hf);
        tok->eod = hf_tokenizer_eod(tok->hf);
        tok->special.bos = hf_tokenizer_bos(tok->hf);
        tok->special.eos = tok->eod;
    } else if (strcmp(type, "Llama2Tokenizer") == 0 || strcmp(type, "SentencePieceTokenizer") == 0 ||
               strcmp(type, "GPTSentencePieceTokenizer") == 0) {
        /* Megatron builds all three from the SentencePiece library: ids as the model encodes
         * them (no BOS added), EOD = the model's EOS */
        tok->kind = kind_sentencepiece;
        tok->type_name = strcmp(type, "Llama2Tokenizer") == 0 ? "Llama2Tokenizer"
                         : strcmp(type, "SentencePieceTokenizer") == 0 ? "SentencePieceTokenizer"
                                                                         : "GPTSentencePieceTokenizer";
        if (!tokenizer_model || !tokenizer_model[0]) {
            snprintf(err, errlen, "%s needs --tokenizer-model (a SentencePiece tokenizer.model)", tok->type_name);
            goto fail;
        }
        tok->sentencepiece = spm_model_load(tokenizer_model, err, errlen);
        if (!tok->sentencepiece) goto fail;
        tok->vocab_size = spm_model_piece_size(tok->sentencepiece);
        tok->eod = spm_model_eos(tok->sentencepiece);
        tok->special.bos = spm_model_bos(tok->sentencepiece);
        tok->special.eos = tok->eod;
    } else {
        snprintf(err, errlen, "unknown tokenizer type \"%s\"; valid types: %s", type, valid_types);
        goto fail;
    }
    return tok;
fail:
    tokenizer_free(tok);
    return NULL;
}

void tokenizer_free(tokenizer *tok) {
    if (!tok) return;
    gpt2_bpe_free(tok->gpt2);
    wordpiece_free(tok->wordpiece);
    hf_tokenizer_free(tok->hf);
    spm_model_free(tok->sentencepiece);
    free(tok);
}

static int null_encode(tokenizer *tok, const char *text, size_t len, int32_t **ids,
                       size_t *n_ids, size_t *cap) {
    size_t i = 0;
    while (i < len) {
        while (i < len && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
        if (i == len) break;
        char digits[24];
        size_t n = 0;
        while (i < len && !(text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) {
            if (n + 1 < sizeof digits) digits[n] = text[i];
            n++;
            i++;
        }
        if (n >= sizeof digits) n = sizeof digits - 1;
        digits[n] = '\0';
        char *end;
        errno = 0;
        long value = strtol(digits, &end, 10);
        if (*end != '\0' || errno != 0 || value < 0 || value >= tok->vocab_size) {
            snprintf(tok->last_error, sizeof tok->last_error,
                     "NullTokenizer: \"%s\" is not an id in [0, %d)", digits, tok->vocab_size);
            return -1;
        }
        if (token_ids_push(ids, n_ids, cap, (int32_t)value) != 0) goto out_of_memory;
    }
    return 0;
out_of_memory:
    snprintf(tok->last_error, sizeof tok->last_error, "NullTokenizer: out of memory");
    return -1;
}

static char *null_decode(tokenizer *tok, const int32_t *ids, size_t n, size_t *out_len) {
    char *text = malloc(n * 12 + 1);
    if (!text) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab_size) {
            free(text);
            return NULL;
        }
        used += (size_t)sprintf(text + used, i ? " %d" : "%d", (int)ids[i]);
    }
    text[used] = '\0';
    if (out_len) *out_len = used;
    return text;
}

int tokenizer_encode(tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                     size_t *cap) {
    tok->last_error[0] = '\0';
    int rc;
    switch (tok->kind) {
    case kind_gpt2: rc = gpt2_bpe_encode(tok->gpt2, text, len, ids, n_ids, cap); break;
    case kind_wordpiece: rc = wordpiece_encode(tok->wordpiece, text, len, ids, n_ids, cap); break;
    case kind_hf: rc = hf_tokenizer_encode(tok->hf, text, len, ids, n_ids, cap); break;
    case kind_sentencepiece:
        return spm_model_encode(tok->sentencepiece, text, len, ids, n_ids, cap, tok->last_error,
                                sizeof tok->last_error);
    default: return null_encode(tok, text, len, ids, n_ids, cap);
    }
    if (rc != 0)
        snprintf(tok->last_error, sizeof tok->last_error, "%s: encode failed (out of memory)",
                 tok->type_name);
    return rc;
}

char *tokenizer_decode_bytes(tokenizer *tok, const int32_t *ids, size_t n, size_t *out_len) {
    tok->last_error[0] = '\0';
    char *text;
    switch (tok->kind) {
    case kind_gpt2: text = gpt2_bpe_decode(tok->gpt2, ids, n, out_len); break;
    case kind_wordpiece: text = wordpiece_decode(tok->wordpiece, ids, n, out_len); break;
    case kind_hf: text = hf_tokenizer_decode(tok->hf, ids, n, out_len); break;
    case kind_sentencepiece: text = spm_model_decode(tok->sentencepiece, ids, n, out_len); break;
    default: text = null_decode(tok, ids, n, out_len); break;
    }
    if (!text)
        snprintf(tok->last_error, sizeof tok->last_error,
                 "%s: decode failed (an id outside [0, %d), or out of memory)", tok->type_name,
                 tok->vocab_size);
    return text;
}

char *tokenizer_decode(tokenizer *tok, const int32_t *ids, size_t n) {
    return tokenizer_decode_bytes(tok, ids, n, NULL);
}

const char *tokenizer_type(const tokenizer *tok) { return tok->type_name; }
int tokenizer_vocab_size(const tokenizer *tok) { return tok->vocab_size; }
int tokenizer_eod(const tokenizer *tok) { return tok->eod; }
int tokenizer_cls(const tokenizer *tok) { return tok->special.cls; }
int tokenizer_sep(const tokenizer *tok) { return tok->special.sep; }
int tokenizer_pad(const tokenizer *tok) { return tok->special.pad; }
int tokenizer_mask(const tokenizer *tok) { return tok->special.mask; }
int tokenizer_unk(const tokenizer *tok) { return tok->special.unk; }
int tokenizer_bos(const tokenizer *tok) { return tok->special.bos; }
int tokenizer_eos(const tokenizer *tok) { return tok->special.eos; }
const char *tokenizer_last_error(const tokenizer *tok) { return tok->last_error; }
