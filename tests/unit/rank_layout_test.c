/* rank_layout_test.c: the process groups of a parallel layout (parallel_layout_groups and
 * parallel_layout_coords, what topology_create splits MPI_COMM_WORLD by) against a reference
 * transcribed from Megatron-Core's megatron/core/parallel_state.py (RankGenerator: the order
 * completed with the dimensions it leaves out, get_mask, get_ranks;
 * generate_masked_orthogonal_rank_groups with prefix_product, decompose, inner_product), for
 * several orders, tp 1,2,4,8 x pp 1,2,4 x dp 1..4 (up to 64 ranks) and every set of dimensions;
 * then the examples of Megatron's docstrings, checked by hand. Context parallelism of 1, 2 and 4
 * is compared where the order names cp; ep is 1 here (the expert layout has its own examples, with
 * an expert tensor-parallel size of 1 as well). */
#include "app/parallel/topology.h"
#include "tests/tap.h"

#include <string.h>

#define MAX_WORLD 64
#define MAX_NAMES 6

/* ---- reference: Megatron-Core's parallel_state.py, transcribed ---- */

static void prefix_product(const int *a, int n, int *out) {
    int init = 1;
    out[0] = init;
    for (int i = 0; i < n; i++) { init *= a[i]; out[i + 1] = init; }
}

static int inner_product(const int *a, const int *b, int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* decompose(index, shape): idx[i] = (index // stride[i]) % shape[i], stride the prefix product */
static void decompose(int index, const int *shape, int n, int *idx) {
    int stride[MAX_NAMES + 1];
    prefix_product(shape, n, stride);
    for (int i = 0; i < n; i++) idx[i] = (index / stride[i]) % shape[i];
}

/* generate_masked_orthogonal_rank_groups(world_size, parallel_size, mask): ranks[group][i] */
static int generate_masked_orthogonal_rank_groups(int world_size, const int *parallel_size, const int *mask, int n,
                                                  int *ranks) {
    int masked_shape[MAX_NAMES], unmasked_shape[MAX_NAMES], masked_stride[MAX_NAMES], unmasked_stride[MAX_NAMES];
    int global_stride[MAX_NAMES + 1], n_masked = 0, n_unmasked = 0;
    prefix_product(parallel_size, n, global_stride);
    for (int i = 0; i < n; i++) {
        if (mask[i]) { masked_shape[n_masked] = parallel_size[i]; masked_stride[n_masked++] = global_stride[i]; }
        else { unmasked_shape[n_unmasked] = parallel_size[i]; unmasked_stride[n_unmasked++] = global_stride[i]; }
    }
    int masked_prefix[MAX_NAMES + 1];
    prefix_product(masked_shape, n_masked, masked_prefix);
    int group_size = masked_prefix[n_masked];
    int num_of_group = world_size / group_size;
    for (int group_index = 0; group_index < num_of_group; group_index++) {
        int decomposed_group_idx[MAX_NAMES];
        decompose(group_index, unmasked_shape, n_unmasked, decomposed_group_idx);
        for (int rank_in_group = 0; rank_in_group < group_size; rank_in_group++) {
            int decomposed_rank_idx[MAX_NAMES];
            decompose(rank_in_group, masked_shape, n_masked, decomposed_rank_idx);
            ranks[group_index * group_size + rank_in_group] =
                inner_product(decomposed_rank_idx, masked_stride, n_masked) +
                inner_product(decomposed_group_idx, unmasked_stride, n_unmasked);
        }
    }
    return group_size;
}

/* RankGenerator(tp, ep, dp, pp, cp, order): a name the order leaves out is appended (in
 * name_to_size's order) when its size is 1; get_ranks(token) masks the token's names */
typedef struct rank_generator {
    char names[MAX_NAMES][8];
    int ordered_size[MAX_NAMES], count, world_size;
} rank_generator;

static int rank_generator_init(rank_generator *g, int tp, int ep, int dp, int pp, int cp, const char *order) {
    static const char *name_to_size_names[] = {"tp", "pp", "dp", "ep", "cp"};
    int sizes[] = {tp, pp, dp, ep, cp};
    char copy[64];
    snprintf(copy, sizeof copy, "%s", order);
    g->count = 0;
    for (char *save = NULL, *tok = strtok_r(copy, "-", &save); tok; tok = strtok_r(NULL, "-", &save))
        snprintf(g->names[g->count++], sizeof g->names[0], "%s", tok);
    for (int i = 0; i < 5; i++) {
        int present = 0;
        for (int k = 0; k < g->count; k++) present |= strcmp(g->names[k], name_to_size_names[i]) == 0;
        if (!present && sizes[i] != 1) return 0; /* RuntimeError: a size above 1 the order leaves out */
        if (!present) snprintf(g->names[g->count++], sizeof g->names[0], "%s", name_to_size_names[i]);
    }
    for (int k = 0; k < g->count; k++)
        for (int i = 0; i < 5; i++)
            if (strcmp(g->names[k], name_to_size_names[i]) == 0) g->ordered_size[k] = sizes[i];
    g->world_size = tp * dp * pp * cp * ep;
    return 1;
}

static int get_ranks(const rank_generator *g, const char *token, int *ranks) {
    int mask[MAX_NAMES] = {0};
    char copy[64];
    snprintf(copy, sizeof copy, "%s", token);
    for (char *save = NULL, *tok = strtok_r(copy, "-", &save); tok; tok = strtok_r(NULL, "-", &save))
        for (int k = 0; k < g->count; k++)
            if (strcmp(g->names[k], tok) == 0) mask[k] = 1;
    return generate_masked_orthogonal_rank_groups(g->world_size, g->ordered_size, mask, g->count, ranks);
}

/* ---- comparison ---- */

static const char *dimension_names[NUM_DIMS] = {"tp", "cp", "ep", "dp", "pp"};

/* Megatron's token for a set of dimensions, e.g. "tp-pp" */
static void token_of(int dimension_mask, char *token, size_t size) {
    token[0] = '\0';
    for (int d = 0; d < NUM_DIMS; d++)
        if (dimension_mask & DIM_BIT(d))
            snprintf(token + strlen(token), size - strlen(token), "%s%s", token[0] ? "-" : "", dimension_names[d]);
}

static void describe_groups(const int *ranks, int world_size, int group_size, char *text, size_t size) {
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < world_size && used + 8 < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%d%s", i % group_size ? "," : "[", ranks[i],
                                 (i + 1) % group_size ? "" : "]");
}

/* our flag's order (all five names) against the Megatron order it stands for */
static void check_order(const char *ours, const char *megatron, int max_cp, int *cases_total) {
    static const int tp_sizes[] = {1, 2, 4, 8}, pp_sizes[] = {1, 2, 4}, dp_sizes[] = {1, 2, 3, 4};
    int cases = 0, group_mismatches = 0, coord_mismatches = 0, descending = 0;
    char first[512] = "";
    for (size_t i = 0; i < sizeof tp_sizes / sizeof *tp_sizes; i++)
        for (size_t j = 0; j < sizeof pp_sizes / sizeof *pp_sizes; j++)
            for (size_t k = 0; k < sizeof dp_sizes / sizeof *dp_sizes; k++)
            for (int cp = 1; cp <= max_cp; cp *= 2) {
                int tp = tp_sizes[i], pp = pp_sizes[j], dp = dp_sizes[k], world_size = tp * pp * dp * cp;
                if (world_size > MAX_WORLD) continue;
                parallel_layout layout = {tp, pp, dp, "", 1, 0, cp, 0};
                snprintf(layout.order, sizeof layout.order, "%s", ours);
                rank_generator generator;
                if (!rank_generator_init(&generator, tp, 1, dp, pp, cp, megatron)) {
                    group_mismatches++;
                    continue;
                }
                for (int mask = 1; mask < DIM_BIT(NUM_DIMS); mask++) {
                    int expected[MAX_WORLD], got[MAX_WORLD];
                    char token[32];
                    token_of(mask, token, sizeof token);
                    int expected_size = get_ranks(&generator, token, expected);
                    int got_size = parallel_layout_groups(&layout, mask, got);
                    cases++;
                    for (int index = 1; index < world_size; index++)
                        if (index % got_size && got[index] < got[index - 1]) descending++;
                    if (got_size != expected_size || memcmp(got, expected, sizeof(int) * (size_t)world_size) != 0) {
                        if (!group_mismatches++) {
                            char text_got[200], text_expected[200];
                            describe_groups(got, world_size, got_size, text_got, sizeof text_got);
                            describe_groups(expected, world_size, expected_size, text_expected, sizeof text_expected);
                            snprintf(first, sizeof first, "tp %d pp %d dp %d cp %d, groups of %s: ours %s, Megatron %s", tp,
                                     pp, dp, cp, token, text_got, text_expected);
                        }
                    }
                }
                /* a rank's coordinate in a dimension is its rank in that dimension's group */
                for (int d = 0; d < NUM_DIMS; d++) {
                    int expected[MAX_WORLD];
                    int group_size = get_ranks(&generator, dimension_names[d], expected);
                    for (int index = 0; index < world_size; index++) {
                        int coord[NUM_DIMS];
                        parallel_layout_coords(&layout, expected[index], coord);
                        if (coord[d] != index % group_size) coord_mismatches++;
                    }
                }
            }
    if (!tap_ok(group_mismatches == 0, "order %s (Megatron's %s): the groups of all %d dimension sets x layouts equal "
                "RankGenerator.get_ranks, ranks within each group in its order", ours, megatron, cases))
        tap_diag("first difference: %s", first);
    tap_ok(descending == 0, "order %s: every group's members ascend (so a rank's place is its rank in Megatron's process group, "
           "whether or not torch sorts)", ours);
    tap_ok(coord_mismatches == 0, "order %s: each rank's coordinate is its rank in that dimension's Megatron group", ours);
    *cases_total += cases;
}

/* one set of groups for a layout, written out by hand */
static void check_example_ep(int tp, int pp, int dp, int ep, const char *order, int dimension_mask,
                             const char *expected, const char *source) {
    parallel_layout dense = {tp, pp, dp, "", ep, 0, 1, 0};
    snprintf(dense.order, sizeof dense.order, "%s", order);
    parallel_layout layout = ep > 1 ? parallel_layout_experts(&dense) : dense;
    snprintf(layout.order, sizeof layout.order, "%s", order);
    int ranks[MAX_WORLD];
    char text[512], token[32];
    int group_size = parallel_layout_groups(&layout, dimension_mask, ranks);
    describe_groups(ranks, tp * pp * dp, group_size, text, sizeof text);
    token_of(dimension_mask, token, sizeof token);
    if (!tap_ok(strcmp(text, expected) == 0, "%s: %d ranks, tp %d pp %d dp %d%s, order %s, %s groups %s", source,
                tp * pp * dp, tp, pp, dp, ep > 1 ? " (expert layout, ep split off dp)" : "", order, token, expected))
        tap_diag("got %s", text);
}

/* the expert layout with an expert tensor-parallel size etp other than tp (Megatron's expert
 * RankGenerator(tp=etp, ep, dp=tp dp/(etp ep), pp) over the dense order) */
static void check_example_etp(int tp, int pp, int dp, int ep, int etp, int dimension_mask, const char *expected,
                              const char *source) {
    parallel_layout dense = {tp, pp, dp, "tp-cp-ep-dp-pp", ep, 0, 1, etp};
    parallel_layout layout = parallel_layout_experts(&dense);
    int ranks[MAX_WORLD];
    char text[512], token[32];
    int group_size = parallel_layout_groups(&layout, dimension_mask, ranks);
    describe_groups(ranks, tp * pp * dp, group_size, text, sizeof text);
    token_of(dimension_mask, token, sizeof token);
    if (!tap_ok(strcmp(text, expected) == 0 && layout.tensor_model_parallel_size == etp &&
                    layout.data_parallel_size == tp * dp / (etp * ep),
                "%s: %d ranks, tp %d pp %d dp %d, expert layout etp %d ep %d (expert-dp %d), %s groups %s", source,
                tp * pp * dp, tp, pp, dp, etp, ep, tp * dp / (etp * ep), token, expected))
        tap_diag("got %s (expert layout tp %d dp %d)", text, layout.tensor_model_parallel_size, layout.data_parallel_size);
}

static void check_example(int tp, int pp, int dp, const char *order, int dimension_mask, const char *expected,
                          const char *source) {
    check_example_ep(tp, pp, dp, 1, order, dimension_mask, expected, source);
}

int main(void) {
    int cases = 0;
    /* context parallelism of 1, 2 and 4 where Megatron's order names cp */
    check_order("tp-cp-ep-dp-pp", "tp-cp-ep-dp-pp", 4, &cases); /* the default of both */
    check_order("tp-cp-ep-pp-dp", "tp-cp-ep-pp-dp", 4, &cases); /* Megatron's --use-tp-pp-dp-mapping */
    check_order("tp-dp-pp-cp-ep", "tp-dp-pp", 1, &cases);  /* Megatron appends a left-out name of size 1 only */
    check_order("tp-pp-dp-cp-ep", "tp-pp-dp", 1, &cases);
    check_order("cp-tp-ep-pp-dp", "tp-pp-dp", 1, &cases);       /* size-1 dimensions go anywhere */
    check_order("dp-tp-cp-ep-pp", "dp-tp-pp", 1, &cases);
    check_order("pp-dp-tp-cp-ep", "pp-dp-tp", 1, &cases);       /* pipeline fastest */
    check_order("dp-pp-cp-ep-tp", "dp-pp-tp", 1, &cases);
    tap_diag("%d (order, layout, dimension set) cases compared with Megatron's RankGenerator", cases);

    /* initialize_model_parallel's docstring: 16 GPUs, tensor 2, pipeline 4 (so data 2) */
    const char *docstring = "initialize_model_parallel docstring";
    check_example(2, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_TP), "[0,1][2,3][4,5][6,7][8,9][10,11][12,13][14,15]", docstring);
    check_example(2, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_PP), "[0,4,8,12][1,5,9,13][2,6,10,14][3,7,11,15]", docstring);
    check_example(2, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_DP), "[0,2][1,3][4,6][5,7][8,10][9,11][12,14][13,15]", docstring);
    /* generate_masked_orthogonal_rank_groups' docstring: 8 GPUs, tp-pp-dp, sizes 2-2-2 */
    const char *generator = "generate_masked_orthogonal_rank_groups docstring";
    check_example(2, 2, 2, "tp-pp-dp-cp-ep", DIM_BIT(DIM_DP), "[0,4][1,5][2,6][3,7]", generator);
    /* and its [tp, dp, pp] = [2, 3, 4]: dp_group[0] = [0, 2, 4], dp_group[1] = [1, 3, 5], ...,
     * dp_group[7] = [19, 21, 23] */
    check_example(2, 4, 3, "tp-dp-pp-cp-ep", DIM_BIT(DIM_DP),
                  "[0,2,4][1,3,5][6,8,10][7,9,11][12,14,16][13,15,17][18,20,22][19,21,23]", generator);
    /* the model-parallel group of that 16-GPU layout: one replica's tp x pp ranks */
    check_example(2, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_TP) | DIM_BIT(DIM_PP),
                  "[0,1,4,5,8,9,12,13][2,3,6,7,10,11,14,15]", "by hand");
    /* pipeline before tensor in the order: the model-parallel group's ranks follow the order too
     * (pp fastest here), not tp first: rank 1 (pp 1, tp 0) is second, rank 4 (pp 0, tp 1) third */
    check_example(2, 2, 2, "pp-dp-tp-cp-ep", DIM_BIT(DIM_TP) | DIM_BIT(DIM_PP), "[0,1,4,5][2,3,6,7]", "by hand");
    /* the expert layout (Megatron's expert RankGenerator, tp-ep-dp-pp): 8 ranks, tp 2, data
     * parallel 4 split into ep 2 (faster) x expert-dp 2; rank = tp + 2 ep + 4 edp */
    const char *experts = "expert rank generator, by hand";
    check_example_ep(2, 1, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_EP), "[0,2][1,3][4,6][5,7]", experts);
    check_example_ep(2, 1, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_DP), "[0,4][1,5][2,6][3,7]", experts);
    check_example_ep(2, 1, 4, 2, "tp-cp-ep-dp-pp", DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP),
                     "[0,1,2,3][4,5,6,7]", experts);
    /* --expert-tensor-parallel-size 1 with tp 2 (Megatron's expert RankGenerator(tp=1, ep, dp=tp dp/ep,
     * pp), order tp-ep-dp-pp): 8 ranks, tp 2 x dp 2 x pp 2, ep 2: rank = ep + 2 edp + 4 pp, so an
     * expert-parallel group is a tensor-parallel pair; ep 4 on tp 2 x dp 2: all four ranks */
    const char *etp = "expert rank generator with etp 1, by hand";
    check_example_etp(2, 2, 2, 2, 1, DIM_BIT(DIM_EP), "[0,1][2,3][4,5][6,7]", etp);
    check_example_etp(2, 2, 2, 2, 1, DIM_BIT(DIM_DP), "[0,2][1,3][4,6][5,7]", etp);
    check_example_etp(2, 2, 2, 2, 1, DIM_BIT(DIM_TP), "[0][1][2][3][4][5][6][7]", etp);
    check_example_etp(2, 2, 2, 2, 1, DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP), "[0,1,4,5][2,3,6,7]", etp);
    check_example_etp(2, 1, 2, 4, 1, DIM_BIT(DIM_EP), "[0,1,2,3]", etp);
    check_example_etp(2, 1, 2, 1, 1, DIM_BIT(DIM_DP), "[0,1,2,3]", etp);
    /* --expert-tensor-parallel-size 2 with tp 4 (RankGenerator(tp=2, ep, dp=tp dp/(2 ep), pp)):
     * 8 ranks, tp 4 x dp 2, ep 2: rank = etp + 2 ep + 4 edp, so each tensor-parallel group
     * [0..3] holds two expert tensor-parallel pairs [0,1] [2,3] that are each other's
     * expert-parallel peers, and the expert-data-parallel groups cross the data-parallel replicas;
     * ep 1: rank = etp + 2 edp, the pairs of both replicas are expert-data-parallel peers */
    const char *etp2 = "expert rank generator with etp 2 < tp 4, by hand";
    check_example_etp(4, 1, 2, 2, 2, DIM_BIT(DIM_TP), "[0,1][2,3][4,5][6,7]", etp2);
    check_example_etp(4, 1, 2, 2, 2, DIM_BIT(DIM_EP), "[0,2][1,3][4,6][5,7]", etp2);
    check_example_etp(4, 1, 2, 2, 2, DIM_BIT(DIM_DP), "[0,4][1,5][2,6][3,7]", etp2);
    check_example_etp(4, 1, 2, 2, 2, DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP), "[0,1,2,3][4,5,6,7]", etp2);
    check_example_etp(4, 1, 2, 1, 2, DIM_BIT(DIM_EP), "[0][1][2][3][4][5][6][7]", etp2);
    check_example_etp(4, 1, 2, 1, 2, DIM_BIT(DIM_DP), "[0,2,4,6][1,3,5,7]", etp2);
    /* with pipeline stages: tp 4 x pp 2, ep 2, etp 2: rank = etp + 2 ep + 4 pp */
    check_example_etp(4, 2, 1, 2, 2, DIM_BIT(DIM_EP), "[0,2][1,3][4,6][5,7]", etp2);
    check_example_etp(4, 2, 1, 2, 2, DIM_BIT(DIM_TP) | DIM_BIT(DIM_EP) | DIM_BIT(DIM_PP), "[0,1,2,3,4,5,6,7]", etp2);
    /* etp equal to tp: the expert layout of today (ep split off dp) */
    check_example_etp(2, 1, 4, 2, 2, DIM_BIT(DIM_EP), "[0,2][1,3][4,6][5,7]", "expert rank generator with etp = tp, by hand");
    /* with pipeline stages: 16 ranks, tp 1, dp 4 = ep 4 x edp 1, pp 4: each stage's dp group
     * is its ep group, and the expert-data-parallel groups are single ranks */
    check_example_ep(1, 4, 4, 4, "tp-cp-ep-dp-pp", DIM_BIT(DIM_EP), "[0,1,2,3][4,5,6,7][8,9,10,11][12,13,14,15]", experts);
    return tap_done();
}
