/* timers.h: Megatron's named phase timers (megatron/core/timers.py): one process-wide set of
 * wall-clock timers, each with a log level (1: the phases of a training step, 2: finer ones). A
 * timer whose level is above --timing-log-level is Megatron's DummyTimer: starting and stopping
 * it does nothing at all (no device synchronization, no clock read), so level 0 costs nothing.
 * An enabled timer synchronizes the device on start and stop (Megatron's
 * torch.cuda.synchronize(), through the hook given to timers_configure), and a level-1 timer
 * starts after a barrier over every rank unless that is turned off (Megatron's
 * barrier_with_L1_time, --no-barrier-with-level-1-timing): every rank must then start the same
 * level-1 timers in the same order. Times add up over start/stop pairs until read with reset. */
#ifndef TIMERS_H
#define TIMERS_H

#include "app/core/request_wait.h"

#define TIMERS_MAX 64        /* distinct timer names in one process */
#define TIMERS_NAME_MAX 64

/* enable the timers of level <= log_level (0: none) and forget every timer; synchronize (may be
 * NULL) waits for the device's queued work; the level-1 barrier waits through waiter (NULL:
 * MPI_Wait; see app/core/request_wait.h) */
void timers_configure(int log_level, int barrier_with_level_1, void (*synchronize)(void), request_waiter waiter);
int timers_log_level(void);

/* start timer name of log_level (1 or 2), created at its first start; a timer started twice,
 * or started with another level than it was created with, is a programming error (FATAL) */
void timers_start(const char *name, int log_level);
/* stop it (nothing for a timer above the log level) */
void timers_stop(const char *name);
/* seconds accumulated by name (0 for a timer never started); reset: start again from 0. A
 * running timer is read up to now and keeps running, as Megatron's elapsed() does. */
double timers_elapsed(const char *name, int reset);

#endif
