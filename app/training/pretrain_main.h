/* pretrain_main.h: the whole run of a training entry point (app/pretrain_gpt.c,
 * app/pretrain_bert.c, app/finetune_bert.c): MPI, arguments, backend, training, teardown. */
#ifndef PRETRAIN_MAIN_H
#define PRETRAIN_MAIN_H

#include "app/training/args.h"
#include "app/training/training.h"

/* what a program adds to the run (finetune_bert: its task data) */
typedef struct pretrain_hooks {
    void *context;
    /* right after the arguments are parsed, on every rank: may parse them again */
    void (*after_args)(void *context, args *a, int argc, char **argv, int world_size);
    /* after trainer_setup (model, optimizer, checkpoint loaded), before training */
    void (*before_train)(void *context, trainer *t);
} pretrain_hooks;

/* runs the job as program `name` ("pretrain_gpt", "pretrain_bert": BERT's encoder mode, flags
 * and data; "finetune_bert": BERT with a task head); returns the process's exit status */
int pretrain_main(int argc, char **argv, const char *name);
int pretrain_main_with(int argc, char **argv, const char *name, const pretrain_hooks *hooks);

#endif
