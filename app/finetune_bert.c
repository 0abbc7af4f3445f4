/* finetune_bert.c: BERT fine-tuning on a downstream task, Megatron's tasks/main.py (--task MNLI:
 * sentence-pair classification; --task RACE: multiple choice) from a pretrain_bert checkpoint
 * (--pretrained-checkpoint); app/tasks/finetune.h runs it. */
#include "app/tasks/finetune.h"

int main(int argc, char **argv) { return finetune_bert_main(argc, argv); }
