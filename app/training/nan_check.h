/* nan_check.h: Megatron's --check-for-nan-in-loss-and-grad (on by default) and
 * --check-for-spiky-loss. The training loop calls the checks with values every rank shares (the
 * global batch's loss after forward and backward; the global gradient norm after the
 * data-parallel reduction, before the optimizer step), so every rank takes the same branch.
 * A non-finite value stops the job: each rank scans what it holds (its share of the loss, its
 * gradients tensor by tensor), rank 0 prints one message naming the iteration, the ranks and the
 * first non-finite tensor on each, and every rank exits with status 1 without saving anything:
 * the last checkpoint stays the newest. */
#ifndef NAN_CHECK_H
#define NAN_CHECK_H

#include "app/training/training.h"

/* stop the job when loss (the mean loss of the global batch of iteration `iteration`, 1-based)
 * is not finite; local_loss is this rank's contribution to it (0 where it has none) */
void nan_check_loss(trainer *t, int64_t iteration, double loss, double local_loss);

/* stop the job when grad_norm (global, after the reduction) is not finite */
void nan_check_grad_norm(trainer *t, int64_t iteration, double grad_norm);

/* --check-for-spiky-loss (Megatron's SPIKY_LOSS_FACTOR check, not fatal): rank 0 warns when loss
 * exceeds 10x the largest loss of the (up to) 100 iterations before it; *history keeps them
 * (zero it to start) */
enum { SPIKY_LOSS_FACTOR = 10, SPIKY_LOSS_WINDOW = 100 };
typedef struct spiky_loss_history {
    double losses[SPIKY_LOSS_WINDOW];
    int64_t count;
} spiky_loss_history;
void spiky_loss_check(spiky_loss_history *history, const trainer *t, int64_t iteration, double loss);

#endif
