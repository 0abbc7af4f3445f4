/* relative_position.h: T5's relative position bias (Megatron-Core's RelativePositionEmbedding,
 * megatron/core/models/common/embeddings/relative_pos_embedding.py, adapted there from Hugging
 * Face's T5): a table [num_buckets, heads] per stack (the encoder's bidirectional, the decoder's
 * causal), each relative position memory - query binned into a bucket, and the bias
 *   bias[h, t1, t2] = table[bucket(t2 - t1), h]
 * added to the self-attention scores of every layer of the stack after their scaling. With
 * tensor parallelism every rank holds the whole table and takes its heads' columns
 * (Megatron scatters the bias over the heads; the backward's all-gather is the caller's). */
#ifndef RELATIVE_POSITION_H
#define RELATIVE_POSITION_H

/* Megatron's (and Hugging Face T5's) _relative_position_bucket of one relative position, in
 * the float32 arithmetic torch does it in: bidirectional splits the buckets between negative
 * and positive positions; causal maps every positive (future) position to bucket 0. Half of a
 * side's buckets are exact positions, the others logarithmic up to max_distance, beyond which
 * everything shares the last bucket. */
int relative_position_bucket(int relative_position, int bidirectional, int num_buckets, int max_distance);

/* NULL when --relative-attention-num-buckets and --relative-attention-max-distance make a
 * well-defined bucket function, else why not */
const char *relative_position_check(int num_buckets, int max_distance);

/* buckets[t1 * Tk + t2] = relative_position_bucket(t2 - t1, ...) */
void relative_position_buckets(int *buckets, int Tq, int Tk, int bidirectional, int num_buckets, int max_distance);

/* bias[h, t1, t2] (h < local_heads) = table[buckets[t1, t2] * heads + head_start + h] */
void relative_position_bias(float *bias, const float *table, const int *buckets, int Tq, int Tk, int heads,
                            int head_start, int local_heads);

/* dtable[b * heads + head_start + h] += the sum of dbias[h, t1, t2] over the (t1, t2) of bucket
 * b, in the order of t1 then t2 (summed in double, added once) */
void relative_position_bias_backward(float *dtable, const float *dbias, const int *buckets, int Tq, int Tk,
                                     int heads, int head_start, int local_heads, int num_buckets);

#endif
