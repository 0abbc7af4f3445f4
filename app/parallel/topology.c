/* topology.c: node discovery, the rank order, and the process groups (see topology.h). */
#include "app/parallel/topology.h"
#include "app/core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct rank_place { int node_key, local_rank, world_rank; } rank_place;

static int compare_places(const void *a, const void *b) {
    const rank_place *x = a, *y = b;
    if (x->node_key != y->node_key) return x->node_key < y->node_key ? -1 : 1;
    return x->local_rank - y->local_rank;
}

/* this rank's node key (the smallest world rank on its node) and local rank */
static void discover_node(topology *t, int *node_key) {
    const char *pretend = getenv("MTC_PRETEND_RANKS_PER_NODE");
    if (pretend && *pretend) {
        int per_node = atoi(pretend);
        int cyclic = strstr(pretend, ":cyclic") != NULL;
        if (per_node <= 0 || t->world_size % per_node != 0)
            user_error("MTC_PRETEND_RANKS_PER_NODE=%s must be a positive divisor of the world size %d", pretend, t->world_size);
        int nodes = t->world_size / per_node;
        /* block: ranks 0..n-1 on node 0; cyclic: rank r on node r % nodes (round-robin launch) */
        int node = cyclic ? t->world_rank % nodes : t->world_rank / per_node;
        *node_key = cyclic ? node : node * per_node;
        t->local_rank = cyclic ? t->world_rank / nodes : t->world_rank % per_node;
        t->local_size = per_node;
        return;
    }
    MPI_Comm node_comm;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->world_rank, MPI_INFO_NULL, &node_comm));
    CHECK_MPI(MPI_Comm_rank(node_comm, &t->local_rank));
    CHECK_MPI(MPI_Comm_size(node_comm, &t->local_size));
    *node_key = t->world_rank;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, node_key, 1, MPI_INT, MPI_MIN, node_comm));
    MPI_Comm_free(&node_comm);
}

/* the layout's dimension sizes, and its order ("tp-cp-ep-dp-pp", validated by args) as dimension
 * ids, fastest first; returns the world size */
static int layout_shape(const parallel_layout *layout, int size[NUM_DIMS], int order[NUM_DIMS]) {
    static const char *names[NUM_DIMS] = {"tp", "cp", "ep", "dp", "pp"};
    size[DIM_TP] = layout->tensor_model_parallel_size;
    size[DIM_CP] = layout->context_parallel_size > 0 ? layout->context_parallel_size : 1;
    size[DIM_EP] = layout->ep_dimension > 0 ? layout->ep_dimension : 1;
    size[DIM_DP] = layout->data_parallel_size;
    size[DIM_PP] = layout->pipeline_model_parallel_size;
    char copy[sizeof layout->order];
    snprintf(copy, sizeof copy, "%s", layout->order);
    int k = 0;
    for (char *save = NULL, *tok = strtok_r(copy, "-", &save); tok && k < NUM_DIMS; tok = strtok_r(NULL, "-", &save))
        for (int d = 0; d < NUM_DIMS; d++) if (strcmp(tok, names[d]) == 0) order[k++] = d;
    int world_size = 1;
    for (int d = 0; d < NUM_DIMS; d++) world_size *= size[d];
    return world_size;
}

parallel_layout parallel_layout_experts(const parallel_layout *layout) {
    parallel_layout experts = *layout;
    int ep = layout->expert_model_parallel_size > 0 ? layout->expert_model_parallel_size : 1;
    int etp = layout->expert_tensor_parallel_size > 0 ? layout->expert_tensor_parallel_size
                                                      : layout->tensor_model_parallel_size;
    experts.ep_dimension = ep;
    if (etp == layout->tensor_model_parallel_size) {
        experts.data_parallel_size = layout->data_parallel_size / ep;
        return experts;
    }
    /* Megatron's expert RankGenerator(tp=etp, ep, dp=world/(etp ep pp), cp=1, pp) */
    int cp = layout->context_parallel_size > 0 ? layout->context_parallel_size : 1;
    experts.tensor_model_parallel_size = etp;
    experts.context_parallel_size = 1;
    experts.data_parallel_size = layout->tensor_model_parallel_size * cp * layout->data_parallel_size / (etp * ep);
    return experts;
}

void parallel_layout_coords(const parallel_layout *layout, int ordered_rank, int coord[NUM_DIMS]) {
    int size[NUM_DIMS], order[NUM_DIMS];
    layout_shape(layout, size, order);
    for (int k = 0; k < NUM_DIMS; k++) { coord[order[k]] = ordered_rank % size[order[k]]; ordered_rank /= size[order[k]]; }
}

int parallel_layout_groups(const parallel_layout *layout, int dimension_mask, int *ranks_out) {
    int size[NUM_DIMS], order[NUM_DIMS];
    int world_size = layout_shape(layout, size, order);
    int group_size = 1;
    for (int d = 0; d < NUM_DIMS; d++) if (dimension_mask & DIM_BIT(d)) group_size *= size[d];
    for (int rank = 0; rank < world_size; rank++) {
        int coord[NUM_DIMS];
        parallel_layout_coords(layout, rank, coord);
        /* group number: the other dimensions' coordinates; place in the group: the set's; each
         * counted in the layout's order, its first dimension fastest */
        int group = 0, group_stride = 1, place = 0, place_stride = 1;
        for (int k = 0; k < NUM_DIMS; k++) {
            int d = order[k];
            if (dimension_mask & DIM_BIT(d)) { place += coord[d] * place_stride; place_stride *= size[d]; }
            else { group += coord[d] * group_stride; group_stride *= size[d]; }
        }
        ranks_out[group * group_size + place] = rank;
    }
    return group_size;
}

/* the group of dimension_mask that holds this rank: MPI_Comm_split by group, ranked by place */
static void make_group(topology *t, comm_group *g, const char *name, int dimension_mask, const parallel_layout *layout,
                       int *ranks) {
    int group_size = parallel_layout_groups(layout, dimension_mask, ranks);
    int index = 0;
    while (ranks[index] != t->ordered_rank) index++;
    MPI_Comm comm;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, index / group_size, index % group_size, &comm));
    g->name = name;
    g->mpi = comm;
    CHECK_MPI(MPI_Comm_rank(comm, &g->rank));
    CHECK_MPI(MPI_Comm_size(comm, &g->size));
}

void topology_create(topology *t, const parallel_layout *layout) {
    memset(t, 0, sizeof *t);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &t->world_rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &t->world_size));
    int node_key = 0;
    discover_node(t, &node_key);

    /* order ranks node by node, then by local rank */
    rank_place mine = {node_key, t->local_rank, t->world_rank};
    rank_place *all = malloc(sizeof(rank_place) * (size_t)t->world_size);
    CHECK(all, "out of host memory for the rank table");
    CHECK_MPI(MPI_Allgather(&mine, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD));
    qsort(all, (size_t)t->world_size, sizeof(rank_place), compare_places);
    int node = -1, last_key = -1;
    int *node_of_ordered = malloc(sizeof(int) * (size_t)t->world_size);
    CHECK(node_of_ordered, "out of host memory for the rank table");
    for (int i = 0; i < t->world_size; i++) {
        if (all[i].node_key != last_key) { node++; last_key = all[i].node_key; }
        node_of_ordered[i] = node;
        if (all[i].world_rank == t->world_rank) { t->ordered_rank = i; t->node = node; }
    }
    t->num_nodes = node + 1;

    snprintf(t->order, sizeof t->order, "%s", layout->order);
    int order[NUM_DIMS];
    int layout_ranks = layout_shape(layout, t->size, order);
    CHECK(layout_ranks == t->world_size, "the parallel layout covers %d ranks, not the world's %d", layout_ranks,
          t->world_size);
    parallel_layout_coords(layout, t->ordered_rank, t->coord);
    t->tp_rank = t->coord[DIM_TP]; t->tp_size = t->size[DIM_TP];
    t->pp_rank = t->coord[DIM_PP]; t->pp_size = t->size[DIM_PP];
    t->dp_rank = t->coord[DIM_DP]; t->dp_size = t->size[DIM_DP];
    t->cp_rank = t->coord[DIM_CP]; t->cp_size = t->size[DIM_CP];

    int *ranks = malloc(sizeof(int) * (size_t)t->world_size);
    CHECK(ranks, "out of host memory for the rank table");
    /* does any tensor-parallel group cross nodes? */
    int tp_size = parallel_layout_groups(layout, DIM_BIT(DIM_TP), ranks);
    t->tp_group_spans_nodes = 0;
    for (int i = 0; i < t->world_size; i++)
        if (node_of_ordered[ranks[i]] != node_of_ordered[ranks[i - i % tp_size]]) t->tp_group_spans_nodes = 1;
    free(all);
    free(node_of_ordered);

    comm_group_create(&t->world, "world", MPI_COMM_WORLD);
    make_group(t, &t->tp, "tensor-parallel", DIM_BIT(DIM_TP), layout, ranks);
    make_group(t, &t->pp, "pipeline-parallel", DIM_BIT(DIM_PP), layout, ranks);
    t->pp.point_to_point = 1;
    make_group(t, &t->dp, "data-parallel", DIM_BIT(DIM_DP), layout, ranks);
    make_group(t, &t->model_parallel, "model-parallel", DIM_BIT(DIM_TP) | DIM_BIT(DIM_PP), layout, ranks);
    t->cp = NULL;
    t->dp_cp = &t->dp;
    if (t->cp_size > 1) {
        make_group(t, &t->cp_own, "context-parallel", DIM_BIT(DIM_CP), layout, ranks);
        t->cp_own.point_to_point = 1;
        make_group(t, &t->dp_cp_own, "data-parallel with context parallel", DIM_BIT(DIM_DP) | DIM_BIT(DIM_CP), layout, ranks);
        t->cp = &t->cp_own;
        t->dp_cp = &t->dp_cp_own;
    }
    /* the expert groups (Megatron's expert rank generator over the same ordered ranks) */
    parallel_layout experts = parallel_layout_experts(layout);
    t->expert_layout = experts;
    int expert_coord[NUM_DIMS];
    parallel_layout_coords(&experts, t->ordered_rank, expert_coord);
    t->ep_size = experts.ep_dimension;
    t->ep_rank = expert_coord[DIM_EP];
    t->expert_dp_size = experts.data_parallel_size;
    t->expert_dp_rank = expert_coord[DIM_DP];
    t->etp_size = experts.tensor_model_parallel_size;
    t->etp_rank = expert_coord[DIM_TP];
    t->ep = NULL;
    t->expert_dp = &t->dp;
    t->expert_model_parallel = &t->model_parallel;
    t->expert_groups_own = t->ep_size > 1 || t->etp_size != t->tp_size;
    if (t->expert_groups_own) {
        make_group(t, &t->ep_own, "expert-parallel", DIM_BIT(DIM_EP), &experts, ranks);
        make_group(t, &t->expert_dp_own, "expert-data-parallel", DIM_BIT(DIM_DP), &experts, ranks);
        make_group(t, &t->expert_model_parallel_own, "expert-model-parallel",
                   DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP), &experts, ranks);
        t->ep = &t->ep_own;
        t->expert_dp = &t->expert_dp_own;
        t->expert_model_parallel = &t->expert_model_parallel_own;
    }
    t->expert_tp_dp = t->expert_dp;
    t->expert_tp_dp_is_own = t->etp_size > 1 && t->etp_size != t->tp_size;
    if (t->expert_tp_dp_is_own) {
        make_group(t, &t->expert_tp_dp_own, "expert-tensor-and-data-parallel", DIM_BIT(DIM_TP) | DIM_BIT(DIM_DP),
                   &experts, ranks);
        t->expert_tp_dp = &t->expert_tp_dp_own;
    }
    free(ranks);

    /* embedding group: first and last stage of one pipeline (tied word embeddings) */
    int on_end = t->pp_rank == 0 || t->pp_rank == t->pp_size - 1;
    MPI_Comm comm;
    CHECK_MPI(MPI_Comm_split(t->pp.mpi, on_end ? 0 : MPI_UNDEFINED, t->pp_rank, &comm));
    t->embedding.name = "embedding";
    t->embedding.mpi = comm;
    t->embedding.rank = t->embedding.size = 0;
    t->embedding.backend = NULL;
    t->embedding.point_to_point = 0;
    if (comm != MPI_COMM_NULL) {
        CHECK_MPI(MPI_Comm_rank(comm, &t->embedding.rank));
        CHECK_MPI(MPI_Comm_size(comm, &t->embedding.size));
    }
}

void topology_free(topology *t) {
    comm_group *groups[] = {&t->world, &t->tp, &t->pp, &t->dp, &t->model_parallel, &t->embedding};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) comm_group_free(groups[i]);
    if (t->cp_size > 1) {
        comm_group_free(&t->cp_own);
        comm_group_free(&t->dp_cp_own);
    }
    if (t->expert_groups_own) {
        comm_group_free(&t->ep_own);
        comm_group_free(&t->expert_dp_own);
        comm_group_free(&t->expert_model_parallel_own);
    }
    if (t->expert_tp_dp_is_own) comm_group_free(&t->expert_tp_dp_own);
}

/* the groups of one set of dimensions of the expert layout, as lists of world ranks */
static void print_groups(const topology *t, const char *name, int dimension_mask) {
    int *ranks = malloc(sizeof(int) * (size_t)t->world_size);
    CHECK(ranks, "out of host memory for the rank table");
    int size = parallel_layout_groups(&t->expert_layout, dimension_mask, ranks);
    printf(">   %s groups (ordered ranks):", name);
    for (int i = 0; i < t->world_size; i++) printf("%s%d%s", i % size ? "," : " [", ranks[i], i % size == size - 1 ? "]" : "");
    printf("\n");
    free(ranks);
}

/* Megatron's expert groups when the experts are split otherwise than the dense layers */
static void print_expert_groups(const topology *t) {
    printf("> expert layout: expert-tensor-parallel %d x expert-parallel %d x expert-data-parallel %d x pipeline-parallel %d "
           "(Megatron's expert rank generator, order %s)\n",
           t->etp_size, t->ep_size, t->expert_dp_size, t->pp_size, t->order);
    print_groups(t, "expert-tensor-parallel", DIM_BIT(DIM_TP));
    print_groups(t, "expert-parallel", DIM_BIT(DIM_EP));
    print_groups(t, "expert-tensor-and-model-parallel", DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP));
    print_groups(t, "expert-data-parallel", DIM_BIT(DIM_DP));
}

void topology_print(const topology *t, const char *device) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char line[160];
    snprintf(line, sizeof line, "  %5d  %-20.20s %4d  %5d  %-6s %4d %4d %4d %4d", t->world_rank, host, t->node,
             t->local_rank, device, t->tp_rank, t->pp_rank, t->dp_rank, t->cp_rank);
    char *all = NULL;
    if (t->world_rank == 0) {
        all = malloc(sizeof line * (size_t)t->world_size);
        CHECK(all, "out of host memory for the layout table");
    }
    CHECK_MPI(MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (t->world_rank == 0) {
        printf("> layout: %d nodes, tensor-parallel %d x pipeline-parallel %d x data-parallel %d x context-parallel %d (order %s)\n",
               t->num_nodes, t->tp_size, t->pp_size, t->dp_size, t->cp_size, t->order);
        printf("   rank  host                 node  local  device   tp   pp   dp   cp\n");
        for (int r = 0; r < t->world_size; r++) printf("%s\n", all + (size_t)r * sizeof line);
        if (t->etp_size != t->tp_size) print_expert_groups(t);
        if (t->tp_group_spans_nodes)
            printf("WARNING: a tensor-parallel group of %d ranks spans nodes (%d ranks per node): "
                   "tensor-parallel traffic will cross the network\n", t->tp_size, t->local_size);
        fflush(stdout);
        free(all);
    }
}
