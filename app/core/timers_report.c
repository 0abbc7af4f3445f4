/* timers_report.c: see timers_report.h. The text follows megatron/core/timers.py:
 * _get_global_min_max_time_string ('{}: ({:.2f}, {:.2f})'.format((name + ' ').ljust(48, '.'), ...))
 * and _get_all_ranks_time_string ('\n  {}:' then '\n     rank {:2d}: {:.2f}'). */
#include "app/core/timers_report.h"
#include "app/core/error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int timers_log_option_from_name(const char *name) {
    if (!strcmp(name, "max")) return TIMERS_LOG_MAX;
    if (!strcmp(name, "minmax")) return TIMERS_LOG_MINMAX;
    if (!strcmp(name, "all")) return TIMERS_LOG_ALL;
    return -1;
}

void timers_table_gather(timers_table *table, const char *const *names, int num_names, int reset, MPI_Comm comm,
                         request_waiter waiter) {
    CHECK(num_names >= 0 && num_names <= TIMERS_MAX, "timers_table_gather: %d names (at most %d)", num_names, TIMERS_MAX);
    int rank, ranks;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    CHECK_MPI(MPI_Comm_size(comm, &ranks));
    table->num_names = num_names;
    table->num_ranks = ranks;
    table->seconds = calloc((size_t)ranks * (size_t)(num_names ? num_names : 1), sizeof(double));
    CHECK(table->seconds, "out of host memory for %d timers of %d ranks", num_names, ranks);
    for (int i = 0; i < num_names; i++) {
        table->names[i] = names[i];
        table->seconds[(size_t)rank * num_names + i] = timers_elapsed(names[i], reset);
    }
    if (num_names > 0) {
        MPI_Request request;
        CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, table->seconds, num_names, MPI_DOUBLE, comm, &request));
        request_wait(waiter, &request, "all-gather (timers)", "world", comm);
    }
}

void timers_table_free(timers_table *table) {
    free(table->seconds);
    table->seconds = NULL;
    table->num_names = 0;
}

int timers_table_min_max(const timers_table *table, int name, double normalizer, double *min, double *max) {
    int found = 0;
    for (int r = 0; r < table->num_ranks; r++) {
        double v = table->seconds[(size_t)r * table->num_names + name];
        if (!(v > 0.0)) continue;
        if (!found || v < *min) *min = v;
        if (!found || v > *max) *max = v;
        found = 1;
    }
    if (found) {
        *min /= normalizer;
        *max /= normalizer;
    }
    return found;
}

/* append to out[len] at *used, truncating */
static void append(char *out, size_t len, size_t *used, const char *fmt, ...) {
    if (*used >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
}

/* Python's (name + ' ').ljust(48, '.') */
static void dotted(char *label, size_t len, const char *name) {
    snprintf(label, len, "%s ", name);
    size_t used = strlen(label);
    while (used < 48 && used + 1 < len) label[used++] = '.';
    label[used] = '\0';
}

size_t timers_table_format(const timers_table *table, timers_log_option option, double normalizer, char *out,
                           size_t len) {
    size_t used = 0;
    int reported = 0;
    double ms = normalizer / 1000.0;
    if (len) out[0] = '\0';
    if (option == TIMERS_LOG_ALL) {
        append(out, len, &used, "times across ranks (ms):");
        for (int i = 0; i < table->num_names; i++) {
            int named = 0;
            for (int r = 0; r < table->num_ranks; r++) {
                double v = table->seconds[(size_t)r * table->num_names + i];
                if (!(v > 0.0)) continue;
                if (!named) append(out, len, &used, "\n  %s:", table->names[i]);
                named = reported = 1;
                append(out, len, &used, "\n     rank %2d: %.2f", r, v / ms);
            }
        }
    } else {
        append(out, len, &used, option == TIMERS_LOG_MAX ? "max time across ranks (ms):" : "(min, max) time across ranks (ms):");
        for (int i = 0; i < table->num_names; i++) {
            double min, max;
            if (!timers_table_min_max(table, i, ms, &min, &max)) continue;
            char label[TIMERS_NAME_MAX + 64];
            dotted(label, sizeof label, table->names[i]);
            if (option == TIMERS_LOG_MAX) append(out, len, &used, "\n    %s: %.2f", label, max);
            else append(out, len, &used, "\n    %s: (%.2f, %.2f)", label, min, max);
            reported = 1;
        }
    }
    if (!reported) {
        if (len) out[0] = '\0';
        return 0;
    }
    return used;
}

void timers_table_write_json(FILE *out, const timers_table *table, double normalizer, int per_rank) {
    double ms = normalizer / 1000.0;
    int written = 0;
    for (int i = 0; i < table->num_names; i++) {
        double min, max;
        if (!timers_table_min_max(table, i, ms, &min, &max)) continue;
        fprintf(out, "%s\"%s\": {\"min\": %.6f, \"max\": %.6f", written ? ", " : "\"timers_ms\": {", table->names[i], min, max);
        if (per_rank) {
            fprintf(out, ", \"ranks\": [");
            for (int r = 0; r < table->num_ranks; r++)
                fprintf(out, "%s%.6f", r ? ", " : "", table->seconds[(size_t)r * table->num_names + i] / ms);
            fprintf(out, "]");
        }
        fprintf(out, "}");
        written = 1;
    }
    if (written) fprintf(out, "}, ");
}
