/* expert_comm_test.c: the expert-parallel groups of the topology (Megatron's expert rank
 * generator: data-parallel ranks split into expert-parallel, faster, and expert-data-parallel
 * ones) and the all-to-alls of the comm interface that dispatch tokens to experts (blocking and
 * non-blocking), over MPI with the job's ranks. Usage: expert_comm_test TP EP (the data-parallel
 * size is the rest). Rank 0 prints the TAP lines; a check passes when it passes on every rank. */
#include "app/core/error.h"
#include "app/parallel/comm.h"
#include "app/parallel/topology.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int rank, ranks;

static void check(int holds, const char *what) {
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &holds, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0) tap_ok(holds, "%s (%d ranks)", what, ranks);
    else if (!holds) tap_failed++;
}

/* the world ranks of a group, in group order */
static void members(const comm_group *g, int *out) {
    CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, out, 1, MPI_INT, g->mpi));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    int tp = argc > 2 ? atoi(argv[1]) : 1, ep = argc > 2 ? atoi(argv[2]) : 2;
    CHECK(tp > 0 && ep > 0 && ranks % (tp * ep) == 0, "usage: expert_comm_test TP EP with TP x EP dividing the ranks");
    int dp = ranks / tp;
    parallel_layout layout = {tp, 1, dp, "tp-cp-ep-dp-pp", ep, 0, 1, 0};
    topology topo;
    topology_create(&topo, &layout);
    /* one node: the ordered rank is the world rank; rank = tp + TP (ep + EP edp) */
    int tp_rank = rank % tp, ep_rank = (rank / tp) % ep, edp_rank = rank / (tp * ep);
    check(topo.ep_size == ep && topo.ep_rank == ep_rank && topo.expert_dp_size == dp / ep &&
          topo.expert_dp_rank == edp_rank && topo.dp_rank == rank / tp,
          "expert-parallel rank = data-parallel rank mod ep, expert-data-parallel rank = data-parallel rank / ep");
    int *got = malloc(sizeof(int) * (size_t)ranks);
    int holds = 1;
    if (ep > 1) {
        members(topo.ep, got);
        for (int p = 0; p < ep; p++) holds &= got[p] == tp_rank + tp * (p + ep * edp_rank);
        check(holds && topo.ep->size == ep, "an expert-parallel group is ep consecutive data-parallel ranks (Megatron's order)");
        members(topo.expert_dp, got);
        holds = 1;
        for (int p = 0; p < dp / ep; p++) holds &= got[p] == tp_rank + tp * (ep_rank + ep * p);
        check(holds, "an expert-data-parallel group holds the ranks of one expert-parallel rank, ep apart");
        check(topo.expert_model_parallel->size == tp * ep, "the expert-model-parallel group is tp x ep (x pp) ranks");
    } else {
        check(topo.ep == NULL && topo.expert_dp == &topo.dp, "ep 1: no expert-parallel group, the expert data-parallel group is the data-parallel one");
    }

    /* all-to-all with per-peer sizes over the expert-parallel group (or the world with ep 1):
     * rank r sends p + 1 elements to peer p, valued 100 r + 10 p + i */
    const comm_ops *comm = comm_mpi();
    comm_group world;
    comm_group_create(&world, "world", MPI_COMM_WORLD);
    const comm_group *g = ep > 1 ? topo.ep : &world;
    comm->attach((comm_group *)g);
    int n = g->size, me = g->rank;
    size_t *counts = calloc(4 * (size_t)n, sizeof(size_t));
    size_t *send_counts = counts, *send_offsets = counts + n, *recv_counts = counts + 2 * n, *recv_offsets = counts + 3 * n;
    size_t send_total = 0, recv_total = 0;
    for (int p = 0; p < n; p++) {
        send_counts[p] = (size_t)p + 1;
        send_offsets[p] = send_total;
        send_total += send_counts[p];
        recv_counts[p] = (size_t)me + 1;
        recv_offsets[p] = recv_total;
        recv_total += recv_counts[p];
    }
    float *send = malloc(sizeof(float) * send_total), *recv = malloc(sizeof(float) * recv_total);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < send_counts[p]; i++) send[send_offsets[p] + i] = (float)(100 * me + 10 * p + (int)i);
    comm->alltoallv(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, COMM_FLOAT, g);
    holds = 1;
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < recv_counts[q]; i++) holds &= recv[recv_offsets[q] + i] == (float)(100 * q + 10 * me + (int)i);
    check(holds, "alltoallv: every peer's block arrives whole at its offset, sizes differing per peer");
    /* the non-blocking one (--moe-shared-expert-overlap), the way back: rank r returns to peer q
     * the block it got from q, plus 1000; its count arrays are overwritten as soon as it is
     * started (they may be freed then), and the sent rows are read meanwhile (as the shared
     * experts read the layer's input while the tokens travel) */
    size_t *back = calloc(4 * (size_t)n, sizeof(size_t));
    memcpy(back, recv_counts, sizeof(size_t) * (size_t)n);
    memcpy(back + n, recv_offsets, sizeof(size_t) * (size_t)n);
    memcpy(back + 2 * n, send_counts, sizeof(size_t) * (size_t)n);
    memcpy(back + 3 * n, send_offsets, sizeof(size_t) * (size_t)n);
    float *returned = malloc(sizeof(float) * send_total);
    for (size_t i = 0; i < recv_total; i++) recv[i] += 1000.0f;
    for (size_t i = 0; i < send_total; i++) returned[i] = -1.0f;
    comm_request request;
    memset(&request, 0, sizeof request);
    comm->ialltoallv(recv, back, back + n, returned, back + 2 * n, back + 3 * n, COMM_FLOAT, g, &request);
    for (int i = 0; i < 4 * n; i++) back[i] = (size_t)-1;
    double meanwhile = 0;
    for (size_t i = 0; i < recv_total; i++) meanwhile += recv[i];
    comm->test(&request); /* may or may not be complete yet */
    comm->wait(&request);
    holds = request.active == 0 && comm->test(&request) == 1 && meanwhile > 0;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < send_counts[p]; i++)
            holds &= returned[send_offsets[p] + i] == send[send_offsets[p] + i] + 1000.0f;
    check(holds, "ialltoallv: started, its count arrays overwritten, its send rows read meanwhile; after wait every block is back at its offset");
    /* several in flight at once on one group, completed in the reverse order */
    comm_request twice[2];
    memset(twice, 0, sizeof twice);
    float *again = malloc(sizeof(float) * recv_total);
    comm->ialltoallv(send, send_counts, send_offsets, again, recv_counts, recv_offsets, COMM_FLOAT, g, &twice[0]);
    memcpy(back, recv_counts, sizeof(size_t) * (size_t)n);
    memcpy(back + n, recv_offsets, sizeof(size_t) * (size_t)n);
    memcpy(back + 2 * n, send_counts, sizeof(size_t) * (size_t)n);
    memcpy(back + 3 * n, send_offsets, sizeof(size_t) * (size_t)n);
    for (size_t i = 0; i < send_total; i++) returned[i] = -1.0f;
    comm->ialltoallv(recv, back, back + n, returned, back + 2 * n, back + 3 * n, COMM_FLOAT, g, &twice[1]);
    comm->wait(&twice[1]);
    comm->wait(&twice[0]);
    holds = 1;
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < recv_counts[q]; i++) holds &= again[recv_offsets[q] + i] == (float)(100 * q + 10 * me + (int)i);
    for (size_t i = 0; i < send_total; i++) holds &= returned[i] == send[i] + 1000.0f;
    check(holds, "ialltoallv: two in flight on one group, waited in the reverse order: both complete and right");
    free(back); free(returned); free(again);
    int *host_send = malloc(sizeof(int) * (size_t)n), *host_recv = malloc(sizeof(int) * (size_t)n);
    for (int p = 0; p < n; p++) host_send[p] = 1000 * me + p;
    comm->alltoall_host(host_send, host_recv, sizeof(int), g);
    holds = 1;
    for (int q = 0; q < n; q++) holds &= host_recv[q] == 1000 * q + me;
    check(holds, "alltoall_host: element p of each rank's host array goes to peer p");
    comm->detach((comm_group *)g);
    comm_group_free(&world);
    free(send); free(recv); free(counts); free(got); free(host_send); free(host_recv);
    topology_free(&topo);
    MPI_Finalize();
    return rank == 0 ? tap_done() : 0;
}
