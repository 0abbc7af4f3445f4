/* papi_phases.h: hardware event counts (PAPI) per phase of a training iteration. One event set
 * per PAPI component (the host's perf_event, the GPU's cuda) runs all the time; entering a phase
 * adds what the counters read since the last switch to the phase being left (PAPI_accum), so the
 * phases partition the counts. GPU events are PAPI's cuda component names ("cuda:::METRIC:stat=
 * sum"; the component reads them through CUPTI's profiler API, with the GPU's work ordered on
 * its streams); a component that is missing or disabled (no driver, no profiling permission)
 * drops its events with one line naming the reason. Built without PAPI (no HAVE_PAPI), opening
 * fails with one message and every other call is a no-op. */
#ifndef PERF_PAPI_PHASES_H
#define PERF_PAPI_PHASES_H

#include <stddef.h>

#define PAPI_PHASES_MAX_EVENTS 16
#define PAPI_PHASES_DEFAULT_EVENTS "PAPI_TOT_INS,PAPI_TOT_CYC,PAPI_L2_TCM,PAPI_L3_TCM"
/* added to "default" on --device cuda: DRAM bytes read and written, SM active cycles, the tensor
 * pipes' active cycles (HMMA: mma.sync; GMMA: Hopper's wgmma, which cuBLASLt uses on sm_90) and
 * the tensor-path bf16 operations (FLOPs; CUPTI counts mma.sync ones); each summed over the GPU's
 * units. A name the GPU does not have is left out with the note, as an event the host lacks. */
#define PAPI_PHASES_DEFAULT_GPU_EVENTS                                                             \
    "cuda:::dram__bytes_read:stat=sum,cuda:::dram__bytes_write:stat=sum,"                           \
    "cuda:::sm__cycles_active:stat=sum,cuda:::sm__pipe_tensor_op_hmma_cycles_active:stat=sum,"      \
    "cuda:::sm__pipe_tensor_op_gmma_cycles_active:stat=sum,"                                       \
    "cuda:::sm__ops_path_tensor_src_bf16_dst_fp32:stat=sum"

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

/* resolve the comma-separated event names ("default": PAPI_PHASES_DEFAULT_EVENTS, and on a GPU
 * PAPI_PHASES_DEFAULT_GPU_EVENTS too) and find which this machine can count: bit i of
 * *available for event i. gpu_device is this rank's GPU (-1: none); a cuda::: name without
 * ":device=" counts that GPU (the name reported stays the one given, so that ranks sum alike).
 * Returns 0, with *note set to one line when some or all events cannot be counted here (empty
 * otherwise); -1 with one message in err for a name PAPI does not know (a cuda::: one only
 * when the cuda component works; default names are noted instead), too many names, or a build
 * without PAPI. */
int papi_phases_open(const char *events, int gpu_device, unsigned *available, char *note,
                     size_t note_len, char *err, size_t err_len);

/* start counting the events of mask (a subset of *available), one event set per component;
 * returns the mask of the events counted: a component whose events cannot be added or started
 * (profiling permission, more counters than one pass) is left out with one line in note, the
 * run goes on without them. Starting again (another mask) stops the counting before. */
unsigned papi_phases_start(unsigned mask, char *note, size_t note_len);

/* events being counted and their names, in the order of the counts below */
int papi_phases_num_events(void);
const char *papi_phases_event_name(int event);

/* switch to phase; returns the phase left (to switch back to) */
run_phase papi_phases_enter(run_phase phase);

/* the counts since the last take: counts[phase * PAPI_PHASES_MAX_EVENTS + event]; zeroes them */
void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]);

void papi_phases_close(void);

#endif
