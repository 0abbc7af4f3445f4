/* papi_phases.c: see papi_phases.h. Counts are those of the calling thread (PAPI's default
 * granularity): the training loop's host thread, not BLAS worker threads. */
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

static struct {
    int num_requested, codes[PAPI_PHASES_MAX_EVENTS];
    char names[PAPI_PHASES_MAX_EVENTS][PAPI_MAX_STR_LEN];
    int num_events, event_of[PAPI_PHASES_MAX_EVENTS];   /* counted: index into the requested */
    int event_set, counting;
    run_phase current;
    long long counts[PHASE_COUNT + 1][PAPI_PHASES_MAX_EVENTS];   /* + PHASE_OTHER */
} state = {.event_set = PAPI_NULL, .current = PHASE_OTHER};

/* why the CPU counters are off: the first disabled perf_event component's reason */
static const char *disabled_reason(void) {
    for (int i = 0; i < PAPI_num_components(); i++) {
        const PAPI_component_info_t *info = PAPI_get_component_info(i);
        if (info && !strcmp(info->name, "perf_event") && info->disabled) return info->disabled_reason;
    }
    return "no counter for any of these events";
}

int papi_phases_open(const char *events, unsigned *available, char *note, size_t note_len,
                     char *err, size_t err_len) {
    *available = 0;
    note[0] = '\0';
    if (!strcmp(events, "default")) events = PAPI_PHASES_DEFAULT_EVENTS;
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT)
        return error_format(err, err_len, "--papi-events: PAPI_library_init failed: %s", PAPI_strerror(rc));
    char list[PAPI_PHASES_MAX_EVENTS * PAPI_MAX_STR_LEN];
    snprintf(list, sizeof list, "%s", events);
    state.num_requested = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (state.num_requested == PAPI_PHASES_MAX_EVENTS)
            return error_format(err, err_len, "--papi-events lists more than %d events", PAPI_PHASES_MAX_EVENTS);
        int k = state.num_requested;
        if (PAPI_event_name_to_code(name, &state.codes[k]) != PAPI_OK)
            return error_format(err, err_len, "--papi-events: PAPI does not know the event '%s' "
                                "(papi_avail lists the events)", name);
        snprintf(state.names[k], sizeof state.names[k], "%s", name);
        state.num_requested++;
    }
    if (state.num_requested == 0) return error_format(err, err_len, "--papi-events names no event");
    char missing[sizeof list] = "";
    for (int k = 0; k < state.num_requested; k++) {
        if (PAPI_query_event(state.codes[k]) == PAPI_OK) *available |= 1u << k;
        else snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? ", " : "", state.names[k]);
    }
    if (*available == 0)
        snprintf(note, note_len, "PAPI cannot count on this machine (%s; see /proc/sys/kernel/perf_event_paranoid "
                 "and the container's perf_event access): training goes on without counters", disabled_reason());
    else if (missing[0])
        snprintf(note, note_len, "PAPI: this machine cannot count %s; counting the other events", missing);
    return 0;
}

int papi_phases_start(unsigned mask, char *note, size_t note_len) {
    note[0] = '\0';
    state.num_events = 0;
    if (mask == 0) return 0;
    int rc = PAPI_create_eventset(&state.event_set);
    for (int k = 0; rc == PAPI_OK && k < state.num_requested; k++) {
        if (!(mask & (1u << k))) continue;
        rc = PAPI_add_event(state.event_set, state.codes[k]);
        if (rc == PAPI_OK) state.event_of[state.num_events++] = k;
    }
    if (rc == PAPI_OK) rc = PAPI_start(state.event_set);
    if (rc != PAPI_OK) {
        snprintf(note, note_len, "PAPI cannot count on this machine (starting %d events: %s): training goes on "
                 "without counters", state.num_events, PAPI_strerror(rc));
        papi_phases_close();
        return 0;
    }
    memset(state.counts, 0, sizeof state.counts);
    state.current = PHASE_OTHER;
    state.counting = 1;
    return state.num_events;
}

int papi_phases_num_events(void) { return state.counting ? state.num_events : 0; }

const char *papi_phases_event_name(int event) { return state.names[state.event_of[event]]; }

run_phase papi_phases_enter(run_phase phase) {
    run_phase left = state.current;
    if (!state.counting || phase == left) return left;
    /* PAPI_accum adds the counters to the phase being left and zeroes them */
    int rc = PAPI_accum(state.event_set, state.counts[left]);
    CHECK(rc == PAPI_OK, "PAPI_accum failed: %s", PAPI_strerror(rc));
    state.current = phase;
    return left;
}

void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]) {
    if (state.counting) {
        int rc = PAPI_accum(state.event_set, state.counts[state.current]);
        CHECK(rc == PAPI_OK, "PAPI_accum failed: %s", PAPI_strerror(rc));
    }
    memcpy(counts, state.counts, sizeof(long long) * PHASE_COUNT * PAPI_PHASES_MAX_EVENTS);
    memset(state.counts, 0, sizeof state.counts);
}

void papi_phases_close(void) {
    long long ignored[PAPI_PHASES_MAX_EVENTS];
    if (state.counting) PAPI_stop(state.event_set, ignored);
    if (state.event_set != PAPI_NULL) {
        PAPI_cleanup_eventset(state.event_set);
        PAPI_destroy_eventset(&state.event_set);
    }
    state.counting = 0;
    state.num_events = 0;
}

#else

int papi_phases_open(const char *events, unsigned *available, char *note, size_t note_len,
                     char *err, size_t err_len) {
    (void)events;
    (void)note_len;
    *available = 0;
    note[0] = '\0';
    return error_format(err, err_len, "--papi-events: this build has no PAPI (configure did not find papi.h and "
                        "libpapi: install libpapi-dev and reconfigure)");
}

int papi_phases_start(unsigned mask, char *note, size_t note_len) {
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

void papi_phases_take(long long counts[PHASE_COUNT * PAPI_PHASES_MAX_EVENTS]) {
    memset(counts, 0, sizeof(long long) * PHASE_COUNT * PAPI_PHASES_MAX_EVENTS);
}

void papi_phases_close(void) {}

#endif
