/* bert_samples.c: prints BERT training samples from the C data pipeline (app/data/bert_dataset.h
 * through gpt_datasets_open), for the comparison with tests/tools/megatron_bert_samples.py
 * (not itself a test). Flags as pretrain_bert takes them:
 *   bert_samples --seq-length S --seed N --samples TRAIN VALID TEST [--split 969,30,1]
 *       (--data-path WORDS... | --train-data-path ... --valid-data-path ... --test-data-path ...)
 *       --tokenizer-type BertWordPieceLowerCase --vocab-file VOCAB [--mask-prob 0.15]
 *       [--short-seq-prob 0.1] [--bert-no-binary-head] [--data-cache-path DIR] --print SPLIT:I-J
 * One line per sample:
 *   SPLIT I: text ... | types ... | labels ... | padding ... | loss ... | is_random R truncated T */
#include "app/core/error.h"
#include "app/data/gpt_dataset.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the words after argv[*i] up to the next "--" flag */
static int take_words(int argc, char **argv, int *i, char ***words) {
    int first = *i + 1, n = 0;
    while (first + n < argc && strncmp(argv[first + n], "--", 2)) n++;
    *words = argv + first;
    *i += n;
    return n;
}

static void print_array(const char *name, const int64_t *a, int n) {
    printf(" %s", name);
    for (int k = 0; k < n; k++) printf(" %lld", (long long)a[k]);
    printf(" |");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "bert_samples";
    gpt_data_config cfg = {0};
    bert_dataset_config bert = {.mask_prob = 0.15, .short_seq_prob = 0.1, .max_ngram = 3,
                                .binary_head = 1};
    const char *vocab_file = NULL, *tokenizer_type = "BertWordPieceLowerCase", *span = NULL;
    cfg.seed = 1234;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        char **words;
        int n;
        char err[300];
        if (!strcmp(flag, "--seq-length") && i + 1 < argc) cfg.seq_length = atoi(argv[++i]);
        else if (!strcmp(flag, "--seed") && i + 1 < argc) cfg.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(flag, "--split") && i + 1 < argc) cfg.split = argv[++i];
        else if (!strcmp(flag, "--vocab-file") && i + 1 < argc) vocab_file = argv[++i];
        else if (!strcmp(flag, "--tokenizer-type") && i + 1 < argc) tokenizer_type = argv[++i];
        else if (!strcmp(flag, "--mask-prob") && i + 1 < argc) bert.mask_prob = atof(argv[++i]);
        else if (!strcmp(flag, "--short-seq-prob") && i + 1 < argc) bert.short_seq_prob = atof(argv[++i]);
        else if (!strcmp(flag, "--bert-no-binary-head")) bert.binary_head = 0;
        else if (!strcmp(flag, "--print") && i + 1 < argc) span = argv[++i];
        else if (!strcmp(flag, "--data-cache-path") && i + 1 < argc) cfg.cache_path = argv[++i];
        else if (!strcmp(flag, "--samples") && i + 3 < argc)
            for (int s = 0; s < 3; s++) cfg.num_samples[s] = atoll(argv[++i]);
        else if (!strcmp(flag, "--data-path")) {
            n = take_words(argc, argv, &i, &words);
            if (gpt_blend_set_paths(&cfg.blend, n, words, err, sizeof err)) user_error("--data-path: %s", err);
        } else if (!strcmp(flag, "--train-data-path") || !strcmp(flag, "--valid-data-path") ||
                   !strcmp(flag, "--test-data-path")) {
            int s = flag[2] == 't' && flag[3] == 'r' ? 0 : flag[2] == 'v' ? 1 : 2;
            n = take_words(argc, argv, &i, &words);
            cfg.per_split = 1;
            if (gpt_blend_set_paths(&cfg.split_blends[s], n, words, err, sizeof err))
                user_error("%s: %s", flag, err);
        } else user_error("unknown or incomplete flag %s", flag);
    }
    if (!vocab_file || !span) user_error("--vocab-file and --print are required");
    char err[600], split_name[16];
    uint8_t *word_piece = NULL;
    if (bert_vocab_load(vocab_file, tokenizer_type, &bert.vocab, &word_piece, err, sizeof err))
        user_error("%s", err);
    cfg.bert = &bert;
    /* the tokenizer's unique_identifiers in the cache description (app/training/data_setup.c's
     * for the BERT types, there from the flags) */
    static char extra_ids[2048];
    int at = snprintf(extra_ids, sizeof extra_ids, "[");
    for (int k = 0; k < 100; k++)
        at += snprintf(extra_ids + at, sizeof extra_ids - (size_t)at, "%s'<extra_id_%d>'", k ? ", " : "", k);
    snprintf(extra_ids + at, sizeof extra_ids - (size_t)at, "]");
    const char *keys[] = {"class", "tokenizer_path", "additional_special_tokens", "vocab_file", "merges_file",
                          "use_fast", "trust_remote_code", "include_special_tokens", "use_gigatoken"};
    const char *values[] = {"megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText",
                            tokenizer_type, strcmp(tokenizer_type, "BertWordPieceCase") ? "[]" : extra_ids,
                            vocab_file, "None", "True", "False", "True", "False"};
    cfg.tokenizer_fields = 9;
    for (int k = 0; k < 9; k++) cfg.tokenizer_keys[k] = keys[k], cfg.tokenizer_values[k] = values[k];
    long long first = 0, last = 0;
    int fields = sscanf(span, "%15[a-z]:%lld-%lld", split_name, &first, &last);
    if (fields < 2) user_error("--print %s: expected SPLIT:I-J", span);
    if (fields == 2) last = first;
    int split = !strcmp(split_name, "train") ? 0 : !strcmp(split_name, "valid") ? 1 : 2;
    gpt_datasets *ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
    int seq = cfg.seq_length;
    int64_t *arrays = malloc(sizeof(int64_t) * 5 * (size_t)seq);
    CHECK(arrays, "out of memory");
    bert_sample sample = {arrays, arrays + seq, arrays + 2 * seq, arrays + 3 * seq, arrays + 4 * seq,
                          0, 0};
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long long i = first; i <= last && rank == 0; i++) {
        bert_dataset_sample(ds, split, i, &sample);
        printf("%s %lld: text", split_name, i);
        for (int k = 0; k < seq; k++) printf(" %lld", (long long)sample.text[k]);
        printf(" |");
        print_array("types", sample.types, seq);
        print_array("labels", sample.labels, seq);
        print_array("padding", sample.padding_mask, seq);
        print_array("loss", sample.loss_mask, seq);
        printf(" is_random %d truncated %d\n", sample.is_random, sample.truncated);
    }
    gpt_datasets_close(ds);
    free(arrays);
    free(word_piece);
    MPI_Finalize();
    return 0;
}
