/* fuzz_generate_request.c: libFuzzer target for the body of a PUT /api request
 * (app/inference/generate_request.h generate_request_parse): any bytes are parsed and checked
 * against a server's limits; an accepted request must hold what the checks promise (prompts
 * within the batch limit, values in range, stop tokens within the vocabulary). */
#include "app/inference/generate_request.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    generate_limits limits = {8, 64, 300};
    generate_request q = {0};
    char err[1024];
    if (generate_request_parse(&q, (const char *)data, size, &limits, err, sizeof err) == 0) {
        const generation_params *p = &q.params;
        if (q.batch < 1 || q.batch > limits.max_batch || p->tokens_to_generate < 0 ||
            p->tokens_to_generate > limits.max_len || !(p->sampling.temperature > 0.0f) || p->sampling.top_k < 0 ||
            p->sampling.top_k > 1000 || p->sampling.top_p < 0.0f || p->sampling.top_p > 1.0f ||
            p->num_stop_tokens > GENERATION_MAX_STOP_TOKENS)
            abort();
        for (int i = 0; i < p->num_stop_tokens; i++)
            if (p->stop_tokens[i] < -1 || p->stop_tokens[i] >= limits.vocab_size) abort();
        json_t *prompts = json_object_get(q.root, "prompts");
        for (int b = 0; b < q.batch; b++)
            if (!json_is_string(json_array_get(prompts, (size_t)b))) abort();
    } else if (!err[0]) {
        abort(); /* a refusal always says why */
    }
    json_decref(q.root);
    return 0;
}
