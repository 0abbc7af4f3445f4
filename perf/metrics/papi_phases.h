/* papi_phases.h: hardware event counts (PAPI) per phase of a training iteration. One event set
 * per PAPI component (the host's perf_event, the GPU's cuda) runs all the time; entering a phase
 * adds what the counters read since the last switch to the phase being left (PAPI_accum), so the
 * phases partition the counts. GPU events are PAPI's cuda component names ("cuda:::METRIC:stat=
 * sum"; the component reads them through CUPTI's profiler API, with the GPU's work ordered on
 * its streams); a GPU read is costly, so GPU counts are read only when a named phase other than
 * data starts, and the GPU work queued in "other" and "data" counts with the phase before
 * (papi_phases_enter in papi_phases.c); a component that is missing or disabled (no driver, no profiling permission)
 * drops its events with one line naming the reason. Built without PAPI (no HAVE_PAPI), opening
 * fails with one message and every other call is a no-op. */
#ifndef PERF_PAPI_PHASES_H
#define PERF_PAPI_PHASES_H

#include <stddef.h>

#define PAPI_PHASES_MAX_EVENTS 16
#define PAPI_PHASES_DEFAULT_EVENTS "PAPI_TOT_INS,PAPI_TOT_CYC,PAPI_L2_TCM,PAPI_L3_TCM"
/* added to "default" on --device cuda: DRAM bytes read and written, SM active cycles, the tensor
 * pipes' active cycles (all of them: Hopper's wgmma, which cuBLASLt and the attention kernels run
 * on sm_90, and mma.sync) and the bf16 operations of wgmma (hgmma: the FLOPs of the bf16 GEMMs on
 * Hopper); each summed over the GPU's units. The names are Hopper's (GH100: H100, H200), and all
 * five are profiled in one replay pass together (perf/papi/nvpw_passes GH100 passes ... checks a
 * set without a GPU; adding the mma.sync bf16 operations, sm__ops_path_tensor_src_bf16_dst_fp32
 * or its hmma part, needs a second pass). A name the GPU does not have is left out with the
 * note; an event that does not fit the pass with the ones before it too (papi_phases_start). */
#define PAPI_PHASES_DEFAULT_GPU_EVENTS                                                             \
    "cuda:::dram__bytes_read:stat=sum,cuda:::dram__bytes_write:stat=sum,"                           \
    "cuda:::sm__cycles_active:stat=sum,cuda:::sm__pipe_tensor_cycles_active:stat=sum,"              \
    "cuda:::sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32:stat=sum"

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
 * returns the mask of the events counted. An event that cannot be added (PAPI_EMULPASS: the GPU
 * would need a second pass for it with the events before it) is left out; when a component's set
 * cannot start, its last events are left out one at a time until it starts (a PAPI without the
 * pass check at add time fails only at start), or the component is left out (profiling
 * permission). Each is named with its reason in one line in note; the run goes on without them.
 * Starting again (another mask) stops the counting before. */
unsigned papi_phases_start(unsigned mask, char *note, size_t note_len);

/* events being counted and their names, in the order of the counts below */
int papi_phases_num_events(void);
const char *papi_phases_event_name(int event);

/* switch to phase; returns the phase left (to switch back to) */
run_phase papi_phases_enter(run_phase phase);

/* sampling (--papi-sample-interval): paused 1 adds the counters to the current phase and stops
 * the event sets (no counting, and on a GPU no profiling, until resumed); paused 0 starts them
 * again from zero. Phase switches while paused only track the phase. */
void papi_phases_pause(int paused);

/* the counts since the last take: counts[phase * PAPI_PHASES_MAX_EVENTS + event]; zeroes them */
void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]);

void papi_phases_close(void);

#endif
