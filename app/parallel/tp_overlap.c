/* tp_overlap.c: the block schedules of tp_overlap.h over comm_ops' one-sided windows. Peers are
 * visited in ring order (rank+1, rank+2, ... for the gather; the reduce-scatter's partials
 * arrive from rank-1, rank-2, ... first), so with more than two ranks no peer is the target of
 * every first copy at once. */
#include "app/parallel/tp_overlap.h"

static int ranks(const tensor_parallel_comm *tp) { return tp->group->size; }
static int me(const tensor_parallel_comm *tp) { return tp->group->rank; }
static char *block_at(const void *base, int block, size_t block_bytes) {
    return (char *)base + (size_t)block * block_bytes;
}

int tp_gather_order(const tensor_parallel_comm *tp, int i) { return (me(tp) + i) % ranks(tp); }

void tp_gather_start(const tensor_parallel_comm *tp, void *full, const void *own, size_t block_bytes,
                     comm_request *requests) {
    char *own_block = block_at(full, me(tp), block_bytes);
    int in_place = own == own_block;
    if (!in_place) tp->ops->copy(own_block, own, block_bytes);
    for (int i = 1; i < ranks(tp); i++) tp->comm->post(own, block_bytes, tp_gather_order(tp, i), tp->group);
    for (int i = 1; i < ranks(tp); i++) {
        int peer = tp_gather_order(tp, i);
        /* the peer's rows sit at the same place in its buffer: block `peer` of full, or own */
        const void *src = in_place ? block_at(full, peer, block_bytes) : own;
        tp->comm->fetch(block_at(full, peer, block_bytes), src, block_bytes, peer, tp->group, &requests[peer]);
    }
}

void tp_gather_wait(const tensor_parallel_comm *tp, int block, comm_request *requests) {
    if (block != me(tp)) tp->comm->wait(&requests[block]);
}

void tp_gather_finish(const tensor_parallel_comm *tp, comm_request *requests) {
    for (int i = 1; i < ranks(tp); i++) tp->comm->wait(&requests[tp_gather_order(tp, i)]);
    tp->comm->window_flush(tp->group);
}

int tp_reduce_scatter_order(const tensor_parallel_comm *tp, int i) { return (me(tp) + i) % ranks(tp); }

void tp_reduce_scatter_post(const tensor_parallel_comm *tp, const void *partial, int block, size_t block_bytes) {
    tp->comm->post(block_at(partial, block, block_bytes), block_bytes, block, tp->group);
}

void tp_reduce_scatter_fetch(const tensor_parallel_comm *tp, const void *partial, void *received,
                             size_t block_bytes, comm_request *requests) {
    const void *own_block = block_at(partial, me(tp), block_bytes);
    for (int i = 1; i < ranks(tp); i++) {
        int peer = (me(tp) + ranks(tp) - i) % ranks(tp); /* who computes this rank's block i-th */
        tp->comm->fetch(block_at(received, peer, block_bytes), own_block, block_bytes, peer, tp->group,
                        &requests[peer]);
    }
}

void tp_reduce_scatter_finish(const tensor_parallel_comm *tp, void *out, const void *partial, const void *received,
                              size_t block_elements, size_t block_bytes, comm_request *requests) {
    for (int i = 1; i < ranks(tp); i++) tp->comm->wait(&requests[(me(tp) + ranks(tp) - i) % ranks(tp)]);
    tp->ops->sum_blocks(out, block_at(partial, me(tp), block_bytes), received, ranks(tp), me(tp), block_elements);
    tp->comm->window_flush(tp->group);
}
