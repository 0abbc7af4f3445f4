/* sampling.h: choosing the next token from one row of logits, as Megatron's text generation
 * samples (megatron/inference/text_generation/sampling.py): top_k == 1 is greedy (argmax, the
 * temperature ignored); otherwise the logits are divided by the temperature, cut to the top_k
 * largest (top_k > 1) or to the nucleus whose probability reaches top_p (the first token past
 * the threshold kept), and a token is drawn from their softmax. The draw is the counter-based
 * generator's (kernels/philox.h) uniform for (seed, stream, counter), so a seeded request gives
 * the same tokens every time. Only ids below vocab_size (the tokenizer's) are candidates; the
 * padded rows of the output layer never are. */
#ifndef SAMPLING_H
#define SAMPLING_H

#include <stdint.h>

typedef struct sampling_params {
    float temperature;   /* > 0 */
    int top_k;           /* 0: off, 1: greedy */
    float top_p;         /* 0: off, else (0, 1] */
} sampling_params;

/* scratch for sorting candidates: vocab_size entries */
typedef struct sampling_scratch {
    float *values;
    int *order;
    int size;
} sampling_scratch;

void sampling_scratch_init(sampling_scratch *s, int vocab_size);
void sampling_scratch_free(sampling_scratch *s);

/* the sampled id among logits[0..vocab_size) */
int sample_token(const float *logits, int vocab_size, const sampling_params *p, sampling_scratch *s,
                 uint64_t seed, uint64_t stream, uint64_t counter);

/* log-softmax of logits[0..V) at `token`, in double. Callers pass the tokenizer's vocabulary
 * size: the padded rows of the output layer are not tokens (Megatron normalizes over them too;
 * trained, they are negligible, but a checkpoint imported from Hugging Face has them at zero,
 * which would dominate GPT-2's large negative logits) */
double token_log_prob(const float *logits, int V, int token);

#endif
