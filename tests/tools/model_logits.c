/* model_logits.c: runs the GPT model's forward pass on one rank (CPU backend, fp32; with
 * --device cuda the CUDA backend, bf16, on GPU 0) for one micro-batch of mock tokens and writes the tokens and the output layer's logits, so that another
 * implementation (Hugging Face's GPT2LMHeadModel on a converted checkpoint, perf/hf_logits_check.py)
 * can be compared with ours.
 * usage: model_logits OUT_PREFIX [--tokens FILE] PRETRAIN_GPT_FLAGS... (with --load DIR,
 *        --micro-batch-size 1)
 * writes OUT_PREFIX.tokens (int32 [T]) and OUT_PREFIX.logits (float32 [T, padded vocab]); the
 * tokens are the mock data's of --seed, or FILE's (int32, --seq-length of them) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/training/args.h"
#include "app/core/error.h"
#include "app/data/mock_data.h"
#include "app/training/training.h"
#include "kernels/kernels.h"



int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    kernels_set_error_handler(error_report_fatal);
    program_name = "model_logits";
    int world_size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (argc < 3 || world_size != 1) {
        fprintf(stderr, "usage: model_logits OUT_PREFIX [--tokens FILE] PRETRAIN_GPT_FLAGS... (one rank)\n");
        return 2;
    }
    const char *prefix = argv[1], *tokens_file = NULL;
    if (argc > 4 && !strcmp(argv[2], "--tokens")) {
        tokens_file = argv[3];
        argv += 2;
        argc -= 2;
    }
    args a;
    args_parse(&a, argc - 1, argv + 1, world_size);
    if (a.micro_batch_size != 1) user_error("model_logits needs --micro-batch-size 1");
    const kernel_ops *ops = kernels_cpu();
    if (strcmp(a.device, "cuda") == 0) {
#ifdef HAVE_CUDA
        if (cuda_device_count() == 0) user_error("--device cuda: no GPU is visible to this process");
        cuda_context_init(0);
        ops = kernels_cuda();
#else
        user_error("--device cuda: this build has no CUDA backend (./configure found no nvcc)");
#endif
    }
    trainer t;
    trainer_setup(&t, &a, ops);
    int T = a.seq_length, V = a.padded_vocab_size;
    int32_t *sample = malloc(sizeof(int32_t) * (size_t)(T + 1));
    int *tokens = malloc(sizeof(int) * (size_t)T), *targets = malloc(sizeof(int) * (size_t)T);
    float *logits = malloc(sizeof(float) * (size_t)T * (size_t)V);
    CHECK(sample && tokens && targets && logits, "out of host memory");
    mock_data_sample(a.seed, 0, 0, a.vocab_size, T + 1, sample);
    if (tokens_file) {
        FILE *in = fopen(tokens_file, "rb");
        if (!in || fread(sample, sizeof(int32_t), (size_t)T, in) != (size_t)T)
            user_error("%s: cannot read %d int32 tokens", tokens_file, T);
        fclose(in);
        for (int i = 0; i < T; i++)
            if (sample[i] < 0 || sample[i] >= a.vocab_size)
                user_error("%s: token %d is %d, outside the vocabulary [0, %d)", tokens_file, i, sample[i], a.vocab_size);
    }
    for (int i = 0; i < T; i++) { tokens[i] = sample[i]; targets[i] = sample[i + 1]; }
    t.model.capture_logits = logits;
    micro_batch_rng rng = {0, 0, 0};
    double loss = gpt_chunk_forward(&t.model, 0, 0, tokens, targets, rng, 1.0f, 0) / T;
    char path[4096];
    snprintf(path, sizeof path, "%s.tokens", prefix);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(tokens, sizeof(int), (size_t)T, f) == (size_t)T && fclose(f) == 0, "cannot write %s", path);
    snprintf(path, sizeof path, "%s.logits", prefix);
    f = fopen(path, "wb");
    CHECK(f && fwrite(logits, sizeof(float), (size_t)T * V, f) == (size_t)T * V && fclose(f) == 0, "cannot write %s", path);
    printf("model_logits: %d tokens, padded vocabulary %d, mean loss %.6f\n", T, V, loss);
    trainer_teardown(&t);
    free(sample); free(tokens); free(targets); free(logits);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
