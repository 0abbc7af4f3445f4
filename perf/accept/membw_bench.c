/* membw_bench.c: host memory bandwidth, STREAM's triad (McCalpin: a[i] = b[i] + s*c[i] over
 * arrays much larger than the caches; 3 x 8 bytes counted per element, write-allocate traffic
 * not counted), the host-memory check of the cluster acceptance suite.
 *
 *   mpiexec -n R perf/accept/membw_bench [--mib-per-array M] [--repeat K]
 *
 * All ranks run the triad at the same time, one thread each (as training ranks share a node's
 * memory), K times; each rank's figure is its best time, as STREAM reports; the total is all
 * ranks' bytes over the slowest rank's time of the best repeat. The result is checked.
 * RESULT lines: membw_rank_gbs (minimum over ranks), membw_total_gbs, membw_wrong. */
#include "perf/accept/bench_common.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "membw_bench";
    kernels_set_error_handler(error_report_fatal);
    const char *value;
    int mib = 128, repeat = 10;
    for (int i = 1; i < argc; i++) {
        if (bench_flag(argc, argv, &i, "--mib-per-array", &value)) { mib = atoi(value); continue; }
        if (bench_flag(argc, argv, &i, "--repeat", &value)) { repeat = atoi(value); continue; }
        user_error("unknown argument '%s' (usage: membw_bench [--mib-per-array M] [--repeat K])", argv[i]);
    }
    if (mib < 1 || repeat < 1) user_error("--mib-per-array and --repeat must be at least 1");
    int rank, size, local_rank, nodes;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_placement(&local_rank, &nodes);
    size_t n = (size_t)mib * (1 << 20) / sizeof(double);
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
    CHECK(a && b && c, "out of host memory for 3 arrays of %d MiB", mib);
    for (size_t i = 0; i < n; i++) a[i] = 1.0, b[i] = 2.0, c[i] = 0.5 * (double)(i % 1024);
    const double s = 3.0;
    double best = 1e30, best_round = 1e30;
    for (int r = 0; r < repeat; r++) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = bench_now();
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t = bench_now() - t0, t_max;
        CHECK_MPI(MPI_Allreduce(&t, &t_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (t < best) best = t;
        if (t_max < best_round) best_round = t_max;
    }
    long long wrong = 0, wrong_all;
    for (size_t i = 0; i < n; i++) wrong += a[i] != 2.0 + s * 0.5 * (double)(i % 1024);
    double bytes = 3.0 * sizeof(double) * (double)n;
    double rank_gbs = bytes / best / 1e9, rank_min, rank_max;
    CHECK_MPI(MPI_Allreduce(&rank_gbs, &rank_min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(&rank_gbs, &rank_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0) {
        double total = bytes * size / best_round / 1e9;
        printf("# STREAM triad: %d ranks on %d nodes, one thread each, 3 arrays of %d MiB per rank, best of %d\n",
               size, nodes, mib, repeat);
        printf("  per rank GB/s: min %.3f, max %.3f; all ranks together %.3f GB/s (%.3f per node); %lld wrong\n",
               rank_min, rank_max, total, total / nodes, wrong_all);
        bench_result("membw_rank_gbs", rank_min);
        bench_result("membw_total_gbs", total);
        bench_result("membw_wrong", (double)wrong_all);
        fflush(stdout);
    }
    free(a);
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
