/* process_start.c: see process_start.h. The kernel keeps a process's start as clock ticks since
 * boot (field 22 of /proc/self/stat); the time since then is CLOCK_BOOTTIME now less that, so
 * the start in wall-clock time is now less the process's age. */
#include "app/core/process_start.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

double wall_clock_now(void) {
    struct timeval now;
    gettimeofday(&now, NULL);
    return (double)now.tv_sec + 1e-6 * (double)now.tv_usec;
}

/* the process's age in seconds from /proc; -1 where it cannot be read */
static double process_age(void) {
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    char line[1024];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* the command name (field 2) is in parentheses and may hold spaces: count from its end */
    char *p = strrchr(line, ')');
    if (!p) return -1;
    unsigned long long start_ticks = 0;
    int field = 2;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field == 22) {
            if (sscanf(tok, "%llu", &start_ticks) != 1) return -1;
            break;
        }
    }
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec boot;
    if (field != 22 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return -1;
    double age = (double)boot.tv_sec + 1e-9 * (double)boot.tv_nsec - (double)start_ticks / (double)hz;
    return age >= 0 ? age : -1;
}

double process_start_time(void) {
    static double start = 0;
    if (start == 0) {
        double now = wall_clock_now(), age = process_age();
        start = age >= 0 ? now - age : now;
    }
    return start;
}
