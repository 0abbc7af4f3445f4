/* gpt_forward_reference.c: the reference the generation tests compare with: greedy generation
 * and scoring computed WITHOUT a key/value cache, by the training forward (gpt_chunk_forward on
 * one rank, its logits captured) run again on the whole growing sequence for every new token.
 * usage: gpt_forward_reference MODE INPUT PRETRAIN_GPT_FLAGS... (one rank; --load DIR,
 *        --micro-batch-size 1, --seq-length >= the longest sequence)
 *   MODE greedy:L  each line of INPUT (token ids separated by spaces) is extended to L tokens,
 *                  each new one the argmax over the tokenizer's ids (below --vocab-size) of the logits at
 *                  the last position; prints "tokens: ..." and "logprobs: ..." (the log-softmax
 *                  over the tokenizer's ids of every token after the first) per line
 *   MODE score     prints "logprobs: ..." and "argmax: ..." (over the tokenizer's ids) of every
 *                  position but the last of each line
 * The sequence is padded with the end-of-document id to --seq-length; causal attention keeps the
 * padding from changing earlier positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/core/error.h"
#include "app/training/args.h"
#include "app/training/training.h"
#include "kernels/kernels.h"

static double log_softmax_at(const float *row, int V, int token) {
    double max = row[0], sum = 0.0;
    for (int v = 1; v < V; v++) if (row[v] > max) max = row[v];
    for (int v = 0; v < V; v++) sum += exp((double)row[v] - max);
    return (double)row[token] - max - log(sum);
}

static int argmax(const float *row, int n) {
    int best = 0;
    for (int v = 1; v < n; v++) if (row[v] > row[best]) best = v;
    return best;
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    kernels_set_error_handler(error_report_fatal);
    program_name = "gpt_forward_reference";
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (argc < 4 || world_size != 1) {
        fprintf(stderr, "usage: gpt_forward_reference greedy:N|score INPUT PRETRAIN_GPT_FLAGS... (one rank)\n");
        return 2;
    }
    int total = 0;
    if (!strncmp(argv[1], "greedy:", 7)) total = atoi(argv[1] + 7);
    else if (strcmp(argv[1], "score") != 0) user_error("MODE %s is neither greedy:N nor score", argv[1]);
    FILE *input = fopen(argv[2], "r");
    if (!input) user_error("cannot open %s", argv[2]);
    args a;
    args_parse(&a, argc - 2, argv + 2, world_size);
    if (a.micro_batch_size != 1) user_error("gpt_forward_reference needs --micro-batch-size 1");
    trainer t;
    trainer_setup(&t, &a, kernels_cpu());
    int T = a.seq_length, V = a.padded_vocab_size, eod = a.vocab_size - 1;
    int *tokens = malloc(sizeof(int) * (size_t)T), *targets = calloc((size_t)T, sizeof(int));
    float *logits = malloc(sizeof(float) * (size_t)T * (size_t)V);
    CHECK(tokens && targets && logits, "out of host memory");
    t.model.capture_logits = logits;
    micro_batch_rng rng = {0, 0, 0};
    char line[65536];
    while (fgets(line, sizeof line, input)) {
        int n = 0;
        for (char *word = strtok(line, " \n"); word; word = strtok(NULL, " \n")) {
            if (n == T) user_error("a line of %s is longer than --seq-length %d", argv[2], T);
            tokens[n++] = atoi(word);
        }
        if (n == 0) continue;
        if (total > T) user_error("greedy:%d exceeds --seq-length %d", total, T);
        int generate = total > n ? total - n : 0;
        for (int step = 0; step <= generate; step++) {
            for (int i = n; i < T; i++) tokens[i] = eod;
            gpt_chunk_forward(&t.model, 0, 0, tokens, targets, rng, 1.0f, 0);
            if (step == generate) break;
            tokens[n] = argmax(logits + (size_t)(n - 1) * V, a.vocab_size);
            n++;
        }
        if (total) {
            printf("tokens:");
            for (int i = 0; i < n; i++) printf(" %d", tokens[i]);
            printf("\n");
        }
        printf("logprobs:");
        for (int i = 0; i + 1 < n; i++) printf(" %.9g", log_softmax_at(logits + (size_t)i * V, a.vocab_size, tokens[i + 1]));
        printf("\n");
        if (!total) {
            printf("argmax:");
            for (int i = 0; i + 1 < n; i++) printf(" %d", argmax(logits + (size_t)i * V, a.vocab_size));
            printf("\n");
        }
    }
    fclose(input);
    trainer_teardown(&t);
    free(tokens); free(targets); free(logits);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
