/* data_setup.c: see data_setup.h. */
#include "app/training/data_setup.h"
#include "app/core/error.h"
#include "io/corpus_check.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STORAGE_BYTES = 1 << 16 };

typedef struct word_store { char *text; size_t used; } word_store;

static char *store(word_store *s, const char *word) {
    size_t n = strlen(word) + 1;
    if (s->used + n > STORAGE_BYTES) user_error("the data path lists are too long (over %d bytes)", STORAGE_BYTES);
    char *at = s->text + s->used;
    memcpy(at, word, n);
    s->used += n;
    return at;
}

/* a blend from a space-separated flag value (Megatron's nargs='*') */
static void blend_from_words(gpt_blend *blend, const char *value, const char *flag, word_store *s) {
    char *words[2 * GPT_DATA_MAX_PATHS + 1], *copy = store(s, value), *save = NULL;
    int count = 0;
    for (char *w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        if (count == 2 * GPT_DATA_MAX_PATHS) user_error("%s lists more than %d corpora", flag, GPT_DATA_MAX_PATHS);
        words[count++] = w;
    }
    char err[1024];
    if (gpt_blend_set_paths(blend, count, words, err, sizeof err)) user_error("%s: %s", flag, err);
}

/* --per-split-data-args-path: {"train": LIST or STRING, "valid": ..., "test": ...} */
static void blends_from_json(gpt_blend blends[GPT_DATA_SPLITS], const char *path, word_store *s) {
    static const char *const keys[GPT_DATA_SPLITS] = {"train", "valid", "test"};
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) user_error("--per-split-data-args-path %s: line %d: %s", path, jerr.line, jerr.text);
    if (!json_is_object(root)) user_error("--per-split-data-args-path %s: expected a JSON object with train, valid and test", path);
    for (int split = 0; split < GPT_DATA_SPLITS; split++) {
        json_t *value = json_object_get(root, keys[split]);
        if (!value) user_error("--per-split-data-args-path %s: no \"%s\" entry", path, keys[split]);
        char flag[1200];
        snprintf(flag, sizeof flag, "--per-split-data-args-path %s (\"%s\")", path, keys[split]);
        if (json_is_null(value)) continue;
        if (json_is_string(value)) {
            blend_from_words(&blends[split], json_string_value(value), flag, s);
            continue;
        }
        if (!json_is_array(value)) user_error("%s: expected a list or a string", flag);
        char *words[2 * GPT_DATA_MAX_PATHS + 1];
        int count = 0;
        size_t i;
        json_t *item;
        json_array_foreach(value, i, item) {
            char number[64];
            const char *word;
            if (json_is_string(item)) word = json_string_value(item);
            else if (json_is_number(item)) { snprintf(number, sizeof number, "%.17g", json_number_value(item)); word = number; }
            else user_error("%s: item %zu is neither a string nor a number", flag, i);
            if (count == 2 * GPT_DATA_MAX_PATHS) user_error("%s lists more than %d corpora", flag, GPT_DATA_MAX_PATHS);
            /* prefixes are stripped (get_blend_from_list) */
            while (*word == ' ' || *word == '\t' || *word == '\n') word++;
            char *w = store(s, word);
            for (size_t n = strlen(w); n > 0 && (w[n - 1] == ' ' || w[n - 1] == '\t' || w[n - 1] == '\n'); n--) w[n - 1] = '\0';
            words[count++] = w;
        }
        char err[1024];
        if (gpt_blend_set_paths(&blends[split], count, words, err, sizeof err)) user_error("%s: %s", flag, err);
    }
    json_decref(root);
}

/* Megatron's tokenizer identity in the index cache descriptions: the unique_identifiers of the
 * MegatronTokenizerText that megatron/core/tokenizers/utils/build_tokenizer.py makes from these
 * flags (its keyword arguments as str(); Megatron's defaults for the flags we do not have).
 * Best effort where Megatron reads what this project has no flag for: --tokenizer-special-tokens,
 * --chat-template, --trust-remote-code, --tokenizer-hf-no-use-fast,
 * --tokenizer-hf-no-include-special-tokens, --use-gigatoken, --tokenizer-sentencepiece-legacy and
 * --tokenizer-sentencepiece-ignore-extra-whitespaces enter at their defaults, and a
 * --tokenizer-metadata file naming another tokenizer class changes Megatron's "class" (not
 * modelled). --tokenizer-model enters as given, not resolved (a directory and its tokenizer.json
 * name different caches, as in Megatron). tests/mpi/tokenizer_cache_name_test.sh checks these
 * descriptions against ones written by hand from Megatron's code. */
static void tokenizer_identity(const args *a, gpt_data_config *cfg, word_store *s) {
    int n = 0;
#define FIELD(k, v) do { cfg->tokenizer_keys[n] = (k); cfg->tokenizer_values[n] = (v); n++; } while (0)
    const char *type = a->tokenizer_type;
    const char *vocab = a->vocab_file[0] ? a->vocab_file : "None";
    const char *merges = a->merge_file[0] ? a->merge_file : "None";
    const char *model = a->tokenizer_model[0] ? a->tokenizer_model : NULL;
    FIELD("class", "megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText");
    if (!strcmp(type, "GPT2BPETokenizer") || !strcmp(type, "BertWordPieceLowerCase") ||
        !strcmp(type, "BertWordPieceCase")) {
        FIELD("tokenizer_path", type);
        if (!strcmp(type, "BertWordPieceCase")) {
            char list[2048];
            int at = snprintf(list, sizeof list, "[");
            for (int i = 0; i < 100; i++)
                at += snprintf(list + at, sizeof list - (size_t)at, "%s'<extra_id_%d>'", i ? ", " : "", i);
            snprintf(list + at, sizeof list - (size_t)at, "]");
            FIELD("additional_special_tokens", store(s, list));
        } else {
            FIELD("additional_special_tokens", "[]");
        }
        FIELD("vocab_file", vocab);
        FIELD("merges_file", merges);
        FIELD("use_fast", "True");
        FIELD("trust_remote_code", "False");
        FIELD("include_special_tokens", "True");
        FIELD("use_gigatoken", "False");
    } else if (!strcmp(type, "NullTokenizer") || !type[0]) {
        FIELD("tokenizer_path", NULL);
        char number[32];
        snprintf(number, sizeof number, "%d", a->vocab_size_flag);
        if (a->vocab_size_flag > 0) FIELD("vocab_size", store(s, number));
        FIELD("pad_id", "-1");
    } else if (!strcmp(type, "HuggingFaceTokenizer")) {
        FIELD("tokenizer_path", model);
        FIELD("chat_template", "None");
        FIELD("vocab_file", vocab);
        FIELD("merges_file", merges);
        FIELD("additional_special_tokens", "[]");
        FIELD("use_fast", "True");
        FIELD("trust_remote_code", "False");
        FIELD("include_special_tokens", "True");
        FIELD("use_gigatoken", "False");
    } else {  /* SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer */
        FIELD("tokenizer_path", model);
        FIELD("chat_template", "None");
        FIELD("ignore_extra_whitespaces", "True");
        FIELD("legacy", "False");
        FIELD("special_tokens", "None");
    }
#undef FIELD
    cfg->tokenizer_fields = n;
}

void data_setup_num_samples(const args *a, int64_t samples[GPT_DATA_SPLITS]) {
    samples[SPLIT_TRAIN] = a->train_samples ? a->train_samples : a->train_iters * a->global_batch_size;
    samples[SPLIT_VALID] = gpt_data_samples_needed(SPLIT_VALID, a->train_iters, a->global_batch_size,
                                                   a->eval_interval, a->eval_iters);
    samples[SPLIT_TEST] = gpt_data_samples_needed(SPLIT_TEST, a->train_iters, a->global_batch_size,
                                                  a->eval_interval, a->eval_iters);
}

/* pretrain_bert's BERTMaskedWordPieceDatasetConfig (pretrain_bert.py: masking_max_ngram 3,
 * whole-word masking): the datasets keep a pointer to it, so it lives as long as the process
 * (one run opens one set of datasets; a second open replaces it) */
static bert_dataset_config bert_config;
static uint8_t *bert_word_piece;

/* the WordPiece vocabulary file a masked-LM dataset reads (pretrain_bert, pretrain_t5) */
static const char *wordpiece_vocab_file(const args *a) {
    if (!a->vocab_file[0]) user_error("%s needs --vocab-file (the WordPiece vocabulary of --tokenizer-type %s)", program_name, a->tokenizer_type);
    return a->vocab_file;
}

static const bert_dataset_config *bert_dataset_setup(const args *a) {
    char err[1200];
    free(bert_word_piece);
    bert_word_piece = NULL;
    memset(&bert_config, 0, sizeof bert_config);
    bert_config.mask_prob = a->mask_prob;
    bert_config.short_seq_prob = a->short_seq_prob;
    bert_config.max_ngram = 3;
    bert_config.binary_head = !a->bert_no_binary_head;
    if (bert_vocab_load(wordpiece_vocab_file(a), a->tokenizer_type, &bert_config.vocab, &bert_word_piece, err, sizeof err))
        user_error("--vocab-file %s", err);
    /* every id the dataset emits (the corpus's, [CLS] [SEP] [MASK] [PAD], the random draws over
     * the whole tokenizer vocabulary, BertWordPieceCase's 100 <extra_id_i> included) is an id of
     * the model's vocabulary: data_setup_vocab_size sized it from the same bert_vocab_load */
    CHECK(bert_config.vocab.size <= a->padded_vocab_size, "--vocab-file %s: the BERT dataset draws its random tokens "
          "from the tokenizer's %lld ids (--tokenizer-type %s), which do not fit the model's padded vocabulary of %d",
          a->vocab_file, (long long)bert_config.vocab.size, a->tokenizer_type, a->padded_vocab_size);
    return &bert_config;
}

/* pretrain_t5's T5MaskedWordPieceDatasetConfig (pretrain_t5.py: masking_max_ngram 10, geometric
 * span lengths), kept for the process as bert_config is */
static t5_dataset_config t5_config;
static uint8_t *t5_word_piece;

static const t5_dataset_config *t5_dataset_setup(const args *a) {
    char err[1200];
    free(t5_word_piece);
    t5_word_piece = NULL;
    t5_config = (t5_dataset_config){.mask_prob = a->mask_prob, .short_seq_prob = a->short_seq_prob, .max_ngram = 10,
                                    .decoder_seq_length = a->decoder_seq_length};
    if (t5_vocab_load(wordpiece_vocab_file(a), a->tokenizer_type, &t5_config.vocab, &t5_word_piece, err, sizeof err))
        user_error("--vocab-file %s", err);
    /* the sentinels are ids of the model's vocabulary (data_setup_vocab_size sized it) */
    CHECK(t5_config.vocab.size <= a->padded_vocab_size, "the T5 tokenizer's %lld ids (sentinels included) exceed the "
          "model's padded vocabulary of %d", (long long)t5_config.vocab.size, a->padded_vocab_size);
    return &t5_config;
}

int data_setup_vocab_size(const args *a, int tokenizer_vocab_size) {
    if (!a->t5 && !a->bert) return tokenizer_vocab_size;
    char err[1200];
    int64_t size;
    uint8_t *word_piece = NULL;
    if (a->t5) {
        t5_vocab vocab;
        if (t5_vocab_load(wordpiece_vocab_file(a), a->tokenizer_type, &vocab, &word_piece, err, sizeof err))
            user_error("--vocab-file %s", err);
        size = vocab.size;
    } else {  /* pretrain_bert, finetune_bert: the BERT dataset's tokenizer (no [BOS]/[EOS]) */
        bert_vocab vocab;
        if (bert_vocab_load(wordpiece_vocab_file(a), a->tokenizer_type, &vocab, &word_piece, err, sizeof err))
            user_error("--vocab-file %s", err);
        size = vocab.size;
    }
    free(word_piece);
    if (size > INT_MAX)
        user_error("--vocab-file %s: %lld tokens%s, over %d", a->vocab_file, (long long)size,
                   strcmp(a->tokenizer_type, "BertWordPieceCase") ? "" : " with the 100 <extra_id_i>", INT_MAX);
    return (int)size;
}

gpt_datasets *data_setup_open(const args *a, int verbose, int with_test, MPI_Comm comm, char **storage) {
    gpt_data_config cfg;
    memset(&cfg, 0, sizeof cfg);
    word_store s = {calloc(1, STORAGE_BYTES), 0};
    CHECK(s.text, "out of memory");
    *storage = s.text;
    if (a->data_path[0]) {
        blend_from_words(&cfg.blend, a->data_path, "--data-path", &s);
    } else {
        cfg.per_split = 1;
        if (a->per_split_data_args_path[0]) {
            blends_from_json(cfg.split_blends, a->per_split_data_args_path, &s);
        } else {
            const char *values[GPT_DATA_SPLITS] = {a->train_data_path, a->valid_data_path, a->test_data_path};
            const char *flags[GPT_DATA_SPLITS] = {"--train-data-path", "--valid-data-path", "--test-data-path"};
            for (int split = 0; split < GPT_DATA_SPLITS; split++)
                if (values[split][0]) blend_from_words(&cfg.split_blends[split], values[split], flags[split], &s);
        }
    }
    cfg.split = a->split;
    cfg.seq_length = a->seq_length;
    cfg.seed = a->seed;
    data_setup_num_samples(a, cfg.num_samples);
    /* training evaluates on the validation split only: build the test split when asked */
    if (!with_test) cfg.num_samples[SPLIT_TEST] = 0;
    cfg.test_optional = 1;  /* training skips a test split without documents, with a note */
    if (a->eval_iters == 0) cfg.num_samples[SPLIT_VALID] = 0;
    cfg.cache_path = a->data_cache_path[0] ? a->data_cache_path : NULL;
    cfg.default_cache = 1;  /* Megatron's <prefix>/cache/GPTDataset_indices */
    tokenizer_identity(a, &cfg, &s);
    cfg.verbose = verbose;
    if (a->bert) cfg.bert = bert_dataset_setup(a);
    if (a->t5) cfg.t5 = t5_dataset_setup(a);
    /* validation at the door: every corpus holds documents, its token ids fit the vocabulary and
     * its checksums hold (io/corpus_check.h) */
    const gpt_blend *blends[1 + GPT_DATA_SPLITS] = {&cfg.blend, &cfg.split_blends[0], &cfg.split_blends[1], &cfg.split_blends[2]};
    for (int b = 0; b < 1 + GPT_DATA_SPLITS; b++)
        if (blends[b]->num_paths > 0)
            corpus_check_all(blends[b]->paths, blends[b]->num_paths,
                             a->vocab_size > 0 ? a->vocab_size : a->padded_vocab_size, !a->no_verify_checksums, comm);
    return gpt_datasets_open(&cfg, comm);
}

void data_setup_print_samples(const args *a, MPI_Comm comm) {
    static const char *const names[GPT_DATA_SPLITS] = {"train", "valid", "test"};
    char name[16] = "";
    long long first = -1, last = -1;
    int fields = sscanf(a->print_sample, "%15[a-z]:%lld-%lld", name, &first, &last);
    if (fields == 2) last = first;
    int split = -1;
    for (int i = 0; i < GPT_DATA_SPLITS; i++)
        if (!strcmp(name, names[i])) split = i;
    if (fields < 2 || split < 0 || first < 0 || last < first)
        user_error("--print-sample %s: expected SPLIT:I or SPLIT:I-J with SPLIT train, valid or test", a->print_sample);
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char *storage = NULL;
    gpt_datasets *ds = data_setup_open(a, 0, split == SPLIT_TEST, comm, &storage);
    int64_t available = gpt_dataset_num_samples(ds, split);
    if (last >= available)
        user_error("--print-sample %s: the %s split has %lld samples for this run's flags", a->print_sample,
                   names[split], (long long)available);
    /* every rank reads its share (sample i on rank i mod size), rank 0 prints them in order */
    int size;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    int width = a->seq_length + 1;
    int32_t *rows = calloc((size_t)size * (size_t)width, sizeof(int32_t));
    CHECK(rows, "out of memory");
    for (long long round = first; round <= last; round += size) {
        long long i = round + rank;
        int32_t *mine = rows + (size_t)rank * (size_t)width;
        if (i <= last) gpt_dataset_sample(ds, split, i, mine);
        CHECK_MPI(MPI_Gather(rank == 0 ? MPI_IN_PLACE : mine, width, MPI_INT32_T, rows, width, MPI_INT32_T, 0, comm));
        for (int r = 0; rank == 0 && r < size && round + r <= last; r++) {
            printf("%s %lld:", names[split], round + r);
            for (int k = 0; k < width; k++) printf(" %d", rows[(size_t)r * (size_t)width + (size_t)k]);
            printf("\n");
        }
    }
    fflush(stdout);
    free(rows);
    gpt_datasets_close(ds);
    free(storage);
}
