/* pretrain_bert.c: the BERT entry point (Megatron's examples/bert/pretrain_bert.py). The run is
 * pretrain_gpt's (its setup, training loop and teardown, compiled here under another name) with
 * the program name set first, which puts args and the trainer in encoder mode: BERT's flags
 * (--bert-no-binary-head, --mask-prob, --short-seq-prob), the WordPiece tokenizer by default
 * (--tokenizer-type BertWordPieceLowerCase --vocab-file), Megatron's BertDataset samples, the
 * model's encoder mode (app/model/bert_encoder.h) and the "lm loss" / "sop loss" log. */
#define main pretrain_gpt_main
#include "app/pretrain_gpt.c"
#undef main

int main(int argc, char **argv) {
    program_name = "pretrain_bert";
    return pretrain_gpt_main(argc, argv);
}
