/* param_dump.c: see param_dump.h. One rank of each data-parallel replica group writes its
 * shards at their global positions with MPI-IO; tensor-parallel replicas and the tied-embedding
 * copy are written once. */
#include "app/training/param_dump.h"
#include "app/core/error.h"
#include "app/model/moe_expert_bias.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void param_dump_write(const gpt_model *m, const topology *topo, const char *path) {
    int total = gpt_global_parameters(&m->config, NULL);
    global_parameter *globals = malloc(sizeof(global_parameter) * (size_t)total);
    size_t *file_offset = malloc(sizeof(size_t) * (size_t)total);
    CHECK(globals && file_offset, "out of host memory for the parameter dump");
    gpt_global_parameters(&m->config, globals);
    size_t next = 0;
    for (int i = 0; i < total; i++) {
        file_offset[i] = next;
        next += (size_t)globals[i].rows * (size_t)(globals[i].cols ? globals[i].cols : 1);
    }
    /* then the MoE routers' expert biases (buffers, not parameters), each [E], in layer order */
    const gpt_config *c = &m->config;
    size_t bias_start = next;
    int with_bias = m->moe_expert_bias != NULL;

    if (topo->world_rank == 0) {
        char index_path[1100];
        snprintf(index_path, sizeof index_path, "%s.index", path);
        FILE *f = fopen(index_path, "w");
        if (!f) user_error_local("cannot write --dump-parameters index '%s': %s", index_path, strerror(errno));
        for (int i = 0; i < total; i++)
            fprintf(f, "%s %d %d %zu\n", globals[i].name, globals[i].rows, globals[i].cols, file_offset[i]);
        size_t at = bias_start;
        for (int layer = 0; with_bias && layer < c->num_layers; layer++) {
            if (!gpt_layer_is_moe(c, layer)) continue;
            char name[PARAM_NAME_MAX];
            moe_expert_bias_name(layer, name, sizeof name);
            fprintf(f, "%s %d 0 %zu\n", name, c->num_experts, at);
            at += (size_t)c->num_experts;
        }
        fclose(f);
    }

    MPI_File file;
    int err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
    if (err != MPI_SUCCESS) user_error_local("cannot write --dump-parameters file '%s'", path);
    float *host = NULL;
    size_t host_size = 0;
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        if (!param_is_primary_copy(p, topo->tp_rank) || param_replica_rank(p, &m->config, topo->dp_cp->rank) != 0) continue;
        int g = 0;
        while (g < total && strcmp(globals[g].name, p->name) != 0) g++;
        CHECK(g < total, "parameter %s is not in the global list", p->name);
        if (p->numel > host_size) {
            host = realloc(host, sizeof(float) * p->numel);
            CHECK(host, "out of host memory for the parameter dump");
            host_size = p->numel;
        }
        m->ops->copy_to_host_float(host, act_at(m->ops, m->param_buffer, p->offset), p->numel);
        /* contiguous runs: whole shard (each row block of it) for row splits and vectors, one
         * row at a time otherwise */
        size_t run = p->split == SHARD_COLS ? (size_t)p->local_cols : p->numel / (size_t)p->row_blocks;
        for (size_t e = 0; e < p->numel; e += run) {
            MPI_Offset at = (MPI_Offset)((file_offset[g] + param_global_index(p, e)) * sizeof(float));
            CHECK_MPI(MPI_File_write_at(file, at, host + e, (int)run, MPI_FLOAT, MPI_STATUS_IGNORE));
        }
    }
    /* the biases of the MoE layers held here: tensor- and data-parallel rank 0 of the stage */
    size_t at = bias_start;
    for (int layer = 0; with_bias && layer < c->num_layers; layer++) {
        if (!gpt_layer_is_moe(c, layer)) continue;
        int held = 0;
        for (int k = 0; k < m->num_chunks; k++)
            held |= layer >= m->chunks[k].first_layer && layer < m->chunks[k].first_layer + m->chunks[k].num_layers;
        if (held && topo->tp_rank == 0 && topo->dp_rank == 0) {
            float *bias = malloc(sizeof(float) * (size_t)c->num_experts);
            CHECK(bias, "out of host memory for the parameter dump");
            m->ops->copy_to_host(bias, moe_expert_bias_of(m, layer), sizeof(float) * (size_t)c->num_experts);
            CHECK_MPI(MPI_File_write_at(file, (MPI_Offset)(at * sizeof(float)), bias, c->num_experts, MPI_FLOAT,
                                        MPI_STATUS_IGNORE));
            free(bias);
        }
        at += (size_t)c->num_experts;
    }
    CHECK_MPI(MPI_File_close(&file));
    free(host);
    free(globals);
    free(file_offset);
}
