/* tokenizer_hf_test.c: TAP checks of HuggingFaceTokenizer (tokenizer.json, byte-level BPE).
 * GPT-2's vocab.json and merges.txt are rewritten here in tokenizer.json form, three ways
 * (merges as "a b" strings with ByteLevel's own regex; merges as ["a", "b"] pairs; a Llama 3
 * style Sequence of a Split regex written with \s and a ByteLevel without regex), and each must
 * give the reference ids of tests/data/gpt2_encode_vectors.jsonl (OpenAI's encoder, independent
 * of this code). A tiny hand-written vocabulary checks what GPT-2 does not use: Llama 3's split
 * pattern (digits in threes), ignore_merges, added tokens found inside the text, the
 * TemplateProcessing BOS, tokenizer_config.json's EOS and len(tokenizer). A tokenizer.json that
 * Hugging Face's tokenizers library trained (tests/data/hf-bpe-600) must give the ids that
 * library gave. Then the refusals. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tap.h"
#include "app/tokenizers/tokenizer.h"

static const char *top_srcdir;
static char work[4096];

/* a fresh directory under $TMPDIR for one tokenizer */
static const char *make_dir(const char *name) {
    static char paths[8][4200];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", work, name);
    mkdir(path, 0755);
    return path;
}

static void write_json(const char *dir, const char *file, json_t *value) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (json_dump_file(value, path, JSON_COMPACT) != 0) tap_diag("cannot write %s", path);
    json_decref(value);
}

static size_t encode(tokenizer *tok, const char *text, size_t len, int32_t **ids) {
    size_t n = 0, cap = 0;
    *ids = NULL;
    if (tokenizer_encode(tok, text, len, ids, &n, &cap) != 0) return (size_t)-1;
    return n;
}

/* GPT-2's merges.txt as a JSON list: "a b" strings, or ["a", "b"] pairs */
static json_t *gpt2_merges(int as_pairs) {
    char path[4200];
    snprintf(path, sizeof path, "%s/configs/tokenizers/gpt2/merges.txt", top_srcdir);
    FILE *f = fopen(path, "r");
    json_t *list = json_array();
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || !line[0]) continue;
        if (!as_pairs) {
            json_array_append_new(list, json_string(line));
            continue;
        }
        char *space = strchr(line, ' ');
        *space = '\0';
        json_array_append_new(list, json_pack("[ss]", line, space + 1));
    }
    if (f) fclose(f);
    return list;
}

/* GPT-2 in tokenizer.json form; style 0: ByteLevel with its regex, merges as strings; 1: the
 * same with merges as pairs; 2: Split(GPT-2's pattern, with \s) + ByteLevel(use_regex false) */
static const char *write_gpt2(int style) {
    char name[32], vocab_path[4200];
    snprintf(name, sizeof name, "gpt2-%d", style);
    const char *dir = make_dir(name);
    snprintf(vocab_path, sizeof vocab_path, "%s/configs/tokenizers/gpt2/vocab.json", top_srcdir);
    json_error_t jerr;
    json_t *vocab = json_load_file(vocab_path, 0, &jerr);
    json_t *byte_level = json_pack("{ss sb sb sb}", "type", "ByteLevel", "add_prefix_space", 0,
                                   "trim_offsets", 1, "use_regex", style != 2);
    json_t *pre = byte_level;
    if (style == 2)
        pre = json_pack("{ss s[{ss s{ss} ss sb}o]}", "type", "Sequence", "pretokenizers", "type", "Split",
                        "pattern", "Regex",
                        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
                        "behavior", "Isolated", "invert", 0, byte_level);
    json_t *root = json_pack(
        "{ss s[{si ss sb sb sb sb sb}] sn so s{ss} s{ss sn sn ss ss sb sb so so}}", "version", "1.0",
        "added_tokens", "id", 50256, "content", "<|endoftext|>", "single_word", 0, "lstrip", 0,
        "rstrip", 0, "normalized", 1, "special", 1, "normalizer", "pre_tokenizer", pre,
        "post_processor", "type", "ByteLevel", "model", "type", "BPE", "dropout", "unk_token",
        "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0, "byte_fallback", 0,
        "vocab", vocab, "merges", gpt2_merges(style == 1));
    write_json(dir, "tokenizer.json", root);
    write_json(dir, "tokenizer_config.json", json_pack("{ss}", "eos_token", "<|endoftext|>"));
    return dir;
}

static void test_gpt2_vectors(tokenizer *hf, const char *label) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/data/gpt2_encode_vectors.jsonl", top_srcdir);
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    int vectors = 0, matched = 0, round_trips = 0, with_added = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_error_t jerr;
        json_t *vector = json_loads(line, JSON_ALLOW_NUL, &jerr);
        json_t *text = json_object_get(vector, "text"), *expected = json_object_get(vector, "ids");
        vectors++;
        int32_t *ids;
        size_t len = json_string_length(text), n = encode(hf, json_string_value(text), len, &ids);
        int same = n == json_array_size(expected);
        for (size_t i = 0; same && i < n; i++) same = ids[i] == json_integer_value(json_array_get(expected, i));
        /* GPT-2's own encoder reads "<|endoftext|>" in a text as characters; Hugging Face finds the
         * added token (checked in test_gpt2 with "Hello<|endoftext|>world") */
        if (strstr(json_string_value(text), "<|endoftext|>")) {
            with_added++;
            same = 1;
        }
        if (!same) tap_diag("%s: vector %d differs (%zu ids, want %zu)", label, vectors, n, json_array_size(expected));
        matched += same;
        size_t back_len = 0;
        char *back = tokenizer_decode_bytes(hf, ids, n, &back_len);
        round_trips += back && back_len == len && memcmp(back, json_string_value(text), len) == 0;
        free(back);
        free(ids);
        json_decref(vector);
    }
    free(line);
    if (f) fclose(f);
    tap_ok(vectors == 41 && matched == vectors && with_added == 1,
           "%s: the %d GPT-2 reference vectors without \"<|endoftext|>\" give their ids (%d match)",
           label, vectors - with_added, matched - with_added);
    tap_ok(round_trips == vectors, "%s: every vector decodes back to its text (%d of %d)", label,
           round_trips, vectors);
}

static void test_gpt2(void) {
    char vocab[4200], merges[4200], err[1024];
    snprintf(vocab, sizeof vocab, "%s/configs/tokenizers/gpt2/vocab.json", top_srcdir);
    snprintf(merges, sizeof merges, "%s/configs/tokenizers/gpt2/merges.txt", top_srcdir);
    tokenizer *gpt2 = tokenizer_create("GPT2BPETokenizer", vocab, merges, 0, err, sizeof err);
    const char *labels[] = {"merges as strings", "merges as pairs", "Split regex + ByteLevel"};
    for (int style = 0; style < 3; style++) {
        const char *dir = write_gpt2(style);
        char file[4400];
        snprintf(file, sizeof file, "%s/tokenizer.json", dir);
        /* the directory, and for style 1 the file itself */
        tokenizer *hf = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, style == 1 ? file : dir,
                                                    0, err, sizeof err);
        tap_ok(hf != NULL, "%s: tokenizer.json loads (%s)", labels[style], hf ? "ok" : err);
        if (!hf) continue;
        test_gpt2_vectors(hf, labels[style]);
        tap_ok(tokenizer_vocab_size(hf) == 50257 && tokenizer_eod(hf) == 50256,
               "%s: len(tokenizer) 50257 and EOD 50256 from tokenizer_config.json (got %d, %d)",
               labels[style], tokenizer_vocab_size(hf), tokenizer_eod(hf));
        /* an added token inside the text is its id; the text around it is BPE'd on its own */
        const char *text = "Hello<|endoftext|>world";
        int32_t *ids, *hello, *world;
        size_t n = encode(hf, text, strlen(text), &ids);
        size_t n_hello = encode(gpt2, "Hello", 5, &hello), n_world = encode(gpt2, "world", 5, &world);
        int same = n == n_hello + 1 + n_world && memcmp(ids, hello, n_hello * 4) == 0 &&
                   ids[n_hello] == 50256 && memcmp(ids + n_hello + 1, world, n_world * 4) == 0;
        tap_ok(same, "%s: \"Hello<|endoftext|>world\" = ids(Hello) 50256 ids(world)", labels[style]);
        free(ids);
        free(hello);
        free(world);
        tokenizer_free(hf);
    }
    tokenizer_free(gpt2);
}

/* A tiny Llama 3 style tokenizer: bytes b -> id b, merges h+e, l+l, he+ll, hell+o, Ġ+w, 3+4
 * (ids 256..261), "xyz" (262, no merge makes it), then the added <|begin_of_text|> (263) and
 * <|end_of_text|> (264); BOS from TemplateProcessing; Llama 3's split pattern. */
static const char *write_tiny(int ignore_merges) {
    const char *dir = make_dir(ignore_merges ? "tiny-ignore-merges" : "tiny");
    json_t *vocab = json_object();
    int next = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2's bytes_to_unicode */
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)next++;
        char utf8[4] = {0};
        if (cp < 0x80) utf8[0] = (char)cp;
        else {
            utf8[0] = (char)(0xC0 | (cp >> 6));
            utf8[1] = (char)(0x80 | (cp & 0x3F));
        }
        json_object_set_new(vocab, utf8, json_integer(b));
    }
    const char *merged[] = {"he", "ll", "hell", "hello", "\xC4\xA0w", "34", "xyz"};
    for (int i = 0; i < 7; i++) json_object_set_new(vocab, merged[i], json_integer(256 + i));
    json_t *merges = json_pack("[[ss][ss][ss][ss][ss][ss]]", "h", "e", "l", "l", "he", "ll", "hell", "o",
                               "\xC4\xA0", "w", "3", "4");
    const char *llama3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    json_t *root = json_pack(
        "{s[{si ss sb sb sb sb sb}{si ss sb sb sb sb sb}] sn"
        " s{ss s[{ss s{ss} ss sb}{ss sb sb sb}]}"
        " s{ss s[{s{ss si}}{s{ss si}}] s{s{ss s[i] s[s]}}}"
        " s{ss sb so so}}",
        "added_tokens", "id", 263, "content", "<|begin_of_text|>", "single_word", 0, "lstrip", 0, "rstrip", 0,
        "normalized", 0, "special", 1, "id", 264, "content", "<|end_of_text|>", "single_word", 0, "lstrip", 0,
        "rstrip", 0, "normalized", 0, "special", 1, "normalizer",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", llama3,
        "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 0,
        "post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id", "<|begin_of_text|>",
        "type_id", 0, "Sequence", "id", "A", "type_id", 0, "special_tokens", "<|begin_of_text|>", "id",
        "<|begin_of_text|>", "ids", 263, "tokens", "<|begin_of_text|>",
        "model", "type", "BPE", "ignore_merges", ignore_merges, "vocab", vocab, "merges", merges);
    write_json(dir, "tokenizer.json", root);
    write_json(dir, "tokenizer_config.json",
               json_pack("{s{ss}}", "eos_token", "content", "<|end_of_text|>"));
    return dir;
}

static int ids_are(tokenizer *tok, const char *text, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n = encode(tok, text, strlen(text), &ids);
    int same = n == n_want && memcmp(ids, want, n * sizeof *ids) == 0;
    if (!same && n != (size_t)-1) {
        char got[512] = "";
        for (size_t i = 0; i < n && strlen(got) < 480; i++) sprintf(got + strlen(got), " %d", ids[i]);
        tap_diag("\"%s\" gave%s", text, got);
    }
    free(ids);
    return same;
}

static void test_tiny(void) {
    char err[1024];
    tokenizer *tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, write_tiny(0), 0, err, sizeof err);
    tap_ok(tok != NULL, "tiny Llama 3 style tokenizer.json loads (%s)", tok ? "ok" : err);
    if (!tok) return;
    tap_ok(tokenizer_vocab_size(tok) == 265, "len(tokenizer) = 263 vocabulary + 2 added = 265 (got %d)",
           tokenizer_vocab_size(tok));
    tap_ok(tokenizer_eod(tok) == 264 && tokenizer_bos(tok) == 263,
           "EOD is tokenizer_config.json's eos_token 264, BOS the template's 263 (got %d, %d)",
           tokenizer_eod(tok), tokenizer_bos(tok));
    /* BOS first; "hello" merges in rank order to 259; " world" is Ġw + o r l d */
    tap_ok(ids_are(tok, "hello world", (int32_t[]){263, 259, 260, 'o', 'r', 'l', 'd'}, 7),
           "\"hello world\" = BOS, hello, Ġw, o, r, l, d");
    /* Llama 3 splits digits in threes: "3" and "4" are in different pieces and never merge */
    tap_ok(ids_are(tok, "1234567", (int32_t[]){263, '1', '2', '3', '4', '5', '6', '7'}, 8),
           "\"1234567\" splits as 123|456|7, so the 3+4 merge does not apply");
    tap_ok(ids_are(tok, "34", (int32_t[]){263, 261}, 2), "\"34\" (one piece) merges to 261");
    tap_ok(ids_are(tok, "xyz", (int32_t[]){263, 'x', 'y', 'z'}, 4), "without ignore_merges \"xyz\" stays x y z");
    tap_ok(ids_are(tok, "he<|end_of_text|>he<|begin_of_text|>", (int32_t[]){263, 256, 264, 256, 263}, 5),
           "added tokens inside the text are their ids");
    tap_ok(ids_are(tok, "", (int32_t[]){263}, 1), "an empty text is the BOS alone, as tokenizer(\"\")");
    int32_t ids[] = {263, 259, 260, 'o', 'r', 'l', 'd', 264};
    char *text = tokenizer_decode(tok, ids, 8);
    tap_ok(text && strcmp(text, "<|begin_of_text|>hello world<|end_of_text|>") == 0, "decode: %s", text ? text : "(null)");
    free(text);
    tokenizer_free(tok);

    tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, write_tiny(1), 0, err, sizeof err);
    tap_ok(tok && ids_are(tok, "xyz", (int32_t[]){263, 262}, 2), "with ignore_merges \"xyz\" is the token 262");
    tokenizer_free(tok);
}

/* tests/data/hf-bpe-600: a 600-token byte-level BPE that Hugging Face tokenizers 0.23.2 trained on
 * the bundled text with Llama 3's split pattern, ignore_merges, its special tokens and BOS
 * template, and the ids it gave for 409 texts (vectors.jsonl): edge cases, then the first 400
 * lines of the text */
static void test_hf_trained(void) {
    char dir[4200], path[4300], err[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/hf-bpe-600", top_srcdir);
    tokenizer *tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, dir, 0, err, sizeof err);
    tap_ok(tok != NULL, "Hugging Face's trained tokenizer.json loads (%s)", tok ? "ok" : err);
    if (!tok) return;
    tap_ok(tokenizer_vocab_size(tok) == 600 && tokenizer_eod(tok) == 1 && tokenizer_bos(tok) == 0,
           "its vocabulary 600 (special tokens inside), EOD 1, BOS 0 (got %d, %d, %d)", tokenizer_vocab_size(tok),
           tokenizer_eod(tok), tokenizer_bos(tok));
    snprintf(path, sizeof path, "%s/vectors.jsonl", dir);
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    int vectors = 0, matched = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_error_t jerr;
        json_t *vector = json_loads(line, JSON_ALLOW_NUL, &jerr);
        json_t *text = json_object_get(vector, "text"), *expected = json_object_get(vector, "ids");
        int32_t *ids;
        size_t n = encode(tok, json_string_value(text), json_string_length(text), &ids);
        int same = n == json_array_size(expected);
        for (size_t i = 0; same && i < n; i++) same = ids[i] == json_integer_value(json_array_get(expected, i));
        if (!same && vectors - matched < 3) tap_diag("vector %d differs: %.60s", vectors + 1, json_string_value(text));
        vectors++;
        matched += same;
        free(ids);
        json_decref(vector);
    }
    free(line);
    if (f) fclose(f);
    tap_ok(vectors == 409 && matched == vectors, "all %d texts give Hugging Face's ids (%d match)", vectors, matched);
    tokenizer_free(tok);
}

/* tokenizer.json variants that must be refused with a message naming what is wrong */
static void test_refusals(void) {
    char err[1024];
    const char *dir = make_dir("bad");
    struct {
        const char *json, *expect, *what;
    } cases[] = {
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "model type \"WordPiece\" is not supported", "a WordPiece model"},
        {"{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\"}}", "normalizer \"NFKC\" is not supported", "a normalizer"},
        {"{\"pre_tokenizer\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", "pre_tokenizer \"Metaspace\" is not supported", "a Metaspace pre-tokenizer"},
        {"{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true}}", "byte_fallback", "byte fallback (Llama 2's tokenizer.json)"},
        {"{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", "not a byte-level BPE vocabulary", "a vocabulary without the 256 byte tokens"},
        {"{\"model\": ", "malformed JSON", "malformed JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        FILE *f = fopen(path, "w");
        fputs(cases[i].json, f);
        fclose(f);
        err[0] = '\0';
        tokenizer *tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, dir, 0, err, sizeof err);
        tap_ok(!tok && strstr(err, cases[i].expect) && strstr(err, path), "refused: %s: %s", cases[i].what, err);
        tokenizer_free(tok);
    }
    tokenizer *tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, "/nonexistent/dir", 0, err, sizeof err);
    tap_ok(!tok && strstr(err, "/nonexistent/dir"), "a missing tokenizer.json is named: %s", err);
    tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, NULL, 0, err, sizeof err);
    tap_ok(!tok && strstr(err, "--tokenizer-model"), "no --tokenizer-model: %s", err);
    tok = tokenizer_create_with_model("Llama2Tokenizer", NULL, NULL, "/nonexistent/tokenizer.model", 0, err, sizeof err);
    tap_ok(!tok && strstr(err, "/nonexistent/tokenizer.model"), "a missing SentencePiece model is named: %s", err);
}

int main(void) {
    top_srcdir = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
    snprintf(work, sizeof work, "%s/tokenizer_hf_test.%ld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    mkdir(work, 0755);
    test_gpt2();
    test_tiny();
    test_hf_trained();
    test_refusals();
    char command[4200];
    snprintf(command, sizeof command, "rm -rf '%s'", work);
    if (system(command) != 0) tap_diag("could not remove %s", work);
    return tap_done();
}
