/* fixed_tree_reduce.c: see fixed_tree_reduce.h. */
#include "app/optim/fixed_tree_reduce.h"
#include "app/core/error.h"
#include "app/model/grad_first_write.h"

#include <stdlib.h>
#include <string.h>

enum { TREE_TAG = 0x7e3 }; /* point-to-point tag of the exchanges (the data-parallel group carries no others) */

static int is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

const char *fixed_tree_unsupported(const kernel_ops *ops, int data_parallel_size, int context_parallel_size,
                                   int num_experts) {
    if (!ops->add_float || !ops->sum_squares_pieces) return "this backend lacks the kernels add_float and sum_squares_pieces";
    if (!is_power_of_two(data_parallel_size) || data_parallel_size > FIXED_TREE_NORM_BLOCKS)
        return "the data-parallel size is not a power of two up to 64";
    if (num_experts > 0) return "mixture-of-experts models are not covered";
    if (context_parallel_size > 1) return "context parallelism is not covered";
    return NULL;
}

void fixed_tree_create(fixed_tree *t, gpt_model *model, const comm_ops *comm, const topology *topo) {
    memset(t, 0, sizeof *t);
    t->model = model;
    t->comm = comm;
    t->topo = topo;
    for (int b = 0; b < model->num_buckets; b++)
        CHECK(model->buckets[b].length % FIXED_TREE_NORM_BLOCKS == 0, "fixed tree: bucket %d of %zu elements is not "
              "padded to a multiple of %d", b, model->buckets[b].length, FIXED_TREE_NORM_BLOCKS);
    int chunks = model->num_chunks;
    t->height = calloc((size_t)chunks, sizeof *t->height);
    t->next_slot = calloc((size_t)chunks, sizeof *t->next_slot);
    t->chunk_start = calloc((size_t)chunks, sizeof *t->chunk_start);
    t->chunk_length = calloc((size_t)chunks, sizeof *t->chunk_length);
    CHECK(t->height && t->next_slot && t->chunk_start && t->chunk_length, "out of host memory for the fixed tree");
    /* a chunk's range: its buckets (buckets do not cross chunks; their padding is included) */
    size_t largest = 0;
    for (int b = 0; b < model->num_buckets; b++) {
        const grad_bucket *bucket = &model->buckets[b];
        if (bucket->length > largest) largest = bucket->length;
        if (bucket->num_params == 0) continue;
        int c = model->params[bucket->first_param].chunk;
        size_t lo = bucket->start, hi = bucket->start + bucket->length;
        if (t->chunk_length[c]) {  /* widen the chunk's range [start, start + length) */
            size_t end = t->chunk_start[c] + t->chunk_length[c];
            if (t->chunk_start[c] < lo) lo = t->chunk_start[c];
            if (end > hi) hi = end;
        }
        t->chunk_start[c] = lo;
        t->chunk_length[c] = hi - lo;
    }
    t->scratch_elements = largest / 2 + 1;
    t->scratch = model->ops->alloc(sizeof(float) * t->scratch_elements);
}

void fixed_tree_free(fixed_tree *t) {
    const kernel_ops *ops = t->model->ops;
    for (int i = 0; i < t->capacity; i++) ops->release(t->stack[i]);
    if (t->scratch) ops->release(t->scratch);
    free(t->stack);
    free(t->order);
    free(t->combines);
    free(t->height);
    free(t->next_slot);
    free(t->chunk_start);
    free(t->chunk_length);
    memset(t, 0, sizeof *t);
}

/* the leaves of T(list) in order into order[*k ..], and after each subtree's last leaf the sum
 * that joins its two halves */
static void build_tree(fixed_tree *t, const int *list, int length, int *k) {
    if (length == 1) {
        t->order[(*k)++] = list[0];
        return;
    }
    int evens = (length + 1) / 2, odds = length / 2;
    int *halves = malloc(sizeof(int) * (size_t)length);
    CHECK(halves, "out of host memory for the fixed tree");
    for (int i = 0; i < length; i++) halves[i % 2 ? evens + i / 2 : i / 2] = list[i];
    build_tree(t, halves, evens, k);
    build_tree(t, halves + evens, odds, k);
    t->combines[*k - 1]++;
    free(halves);
}

void fixed_tree_begin(fixed_tree *t, int m) {
    CHECK(m >= 1, "fixed tree: %d micro-batches", m);
    for (int c = 0; c < t->model->num_chunks; c++) t->height[c] = t->next_slot[c] = 0;
    if (m == t->num_micro_batches) return;
    free(t->order);
    free(t->combines);
    t->order = malloc(sizeof(int) * (size_t)m);
    t->combines = calloc((size_t)m, sizeof(int));
    int *list = malloc(sizeof(int) * (size_t)m);
    CHECK(t->order && t->combines && list, "out of host memory for the fixed tree");
    for (int i = 0; i < m; i++) list[i] = i;
    int k = 0;
    build_tree(t, list, m, &k);
    free(list);
    int height = 0;
    t->depth = 0;
    for (int s = 0; s < m; s++) {
        height++;
        if (height > t->depth) t->depth = height;
        height -= t->combines[s];
    }
    CHECK(height == 1, "fixed tree: the program leaves %d sums", height);
    t->num_micro_batches = m;
    if (m > 1 && t->depth > t->capacity) {
        const kernel_ops *ops = t->model->ops;
        t->stack = realloc(t->stack, sizeof(float *) * (size_t)t->depth);
        CHECK(t->stack, "out of host memory for the fixed tree");
        for (int i = t->capacity; i < t->depth; i++) t->stack[i] = ops->alloc(sizeof(float) * t->model->num_elements);
        t->capacity = t->depth;
    }
}

int fixed_tree_micro_batch_of_slot(const fixed_tree *t, int slot) {
    CHECK(slot >= 0 && slot < t->num_micro_batches, "fixed tree: slot %d of %d", slot, t->num_micro_batches);
    return t->order[slot];
}

void fixed_tree_clear_chunk(fixed_tree *t, int chunk, int slot) {
    CHECK(slot == t->next_slot[chunk], "fixed tree: chunk %d clears for micro-batch %d, expected %d", chunk, slot,
          t->next_slot[chunk]);
    if (t->chunk_length[chunk] == 0 || slot == 0) return; /* the step's start cleared them for the first */
    /* as the step's start: the weight matrices pending (their first weight-gradient GEMM writes
     * them over, as in slot 0 on another rank: the same GEMM, the same bits), the rest cleared */
    grad_first_write_restart(t->model, t->chunk_start[chunk], t->chunk_length[chunk]);
}

void fixed_tree_push_chunk(fixed_tree *t, int chunk, int slot) {
    CHECK(slot == t->next_slot[chunk], "fixed tree: chunk %d's backward of micro-batch %d, expected %d", chunk, slot,
          t->next_slot[chunk]);
    t->next_slot[chunk]++;
    size_t start = t->chunk_start[chunk], n = t->chunk_length[chunk];
    if (t->num_micro_batches == 1 || n == 0) return; /* one leaf: the gradients are the sum */
    const kernel_ops *ops = t->model->ops;
    float *grads = t->model->grad_buffer + start;
    int h = t->height[chunk];
    ops->copy(t->stack[h] + start, grads, sizeof(float) * n);
    h++;
    for (int c = 0; c < t->combines[slot]; c++, h--)
        ops->add_float(t->stack[h - 2] + start, t->stack[h - 2] + start, t->stack[h - 1] + start, n);
    t->height[chunk] = h;
    if (slot == t->num_micro_batches - 1) {
        CHECK(h == 1, "fixed tree: chunk %d ends with %d sums", chunk, h);
        ops->copy(grads, t->stack[0] + start, sizeof(float) * n);
        t->height[chunk] = 0;
    }
}

/* one pairwise exchange: send [send_at, +count) to partner, receive its part into into */
static void exchange(fixed_tree *t, const float *send, float *into, size_t count, int partner, const comm_group *group) {
    comm_request request;
    memset(&request, 0, sizeof request);
    t->comm->send(send, count, COMM_FLOAT, partner, TREE_TAG, group, &request);
    t->comm->recv(into, count, COMM_FLOAT, partner, TREE_TAG, group);
    t->comm->wait(&request);
}

void fixed_tree_reduce_bucket(fixed_tree *t, int b, const comm_group *group, int reduce_scatter) {
    int size = group->size, rank = group->rank;
    if (size == 1) return;
    const grad_bucket *bucket = &t->model->buckets[b];
    CHECK(bucket->length % (size_t)size == 0, "fixed tree: bucket %d of %zu elements over %d ranks", b, bucket->length, size);
    float *grads = t->model->grad_buffer + bucket->start;
    size_t lo = 0, hi = bucket->length;
    /* recursive halving: partners r and r ^ s keep the half of their range that holds their
     * final shard and add the partner's copy of it: T(c mod s) = T(c mod 2s) + T(c + s mod 2s) */
    for (int s = size / 2; s >= 1; s /= 2) {
        size_t mid = lo + (hi - lo) / 2;
        int keep_low = !(rank & s);
        size_t keep = keep_low ? lo : mid, give = keep_low ? mid : lo, count = (hi - lo) / 2;
        exchange(t, grads + give, t->scratch, count, rank ^ s, group);
        t->model->ops->add_float(grads + keep, grads + keep, t->scratch, count);
        lo = keep;
        hi = keep + count;
    }
    CHECK(lo == (size_t)rank * (bucket->length / (size_t)size), "fixed tree: rank %d ends with [%zu, %zu)", rank, lo, hi);
    if (reduce_scatter) return;
    /* recursive doubling: the shards come back, copies only */
    for (int s = 1; s < size; s *= 2) {
        size_t count = hi - lo;
        size_t other = (rank & s) ? lo - count : hi;
        exchange(t, grads + lo, grads + other, count, rank ^ s, group);
        if (other < lo) lo = other;
        else hi = other + count;
    }
}

/* T over values[0 .. n) by the tree's recursion (the association the gradients' stack makes) */
static double tree_sum(const double *values, int n) {
    if (n == 1) return values[0];
    int evens = (n + 1) / 2;
    double *halves = malloc(sizeof(double) * (size_t)n);
    CHECK(halves, "out of host memory for the fixed tree");
    for (int i = 0; i < n; i++) halves[i % 2 ? evens + i / 2 : i / 2] = values[i];
    double sum = tree_sum(halves, evens) + tree_sum(halves + evens, n / 2);
    free(halves);
    return sum;
}

/* every rank's value in its place, one contributor per entry (x + 0 = x exactly), then the
 * pairwise sums of the halving: r with r + size/2, then r + size/4, ... */
static double across_ranks(const fixed_tree *t, double value, const comm_group *group) {
    int size = group->size;
    if (size == 1) return value;
    double *all = calloc((size_t)size, sizeof(double));
    CHECK(all, "out of host memory for the fixed tree");
    all[group->rank] = value;
    t->comm->allreduce_double_host(all, (size_t)size, COMM_SUM, group);
    for (int s = size / 2; s >= 1; s /= 2)
        for (int r = 0; r < s; r++) all[r] = all[r] + all[r + s];
    double sum = all[0];
    free(all);
    return sum;
}

double fixed_tree_loss_sum(const fixed_tree *t, const double *losses, const comm_group *group) {
    int m = t->num_micro_batches;
    double *by_micro_batch = malloc(sizeof(double) * (size_t)m);
    CHECK(by_micro_batch, "out of host memory for the fixed tree");
    for (int k = 0; k < m; k++) by_micro_batch[t->order[k]] = losses[k];
    double local = tree_sum(by_micro_batch, m);
    free(by_micro_batch);
    return across_ranks(t, local, group);
}

/* the bucket holding flat offset `at` */
static int bucket_at(const gpt_model *m, size_t at) {
    for (int b = 0; b < m->num_buckets; b++)
        if (at >= m->buckets[b].start && at < m->buckets[b].start + m->buckets[b].length) return b;
    FATAL("fixed tree: offset %zu lies in no gradient bucket", at);
}

static int by_offset(const void *a, const void *b) {
    size_t x = ((const tensor_range *)a)->offset, y = ((const tensor_range *)b)->offset;
    return x < y ? -1 : x > y;
}

/* The norm's pieces: the elements the ranges cover (sorted, adjacent ranges joined) cut at the
 * blocks' bounds, in order; block[i] is piece i's block (bucket * FIXED_TREE_NORM_BLOCKS + k).
 * They depend only on which elements are covered, not on how the ranges split them (the
 * optimizer's ranges differ with the data-parallel size and the distributed optimizer). Returns
 * the count; *pieces and *block are malloc'ed. */
static int norm_pieces(const gpt_model *m, const tensor_range *ranges, int count, tensor_range **pieces_out,
                       size_t **block_out) {
    tensor_range *runs = malloc(sizeof(tensor_range) * (size_t)(count ? count : 1));
    CHECK(runs, "out of host memory for the gradient norm's pieces");
    int num_runs = 0;
    for (int r = 0; r < count; r++)
        if (ranges[r].length > 0) runs[num_runs++] = (tensor_range){.offset = ranges[r].offset, .length = ranges[r].length};
    qsort(runs, (size_t)num_runs, sizeof *runs, by_offset);
    int joined = 0;
    for (int r = 0; r < num_runs; r++) {
        tensor_range *last = joined ? &runs[joined - 1] : NULL;
        if (last) CHECK(last->offset + last->length <= runs[r].offset, "fixed tree: the norm's ranges overlap at %zu",
                        runs[r].offset);
        if (last && last->offset + last->length == runs[r].offset) last->length += runs[r].length;
        else runs[joined++] = runs[r];
    }
    size_t capacity = (size_t)joined + (size_t)m->num_buckets * FIXED_TREE_NORM_BLOCKS + 1;
    tensor_range *pieces = malloc(sizeof(tensor_range) * capacity);
    size_t *block = malloc(sizeof(size_t) * capacity);
    CHECK(pieces && block, "out of host memory for the gradient norm's pieces");
    size_t n = 0;
    for (int r = 0; r < joined; r++) {
        size_t at = runs[r].offset, end = runs[r].offset + runs[r].length;
        while (at < end) {
            int b = bucket_at(m, at);
            const grad_bucket *bucket = &m->buckets[b];
            size_t block_length = bucket->length / FIXED_TREE_NORM_BLOCKS;
            CHECK(block_length * FIXED_TREE_NORM_BLOCKS == bucket->length, "fixed tree: bucket %d of %zu elements", b,
                  bucket->length);
            size_t k = (at - bucket->start) / block_length;
            size_t block_end = bucket->start + (k + 1) * block_length;
            size_t piece_end = end < block_end ? end : block_end;
            CHECK(n < capacity, "fixed tree: more norm pieces than %zu", capacity);
            pieces[n] = (tensor_range){.offset = at, .length = piece_end - at};
            block[n] = (size_t)b * FIXED_TREE_NORM_BLOCKS + k;
            n++;
            at = piece_end;
        }
    }
    free(runs);
    CHECK(n <= (size_t)2147483647, "fixed tree: %zu norm pieces", n);
    *pieces_out = pieces;
    *block_out = block;
    return (int)n;
}

double fixed_tree_sum_squares(const fixed_tree *t, const tensor_range *ranges, int count, int distributed,
                              const comm_group *data_parallel, const comm_group *model_parallel) {
    const gpt_model *m = t->model;
    size_t blocks = (size_t)m->num_buckets * FIXED_TREE_NORM_BLOCKS;
    double *sums = calloc(blocks ? blocks : 1, sizeof(double));
    CHECK(sums, "out of host memory for the gradient norm's blocks");
    tensor_range *pieces;
    size_t *block;
    int n = norm_pieces(m, ranges, count, &pieces, &block);
    double *piece_sums = malloc(sizeof(double) * (size_t)(n ? n : 1));
    CHECK(piece_sums, "out of host memory for the gradient norm's pieces");
    if (n > 0) m->ops->sum_squares_pieces(piece_sums, m->grad_buffer, pieces, n);
    /* a block's pieces in order (they are the same at every data-parallel size) */
    for (int i = 0; i < n; i++) sums[block[i]] += piece_sums[i];
    free(pieces);
    free(block);
    free(piece_sums);
    /* the distributed optimizer's shards: each block is one rank's, the others add zeros */
    if (distributed && data_parallel->size > 1) t->comm->allreduce_double_host(sums, blocks, COMM_SUM, data_parallel);
    double total = 0.0;
    for (size_t i = 0; i < blocks; i++) total += sums[i];
    free(sums);
    t->comm->allreduce_double_host(&total, 1, COMM_SUM, model_parallel);
    return total;
}
