/* papi_phases.h: hardware event counts (PAPI) per phase of a training iteration. One event set
 * per process runs all the time; entering a phase adds what the counters read since the last
 * switch to the phase being left (PAPI_accum), so the phases partition the counts. Built
 * without PAPI (no HAVE_PAPI), opening fails with one message and every other call is a no-op. */
#ifndef PERF_PAPI_PHASES_H
#define PERF_PAPI_PHASES_H

#include <stddef.h>

#define PAPI_PHASES_MAX_EVENTS 16
#define PAPI_PHASES_DEFAULT_EVENTS "PAPI_TOT_INS,PAPI_TOT_CYC,PAPI_L2_TCM,PAPI_L3_TCM"

typedef enum run_phase {
    PHASE_DATA,          /* reading and assembling micro-batches */
    PHASE_FORWARD,
    PHASE_BACKWARD,      /* includes bucket reductions started during the backward */
    PHASE_GRAD_REDUCE,   /* waiting for / running the data-parallel gradient reduction */
    PHASE_OPTIMIZER,     /* grad norm, clipping, AdamW, parameter gather */
    PHASE_CHECKPOINT,
    PHASE_COUNT,
    PHASE_OTHER = PHASE_COUNT   /* everything else: not reported */
} run_phase;

const char *run_phase_name(run_phase phase);

/* resolve the comma-separated event names ("default": PAPI_PHASES_DEFAULT_EVENTS) and find
 * which this machine can count: bit i of *available for event i. Returns 0, with *note set to
 * one line when some or all events cannot be counted here (empty otherwise); -1 with one
 * message in err for a name PAPI does not know, too many names, or a build without PAPI. */
int papi_phases_open(const char *events, unsigned *available, char *note, size_t note_len,
                     char *err, size_t err_len);

/* start counting the events of mask (a subset of *available); returns the number counted,
 * 0 with one line in note when the counters cannot be started (the run goes on without) */
int papi_phases_start(unsigned mask, char *note, size_t note_len);

/* events being counted and their names, in the order of the counts below */
int papi_phases_num_events(void);
const char *papi_phases_event_name(int event);

/* switch to phase; returns the phase left (to switch back to) */
run_phase papi_phases_enter(run_phase phase);

/* the counts since the last take: counts[phase * PAPI_PHASES_MAX_EVENTS + event]; zeroes them */
void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]);

void papi_phases_close(void);

#endif
