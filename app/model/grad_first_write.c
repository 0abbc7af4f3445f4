/* grad_first_write.c: a training step's gradients without clearing the large ones first.
 *
 * The fp32 gradients (Megatron's main_grad) accumulate over a step's micro-batches, so the
 * step used to start by clearing all of them: 5.2 GB of writes at GPT 1.3B, and every weight
 * gradient GEMM then read its zeros back (beta 1). A weight matrix's gradient is first written
 * by its weight-gradient GEMM, which can as well write it over (beta 0). So a step clears only
 * the rest (biases, norms, position embeddings, bucket padding) and marks the weight matrices
 * "pending": the first weight-gradient write of a pending matrix overwrites it
 * (kernel_ops.matmul_backward_weight_overwrite) and clears the mark; later writes (the next
 * micro-batch, the next loss chunk, the tied embeddings' own backward) accumulate as before.
 *
 * Which matrices qualify: those whose first gradient write in a backward is a weight-gradient
 * GEMM (not the MoE router and experts: an expert may see no token, and they accumulate). Every layer's linear weights; the untied output layer; the word embeddings where the
 * output layer reuses them in the same chunk (the output layer's backward runs before the
 * embedding's scatter-add), and the last stage's copy of them. Not the word embeddings of a
 * first stage (written by the scatter-add alone) nor the position embeddings.
 *
 * A matrix still pending when the backward reports its gradients ready (grads_ready) is cleared
 * then, so a weight that took no gradient still reads zero. On the CPU the overwrite is a clear
 * plus the accumulating GEMM: the same bits as clearing everything, which
 * MEGATRON_C_CLEAR_ALL_GRADS=1 in the environment restores (tests/mpi/grad_first_write_test.sh
 * compares the two). */
#include "app/model/grad_first_write.h"

#include "app/core/error.h"
#include "app/model/fp8_linear.h"
#include "app/model/gpt_parameter_table.h"

#include <stdlib.h>
#include <string.h>

static int overwritable(const gpt_model *m, const param_tensor *p) {
    const parameter_table *table = gpt_parameter_table();
    if (m->config.bert && p->row->part != PART_LAYER) return 0; /* BERT's heads accumulate (bert_heads.c) */
    if (p->embedding_copy) return 1;
    if (p->row->cols == DIM_NONE) return 0;  /* vectors: biases and norm parameters */
    if (p->row->presence & ROW_MOE) return 0; /* an expert with no token of a micro-batch writes nothing */
    if (p->row->part != PART_EMBEDDING) return 1;
    return p->row == &table->rows[table->tied_output_row] && !m->config.untie_embeddings_and_output_weights &&
           m->chunks[p->chunk].post_process;
}

static int by_offset(const void *a, const void *b) {
    size_t x = ((const grad_first_write_entry *)a)->offset, y = ((const grad_first_write_entry *)b)->offset;
    return x < y ? -1 : x > y;
}

void grad_first_write_setup(gpt_model *m) {
    grad_first_write_entry *entries = calloc((size_t)m->num_params + 1, sizeof *entries);
    CHECK(entries, "out of host memory for the gradient write table");
    int n = 0;
    const char *clear_all = getenv("MEGATRON_C_CLEAR_ALL_GRADS");
    if (!(clear_all && strcmp(clear_all, "1") == 0))
        for (int i = 0; i < m->num_params; i++)
            if (m->params[i].numel > 0 && overwritable(m, &m->params[i]))
                entries[n++] = (grad_first_write_entry){m->params[i].offset, m->params[i].numel, i, 0};
    qsort(entries, (size_t)n, sizeof *entries, by_offset);
    /* what a step clears: the gaps between the overwritten matrices */
    size_t *ranges = calloc(2 * ((size_t)n + 1), sizeof *ranges);
    CHECK(ranges, "out of host memory for the gradient write table");
    int r = 0;
    size_t at = 0;
    for (int i = 0; i <= n; i++) {
        size_t end = i < n ? entries[i].offset : m->num_elements;
        if (end > at) {
            ranges[2 * r] = at;
            ranges[2 * r + 1] = end - at;
            r++;
        }
        if (i < n) at = entries[i].offset + entries[i].numel;
    }
    m->first_write = entries;
    m->num_first_write = n;
    m->clear_ranges = ranges;
    m->num_clear_ranges = r;
}

void grad_first_write_free(gpt_model *m) {
    free(m->first_write);
    free(m->clear_ranges);
    m->first_write = NULL;
    m->clear_ranges = NULL;
    m->num_first_write = m->num_clear_ranges = 0;
}

void gpt_model_start_grads(gpt_model *m) {
    const kernel_ops *ops = m->ops;
    for (int r = 0; r < m->num_clear_ranges; r++) {
        float *at = m->grad_buffer + m->clear_ranges[2 * r];
        size_t bytes = sizeof(float) * m->clear_ranges[2 * r + 1];
        if (ops->zero_beside) ops->zero_beside(at, bytes);
        else ops->zero(at, bytes);
    }
    for (int i = 0; i < m->num_first_write; i++) m->first_write[i].pending = 1;
    fp8_weights_changed(m); /* a new step: its weights are quantized afresh */
}

static grad_first_write_entry *find(gpt_model *m, const float *grad) {
    if (grad < m->grad_buffer || grad >= m->grad_buffer + m->num_elements) return NULL;
    size_t offset = (size_t)(grad - m->grad_buffer);
    int lo = 0, hi = m->num_first_write - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (m->first_write[mid].offset == offset) return &m->first_write[mid];
        if (m->first_write[mid].offset < offset) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

int grad_first_write_take(gpt_model *m, const float *grad) {
    grad_first_write_entry *e = find(m, grad);
    if (!e || !e->pending) return 0;
    e->pending = 0;
    return 1;
}

void grad_first_write_settle(gpt_model *m, int first, int count) {
    for (int i = 0; i < m->num_first_write; i++) {
        grad_first_write_entry *e = &m->first_write[i];
        if (e->pending && e->param >= first && e->param < first + count) {
            m->ops->zero(m->grad_buffer + e->offset, sizeof(float) * e->numel);
            e->pending = 0;
        }
    }
}

void grad_first_write_restart(gpt_model *m, size_t start, size_t length) {
    size_t end = start + length;
    for (int r = 0; r < m->num_clear_ranges; r++) {
        size_t lo = m->clear_ranges[2 * r], hi = lo + m->clear_ranges[2 * r + 1];
        if (lo < start) lo = start;
        if (hi > end) hi = end;
        if (lo < hi) m->ops->zero(m->grad_buffer + lo, sizeof(float) * (hi - lo));
    }
    for (int i = 0; i < m->num_first_write; i++) {
        grad_first_write_entry *e = &m->first_write[i];
        if (e->offset >= start && e->offset + e->numel <= end) e->pending = 1;
        else CHECK(e->offset + e->numel <= start || e->offset >= end, "gradient restart [%zu, %zu) cuts the matrix at "
                   "[%zu, %zu)", start, end, e->offset, e->offset + e->numel);
    }
}
