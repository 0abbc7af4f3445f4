/* pretrain_main.h: the whole run of a pretraining entry point (app/pretrain_gpt.c,
 * app/pretrain_bert.c): MPI, arguments, backend, training, teardown. */
#ifndef PRETRAIN_MAIN_H
#define PRETRAIN_MAIN_H

/* runs the job as program `name` ("pretrain_gpt" or "pretrain_bert": BERT's encoder mode, flags
 * and data); returns the process's exit status */
int pretrain_main(int argc, char **argv, const char *name);

#endif
