/* train_timers.h: the phase timers of training (--timing-log-level 1|2, app/core/timers.h):
 * which names Megatron's training_log reports at each level (its timers_to_log list, in its
 * order), and their report at every logged iteration: gathered from every rank, printed by the
 * rank that prints the log line right after it (--timing-log-option), written to --metrics-file
 * (the train line's "timers_ms") and with --log-timers-to-tensorboard to TensorBoard under
 * Megatron's tags (NAME-time and iteration-time, seconds). A timer this project never starts
 * (a phase it does not have) has no time on any rank and is left out, as in Megatron. */
#ifndef TRAIN_TIMERS_H
#define TRAIN_TIMERS_H

#include "app/core/timers_report.h"
#include "app/training/args.h"
#include "app/training/train_log.h"
#include "kernels/kernels.h"

/* enable the timers of --timing-log-level, synchronizing ops' device */
void train_timers_setup(const args *a, const kernel_ops *ops);

/* the names Megatron's training_log logs at log_level (none at 0); returns their count */
int train_timers_names(int log_level, const char **names, int capacity);

/* collective over every rank: the logged timers' times since the last call (reset) */
void train_timers_collect(timers_table *table, const args *a);

/* on the logging rank: print the timers of table averaged over iterations, and write them to
 * TensorBoard with --log-timers-to-tensorboard (with iteration-time, seconds_per_iteration) */
void train_timers_log(train_log *log, const timers_table *table, const args *a, int64_t iteration,
                      double iterations, double seconds_per_iteration);

#endif
