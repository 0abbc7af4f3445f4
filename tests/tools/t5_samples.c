/* t5_samples.c: prints T5 training samples from the C data pipeline (app/data/t5_dataset.h
 * through gpt_datasets_open), for the comparison with tests/tools/megatron_t5_samples.py
 * (not itself a test). Flags as Megatron's pretrain_t5.py takes them:
 *   t5_samples --encoder-seq-length E --decoder-seq-length D --seed N --samples TRAIN VALID TEST
 *       [--split 969,30,1] (--data-path WORDS... | --train-data-path ... --valid-data-path ...
 *       --test-data-path ...) --tokenizer-type BertWordPieceCase --vocab-file VOCAB
 *       [--vocab-extra-ids 100] [--mask-prob 0.15] [--short-seq-prob 0.1]
 *       [--data-cache-path DIR] --print SPLIT:I-J [--attention-masks]
 * One line per sample:
 *   SPLIT I: text_enc ... | text_dec ... | labels ... | loss_mask ... | enc_mask ... |
 *   dec_mask ... | truncated T
 * and with --attention-masks the three b1ss masks of --transformer-impl local (1 = masked) as
 * rows of 0/1 digits: | enc_attn ROW ROW ... | dec_attn ... | enc_dec_attn ... */
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

static void print_mask(const char *name, const uint8_t *m, int rows, int columns) {
    printf(" | %s", name);
    for (int r = 0; r < rows; r++) {
        putchar(' ');
        for (int c = 0; c < columns; c++) putchar('0' + m[(size_t)r * (size_t)columns + (size_t)c]);
    }
}

static int positive_int(const char *flag, const char *value) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || v < 1 || v > 1 << 24) user_error("%s %s: expected a positive integer", flag, value);
    return (int)v;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "t5_samples";
    gpt_data_config cfg = {0};
    t5_dataset_config t5 = {.mask_prob = 0.15, .short_seq_prob = 0.1, .max_ngram = 10};
    const char *vocab_file = NULL, *tokenizer_type = "BertWordPieceCase", *span = NULL;
    int attention_masks = 0;
    cfg.seed = 1234;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        char **words;
        int n;
        char err[300];
        if (!strcmp(flag, "--encoder-seq-length") && i + 1 < argc) cfg.seq_length = positive_int(flag, argv[++i]);
        else if (!strcmp(flag, "--decoder-seq-length") && i + 1 < argc)
            t5.decoder_seq_length = positive_int(flag, argv[++i]);
        else if (!strcmp(flag, "--vocab-extra-ids") && i + 1 < argc) {
            /* Megatron-Core's build_tokenizer gives BertWordPieceCase its 100 <extra_id_i>
             * whatever this says (megatron/core/tokenizers/utils/build_tokenizer.py) */
            char *end;
            long extra = strtol(argv[++i], &end, 10);
            if (*end || extra < 0) user_error("--vocab-extra-ids %s: expected a count >= 0", argv[i]);
        } else if (!strcmp(flag, "--seed") && i + 1 < argc) cfg.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(flag, "--split") && i + 1 < argc) cfg.split = argv[++i];
        else if (!strcmp(flag, "--vocab-file") && i + 1 < argc) vocab_file = argv[++i];
        else if (!strcmp(flag, "--tokenizer-type") && i + 1 < argc) tokenizer_type = argv[++i];
        else if (!strcmp(flag, "--mask-prob") && i + 1 < argc) t5.mask_prob = atof(argv[++i]);
        else if (!strcmp(flag, "--short-seq-prob") && i + 1 < argc) t5.short_seq_prob = atof(argv[++i]);
        else if (!strcmp(flag, "--print") && i + 1 < argc) span = argv[++i];
        else if (!strcmp(flag, "--attention-masks")) attention_masks = 1;
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
    if (!cfg.seq_length || !t5.decoder_seq_length)
        user_error("--encoder-seq-length and --decoder-seq-length are required");
    char err[600], split_name[16];
    uint8_t *word_piece = NULL;
    if (t5_vocab_load(vocab_file, tokenizer_type, &t5.vocab, &word_piece, err, sizeof err))
        user_error("%s", err);
    cfg.t5 = &t5;
    /* the tokenizer's unique_identifiers in the cache description, as for BERT */
    static char extra_ids[2048];
    int at = snprintf(extra_ids, sizeof extra_ids, "[");
    for (int k = 0; k < 100; k++)
        at += snprintf(extra_ids + at, sizeof extra_ids - (size_t)at, "%s'<extra_id_%d>'", k ? ", " : "", k);
    snprintf(extra_ids + at, sizeof extra_ids - (size_t)at, "]");
    const char *keys[] = {"class", "tokenizer_path", "additional_special_tokens", "vocab_file", "merges_file",
                          "use_fast", "trust_remote_code", "include_special_tokens", "use_gigatoken"};
    const char *values[] = {"megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText",
                            tokenizer_type, extra_ids, vocab_file, "None", "True", "False", "True", "False"};
    cfg.tokenizer_fields = 9;
    for (int k = 0; k < 9; k++) cfg.tokenizer_keys[k] = keys[k], cfg.tokenizer_values[k] = values[k];
    long long first = 0, last = 0;
    int fields = sscanf(span, "%15[a-z]:%lld-%lld", split_name, &first, &last);
    if (fields < 2) user_error("--print %s: expected SPLIT:I-J", span);
    if (fields == 2) last = first;
    int split = !strcmp(split_name, "train") ? 0 : !strcmp(split_name, "valid") ? 1 : 2;
    gpt_datasets *ds = gpt_datasets_open(&cfg, MPI_COMM_WORLD);
    int enc = cfg.seq_length, dec = t5.decoder_seq_length;
    int64_t *arrays = malloc(sizeof(int64_t) * (2 * (size_t)enc + 4 * (size_t)dec));
    uint8_t *mask = malloc((size_t)enc * (size_t)enc + (size_t)dec * (size_t)dec + (size_t)dec * (size_t)enc);
    CHECK(arrays && mask, "out of memory");
    t5_sample sample = {.text_enc = arrays, .enc_mask = arrays + enc, .text_dec = arrays + 2 * enc,
                        .labels = arrays + 2 * enc + dec, .loss_mask = arrays + 2 * enc + 2 * dec,
                        .dec_mask = arrays + 2 * enc + 3 * dec};
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long long i = first; i <= last && rank == 0; i++) {
        t5_dataset_sample(ds, split, i, &sample);
        printf("%s %lld:", split_name, i);
        print_array("text_enc", sample.text_enc, enc);
        print_array("text_dec", sample.text_dec, dec);
        print_array("labels", sample.labels, dec);
        print_array("loss_mask", sample.loss_mask, dec);
        print_array("enc_mask", sample.enc_mask, enc);
        print_array("dec_mask", sample.dec_mask, dec);
        printf(" truncated %d", sample.truncated);
        if (attention_masks) {
            t5_attention_mask_b1ss(sample.text_enc, enc, sample.text_enc, enc, 0, mask);
            print_mask("enc_attn", mask, enc, enc);
            t5_attention_mask_b1ss(sample.text_dec, dec, sample.text_dec, dec, 1, mask);
            print_mask("dec_attn", mask, dec, dec);
            t5_attention_mask_b1ss(sample.text_dec, dec, sample.text_enc, enc, 0, mask);
            print_mask("enc_dec_attn", mask, dec, enc);
        }
        printf("\n");
    }
    gpt_datasets_close(ds);
    free(arrays);
    free(mask);
    free(word_piece);
    MPI_Finalize();
    return 0;
}
