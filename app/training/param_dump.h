/* param_dump.h: --dump-parameters PATH writes every parameter of the model in its global shape,
 * whatever the parallel layout, as raw little-endian float32 in the global order, with an index
 * PATH.index ("name rows cols offset" per line, offsets in elements), then the MoE routers' expert
 * biases (buffers, app/model/moe_expert_bias.h) under their checkpoint names. Tests compare the dumps of
 * different layouts; distributed checkpoints do the same job in HDF5. */
#ifndef PARAM_DUMP_H
#define PARAM_DUMP_H

#include "app/model/gpt_model.h"
#include "app/parallel/topology.h"

/* collective over the world */
void param_dump_write(const gpt_model *model, const topology *topo, const char *path);

#endif
