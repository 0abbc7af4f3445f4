/* numpy_random_test.c: prints draws of app/data/numpy_random.h for tests/unit/numpy_random_test.sh,
 * which compares them with numpy's own RandomState (python3-numpy):
 *   numpy_random_test raw SEED N          N tempered 32-bit outputs after RandomState(SEED)
 *   numpy_random_test interval SEED MAX N N draws of random_interval(MAX) (64-bit MAX too)
 *   numpy_random_test shuffle SEED N      RandomState(SEED).shuffle(arange(N))
 *   numpy_random_test random SEED N       N RandomState.random() doubles (%.17g)
 *   numpy_random_test randint SEED LOW HIGH N   N RandomState.randint(LOW, HIGH)
 *   numpy_random_test geometric SEED P N  N RandomState.geometric(P) (T5's span lengths)
 *   numpy_random_test mt64 SEED N         N outputs of std::mt19937_64(SEED) (bert_dataset.h) */
#include "app/data/bert_dataset.h"
#include "app/data/numpy_random.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: numpy_random_test raw|interval|shuffle SEED ...\n");
        return 2;
    }
    numpy_random_state s;
    numpy_random_seed(&s, (uint32_t)strtoul(argv[2], NULL, 10));
    if (!strcmp(argv[1], "raw")) {
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++) printf("%" PRIu32 "\n", numpy_random_next32(&s));
    } else if (!strcmp(argv[1], "interval") && argc == 5) {
        uint64_t max = strtoull(argv[3], NULL, 10);
        long n = atol(argv[4]);
        for (long i = 0; i < n; i++) printf("%" PRIu64 "\n", numpy_random_interval(&s, max));
    } else if (!strcmp(argv[1], "shuffle")) {
        int64_t n = atoll(argv[3]);
        int64_t *a = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
        if (!a) return 1;
        for (int64_t i = 0; i < n; i++) a[i] = i;
        numpy_random_shuffle(&s, a, n);
        for (int64_t i = 0; i < n; i++) printf("%" PRId64 "\n", a[i]);
        free(a);
    } else if (!strcmp(argv[1], "random")) {
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++) printf("%.17g\n", numpy_random_double(&s));
    } else if (!strcmp(argv[1], "randint") && argc == 6) {
        int64_t low = atoll(argv[3]), high = atoll(argv[4]);
        long n = atol(argv[5]);
        for (long i = 0; i < n; i++) printf("%" PRId64 "\n", numpy_random_randint(&s, low, high));
    } else if (!strcmp(argv[1], "geometric") && argc == 5) {
        double p = atof(argv[3]);
        long n = atol(argv[4]);
        for (long i = 0; i < n; i++) printf("%" PRId64 "\n", numpy_random_geometric(&s, p));
    } else if (!strcmp(argv[1], "mt64")) {
        mt19937_64 g;
        mt19937_64_seed(&g, strtoull(argv[2], NULL, 10));
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++) printf("%" PRIu64 "\n", mt19937_64_next(&g));
    } else {
        fprintf(stderr, "numpy_random_test: unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
