/* pretrain_main.c: the run of pretrain_gpt and pretrain_bert (Megatron's pretrain_gpt.py and
 * pretrain_bert.py). Setup: MPI, arguments, the kernel backend, the model and optimizer. Solve:
 * the training loop. Teardown: free, finalize. The program name decides the model kind
 * (pretrain_bert: the encoder mode of app/model/bert_encoder.h, BERT's flags and data). */
#include "config.h"
#include "app/core/hash.h"

#include "app/training/args.h"
#include "app/core/error.h"
#include "app/core/process_start.h"
#include "app/parallel/gpu_placement.h"
#include "kernels/kernels.h"
#include "app/tokenizers/tokenizer.h"
#include "app/training/training.h"
#include "app/training/data_setup.h"
#include "io/io_error.h"
#include "perf/metrics/peak_flops.h"
#include "app/training/pretrain_main.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int);
#endif

/* share the node's cores among its ranks unless the user set OPENBLAS_NUM_THREADS */
static void set_blas_threads(int local_size) {
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(cores / local_size);
    openblas_set_num_threads(threads > 0 ? threads : 1);
#else
    (void)local_size;
#endif
}

/* --device: cuda when asked for or (auto) when this rank sees a GPU; one GPU per rank, chosen
 * by the node-local rank; on cuda the kernels compute in fp16 with --fp16 (kernels_cuda_fp16)
 * and in bf16 otherwise. Sets the MFU peak from the GPU's name (perf's table, the dense peak of
 * that dtype) unless --peak-tflops gave it. */
static const kernel_ops *select_backend(args *a, int rank, node_place place) {
#ifdef HAVE_CUDA
    int devices = cuda_device_count();
    if (strcmp(a->device, "auto") == 0) snprintf(a->device, sizeof a->device, "%s", devices > 0 ? "cuda" : "cpu");
    int uses_cuda = strcmp(a->device, "cuda") == 0;
    gpu_placement_check(uses_cuda, devices, place); /* a GPU of its own for each rank */
    if (!uses_cuda) return kernels_cpu();
    /* fixed NCCL algorithm before any communicator exists: reductions in one order every run */
    if (a->deterministic_mode) setenv("NCCL_ALGO", "Ring", 1);
    int device = place.local_rank;
    cuda_context_init(device);
    /* timing the GEMM algorithms can choose differently between runs, so not when reproducing */
    cuda_matmul_set_tuning(!a->deterministic_mode && !a->no_gemm_tuning);
    char name[256];
    cuda_device_name(device, name, (int)sizeof name);
    /* MFU against the dense tensor-core peak of the compute dtype */
    double peak = peak_tflops_lookup(name, a->fp16 ? PEAK_FP16 : PEAK_BF16);
    if (a->peak_tflops == 0) a->peak_tflops = (float)peak;
    if (rank == 0)
        printf("> GPU %d of %d: %s, computing in %s, peak dense %s %.1f TFLOP/s%s\n", device, devices, name,
               a->fp16 ? "fp16 (--fp16)" : "bf16", a->fp16 ? "fp16" : "bf16", a->peak_tflops,
               peak == 0 && a->peak_tflops == 0 ? " (unknown: pass --peak-tflops for MFU)" : "");
    return a->fp16 ? kernels_cuda_fp16() : kernels_cuda();
#else
    (void)rank;
    (void)place;
    if (strcmp(a->device, "auto") == 0) snprintf(a->device, sizeof a->device, "cpu");
    return kernels_cpu();
#endif
}

int pretrain_main(int argc, char **argv, const char *name) { return pretrain_main_with(argc, argv, name, NULL); }

int pretrain_main_with(int argc, char **argv, const char *name, const pretrain_hooks *hooks) {
    program_name = name;
    process_start_time(); /* read (or, without /proc, taken) before anything else */
    if (args_want_async_save(argc, argv)) {
        /* --async-save's writer thread calls MPI while training does (checked after parsing) */
        int provided;
        CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    } else {
        CHECK_MPI(MPI_Init(&argc, &argv));
    }
    kernels_set_error_handler(error_report_fatal);
    int rank = 0, world_size = 1;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));

    args a;
    args_parse(&a, argc, argv, world_size);
    if (hooks && hooks->after_args) hooks->after_args(hooks->context, &a, argc, argv, world_size);
    hdf5_errors_setup(a.hdf5_debug);
    if (a.tokenizer_type[0]) {
        /* the vocabulary size comes from the tokenizer, as in Megatron */
        char err[1024];
        tokenizer *tok = tokenizer_create_with_model(a.tokenizer_type, a.vocab_file, a.merge_file,
                                                     a.tokenizer_model, a.vocab_size, err, sizeof err);
        if (!tok) user_error("%s", err);
        args_set_vocab_size(&a, data_setup_vocab_size(&a, tokenizer_vocab_size(tok)));
        tokenizer_free(tok);
        if (rank == 0)  /* Megatron's vocab_size_with_padding */
            printf(" > padded vocab (size: %d) with %d dummy tokens (new size: %d)\n", a.vocab_size,
                   a.padded_vocab_size - a.vocab_size, a.padded_vocab_size);
    }
    if (a.print_sample[0]) {  /* a data question: no model, no backend */
        data_setup_print_samples(&a, MPI_COMM_WORLD);
        CHECK_MPI(MPI_Finalize());
        return 0;
    }
    node_place place = node_place_find();
    set_blas_threads(place.local_size);
    const kernel_ops *ops = select_backend(&a, rank, place);

    if (rank == 0) {
        printf("%s (%s %s): %d ranks, %s backend\n", program_name, PACKAGE_NAME, PACKAGE_VERSION,
               world_size, ops->name);
        args_print(&a);
    }
    trainer t;
    trainer_setup(&t, &a, ops);
    if (hooks && hooks->before_train) hooks->before_train(hooks->context, &t);
    trainer_train(&t);
    /* one hash over every rank's parameters, in rank order */
    uint64_t hash = gpt_model_parameter_hash(&t.model), *hashes = NULL;
    if (rank == 0) hashes = malloc(sizeof(uint64_t) * (size_t)world_size);
    CHECK_MPI(MPI_Gather(&hash, 1, MPI_UINT64_T, hashes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        uint64_t combined = HASH_FNV1A_OFFSET;
        for (int r = 0; r < world_size; r++) combined = hash_fnv1a_word(combined, hashes[r]);
        printf("> final parameter hash: %016" PRIx64 "\n", combined);
        free(hashes);
    }
    trainer_teardown(&t);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
