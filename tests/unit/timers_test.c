/* timers_test.c: Megatron's phase timers (app/core/timers.h) and their report
 * (app/core/timers_report.h): a timer above the log level does nothing (no device
 * synchronization: the level-0 path costs nothing), an enabled one synchronizes at start and
 * stop and adds up its intervals, reading with reset starts again; min/max over ranks leaves out
 * ranks with no time and timers no rank ran; the text of --timing-log-option max, minmax and all
 * is Megatron's, character for character (expected strings written from timers.py's format
 * calls); the metrics JSON; the gather over one MPI rank. */
#include "app/core/timers.h"
#include "app/core/timers_report.h"
#include "tests/tap.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int synchronized;
static void count_synchronize(void) { synchronized++; }

static void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_levels(void) {
    timers_configure(0, 1, count_synchronize, NULL);
    synchronized = 0;
    timers_start("forward-backward", 1);
    timers_start("forward-compute", 2);
    timers_stop("forward-compute");
    timers_stop("forward-backward");
    tap_ok(synchronized == 0 && timers_elapsed("forward-backward", 1) == 0.0,
           "level 0: timers do nothing (device synchronized %d times, want 0)", synchronized);

    timers_configure(1, 1, count_synchronize, NULL);
    synchronized = 0;
    timers_start("forward-backward", 1);
    timers_start("forward-compute", 2);
    sleep_ms(3);
    timers_stop("forward-compute");
    timers_stop("forward-backward");
    tap_ok(synchronized == 2, "level 1: a level-1 timer synchronizes at start and stop, a level-2 one not at all (%d)",
           synchronized);
    double fb = timers_elapsed("forward-backward", 0);
    tap_ok(fb >= 0.0025 && fb < 1.0, "level 1: forward-backward measured the 3 ms sleep (%.4f s)", fb);
    tap_ok(timers_elapsed("forward-compute", 0) == 0.0, "level 1: the level-2 timer has no time");
    timers_start("forward-backward", 1);
    sleep_ms(2);
    timers_stop("forward-backward");
    double sum = timers_elapsed("forward-backward", 1);
    tap_ok(sum >= fb + 0.0015, "two start/stop pairs add up (%.4f after %.4f)", sum, fb);
    tap_ok(timers_elapsed("forward-backward", 0) == 0.0, "reading with reset starts again from 0");

    timers_configure(2, 0, NULL, NULL);
    timers_start("backward-compute", 2);
    sleep_ms(2);
    double running = timers_elapsed("backward-compute", 1);
    sleep_ms(2);
    timers_stop("backward-compute");
    double after = timers_elapsed("backward-compute", 1);
    tap_ok(running >= 0.0015 && after >= 0.0015 && after < 1.0,
           "a running timer is read up to now and keeps running from there (%.4f then %.4f)", running, after);
    tap_ok(timers_log_level() == 2, "the configured level is 2");
}

static timers_table example(double *seconds) {
    /* 3 ranks x 3 timers (seconds over 2 iterations): forward-backward on every rank,
     * all-grads-sync on ranks 0 and 2 only, optimizer-count-zeros on none */
    static const double values[9] = {0.0246, 0.0040, 0.0, 0.0250, 0.0, 0.0, 0.0244, 0.0062, 0.0};
    memcpy(seconds, values, sizeof values);
    timers_table t = {.num_names = 3, .num_ranks = 3, .seconds = seconds};
    t.names[0] = "forward-backward";
    t.names[1] = "all-grads-sync";
    t.names[2] = "optimizer-count-zeros";
    return t;
}

static void test_format(void) {
    double seconds[9];
    timers_table t = example(seconds);
    char out[2048];
    double min = -1, max = -1;
    int found = timers_table_min_max(&t, 1, 2.0, &min, &max);
    tap_ok(found && min == 0.0020 && max == 0.0031,
           "min/max skips a rank with no time and divides by the normalizer (%g, %g)", min, max);
    tap_ok(!timers_table_min_max(&t, 2, 2.0, &min, &max), "a timer no rank ran has no min/max");

    timers_table_format(&t, TIMERS_LOG_MINMAX, 2.0, out, sizeof out);
    const char *minmax = "(min, max) time across ranks (ms):\n"
                         "    forward-backward ...............................: (12.20, 12.50)\n"
                         "    all-grads-sync .................................: (2.00, 3.10)";
    tap_ok(!strcmp(out, minmax), "minmax text is Megatron's:\n%s", out);
    timers_table_format(&t, TIMERS_LOG_MAX, 2.0, out, sizeof out);
    const char *max_only = "max time across ranks (ms):\n"
                           "    forward-backward ...............................: 12.50\n"
                           "    all-grads-sync .................................: 3.10";
    tap_ok(!strcmp(out, max_only), "max text is Megatron's:\n%s", out);
    timers_table_format(&t, TIMERS_LOG_ALL, 2.0, out, sizeof out);
    const char *all = "times across ranks (ms):\n"
                      "  forward-backward:\n"
                      "     rank  0: 12.30\n"
                      "     rank  1: 12.50\n"
                      "     rank  2: 12.20\n"
                      "  all-grads-sync:\n"
                      "     rank  0: 2.00\n"
                      "     rank  2: 3.10";
    tap_ok(!strcmp(out, all), "all text is Megatron's:\n%s", out);

    char label_check[256];
    const char *long_name = "forward-backward-send-forward-backward-recv";
    double one = 0.001;
    timers_table single = {.num_names = 1, .num_ranks = 1, .seconds = &one};
    single.names[0] = long_name;
    timers_table_format(&single, TIMERS_LOG_MAX, 1.0, out, sizeof out);
    snprintf(label_check, sizeof label_check, "max time across ranks (ms):\n    %s ....: 1.00", long_name);
    tap_ok(!strcmp(out, label_check), "a 43-character name is padded with dots to 48 columns: '%s'", out);

    double zeros[2] = {0.0, 0.0};
    timers_table none = {.num_names = 2, .num_ranks = 1, .seconds = zeros};
    none.names[0] = "optimizer-copy-to-main-grad";
    none.names[1] = "optimizer-count-zeros";
    tap_ok(timers_table_format(&none, TIMERS_LOG_MINMAX, 1.0, out, sizeof out) == 0 && out[0] == '\0' &&
           timers_table_format(&none, TIMERS_LOG_ALL, 1.0, out, sizeof out) == 0,
           "no timer with a time: nothing to print (Megatron's None)");
    char tiny[40];
    size_t n = timers_table_format(&t, TIMERS_LOG_MINMAX, 2.0, tiny, sizeof tiny);
    tap_ok(n < sizeof tiny && strlen(tiny) == n, "a short buffer truncates safely (%zu characters)", n);

    char *json = NULL;
    size_t json_len = 0;
    FILE *mem = open_memstream(&json, &json_len);
    timers_table_write_json(mem, &t, 2.0, 0);
    fclose(mem);
    tap_ok(!strcmp(json, "\"timers_ms\": {\"forward-backward\": {\"min\": 12.200000, \"max\": 12.500000}, "
                         "\"all-grads-sync\": {\"min\": 2.000000, \"max\": 3.100000}}, "),
           "metrics JSON: %s", json);
    free(json);
    mem = open_memstream(&json, &json_len);
    timers_table_write_json(mem, &t, 2.0, 1);
    fclose(mem);
    tap_ok(strstr(json, "\"all-grads-sync\": {\"min\": 2.000000, \"max\": 3.100000, \"ranks\": [2.000000, 0.000000, 3.100000]}") != NULL,
           "metrics JSON with every rank: %s", json);
    free(json);
    mem = open_memstream(&json, &json_len);
    timers_table_write_json(mem, &none, 1.0, 0);
    fclose(mem);
    tap_ok(json_len == 0, "metrics JSON: nothing when no timer ran");
    free(json);

    tap_ok(timers_log_option_from_name("max") == TIMERS_LOG_MAX && timers_log_option_from_name("minmax") == TIMERS_LOG_MINMAX &&
           timers_log_option_from_name("all") == TIMERS_LOG_ALL && timers_log_option_from_name("foo") == -1,
           "log option names");
}

static void test_gather(void) {
    timers_configure(1, 1, NULL, NULL);
    timers_start("optimizer", 1);
    sleep_ms(2);
    timers_stop("optimizer");
    const char *names[2] = {"optimizer", "params-all-gather"};
    timers_table t;
    timers_table_gather(&t, names, 2, 1, MPI_COMM_WORLD, NULL);
    tap_ok(t.num_ranks == 1 && t.num_names == 2 && t.seconds[0] >= 0.0015 && t.seconds[1] == 0.0,
           "gather over one rank: optimizer %.4f s, the never-started params-all-gather 0", t.seconds[0]);
    timers_table_free(&t);
    tap_ok(timers_elapsed("optimizer", 0) == 0.0, "the gather reset the timers it read");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    test_levels();
    test_format();
    test_gather();
    int status = tap_done();
    MPI_Finalize();
    return status;
}
