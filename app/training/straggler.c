/* straggler.c: the straggler report (--log-straggler): per-rank section times on the host
 * clock, gathered to rank 0 at every logged iteration, the slowest and fastest ranks named with
 * their host and device and their time relative to the median (see straggler.h). */
#include "app/training/straggler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/core/error.h"
#include "app/parallel/timeout.h"

/* what one rank sends at a report: its sections' milliseconds per iteration */
typedef struct rank_times {
    double ms[STRAGGLER_SECTIONS];
} rank_times;

static const char *const section_json_names[STRAGGLER_SECTIONS] = {
    "forward_backward_ms", "optimizer_ms", "step_ms", "communication_ms", "compute_ms"};

void straggler_setup(straggler_detector *s, int log_straggler, int disable_on_startup, int minmax_count,
                     const char *device_label, MPI_Comm world) {
    memset(s, 0, sizeof *s);
    if (!log_straggler) return;
    s->world = world;
    CHECK_MPI(MPI_Comm_rank(world, &s->world_rank));
    CHECK_MPI(MPI_Comm_size(world, &s->world_size));
    s->minmax_count = minmax_count > 1 ? minmax_count : 1; /* Megatron's mmcnt */
    snprintf(s->device, sizeof s->device, "%s", device_label);
    if (disable_on_startup) {
        /* Megatron starts it off and turns it on from its HTTP controller (--straggler-ctrlr-port),
         * which is not built here: off stays off */
        if (s->world_rank == 0)
            printf("> straggler report disabled on startup (--disable-straggler-on-startup); the controller that "
                   "would turn it on (--straggler-ctrlr-port) is not built here, so it stays off\n");
        return;
    }
    s->enabled = 1;
    /* the hosts once: every rank's processor name to rank 0 */
    char host[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    memset(host, 0, sizeof host);
    CHECK_MPI(MPI_Get_processor_name(host, &length));
    if (s->world_rank == 0) {
        s->hosts = calloc((size_t)s->world_size, sizeof *s->hosts);
        CHECK(s->hosts, "out of host memory for %d host names", s->world_size);
    }
    MPI_Request request;
    CHECK_MPI(MPI_Igather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, s->hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
                          world, &request));
    comm_timed_wait(&request, "gather (straggler report hosts)", "world", world);
}

void straggler_free(straggler_detector *s) {
    free(s->hosts);
    free(s->json);
    s->hosts = NULL;
    s->json = NULL;
}

void straggler_start(straggler_detector *s, straggler_section section) {
    if (!s->enabled) return;
    s->started[section] = MPI_Wtime();
    if (section == STRAGGLER_STEP) s->waited_at_step_start = comm_waited_seconds();
}

void straggler_stop(straggler_detector *s, straggler_section section) {
    if (!s->enabled || s->started[section] == 0) return;
    s->seconds[section] += MPI_Wtime() - s->started[section];
    s->started[section] = 0;
    if (section == STRAGGLER_STEP) s->seconds[STRAGGLER_COMMUNICATION] += comm_waited_seconds() - s->waited_at_step_start;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* rank order by compute time, the fastest first (ties: the lower rank first) */
static const rank_times *sort_times;
static int compare_rank(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    double tx = sort_times[x].ms[STRAGGLER_COMPUTE], ty = sort_times[y].ms[STRAGGLER_COMPUTE];
    if (tx != ty) return (tx > ty) - (tx < ty);
    return (x > y) - (x < y);
}

/* one rank's JSON object, appended at json[*used] */
static void append_rank_json(char *json, size_t size, size_t *used, const straggler_detector *s,
                             const rank_times *t, int rank, double median_ms, const char *device) {
    char host[MPI_MAX_PROCESSOR_NAME];
    size_t h = 0;
    for (const char *c = s->hosts[rank]; *c && h + 1 < sizeof host; c++)
        if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20) host[h++] = *c; /* JSON-safe */
    host[h] = 0;
    *used += (size_t)snprintf(json + *used, size - *used, "{\"rank\": %d, \"host\": \"%s\", \"device\": \"%s\", ",
                              rank, host, device);
    for (int k = 0; k < STRAGGLER_SECTIONS; k++)
        *used += (size_t)snprintf(json + *used, size - *used, "\"%s\": %.4f, ", section_json_names[k], t->ms[k]);
    *used += (size_t)snprintf(json + *used, size - *used, "\"relative_to_median\": %.4f}",
                              median_ms > 0 ? t->ms[STRAGGLER_COMPUTE] / median_ms : 1.0);
}

/* rank 0: print the report of times[world_size] and keep its JSON */
static void print_report(straggler_detector *s, const rank_times *times, const char (*devices)[32],
                         double flops_per_iteration) {
    int n = s->world_size;
    int *order = malloc((size_t)n * sizeof *order);
    double *sorted = malloc((size_t)n * sizeof *sorted);
    CHECK(order && sorted, "out of host memory for the straggler report of %d ranks", n);
    for (int r = 0; r < n; r++) {
        order[r] = r;
        sorted[r] = times[r].ms[STRAGGLER_COMPUTE];
    }
    sort_times = times;
    qsort(order, (size_t)n, sizeof *order, compare_rank);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_double);
    double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    /* Megatron's estimated throughput of a rank: the iteration's FLOPs over the world, per the
     * rank's timed milliseconds (TF/s); its amp of 3 makes up for timing the forward only, and
     * the time here is the whole step's compute, so none */
    double tflops_min = 0, tflops_max = 0;
    int rank_tflops_min = order[n - 1], rank_tflops_max = order[0];
    if (times[rank_tflops_min].ms[STRAGGLER_COMPUTE] > 0)
        tflops_min = flops_per_iteration / (times[rank_tflops_min].ms[STRAGGLER_COMPUTE] * 1e9 * n);
    if (times[rank_tflops_max].ms[STRAGGLER_COMPUTE] > 0)
        tflops_max = flops_per_iteration / (times[rank_tflops_max].ms[STRAGGLER_COMPUTE] * 1e9 * n);
    char now[32];
    time_t clock = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S", localtime(&clock));
    printf("[%s] | MnRtt/Rnk: %.2fms/%d | MxRtt/Rnk: %.2fms/%d | MnEtpt/Rnk: %.2fTF/%d | MxEtpt/Rnk: %.2fTF/%d\n",
           now, times[order[0]].ms[STRAGGLER_COMPUTE], order[0],
           times[order[n - 1]].ms[STRAGGLER_COMPUTE], order[n - 1], tflops_min, rank_tflops_min, tflops_max,
           rank_tflops_max);
    int count = s->minmax_count < n ? s->minmax_count : n;
    if (s->minmax_count > 1 && s->minmax_count < n) {
        /* Megatron's lines: the ranks of lowest and highest estimated throughput, ascending */
        printf("^^^^ Bottom %d Ranks with lowest  Etpt(TF):", count);
        for (int i = 0; i < count; i++) {
            int r = order[n - 1 - i];
            double ms = times[r].ms[STRAGGLER_COMPUTE];
            printf(" %.2f/%d,", ms > 0 ? flops_per_iteration / (ms * 1e9 * n) : 0.0, r);
        }
        printf("\n^^^^ Top    %d Ranks with highest Etpt(TF):", count);
        for (int i = count - 1; i >= 0; i--) {
            int r = order[i];
            double ms = times[r].ms[STRAGGLER_COMPUTE];
            printf(" %.2f/%d,", ms > 0 ? flops_per_iteration / (ms * 1e9 * n) : 0.0, r);
        }
        printf("\n");
    }
    printf(" straggler report: compute time per iteration (step less MPI waits), median %.2f ms over %d ranks\n", median, n);
    size_t size = 256 + 2 * (size_t)count * (MPI_MAX_PROCESSOR_NAME + 320), used = 0;
    free(s->json);
    s->json = malloc(size);
    CHECK(s->json, "out of host memory for the straggler report's JSON");
    used += (size_t)snprintf(s->json + used, size - used,
                             "\"stragglers\": {\"ranked_by\": \"compute_ms\", \"median_ms\": %.4f, "
                             "\"ranks\": %d, \"slowest\": [", median, n);
    for (int side = 0; side < 2; side++) {
        const char *what = side == 0 ? "slowest" : "fastest";
        if (side == 1) used += (size_t)snprintf(s->json + used, size - used, "], \"fastest\": [");
        for (int i = 0; i < count; i++) {
            int r = side == 0 ? order[n - 1 - i] : order[i];
            const double *ms = times[r].ms;
            printf("   %s %d: rank %d (host %s, device %s): %.2f ms, %.2fx the median | step %.2f ms | "
                   "forward-backward %.2f ms | optimizer %.2f ms | communication %.2f ms\n",
                   what, i + 1, r, s->hosts[r], devices[r], ms[STRAGGLER_COMPUTE],
                   median > 0 ? ms[STRAGGLER_COMPUTE] / median : 1.0, ms[STRAGGLER_STEP],
                   ms[STRAGGLER_FORWARD_BACKWARD], ms[STRAGGLER_OPTIMIZER], ms[STRAGGLER_COMMUNICATION]);
            if (i) used += (size_t)snprintf(s->json + used, size - used, ", ");
            append_rank_json(s->json, size, &used, s, &times[r], r, median, devices[r]);
        }
    }
    snprintf(s->json + used, size - used, "]}, ");
    fflush(stdout);
    free(order);
    free(sorted);
}

void straggler_report(straggler_detector *s, double iterations, double flops_per_iteration) {
    if (!s->enabled) return;
    rank_times mine;
    for (int k = 0; k < STRAGGLER_SECTIONS; k++) {
        mine.ms[k] = iterations > 0 ? 1000.0 * s->seconds[k] / iterations : 0.0;
        s->seconds[k] = 0;
    }
    mine.ms[STRAGGLER_COMPUTE] = mine.ms[STRAGGLER_STEP] - mine.ms[STRAGGLER_COMMUNICATION];
    /* the device labels travel with the times (a few bytes a rank) */
    struct {
        rank_times times;
        char device[32];
    } sent, *received = NULL;
    memset(&sent, 0, sizeof sent);
    sent.times = mine;
    snprintf(sent.device, sizeof sent.device, "%s", s->device);
    if (s->world_rank == 0) {
        received = calloc((size_t)s->world_size, sizeof *received);
        CHECK(received, "out of host memory for the straggler report of %d ranks", s->world_size);
    }
    MPI_Request request;
    CHECK_MPI(MPI_Igather(&sent, (int)sizeof sent, MPI_BYTE, received, (int)sizeof sent, MPI_BYTE, 0, s->world,
                          &request));
    comm_timed_wait(&request, "gather (straggler report)", "world", s->world);
    if (s->world_rank != 0) return;
    rank_times *times = malloc((size_t)s->world_size * sizeof *times);
    char(*devices)[32] = malloc((size_t)s->world_size * sizeof *devices);
    CHECK(times && devices, "out of host memory for the straggler report of %d ranks", s->world_size);
    for (int r = 0; r < s->world_size; r++) {
        times[r] = received[r].times;
        memcpy(devices[r], received[r].device, sizeof devices[r]);
    }
    print_report(s, times, (const char(*)[32])devices, flops_per_iteration);
    free(times);
    free(devices);
    free(received);
}

void straggler_fault_slow_rank(int world_rank) {
    const char *spec = getenv("MTC_FAULT_SLOW_RANK");
    if (!spec || !*spec) return;
    int rank, used = 0;
    long ms;
    if (sscanf(spec, "%d:%ld%n", &rank, &ms, &used) != 2 || spec[used] || ms < 0)
        user_error("MTC_FAULT_SLOW_RANK=%s: expected RANK:MILLISECONDS", spec);
    if (rank == world_rank && ms > 0) nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
}
