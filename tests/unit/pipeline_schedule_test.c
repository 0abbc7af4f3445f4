/* pipeline_schedule_test.c: the order of forward and backward steps each pipeline stage runs
 * (pipeline_schedule_steps, what pipeline_run executes) against a reference transcribed from
 * Megatron-Core's megatron/core/pipeline_parallel/schedules.py, for 1F1B (pp 1..8, every stage,
 * 1..16 micro-batches, fewer micro-batches than stages included) and the interleaved schedule
 * (pp 2..4, vp 2..4, micro-batches a multiple of pp), training and forward-only; then invariants
 * of the whole pipeline: every (micro-batch, chunk) forwarded once and backwarded once after its
 * forward, pipeline_activation_slots the most micro-batches a stage of Megatron's schedule holds
 * on one chunk, and all stages together run to the end when every receive blocks until its
 * sender has computed. */
#include "app/training/pipeline_schedule.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STAGES 8
#define MAX_CHUNKS 4
#define MAX_MICRO_BATCHES 16
#define MAX_STEPS (2 * MAX_CHUNKS * MAX_MICRO_BATCHES)

/* ---- reference: Megatron-Core's schedules.py, transcribed ---- */

typedef struct step_list { pipeline_step steps[MAX_STEPS]; int count; } step_list;

static void push(step_list *list, pipeline_step_kind kind, int micro_batch, int model_chunk) {
    list->steps[list->count++] = (pipeline_step){kind, micro_batch, model_chunk};
}

/* input_tensors[chunk]: the micro-batches forwarded and not yet backwarded, oldest first
 * (Megatron appends after a forward and pops index 0 for a backward) */
typedef struct fifo { int items[MAX_MICRO_BATCHES]; int head, tail; } fifo;

static int fifo_pop(fifo *q) { return q->items[q->head++]; }

/* get_schedule_table(num_microbatches, num_model_chunks, microbatch_group_size_per_vp_stage) */
static int get_schedule_table(int num_microbatches, int num_model_chunks, int group_size,
                              int *microbatch_id_table, int *model_chunk_id_table) {
    int n = 0;
    for (int min_id = 0; min_id < num_microbatches; min_id += group_size) {
        int end = min_id + group_size >= num_microbatches ? num_microbatches : min_id + group_size;
        for (int chunk = 0; chunk < num_model_chunks; chunk++)
            for (int id = min_id; id < end; id++) { microbatch_id_table[n] = id; model_chunk_id_table[n] = chunk; n++; }
    }
    return n;
}

/* forward_backward_no_pipelining: forward then backward, micro-batch after micro-batch */
static void no_pipelining(int num_microbatches, int forward_only, step_list *out) {
    for (int i = 0; i < num_microbatches; i++) {
        push(out, PIPELINE_FORWARD, i, 0);
        if (!forward_only) push(out, PIPELINE_BACKWARD, i, 0);
    }
}

/* forward_backward_pipelining_without_interleaving: num_warmup_microbatches =
 * min(pp - rank - 1, num_microbatches) forwards, then forward i + warm-up and backward of the
 * oldest (input_tensors.pop(0)) in the steady state, then the cool-down backwards */
static void without_interleaving(int pp, int rank, int num_microbatches, int forward_only, step_list *out) {
    int num_warmup = pp - rank - 1;
    if (num_warmup > num_microbatches) num_warmup = num_microbatches;
    int remaining = num_microbatches - num_warmup;
    fifo input_tensors = {{0}, 0, 0};
    for (int i = 0; i < num_warmup; i++) {
        push(out, PIPELINE_FORWARD, i, 0);
        if (!forward_only) input_tensors.items[input_tensors.tail++] = i;
    }
    for (int i = 0; i < remaining; i++) {
        push(out, PIPELINE_FORWARD, i + num_warmup, 0);
        if (forward_only) continue;
        input_tensors.items[input_tensors.tail++] = i + num_warmup;
        push(out, PIPELINE_BACKWARD, fifo_pop(&input_tensors), 0);
    }
    if (!forward_only)
        for (int i = 0; i < num_warmup; i++) push(out, PIPELINE_BACKWARD, fifo_pop(&input_tensors), 0);
}

/* forward_backward_pipelining_with_interleaving's state: the schedule table and input_tensors */
typedef struct interleaving {
    int microbatch_id_table[MAX_STEPS], model_chunk_id_table[MAX_STEPS];
    int total_num_microbatches, num_model_chunks, forward_only;
    fifo input_tensors[MAX_CHUNKS];
    step_list *out;
} interleaving;

/* get_model_chunk_id */
static int get_model_chunk_id(const interleaving *v, int virtual_microbatch_id, int forward) {
    int model_chunk_id = v->model_chunk_id_table[virtual_microbatch_id % v->total_num_microbatches];
    return forward ? model_chunk_id : v->num_model_chunks - model_chunk_id - 1;
}

/* forward_step_helper: chunk and micro-batch from the table; the input joins input_tensors
 * (popped again at once when forward-only) */
static void forward_step_helper(interleaving *v, int virtual_microbatch_id) {
    int model_chunk_id = get_model_chunk_id(v, virtual_microbatch_id, 1);
    int microbatch_id = v->microbatch_id_table[virtual_microbatch_id];
    push(v->out, PIPELINE_FORWARD, microbatch_id, model_chunk_id);
    if (!v->forward_only) {
        fifo *q = &v->input_tensors[model_chunk_id];
        q->items[q->tail++] = microbatch_id;
    }
}

/* backward_step_helper: the reversed chunk's oldest input, input_tensors[model_chunk_id].pop(0) */
static void backward_step_helper(interleaving *v, int virtual_microbatch_id) {
    int model_chunk_id = get_model_chunk_id(v, virtual_microbatch_id, 0);
    push(v->out, PIPELINE_BACKWARD, fifo_pop(&v->input_tensors[model_chunk_id]), model_chunk_id);
}

/* forward_backward_pipelining_with_interleaving, microbatch_group_size_per_vp_stage at its
 * default (pp): get_pp_rank_microbatches' warm-up count, warm-up forwards, steady forward
 * k + warm-up then backward k, cool-down backwards */
static void with_interleaving(int pp, int rank, int num_model_chunks, int num_microbatches, int forward_only,
                              step_list *out) {
    static interleaving v;
    memset(&v, 0, sizeof v);
    int microbatch_group_size_per_vp_stage = pp;
    v.num_model_chunks = num_model_chunks;
    v.forward_only = forward_only;
    v.out = out;
    v.total_num_microbatches = get_schedule_table(num_microbatches, num_model_chunks, microbatch_group_size_per_vp_stage,
                                                  v.microbatch_id_table, v.model_chunk_id_table);
    int num_warmup = forward_only ? v.total_num_microbatches
                                  : (pp - rank - 1) * 2 + (num_model_chunks - 1) * microbatch_group_size_per_vp_stage;
    if (num_warmup >= v.total_num_microbatches) num_warmup = v.total_num_microbatches;
    int remaining = v.total_num_microbatches - num_warmup;
    for (int k = 0; k < num_warmup; k++) forward_step_helper(&v, k);
    for (int k = 0; k < remaining; k++) {
        forward_step_helper(&v, k + num_warmup);
        if (!forward_only) backward_step_helper(&v, k);
    }
    if (!forward_only)
        for (int k = remaining; k < v.total_num_microbatches; k++) backward_step_helper(&v, k);
}

/* get_forward_backward_func: no pipelining for one stage, interleaving with virtual stages */
static void reference_schedule(int pp, int rank, int vp, int num_microbatches, int forward_only, step_list *out) {
    out->count = 0;
    if (pp == 1) no_pipelining(num_microbatches, forward_only, out);
    else if (vp == 1) without_interleaving(pp, rank, num_microbatches, forward_only, out);
    else with_interleaving(pp, rank, vp, num_microbatches, forward_only, out);
}

/* ---- comparison and invariants ---- */

static int ours(int pp, int stage, int vp, int nmb, int forward_only, step_list *out) {
    int count = pipeline_schedule_steps(pp, stage, vp, nmb, forward_only, NULL);
    if (count < 0 || count > MAX_STEPS) return 0;
    out->count = pipeline_schedule_steps(pp, stage, vp, nmb, forward_only, out->steps);
    return out->count == count;
}

static int same_steps(const step_list *a, const step_list *b) {
    if (a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++)
        if (a->steps[i].kind != b->steps[i].kind || a->steps[i].micro_batch != b->steps[i].micro_batch ||
            a->steps[i].model_chunk != b->steps[i].model_chunk) return 0;
    return 1;
}

/* "F0.0 F1.0 B0.0 ...": kind, micro-batch, chunk */
static void describe(const step_list *list, char *text, size_t size) {
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < list->count && used + 16 < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%c%d.%d", i ? " " : "",
                                 list->steps[i].kind == PIPELINE_FORWARD ? 'F' : 'B',
                                 list->steps[i].micro_batch, list->steps[i].model_chunk);
}

/* one stage: every (micro-batch, chunk) forwarded once, backwarded once after its forward (none
 * when forward_only) */
static int stage_is_consistent(const step_list *list, int vp, int nmb, int forward_only) {
    int forwarded[MAX_CHUNKS][MAX_MICRO_BATCHES] = {{0}}, backwarded[MAX_CHUNKS][MAX_MICRO_BATCHES] = {{0}};
    for (int i = 0; i < list->count; i++) {
        const pipeline_step *step = &list->steps[i];
        if (step->micro_batch < 0 || step->micro_batch >= nmb || step->model_chunk < 0 || step->model_chunk >= vp)
            return 0;
        int chunk = step->model_chunk, micro_batch = step->micro_batch;
        if (step->kind == PIPELINE_FORWARD) {
            if (forwarded[chunk][micro_batch]++) return 0;
        } else {
            if (forward_only || !forwarded[chunk][micro_batch] || backwarded[chunk][micro_batch]++) return 0;
        }
    }
    for (int chunk = 0; chunk < vp; chunk++)
        for (int micro_batch = 0; micro_batch < nmb; micro_batch++)
            if (!forwarded[chunk][micro_batch] || backwarded[chunk][micro_batch] != !forward_only) return 0;
    return 1;
}

/* the most micro-batches one stage's training steps hold on one chunk (forwarded, not yet
 * backwarded): the activation slots that stage needs per chunk */
static int most_held(const step_list *list) {
    int held[MAX_CHUNKS] = {0}, most = 0;
    for (int i = 0; i < list->count; i++) {
        int *count = &held[list->steps[i].model_chunk];
        *count += list->steps[i].kind == PIPELINE_FORWARD ? 1 : -1;
        if (*count > most) most = *count;
    }
    return most;
}

/* All stages together, each receive blocking until the sender has computed what it sends (sends
 * never block): a forward needs the same forward on the previous virtual stage (stage - 1, or
 * the last stage's previous chunk), a backward the same backward on the next virtual stage.
 * Returns 1 when every stage reaches the end of its steps. */
static int pipeline_completes(const step_list *stages, int pp, int vp) {
    static char done[2][MAX_CHUNKS][MAX_STAGES][MAX_MICRO_BATCHES];
    memset(done, 0, sizeof done);
    int next[MAX_STAGES] = {0}, progress = 1;
    while (progress) {
        progress = 0;
        for (int stage = 0; stage < pp; stage++) {
            while (next[stage] < stages[stage].count) {
                const pipeline_step *step = &stages[stage].steps[next[stage]];
                int chunk = step->model_chunk, micro_batch = step->micro_batch, ready = 1;
                if (step->kind == PIPELINE_FORWARD && !(stage == 0 && chunk == 0))
                    ready = stage > 0 ? done[0][chunk][stage - 1][micro_batch] : done[0][chunk - 1][pp - 1][micro_batch];
                if (step->kind == PIPELINE_BACKWARD && !(stage == pp - 1 && chunk == vp - 1))
                    ready = stage < pp - 1 ? done[1][chunk][stage + 1][micro_batch] : done[1][chunk + 1][0][micro_batch];
                if (!ready) break;
                done[step->kind == PIPELINE_BACKWARD][chunk][stage][micro_batch] = 1;
                next[stage]++;
                progress = 1;
            }
        }
    }
    for (int stage = 0; stage < pp; stage++)
        if (next[stage] != stages[stage].count) return 0;
    return 1;
}

/* every stage and micro-batch count of one (pp, vp, forward_only) family; returns cases checked */
static void check_family(int pp, int vp, int forward_only, int *cases_total) {
    int cases = 0, mismatches = 0, inconsistent = 0, stuck = 0, slot_mismatches = 0;
    char where[160] = "", text_ours[2048], text_reference[2048];
    for (int nmb = 1; nmb <= MAX_MICRO_BATCHES; nmb++) {
        if (vp > 1 && nmb % pp != 0) continue;
        step_list stages[MAX_STAGES];
        int most = 0;
        for (int stage = 0; stage < pp; stage++) {
            step_list reference;
            reference_schedule(pp, stage, vp, nmb, forward_only, &reference);
            if (most_held(&reference) > most) most = most_held(&reference);
            cases++;
            if (!ours(pp, stage, vp, nmb, forward_only, &stages[stage]) || !same_steps(&stages[stage], &reference)) {
                if (!mismatches++) {
                    snprintf(where, sizeof where, "stage %d, %d micro-batches", stage, nmb);
                    describe(&stages[stage], text_ours, sizeof text_ours);
                    describe(&reference, text_reference, sizeof text_reference);
                }
                continue;
            }
            if (!stage_is_consistent(&stages[stage], vp, nmb, forward_only)) inconsistent++;
        }
        if (!mismatches && !pipeline_completes(stages, pp, vp)) stuck++;
        if (!forward_only && pipeline_activation_slots(pp, vp, nmb) != most) slot_mismatches++;
    }
    const char *name = vp > 1 ? "interleaved" : pp > 1 ? "1F1B" : "no pipelining";
    const char *mode = forward_only ? "forward-only" : "training";
    if (!tap_ok(mismatches == 0, "%s pp %d vp %d %s: %d stage schedules equal Megatron's", name, pp, vp, mode, cases)) {
        tap_diag("first difference at %s", where);
        tap_diag("ours:      %s", text_ours);
        tap_diag("Megatron:  %s", text_reference);
    }
    tap_ok(inconsistent == 0, "%s pp %d vp %d %s: each (micro-batch, chunk) forwarded once, backwarded once after it "
           "(%d stages failed)", name, pp, vp, mode, inconsistent);
    if (!forward_only)
        tap_ok(slot_mismatches == 0, "%s pp %d vp %d: pipeline_activation_slots is the most micro-batches a stage of "
               "Megatron's schedule holds on one chunk (%d counts differ)", name, pp, vp, slot_mismatches);
    tap_ok(stuck == 0, "%s pp %d vp %d %s: the stages together run to the end with blocking receives (%d counts stuck)",
           name, pp, vp, mode, stuck);
    *cases_total += cases;
}

/* a hand-written schedule, as "F0.0 B0.0 ...", for one stage */
static void check_example(int pp, int stage, int vp, int nmb, const char *expected) {
    step_list list;
    char text[2048];
    int valid = ours(pp, stage, vp, nmb, 0, &list);
    describe(&list, text, sizeof text);
    if (!tap_ok(valid && strcmp(text, expected) == 0, "pp %d stage %d vp %d, %d micro-batches: %s", pp, stage, vp, nmb, expected))
        tap_diag("got %s", text);
}

int main(void) {
    int cases = 0;
    for (int forward_only = 0; forward_only <= 1; forward_only++) {
        for (int pp = 1; pp <= MAX_STAGES; pp++) check_family(pp, 1, forward_only, &cases);
        for (int pp = 2; pp <= 4; pp++)
            for (int vp = 2; vp <= MAX_CHUNKS; vp++) check_family(pp, vp, forward_only, &cases);
    }
    tap_diag("%d stage schedules compared with Megatron's", cases);

    /* by hand: 1F1B warms up with pp - stage - 1 forwards; the last stage alternates at once */
    check_example(4, 0, 1, 6, "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 B3.0 B4.0 B5.0");
    check_example(4, 3, 1, 3, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
    check_example(4, 1, 1, 2, "F0.0 F1.0 B0.0 B1.0");
    /* interleaved pp 2 vp 2: stage 0 warms up with 2 (pp - 1) + (vp - 1) pp = 4 forwards, groups
     * of pp micro-batches per chunk, backwards from the last chunk */
    check_example(2, 0, 2, 4, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
    check_example(2, 1, 2, 4, "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");

    /* activation slots by hand: 1F1B's first stage holds min(pp, nmb); interleaved stage 0 of pp 4
     * vp 2 forwards micro-batches 0-7 on chunk 0 (virtual k = 0-3, 8-11) before its first chunk-0
     * backward (backward k = 4, which follows forward k = 14): 8, not all 11 it has in flight */
    tap_ok(pipeline_activation_slots(4, 1, 16) == 4 && pipeline_activation_slots(4, 1, 2) == 2 &&
           pipeline_activation_slots(1, 1, 8) == 1, "1F1B activation slots: min(pp, micro-batches)");
    tap_ok(pipeline_activation_slots(4, 2, 16) == 8, "interleaved pp 4 vp 2, 16 micro-batches: 8 activation slots per chunk");

    /* what Megatron refuses */
    tap_ok(pipeline_schedule_steps(2, 0, 2, 3, 0, NULL) == -1 && pipeline_schedule_steps(4, 1, 2, 6, 1, NULL) == -1,
           "interleaving refuses a micro-batch count that is not a multiple of pp");
    tap_ok(pipeline_schedule_steps(1, 0, 2, 4, 0, NULL) == -1, "interleaving refuses a single stage");
    return tap_done();
}
