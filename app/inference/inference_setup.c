/* inference_setup.c: see inference_setup.h. */
#include "config.h"
#include "app/inference/inference_setup.h"
#include "app/core/error.h"
#include "app/parallel/gpu_placement.h"

#include <stdio.h>
#include <string.h>

const kernel_ops *inference_backend(const char *device) {
#ifdef HAVE_CUDA
    int devices = cuda_device_count();
    int use_cuda = !strcmp(device, "cuda") || (!strcmp(device, "auto") && devices > 0);
    /* one GPU per rank, by the node-local rank (model-parallel serving on one node) */
    node_place place = node_place_find();
    gpu_placement_check(use_cuda, devices, place);
    if (!use_cuda) return kernels_cpu();
    cuda_context_init(place.local_rank);
    return kernels_cuda();
#else
    if (!strcmp(device, "cuda")) user_error("--device cuda: this build has no CUDA backend");
    return kernels_cpu();
#endif
}

tokenizer *inference_tokenizer(const inference_model *im, const char *type, const char *vocab_file,
                               const char *merge_file, const char *tokenizer_model) {
    const char *name = type && type[0] ? type : im->tokenizer_type;
    char err[1024];
    /* Megatron's NullTokenizer has vocab_size + 1 ids, the last one its end of document */
    tokenizer *tok = tokenizer_create_with_model(name, vocab_file, merge_file, tokenizer_model, im->vocab_size - 1, err,
                                                 sizeof err);
    if (!tok) user_error("tokenizer %s: %s", name, err);
    if (tokenizer_vocab_size(tok) > im->model.config.padded_vocab_size)
        user_error("tokenizer %s has %d ids, more than the model's %d output rows", name,
                   tokenizer_vocab_size(tok), im->model.config.padded_vocab_size);
    return tok;
}
