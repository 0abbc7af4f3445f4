/* topology.h: where this rank sits. Nodes are discovered with MPI_COMM_TYPE_SHARED (or pretended
 * with MTC_PRETEND_RANKS_PER_NODE=N[:cyclic] for tests); ranks are ordered node by node, then
 * the parallel dimensions are laid over that order, fastest first (Megatron's tp-cp-ep-dp-pp by
 * default, --parallel-order), so a tensor-parallel group stays inside a node whenever it fits.
 * Each dimension gets a process group, plus the model-parallel group (tp x pp: the ranks that
 * hold one model replica) and the embedding group (first and last pipeline stage). */
#ifndef TOPOLOGY_H
#define TOPOLOGY_H

#include "app/parallel/comm.h"

enum { DIM_TP, DIM_CP, DIM_EP, DIM_DP, DIM_PP, NUM_DIMS };

/* a set of dimensions, one bit each: DIM_BIT(DIM_TP) | DIM_BIT(DIM_PP) is the model-parallel set */
#define DIM_BIT(dimension) (1 << (dimension))

/* the requested layout: sizes of the parallel dimensions and their order, fastest first
 * (Megatron's --parallel-order, e.g. "tp-cp-ep-dp-pp") */
typedef struct parallel_layout {
    int tensor_model_parallel_size, pipeline_model_parallel_size, data_parallel_size;
    char order[32];
    int expert_model_parallel_size;  /* experts split over this many of the data-parallel ranks (0: 1) */
    int ep_dimension;                /* internal: > 0 in the expert layout (parallel_layout_experts) */
    int context_parallel_size;       /* ranks that split each sequence (0: 1) */
    int expert_tensor_parallel_size; /* ranks that split each expert (0: the tensor-parallel size;
                                      * Megatron's --expert-tensor-parallel-size) */
} parallel_layout;

/* The expert layout of a layout (Megatron-Core's expert RankGenerator): the data-parallel
 * dimension split into expert-parallel (ep, faster) and expert-data-parallel (dp / ep) ones over
 * the same ordered ranks, so an expert-parallel group is ep consecutive data-parallel ranks.
 * With an expert tensor-parallel size etp other than tp (context parallelism 1), Megatron's
 * generator over the same order with tp = etp, ep, dp = tp dp / (etp ep), pp: with etp 1 an
 * expert-parallel group is ep consecutive ranks of the tp-dp order, spanning the tensor-parallel
 * ranks, and the expert-data-parallel group the rest of them. */
parallel_layout parallel_layout_experts(const parallel_layout *layout);

/* The layout's arithmetic, pure (no MPI), over ordered ranks (positions in the node-by-node order,
 * 0 .. tp x cp x dp x pp - 1; ep > 1 only in an expert layout).
 * The coordinate of ordered_rank in each dimension, the order's first dimension varying fastest. */
void parallel_layout_coords(const parallel_layout *layout, int ordered_rank, int coord[NUM_DIMS]);

/* The groups of a set of dimensions (dimension_mask, DIM_BIT's): ranks that share their coordinates
 * in every other dimension. Writes every ordered rank into ranks_out, group after group, and
 * returns the group size. As Megatron's RankGenerator.get_ranks: groups are numbered by the other
 * dimensions' coordinates and a rank's place in its group (the rank it gets in that group) counts
 * the set's coordinates, both in the layout's order, its first dimension fastest. A group's
 * members thus ascend, so a rank's place is its rank in Megatron's process group too. */
int parallel_layout_groups(const parallel_layout *layout, int dimension_mask, int *ranks_out);

typedef struct topology {
    int world_rank, world_size;
    int node, num_nodes, local_rank, local_size;
    int ordered_rank;          /* position in the node-by-node order */
    int size[NUM_DIMS];        /* tp, cp, ep, dp, pp sizes */
    int coord[NUM_DIMS];       /* this rank's coordinate in each */
    int tp_rank, pp_rank, dp_rank, tp_size, pp_size, dp_size;
    int cp_rank, cp_size;      /* context parallelism: which pieces of each sequence this rank holds */
    /* mixture of experts: the expert-parallel rank (which experts this rank holds) and the
     * expert-data-parallel one (the replicas of those experts); ep_size 1: every rank holds every
     * expert and the expert groups are the dense ones */
    int ep_rank, ep_size, expert_dp_rank, expert_dp_size;
    /* expert tensor parallelism (Megatron's --expert-tensor-parallel-size): the ranks that split
     * each expert; etp_size == tp_size (etp_rank tp_rank) unless the layout asks otherwise */
    int etp_rank, etp_size;
    parallel_layout expert_layout; /* parallel_layout_experts of the layout */
    int expert_groups_own;     /* 1 when ep_own, expert_dp_own, expert_model_parallel_own exist */
    int tp_group_spans_nodes;  /* 1 when some tensor-parallel group crosses a node boundary */
    comm_group world, tp, pp, dp, model_parallel, embedding; /* embedding.mpi is MPI_COMM_NULL off stage 0/last */
    /* with ep_size > 1: the expert-parallel group (token dispatch), the expert-data-parallel one
     * (expert gradients) and the expert-model-parallel one (tp x ep x pp: one copy of every
     * expert); their pointers are those groups, or dp and model_parallel with ep_size 1 (ep NULL).
     * With etp_size != tp_size the three always exist (expert-model-parallel: etp x ep x pp) and
     * ep is the expert-parallel group even of size 1 */
    comm_group ep_own, expert_dp_own, expert_model_parallel_own;
    const comm_group *ep, *expert_dp, *expert_model_parallel;
    /* the ranks holding the pieces and the replicas of the same experts (expert tensor x
     * expert-data parallel: fp8 amaxes of the experts reduce over it): its own group when
     * 1 < etp_size < tp_size (expert_tp_dp_own), else expert_dp (etp 1: nothing to add; etp = tp:
     * the pieces are the tensor-parallel group's) */
    comm_group expert_tp_dp_own;
    int expert_tp_dp_is_own;
    const comm_group *expert_tp_dp;
    /* context parallelism (cp_size > 1): the context-parallel group (the ring of ranks that share
     * one sequence) and Megatron's data-parallel group with context parallel (dp x cp: the
     * replicas whose gradients are summed and over which the distributed optimizer shards); with
     * cp_size 1, cp is NULL and dp_cp is &dp. The data loader reads by dp_rank (cp ranks read the
     * same samples); replicas are numbered by dp_cp->rank. */
    comm_group cp_own, dp_cp_own;
    const comm_group *cp, *dp_cp;
    char order[32];            /* the layout's order, as given */
} topology;

/* discover nodes and build the groups for the layout in a (collective over MPI_COMM_WORLD) */
void topology_create(topology *topo, const parallel_layout *layout);
void topology_free(topology *topo);

/* rank 0 prints the layout table (rank, host, node, local rank, device, tp/pp/dp coordinates),
 * and with an expert tensor-parallel size other than the tensor-parallel one the expert groups */
void topology_print(const topology *topo, const char *device);

#endif
