/* inference_setup.h: what the generation server and the evaluation tool set up alike: the
 * kernel backend from --device (auto: cuda when this process sees a GPU; the GPU of the node-local
 * rank, collective over MPI_COMM_WORLD) and the tokenizer the
 * checkpoint was trained with (its /args/tokenizer_type unless --tokenizer-type says otherwise;
 * files from --vocab-file/--merge-file/--tokenizer-model; a NullTokenizer gets the checkpoint's vocabulary). */
#ifndef INFERENCE_SETUP_H
#define INFERENCE_SETUP_H

#include "app/inference/inference_model.h"
#include "app/tokenizers/tokenizer.h"
#include "kernels/kernels.h"

/* the kernels of --device (auto: cuda where a GPU is visible), one GPU per rank; collective over
 * MPI_COMM_WORLD (a node with more ranks than GPUs ends the job with one message) */
const kernel_ops *inference_backend(const char *device);

/* stops with user_error when the tokenizer cannot be built or does not fit the model */
tokenizer *inference_tokenizer(const inference_model *im, const char *type, const char *vocab_file,
                               const char *merge_file, const char *tokenizer_model);

/* the --tokenizer-type choices of the tools: every type tokenizer_create_with_model builds */
#define INFERENCE_TOKENIZER_TYPES \
    "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer|HuggingFaceTokenizer|Llama2Tokenizer|" \
    "SentencePieceTokenizer|GPTSentencePieceTokenizer"

#endif
