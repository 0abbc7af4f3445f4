/* evaluate.c: Megatron's zero-shot GPT evaluation (tasks/main.py --task WIKITEXT103 | LAMBADA)
 * on a checkpoint (--load, any parallel layout) on one rank, or on tp x pp ranks
 * (--tensor-model-parallel-size, --pipeline-model-parallel-size, and for a mixture of experts
 * --expert-model-parallel-size) that run the model in lockstep
 * (every rank reads the same file and runs the same windows; rank 0 reports):
 *   --task WIKITEXT103 --valid-data FILE [--overlapping-eval N]: perplexity of the detokenized
 *     text (Megatron's detokenizer chosen by the file name) over windows of --seq-length tokens,
 *     with Megatron's avg loss, ppl, adjusted ppl and token ratio;
 *   --task LAMBADA --valid-data FILE.jsonl [--strict-lambada]: last-word accuracy.
 * The result is printed as Megatron prints it and, with --metrics-file, appended as one JSON line.
 * The model and tokenizer flags of Megatron's evaluation scripts (--num-layers, --fp16,
 * --no-load-optim, ...) are accepted: checked against the checkpoint, or named as changing
 * nothing (model_flags.h). */
#include "config.h"

#include "app/core/error.h"
#include "app/core/options.h"
#include "app/inference/inference_moe.h"
#include "app/inference/inference_setup.h"
#include "app/inference/model_flags.h"
#include "app/inference/wikitext_detokenizer.h"
#include "app/inference/zeroshot_eval.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct eval_args {
    char task[16];
    char valid_data[1024];
    char load[1024];
    char metrics_file[1024];
    char device[16];
    char tokenizer_type[32];
    char vocab_file[1024];
    char merge_file[1024];
    int seq_length;
    int overlapping_eval;
    int strict_lambada;
    int micro_batch_size;
    int log_interval;
    int tensor_model_parallel_size;
    int expert_model_parallel_size;
    int pipeline_model_parallel_size;
    model_flags model;  /* Megatron's model flags, checked against the checkpoint */
} eval_args;

#define AT(field) OPTION_AT(eval_args, field)
static const option_spec specs[] = {
    {"task", "task", OPTION_CHOICE, AT(task), .choices = "WIKITEXT103|LAMBADA", .flags = OPTION_REQUIRED, .help = "the evaluation"},
    {"valid-data", "task", OPTION_STRING, AT(valid_data), .flags = OPTION_REQUIRED, .metavar = "PATH", .help = "the text (WIKITEXT103) or JSONL with a text field (LAMBADA)"},
    {"overlapping-eval", "task", OPTION_INT, AT(overlapping_eval), "32", .range = "[1, inf)", .help = "targets each WikiText window after the first adds"},
    {"strict-lambada", "task", OPTION_FLAG, AT(strict_lambada), .help = "the label is the whole last word"},
    {"seq-length", "task", OPTION_INT, AT(seq_length), .range = "[0, inf)", .help = "window length (default: the checkpoint's)"},
    {"micro-batch-size", "task", OPTION_INT, AT(micro_batch_size), "1", .range = "[1, inf)", .help = "windows per forward"},
    {"log-interval", "task", OPTION_INT, AT(log_interval), "100", .range = "[1, inf)", .help = "progress every N batches"},
    {"metrics-file", "task", OPTION_STRING, AT(metrics_file), .metavar = "PATH", .help = "append the result as a JSON line"},
    {"load", "checkpoint", OPTION_STRING, AT(load), .flags = OPTION_REQUIRED, .metavar = "DIR", .help = "checkpoint directory"},
    {"device", "checkpoint", OPTION_CHOICE, AT(device), "auto", .choices = "auto|cpu|cuda", .help = "kernel backend"},
    {"tensor-model-parallel-size", "checkpoint", OPTION_INT, AT(tensor_model_parallel_size), "1", .range = "[1, inf)", .help = "ranks that split each layer (the ranks started are tp x pp)"},
    {"pipeline-model-parallel-size", "checkpoint", OPTION_INT, AT(pipeline_model_parallel_size), "1", .range = "[1, inf)", .help = "pipeline stages"},
    {"expert-model-parallel-size", "checkpoint", OPTION_INT, AT(expert_model_parallel_size), "1", .range = "[1, inf)", .help = "ranks that split a mixture of experts' experts (the ranks started are tp x pp x ep)"},
    {"tokenizer-type", "tokenizer", OPTION_CHOICE, AT(tokenizer_type), .choices = INFERENCE_TOKENIZER_TYPES, .help = "default: the checkpoint's"},
    {"vocab-file", "tokenizer", OPTION_STRING, AT(vocab_file), .metavar = "PATH", .help = "tokenizer vocabulary"},
    {"merge-file", "tokenizer", OPTION_STRING, AT(merge_file), .metavar = "PATH", .help = "BPE merges"},
    MODEL_FLAG_SPECS(eval_args, model),
    {"seed", MODEL_NO_EFFECT_GROUP, OPTION_UINT64, .flags = OPTION_NO_EFFECT, .help = "the evaluations draw no random numbers"},
    {"batch-size", "task", OPTION_INT, .flags = OPTION_REFUSED, .help = "Megatron refuses it too (\"--batch-size argument is no longer valid\"): use --micro-batch-size"},
};
static const option_table table = {
    "--task WIKITEXT103|LAMBADA --valid-data PATH --load DIR [options]",
    "Zero-shot evaluation of a GPT checkpoint (Megatron's tasks/main.py).\n",
    specs, (int)(sizeof specs / sizeof specs[0]),
};

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) user_error("--valid-data %s: cannot open it", path);
    size_t cap = 1 << 16, n = 0, got;
    char *data = malloc(cap + 1);
    CHECK(data, "out of host memory reading %s", path);
    while ((got = fread(data + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) { cap *= 2; data = realloc(data, cap + 1); CHECK(data, "out of host memory reading %s", path); }
    }
    fclose(f);
    if (memchr(data, 0, n)) user_error("--valid-data %s: holds a NUL byte; not a text file", path);
    data[n] = 0;
    return data;
}

static int32_t *encode(tokenizer *tok, const char *text, size_t len, size_t *n, const char *where) {
    int32_t *ids = NULL;
    size_t cap = 0;
    *n = 0;
    if (tokenizer_encode(tok, text, len, &ids, n, &cap) != 0) user_error("%s: %s", where, tokenizer_last_error(tok));
    return ids;
}

/* rank 0 reports; the other ranks of the model-parallel group only compute */
static int reporting = 1;

static void append_metrics(const char *path, json_t *o) {
    if (!path[0] || !reporting) { json_decref(o); return; }
    FILE *f = fopen(path, "a");
    if (!f || json_dumpf(o, f, JSON_COMPACT | JSON_REAL_PRECISION(17)) != 0 || fputc('\n', f) == EOF || fclose(f) != 0)
        user_error("--metrics-file %s: cannot write it", path);
    json_decref(o);
}

static void print_boxed(const char *line) {
    if (!reporting) return;
    size_t n = strlen(line) + 1;
    for (size_t i = 0; i < n; i++) putchar('-');
    printf("\n%s\n", line);
    for (size_t i = 0; i < n; i++) putchar('-');
    putchar('\n');
}

/* with several pipeline stages, what the last one sent the others (results, not logits) */
static void report_shared(const gpt_inference *inf, const inference_model *im) {
    if (inf->pp_group && gpt_inference_last_stage(inf))
        printf("> rank %d, last pipeline stage: %llu bytes of results sent to the other stages\n",
               inference_model_rank(im), (unsigned long long)inf->shared_bytes);
}

static void wikitext(const eval_args *a, inference_model *im, tokenizer *tok, int seq_length) {
    char *raw = read_file(a->valid_data);
    char err[512];
    detokenizer_kind kind = detokenizer_for_path(a->valid_data);
    char *text = detokenize_text(kind, raw, err, sizeof err);
    if (!text) user_error("--valid-data %s: %s", a->valid_data, err);
    wikitext_result r = {0};
    r.num_original_tokens = wikitext_original_tokens(raw);
    size_t n;
    int32_t *ids = encode(tok, text, strlen(text), &n, a->valid_data);
    r.num_tokenized_tokens = (int64_t)n;
    if (n < 2 || r.num_original_tokens < 2) user_error("--valid-data %s: fewer than 2 tokens", a->valid_data);
    if (reporting)
        printf(" > detokenizer: %s; number of original tokens: %lld, number of detokenized tokens: %lld\n",
           detokenizer_name(kind), (long long)r.num_original_tokens, (long long)r.num_tokenized_tokens);
    gpt_inference inf;
    gpt_inference_create(&inf, &im->model, inference_model_pp_group(im), a->micro_batch_size, seq_length,
                         a->micro_batch_size * seq_length);
    wikitext_evaluate(&inf, ids, (int64_t)n, seq_length, a->overlapping_eval, a->micro_batch_size, tokenizer_eod(tok),
                      tokenizer_vocab_size(tok), &r);
    wikitext_finish(&r);
    char line[512];
    snprintf(line, sizeof line, " validation results on WIKITEXT103 | avg loss: %.4E | ppl: %.4E | adjusted ppl: %.4E | token ratio: %.17g |",
             r.avg_loss, r.ppl, r.adjusted_ppl, r.token_ratio);
    print_boxed(line);
    append_metrics(a->metrics_file, json_pack("{s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f}", "task", "WIKITEXT103",
        "detokenizer", detokenizer_name(kind), "seq_length", seq_length, "overlapping_eval", a->overlapping_eval,
        "num_original_tokens", (json_int_t)r.num_original_tokens, "num_tokenized_tokens", (json_int_t)r.num_tokenized_tokens,
        "num_windows", (json_int_t)r.num_windows, "total_loss", r.total_loss, "avg_loss", r.avg_loss, "ppl", r.ppl,
        "adjusted_ppl", r.adjusted_ppl, "token_ratio", r.token_ratio));
    report_shared(&inf, im);
    gpt_inference_free(&inf);
    free(ids);
    free(text);
    free(raw);
}

/* Megatron's _LambadaDataset.get_tokens */
static void lambada_tokens(tokenizer *tok, const char *text, int strict, int32_t **context, size_t *nc,
                           int32_t **labels, size_t *nl, const char *where) {
    if (!strict) {
        int32_t *all = encode(tok, text, strlen(text), nc, where);
        if (*nc < 2) user_error("%s: fewer than 2 tokens", where);
        *labels = malloc(sizeof(int32_t));
        CHECK(*labels, "out of host memory");
        (*labels)[0] = all[--*nc];
        *nl = 1;
        *context = all;
        return;
    }
    /* last_token = text.split()[-1]; start = text.rfind(last_token) */
    const char *end = text + strlen(text);
    while (end > text && strchr(" \t\n\r\f\v", end[-1])) end--;
    const char *word = end;
    while (word > text && !strchr(" \t\n\r\f\v", word[-1])) word--;
    if (word == end) user_error("%s: no words", where);
    size_t word_len = (size_t)(end - word);
    const char *start = word, *text_end = text + strlen(text);
    for (const char *p = text; p + word_len <= text_end; p++)
        if (!strncmp(p, word, word_len)) start = p;
    /* text[:start].strip() */
    const char *b = text, *e = start;
    while (b < e && strchr(" \t\n\r\f\v", *b)) b++;
    while (e > b && strchr(" \t\n\r\f\v", e[-1])) e--;
    *context = encode(tok, b, (size_t)(e - b), nc, where);
    char *spaced = malloc(word_len + 2);
    CHECK(spaced, "out of host memory");
    spaced[0] = ' ';
    memcpy(spaced + 1, word, word_len);
    spaced[word_len + 1] = 0;
    *labels = encode(tok, spaced, word_len + 1, nl, where);
    free(spaced);
    if (*nc < 1 || *nl < 1) user_error("%s: the context or the last word has no tokens", where);
}

static void lambada(const eval_args *a, inference_model *im, tokenizer *tok, int seq_length) {
    char *data = read_file(a->valid_data);
    gpt_inference inf;
    gpt_inference_create(&inf, &im->model, inference_model_pp_group(im), 1, seq_length, seq_length);
    int64_t correct = 0, total = 0;
    int line_number = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        line_number++;
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", a->valid_data, line_number);
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        json_t *text = o ? json_object_get(o, "text") : NULL;
        if (!json_is_string(text)) user_error("%s: not a JSON object with a string \"text\" (%s)", where, o ? "no text" : jerr.text);
        int32_t *context, *labels;
        size_t nc, nl;
        lambada_tokens(tok, json_string_value(text), a->strict_lambada, &context, &nc, &labels, &nl, where);
        if ((int)(nc + nl) > seq_length + 1)
            user_error("%s: %zu tokens, more than --seq-length + 1 = %d", where, nc + nl, seq_length + 1);
        correct += lambada_correct(&inf, context, (int)nc, labels, (int)nl, tokenizer_vocab_size(tok));
        total++;
        if (total % a->log_interval == 0 && reporting) { printf("> working on iteration: %lld\n", (long long)total); fflush(stdout); }
        free(context);
        free(labels);
        json_decref(o);
    }
    if (total == 0) user_error("--valid-data %s: no samples", a->valid_data);
    double accuracy = (double)correct / (double)total;
    char out[512];
    snprintf(out, sizeof out, " validation results on LAMBADA | number correct: %.4E | total examples: %.4E | avg accuracy: %.4E",
             (double)correct, (double)total, accuracy);
    print_boxed(out);
    append_metrics(a->metrics_file, json_pack("{s:s,s:b,s:I,s:I,s:f}", "task", "LAMBADA", "strict_lambada", a->strict_lambada,
        "number_correct", (json_int_t)correct, "total_examples", (json_int_t)total, "avg_accuracy", accuracy));
    report_shared(&inf, im);
    gpt_inference_free(&inf);
    free(data);
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    kernels_set_error_handler(error_report_fatal);
    program_name = "evaluate";
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    eval_args a;
    unsigned char given[sizeof specs / sizeof specs[0]];
    options_parse_or_exit(&table, &a, given, argc, argv);
    const kernel_ops *ops = inference_backend(a.device);
    static inference_model im;
    inference_model_load(&im, a.load, ops, 1234, a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
                         a.expert_model_parallel_size);
    reporting = inference_model_rank(&im) == 0;
    model_flags_check(&table, given, &a.model, &im);
    tokenizer *tok = inference_tokenizer(&im, a.tokenizer_type, a.vocab_file, a.merge_file, a.model.tokenizer_model);
    int seq_length = a.seq_length ? a.seq_length : im.seq_length;
    if (seq_length > im.model.config.max_position_embeddings)
        user_error("--seq-length %d exceeds the checkpoint's --max-position-embeddings %d", seq_length,
                   im.model.config.max_position_embeddings);
    if (reporting)
        printf("> evaluating %s on %s: checkpoint %s, sequence length %d, %s backend, %d ranks (tp %d, pp %d)\n", a.task,
               a.valid_data, im.path, seq_length, ops->name, world_size, a.tensor_model_parallel_size,
               a.pipeline_model_parallel_size);
    if (reporting) model_flags_report(&table, given);
    if (reporting) inference_moe_report(&im.model.config, im.moe_capacity_factor);
    if (!strcmp(a.task, "WIKITEXT103")) wikitext(&a, &im, tok, seq_length);
    else lambada(&a, &im, tok, seq_length);
    if (reporting) printf("done :-)\n");
    tokenizer_free(tok);
    inference_model_free(&im);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
