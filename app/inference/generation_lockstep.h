/* generation_lockstep.h: serving with a model split over several ranks, as Megatron's
 * run_text_generation_server.py does it: rank 0 takes the requests and, for each generation,
 * broadcasts its inputs (the prompts' token ids and the generation parameters) to the other ranks
 * of the model-parallel group, which run the same generate() call, so that the model's
 * collectives (tensor-parallel all-reduces, pipeline sends) line up; at shutdown it broadcasts a
 * stop. The followers wait for the next command without spinning (a non-blocking broadcast
 * polled with short sleeps). On one rank these are plain calls of generate(). */
#ifndef GENERATION_LOCKSTEP_H
#define GENERATION_LOCKSTEP_H

#include "app/inference/generation.h"

/* rank 0: generate() on every rank of the group with these inputs (broadcast first) */
int generate_lockstep(generator *g, int batch, int32_t *const *prompts, const int *prompt_lengths,
                      const generation_params *p, generation_result *r, char *err, size_t errlen);

/* the other ranks: follow rank 0's generations until it stops them; returns the number followed */
long generation_follow(generator *g);

/* rank 0: end the followers' loop (no-op on one rank) */
void generation_lockstep_stop(generator *g);

#endif
