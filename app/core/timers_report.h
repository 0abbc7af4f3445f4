/* timers_report.h: the timers of app/core/timers.h across ranks, as Megatron's Timers.log and
 * Timers.write report them: every rank's elapsed time of each named timer gathered to every
 * rank (a rank that never ran a timer has 0), the minimum and maximum over the ranks that ran it
 * (a timer no rank ran is left out), and Megatron's text for --timing-log-option max, minmax and
 * all, e.g.
 *     (min, max) time across ranks (ms):
 *         forward-backward ...............................: (12.31, 12.40)
 * Values are divided by a normalizer (the iterations of the log interval). */
#ifndef TIMERS_REPORT_H
#define TIMERS_REPORT_H

#include "app/core/timers.h"

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

typedef enum timers_log_option { TIMERS_LOG_MAX, TIMERS_LOG_MINMAX, TIMERS_LOG_ALL } timers_log_option;

/* "max", "minmax" or "all"; -1 for anything else */
int timers_log_option_from_name(const char *name);

typedef struct timers_table {
    int num_names, num_ranks;
    const char *names[TIMERS_MAX];
    double *seconds;   /* [num_ranks][num_names]: rank r's elapsed seconds of names[i] */
} timers_table;

/* collective over comm (waited for through waiter, NULL: MPI_Wait): every rank's
 * timers_elapsed(names[i], reset); names must be the same list on every rank */
void timers_table_gather(timers_table *table, const char *const *names, int num_names, int reset, MPI_Comm comm,
                         request_waiter waiter);
void timers_table_free(timers_table *table);

/* the smallest and largest non-zero time of names[name] over the ranks, divided by normalizer;
 * returns 0 (and leaves min, max) when every rank has 0 */
int timers_table_min_max(const timers_table *table, int name, double normalizer, double *min, double *max);

/* Megatron's text in milliseconds per normalizer unit, without a final newline, into out;
 * returns its length, or 0 when no timer has a time (Megatron prints nothing then) */
size_t timers_table_format(const timers_table *table, timers_log_option option, double normalizer, char *out,
                           size_t len);

/* "timers_ms": {"NAME": {"min": MS, "max": MS[, "ranks": [MS, ...]]}, ...},  (followed by a
 * space) for the timers some rank ran, per normalizer unit; nothing when there are none */
void timers_table_write_json(FILE *out, const timers_table *table, double normalizer, int per_rank);

#endif
