/* straggler.h: the straggler report (--log-straggler, Megatron's StragglerDetector in
 * megatron/core/utils.py). Every rank times its own sections of each step on the host clock
 * (forward-backward compute, the gradient reduction's wait, the optimizer, the whole step); at
 * every logged iteration the per-rank averages are gathered to rank 0 over the world (one small
 * MPI_Gather), which prints Megatron's min/max line ("MnRtt/Rnk: ... | MxRtt/Rnk: ...", the
 * estimated throughput "MnEtpt/Rnk"/"MxEtpt/Rnk" and, with 1 < --straggler-minmax-count < world
 * size, its "^^^^ Bottom/Top N Ranks" lines) and then the --straggler-minmax-count slowest and
 * fastest ranks with their host, their device and their compute time relative to the median.
 * The ranks are ranked by compute time: the step less the time the rank waited in MPI
 * (comm_waited_seconds, app/parallel/timeout.h), not by the step time: the ranks that wait for a
 * slow one finish the step together with it, but wait the longer (Megatron's detector likewise
 * times compute, the forward's). On the CUDA backend a wait for an NCCL collective is inside the
 * device stream, not an MPI wait, so there the compute time still holds it and the report names
 * only what MPI waits show. GPU power, temperature, utilization and clock (Megatron's MnPwr,
 * MnTmp, MnUtl, MnClk) are not read here. */
#ifndef STRAGGLER_H
#define STRAGGLER_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef enum straggler_section {
    STRAGGLER_FORWARD_BACKWARD, /* the micro-batches' forward and backward, the gradient reduction */
    STRAGGLER_OPTIMIZER,        /* clip, update, start of the parameter gather */
    STRAGGLER_STEP,             /* the whole iteration (start and stop it around the others) */
    STRAGGLER_COMMUNICATION,    /* filled by STEP: the time blocked in MPI waits during the step */
    STRAGGLER_COMPUTE,          /* at a report: step less communication (what ranks are ranked by) */
    STRAGGLER_SECTIONS
} straggler_section;

typedef struct straggler_detector {
    int enabled;                         /* --log-straggler and not --disable-straggler-on-startup */
    int world_rank, world_size, minmax_count;
    MPI_Comm world;
    char device[32];                     /* "cpu" or "cuda:N" */
    char (*hosts)[MPI_MAX_PROCESSOR_NAME]; /* rank 0: every rank's host */
    double started[STRAGGLER_SECTIONS];  /* MPI_Wtime of the running section's start; 0: stopped */
    double waited_at_step_start;         /* comm_waited_seconds() when the step started */
    double seconds[STRAGGLER_SECTIONS];  /* summed since the last report */
    char *json;                          /* rank 0: the last report as a metrics field; NULL: none */
} straggler_detector;

/* collective over world: configure from the flags (log_straggler, disable_on_startup,
 * minmax_count as Megatron's); device_label names this rank's device; rank 0 prints a line when
 * the report is disabled on start-up */
void straggler_setup(straggler_detector *s, int log_straggler, int disable_on_startup, int minmax_count,
                     const char *device_label, MPI_Comm world);
void straggler_free(straggler_detector *s);

/* add the time between start and stop to section (nothing when the report is off) */
void straggler_start(straggler_detector *s, straggler_section section);
void straggler_stop(straggler_detector *s, straggler_section section);

/* collective over world at a logged iteration: gather the sections' times averaged over
 * iterations, print the report on rank 0 and keep its JSON ("stragglers": {...},) in s->json;
 * flops_per_iteration gives Megatron's estimated throughput (Etpt). Then start again from 0. */
void straggler_report(straggler_detector *s, double iterations, double flops_per_iteration);

/* test hook (tests/mpi/straggler_test.sh): MTC_FAULT_SLOW_RANK=R:MS sleeps world rank R for MS
 * milliseconds; called inside the forward-backward section of every step */
void straggler_fault_slow_rank(int world_rank);

#endif
