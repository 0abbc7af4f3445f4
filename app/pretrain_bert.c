/* pretrain_bert.c: the BERT entry point (Megatron's pretrain_bert.py). The run is pretrain_gpt's
 * (app/training/pretrain_main.c) under the program name pretrain_bert, which puts args and the
 * trainer in encoder mode: BERT's flags (--bert-no-binary-head, --mask-prob, --short-seq-prob),
 * the WordPiece tokenizer by default (--tokenizer-type BertWordPieceLowerCase --vocab-file),
 * Megatron's BertDataset samples, the model's encoder mode (app/model/bert_encoder.h) and the
 * "lm loss" / "sop loss" log. */
#include "app/training/pretrain_main.h"

int main(int argc, char **argv) { return pretrain_main(argc, argv, "pretrain_bert"); }
