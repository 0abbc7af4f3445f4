/* grad_first_write.h: a training step's gradients without clearing the weight matrices first:
 * their first weight-gradient GEMM of the step writes them over (grad_first_write.c says why and
 * which). */
#ifndef GRAD_FIRST_WRITE_H
#define GRAD_FIRST_WRITE_H

#include "app/model/gpt_model.h"

/* the overwritable matrices and what a step clears instead; gpt_model_create/free call these */
void grad_first_write_setup(gpt_model *m);
void grad_first_write_free(gpt_model *m);

/* 1 when this is the step's first write to the gradient at `grad` (a pending matrix): the caller
 * writes it over; the mark is cleared. 0 otherwise (accumulate). */
int grad_first_write_take(gpt_model *m, const float *grad);

/* clears the gradients of parameters [first, first + count) still pending (no write this step) */
void grad_first_write_settle(gpt_model *m, int first, int count);

/* a new start for the gradients in [start, start + length) of the flat buffer, as
 * gpt_model_start_grads makes for all of them: the gaps between the overwritable matrices
 * cleared, the matrices lying inside pending again (--deterministic-mode's fixed tree computes
 * every micro-batch's gradient into fresh gradients, by the same GEMMs whatever its slot) */
void grad_first_write_restart(gpt_model *m, size_t start, size_t length);

#endif
