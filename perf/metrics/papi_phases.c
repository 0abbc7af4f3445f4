/* papi_phases.c: see papi_phases.h. Host counts are those of the calling thread (PAPI's default
 * granularity): the training loop's host thread, not BLAS worker threads. GPU counts are the
 * device's (CUPTI profiles the current context: the one the CUDA backend made current). */
#include "config.h"

#include "perf/metrics/papi_phases.h"
#include "app/core/error.h"

#include <stdio.h>
#include <string.h>

static const char *const phase_names[PHASE_COUNT] = {
    "data", "forward", "backward", "grad_reduce", "optimizer", "checkpoint",
};

const char *run_phase_name(run_phase phase) {
    return phase >= 0 && phase < PHASE_COUNT ? phase_names[phase] : "other";
}

#ifdef HAVE_PAPI
#include <papi.h>

#include <stdarg.h>

#define MAX_SETS 4   /* one event set per component counted */
#define NOTE_MAX 1024

typedef struct event_set {
    int component, handle;
    int first, count;   /* its events: the counted ones first .. first + count - 1 */
    int gpu;            /* the cuda component's: read only when a named phase starts (below) */
    run_phase owner;    /* the phase its counts since the last read belong to */
} event_set;

static struct {
    int num_requested, codes[PAPI_PHASES_MAX_EVENTS], components[PAPI_PHASES_MAX_EVENTS];
    char names[PAPI_PHASES_MAX_EVENTS][PAPI_MAX_STR_LEN];   /* as given: reported, summed over ranks */
    int num_events, event_of[PAPI_PHASES_MAX_EVENTS];        /* counted: index into the requested */
    event_set sets[MAX_SETS];
    int num_sets, counting, paused;
    run_phase current;
    long long counts[PHASE_COUNT + 1][PAPI_PHASES_MAX_EVENTS];   /* + PHASE_OTHER */
} state = {.current = PHASE_OTHER};

static void append(char *buf, size_t len, const char *separator, const char *format, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= len) return;
    if (used) used += (size_t)snprintf(buf + used, len - used, "%s", separator);
    if (used + 1 >= len) return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(buf + used, len - used, format, ap);
    va_end(ap);
}

static int is_cuda_name(const char *name) { return !strncmp(name, "cuda:::", 7); }

/* why the CPU counters are off: the perf_event component's disabled reason */
static const char *host_reason(void) {
    for (int i = 0; i < PAPI_num_components(); i++) {
        const PAPI_component_info_t *info = PAPI_get_component_info(i);
        if (info && !strcmp(info->name, "perf_event") && info->disabled) return info->disabled_reason;
    }
    return "no counter for these events";
}

/* why cuda::: events cannot be counted, or NULL when the cuda component works. Its
 * initialization is delayed until an event name is looked up, so ask after one was. */
static const char *cuda_problem(char *buf, size_t len) {
    int component = PAPI_get_component_index("cuda");
    if (component < 0)
        return "this PAPI has no cuda component (Debian's is built without it; perf/papi/build_papi_cuda.sh "
               "builds one, then ./configure --with-papi=DIR)";
    const PAPI_component_info_t *info = PAPI_get_component_info(component);
    if (!info || !info->disabled) return NULL;
    snprintf(buf, len, "PAPI's cuda component is disabled: %.900s", info->disabled_reason[0] ? info->disabled_reason : "no reason given");
    return buf;
}

int papi_phases_open(const char *events, int gpu_device, unsigned *available, char *note, size_t note_len,
                     char *err, size_t err_len) {
    *available = 0;
    note[0] = '\0';
    int defaults = !strcmp(events, "default");
    char list[PAPI_PHASES_MAX_EVENTS * PAPI_MAX_STR_LEN];
    if (defaults)
        snprintf(list, sizeof list, "%s%s%s", PAPI_PHASES_DEFAULT_EVENTS, gpu_device >= 0 ? "," : "",
                 gpu_device >= 0 ? PAPI_PHASES_DEFAULT_GPU_EVENTS : "");
    else
        snprintf(list, sizeof list, "%s", events);
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT)
        return error_format(err, err_len, "--papi-events: PAPI_library_init failed: %s", PAPI_strerror(rc));
    char host_missing[NOTE_MAX] = "", cuda_missing[NOTE_MAX] = "", unknown[NOTE_MAX] = "", why_cuda[PAPI_HUGE_STR_LEN] = "";
    state.num_requested = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (state.num_requested == PAPI_PHASES_MAX_EVENTS)
            return error_format(err, err_len, "--papi-events lists more than %d events", PAPI_PHASES_MAX_EVENTS);
        if (strlen(name) >= sizeof state.names[0])
            return error_format(err, err_len, "--papi-events: the event name '%.40s...' is longer than %zu characters",
                                name, sizeof state.names[0] - 1);
        int k = state.num_requested++;
        snprintf(state.names[k], sizeof state.names[k], "%s", name);
        state.codes[k] = PAPI_NULL;
        state.components[k] = -1;
        /* a GPU event without a device counts this rank's GPU */
        char papi_name[PAPI_HUGE_STR_LEN];
        int cuda = is_cuda_name(name);
        snprintf(papi_name, sizeof papi_name, "%s", name);
        if (cuda && gpu_device >= 0 && !strstr(name, ":device="))
            snprintf(papi_name, sizeof papi_name, "%s:device=%d", name, gpu_device);
        if (cuda && PAPI_get_component_index("cuda") < 0) {
            append(cuda_missing, sizeof cuda_missing, ", ", "%s", name);
            continue;
        }
        if (PAPI_event_name_to_code(papi_name, &state.codes[k]) != PAPI_OK) {
            state.codes[k] = PAPI_NULL;
            if (cuda && cuda_problem(why_cuda, sizeof why_cuda)) append(cuda_missing, sizeof cuda_missing, ", ", "%s", name);
            else if (defaults) append(unknown, sizeof unknown, ", ", "%s", name);
            else
                return error_format(err, err_len, "--papi-events: PAPI does not know the event '%s' (%s lists the events)",
                                    name, cuda ? "papi_native_avail on the GPU machine" : "papi_avail");
            continue;
        }
        state.components[k] = PAPI_get_event_component(state.codes[k]);
        if (PAPI_query_event(state.codes[k]) == PAPI_OK) *available |= 1u << k;
        else append(cuda ? cuda_missing : host_missing, NOTE_MAX, ", ", "%s", name);
    }
    if (state.num_requested == 0) return error_format(err, err_len, "--papi-events names no event");
    /* "NAMES: why" per cause */
    char reasons[3 * NOTE_MAX + PAPI_HUGE_STR_LEN] = "";
    if (host_missing[0])
        append(reasons, sizeof reasons, "; ", "%s: %s; see /proc/sys/kernel/perf_event_paranoid and the container's "
               "perf_event access", host_missing, host_reason());
    if (cuda_missing[0]) {
        const char *why = cuda_problem(why_cuda, sizeof why_cuda);
        append(reasons, sizeof reasons, "; ", "%s: %s", cuda_missing, why ? why : "the cuda component cannot count them here");
    }
    if (unknown[0]) append(reasons, sizeof reasons, "; ", "%s: not events of this machine", unknown);
    if (*available == 0)
        snprintf(note, note_len, "PAPI cannot count on this machine (%s): training goes on without counters", reasons);
    else if (reasons[0])
        snprintf(note, note_len, "PAPI: this machine cannot count %s; counting the other events", reasons);
    return 0;
}

/* the GPU's profiling permission, named after a cuda error that may come from it */
static const char *permission_hint(int cuda, int rc) {
    if (!cuda || rc == PAPI_EMULPASS || rc == PAPI_ENOEVNT) return "";
    return "; profiling the GPU needs the permission: root, or the driver's NVreg_RestrictProfilingToAdminUsers=0";
}

/* add the events of mask that belong to component to a new event set and start it; returns the
 * events started. An event that cannot be added (one the GPU would need a second pass for with
 * the events before it) is left out. When the set cannot start and holds more than one event, its
 * last event is left out and the start tried again (PAPI releases the GPU after a failed start
 * only with perf/papi/build_papi_cuda.sh's patch; an older PAPI fails the retries as well). The
 * reasons are appended to note. */
static unsigned start_component_set(unsigned mask, int component, char *note, size_t note_len) {
    const PAPI_component_info_t *info = PAPI_get_component_info(component);
    int cuda = info && !strcmp(info->name, "cuda");
    event_set *set = &state.sets[state.num_sets];
    *set = (event_set){.component = component, .handle = PAPI_NULL, .first = state.num_events, .gpu = cuda,
                       .owner = PHASE_OTHER};
    unsigned added = 0;
    int rc = PAPI_create_eventset(&set->handle);
    for (int k = 0; rc == PAPI_OK && k < state.num_requested; k++) {
        if (!(mask & (1u << k)) || state.components[k] != component) continue;
        int added_rc = PAPI_add_event(set->handle, state.codes[k]);
        if (added_rc == PAPI_OK) {
            state.event_of[set->first + set->count++] = k;
            added |= 1u << k;
        } else {
            append(note, note_len, "; ", "%s: %s%s", state.names[k], PAPI_strerror(added_rc),
                   added_rc == PAPI_EMULPASS ? " (with the events before it: ask for fewer)" : permission_hint(cuda, added_rc));
        }
    }
    if (rc == PAPI_OK && added) rc = PAPI_start(set->handle);
    while (rc != PAPI_OK && set->count > 1) {
        int k = state.event_of[set->first + --set->count];
        append(note, note_len, "; ", "%s: left out, the %s events did not start with it (%s)", state.names[k],
               info ? info->name : "?", PAPI_strerror(rc));
        added &= ~(1u << k);
        int removed_rc = PAPI_remove_event(set->handle, state.codes[k]);
        rc = removed_rc == PAPI_OK ? PAPI_start(set->handle) : removed_rc;
    }
    if (rc == PAPI_OK && added) {
        state.num_events += set->count;
        state.num_sets++;
        return added;
    }
    if (rc != PAPI_OK)
        append(note, note_len, "; ", "the %s events: %s%s", info ? info->name : "?", PAPI_strerror(rc), permission_hint(cuda, rc));
    if (set->handle != PAPI_NULL) {
        PAPI_cleanup_eventset(set->handle);
        PAPI_destroy_eventset(&set->handle);
    }
    return 0;
}

unsigned papi_phases_start(unsigned mask, char *note, size_t note_len) {
    note[0] = '\0';
    papi_phases_close();
    unsigned started = 0, placed = 0;
    for (int k = 0; k < state.num_requested && state.num_sets < MAX_SETS; k++) {
        if (!(mask & (1u << k)) || (placed & (1u << k))) continue;
        int component = state.components[k];
        for (int j = k; j < state.num_requested; j++)
            if ((mask & (1u << j)) && state.components[j] == component) placed |= 1u << j;
        started |= start_component_set(mask, component, note, note_len);
    }
    if (note[0]) {
        char reasons[NOTE_MAX];
        snprintf(reasons, sizeof reasons, "%s", note);
        if (started == 0)
            snprintf(note, note_len, "PAPI cannot count on this machine (starting %s): training goes on without counters", reasons);
        else
            snprintf(note, note_len, "PAPI: cannot start %s; counting the other events", reasons);
    }
    memset(state.counts, 0, sizeof state.counts);
    state.current = PHASE_OTHER;
    state.counting = state.num_sets > 0;
    return started;
}

int papi_phases_num_events(void) { return state.counting ? state.num_events : 0; }

const char *papi_phases_event_name(int event) { return state.names[state.event_of[event]]; }

/* add a set's counters to its owner's counts and zero them */
static void accumulate_set(event_set *set) {
    int rc = PAPI_accum(set->handle, state.counts[set->owner] + set->first);
    CHECK(rc == PAPI_OK, "PAPI_accum failed: %s", PAPI_strerror(rc));
}

/* A phase switch reads the host sets: their counts go to the phase left. A GPU set's read ends a
 * CUPTI range, which waits for the GPU's queued work and costs milliseconds on the host (GPT 1.3B
 * on an H200: about 15 ms a read), so a GPU set is read only when a named phase other than data
 * starts: the GPU work queued in "other" and "data" (the batch's copy, the loss's reduction) is
 * counted with the phase before it. Per iteration 4 reads instead of 9. */
run_phase papi_phases_enter(run_phase phase) {
    run_phase left = state.current;
    if (!state.counting || phase == left) return left;
    if (!state.paused)
        for (int i = 0; i < state.num_sets; i++) {
            event_set *set = &state.sets[i];
            if (!set->gpu) {
                set->owner = left;
                accumulate_set(set);
            } else if (phase != PHASE_OTHER && phase != PHASE_DATA && phase != set->owner) {
                accumulate_set(set);
                set->owner = phase;
            }
        }
    state.current = phase;
    return left;
}

void papi_phases_pause(int paused) {
    if (!state.counting || paused == state.paused) return;
    long long ignored[PAPI_PHASES_MAX_EVENTS];
    for (int i = 0; i < state.num_sets; i++) {
        int rc;
        event_set *set = &state.sets[i];
        if (paused) {
            if (!set->gpu) set->owner = state.current;
            rc = PAPI_accum(set->handle, state.counts[set->owner] + set->first);
            if (rc == PAPI_OK) rc = PAPI_stop(set->handle, ignored);
        } else {
            rc = PAPI_start(set->handle);
            if (set->gpu) set->owner = state.current;
        }
        CHECK(rc == PAPI_OK, "PAPI_%s failed: %s", paused ? "stop" : "start", PAPI_strerror(rc));
    }
    state.paused = paused;
}

void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]) {
    if (state.counting && !state.paused)
        for (int i = 0; i < state.num_sets; i++) {
            if (!state.sets[i].gpu) state.sets[i].owner = state.current;
            accumulate_set(&state.sets[i]);
        }
    memcpy(counts, state.counts, sizeof(long long) * PHASE_COUNT * PAPI_PHASES_MAX_EVENTS);
    memset(state.counts, 0, sizeof state.counts);
}

void papi_phases_close(void) {
    long long ignored[PAPI_PHASES_MAX_EVENTS];
    for (int i = 0; i < state.num_sets; i++) {
        if (state.counting && !state.paused) PAPI_stop(state.sets[i].handle, ignored);
        PAPI_cleanup_eventset(state.sets[i].handle);
        PAPI_destroy_eventset(&state.sets[i].handle);
    }
    state.num_sets = 0;
    state.counting = 0;
    state.paused = 0;
    state.num_events = 0;
}

#else

int papi_phases_open(const char *events, int gpu_device, unsigned *available, char *note, size_t note_len,
                     char *err, size_t err_len) {
    (void)events;
    (void)gpu_device;
    (void)note_len;
    *available = 0;
    note[0] = '\0';
    return error_format(err, err_len, "--papi-events: this build has no PAPI (configure did not find papi.h and "
                        "libpapi: install libpapi-dev and reconfigure)");
}

unsigned papi_phases_start(unsigned mask, char *note, size_t note_len) {
    (void)mask;
    (void)note_len;
    note[0] = '\0';
    return 0;
}

int papi_phases_num_events(void) { return 0; }

const char *papi_phases_event_name(int event) {
    (void)event;
    return "";
}

run_phase papi_phases_enter(run_phase phase) {
    (void)phase;
    return PHASE_OTHER;
}

void papi_phases_pause(int paused) { (void)paused; }

void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]) {
    memset(counts, 0, sizeof(long long) * PHASE_COUNT * PAPI_PHASES_MAX_EVENTS);
}

void papi_phases_close(void) {}

#endif
