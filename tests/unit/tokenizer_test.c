/* tokenizer_test.c: TAP checks of the tokenizers: GPT-2 BPE against reference encodings
 * (tests/data/gpt2_encode_vectors.jsonl) and byte-exact round trips, WordPiece (lower case and
 * cased) on sentences with hand-written expected tokens, NullTokenizer, and the error messages.
 * Data paths are taken relative to $top_srcdir (default "."). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tap.h"
#include "app/tokenizers/tokenizer.h"

static const char *top_srcdir;

static const char *src_path(const char *relative) {
    static char paths[8][4096];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", top_srcdir, relative);
    return path;
}

/* Writes text to a fresh temporary file; returns its path (static storage). */
static const char *temp_file(const char *name, const char *text) {
    static char paths[4][4096];
    static int next;
    char *path = paths[next++ % 4];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof paths[0], "%s/tokenizer_test.%ld.%s", dir, (long)getpid(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* A one-line, printable form of text for test names (static storage, 4 in rotation). */
static const char *printable(const char *text, size_t len) {
    static char buffers[4][128];
    static int next;
    char *out = buffers[next++ % 4];
    size_t used = 0;
    for (size_t i = 0; i < len && used + 8 < sizeof buffers[0]; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') used += (size_t)sprintf(out + used, "\\n");
        else if (c < 0x20 || c == 0x7f) used += (size_t)sprintf(out + used, "\\x%02x", c);
        else out[used++] = (char)c;
    }
    if (used + 8 >= sizeof buffers[0]) used += (size_t)sprintf(out + used, "...");
    out[used] = '\0';
    return out;
}

/* Encodes text into a fresh list; returns the count (or (size_t)-1 on failure). */
static size_t encode(tokenizer *tok, const char *text, size_t len, int32_t **ids) {
    size_t n = 0, cap = 0;
    *ids = NULL;
    if (tokenizer_encode(tok, text, len, ids, &n, &cap) != 0) return (size_t)-1;
    return n;
}

/* "tok1 tok2 ..." for WordPiece ids, each decoded on its own. */
static void wordpiece_tokens(tokenizer *tok, const char *text, char *out, size_t outlen) {
    int32_t *ids;
    size_t n = encode(tok, text, strlen(text), &ids);
    out[0] = '\0';
    for (size_t i = 0; i < n && n != (size_t)-1; i++) {
        char *piece = tokenizer_decode(tok, &ids[i], 1);
        size_t used = strlen(out);
        snprintf(out + used, outlen - used, "%s%s", i ? " " : "", piece ? piece : "<null>");
        free(piece);
    }
    free(ids);
}

static void test_gpt2_vectors(tokenizer *gpt2) {
    const char *path = src_path("tests/data/gpt2_encode_vectors.jsonl");
    FILE *f = fopen(path, "rb");
    tap_ok(f != NULL, "open %s", path);
    if (!f) return;
    char *line = NULL;
    size_t line_cap = 0;
    int vectors = 0;
    while (getline(&line, &line_cap, f) > 0) {
        json_error_t jerr;
        json_t *vector = json_loads(line, JSON_ALLOW_NUL, &jerr);
        json_t *text = json_object_get(vector, "text"), *expected = json_object_get(vector, "ids");
        if (!json_is_string(text) || !json_is_array(expected)) {
            tap_ok(0, "vector %d parses: %s", vectors + 1, jerr.text);
            json_decref(vector);
            continue;
        }
        vectors++;
        const char *s = json_string_value(text);
        size_t len = json_string_length(text);
        int32_t *ids;
        size_t n = encode(gpt2, s, len, &ids);
        int same = n == json_array_size(expected);
        for (size_t i = 0; same && i < n; i++)
            same = ids[i] == json_integer_value(json_array_get(expected, i));
        tap_ok(same, "GPT-2 vector %d encodes to its %zu reference ids (%s)", vectors,
               json_array_size(expected), printable(s, len < 40 ? len : 40));
        if (!same)
            for (size_t i = 0; i < n && i < json_array_size(expected); i++)
                if (ids[i] != json_integer_value(json_array_get(expected, i))) {
                    tap_diag("first difference at %zu: got %d, want %lld", i, ids[i],
                             (long long)json_integer_value(json_array_get(expected, i)));
                    break;
                }
        size_t back_len = 0;
        char *back = tokenizer_decode_bytes(gpt2, ids, n, &back_len);
        tap_ok(back && back_len == len && memcmp(back, s, len) == 0,
               "GPT-2 vector %d decodes back to its text", vectors);
        free(back);
        free(ids);
        json_decref(vector);
    }
    free(line);
    fclose(f);
    tap_ok(vectors == 41, "read all 41 GPT-2 vectors (got %d)", vectors);
}

static int round_trips(tokenizer *tok, const char *bytes, size_t len, size_t *n_ids) {
    int32_t *ids;
    size_t n = encode(tok, bytes, len, &ids), back_len = 0;
    if (n_ids) *n_ids = n;
    char *back = n == (size_t)-1 ? NULL : tokenizer_decode_bytes(tok, ids, n, &back_len);
    int same = back && back_len == len && memcmp(back, bytes, len) == 0;
    free(back);
    free(ids);
    return same;
}

static void test_gpt2_bytes(tokenizer *gpt2) {
    tap_ok(tokenizer_vocab_size(gpt2) == 50257, "GPT-2 vocab size is 50257 (got %d)",
           tokenizer_vocab_size(gpt2));
    tap_ok(tokenizer_eod(gpt2) == 50256, "GPT-2 EOD id is 50256 (got %d)", tokenizer_eod(gpt2));
    tap_ok(strcmp(tokenizer_type(gpt2), "GPT2BPETokenizer") == 0, "type name GPT2BPETokenizer");

    int all_single = 1, all_distinct = 1, all_round_trip = 1;
    int32_t seen[256];
    for (int b = 0; b < 256; b++) {
        char byte = (char)b;
        int32_t *ids;
        size_t n = encode(gpt2, &byte, 1, &ids);
        if (n != 1) all_single = 0;
        else {
            seen[b] = ids[0];
            for (int c = 0; c < b; c++) all_distinct &= seen[c] != ids[0];
        }
        free(ids);
        all_round_trip &= round_trips(gpt2, &byte, 1, NULL);
    }
    tap_ok(all_single, "each of the 256 single bytes encodes to one id");
    tap_ok(all_distinct, "the 256 single bytes get 256 distinct ids");
    tap_ok(all_round_trip, "each of the 256 single bytes round-trips exactly");

    char every_byte[512];
    for (int i = 0; i < 512; i++) every_byte[i] = (char)(i < 256 ? i : 511 - i);
    tap_ok(round_trips(gpt2, every_byte, sizeof every_byte, NULL),
           "all 256 bytes ascending then descending round-trip exactly");

    static const char *const invalid[] = {
        "abc\xff\xfe def",             /* bytes that are never UTF-8 */
        "caf\xc3 lone lead byte",      /* truncated 2-byte sequence */
        "\xe2\x82 truncated euro",     /* truncated 3-byte sequence */
        "sur\xed\xa0\x80rogate",       /* UTF-16 surrogate in UTF-8 */
        "big \xf4\x90\x80\x80 cp",     /* above U+10FFFF */
        "over\xc0\xaflong slash",      /* overlong '/' */
        "\x80\x80\x80 continuation", " \xff", "\xff ", "x\xffy\xfez",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        size_t n_ids;
        int ok = round_trips(gpt2, invalid[i], strlen(invalid[i]), &n_ids);
        tap_ok(ok && n_ids > 0, "invalid UTF-8 case %zu round-trips byte for byte (%zu ids)", i,
               n_ids);
    }
    tap_ok(round_trips(gpt2, "nul\0inside", 10, NULL), "a NUL byte inside text round-trips");

    /* one 100 KB piece (no spaces) takes the heap merge path */
    size_t long_len = 100000;
    char *long_piece = malloc(long_len);
    unsigned state = 12345;
    for (size_t i = 0; i < long_len; i++) {
        state = state * 1103515245u + 12345u;
        long_piece[i] = (char)('a' + (state >> 16) % 26);
    }
    size_t long_ids;
    tap_ok(round_trips(gpt2, long_piece, long_len, &long_ids) && long_ids < long_len,
           "a 100 KB run of letters round-trips (%zu ids)", long_ids);
    free(long_piece);

    /* special tokens are plain text; ids append to a reused buffer */
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    tokenizer_encode(gpt2, "Hello", 5, &ids, &n, &cap);
    tokenizer_encode(gpt2, " world", 6, &ids, &n, &cap);
    tap_ok(n == 2 && ids[0] == 15496 && ids[1] == 995, "encode appends to the caller's buffer");
    n = 0;
    tokenizer_encode(gpt2, "<|endoftext|>", 13, &ids, &n, &cap);
    int has_eod = 0;
    for (size_t i = 0; i < n; i++) has_eod |= ids[i] == 50256;
    tap_ok(n > 1 && !has_eod, "<|endoftext|> inside text is not the EOD id");
    int32_t eod = 50256;
    char *eod_text = tokenizer_decode(gpt2, &eod, 1);
    tap_ok(eod_text && strcmp(eod_text, "<|endoftext|>") == 0, "EOD decodes to <|endoftext|>");
    free(eod_text);
    int32_t bad = 50257;
    tap_ok(tokenizer_decode(gpt2, &bad, 1) == NULL && tokenizer_last_error(gpt2)[0],
           "decode of an id outside the vocabulary fails: %s", tokenizer_last_error(gpt2));
    free(ids);
}

static void expect_tokens(tokenizer *tok, const char *text, const char *expected) {
    char got[4096];
    wordpiece_tokens(tok, text, got, sizeof got);
    tap_ok(strcmp(got, expected) == 0, "%s: \"%s\" -> %s", tokenizer_type(tok),
           printable(text, strlen(text)), printable(expected, strlen(expected)));
    if (strcmp(got, expected) != 0) tap_diag("got: %s", got);
}

static void expect_decode(tokenizer *tok, const char *text, const char *expected) {
    int32_t *ids;
    size_t n = encode(tok, text, strlen(text), &ids);
    char *back = tokenizer_decode(tok, ids, n);
    tap_ok(back && strcmp(back, expected) == 0, "%s: decode(encode(\"%s\")) = \"%s\"",
           tokenizer_type(tok), printable(text, strlen(text)), printable(expected, strlen(expected)));
    if (back && strcmp(back, expected) != 0) tap_diag("got: %s", back);
    free(back);
    free(ids);
}

static void test_wordpiece(void) {
    char err[512];
    const char *vocab = src_path("tests/data/wordpiece-vocab.txt");
    tokenizer *lower = tokenizer_create("BertWordPieceLowerCase", vocab, NULL, 0, err, sizeof err);
    tap_ok(lower != NULL, "BertWordPieceLowerCase loads %s%s%s", vocab, lower ? "" : ": ",
           lower ? "" : err);
    tokenizer *cased = tokenizer_create("BertWordPieceCase", vocab, NULL, 0, err, sizeof err);
    tap_ok(cased != NULL, "BertWordPieceCase loads %s", vocab);
    if (!lower || !cased) return;

    /* 61 lines, then Megatron appends [BOS] and [EOS] */
    tap_ok(tokenizer_vocab_size(lower) == 63, "WordPiece vocab size 61 + [BOS] + [EOS] = 63 (%d)",
           tokenizer_vocab_size(lower));
    tap_ok(tokenizer_pad(lower) == 0 && tokenizer_unk(lower) == 1 && tokenizer_cls(lower) == 2 &&
               tokenizer_sep(lower) == 3 && tokenizer_mask(lower) == 4,
           "WordPiece special ids [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4");
    tap_ok(tokenizer_bos(lower) == 61 && tokenizer_eos(lower) == 62 && tokenizer_eod(lower) == 62,
           "WordPiece [BOS]=61, [EOS]=62, EOD = [EOS] as in Megatron (eod %d)",
           tokenizer_eod(lower));

    expect_tokens(lower, "Hello, World!", "hello , world !");
    expect_tokens(lower, "The quick brown fox JUMPED over the lazy dog.",
                  "the quick brown fox jump ##ed over the lazy dog .");
    expect_tokens(lower, "Café naïve RÉSUMÉ", "cafe naive re ##sum ##e");
    expect_tokens(lower, "unaffable datasets tokenizer", "un ##aff ##able data ##set ##s token ##izer");
    expect_tokens(lower, "中国人nihao", "中 国 人 ni ##hao");
    expect_tokens(lower, "don't (jumps)", "don ' t ( jump ##s )");
    expect_tokens(lower, "xyzzy hello", "[UNK] hello");
    expect_tokens(lower, "hello\tworld\x01\n\xc2\xa0 \xe2\x80\x8b" "fox", "hello world fox");
    expect_tokens(lower, "ΑΒ alpha", "α ##β al ##pha");
    expect_tokens(lower, "bad\xff utf8 hello", "[UNK] [UNK] hello");
    char word[256];
    memset(word, 'a', 200);
    word[200] = '\0';
    char expected[1024] = "a";
    for (int i = 1; i < 200; i++) strcat(expected, " ##a");
    expect_tokens(lower, word, expected);
    memset(word, 'a', 201);
    word[201] = '\0';
    expect_tokens(lower, word, "[UNK]");

    expect_tokens(cased, "Hello World", "Hello World");
    expect_tokens(cased, "HELLO world", "[UNK] world");
    expect_tokens(cased, "café Café", "caf ##é [UNK]");
    expect_tokens(cased, "The quick fox jumped!", "The quick fox jump ##ed !");
    expect_tokens(cased, "中国 hello", "中 国 hello");
    expect_tokens(cased, "αβ", "α ##β");

    expect_decode(lower, "The quick brown fox JUMPED over the lazy dog.",
                  "the quick brown fox jumped over the lazy dog.");
    expect_decode(lower, "Hello, World! unaffable", "hello, world! unaffable");
    int32_t specials[] = {2, 23, 3};
    char *text = tokenizer_decode(lower, specials, 3);
    tap_ok(text && strcmp(text, "[CLS] hello [SEP]") == 0, "WordPiece decodes [CLS] hello [SEP]");
    free(text);
    tokenizer_free(lower);
    tokenizer_free(cased);
}

static void test_null(void) {
    char err[512];
    tokenizer *null = tokenizer_create("NullTokenizer", NULL, NULL, 100, err, sizeof err);
    tap_ok(null != NULL, "NullTokenizer with --vocab-size 100");
    if (!null) return;
    tap_ok(tokenizer_vocab_size(null) == 101 && tokenizer_eod(null) == 100,
           "NullTokenizer: vocab size N+1 = 101, EOD = N = 100 (as Megatron)");
    int32_t *ids;
    const char *text = " 1 2  3\n99\t100 ";
    size_t n = encode(null, text, strlen(text), &ids);
    tap_ok(n == 5 && ids[0] == 1 && ids[1] == 2 && ids[2] == 3 && ids[3] == 99 && ids[4] == 100,
           "NullTokenizer parses whitespace-separated ids");
    char *back = tokenizer_decode(null, ids, n);
    tap_ok(back && strcmp(back, "1 2 3 99 100") == 0, "NullTokenizer decodes to \"1 2 3 99 100\"");
    free(back);
    free(ids);
    tap_ok(encode(null, "5 101", 5, &ids) == (size_t)-1 && strstr(tokenizer_last_error(null), "101"),
           "NullTokenizer rejects an id past EOD: %s", tokenizer_last_error(null));
    free(ids);
    tap_ok(encode(null, "5 x7", 4, &ids) == (size_t)-1 && strstr(tokenizer_last_error(null), "x7"),
           "NullTokenizer rejects a non-integer: %s", tokenizer_last_error(null));
    free(ids);
    tokenizer_free(null);
    tap_ok(tokenizer_create("NullTokenizer", NULL, NULL, 0, err, sizeof err) == NULL &&
               strstr(err, "vocab-size"),
           "NullTokenizer without a vocab size: %s", err);
}

static void test_errors(const char *vocab_json, const char *merges_txt) {
    char err[1024];
    tokenizer *tok = tokenizer_create("GPT2BPETokenizer", "/nonexistent/vocab.json", merges_txt,
                                      0, err, sizeof err);
    tap_ok(!tok && strstr(err, "/nonexistent/vocab.json") && strstr(err, "cannot open"),
           "missing vocab file is named: %s", err);

    tok = tokenizer_create("GPT2BPETokenizer", vocab_json, "/nonexistent/merges.txt", 0, err,
                           sizeof err);
    tap_ok(!tok && strstr(err, "/nonexistent/merges.txt"), "missing merges file is named: %s", err);

    const char *bad_json = temp_file("bad.json", "{\"a\": 0,\n  \"b\": }\n");
    tok = tokenizer_create("GPT2BPETokenizer", bad_json, merges_txt, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, bad_json) && strstr(err, "malformed JSON at line 2"),
           "malformed vocab.json gives file, line and column: %s", err);
    remove(bad_json);

    const char *bad_merges = temp_file("merges.txt", "#version: 0.2\n\xc4\xa0 t\nonlyone\n");
    tok = tokenizer_create("GPT2BPETokenizer", vocab_json, bad_merges, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, bad_merges) && strstr(err, "bad merges line 3"),
           "bad merges line is numbered: %s", err);
    remove(bad_merges);

    tok = tokenizer_create("SentencePieceFoo", vocab_json, merges_txt, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, "SentencePieceFoo") && strstr(err, "GPT2BPETokenizer") &&
               strstr(err, "BertWordPieceLowerCase") && strstr(err, "NullTokenizer"),
           "unknown type lists the valid ones: %s", err);

    tok = tokenizer_create("BertWordPieceCase", "/nonexistent/vocab.txt", NULL, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, "/nonexistent/vocab.txt"), "missing vocab.txt is named: %s", err);

    const char *no_mask = temp_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
    tok = tokenizer_create("BertWordPieceLowerCase", no_mask, NULL, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, no_mask) && strstr(err, "[MASK]"),
           "vocab.txt without [MASK] is refused: %s", err);
    remove(no_mask);
}

int main(void) {
    top_srcdir = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
    const char *vocab_json = src_path("configs/tokenizers/gpt2/vocab.json");
    const char *merges_txt = src_path("configs/tokenizers/gpt2/merges.txt");
    char err[1024];
    tokenizer *gpt2 = tokenizer_create("GPT2BPETokenizer", vocab_json, merges_txt, 0, err,
                                       sizeof err);
    tap_ok(gpt2 != NULL, "GPT2BPETokenizer loads %s%s%s", vocab_json, gpt2 ? "" : ": ",
           gpt2 ? "" : err);
    if (gpt2) {
        test_gpt2_vectors(gpt2);
        test_gpt2_bytes(gpt2);
        tokenizer_free(gpt2);
    }
    test_wordpiece();
    test_null();
    test_errors(vocab_json, merges_txt);
    return tap_done();
}
