/* task_samples.c: prints finetune_bert's task samples (app/tasks/task_data.h) one line each, for
 * tests/mpi/finetune_bert_test.sh to compare with tests/tools/megatron_task_samples.py:
 *   task_samples MNLI|RACE VOCAB SEQ_LENGTH PATH...
 *   -> "label uid | ids | types | paddings" per row (RACE: 4 rows per sample, the label on each)
 * Bad input: the loader's message on stderr, exit status 1. */
#include "app/tasks/task_data.h"

#include <stdio.h>
#include <stdlib.h>

static void print_ints(const int32_t *v, int n) {
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", v[i]);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: task_samples MNLI|RACE VOCAB SEQ_LENGTH PATH...\n");
        return 2;
    }
    task_kind kind;
    if (task_kind_parse(argv[1], &kind)) {
        fprintf(stderr, "task_samples: unknown task %s\n", argv[1]);
        return 2;
    }
    char err[4096];
    tokenizer *tok = tokenizer_create("BertWordPieceLowerCase", argv[2], NULL, 0, err, sizeof err);
    if (!tok) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int T = atoi(argv[3]);
    task_dataset d;
    if (task_dataset_load(kind, (const char *const *)argv + 4, argc - 4, tok, T, &d, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        tokenizer_free(tok);
        return 1;
    }
    for (int64_t s = 0; s < d.count; s++)
        for (int r = 0; r < d.rows_per_sample; r++) {
            size_t at = ((size_t)s * d.rows_per_sample + r) * (size_t)T;
            printf("%d %lld | ", d.labels[s], (long long)d.uids[s]);
            print_ints(d.ids + at, T);
            printf(" | ");
            print_ints(d.types + at, T);
            printf(" | ");
            print_ints(d.paddings + at, T);
            printf("\n");
        }
    task_dataset_free(&d);
    tokenizer_free(tok);
    return 0;
}
