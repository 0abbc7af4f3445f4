/* tokenizer_hf.c: Megatron's HuggingFaceTokenizer for byte-level BPE tokenizer.json files (GPT-2,
 * Llama 3 and their kind): model.vocab and model.merges (tokenizer_gpt2.c does the BPE), the
 * pre-tokenizer (a Split regex, Isolated, then ByteLevel; or ByteLevel with GPT-2's pattern),
 * added tokens matched in the text before anything else (leftmost, longest), and the
 * post-processor's TemplateProcessing tokens around each text (Llama 3's BOS), as
 * `tokenizer(text).input_ids` gives them. The EOD is tokenizer_config.json's eos_token, as
 * Megatron's tokenizer.eod. Anything else a tokenizer.json may hold (normalizers, other models,
 * byte fallback) is refused with a message naming it rather than tokenized differently. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "app/core/hashmap.h"
#include "app/tokenizers/tokenizer_internal.h"

typedef struct added_token {
    char *content;
    size_t len;
    int32_t id;
} added_token;

struct hf_tokenizer {
    gpt2_bpe *bpe;
    int bpe_id_limit;            /* ids below this decode through the BPE vocabulary */
    added_token *added;          /* matched in the text before the BPE */
    int n_added;
    int first_byte[256];         /* does some added token start with this byte */
    int32_t *prefix, *suffix;    /* the post-processor's tokens around a text */
    int n_prefix, n_suffix;
    int add_prefix_space;        /* ByteLevel: a space before a text that does not start with one */
    int vocab_size, eod;
    char *spaced;                /* scratch for add_prefix_space */
    size_t spaced_cap;
};

void hf_tokenizer_free(hf_tokenizer *hf) {
    if (!hf) return;
    gpt2_bpe_free(hf->bpe);
    for (int i = 0; i < hf->n_added; i++) free(hf->added[i].content);
    free(hf->added);
    free(hf->prefix);
    free(hf->suffix);
    free(hf->spaced);
    free(hf);
}

static int is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "key" of an object as a string, or "" */
static const char *string_at(json_t *object, const char *key) {
    const char *s = json_string_value(json_object_get(object, key));
    return s ? s : "";
}

static int true_at(json_t *object, const char *key) { return json_is_true(json_object_get(object, key)); }

/* model: byte-level BPE only, without the options that change how it splits words */
static int check_model(json_t *model, const char *path, int *ignore_merges, char *err, size_t errlen) {
    if (strcmp(string_at(model, "type"), "BPE") != 0) {
        snprintf(err, errlen, "%s: model type \"%s\" is not supported (byte-level BPE only)", path,
                 string_at(model, "type"));
        return -1;
    }
    const char *unsupported[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++)
        if (string_at(model, unsupported[i])[0]) {
            snprintf(err, errlen, "%s: model.%s is not supported (byte-level BPE without it only)",
                     path, unsupported[i]);
            return -1;
        }
    if (true_at(model, "byte_fallback") || true_at(model, "fuse_unk")) {
        snprintf(err, errlen, "%s: model.byte_fallback / fuse_unk (SentencePiece-style BPE) is not "
                 "supported; for a tokenizer.model use --tokenizer-type Llama2Tokenizer", path);
        return -1;
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0) {
        snprintf(err, errlen, "%s: model.dropout (BPE dropout) is not supported", path);
        return -1;
    }
    *ignore_merges = true_at(model, "ignore_merges");
    return 0;
}

/* one ByteLevel pre-tokenizer: whether it splits with GPT-2's pattern, and add_prefix_space */
static void read_byte_level(hf_tokenizer *hf, json_t *byte_level, int *use_regex) {
    json_t *regex = json_object_get(byte_level, "use_regex");
    *use_regex = !regex || json_is_true(regex); /* the default is true */
    hf->add_prefix_space = true_at(byte_level, "add_prefix_space");
}

/* the split pattern: Sequence[Split(Regex, Isolated), ByteLevel(use_regex false)] or
 * ByteLevel(use_regex true, GPT-2's pattern). *pattern points into the JSON or is NULL. */
static int read_pre_tokenizer(hf_tokenizer *hf, json_t *pre, const char *path, const char **pattern,
                              char *err, size_t errlen) {
    const char *type = string_at(pre, "type");
    int use_regex = 0;
    *pattern = NULL;
    if (strcmp(type, "ByteLevel") == 0) {
        read_byte_level(hf, pre, &use_regex);
        if (use_regex) *pattern = gpt2_bpe_pattern;
        return 0;
    }
    json_t *list = json_object_get(pre, "pretokenizers");
    if (strcmp(type, "Sequence") == 0 && json_is_array(list) && json_array_size(list) == 2) {
        json_t *split = json_array_get(list, 0), *byte_level = json_array_get(list, 1);
        const char *regex = string_at(json_object_get(split, "pattern"), "Regex");
        if (strcmp(string_at(split, "type"), "Split") == 0 && regex[0] &&
            strcmp(string_at(split, "behavior"), "Isolated") == 0 && !true_at(split, "invert") &&
            strcmp(string_at(byte_level, "type"), "ByteLevel") == 0) {
            read_byte_level(hf, byte_level, &use_regex);
            if (!use_regex) {
                *pattern = regex;
                return 0;
            }
        }
    }
    snprintf(err, errlen, "%s: pre_tokenizer \"%s\" is not supported (ByteLevel, or a Sequence of a "
             "Split regex with behavior Isolated and a ByteLevel without its own regex)", path, type);
    return -1;
}

static int push_id(int32_t **list, int *n, int32_t id) {
    int32_t *grown = realloc(*list, (size_t)(*n + 1) * sizeof **list);
    if (!grown) return -1;
    *list = grown;
    grown[(*n)++] = id;
    return 0;
}

/* TemplateProcessing's "single" template: special tokens before and after $A */
static int read_template(hf_tokenizer *hf, json_t *processor, const char *path, char *err, size_t errlen) {
    json_t *single = json_object_get(processor, "single"), *specials = json_object_get(processor, "special_tokens");
    size_t index;
    json_t *item;
    int seen_text = 0;
    json_array_foreach(single, index, item) {
        if (json_object_get(item, "Sequence")) {
            if (strcmp(string_at(json_object_get(item, "Sequence"), "id"), "A") != 0 || seen_text++) {
                snprintf(err, errlen, "%s: post_processor template \"single\" must hold the text $A once", path);
                return -1;
            }
            continue;
        }
        const char *name = string_at(json_object_get(item, "SpecialToken"), "id");
        json_t *ids = json_object_get(json_object_get(specials, name), "ids");
        if (!name[0] || !json_is_array(ids)) {
            snprintf(err, errlen, "%s: post_processor template names special token \"%s\" without ids",
                     path, name);
            return -1;
        }
        size_t k;
        json_t *id;
        json_array_foreach(ids, k, id) {
            if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX) {
                snprintf(err, errlen, "%s: special token \"%s\" has a bad id", path, name);
                return -1;
            }
            if (push_id(seen_text ? &hf->suffix : &hf->prefix, seen_text ? &hf->n_suffix : &hf->n_prefix,
                        (int32_t)json_integer_value(id))) {
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
        }
    }
    if (!seen_text) {
        snprintf(err, errlen, "%s: post_processor template \"single\" has no $A", path);
        return -1;
    }
    return 0;
}

/* null, ByteLevel (ids unchanged), TemplateProcessing, or a Sequence of those */
static int read_post_processor(hf_tokenizer *hf, json_t *post, const char *path, char *err, size_t errlen) {
    if (!post || json_is_null(post)) return 0;
    const char *type = string_at(post, "type");
    if (strcmp(type, "ByteLevel") == 0) return 0;
    if (strcmp(type, "TemplateProcessing") == 0) return read_template(hf, post, path, err, errlen);
    if (strcmp(type, "Sequence") == 0) {
        size_t index;
        json_t *item;
        json_array_foreach(json_object_get(post, "processors"), index, item)
            if (read_post_processor(hf, item, path, err, errlen)) return -1;
        return 0;
    }
    snprintf(err, errlen, "%s: post_processor \"%s\" is not supported (TemplateProcessing, ByteLevel "
             "or a Sequence of them)", path, type);
    return -1;
}

static int read_added_tokens(hf_tokenizer *hf, json_t *list, const char *path, char *err, size_t errlen) {
    size_t count = json_array_size(list), index;
    json_t *item;
    hf->added = calloc(count ? count : 1, sizeof *hf->added);
    if (!hf->added) goto out_of_memory;
    json_array_foreach(list, index, item) {
        const char *content = json_string_value(json_object_get(item, "content"));
        json_t *id = json_object_get(item, "id");
        if (!content || !content[0] || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX / 2) {
            snprintf(err, errlen, "%s: added_tokens[%zu] needs a content and a non-negative id", path, index);
            return -1;
        }
        if (true_at(item, "lstrip") || true_at(item, "rstrip") || true_at(item, "single_word")) {
            snprintf(err, errlen, "%s: added token \"%.80s\" uses lstrip, rstrip or single_word, which "
                     "are not supported", path, content);
            return -1;
        }
        added_token *t = &hf->added[hf->n_added++];
        t->content = strdup(content);
        if (!t->content) goto out_of_memory;
        t->len = strlen(content);
        t->id = (int32_t)json_integer_value(id);
        hf->first_byte[(unsigned char)content[0]] = 1;
    }
    return 0;
out_of_memory:
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
}

/* the id of a token text: an added token, else the vocabulary's; -1 when neither */
static int token_id(const hf_tokenizer *hf, const char *text) {
    for (int i = 0; i < hf->n_added; i++)
        if (strcmp(hf->added[i].content, text) == 0) return hf->added[i].id;
    return gpt2_bpe_token_id(hf->bpe, text);
}

/* vocabulary size as len(tokenizer): the vocabulary plus the added tokens it does not hold */
static int count_vocab(const hf_tokenizer *hf) {
    int count = gpt2_bpe_vocab_size(hf->bpe);
    for (int i = 0; i < hf->n_added; i++) {
        int duplicate = gpt2_bpe_token_id(hf->bpe, hf->added[i].content) >= 0;
        for (int j = 0; j < i && !duplicate; j++) duplicate = hf->added[j].id == hf->added[i].id;
        count += !duplicate;
    }
    return count;
}

/* tokenizer_config.json beside tokenizer.json: its eos_token ("text" or {"content": "text"}) */
static int read_eos(hf_tokenizer *hf, const char *dir, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%.4096s/tokenizer_config.json", dir);
    hf->eod = -1;
    FILE *probe = fopen(path, "rb");
    if (!probe) return 0; /* no EOS known: --append-eod says so */
    fclose(probe);
    json_error_t jerr;
    json_t *config = json_load_file(path, 0, &jerr);
    if (!config) {
        snprintf(err, errlen, "%s: malformed JSON at line %d, column %d: %s", path, jerr.line,
                 jerr.column, jerr.text);
        return -1;
    }
    json_t *eos = json_object_get(config, "eos_token");
    const char *text = json_is_object(eos) ? string_at(eos, "content") : json_string_value(eos);
    int rc = 0;
    if (text && text[0]) {
        hf->eod = token_id(hf, text);
        if (hf->eod < 0) {
            snprintf(err, errlen, "%s: eos_token \"%.80s\" is not a token of tokenizer.json", path, text);
            rc = -1;
        }
    }
    json_decref(config);
    return rc;
}

hf_tokenizer *hf_tokenizer_load(const char *model_path, char *err, size_t errlen) {
    if (!model_path || !model_path[0]) {
        snprintf(err, errlen, "HuggingFaceTokenizer needs --tokenizer-model (a directory with "
                 "tokenizer.json, or the file)");
        return NULL;
    }
    char path[4200], dir[4200];
    if (is_directory(model_path)) {
        snprintf(dir, sizeof dir, "%s", model_path);
        snprintf(path, sizeof path, "%.4096s/tokenizer.json", model_path);
    } else {
        snprintf(path, sizeof path, "%s", model_path);
        snprintf(dir, sizeof dir, "%s", model_path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        snprintf(err, errlen, "HuggingFaceTokenizer: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    fclose(probe);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(err, errlen, "%s: malformed JSON at line %d, column %d: %s", path, jerr.line,
                 jerr.column, jerr.text);
        return NULL;
    }
    hf_tokenizer *hf = calloc(1, sizeof *hf);
    if (!hf) {
        snprintf(err, errlen, "%s: out of memory", path);
        json_decref(root);
        return NULL;
    }
    json_t *model = json_object_get(root, "model"), *normalizer = json_object_get(root, "normalizer");
    const char *pattern = NULL;
    int ignore_merges = 0;
    if (normalizer && !json_is_null(normalizer)) {
        snprintf(err, errlen, "%s: normalizer \"%s\" is not supported (byte-level BPE tokenizers have "
                 "none)", path, string_at(normalizer, "type"));
        goto fail;
    }
    if (check_model(model, path, &ignore_merges, err, errlen) ||
        read_pre_tokenizer(hf, json_object_get(root, "pre_tokenizer"), path, &pattern, err, errlen) ||
        read_post_processor(hf, json_object_get(root, "post_processor"), path, err, errlen) ||
        read_added_tokens(hf, json_object_get(root, "added_tokens"), path, err, errlen))
        goto fail;
    hf->bpe = gpt2_bpe_from_json(json_object_get(model, "vocab"), json_object_get(model, "merges"),
                                 pattern, ignore_merges, path, err, errlen);
    if (!hf->bpe) goto fail;
    hf->vocab_size = count_vocab(hf);
    if (read_eos(hf, dir, err, errlen)) goto fail;
    json_decref(root);
    return hf;
fail:
    json_decref(root);
    hf_tokenizer_free(hf);
    return NULL;
}

/* the longest added token at text[i], or NULL */
static const added_token *added_at(const hf_tokenizer *hf, const char *text, size_t len, size_t i) {
    const added_token *best = NULL;
    if (!hf->first_byte[(unsigned char)text[i]]) return NULL;
    for (int k = 0; k < hf->n_added; k++) {
        const added_token *t = &hf->added[k];
        if (t->len <= len - i && (!best || t->len > best->len) && memcmp(text + i, t->content, t->len) == 0)
            best = t;
    }
    return best;
}

/* ordinary text between added tokens: pre-tokenize and BPE */
static int encode_segment(hf_tokenizer *hf, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                          size_t *cap) {
    if (len == 0) return 0;
    if (hf->add_prefix_space && text[0] != ' ') {
        if (len + 2 > hf->spaced_cap) {
            char *grown = realloc(hf->spaced, len + 2);
            if (!grown) return -1;
            hf->spaced = grown;
            hf->spaced_cap = len + 2;
        }
        hf->spaced[0] = ' ';
        memcpy(hf->spaced + 1, text, len);
        return gpt2_bpe_encode(hf->bpe, hf->spaced, len + 1, ids, n_ids, cap);
    }
    return gpt2_bpe_encode(hf->bpe, text, len, ids, n_ids, cap);
}

int hf_tokenizer_encode(hf_tokenizer *hf, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                        size_t *cap) {
    for (int i = 0; i < hf->n_prefix; i++)
        if (token_ids_push(ids, n_ids, cap, hf->prefix[i])) return -1;
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        const added_token *t = added_at(hf, text, len, i);
        if (!t) {
            i++;
            continue;
        }
        if (encode_segment(hf, text + start, i - start, ids, n_ids, cap) ||
            token_ids_push(ids, n_ids, cap, t->id))
            return -1;
        i += t->len;
        start = i;
    }
    if (encode_segment(hf, text + start, len - start, ids, n_ids, cap)) return -1;
    for (int i = 0; i < hf->n_suffix; i++)
        if (token_ids_push(ids, n_ids, cap, hf->suffix[i])) return -1;
    return 0;
}

char *hf_tokenizer_decode(const hf_tokenizer *hf, const int32_t *ids, size_t n, size_t *out_len) {
    size_t used = 0, cap = 64;
    char *text = malloc(cap);
    if (!text) return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *piece = NULL;
        size_t piece_len = 0;
        char *decoded = NULL;
        for (int k = 0; k < hf->n_added && !piece; k++)
            if (hf->added[k].id == ids[i]) {
                piece = hf->added[k].content;
                piece_len = hf->added[k].len;
            }
        if (!piece) {
            decoded = gpt2_bpe_decode(hf->bpe, &ids[i], 1, &piece_len);
            if (!decoded) {
                free(text);
                return NULL;
            }
            piece = decoded;
        }
        if (used + piece_len + 1 > cap) {
            while (used + piece_len + 1 > cap) cap *= 2;
            char *grown = realloc(text, cap);
            if (!grown) {
                free(decoded);
                free(text);
                return NULL;
            }
            text = grown;
        }
        memcpy(text + used, piece, piece_len);
        used += piece_len;
        free(decoded);
    }
    text[used] = '\0';
    if (out_len) *out_len = used;
    return text;
}

int hf_tokenizer_vocab_size(const hf_tokenizer *hf) { return hf->vocab_size; }
int hf_tokenizer_eod(const hf_tokenizer *hf) { return hf->eod; }
int hf_tokenizer_bos(const hf_tokenizer *hf) { return hf->n_prefix ? hf->prefix[0] : -1; }
