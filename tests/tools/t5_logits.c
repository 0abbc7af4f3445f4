/* t5_logits.c: runs our T5's forward pass (pretrain_t5's model, CPU backend, fp32) on one rank
 * for one sample of deterministic tokens and writes the tokens and the LM head's logits, so that
 * Hugging Face's T5ForConditionalGeneration on a converted checkpoint (perf/t5_hf_parity.py) can
 * be compared with ours.
 * usage: t5_logits OUT_PREFIX PRETRAIN_T5_FLAGS... (with --load DIR, --micro-batch-size 1)
 * The encoder gets --encoder-seq-length tokens of which the last quarter are padding (mask 0),
 * the decoder --decoder-seq-length tokens, all drawn from [1, vocab) by a generator keyed by
 * --seed. Writes OUT_PREFIX.enc, .enc_mask, .dec (int32) and .logits (float32 [decoder length,
 * padded vocab]). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/core/error.h"
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
    program_name = "pretrain_t5";  /* T5's flags and model */
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (argc < 3 || world_size != 1) {
        fprintf(stderr, "usage: t5_logits OUT_PREFIX PRETRAIN_T5_FLAGS... (one rank)\n");
        return 2;
    }
    const char *prefix = argv[1];
    args a;
    args_parse(&a, argc - 1, argv + 1, world_size);
    if (a.micro_batch_size != 1) user_error("t5_logits needs --micro-batch-size 1");
    if (a.tokenizer_type[0]) {  /* the vocabulary size comes from the tokenizer (pretrain_main's way) */
        char err[1024];
        tokenizer *tok = tokenizer_create_with_model(a.tokenizer_type, a.vocab_file, a.merge_file, a.tokenizer_model,
                                                     a.vocab_size, err, sizeof err);
        if (!tok) user_error("%s", err);
        args_set_vocab_size(&a, data_setup_vocab_size(&a, tokenizer_vocab_size(tok)));
        tokenizer_free(tok);
    }
    trainer t;
    trainer_setup(&t, &a, kernels_cpu());
    int Te = a.seq_length, Td = a.decoder_seq_length, V = a.padded_vocab_size;
    int *tokens = calloc((size_t)(2 * Te + Td), sizeof(int)), *targets = calloc((size_t)(2 * Td), sizeof(int));
    float *logits = malloc(sizeof(float) * (size_t)Td * (size_t)V);
    CHECK(tokens && targets && logits, "out of host memory");
    uint64_t state = 0x9E3779B97F4A7C15ull ^ (uint64_t)a.seed;
    for (int i = 0; i < Te + Td; i++) {  /* xorshift64* */
        state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
        tokens[i] = 1 + (int)((state * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)(a.vocab_size - 1));
    }
    int valid = Te - Te / 4;
    for (int i = 0; i < Te; i++) tokens[Te + Td + i] = i < valid;
    for (int i = 0; i < Td; i++) targets[i] = tokens[Te + (i + 1) % Td], targets[Td + i] = 1;
    t.model.capture_logits = logits;
    micro_batch_rng rng = {0, 0, 0};
    double loss = gpt_chunk_forward(&t.model, 0, 0, tokens, targets, rng, 1.0f, 0);
    write_file(prefix, "enc", tokens, sizeof(int) * (size_t)Te);
    write_file(prefix, "dec", tokens + Te, sizeof(int) * (size_t)Td);
    write_file(prefix, "enc_mask", tokens + Te + Td, sizeof(int) * (size_t)Te);
    write_file(prefix, "logits", logits, sizeof(float) * (size_t)Td * V);
    printf("t5_logits: encoder %d tokens (%d valid), decoder %d, padded vocabulary %d, mean loss %.6f\n", Te, valid, Td,
           V, loss);
    trainer_teardown(&t);
    free(tokens); free(targets); free(logits);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
