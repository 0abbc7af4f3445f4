/* exit_signal.h: Megatron's --exit-signal-handler: SIGTERM (what srun and scancel send by
 * default), SIGUSR1 or SIGUSR2 (what sbatch --signal usually names) only set a flag; the
 * training loop checks it after each iteration, agrees on it over all ranks, saves a checkpoint
 * and exits cleanly. */
#ifndef EXIT_SIGNAL_H
#define EXIT_SIGNAL_H

/* install the handlers */
void exit_signal_install(void);
/* the signal received so far on this rank (0: none) */
int exit_signal_received(void);

#endif
