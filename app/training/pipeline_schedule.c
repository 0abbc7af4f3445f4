/* pipeline_schedule.c: see pipeline_schedule.h. The order of a stage's steps is computed first
 * (pipeline_schedule_steps, pure), then pipeline_run executes it step by step with each step's
 * receive and send. */
#include "app/training/pipeline_schedule.h"
#include "app/core/error.h"
#include "app/core/timers.h"
#include "perf/metrics/papi_phases.h"

#include <stdlib.h>
#include <string.h>

/* Append the forward or backward of virtual micro-batch k (0 <= k < nmb vp). As in Megatron's
 * get_schedule_table (microbatch_group_size_per_vp_stage at its default, pp), groups of pp
 * micro-batches go through chunk 0, then chunk 1, ...: k is micro-batch (k / (pp vp)) pp + k mod pp
 * on chunk (k mod (pp vp)) / pp, chunks reversed for backwards (get_model_chunk_id). With vp = 1
 * this is micro-batch k on chunk 0. */
static int add_step(pipeline_step *out, int count, pipeline_step_kind kind, int pp_size,
                    int virtual_stages, int virtual_micro_batch) {
    if (out) {
        int group_span = pp_size * virtual_stages;
        int chunk = (virtual_micro_batch % group_span) / pp_size;
        out[count].kind = kind;
        out[count].micro_batch = (virtual_micro_batch / group_span) * pp_size + virtual_micro_batch % pp_size;
        out[count].model_chunk = kind == PIPELINE_FORWARD ? chunk : virtual_stages - 1 - chunk;
    }
    return count + 1;
}

/* Warm-up forwards: pp - stage - 1 (1F1B) or 2 (pp - stage - 1) + (vp - 1) pp (interleaved), at most
 * all of them (Megatron's get_pp_rank_microbatches); then one forward and one backward at a time;
 * then the remaining backwards. */
int pipeline_schedule_steps(int pp_size, int pp_stage, int virtual_stages, int num_micro_batches,
                            int forward_only, pipeline_step *out) {
    if (virtual_stages > 1 && (pp_size < 2 || num_micro_batches % pp_size != 0)) return -1;
    int total = num_micro_batches * virtual_stages;
    int warmup = virtual_stages > 1 ? 2 * (pp_size - pp_stage - 1) + (virtual_stages - 1) * pp_size
                                    : pp_size - pp_stage - 1;
    if (forward_only || warmup > total) warmup = total;
    int count = 0;
    for (int k = 0; k < warmup; k++)
        count = add_step(out, count, PIPELINE_FORWARD, pp_size, virtual_stages, k);
    for (int k = 0; k < total - warmup; k++) {
        count = add_step(out, count, PIPELINE_FORWARD, pp_size, virtual_stages, warmup + k);
        count = add_step(out, count, PIPELINE_BACKWARD, pp_size, virtual_stages, k);
    }
    if (!forward_only)
        for (int k = total - warmup; k < total; k++)
            count = add_step(out, count, PIPELINE_BACKWARD, pp_size, virtual_stages, k);
    return count;
}

int pipeline_activation_slots(int pp_size, int virtual_stages, int num_micro_batches) {
    int count = pipeline_schedule_steps(pp_size, 0, virtual_stages, num_micro_batches, 0, NULL);
    if (count <= 0) return 1;
    pipeline_step *steps = malloc(sizeof(pipeline_step) * (size_t)count);
    int *in_flight = malloc(sizeof(int) * (size_t)virtual_stages);
    CHECK(steps && in_flight, "out of host memory for the pipeline schedule");
    int most = 1;
    for (int stage = 0; stage < pp_size; stage++) {
        pipeline_schedule_steps(pp_size, stage, virtual_stages, num_micro_batches, 0, steps);
        memset(in_flight, 0, sizeof(int) * (size_t)virtual_stages);
        for (int i = 0; i < count; i++) {
            int *held = &in_flight[steps[i].model_chunk];
            *held += steps[i].kind == PIPELINE_FORWARD ? 1 : -1;
            if (*held > most) most = *held;
        }
    }
    free(steps);
    free(in_flight);
    return most;
}

/* send buffers: a pool reused once their sends have completed */
typedef struct send_buffer { void *data; comm_request request; } send_buffer;

typedef struct schedule_state {
    gpt_model *model;
    data_parallel *dp;
    const comm_ops *comm;
    const topology *topo;
    const micro_batch_source *source;
    int nmb, vp, pp, stage;
    float grad_scale;
    int *slot_of;          /* [chunk * nmb + micro_batch] -> activation slot */
    int *slot_busy;        /* [chunk * slots + slot] */
    send_buffer *pool;
    int pool_size, pool_capacity;
    double loss_sum;
    double *losses;         /* [nmb] each micro-batch's loss sum, or NULL */
    fixed_tree *tree;       /* --deterministic-mode's gradient order (training only), or NULL */
    int timed;              /* --timing-log-level 2 and a training batch */
    int combine_next;       /* this step's send and the next step's receive are one timer */
    const char *comm_timer; /* the send/receive timer running, NULL when none */
} schedule_state;

/* Megatron's level-2 timers (p2p_communication.py) around this stage's sends and receives. A
 * send followed directly by the next step's receive in the other direction is one timer, as
 * Megatron's combined calls of the 1F1B steady state: forward-send-backward-recv,
 * backward-send-forward-recv. Elsewhere: forward-recv, forward-send, backward-recv,
 * backward-send. A receive that continues a running combined timer stops it. */
static void comm_timer_begin(schedule_state *s, const char *name) {
    if (s->comm_timer) return;
    s->comm_timer = name;
    if (s->timed) timers_start(name, 2);
}

static void comm_timer_end(schedule_state *s) {
    if (s->timed && s->comm_timer) timers_stop(s->comm_timer);
    s->comm_timer = NULL;
}

static void compute_timer(const schedule_state *s, const char *name, int start) {
    if (!s->timed) return;
    if (start) timers_start(name, 2);
    else timers_stop(name);
}

/* load micro-batch m: Megatron's batch-generator timer */
static void load_timed(schedule_state *s, int micro_batch, const int **tokens, const int **targets,
                       micro_batch_rng *rng) {
    compute_timer(s, "batch-generator", 1);
    s->source->load(s->source->context, micro_batch, tokens, targets, rng);
    compute_timer(s, "batch-generator", 0);
}

/* message tag: which micro-batch, which receiving chunk, which direction */
static int tag_of(const schedule_state *s, int micro_batch, int receiver_chunk, int backward) {
    return (micro_batch * s->vp + receiver_chunk) * 2 + backward;
}

static void *pool_take(schedule_state *s, size_t count, comm_request **request) {
    for (int i = 0; i < s->pool_size; i++) {
        if (s->comm->test(&s->pool[i].request)) { *request = &s->pool[i].request; return s->pool[i].data; }
    }
    if (s->pool_size == s->pool_capacity) {
        s->pool_capacity = s->pool_capacity ? 2 * s->pool_capacity : 8;
        s->pool = realloc(s->pool, sizeof(send_buffer) * (size_t)s->pool_capacity);
        CHECK(s->pool, "out of host memory for pipeline send buffers");
    }
    send_buffer *b = &s->pool[s->pool_size++];
    b->data = s->model->ops->alloc(s->model->ops->act_bytes * count);
    memset(&b->request, 0, sizeof b->request);
    *request = &b->request;
    return b->data;
}

/* copy tensor[count] (compute dtype) into a pool buffer and send it without blocking */
static void send_tensor(schedule_state *s, const void *tensor, size_t count, int peer_stage, int tag) {
    comm_request *request;
    void *buffer = pool_take(s, count, &request);
    s->model->ops->copy(buffer, tensor, s->model->ops->act_bytes * count);
    s->comm->send(buffer, count, s->model->act_dtype, peer_stage, tag, &s->topo->pp, request);
}

static int take_slot(schedule_state *s, int chunk, int micro_batch) {
    int slots = s->model->config.activation_slots;
    for (int i = 0; i < slots; i++) {
        if (!s->slot_busy[chunk * slots + i]) {
            s->slot_busy[chunk * slots + i] = 1;
            s->slot_of[chunk * s->nmb + micro_batch] = i;
            return i;
        }
    }
    FATAL("pipeline schedule: no free activation slot for chunk %d micro-batch %d (%d slots)", chunk, micro_batch, slots);
}

static void release_slot(schedule_state *s, int chunk, int micro_batch) {
    int slots = s->model->config.activation_slots;
    s->slot_busy[chunk * slots + s->slot_of[chunk * s->nmb + micro_batch]] = 0;
}

static void forward_step(schedule_state *s, int micro_batch, int chunk, int forward_only) {
    run_phase left = papi_phases_enter(forward_only ? PHASE_OTHER : PHASE_FORWARD);
    size_t count = (size_t)s->model->local_rows * (size_t)s->model->config.hidden_size;
    int first_virtual = chunk == 0 && s->stage == 0;
    int last_virtual = chunk == s->vp - 1 && s->stage == s->pp - 1;
    int slot = take_slot(s, chunk, micro_batch);
    if (!first_virtual) {
        int from = s->stage > 0 ? s->stage - 1 : s->pp - 1;
        comm_timer_begin(s, "forward-recv");
        s->comm->recv(gpt_chunk_input(s->model, chunk, slot), count, s->model->act_dtype, from,
                      tag_of(s, micro_batch, chunk, 0), &s->topo->pp);
        comm_timer_end(s);
    }
    const int *tokens = NULL, *targets = NULL;
    micro_batch_rng rng;
    compute_timer(s, "forward-compute", 1);
    load_timed(s, micro_batch, &tokens, &targets, &rng);
    /* the fixed tree: the last chunk's loss writes the output layer's gradient already */
    if (s->tree && last_virtual) fixed_tree_clear_chunk(s->tree, chunk, micro_batch);
    double loss = gpt_chunk_forward(s->model, chunk, slot, tokens, targets, rng, s->grad_scale, !forward_only);
    s->loss_sum += loss;
    if (s->losses) s->losses[micro_batch] += loss;
    compute_timer(s, "forward-compute", 0);
    if (!last_virtual) {
        int to = s->stage < s->pp - 1 ? s->stage + 1 : 0;
        int to_chunk = s->stage < s->pp - 1 ? chunk : chunk + 1;
        comm_timer_begin(s, s->combine_next ? "forward-send-backward-recv" : "forward-send");
        send_tensor(s, gpt_chunk_output(s->model, chunk, slot), count, to, tag_of(s, micro_batch, to_chunk, 0));
        if (!s->combine_next) comm_timer_end(s);
    }
    if (forward_only) release_slot(s, chunk, micro_batch);
    papi_phases_enter(left);
}

static void backward_step(schedule_state *s, int micro_batch, int chunk) {
    run_phase left = papi_phases_enter(PHASE_BACKWARD);
    size_t count = (size_t)s->model->local_rows * (size_t)s->model->config.hidden_size;
    int first_virtual = chunk == 0 && s->stage == 0;
    int last_virtual = chunk == s->vp - 1 && s->stage == s->pp - 1;
    if (!last_virtual) {
        int from = s->stage < s->pp - 1 ? s->stage + 1 : 0;
        comm_timer_begin(s, "backward-recv");
        s->comm->recv(gpt_grad_buffer(s->model), count, s->model->act_dtype, from, tag_of(s, micro_batch, chunk, 1),
                      &s->topo->pp);
        comm_timer_end(s);
    }
    const int *tokens = NULL, *targets = NULL;
    micro_batch_rng rng;
    compute_timer(s, "backward-compute", 1);
    load_timed(s, micro_batch, &tokens, &targets, &rng);
    if (s->dp) s->dp->last_micro_batch = micro_batch == s->nmb - 1;
    if (s->tree && !last_virtual) fixed_tree_clear_chunk(s->tree, chunk, micro_batch);
    gpt_chunk_backward(s->model, chunk, s->slot_of[chunk * s->nmb + micro_batch], rng);
    if (s->tree) fixed_tree_push_chunk(s->tree, chunk, micro_batch);
    compute_timer(s, "backward-compute", 0);
    release_slot(s, chunk, micro_batch);
    if (!first_virtual) {
        int to = s->stage > 0 ? s->stage - 1 : s->pp - 1;
        int to_chunk = s->stage > 0 ? chunk : chunk - 1;
        comm_timer_begin(s, s->combine_next ? "backward-send-forward-recv" : "backward-send");
        send_tensor(s, gpt_grad_buffer(s->model), count, to, tag_of(s, micro_batch, to_chunk, 1));
        if (!s->combine_next) comm_timer_end(s);
    }
    papi_phases_enter(left);
}

/* whether a step receives its input (a forward not on the first virtual stage) or its output's
 * gradient (a backward not on the last) */
static int step_receives(const schedule_state *s, const pipeline_step *step) {
    if (step->kind == PIPELINE_FORWARD) return !(step->model_chunk == 0 && s->stage == 0);
    return !(step->model_chunk == s->vp - 1 && s->stage == s->pp - 1);
}

double pipeline_run(gpt_model *model, data_parallel *dp, const comm_ops *comm, const topology *topo,
                    int num_micro_batches, int forward_only, const micro_batch_source *source,
                    float grad_scale, double *micro_batch_losses) {
    schedule_state s;
    memset(&s, 0, sizeof s);
    s.model = model;
    s.dp = dp;
    s.losses = micro_batch_losses;
    if (s.losses) memset(s.losses, 0, sizeof(double) * (size_t)num_micro_batches);
    s.tree = dp && !forward_only ? dp->tree : NULL;
    s.comm = comm;
    s.topo = topo;
    s.source = source;
    s.nmb = num_micro_batches;
    s.vp = model->num_chunks;
    s.pp = topo->pp_size;
    s.stage = topo->pp_rank;
    s.grad_scale = grad_scale;
    s.timed = !forward_only && timers_log_level() >= 2;
    int slots = model->config.activation_slots;
    s.slot_of = calloc((size_t)(s.vp * s.nmb), sizeof(int));
    s.slot_busy = calloc((size_t)(s.vp * slots), sizeof(int));
    CHECK(s.slot_of && s.slot_busy, "out of host memory for the pipeline schedule");

    int count = pipeline_schedule_steps(s.pp, s.stage, s.vp, s.nmb, forward_only, NULL);
    CHECK(count > 0, "pipeline schedule: %d micro-batches do not fit %d stages x %d virtual stages", s.nmb, s.pp, s.vp);
    pipeline_step *steps = malloc(sizeof(pipeline_step) * (size_t)count);
    CHECK(steps, "out of host memory for the pipeline schedule");
    pipeline_schedule_steps(s.pp, s.stage, s.vp, s.nmb, forward_only, steps);
    for (int i = 0; i < count; i++) {
        s.combine_next = i + 1 < count && steps[i + 1].kind != steps[i].kind && step_receives(&s, &steps[i + 1]);
        if (steps[i].kind == PIPELINE_FORWARD) forward_step(&s, steps[i].micro_batch, steps[i].model_chunk, forward_only);
        else backward_step(&s, steps[i].micro_batch, steps[i].model_chunk);
    }
    free(steps);

    for (int i = 0; i < s.pool_size; i++) {
        comm->wait(&s.pool[i].request);
        model->ops->release(s.pool[i].data);
    }
    free(s.pool);
    free(s.slot_of);
    free(s.slot_busy);
    return s.loss_sum;
}
