/* bert_logits.c: runs our BERT's forward pass (pretrain_bert's encoder mode, one rank, CPU
 * backend, fp32) on one sample and writes the inputs and the heads' logits, so that another
 * implementation (transformers' MegatronBertForPreTraining on the converted checkpoint,
 * perf/bert_hf_parity.py) can be compared with ours.
 * usage: bert_logits OUT_PREFIX PRETRAIN_BERT_FLAGS... (with --load DIR --finetune,
 *        --micro-batch-size 1, the corpus flags pretrain_bert needs)
 * The sample: --seq-length T tokens, ids drawn from the mock-data stream of --seed over the
 * vocabulary, token type 0 for the first half and 1 for the rest, and the last T / 8 positions
 * padding (attention mask 0). Every other position is a masked-LM target, so the LM head runs on
 * all of them. Writes OUT_PREFIX.tokens, .types and .mask (int32 [T]), .logits (float32
 * [valid positions, padded vocab], the LM head's, valid positions in order) and .binary
 * (float32 [2], the binary head's; absent with --bert-no-binary-head). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/core/error.h"
#include "app/data/mock_data.h"
#include "app/tokenizers/tokenizer.h"
#include "app/training/args.h"
#include "app/training/data_setup.h"
#include "app/training/training.h"
#include "kernels/kernels.h"

static void write_file(const char *prefix, const char *suffix, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, bytes, f) == bytes && fclose(f) == 0, "cannot write %s", path);
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    kernels_set_error_handler(error_report_fatal);
    program_name = "pretrain_bert";  /* args_parse's encoder mode */
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (argc < 3 || world_size != 1) {
        fprintf(stderr, "usage: bert_logits OUT_PREFIX PRETRAIN_BERT_FLAGS... (one rank)\n");
        return 2;
    }
    const char *prefix = argv[1];
    args a;
    args_parse(&a, argc - 1, argv + 1, world_size);
    if (a.micro_batch_size != 1) user_error("bert_logits needs --micro-batch-size 1");
    char err[1024];  /* the vocabulary size comes from the tokenizer (pretrain_main's step) */
    tokenizer *tok = tokenizer_create_with_model(a.tokenizer_type, a.vocab_file, a.merge_file, a.tokenizer_model,
                                                 a.vocab_size, err, sizeof err);
    if (!tok) user_error("%s", err);
    args_set_vocab_size(&a, data_setup_vocab_size(&a, tokenizer_vocab_size(tok)));
    tokenizer_free(tok);
    if (strcmp(a.device, "cpu") && strcmp(a.device, "auto")) user_error("bert_logits runs on the CPU backend (--device cpu)");
    trainer t;
    trainer_setup(&t, &a, kernels_cpu());
    const int T = a.seq_length, V = a.padded_vocab_size, valid = T - T / 8;
    int32_t *sample = malloc(sizeof(int32_t) * (size_t)(T + 1));
    int *tokens = malloc(sizeof(int) * 3 * (size_t)T), *targets = malloc(sizeof(int) * (2 * (size_t)T + 1));
    float *logits = malloc(sizeof(float) * (size_t)valid * (size_t)V), binary[2] = {0, 0};
    CHECK(sample && tokens && targets && logits, "out of host memory");
    mock_data_sample(a.seed, 0, 0, a.vocab_size, T + 1, sample);
    int *text = tokens, *types = tokens + T, *padding = tokens + 2 * T;
    int *labels = targets, *loss_mask = targets + T, *is_random = targets + 2 * T;
    for (int i = 0; i < T; i++) {
        text[i] = sample[i];
        types[i] = i >= T / 2;
        padding[i] = i < valid;
        labels[i] = sample[i];
        loss_mask[i] = i < valid;
    }
    *is_random = 0;
    t.model.capture_logits = logits;
    t.model.capture_binary_logits = a.bert_no_binary_head ? NULL : binary;
    micro_batch_rng rng = {0, 0, 0};
    double loss = gpt_chunk_forward(&t.model, 0, 0, tokens, targets, rng, 1.0f, 0);
    write_file(prefix, "tokens", text, sizeof(int) * (size_t)T);
    write_file(prefix, "types", types, sizeof(int) * (size_t)T);
    write_file(prefix, "mask", padding, sizeof(int) * (size_t)T);
    write_file(prefix, "logits", logits, sizeof(float) * (size_t)valid * (size_t)V);
    if (!a.bert_no_binary_head) write_file(prefix, "binary", binary, sizeof binary);
    printf("bert_logits: %d tokens (%d valid), padded vocabulary %d, lm loss %.6f, sop loss %.6f, binary logits %.6f %.6f\n",
           T, valid, V, t.model.bert_lm_loss, t.model.bert_sop_loss, binary[0], binary[1]);
    (void)loss;
    trainer_teardown(&t);
    free(sample);
    free(tokens);
    free(targets);
    free(logits);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
