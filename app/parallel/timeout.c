/* timeout.c: see timeout.h. The probe protocol: a rank whose wait timed out sends an empty
 * TAG_PROBE message to every other member of the group (world ranks, on probe_comm) and posts
 * a receive of a TAG_ANSWER text from each; any rank that is itself polling a request answers
 * with "waiting S s in OPERATION on group GROUP". A member that gives no answer within the grace
 * period is not inside MPI: stopped, dead, or computing without end. Nothing here waits on a
 * member without a deadline, so the report itself cannot hang. */
#include "app/parallel/timeout.h"
#include "app/core/error.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_PROBE = 7001, TAG_ANSWER = 7002, ANSWER_MAX = 160, ANSWER_SLOTS = 64, LISTED_MAX = 16 };

static double timeout_seconds = 600.0;
static double heartbeat_seconds;
static MPI_Comm probe_comm = MPI_COMM_NULL;

/* answers in flight (a send buffer must live until the send completes) */
static char answers[ANSWER_SLOTS][ANSWER_MAX];
static MPI_Request answer_requests[ANSWER_SLOTS];

void comm_timeout_init(double timeout, double heartbeat) {
    timeout_seconds = timeout;
    heartbeat_seconds = heartbeat;
    for (int i = 0; i < ANSWER_SLOTS; i++) answer_requests[i] = MPI_REQUEST_NULL;
    if (probe_comm == MPI_COMM_NULL) CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm));
}

void comm_timeout_finalize(void) {
    for (int i = 0; i < ANSWER_SLOTS; i++)
        if (answer_requests[i] != MPI_REQUEST_NULL) MPI_Request_free(&answer_requests[i]);
    if (probe_comm != MPI_COMM_NULL) MPI_Comm_free(&probe_comm);
    probe_comm = MPI_COMM_NULL;
}

double comm_timeout_seconds(void) { return timeout_seconds; }

/* seconds this process has spent blocked in comm_timed_wait (the straggler report's
 * communication time: what a rank waits for the others) */
static double waited_total;
double comm_waited_seconds(void) { return waited_total; }

static int world_rank(void) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    return rank;
}

/* answer every probe waiting for this rank: where it waits and for how long */
static void answer_probes(const char *operation, const char *group_name, double waited) {
    if (probe_comm == MPI_COMM_NULL) return;
    for (;;) {
        int pending = 0;
        MPI_Status status;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROBE, probe_comm, &pending, &status));
        if (!pending) return;
        int empty;
        CHECK_MPI(MPI_Recv(&empty, 1, MPI_INT, status.MPI_SOURCE, TAG_PROBE, probe_comm, MPI_STATUS_IGNORE));
        int slot = 0, free_slot = 0;
        for (; slot < ANSWER_SLOTS && !free_slot; slot++) {
            if (answer_requests[slot] != MPI_REQUEST_NULL)
                CHECK_MPI(MPI_Test(&answer_requests[slot], &free_slot, MPI_STATUS_IGNORE));
            else
                free_slot = 1;
        }
        if (!free_slot) continue; /* 64 answers still in flight: this prober goes without */
        slot--;
        snprintf(answers[slot], ANSWER_MAX, "waiting %.1f s in %s on group %s", waited, operation, group_name);
        CHECK_MPI(MPI_Isend(answers[slot], ANSWER_MAX, MPI_CHAR, status.MPI_SOURCE, TAG_ANSWER, probe_comm,
                            &answer_requests[slot]));
    }
}

/* append "rank R" entries of a list, at most LISTED_MAX of them */
static void append(char *text, size_t size, const char *fmt, int value) {
    size_t used = strlen(text);
    if (used < size) snprintf(text + used, size - used, fmt, value);
}

/* the wait on `comm` has timed out: probe its members, then end the job with the report */
static void report_timeout(const char *operation, const char *group_name, MPI_Comm comm, double waited) {
    int size, rank;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    int *members = malloc(sizeof(int) * (size_t)size * 2);
    MPI_Request *requests = malloc(sizeof(MPI_Request) * (size_t)size * 2);
    char (*replies)[ANSWER_MAX] = calloc((size_t)size, ANSWER_MAX);
    int *answered = calloc((size_t)size, sizeof(int));
    CHECK(members && requests && replies && answered, "out of host memory for a timeout report");
    MPI_Group group, world_group;
    CHECK_MPI(MPI_Comm_group(comm, &group));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    for (int m = 0; m < size; m++) members[size + m] = m;
    CHECK_MPI(MPI_Group_translate_ranks(group, size, members + size, world_group, members));
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);

    /* probe the others, then poll their answers for a grace period */
    static const int empty = 0;
    /* waiting ranks answer within 10 ms; the grace covers a loaded machine and stays a small
     * part of the timeout */
    double grace = 0.01 * timeout_seconds;
    grace = grace < 0.1 ? 0.1 : grace > 2.0 ? 2.0 : grace;
    for (int m = 0; m < size; m++) {
        requests[m] = requests[size + m] = MPI_REQUEST_NULL;
        if (m == rank || probe_comm == MPI_COMM_NULL) continue;
        CHECK_MPI(MPI_Isend(&empty, 1, MPI_INT, members[m], TAG_PROBE, probe_comm, &requests[size + m]));
        CHECK_MPI(MPI_Irecv(replies[m], ANSWER_MAX, MPI_CHAR, members[m], TAG_ANSWER, probe_comm, &requests[m]));
    }
    double until = MPI_Wtime() + (probe_comm == MPI_COMM_NULL ? 0.0 : grace);
    int outstanding;
    do {
        outstanding = 0;
        for (int m = 0; m < size; m++) {
            if (requests[m] == MPI_REQUEST_NULL) continue;
            CHECK_MPI(MPI_Test(&requests[m], &answered[m], MPI_STATUS_IGNORE));
            outstanding += !answered[m];
        }
        answer_probes(operation, group_name, waited);
        sched_yield();
    } while (outstanding && MPI_Wtime() < until);

    /* the members that are not waiting in this operation: no answer, or waiting elsewhere */
    char silent[512] = "", elsewhere[1024] = "";
    int num_silent = 0, num_elsewhere = 0;
    char same[ANSWER_MAX];
    int same_length = snprintf(same, sizeof same, " in %s on group %s", operation, group_name);
    for (int m = 0; m < size; m++) {
        if (m == rank) continue;
        if (!answered[m]) {
            if (num_silent++ < LISTED_MAX) append(silent, sizeof silent, num_silent > 1 ? ", %d" : "%d", members[m]);
            continue;
        }
        replies[m][ANSWER_MAX - 1] = '\0';
        size_t length = strlen(replies[m]);
        if (length >= (size_t)same_length && !strcmp(replies[m] + length - (size_t)same_length, same)) continue;
        if (num_elsewhere++ < LISTED_MAX) {
            size_t used = strlen(elsewhere);
            snprintf(elsewhere + used, sizeof elsewhere - used, "%srank %d is %s", num_elsewhere > 1 ? "; " : "",
                     members[m], replies[m]);
        }
    }
    if (num_silent > LISTED_MAX) append(silent, sizeof silent, " and %d more", num_silent - LISTED_MAX);
    char absent[2048];
    if (probe_comm == MPI_COMM_NULL)
        snprintf(absent, sizeof absent, "(the absent ranks are not known: the timeout was not set up)");
    else if (!num_silent && !num_elsewhere)
        snprintf(absent, sizeof absent, "every member answered from inside it (an MPI or network fault?)");
    else
        snprintf(absent, sizeof absent, "ranks that did not arrive: %s%s%s%s%s", silent,
                 num_silent ? " (no answer: stopped, dead, or computing without end)" : "",
                 num_silent && num_elsewhere ? "; " : "", elsewhere, num_elsewhere > LISTED_MAX ? "; ..." : "");
    /* the job ends here: the requests and buffers above go with it */
    FATAL("%s on group %s (%d ranks) did not complete within --distributed-timeout-minutes %g (waited %.1f s); %s",
          operation, group_name, size, timeout_seconds / 60.0, waited, absent);
}

void comm_timed_wait(MPI_Request *request, const char *operation, const char *group_name, MPI_Comm comm) {
    int done = 0;
    CHECK_MPI(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    double start = MPI_Wtime(), next_probe_check = start;
    double next_heartbeat = start + heartbeat_seconds;
    for (;;) {
        CHECK_MPI(MPI_Test(request, &done, MPI_STATUS_IGNORE));
        if (done) {
            waited_total += MPI_Wtime() - start;
            return;
        }
        double now = MPI_Wtime(), waited = now - start;
        if (now >= next_probe_check) {
            answer_probes(operation, group_name, waited);
            next_probe_check = now + 0.01;
        }
        if (timeout_seconds > 0 && waited > timeout_seconds) report_timeout(operation, group_name, comm, waited);
        if (heartbeat_seconds > 0 && now >= next_heartbeat) {
            fprintf(stderr, "[rank %d] heartbeat: waiting %.0f s in %s on group %s\n", world_rank(), waited,
                    operation, group_name);
            fflush(stderr);
            next_heartbeat += heartbeat_seconds;
        }
        /* a wait longer than a millisecond lets other processes have the core */
        if (waited > 1e-3) sched_yield();
    }
}
