/* relative_position.c: T5's relative position buckets and bias (relative_position.h).
 * The bucket of a position r (memory - query), Megatron-Core's _relative_position_bucket:
 *   bidirectional: n = num_buckets / 2, offset n when r > 0, then r = |r|
 *   causal:        n = num_buckets, r = max(-r, 0)
 *   max_exact = n / 2; r < max_exact: bucket r
 *   else: max_exact + trunc(log(r / max_exact) / log(max_distance / max_exact) * (n - max_exact)),
 *         at most n - 1
 * torch computes the logarithmic part in float32 (r.float() / max_exact, torch.log, divided by
 * the double math.log(...) as a float32 scalar, times the integer); so does this file. */
#include "app/model/relative_position.h"

#include "app/core/error.h"

#include <math.h>
#include <stdlib.h>

int relative_position_bucket(int relative_position, int bidirectional, int num_buckets, int max_distance) {
    int bucket = 0, n = num_buckets;
    long r = relative_position;
    if (bidirectional) {
        n /= 2;
        if (r > 0) bucket += n;
        r = labs(r);
    } else {
        r = r < 0 ? -r : 0;
    }
    int max_exact = n / 2;
    if (r < max_exact) return bucket + (int)r;
    float ratio = (float)r / (float)max_exact;
    float scale = (float)log((double)max_distance / (double)max_exact);
    float large = logf(ratio) / scale * (float)(n - max_exact);
    long if_large = max_exact + (long)large;  /* .to(torch.long): toward zero */
    if (if_large > n - 1) if_large = n - 1;
    return bucket + (int)if_large;
}

const char *relative_position_check(int num_buckets, int max_distance) {
    if (num_buckets < 4)
        return "--relative-attention-num-buckets must be at least 4 (the encoder's bidirectional buckets halve it, "
               "and each half needs an exact and a logarithmic bucket)";
    if (max_distance <= num_buckets / 2)
        return "--relative-attention-max-distance must exceed half of --relative-attention-num-buckets (the "
               "logarithmic buckets divide by log(max_distance / (num_buckets / 2)))";
    return NULL;
}

void relative_position_buckets(int *buckets, int Tq, int Tk, int bidirectional, int num_buckets, int max_distance) {
    for (int t1 = 0; t1 < Tq; t1++)
        for (int t2 = 0; t2 < Tk; t2++)
            buckets[(size_t)t1 * Tk + t2] = relative_position_bucket(t2 - t1, bidirectional, num_buckets, max_distance);
}

void relative_position_bias(float *bias, const float *table, const int *buckets, int Tq, int Tk, int heads,
                            int head_start, int local_heads) {
    size_t plane = (size_t)Tq * Tk;
    for (int h = 0; h < local_heads; h++)
        for (size_t i = 0; i < plane; i++)
            bias[(size_t)h * plane + i] = table[(size_t)buckets[i] * heads + head_start + h];
}

void relative_position_bias_backward(float *dtable, const float *dbias, const int *buckets, int Tq, int Tk,
                                     int heads, int head_start, int local_heads, int num_buckets) {
    size_t plane = (size_t)Tq * Tk;
    double *sums = calloc((size_t)num_buckets, sizeof *sums);
    CHECK(sums, "out of host memory");
    for (int h = 0; h < local_heads; h++) {
        for (int b = 0; b < num_buckets; b++) sums[b] = 0.0;
        for (size_t i = 0; i < plane; i++) sums[buckets[i]] += dbias[(size_t)h * plane + i];
        for (int b = 0; b < num_buckets; b++) dtable[(size_t)b * heads + head_start + h] += (float)sums[b];
    }
    free(sums);
}
