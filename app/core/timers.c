/* timers.c: see timers.h. The registry is a small array searched by name: a training step
 * starts a few dozen timers, and at level 0 the array is empty. */
#include "app/core/timers.h"
#include "app/core/error.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct named_timer {
    char name[TIMERS_NAME_MAX];
    int log_level;
    int started;
    double start;     /* seconds, monotonic clock */
    double elapsed;   /* since the last reset */
} named_timer;

static named_timer registry[TIMERS_MAX];
static int registered;
static int enabled_level;
static int barrier_level_1;
static void (*synchronize_device)(void);
static request_waiter barrier_waiter;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static named_timer *find(const char *name) {
    for (int i = 0; i < registered; i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}

void timers_configure(int log_level, int barrier_with_level_1, void (*synchronize)(void), request_waiter waiter) {
    enabled_level = log_level;
    barrier_waiter = waiter;
    barrier_level_1 = barrier_with_level_1;
    synchronize_device = synchronize;
    registered = 0;
}

int timers_log_level(void) { return enabled_level; }

void timers_start(const char *name, int log_level) {
    if (log_level > enabled_level) return;
    named_timer *t = find(name);
    if (!t) {
        CHECK(registered < TIMERS_MAX && strlen(name) < TIMERS_NAME_MAX,
              "timer '%s': more than %d timers, or a name longer than %d characters", name, TIMERS_MAX,
              TIMERS_NAME_MAX - 1);
        t = &registry[registered++];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->log_level = log_level;
    }
    CHECK(t->log_level == log_level, "timer '%s': started with log level %d, created with %d", name, log_level,
          t->log_level);
    CHECK(!t->started, "timer '%s' has already been started", name);
    if (log_level == 1 && barrier_level_1) {
        MPI_Request request;
        CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &request));
        request_wait(barrier_waiter, &request, "barrier (level-1 timer)", "world", MPI_COMM_WORLD);
    }
    if (synchronize_device) synchronize_device();
    t->start = now();
    t->started = 1;
}

void timers_stop(const char *name) {
    if (enabled_level == 0) return;
    named_timer *t = find(name);
    if (!t) return;  /* a level above the enabled one: never created */
    CHECK(t->started, "timer '%s' is not started", name);
    if (synchronize_device) synchronize_device();
    t->elapsed += now() - t->start;
    t->started = 0;
}

double timers_elapsed(const char *name, int reset) {
    named_timer *t = find(name);
    if (!t) return 0.0;
    double elapsed = t->elapsed;
    if (t->started) {
        if (synchronize_device) synchronize_device();
        double moment = now();
        elapsed += moment - t->start;
        if (reset) t->start = moment;
    }
    if (reset) t->elapsed = 0.0;
    return elapsed;
}
