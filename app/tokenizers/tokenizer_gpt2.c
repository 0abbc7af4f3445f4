/* tokenizer_gpt2.c: GPT-2 byte-level BPE (Megatron's GPT2BPETokenizer) from vocab.json and
 * merges.txt, or from the vocabulary, merges and split pattern of a Hugging Face tokenizer.json
 * (tokenizer_hf.c). Text is split by GPT-2's regex (PCRE2, Unicode properties); each piece's bytes are
 * mapped through bytes_to_unicode and merged by rank, exactly as OpenAI's encoder.py (short
 * pieces by rescanning, long ones through a heap, both in encoder.py's order). Bytes the
 * regex cannot match (invalid UTF-8) become pieces of their own, so no byte is ever lost. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "app/core/hashmap.h"
#include "app/tokenizers/tokenizer_internal.h"

/* GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with \s spelled out as Unicode White_Space, which is what Python's regex module matches:
 * PCRE2's \s also takes U+180E (MONGOLIAN VOWEL SEPARATOR, a format character since Unicode
 * 6.3), which would split differently from GPT-2. */
#define WHITE_SPACE                                                                          \
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"  \
    "\\x{3000}"
const char gpt2_bpe_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WHITE_SPACE "\\p{L}\\p{N}]+"
    "|[" WHITE_SPACE "]+(?![^" WHITE_SPACE "])|[" WHITE_SPACE "]+";

enum {
    cache_max_piece_bytes = 128,   /* longer pieces are not cached */
    cache_max_entries = 1 << 20,   /* the cache is emptied when it grows past this */
    long_piece_bytes = 48,         /* longer pieces merge through a heap, not by rescanning */
};

struct gpt2_bpe {
    strmap *vocab;          /* token (UTF-8 of byte-mapped chars) -> id */
    strmap *merges;         /* (left id, right id) as 8 bytes -> rank << 32 | merged id */
    int vocab_size;         /* number of entries in vocab.json, as Megatron's len(encoder) */
    int32_t byte_token[256];/* id of the one-character token of each byte */
    int id_limit;           /* 1 + largest id */
    size_t *decoded_offset; /* id -> bytes in decoded_bytes; id_limit + 1 entries */
    char *decoded_bytes;
    pcre2_code *regex;      /* NULL: the whole text is one piece */
    pcre2_match_data *match;
    int ignore_merges;      /* a piece that is a whole vocabulary token is that token (Llama 3) */
    char *piece_chars;      /* scratch: a piece in byte-level characters, for ignore_merges */
    size_t piece_chars_cap;
    strmap *cache;          /* piece bytes -> offset << 16 | id count in cache_ids */
    int32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
    int32_t *symbols;       /* scratch for one piece: its symbols, then its ids */
    size_t symbols_cap;
    int32_t *next, *prev;   /* scratch for long pieces: linked list over symbols */
    int32_t *merged_at;
    struct pair_entry *heap;
    size_t long_cap, heap_cap;
};

/* A candidate merge of the symbols at pos and next[pos], valid while they still hold left and
 * right. Ordered by (rank, pos): lowest rank first, left to right within a rank. */
typedef struct pair_entry {
    int32_t rank, pos, left, right, merged;
} pair_entry;

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the rest to 256 + n. */
static void bytes_to_unicode(uint32_t byte_to_char[256]) {
    int next = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_char[b] = printable ? (uint32_t)b : (uint32_t)(256 + next++);
    }
}

static size_t utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one UTF-8 character of s[0..len); returns its length (1 for a stray byte). */
static size_t utf8_get(const unsigned char *s, size_t len, uint32_t *cp) {
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if (n > len) n = 1;
    uint32_t value = n == 1 ? s[0] : s[0] & (0x3F >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = s[0];
            return 1;
        }
        value = value << 6 | (s[i] & 0x3F);
    }
    *cp = value;
    return n;
}

void gpt2_bpe_free(gpt2_bpe *bpe) {
    if (!bpe) return;
    strmap_free(bpe->vocab);
    strmap_free(bpe->merges);
    strmap_free(bpe->cache);
    free(bpe->decoded_offset);
    free(bpe->decoded_bytes);
    pcre2_match_data_free(bpe->match);
    pcre2_code_free(bpe->regex);
    free(bpe->cache_ids);
    free(bpe->symbols);
    free(bpe->next);
    free(bpe->prev);
    free(bpe->merged_at);
    free(bpe->heap);
    free(bpe->piece_chars);
    free(bpe);
}

/* ids at or above this are refused: the decoding tables take 16 bytes per id up to the largest */
#define VOCAB_MAX_ID (1 << 24)

/* the vocabulary from a JSON object {token: id, ...}; `what` names it in messages */
static int load_vocab_object(gpt2_bpe *bpe, json_t *root, const char *what, char *err, size_t errlen) {
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: expected a JSON object {token: id, ...}", what);
        return -1;
    }
    bpe->vocab = strmap_create(json_object_size(root));
    if (!bpe->vocab) goto out_of_memory;
    const char *token;
    json_t *value;
    int max_id = -1;
    json_object_foreach(root, token, value) {
        json_int_t id = json_is_integer(value) ? json_integer_value(value) : -1;
        if (id < 0) {
            snprintf(err, errlen, "%s: token \"%s\" has no valid id "
                     "(expected a non-negative integer)", what, token);
            return -1;
        }
        if (id >= VOCAB_MAX_ID) { /* the id tables below are sized by the largest id */
            snprintf(err, errlen, "%s: token \"%s\" has id %lld; ids from %d up are not supported "
                     "(the largest vocabularies in use hold about 256K tokens)", what, token, (long long)id,
                     VOCAB_MAX_ID);
            return -1;
        }
        if (strmap_put(bpe->vocab, token, strlen(token), id) != 0) goto out_of_memory;
        if (id > max_id) max_id = (int)id;
    }
    bpe->vocab_size = (int)strmap_count(bpe->vocab);
    bpe->id_limit = max_id + 1;

    /* id -> raw bytes, through the inverse of bytes_to_unicode */
    uint32_t byte_to_char[256];
    bytes_to_unicode(byte_to_char);
    int char_to_byte[512];
    for (int c = 0; c < 512; c++) char_to_byte[c] = -1;
    for (int b = 0; b < 256; b++) char_to_byte[byte_to_char[b]] = b;
    size_t total_bytes = 0;
    json_object_foreach(root, token, value) total_bytes += strlen(token);
    bpe->decoded_offset = calloc((size_t)bpe->id_limit + 1, sizeof *bpe->decoded_offset);
    bpe->decoded_bytes = malloc(total_bytes + 1);
    const char **token_of_id = calloc((size_t)bpe->id_limit, sizeof *token_of_id);
    if (!bpe->decoded_offset || !bpe->decoded_bytes || !token_of_id) {
        free(token_of_id);
        goto out_of_memory;
    }
    json_object_foreach(root, token, value) token_of_id[json_integer_value(value)] = token;
    size_t used = 0;
    for (int id = 0; id < bpe->id_limit; id++) {
        bpe->decoded_offset[id] = used;
        const unsigned char *s = (const unsigned char *)token_of_id[id];
        if (!s) continue;
        size_t len = strlen((const char *)s);
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t step = utf8_get(s + i, len - i, &cp);
            if (cp < 512 && char_to_byte[cp] >= 0) {
                bpe->decoded_bytes[used++] = (char)char_to_byte[cp];
            } else { /* not a byte-level character: keep its UTF-8 as is */
                memcpy(bpe->decoded_bytes + used, s + i, step);
                used += step;
            }
            i += step;
        }
    }
    bpe->decoded_offset[bpe->id_limit] = used;
    free(token_of_id);

    for (int b = 0; b < 256; b++) {
        char utf8[4];
        size_t n = utf8_put(byte_to_char[b], utf8);
        int64_t id;
        if (!strmap_get(bpe->vocab, utf8, n, &id)) {
            snprintf(err, errlen, "%s: no token for byte 0x%02x (character "
                     "U+%04X); not a byte-level BPE vocabulary", what, b, byte_to_char[b]);
            return -1;
        }
        bpe->byte_token[b] = (int32_t)id;
    }
    return 0;

out_of_memory:
    snprintf(err, errlen, "%s: out of memory", what);
    return -1;
}

static int load_vocab_json(gpt2_bpe *bpe, const char *path, char *err, size_t errlen) {
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        snprintf(err, errlen, "GPT-2 vocab file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    fclose(probe);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(err, errlen, "GPT-2 vocab file %s: malformed JSON at line %d, column %d: %s",
                 path, jerr.line, jerr.column, jerr.text);
        return -1;
    }
    char what[1100];
    snprintf(what, sizeof what, "GPT-2 vocab file %.1024s", path);
    int rc = load_vocab_object(bpe, root, what, err, errlen);
    json_decref(root);
    return rc;
}

/* records merge number `rank`: left + right -> their concatenation, all three in the vocabulary.
 * `where` ("GPT-2 merges file F: bad merges line N") and `shown` place a bad one in messages. */
static int add_merge(gpt2_bpe *bpe, const char *left, size_t left_len, const char *right,
                     size_t right_len, int64_t rank, const char *where, const char *shown,
                     char *err, size_t errlen) {
    char *joined = malloc(left_len + right_len + 1);
    if (!joined) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    memcpy(joined, left, left_len);
    memcpy(joined + left_len, right, right_len);
    int64_t left_id, right_id, merged_id;
    int known = strmap_get(bpe->vocab, left, left_len, &left_id) &&
                strmap_get(bpe->vocab, right, right_len, &right_id) &&
                strmap_get(bpe->vocab, joined, left_len + right_len, &merged_id);
    free(joined);
    if (!known) {
        snprintf(err, errlen, "%s: \"%.80s\" uses or makes a token that is not in the vocabulary",
                 where, shown);
        return -1;
    }
    int32_t pair[2] = {(int32_t)left_id, (int32_t)right_id};
    if (strmap_put(bpe->merges, pair, sizeof pair, rank << 32 | merged_id) != 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    return 0;
}

static int load_merges(gpt2_bpe *bpe, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "GPT-2 merges file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    bpe->merges = strmap_create(bpe->vocab_size);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t line_len;
    long line_no = 0;
    int64_t rank = 0;
    int rc = 0;
    if (!bpe->merges) {
        snprintf(err, errlen, "GPT-2 merges file %s: out of memory", path);
        rc = -1;
    }
    while (rc == 0 && (line_len = getline(&line, &line_cap, f)) >= 0) {
        line_no++;
        while (line_len > 0 && (line[line_len - 1] == '\n' || line[line_len - 1] == '\r'))
            line[--line_len] = '\0';
        if (line_no == 1 && line[0] == '#') continue; /* "#version: 0.2" header */
        char *left = line + strspn(line, " \t");
        if (*left == '\0') continue; /* blank (trailing) line */
        size_t left_len = strcspn(left, " \t");
        char *right = left + left_len + strspn(left + left_len, " \t");
        size_t right_len = strcspn(right, " \t");
        if (right_len == 0 || right[right_len + strspn(right + right_len, " \t")] != '\0') {
            snprintf(err, errlen, "GPT-2 merges file %s: bad merges line %ld: expected two tokens "
                     "separated by a space, got \"%.80s\"", path, line_no, line);
            rc = -1;
            break;
        }
        char where[1200];
        snprintf(where, sizeof where, "GPT-2 merges file %.1024s: bad merges line %ld", path, line_no);
        if (add_merge(bpe, left, left_len, right, right_len, rank, where, line, err, errlen) != 0) {
            rc = -1;
            break;
        }
        rank++;
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "GPT-2 merges file %s: read error: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

/* A pattern written for Python's regex or Rust's regex crate, for PCRE2: \s and \S spelled out
 * as Unicode White_Space (see WHITE_SPACE), inside and outside character classes. malloc'd. */
static char *pattern_for_pcre2(const char *pattern) {
    size_t cap = strlen(pattern) * 8 + 256, used = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    int in_class = 0;
    for (const char *p = pattern; *p; p++) {
        if (used + sizeof WHITE_SPACE + 8 >= cap) {
            cap *= 2;
            char *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S') && !(p[1] == 'S' && in_class)) {
            used += (size_t)sprintf(out + used, in_class ? "%s" : p[1] == 's' ? "[%s]" : "[^%s]",
                                    WHITE_SPACE);
            p++;
        } else if (p[0] == '\\' && p[1]) {
            out[used++] = *p++;
            out[used++] = *p;
        } else {
            if (*p == '[' && !in_class) in_class = 1;
            else if (*p == ']' && in_class) in_class = 0;
            out[used++] = *p;
        }
    }
    out[used] = '\0';
    return out;
}

/* the split pattern (NULL: none) and the scratch space every tokenizer needs */
static int finish_load(gpt2_bpe *bpe, const char *pattern, const char *who, char *err, size_t errlen) {
    if (pattern) {
        char *translated = pattern_for_pcre2(pattern);
        if (!translated) {
            snprintf(err, errlen, "%s: out of memory", who);
            return -1;
        }
        int code;
        PCRE2_SIZE offset;
        bpe->regex = pcre2_compile((PCRE2_SPTR)translated, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset,
                                   NULL);
        free(translated);
        if (!bpe->regex) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(code, message, sizeof message);
            snprintf(err, errlen, "%s: PCRE2 cannot compile the split pattern \"%.200s\": %s",
                     who, pattern, (const char *)message);
            return -1;
        }
        pcre2_jit_compile(bpe->regex, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
        bpe->match = pcre2_match_data_create_from_pattern(bpe->regex, NULL);
        if (!bpe->match) goto out_of_memory;
    }
    bpe->cache = strmap_create(1 << 16);
    if (!bpe->cache) goto out_of_memory;
    return 0;
out_of_memory:
    snprintf(err, errlen, "%s: out of memory", who);
    return -1;
}

gpt2_bpe *gpt2_bpe_load(const char *vocab_file, const char *merge_file, char *err, size_t errlen) {
    if (!vocab_file || !merge_file) {
        snprintf(err, errlen, "GPT2BPETokenizer needs both a vocab file (vocab.json) and a merge "
                 "file (merges.txt)");
        return NULL;
    }
    gpt2_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe) {
        snprintf(err, errlen, "GPT2BPETokenizer: out of memory");
        return NULL;
    }
    if (load_vocab_json(bpe, vocab_file, err, errlen) != 0 ||
        load_merges(bpe, merge_file, err, errlen) != 0 ||
        finish_load(bpe, gpt2_bpe_pattern, "GPT2BPETokenizer", err, errlen) != 0) {
        gpt2_bpe_free(bpe);
        return NULL;
    }
    return bpe;
}

gpt2_bpe *gpt2_bpe_from_json(json_t *vocab, json_t *merges, const char *pattern, int ignore_merges,
                             const char *what, char *err, size_t errlen) {
    gpt2_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe) {
        snprintf(err, errlen, "%s: out of memory", what);
        return NULL;
    }
    bpe->ignore_merges = ignore_merges;
    char where[1200];
    snprintf(where, sizeof where, "%.1024s: model.vocab", what);
    if (load_vocab_object(bpe, vocab, where, err, errlen) != 0) goto fail;
    snprintf(where, sizeof where, "%.1024s: model.merges", what);
    if (!json_is_array(merges)) {
        snprintf(err, errlen, "%s: expected a list of merges", where);
        goto fail;
    }
    bpe->merges = strmap_create(json_array_size(merges) + 1);
    if (!bpe->merges) {
        snprintf(err, errlen, "%s: out of memory", what);
        goto fail;
    }
    size_t index;
    json_t *merge;
    json_array_foreach(merges, index, merge) {
        /* "left right" (older files) or ["left", "right"] (tokenizers >= 0.20) */
        const char *left, *right;
        size_t left_len, right_len;
        const char *text = json_string_value(merge);
        if (text) {
            const char *space = strchr(text, ' ');
            if (!space || strchr(space + 1, ' ') || space == text || !space[1]) {
                snprintf(err, errlen, "%s[%zu]: expected \"left right\", got \"%.80s\"", where, index, text);
                goto fail;
            }
            left = text;
            left_len = (size_t)(space - text);
            right = space + 1;
            right_len = strlen(right);
        } else if (json_is_array(merge) && json_array_size(merge) == 2 &&
                   json_is_string(json_array_get(merge, 0)) && json_is_string(json_array_get(merge, 1))) {
            left = json_string_value(json_array_get(merge, 0));
            right = json_string_value(json_array_get(merge, 1));
            left_len = strlen(left);
            right_len = strlen(right);
            text = left;
        } else {
            snprintf(err, errlen, "%s[%zu]: expected \"left right\" or [\"left\", \"right\"]", where, index);
            goto fail;
        }
        char at[1300];
        snprintf(at, sizeof at, "%s[%zu]", where, index);
        if (add_merge(bpe, left, left_len, right, right_len, (int64_t)index, at, text, err, errlen) != 0)
            goto fail;
    }
    if (finish_load(bpe, pattern, what, err, errlen) != 0) goto fail;
    return bpe;
fail:
    gpt2_bpe_free(bpe);
    return NULL;
}

/* Rank and result of merging the pair (left, right); 0 when they do not merge. */
static int lookup_merge(const gpt2_bpe *bpe, int32_t left, int32_t right, int64_t *rank,
                        int32_t *merged) {
    int32_t pair[2] = {left, right};
    int64_t value;
    if (!strmap_get(bpe->merges, pair, sizeof pair, &value)) return 0;
    *rank = value >> 32;
    *merged = (int32_t)(value & 0xffffffff);
    return 1;
}

/* BPE of one piece as encoder.py does it: repeatedly take the adjacent pair with the lowest
 * rank and merge all of its occurrences left to right, until no pair merges. */
static size_t bpe_merge_piece(gpt2_bpe *bpe, const unsigned char *piece, size_t len) {
    int32_t *sym = bpe->symbols;
    size_t count = len;
    for (size_t i = 0; i < len; i++) sym[i] = bpe->byte_token[piece[i]];
    while (count > 1) {
        int64_t best_rank = INT64_MAX, rank;
        int32_t best_left = 0, best_right = 0, best_merged = 0, merged;
        for (size_t i = 0; i + 1 < count; i++) {
            if (lookup_merge(bpe, sym[i], sym[i + 1], &rank, &merged) && rank < best_rank) {
                best_rank = rank;
                best_left = sym[i];
                best_right = sym[i + 1];
                best_merged = merged;
            }
        }
        if (best_rank == INT64_MAX) break;
        size_t out = 0;
        for (size_t i = 0; i < count;) {
            if (i + 1 < count && sym[i] == best_left && sym[i + 1] == best_right) {
                sym[out++] = best_merged;
                i += 2;
            } else {
                sym[out++] = sym[i++];
            }
        }
        count = out;
    }
    return count;
}

static int entry_before(const pair_entry *a, const pair_entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(gpt2_bpe *bpe, size_t *count, pair_entry entry) {
    if (*count == bpe->heap_cap) {
        size_t new_cap = bpe->heap_cap ? bpe->heap_cap * 2 : 1024;
        pair_entry *grown = realloc(bpe->heap, new_cap * sizeof *grown);
        if (!grown) return -1;
        bpe->heap = grown;
        bpe->heap_cap = new_cap;
    }
    pair_entry *heap = bpe->heap;
    size_t i = (*count)++;
    while (i > 0 && entry_before(&entry, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = entry;
    return 0;
}

static pair_entry heap_pop(pair_entry *heap, size_t *count) {
    pair_entry top = heap[0], last = heap[--*count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *count) break;
        if (child + 1 < *count && entry_before(&heap[child + 1], &heap[child])) child++;
        if (!entry_before(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (*count > 0) heap[i] = last;
    return top;
}

/* Pushes the merge of the symbol at pos with its right neighbour, if they merge. */
static int push_pair(gpt2_bpe *bpe, size_t *heap_count, int32_t pos, int32_t len) {
    if (pos < 0) return 0;
    int32_t right = bpe->next[pos];
    int64_t rank;
    int32_t merged;
    if (right >= len ||
        !lookup_merge(bpe, bpe->symbols[pos], bpe->symbols[right], &rank, &merged))
        return 0;
    pair_entry entry = {(int32_t)rank, pos, bpe->symbols[pos], bpe->symbols[right], merged};
    return heap_push(bpe, heap_count, entry);
}

/* The same rounds as bpe_merge_piece (lowest rank, all its occurrences left to right), with a
 * heap of candidate pairs instead of rescanning, so long pieces cost O(n log n). Leaves the ids
 * in bpe->symbols[0..count). Returns count, or (size_t)-1 when out of memory. */
static size_t bpe_merge_long_piece(gpt2_bpe *bpe, const unsigned char *piece, size_t len) {
    if (len > bpe->long_cap) {
        int32_t *next = realloc(bpe->next, len * sizeof *next);
        if (next) bpe->next = next;
        int32_t *prev = realloc(bpe->prev, len * sizeof *prev);
        if (prev) bpe->prev = prev;
        int32_t *merged_at = realloc(bpe->merged_at, len * sizeof *merged_at);
        if (merged_at) bpe->merged_at = merged_at;
        if (!next || !prev || !merged_at) return (size_t)-1;
        bpe->long_cap = len;
    }
    int32_t *sym = bpe->symbols, *next = bpe->next, *prev = bpe->prev;
    int32_t n = (int32_t)len;
    size_t heap_count = 0;
    for (int32_t i = 0; i < n; i++) {
        sym[i] = bpe->byte_token[piece[i]];
        next[i] = i + 1;
        prev[i] = i - 1;
    }
    for (int32_t i = 0; i + 1 < n; i++)
        if (push_pair(bpe, &heap_count, i, n)) return (size_t)-1;
    while (heap_count > 0) {
        int32_t round_rank = bpe->heap[0].rank;
        size_t n_merged = 0;
        while (heap_count > 0 && bpe->heap[0].rank == round_rank) {
            pair_entry e = heap_pop(bpe->heap, &heap_count);
            int32_t right = next[e.pos];
            if (sym[e.pos] != e.left || right >= n || sym[right] != e.right) continue; /* stale */
            sym[e.pos] = e.merged;
            sym[right] = -1;
            next[e.pos] = next[right];
            if (next[right] < n) prev[next[right]] = e.pos;
            bpe->merged_at[n_merged++] = e.pos;
        }
        /* pairs made by this round's merges take part from the next round on */
        for (size_t k = 0; k < n_merged; k++) {
            int32_t pos = bpe->merged_at[k];
            if (push_pair(bpe, &heap_count, prev[pos], n) || push_pair(bpe, &heap_count, pos, n))
                return (size_t)-1;
        }
    }
    size_t count = 0;
    for (int32_t i = 0; i < n; i = next[i]) sym[count++] = sym[i];
    return count;
}

/* Hugging Face's ignore_merges: a piece whose byte-level spelling is a vocabulary token is
 * that token, merges or not. Returns 1 when it handled the piece (*rc: 0, or -1 out of memory). */
static int ignore_merges_token(gpt2_bpe *bpe, const unsigned char *piece, size_t len, int32_t **ids,
                               size_t *n_ids, size_t *cap, int64_t *rc) {
    if (len * 2 > bpe->piece_chars_cap) {
        char *grown = realloc(bpe->piece_chars, len * 2 + 64);
        if (!grown) return 0;
        bpe->piece_chars = grown;
        bpe->piece_chars_cap = len * 2 + 64;
    }
    uint32_t byte_to_char[256];
    bytes_to_unicode(byte_to_char);
    size_t used = 0;
    for (size_t i = 0; i < len; i++) used += utf8_put(byte_to_char[piece[i]], bpe->piece_chars + used);
    int64_t id;
    if (!strmap_get(bpe->vocab, bpe->piece_chars, used, &id)) return 0;
    *rc = token_ids_push(ids, n_ids, cap, (int32_t)id);
    return 1;
}

static int encode_piece(gpt2_bpe *bpe, const unsigned char *piece, size_t len, int32_t **ids,
                        size_t *n_ids, size_t *cap) {
    int cacheable = len <= cache_max_piece_bytes;
    int64_t cached;
    if (cacheable && strmap_get(bpe->cache, piece, len, &cached)) {
        size_t offset = (size_t)(cached >> 16), count = (size_t)(cached & 0xffff);
        for (size_t i = 0; i < count; i++)
            if (token_ids_push(ids, n_ids, cap, bpe->cache_ids[offset + i]) != 0) return -1;
        return 0;
    }
    if (bpe->ignore_merges && ignore_merges_token(bpe, piece, len, ids, n_ids, cap, &cached))
        return (int)cached;
    if (len > bpe->symbols_cap) {
        size_t new_cap = len < 256 ? 256 : len;
        int32_t *grown = realloc(bpe->symbols, new_cap * sizeof *grown);
        if (!grown) return -1;
        bpe->symbols = grown;
        bpe->symbols_cap = new_cap;
    }
    size_t count = len > long_piece_bytes ? bpe_merge_long_piece(bpe, piece, len)
                                          : bpe_merge_piece(bpe, piece, len);
    if (count == (size_t)-1) return -1;
    for (size_t i = 0; i < count; i++)
        if (token_ids_push(ids, n_ids, cap, bpe->symbols[i]) != 0) return -1;
    if (!cacheable) return 0;
    if (strmap_count(bpe->cache) >= cache_max_entries) {
        strmap_clear(bpe->cache);
        bpe->cache_ids_len = 0;
    }
    if (bpe->cache_ids_len + count > bpe->cache_ids_cap) {
        size_t new_cap = bpe->cache_ids_cap ? bpe->cache_ids_cap * 2 : 1 << 16;
        int32_t *grown = realloc(bpe->cache_ids, new_cap * sizeof *grown);
        if (!grown) return 0; /* caching is optional */
        bpe->cache_ids = grown;
        bpe->cache_ids_cap = new_cap;
    }
    memcpy(bpe->cache_ids + bpe->cache_ids_len, bpe->symbols, count * sizeof *bpe->symbols);
    if (strmap_put(bpe->cache, piece, len, (int64_t)bpe->cache_ids_len << 16 | (int64_t)count) == 0)
        bpe->cache_ids_len += count;
    return 0;
}

int gpt2_bpe_encode(gpt2_bpe *bpe, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                    size_t *cap) {
    const unsigned char *subject = (const unsigned char *)text;
    size_t offset = 0;
    if (!bpe->regex) return len ? encode_piece(bpe, subject, len, ids, n_ids, cap) : 0;
    while (offset < len) {
        int rc = pcre2_match(bpe->regex, subject, len, offset, 0, bpe->match, NULL);
        size_t start = len, end = len;
        if (rc >= 0) {
            PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(bpe->match);
            start = ovector[0];
            end = ovector[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            return -1;
        }
        /* bytes the pattern skipped (invalid UTF-8) are a piece of their own */
        if (start > offset && encode_piece(bpe, subject + offset, start - offset, ids, n_ids, cap))
            return -1;
        if (end == start && start < len) end = start + 1; /* never happens: no empty matches */
        if (end > start && encode_piece(bpe, subject + start, end - start, ids, n_ids, cap))
            return -1;
        offset = end;
    }
    return 0;
}

char *gpt2_bpe_decode(const gpt2_bpe *bpe, const int32_t *ids, size_t n, size_t *out_len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= bpe->id_limit) return NULL;
        total += bpe->decoded_offset[ids[i] + 1] - bpe->decoded_offset[ids[i]];
    }
    char *text = malloc(total + 1);
    if (!text) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        size_t begin = bpe->decoded_offset[ids[i]], end = bpe->decoded_offset[ids[i] + 1];
        memcpy(text + used, bpe->decoded_bytes + begin, end - begin);
        used += end - begin;
    }
    text[used] = '\0';
    if (out_len) *out_len = used;
    return text;
}

int gpt2_bpe_vocab_size(const gpt2_bpe *bpe) { return bpe->vocab_size; }

int gpt2_bpe_token_id(const gpt2_bpe *bpe, const char *token) {
    int64_t id;
    return strmap_get(bpe->vocab, token, strlen(token), &id) ? (int)id : -1;
}
