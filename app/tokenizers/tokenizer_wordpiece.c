/* tokenizer_wordpiece.c: BERT WordPiece (Megatron's BertWordPieceLowerCase / BertWordPieceCase).
 * Mirrors Google's bert_tokenization.py as shipped with Megatron: BasicTokenizer (clean text,
 * space out CJK, whitespace split, for lower case: lowercase + NFD + drop Mn, split punctuation),
 * then greedy longest-match-first WordPiece with "##" continuations and [UNK] for words over
 * 200 characters or with no match. Invalid UTF-8 bytes are dropped, like decode("utf-8",
 * "ignore"). Like Megatron, [BOS] and [EOS] are appended to the vocabulary when missing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

#include "app/core/hashmap.h"
#include "app/tokenizers/tokenizer_internal.h"

enum { max_input_chars_per_word = 200 };

typedef struct {
    int32_t *data;
    size_t len, cap;
} codepoints;

struct wordpiece {
    int lower_case;
    strmap *vocab;       /* token -> id */
    char **id_token;     /* id -> token (NUL-terminated, in token_text) */
    char *token_text;
    int id_count;        /* entries in id_token */
    int vocab_size;      /* len(vocab), after adding [BOS]/[EOS] */
    wordpiece_special_ids special;
    codepoints text, word, decomposed; /* scratch */
    char *key;           /* scratch: "##" + UTF-8 of a candidate piece */
    size_t key_cap;
    size_t *char_offset; /* scratch: byte offset of each character of a sub-word */
    size_t char_offset_cap;
};

static int codepoints_push(codepoints *cps, int32_t cp) {
    if (cps->len == cps->cap) {
        size_t new_cap = cps->cap ? cps->cap * 2 : 256;
        int32_t *grown = realloc(cps->data, new_cap * sizeof *grown);
        if (!grown) return -1;
        cps->data = grown;
        cps->cap = new_cap;
    }
    cps->data[cps->len++] = cp;
    return 0;
}

static int codepoints_reserve(codepoints *cps, size_t need) {
    if (need <= cps->cap) return 0;
    int32_t *grown = realloc(cps->data, need * sizeof *grown);
    if (!grown) return -1;
    cps->data = grown;
    cps->cap = need;
    return 0;
}

void wordpiece_free(wordpiece *wp) {
    if (!wp) return;
    strmap_free(wp->vocab);
    free(wp->id_token);
    free(wp->token_text);
    free(wp->text.data);
    free(wp->word.data);
    free(wp->decomposed.data);
    free(wp->key);
    free(wp->char_offset);
    free(wp);
}

static int lookup(const wordpiece *wp, const char *token) {
    int64_t id;
    return strmap_get(wp->vocab, token, strlen(token), &id) ? (int)id : -1;
}

/* Megatron's add_token: a missing token gets id len(vocab). */
static int add_token(wordpiece *wp, const char *token) {
    int id = lookup(wp, token);
    if (id >= 0) return id;
    id = wp->vocab_size;
    if (strmap_put(wp->vocab, token, strlen(token), id) != 0) return -1;
    if (id >= wp->id_count) {
        char **grown = realloc(wp->id_token, (size_t)(id + 1) * sizeof *grown);
        if (!grown) return -1;
        for (int i = wp->id_count; i <= id; i++) grown[i] = NULL;
        wp->id_token = grown;
        wp->id_count = id + 1;
    }
    wp->id_token[id] = (char *)token; /* a string literal: [BOS] / [EOS] */
    wp->vocab_size++;
    return id;
}

wordpiece *wordpiece_load(const char *vocab_file, int lower_case, char *err, size_t errlen) {
    FILE *f = fopen(vocab_file, "rb");
    if (!f) {
        snprintf(err, errlen, "WordPiece vocab file %s: cannot open: %s", vocab_file,
                 strerror(errno));
        return NULL;
    }
    wordpiece *wp = calloc(1, sizeof *wp);
    size_t text_len = 0;
    if (wp && fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        rewind(f);
        wp->token_text = size >= 0 ? malloc((size_t)size + 1) : NULL;
        if (wp->token_text) text_len = fread(wp->token_text, 1, (size_t)size, f);
    }
    fclose(f);
    if (!wp || !wp->token_text) {
        snprintf(err, errlen, "WordPiece vocab file %s: cannot read (or out of memory)",
                 vocab_file);
        wordpiece_free(wp);
        return NULL;
    }
    wp->token_text[text_len] = '\0';
    wp->lower_case = lower_case;

    size_t lines = 0;
    for (size_t i = 0; i < text_len; i++) lines += wp->token_text[i] == '\n';
    if (text_len && wp->token_text[text_len - 1] != '\n') lines++;
    wp->vocab = strmap_create(lines + 2);
    wp->id_token = calloc(lines + 2, sizeof *wp->id_token);
    if (!wp->vocab || !wp->id_token) goto out_of_memory;

    /* one token per line, id = line number, surrounding whitespace stripped */
    char *line = wp->token_text, *end = wp->token_text + text_len;
    for (int id = 0; line < end; id++) {
        char *newline = memchr(line, '\n', (size_t)(end - line));
        char *line_end = newline ? newline : end;
        while (line < line_end && (*line == ' ' || *line == '\t' || *line == '\r')) line++;
        char *token_end = line_end;
        while (token_end > line && (token_end[-1] == ' ' || token_end[-1] == '\t' ||
                                    token_end[-1] == '\r'))
            token_end--;
        *token_end = '\0';
        if (memchr(line, '\0', (size_t)(token_end - line))) {
            snprintf(err, errlen, "WordPiece vocab file %s: line %d holds a NUL byte; expected "
                     "one UTF-8 token per line", vocab_file, id + 1);
            wordpiece_free(wp);
            return NULL;
        }
        if (strmap_put(wp->vocab, line, (size_t)(token_end - line), id) != 0) goto out_of_memory;
        wp->id_token[id] = line;
        wp->id_count = id + 1;
        line = line_end + 1;
    }
    wp->vocab_size = (int)strmap_count(wp->vocab);

    static const char *const required[] = {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"};
    int ids[5];
    for (int i = 0; i < 5; i++) {
        ids[i] = lookup(wp, required[i]);
        if (ids[i] < 0) {
            snprintf(err, errlen, "WordPiece vocab file %s: has no %s token (needs [CLS], [SEP], "
                     "[PAD], [MASK] and [UNK])", vocab_file, required[i]);
            wordpiece_free(wp);
            return NULL;
        }
    }
    wp->special.cls = ids[0];
    wp->special.sep = ids[1];
    wp->special.pad = ids[2];
    wp->special.mask = ids[3];
    wp->special.unk = ids[4];
    wp->special.bos = add_token(wp, "[BOS]");
    wp->special.eos = add_token(wp, "[EOS]");
    if (wp->special.bos < 0 || wp->special.eos < 0) goto out_of_memory;
    return wp;

out_of_memory:
    snprintf(err, errlen, "WordPiece vocab file %s: out of memory", vocab_file);
    wordpiece_free(wp);
    return NULL;
}

int wordpiece_vocab_size(const wordpiece *wp) { return wp->vocab_size; }
wordpiece_special_ids wordpiece_specials(const wordpiece *wp) { return wp->special; }

/* ---- BERT's character classes ---- */

static int is_whitespace(int32_t cp) {
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' ||
           utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

static int is_control(int32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return 0;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF;
}

static int is_punctuation(int32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return 1;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

static int is_chinese_char(int32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* What Python's str.split() still splits on once the text is cleaned. */
static int is_split_space(int32_t cp) {
    return cp == ' ' || cp == 0x2028 || cp == 0x2029;
}

/* Unicode's Cased and Case_Ignorable, as far as Python's final-sigma rule needs them. */
static int is_cased(int32_t cp) {
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT || utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
}

static int is_case_ignorable(int32_t cp) {
    static const int32_t mid_letter_or_quote[] = {
        0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
        0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A,
    };
    utf8proc_category_t cat = utf8proc_category(cp);
    if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
        cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK)
        return 1;
    for (size_t i = 0; i < sizeof mid_letter_or_quote / sizeof mid_letter_or_quote[0]; i++)
        if (cp == mid_letter_or_quote[i]) return 1;
    return 0;
}

/* Python's str.lower() per character, with its final-sigma rule for U+03A3. */
static int32_t lower_char(const int32_t *word, size_t len, size_t i) {
    if (word[i] != 0x03A3) return utf8proc_tolower(word[i]);
    size_t j = i;
    while (j > 0 && is_case_ignorable(word[j - 1])) j--;
    int cased_before = j > 0 && is_cased(word[j - 1]);
    j = i + 1;
    while (j < len && is_case_ignorable(word[j])) j++;
    int cased_after = j < len && is_cased(word[j]);
    return cased_before && !cased_after ? 0x03C2 : 0x03C3;
}

/* ---- encoding ---- */

/* _clean_text and _tokenize_chinese_chars: UTF-8 text -> code points in wp->text. */
static int clean_text(wordpiece *wp, const char *text, size_t len) {
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)text;
    wp->text.len = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t step = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (step <= 0) { /* invalid UTF-8: dropped, as decode("utf-8", "ignore") */
            i++;
            continue;
        }
        i += (size_t)step;
        if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
        if (is_whitespace(cp)) cp = ' ';
        int chinese = is_chinese_char(cp);
        if ((chinese && codepoints_push(&wp->text, ' ')) || codepoints_push(&wp->text, cp) ||
            (chinese && codepoints_push(&wp->text, ' ')))
            return -1;
    }
    return 0;
}

/* Lowercases word[0..len) and strips accents (NFD, then drop Mn) into wp->decomposed. */
static int lower_and_strip_accents(wordpiece *wp, const int32_t *word, size_t len) {
    /* UTF-8 of the lowercased word in wp->key, for utf8proc_decompose */
    if (len * 4 + 1 > wp->key_cap) {
        char *grown = realloc(wp->key, len * 4 + 64);
        if (!grown) return -1;
        wp->key = grown;
        wp->key_cap = len * 4 + 64;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < len; i++)
        bytes += (size_t)utf8proc_encode_char(lower_char(word, len, i),
                                              (utf8proc_uint8_t *)wp->key + bytes);
    utf8proc_option_t nfd = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    for (;;) {
        utf8proc_ssize_t n = utf8proc_decompose((const utf8proc_uint8_t *)wp->key,
                                                (utf8proc_ssize_t)bytes, wp->decomposed.data,
                                                (utf8proc_ssize_t)wp->decomposed.cap, nfd);
        if (n < 0) return -1;
        if ((size_t)n <= wp->decomposed.cap) {
            wp->decomposed.len = (size_t)n;
            break;
        }
        if (codepoints_reserve(&wp->decomposed, (size_t)n)) return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < wp->decomposed.len; i++)
        if (utf8proc_category(wp->decomposed.data[i]) != UTF8PROC_CATEGORY_MN)
            wp->decomposed.data[kept++] = wp->decomposed.data[i];
    wp->decomposed.len = kept;
    return 0;
}

/* WordPiece of one punctuation-free word: greedy longest match first, "##" after the start. */
static int wordpiece_word(wordpiece *wp, const int32_t *chars, size_t n_chars, int32_t **ids,
                          size_t *n_ids, size_t *cap) {
    if (n_chars > max_input_chars_per_word)
        return token_ids_push(ids, n_ids, cap, wp->special.unk);
    /* key = "##" + UTF-8 of the word; char_offset[i] = byte offset of character i */
    if (n_chars * 4 + 3 > wp->key_cap) {
        char *grown = realloc(wp->key, n_chars * 4 + 64);
        if (!grown) return -1;
        wp->key = grown;
        wp->key_cap = n_chars * 4 + 64;
    }
    if (n_chars + 1 > wp->char_offset_cap) {
        size_t *grown = realloc(wp->char_offset, (n_chars + 64) * sizeof *grown);
        if (!grown) return -1;
        wp->char_offset = grown;
        wp->char_offset_cap = n_chars + 64;
    }
    char *utf8 = wp->key + 2;
    size_t bytes = 0;
    for (size_t i = 0; i < n_chars; i++) {
        wp->char_offset[i] = bytes;
        bytes += (size_t)utf8proc_encode_char(chars[i], (utf8proc_uint8_t *)utf8 + bytes);
    }
    wp->char_offset[n_chars] = bytes;

    size_t first_new = *n_ids;
    for (size_t start = 0; start < n_chars;) {
        int found = -1;
        size_t end = n_chars;
        for (; end > start; end--) {
            char *piece = utf8 + wp->char_offset[start];
            size_t piece_len = wp->char_offset[end] - wp->char_offset[start];
            int64_t id;
            if (start > 0) { /* "##" written just before the piece */
                char saved[2] = {piece[-2], piece[-1]};
                piece[-2] = '#';
                piece[-1] = '#';
                int hit = strmap_get(wp->vocab, piece - 2, piece_len + 2, &id);
                piece[-2] = saved[0];
                piece[-1] = saved[1];
                if (hit) {
                    found = (int)id;
                    break;
                }
            } else if (strmap_get(wp->vocab, piece, piece_len, &id)) {
                found = (int)id;
                break;
            }
        }
        if (found < 0) { /* no piece matches: the whole word is [UNK] */
            *n_ids = first_new;
            return token_ids_push(ids, n_ids, cap, wp->special.unk);
        }
        if (token_ids_push(ids, n_ids, cap, found)) return -1;
        start = end;
    }
    return 0;
}

/* _run_split_on_punc, then WordPiece of each part. */
static int split_punctuation_and_encode(wordpiece *wp, const int32_t *chars, size_t n,
                                        int32_t **ids, size_t *n_ids, size_t *cap) {
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && !is_punctuation(chars[i])) continue;
        if (i > start && wordpiece_word(wp, chars + start, i - start, ids, n_ids, cap)) return -1;
        if (i < n && wordpiece_word(wp, chars + i, 1, ids, n_ids, cap)) return -1;
        start = i + 1;
    }
    return 0;
}

int wordpiece_encode(wordpiece *wp, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                     size_t *cap) {
    if (clean_text(wp, text, len)) return -1;
    const int32_t *cps = wp->text.data;
    size_t n = wp->text.len;
    for (size_t i = 0; i < n;) {
        while (i < n && is_split_space(cps[i])) i++;
        size_t start = i;
        while (i < n && !is_split_space(cps[i])) i++;
        if (i == start) continue;
        const int32_t *word = cps + start;
        size_t word_len = i - start;
        if (wp->lower_case) {
            if (lower_and_strip_accents(wp, word, word_len)) return -1;
            word = wp->decomposed.data;
            word_len = wp->decomposed.len;
        }
        if (split_punctuation_and_encode(wp, word, word_len, ids, n_ids, cap)) return -1;
    }
    return 0;
}

/* ---- decoding: Megatron's convert_tokens_to_string ---- */

static void replace_all(char *s, const char *from, const char *to) {
    size_t from_len = strlen(from), to_len = strlen(to); /* to_len <= from_len */
    char *read = s, *write = s;
    while (*read) {
        if (strncmp(read, from, from_len) == 0) {
            memmove(write, to, to_len);
            write += to_len;
            read += from_len;
        } else {
            *write++ = *read++;
        }
    }
    *write = '\0';
}

char *wordpiece_decode(const wordpiece *wp, const int32_t *ids, size_t n, size_t *out_len) {
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= wp->id_count || !wp->id_token[ids[i]]) return NULL;
        total += strlen(wp->id_token[ids[i]]) + 1;
    }
    char *text = malloc(total);
    if (!text) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) text[used++] = ' ';
        size_t len = strlen(wp->id_token[ids[i]]);
        memcpy(text + used, wp->id_token[ids[i]], len);
        used += len;
    }
    text[used] = '\0';
    replace_all(text, " ##", "");
    /* strip */
    size_t begin = strspn(text, " \t\n\r\v\f");
    used = strlen(text);
    while (used > begin && strchr(" \t\n\r\v\f", text[used - 1])) used--;
    memmove(text, text + begin, used - begin);
    text[used - begin] = '\0';
    /* clean_up_tokenization, in Megatron's order */
    static const char *const cleanups[][2] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < sizeof cleanups / sizeof cleanups[0]; i++)
        replace_all(text, cleanups[i][0], cleanups[i][1]);
    if (out_len) *out_len = strlen(text);
    return text;
}
