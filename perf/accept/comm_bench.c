/* comm_bench.c: collective bus bandwidth in the shape of NVIDIA's nccl-tests, the collective
 * check of the cluster acceptance suite (perf/accept/accept).
 *
 *   mpiexec -n R perf/accept/comm_bench [--device cpu|cuda] [--min-bytes B] [--max-bytes B]
 *                                       [--warmup W] [--iters I]
 *
 * Collectives go through the application's comm interface (app/parallel/comm.h: MPI on the CPU
 * backend over host memory, NCCL on CUDA over device memory), as training uses them: all-reduce
 * (in place), all-gather, reduce-scatter, all-to-all (the interface's alltoallv, which expert
 * parallelism's token dispatch uses, here with equal blocks per peer) and send/recv (each rank
 * sends to rank+1 and receives from rank-1).
 *
 * Columns and formulas are nccl-tests' (doc/PERFORMANCE.md there): size is the bytes of the
 * whole operation (the all-reduced buffer; the gathered, scattered or exchanged buffer of all
 * ranks; one rank's message for send/recv), count = size / 4 float elements, time the mean over
 * ranks of the mean over I iterations after W warm-ups, algbw = size / time, and
 * busbw = algbw * 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter, all-to-all), 1
 * (send/recv), the figure to compare with the hardware's link bandwidth. #wrong counts elements
 * that differ from the exact expected values after one more, checked, run of every size (the
 * values are small integers, exact in fp32 sums). Sizes double from --min-bytes to --max-bytes
 * (defaults 8 B .. 256 MiB on CUDA, 8 B .. 16 MiB on the CPU).
 * RESULT lines: <collective>_busbw_gbs at the largest size, <collective>_busbw_avg_gbs (mean over
 * sizes, as nccl-tests' "Avg bus bandwidth"), comm_wrong, comm_ranks, comm_nodes. */
#include "perf/accept/bench_common.h"
#include "app/parallel/comm.h"

typedef enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV, NUM_COLLECTIVES } collective;

static const struct {
    const char *name, *result, *how_mpi, *how_nccl;
} collectives[NUM_COLLECTIVES] = {
    {"all_reduce", "allreduce", "comm_mpi allreduce (MPI_Allreduce, in place)", "comm_nccl allreduce (ncclAllReduce, in place)"},
    {"all_gather", "allgather", "comm_mpi allgather (MPI_Allgather, in place)", "comm_nccl allgather (ncclAllGather, in place)"},
    {"reduce_scatter", "reducescatter", "comm_mpi reduce_scatter (MPI_Reduce_scatter_block)", "comm_nccl reduce_scatter (ncclReduceScatter)"},
    {"alltoall", "alltoall", "comm_mpi alltoallv (MPI_Ialltoallv), equal blocks", "comm_nccl alltoallv (grouped ncclSend/ncclRecv), equal blocks"},
    {"sendrecv", "sendrecv", "comm_mpi send/recv (MPI_Isend + MPI_Recv), ring", "comm_nccl send/recv (ncclSend + ncclRecv), ring"},
};

typedef struct bench {
    const kernel_ops *ops;
    const comm_ops *comm;
    comm_group world;
    int rank, size;
    void *send, *recv;   /* backend memory, max_bytes each */
    float *host;         /* pattern / result staging, max_bytes */
    size_t *a2a_plan;    /* all-to-all: send counts, send offsets, recv counts, recv offsets [size] each */
} bench;

/* bus bandwidth factor (nccl-tests) */
static double bus_factor(collective c, int n) {
    switch (c) {
    case ALL_REDUCE: return 2.0 * (n - 1) / n;
    case SEND_RECV: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

/* elements per rank block for a size of `bytes` for the whole operation */
static size_t block_count(collective c, size_t bytes, int n) {
    return (c == ALL_REDUCE || c == SEND_RECV) ? bytes / 4 : bytes / 4 / (size_t)n;
}
/* bytes of the whole operation for a block count */
static size_t op_bytes(collective c, size_t count, int n) {
    return (c == ALL_REDUCE || c == SEND_RECV) ? count * 4 : count * 4 * (size_t)n;
}

/* element i of rank r's contribution: small integers, so every sum is exact in fp32 */
static float value(int r, size_t i) { return (float)((size_t)(7 * r) + i % 13); }

static void run_once(bench *b, collective c, size_t count) {
    int n = b->size, rank = b->rank;
    switch (c) {
    case ALL_REDUCE: b->comm->allreduce(b->recv, count, COMM_FLOAT, COMM_SUM, &b->world); break;
    case ALL_GATHER:
        b->comm->allgather((float *)b->recv + (size_t)rank * count, b->recv, count, COMM_FLOAT, &b->world);
        break;
    case REDUCE_SCATTER: b->comm->reduce_scatter(b->send, b->recv, count, COMM_FLOAT, &b->world); break;
    case SEND_RECV: {
        comm_request request = {0};
        b->comm->send(b->send, count, COMM_FLOAT, (rank + 1) % n, 0, &b->world, &request);
        b->comm->recv(b->recv, count, COMM_FLOAT, (rank + n - 1) % n, 0, &b->world);
        b->comm->wait(&request);
        break;
    }
    case ALL_TO_ALL: {  /* block p of send goes to peer p; block p of recv comes from peer p */
        size_t *plan = b->a2a_plan;
        for (int p = 0; p < n; p++) {
            plan[p] = plan[2 * n + p] = count;
            plan[n + p] = plan[3 * n + p] = (size_t)p * count;
        }
        b->comm->alltoallv(b->send, plan, plan + n, b->recv, plan + 2 * n, plan + 3 * n, COMM_FLOAT, &b->world);
        break;
    }
    default: break;
    }
}

/* fill the operands with this rank's pattern */
static void prepare(bench *b, collective c, size_t count) {
    int n = b->size, rank = b->rank;
    size_t elements = (c == ALL_REDUCE || c == SEND_RECV) ? count : count * (size_t)n;
    if (c == ALL_GATHER) { /* the rank's own block of the in-place buffer */
        for (size_t i = 0; i < count; i++) b->host[i] = value(rank, i);
        b->ops->copy_from_host((float *)b->recv + (size_t)rank * count, b->host, count * 4);
        return;
    }
    for (size_t i = 0; i < elements; i++) b->host[i] = value(rank, i);
    b->ops->copy_from_host(c == ALL_REDUCE ? b->recv : b->send, b->host, elements * 4);
}

/* elements of the result that differ from the exact expected values */
static long long check(bench *b, collective c, size_t count) {
    int n = b->size, rank = b->rank;
    size_t elements = (c == ALL_REDUCE || c == SEND_RECV || c == REDUCE_SCATTER) ? count : count * (size_t)n;
    b->ops->synchronize();
    b->ops->copy_to_host(b->host, b->recv, elements * 4);
    long long wrong = 0;
    for (size_t i = 0; i < elements; i++) {
        float expected = 0;
        switch (c) {
        case ALL_REDUCE:
            for (int r = 0; r < n; r++) expected += value(r, i);
            break;
        case REDUCE_SCATTER:
            for (int r = 0; r < n; r++) expected += value(r, (size_t)rank * count + i);
            break;
        case ALL_GATHER: expected = value((int)(i / count), i % count); break;
        case ALL_TO_ALL: expected = value((int)(i / count), (size_t)rank * count + i % count); break;
        case SEND_RECV: expected = value((rank + n - 1) % n, i); break;
        default: break;
        }
        if (b->host[i] != expected) wrong++;
    }
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "comm_bench";
    kernels_set_error_handler(error_report_fatal);
    const char *device = "cpu", *value_text;
    double min_bytes = 8, max_bytes = -1;
    int warmup = 5, iters = 20;
    for (int i = 1; i < argc; i++) {
        if (bench_flag(argc, argv, &i, "--device", &device)) continue;
        if (bench_flag(argc, argv, &i, "--min-bytes", &value_text)) { min_bytes = atof(value_text); continue; }
        if (bench_flag(argc, argv, &i, "--max-bytes", &value_text)) { max_bytes = atof(value_text); continue; }
        if (bench_flag(argc, argv, &i, "--warmup", &value_text)) { warmup = atoi(value_text); continue; }
        if (bench_flag(argc, argv, &i, "--iters", &value_text)) { iters = atoi(value_text); continue; }
        user_error("unknown argument '%s' (usage: comm_bench [--device cpu|cuda] [--min-bytes B] [--max-bytes B] [--warmup W] [--iters I])", argv[i]);
    }
    bench b = {0};
    int local_rank, nodes;
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.size);
    bench_placement(&local_rank, &nodes);
    char gpu[256];
    b.ops = bench_backend(device, local_rank, gpu, (int)sizeof gpu);
    if (!b.ops) FATAL("--device %s: not available in this build or no GPU visible", device);
    if (max_bytes < 0) max_bytes = b.ops->host_memory ? 16.0 * (1 << 20) : 256.0 * (1 << 20);
    if (min_bytes < 4 || max_bytes < min_bytes || warmup < 0 || iters < 1)
        user_error("need 4 <= --min-bytes <= --max-bytes, --warmup >= 0, --iters >= 1");
    b.comm = b.ops->host_memory ? comm_mpi() : NULL;
#ifdef HAVE_CUDA
    if (!b.ops->host_memory) b.comm = comm_nccl();
#endif
    comm_group_create(&b.world, "world", MPI_COMM_WORLD);
    b.comm->attach(&b.world);
    size_t buffer_bytes = (size_t)max_bytes + 64;
    b.send = b.ops->alloc(buffer_bytes);
    b.recv = b.ops->alloc(buffer_bytes);
    b.host = malloc(buffer_bytes);
    b.a2a_plan = malloc(sizeof(size_t) * 4 * (size_t)b.size);
    CHECK(b.host && b.a2a_plan, "out of host memory for %zu bytes", buffer_bytes);

    if (b.rank == 0)
        printf("# collectives over %s (%s): %d ranks on %d nodes, float, sum; %d warm-up + %d timed iterations; "
               "time = mean over ranks (nccl-tests)\n", b.comm->name, gpu, b.size, nodes, warmup, iters);
    long long wrong_total = 0;
    for (int c = 0; c < NUM_COLLECTIVES; c++) {
        if (b.rank == 0) {
            printf("#\n# %s: %s\n", collectives[c].name, b.ops->host_memory ? collectives[c].how_mpi : collectives[c].how_nccl);
            printf("# %12s %12s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong");
            printf("# %12s %12s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
        }
        size_t previous = 0;
        double busbw = 0, busbw_sum = 0;
        int rows = 0;
        for (double target = min_bytes; target <= max_bytes; target *= 2) {
            size_t count = block_count((collective)c, (size_t)target, b.size);
            if (count == 0) continue;
            size_t bytes = op_bytes((collective)c, count, b.size);
            if (bytes == previous) continue;
            previous = bytes;
            prepare(&b, (collective)c, count);
            for (int i = 0; i < warmup; i++) run_once(&b, (collective)c, count);
            b.ops->synchronize();
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = bench_now();
            for (int i = 0; i < iters; i++) run_once(&b, (collective)c, count);
            b.ops->synchronize();
            double seconds = (bench_now() - t0) / iters, mean_seconds;
            CHECK_MPI(MPI_Allreduce(&seconds, &mean_seconds, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
            mean_seconds /= b.size;
            prepare(&b, (collective)c, count);
            run_once(&b, (collective)c, count);
            long long wrong = check(&b, (collective)c, count), wrong_all;
            CHECK_MPI(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
            wrong_total += wrong_all;
            double algbw = (double)bytes / mean_seconds / 1e9;
            busbw = algbw * bus_factor((collective)c, b.size);
            busbw_sum += busbw;
            rows++;
            if (b.rank == 0)
                printf("  %12zu %12zu %6s %6s %10.2f %8.2f %8.2f %7lld\n", bytes, bytes / 4, "float",
                       (c == ALL_REDUCE || c == REDUCE_SCATTER) ? "sum" : "none", 1e6 * mean_seconds, algbw, busbw, wrong_all);
        }
        if (b.rank == 0) {
            char name[64];
            printf("# %s: bus bandwidth at the largest size %.3f GB/s, average %.3f GB/s\n", collectives[c].name, busbw,
                   rows ? busbw_sum / rows : 0.0);
            snprintf(name, sizeof name, "%s_busbw_gbs", collectives[c].result);
            bench_result(name, busbw);
            snprintf(name, sizeof name, "%s_busbw_avg_gbs", collectives[c].result);
            bench_result(name, rows ? busbw_sum / rows : 0.0);
        }
    }
    if (b.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        bench_result("comm_wrong", (double)wrong_total);
        bench_result("comm_ranks", b.size);
        bench_result("comm_nodes", nodes);
        fflush(stdout);
    }
    b.ops->release(b.send);
    b.ops->release(b.recv);
    free(b.host);
    free(b.a2a_plan);
    b.comm->detach(&b.world);
    comm_group_free(&b.world);
    MPI_Finalize();
    return 0;
}
