/* process_start.h: when this process started, as seconds since the epoch, for the start-up
 * figures (Megatron's _TRAIN_START_TIME, "time to initialize megatron"). Linux gives the start
 * in /proc/self/stat (clock ticks since boot); elsewhere the first call's time stands in. */
#ifndef PROCESS_START_H
#define PROCESS_START_H

/* seconds since the epoch when this process started (to the kernel's clock tick, 10 ms);
 * the first call's wall-clock time where /proc cannot say */
double process_start_time(void);

/* seconds since the epoch now (gettimeofday) */
double wall_clock_now(void);

#endif
