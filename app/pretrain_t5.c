/* pretrain_t5.c: the T5 entry point (Megatron's examples/t5/pretrain_t5.py). The run is
 * pretrain_gpt's (app/training/pretrain_main.c) under the program name pretrain_t5, which puts
 * args and the trainer in encoder-decoder mode: T5's flags (--encoder-num-layers,
 * --decoder-num-layers, --encoder-seq-length, --decoder-seq-length, --vocab-extra-ids,
 * --mask-prob, --short-seq-prob), the WordPiece tokenizer (--tokenizer-type BertWordPieceCase
 * brings the sentinels), Megatron's T5MaskedWordPieceDataset samples and the model's T5 mode
 * (gpt_config.t5, app/model/gpt_model_t5.inc). */
#include "app/training/pretrain_main.h"

int main(int argc, char **argv) { return pretrain_main(argc, argv, "pretrain_t5"); }
