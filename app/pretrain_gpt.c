/* pretrain_gpt.c: the GPT (decoder-only: GPT, Llama, Mixtral) entry point, Megatron's
 * pretrain_gpt.py; the run itself is app/training/pretrain_main.c. */
#include "app/training/pretrain_main.h"

int main(int argc, char **argv) { return pretrain_main(argc, argv, "pretrain_gpt"); }
