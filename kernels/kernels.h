/* kernels.h: the one interface between the model/optimizer code and a compute backend.
 *
 * A backend (kernels/cpu: fp32 reference C; kernels/cuda: bf16 or fp16 mixed precision) fills a
 * table of operations. Model code calls only through this table, never a backend directly, and never
 * includes CUDA headers. Pointers passed to operations are backend memory (host memory for the
 * CPU backend, device memory for CUDA), allocated with ops->alloc.
 *
 * Precision (Megatron's mixed precision): parameters, activations and activation gradients are
 * in the backend's COMPUTE DTYPE, passed as `void *` (fp32 on the CPU backend, bf16 on CUDA, fp16
 * on CUDA with --fp16; ops->act_dtype says which, ops->act_bytes bytes per element; act_at()
 * does element arithmetic on them). Parameter gradients (`float *`: Megatron's main_grad), fp32 master weights, Adam moments and per-row
 * statistics (mean, rstd, row maxima, losses) are fp32 on every backend.
 *
 * Conventions shared by every operation:
 *  - Row-major tensors. N = number of token rows (micro-batch B times sequence T).
 *  - Linear weights are [out_features, in_features] as in PyTorch/Megatron: y = x W^T + b.
 *  - Forward operations overwrite their outputs.
 *  - Backward operations ACCUMULATE (+=) into parameter gradients (gradient accumulation over
 *    micro-batches) and follow the per-operation comment for input gradients.
 *  - Vocab-parallel operations take the global id of their first local vocabulary row
 *    (vocab_start) so that tensor parallelism can split the vocabulary; with one rank it is 0.
 *  - Dropout masks come from the counter-based generator (kernels/philox.h): element i of a
 *    call is draw number offset + i under key (seed, stream) (eight 16-bit draws per Philox call,
 *    see philox_keep; attention probabilities in 2 x 4 blocks of (query, key), eight 16-bit
 *    draws per call, see philox_keep_attention), so backward regenerates the mask instead of
 *    storing it, and masks do not depend on the parallel layout.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* where a dropout mask comes from: key (seed, stream), counter offset + element index */
typedef struct dropout_rng {
    float p;           /* drop probability; 0 disables dropout (the op is then a copy) */
    uint64_t seed;     /* --seed */
    uint64_t stream;   /* which dropout site: (iteration, micro-batch, layer, site) hashed */
    uint64_t offset;   /* counter of the first element */
} dropout_rng;

/* the small layout helpers below are shared with the CUDA kernels (device code too) */
#ifdef __CUDACC__
#define KERNELS_HOST_DEVICE __host__ __device__
#else
#define KERNELS_HOST_DEVICE
#endif

/* Rotary position embeddings (RoPE, Megatron-Core's RotaryEmbedding): in each query and key head,
 * pair (a, b) of its first rotary_dim channels turns by angle pos * theta_i at token position pos:
 *   a' = a cos - b sin,  b' = b cos + a sin,  theta_i = base^(-2i/rotary_dim), i < rotary_dim/2
 * where the pairs are (i, i + rotary_dim/2) ("rotate half", Llama's) or (2i, 2i+1) when
 * interleaved (RoFormer's); channels past rotary_dim pass through. pos = (position_start + t) *
 * position_scale (1 / --rotary-seq-len-interpolation-factor); position_start is 0 in training and
 * the key/value cache position of the first new token in generation. */
typedef struct rope_spec {
    int rotary_dim;        /* even, <= D: kv_channels * --rotary-percent */
    int interleaved;       /* --rotary-interleaved */
    float base;            /* --rotary-base */
    float position_scale;  /* 1 / --rotary-seq-len-interpolation-factor (1 without) */
    int position_start;    /* position of token t = 0 (generation: the cache position) */
    float scaling_factor;  /* --use-rope-scaling: --rope-scaling-factor; 0 without */
} rope_spec;

/* theta_i of pair i, computed in fp32 as Megatron does: 1 / base^(2i / rotary_dim); with Llama
 * 3's rope scaling (Megatron-Core's RotaryEmbedding._apply_scaling: low and high frequency
 * factors 1 and 4, original context 8192) a pair whose wavelength 2 pi / theta exceeds 8192
 * turns factor times slower, one shorter than 8192 / 4 is kept, and those between interpolate:
 * theta' = (1 - s) theta / factor + s theta, s = (8192 / wavelength - 1) / (4 - 1). */
static inline KERNELS_HOST_DEVICE float rope_inv_freq(rope_spec rope, int i) {
    float theta = 1.0f / powf(rope.base, (float)(2 * i) / (float)rope.rotary_dim);
    if (rope.scaling_factor > 0.0f) {
        const float old_context = 8192.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
        const float wavelength = 2.0f * 3.14159265358979f / theta;
        if (wavelength > old_context / low_freq_factor) {
            theta = theta / rope.scaling_factor;
        } else if (!(wavelength < old_context / high_freq_factor)) {
            float smooth = (old_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
            theta = (1.0f - smooth) * theta / rope.scaling_factor + smooth * theta;
        }
    }
    return theta;
}

/* The qkv row layout of grouped-query attention (Megatron-Core's linear_qkv): H query heads in
 * G groups (G divides H; G == H is ordinary multi-head attention); per group its H/G query heads,
 * then its key head, then its value head, each D wide. Offsets within one row of H*D + 2*G*D: */
static inline KERNELS_HOST_DEVICE size_t qkv_query_offset(int h, int H, int G, int D) {
    int per = H / G;
    return ((size_t)(h / per) * (size_t)(per + 2) + (size_t)(h % per)) * (size_t)D;
}
static inline KERNELS_HOST_DEVICE size_t qkv_key_offset(int g, int H, int G, int D) {
    int per = H / G;
    return ((size_t)g * (size_t)(per + 2) + (size_t)per) * (size_t)D;
}
/* the value head of group g follows its key head: qkv_key_offset + D */

/* Where element e of a tensor-parallel shard sits in its global tensor, so that an initial value
 * depends only on its global position (any layout, any backend). Row-split tensors may be made of
 * row_blocks equal blocks each split over the ranks (SwiGLU's [gate; up]): local row r is row
 * shard_start + r % rows_held of block r / rows_held. Vectors (cols == 0) index like rows. */
typedef struct shard_map {
    int64_t cols, local_cols;  /* global and held columns; 0 for vectors */
    int64_t rows_held;         /* rows held per block (row-split tensors) */
    int64_t rows_per_block;    /* global rows per block (row-split tensors) */
    int64_t shard_start;       /* first global row within each block, or first global column */
    int split_rows, split_cols;
} shard_map;

static inline KERNELS_HOST_DEVICE uint64_t shard_global_row(const shard_map *m, uint64_t r) {
    uint64_t held = (uint64_t)m->rows_held, block = r / held;
    return block * (uint64_t)m->rows_per_block + (uint64_t)m->shard_start + r % held;
}
static inline KERNELS_HOST_DEVICE uint64_t shard_global_index(const shard_map *m, uint64_t e) {
    if (m->cols == 0) return m->split_rows ? shard_global_row(m, e) : (uint64_t)m->shard_start + e;
    uint64_t r = e / (uint64_t)m->local_cols, col = e % (uint64_t)m->local_cols;
    if (m->split_rows) r = shard_global_row(m, r);
    if (m->split_cols) col += (uint64_t)m->shard_start;
    return r * (uint64_t)m->cols + col;
}

/* one range of the flat buffers that a multi-tensor operation covers (the optimizer's shards) */
typedef struct tensor_range {
    size_t offset;        /* elements into the parameter and gradient buffers */
    size_t state_offset;  /* elements into the optimizer-state buffers (masters, moments) */
    size_t length;
    float weight_decay;   /* AdamW's decoupled weight decay for this range */
} tensor_range;

/* Context parallelism (app/model/context_parallel.h): a rank holds each sequence's rows in
 * `pieces` contiguous pieces of piece_length rows (Megatron's load-balanced layout: pieces r and
 * 2 CP - 1 - r of the 2 CP pieces of the sequence); row t of a sequence sits at global position
 * start[t / piece_length] + t % piece_length. */
typedef struct attention_span {
    int pieces;        /* 1 or 2 */
    int piece_length;  /* rows per piece: a sequence holds pieces x piece_length rows here */
    int start[2];      /* global position of each piece's first row */
} attention_span;

/* one block of ring attention: the query rows of span q against the key/value rows of span k */
typedef struct attention_block_spec {
    attention_span q, k;
    int causal;        /* a key at a later global position than the query is masked */
    int total_T;       /* the whole sequence's length: the dropout mask numbers (t1, t2) over it */
    int head_start, total_heads; /* as attention_forward's: the dropout mask of the global head */
    /* sliding window (attention_forward's window_left): with windowed set, a key more than
     * window_left positions before the query is masked too; windowed 0 (a zeroed spec): none */
    int windowed, window_left;
} attention_block_spec;


typedef enum kernel_dtype { KERNEL_FP32 = 0, KERNEL_BF16 = 1, KERNEL_FP16 = 2 } kernel_dtype;

/* where a kernel that makes a tensor also writes its fp8 codes (issue 43: the producer of an fp8
 * linear's operand, TE's fused cast; kernel_ops' *_fp8 ops): codes[i] = fp8_quantize's code of
 * the output as stored (compute dtype) times *scale, *amax = fmaxf(*amax, max |out[i]|) and
 * *scale_inv = 1 / *scale, each skipped when NULL: bit for bit the plain op followed by
 * fp8_quantize(codes, amax, scale_inv, out, n, scale, format). All backend memory. */
typedef struct fp8_output {
    uint8_t *codes;
    float *amax, *scale_inv;
    const float *scale;
    int format; /* FP8_E4M3 or FP8_E5M2 */
} fp8_output;

/* Mixture of experts: how a router turns its logits into routing decisions (Megatron-Core's
 * TopKRouter with topk_routing_with_score_function, apply_router_token_dropping and the
 * load-balancing and z losses of moe_utils.py). Per token row with logits l[E]:
 *   softmax, pre_softmax: s = softmax(l); top-k of s; weights = s at the chosen experts
 *   softmax:              top-k of l; weights = softmax over the k chosen logits
 *   sigmoid/sqrtsoftplus: s = sigmoid(l) or sqrt(softplus(l)); top-k of s; weights = s at the
 *                         chosen experts, divided by their sum (+1e-20) when k > 1
 * then weights *= topk_scaling_factor (when > 0). Group-limited routing (num_groups > 0) first
 * keeps the group_topk groups of E/num_groups experts whose top (k/group_topk) scores sum
 * highest. With expert_bias (aux-loss-free load balancing, Megatron's --moe-router-enable-expert-bias;
 * sigmoid and sqrtsoftplus only, NULL otherwise) the top-k choice, group-limited routing
 * included, ranks s[e] + expert_bias[e] (fp32) instead of s[e], while the weights stay the
 * unbiased s at the chosen experts (Megatron's topk_routing_with_score_function; the losses
 * below never see the bias). Ties go to the lower expert index. With capacity_factor > 0 each
 * expert keeps at most
 * ceil(N k / E x factor) of the micro-batch's N tokens: those of highest weight (drop policy
 * probs; ties to the lower token) or the first ones (position); a dropped choice has expert -1
 * and weight 0.
 * Losses (training only): aux (GShard/Switch) = coeff E / (k N^2) sum_e P_e f_e with P_e the sum
 * over tokens of a[t,e] (a: softmax(l), or the score normalized per row for the other score
 * functions) and f_e how many tokens choose e by the plain top-k of a; seq_aux is the mean over
 * the B sequences of the same over each sequence's T tokens; z = z_coeff mean_t logsumexp(l_t)^2. */
typedef enum { MOE_SCORE_SOFTMAX = 0, MOE_SCORE_SIGMOID = 1, MOE_SCORE_SQRTSOFTPLUS = 2 } moe_score_function;
typedef enum { MOE_BALANCE_NONE = 0, MOE_BALANCE_AUX_LOSS = 1, MOE_BALANCE_SEQ_AUX_LOSS = 2 } moe_balancing;
typedef struct moe_router_spec {
    int num_experts, topk;          /* E, k */
    int score_function;             /* moe_score_function */
    int pre_softmax;
    float topk_scaling_factor;      /* 0: none */
    int num_groups, group_topk;     /* group-limited routing; 0: off */
    float capacity_factor;          /* 0: dropless */
    int drop_by_position;           /* drop policy position (else probs) */
    int balancing;                  /* moe_balancing */
    float aux_loss_coeff, z_loss_coeff;
    int seq_length;                 /* T: tokens per sequence, for seq_aux_loss */
    const float *expert_bias;       /* [E] fp32 backend memory, or NULL: the layer's expert bias
                                     * (selection only; see above) */
} moe_router_spec;

/* the number of values moe_route_forward writes into stats: the aux and z losses (each without
 * its coefficient, 0 when off), then the tokens per expert of the loss's routing map (float) */
#define MOE_ROUTER_STATS(E) (2 + (E))

typedef struct kernel_ops {
    const char *name; /* "cpu" or "cuda" */
    int host_memory;  /* 1 when backend memory is host memory (MPI then moves it; else NCCL) */
    size_t act_bytes; /* bytes per element of the compute dtype: 4 (fp32) or 2 (bf16, fp16) */
    int act_dtype;    /* the compute dtype itself (kernel_dtype): KERNEL_FP32 on the CPU backend,
                       * KERNEL_BF16 on kernels_cuda(), KERNEL_FP16 on kernels_cuda_fp16() */
    int attention_window; /* 1 when the attention ops honour a sliding window (window_left,
                           * attention_block_spec.window_left); 0: --window-size is refused */

    /* ---- memory ---- */
    void *(*alloc)(size_t bytes);                 /* zero-filled; aborts on failure */
    /* page-locked host memory (device <-> host copies at full bus speed: the asynchronous
     * checkpoint's snapshot), and its release; NULL on a host-memory backend (use malloc) */
    void *(*host_pinned_alloc)(size_t bytes);
    void (*host_pinned_release)(void *p);
    void (*release)(void *ptr);
    void (*zero)(void *ptr, size_t bytes);
    /* a zero-fill that runs beside the work queued after it (CUDA: on a side stream, once the
     * work queued before it is done); zero_join() makes the work queued after the join wait for
     * the fill. NULL on the CPU backend, where zero() serves. The training step clears the
     * gradients this way, so the fill overlaps the forward (nothing reads them before the
     * backward, which joins first). */
    void (*zero_beside)(void *ptr, size_t bytes);
    void (*zero_join)(void);
    void (*copy_to_host)(void *host_dst, const void *src, size_t bytes);
    void (*copy_from_host)(void *dst, const void *host_src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*synchronize)(void);
    /* bytes of backend memory free now (cudaMemGetInfo); NULL on a host-memory backend, where the
     * host's available memory counts (app/training/memory_estimate.h) */
    size_t (*memory_free)(void);
    /* n compute-dtype elements <-> host fp32 (rounding to nearest even into bf16) */
    void (*copy_to_host_float)(float *host_dst, const void *src, size_t n);
    void (*copy_from_host_float)(void *dst, const float *host_src, size_t n);
    /* dst[n] (compute dtype) = src[n] (fp32 backend memory); a no-op when they alias (cpu) */
    void (*float_to_act)(void *dst, const float *src, size_t n);
    /* dst[n] (fp32 backend memory) = src[n] (compute dtype); a no-op when they alias (cpu) */
    void (*act_to_float)(float *dst, const void *src, size_t n);

    /* ---- parameter initialization (on the device: no host pass over the weights) ---- */
    /* dst[i] = std * philox_normal(seed, stream, shard_global_index(map, first + i)), i < n,
     * in the compute dtype (fp32_dst 0: rounded to nearest even as copy_from_host_float does)
     * or fp32 (fp32_dst 1: master weights). */
    void (*init_normal)(void *dst, int fp32_dst, shard_map map, uint64_t seed, uint64_t stream,
                        float std, uint64_t first, size_t n);
    /* dst[i] = value, i < n, in the compute dtype (fp32_dst 0) or fp32 (fp32_dst 1) */
    void (*fill)(void *dst, int fp32_dst, float value, size_t n);
    /* open (on 1) or close (on 0) the profiler's capture range (cudaProfilerStart/Stop: what
     * ncu --profile-from-start off and nsys --capture-range=cudaProfilerApi record); NULL on a
     * backend without one */
    void (*profiler_range)(int on);

    /* ---- embeddings ---- */
    /* out[N,C] = table[tokens[n] - vocab_start] for tokens in [vocab_start, vocab_start+vocab_rows),
     * 0 for tokens outside the local rows (vocab-parallel; the model sums over TP ranks). */
    void (*embedding_forward)(void *out, const int *tokens, const void *table,
                              int N, int C, int vocab_start, int vocab_rows);
    /* dtable[tokens[n]-vocab_start] += dout[n] for local tokens; deterministic order. */
    void (*embedding_backward)(float *dtable, const void *dout, const int *tokens,
                               int N, int C, int vocab_start, int vocab_rows);
    /* out[b,t,:] += wpe[position_start + t,:] for out [B,T,C]. */
    void (*position_embedding_forward)(void *out, const void *wpe, int B, int T, int C,
                                       int position_start);
    /* dwpe[position_start + t,:] += sum_b dout[b,t,:]. */
    void (*position_embedding_backward)(float *dwpe, const void *dout, int B, int T, int C,
                                        int position_start);

    /* ---- layer norm ---- */
    /* out = (x - mean) * rstd * weight + bias per row of x[N,C]; saves mean[N], rstd[N]. */
    void (*layernorm_forward)(void *out, float *mean, float *rstd, const void *x,
                              const void *weight, const void *bias, int N, int C, float eps);
    /* dx += dL/dx (accumulates: x is on the residual stream); dweight += ; dbias += . With
     * dx_colsum (NULL: skipped) also dx_colsum[C] += the column sums of the updated dx: the
     * gradient of a bias added to the residual stream just past this point (the linear layer
     * before it, with no dropout between), summed in the norm's own pass where the backend can;
     * on the CPU the bits of bias_backward on dx afterwards. */
    void (*layernorm_backward)(void *dx, float *dweight, float *dbias, float *dx_colsum, const void *dout,
                               const void *x, const void *weight, const float *mean,
                               const float *rstd, int N, int C);
    /* the same gradients from the norm's output y instead of its input (Apex's memory-efficient
     * layer norm, Megatron's --memory-efficient-layer-norm): norm = (y - bias) * (1 / w'), w' the
     * weight clamped in magnitude to at least eps (w' = eps for 0 <= w < eps, -eps for
     * -eps < w < 0), as Apex does; the forward's mean is not needed, its rstd is. */
    void (*layernorm_backward_from_output)(void *dx, float *dweight, float *dbias, float *dx_colsum,
                                           const void *dout, const void *y, const void *weight,
                                           const void *bias, const float *rstd, int N, int C, float eps);

    /* ---- RMSNorm (Megatron's --normalization RMSNorm) ---- */
    /* out = x * rstd * weight per row of x[N,C], rstd = 1/sqrt(mean(x^2) + eps); saves rstd[N]. */
    void (*rmsnorm_forward)(void *out, float *rstd, const void *x, const void *weight, int N,
                            int C, float eps);
    /* dx += dL/dx (accumulates, as layernorm_backward); dweight += . */
    void (*rmsnorm_backward)(void *dx, float *dweight, const void *dout, const void *x,
                             const void *weight, const float *rstd, int N, int C);
    /* the same from the output y: norm = y * (1 / w') (w' as for layernorm_backward_from_output) */
    void (*rmsnorm_backward_from_output)(void *dx, float *dweight, const void *dout, const void *y,
                                         const void *weight, const float *rstd, int N, int C, float eps);

    /* ---- linear layers ---- */
    /* out[N,OC] = x[N,IC] W[OC,IC]^T + bias[OC] (bias may be NULL). With gelu_out non-NULL also
     * gelu_out = gelu(out) (a fused epilogue on CUDA; out keeps the pre-activation). */
    void (*matmul_forward)(void *out, void *gelu_out, const void *x, const void *weight,
                           const void *bias, int N, int IC, int OC);
    /* out[N,OC] = residual[N,OC] + (x W^T + bias) (bias may be NULL; out must not alias x or
     * residual): a linear layer whose output joins the residual stream without dropout and
     * without a tensor-parallel reduction in between (Megatron's bias-dropout-add at p = 0). On
     * CUDA one GEMM (beta 1 with C = residual, BIAS epilogue: rounded once); on the CPU the
     * unfused order, bit for bit: the product, + bias, then residual + that. */
    void (*matmul_forward_residual)(void *out, const void *x, const void *weight, const void *bias,
                                    const void *residual, int N, int IC, int OC);
    /* dx[N,IC] = dout W (overwritten; skipped when dx is NULL);
     * dweight[OC,IC] += dout^T x (skipped when dweight is NULL); dbias[OC] += column sums of
     * dout (skipped when NULL). The parts are independent: one call with dx alone and one with
     * dweight and dbias give the bits of one call with all three. */
    void (*matmul_backward)(void *dx, float *dweight, float *dbias, const void *dout,
                            const void *x, const void *weight, int N, int IC, int OC);
    /* grouped GEMMs (a mixture of experts' experts, --moe-grouped-gemm): matmul_forward (no bias)
     * and matmul_backward (no bias; dweight accumulates) over consecutive row blocks, block g being
     * rows [rows[g], rows[g+1]) of x, out, dout and dx, with its own weight[g] [OC, IC] and
     * dweight[g] (NULL: no weight gradient); rows, weight and dweight are host arrays (the row
     * counts are known on the host after the layer's routing); empty blocks are skipped. The row
     * counts change from call to call: the CUDA backend plans its GEMMs per size bucket rather
     * than per exact shape. */
    void (*grouped_matmul_forward)(void *out, const void *x, const void *const *weight, const int *rows, int groups,
                                   int IC, int OC);
    void (*grouped_matmul_backward)(void *dx, float *const *dweight, const void *dout, const void *x,
                                    const void *const *weight, const int *rows, int groups, int IC, int OC);
    /* matmul_rows_vary(1) ... matmul_rows_vary(0) around linear layers whose row count N changes
     * from call to call (BERT's LM head over the masked positions): the CUDA backend plans them per
     * size bucket, as the grouped GEMMs, instead of planning (and timing) a new exact shape at
     * almost every step. NULL where there is nothing to do (the CPU backend). */
    void (*matmul_rows_vary)(int on);
    /* dweight[OC,IC] = dout^T x, written over what dweight held: matmul_backward's weight
     * gradient as a step's first write to it, so the gradient needs no clearing before (beta 0
     * on CUDA; on the CPU the bits of clearing it and accumulating) */
    void (*matmul_backward_weight_overwrite)(float *dweight, const void *dout, const void *x, int N, int IC, int OC);
    /* matmul_backward of a layer whose input is x = gelu(pre) (the MLP's fc2), the GeLU's
     * backward fused in: dpre[N,IC] = (dout W) * gelu'(pre) (overwritten; a cuBLASLt DGELU
     * epilogue on CUDA where it has an algorithm, so the product is rounded once), and
     * dweight[OC,IC] += dout^T x. With x_kept 0 the layer's input was not kept from the forward:
     * x[N,IC] is scratch that receives gelu(pre) again (in the pass that reads pre for the
     * derivative). With x_kept 1 x holds the forward's gelu(pre) and is only read, before dpre
     * is written, so dpre may be x itself. dweight NULL skips the weight gradient (x is still
     * made when not kept): a call per block of rows, then matmul_backward for the weight
     * gradient, gives the bits of one call on the CPU. */
    void (*matmul_backward_gelu)(void *dpre, float *dweight, const void *dout, void *x,
                                 const void *pre, const void *weight, int N, int IC, int OC, int x_kept);

    /* ---- rotary position embeddings ---- */
    /* rotate every query and key head of qkv[B,T,(H+2G)*D] (the layout above) IN PLACE by its
     * token's angles; values are untouched */
    void (*rope_forward)(void *qkv, int B, int T, int H, int G, int D, rope_spec rope);
    /* the transpose (rotation by minus the angles) IN PLACE on dqkv: the gradient before RoPE */
    void (*rope_backward)(void *dqkv, int B, int T, int H, int G, int D, rope_spec rope);

    /* ---- causal self-attention ---- */
    /* qkv[B,T,(H+2G)*D] holds H query heads in G groups (qkv_query_offset, qkv_key_offset:
     * Megatron-Core's layout; with G == H each head's q, k, v side by side); query head h attends
     * with the key and value of its group h/(H/G), read in place (no copies of K/V).
     * out[B,T,H*D] = softmax(q k^T / sqrt(D) + causal mask) v with dropout on the probabilities.
     * The workspace (attention_workspace_bytes) keeps what backward needs. head_start/total_heads
     * place local query heads among all heads so that the dropout mask does not depend on the
     * tensor-parallel split. window_left >= 0 is sliding-window attention (Megatron's
     * --window-size (window_left, 0), Transformer Engine's causal window): the query at t1 sees
     * the keys at t1 - window_left .. t1 only; -1 sees every earlier key. A backend that honours
     * it sets attention_window (the ops taking window_left abort on >= 0 otherwise). */
    size_t (*attention_workspace_bytes)(int B, int T, int H, int D);
    void (*attention_forward)(void *out, void *workspace, const void *qkv, int B, int T,
                              int H, int G, int D, int head_start, int total_heads,
                              int window_left, dropout_rng rng);
    /* dqkv[B,T,(H+2G)*D] is overwritten (a group's dk, dv sum over its query heads); out is the
     * forward's output (flash attention needs it). dbias (may be NULL) += the column sums of
     * dqkv over its B*T rows: the qkv bias gradient, which a backend may sum as it writes dqkv
     * (CUDA on Hopper) instead of in a pass of its own. */
    void (*attention_backward)(void *dqkv, float *dbias, const void *dout, const void *qkv, const void *out,
                               const void *workspace, int B, int T, int H, int G, int D,
                               int head_start, int total_heads, int window_left, dropout_rng rng);

    /* ---- bidirectional self-attention with a key-padding mask (BERT's encoder) ----
     * attention_forward's qkv layout, scores, softmax and dropout (the same mask of (b, global
     * head, t1, t2)) with every key visible except those whose key_valid[b*T + t2] is 0
     * (Megatron's padding mask, [B,T] int32 in backend memory) instead of the causal mask; a
     * query row with no visible key gets out 0. The workspace is attention_workspace_bytes's.
     * backward overwrites dqkv, takes the forward's out and adds the qkv bias gradient into dbias
     * (may be NULL) as attention_backward does; a padding key's dk and dv are 0. (CUDA:
     * cuda_attention.cu's mma.sync flash kernels with the mask.) */
    void (*attention_padded_forward)(void *out, void *workspace, const void *qkv, const int *key_valid,
                                     int B, int T, int H, int G, int D, int head_start, int total_heads,
                                     dropout_rng rng);
    void (*attention_padded_backward)(void *dqkv, float *dbias, const void *dout, const void *qkv, const void *out,
                                      const int *key_valid, const void *workspace, int B, int T, int H, int G,
                                      int D, int head_start, int total_heads, dropout_rng rng);

    /* ---- cross-attention with a key-padding mask (T5's decoder over the encoder output) ----
     * q[B,Tq,H*D] (linear_q's output) attends over kv[B,Tk,H*2D] (linear_kv's: per head its key,
     * then its value, Megatron-Core's CrossAttention) with the keys whose key_valid[b*Tk + t2]
     * is 0 masked; otherwise attention_padded_forward's math and dropout mask, (t1, t2) numbered
     * over Tq x Tk. workspace: cross_attention_workspace_bytes. backward overwrites dq and dkv and
     * takes the forward's out (flash attention needs it, as attention_backward). (CUDA:
     * cuda_attention.cu's padded flash kernels with separate q and kv tensors.) */
    size_t (*cross_attention_workspace_bytes)(int B, int Tq, int Tk, int H);
    void (*cross_attention_forward)(void *out, void *workspace, const void *q, const void *kv, const int *key_valid,
                                    int B, int Tq, int Tk, int H, int D, int head_start, int total_heads,
                                    dropout_rng rng);
    void (*cross_attention_backward)(void *dq, void *dkv, const void *dout, const void *q, const void *kv,
                                     const void *out, const int *key_valid, const void *workspace, int B, int Tq,
                                     int Tk, int H, int D, int head_start, int total_heads, dropout_rng rng);

    /* ---- self-attention with an additive score bias (T5's relative position bias) ----
     * attention_padded_forward's qkv layout, dropout mask and workspace with
     *   preatt[t1,t2] = q[t1].k[t2] / sqrt(D) + bias[h,t1,t2]
     * (Transformer Engine's post_scale_bias, which Megatron-Core's T5 uses) over the keys with
     * key_valid[b*T + t2] != 0 (key_valid NULL: every key) and, with causal set, t2 <= t1 only.
     * bias [H,T,T] is fp32 backend memory for the local heads, shared by the batch. backward
     * overwrites dqkv, adds the qkv bias gradient into dbias (may be NULL) as
     * attention_backward does, and adds into dscore_bias [H,T,T] (fp32) d(loss)/d(bias) summed
     * over the batch. NULL on CUDA (not written yet: T5's relative positions need the CPU). */
    void (*attention_bias_forward)(void *out, void *workspace, const void *qkv, const int *key_valid,
                                   const float *bias, int causal, int B, int T, int H, int G, int D,
                                   int head_start, int total_heads, dropout_rng rng);
    void (*attention_bias_backward)(void *dqkv, float *dbias, float *dscore_bias, const void *dout,
                                    const void *qkv, const int *key_valid, int causal, const void *workspace,
                                    int B, int T, int H, int G, int D, int head_start, int total_heads,
                                    dropout_rng rng);

    /* ---- ring attention over blocks of keys and values (context parallelism) ----
     * kv[B,Tk,G,2D] packs each group's key then value head of a row (what travels around the
     * ring); the queries stay in qkv[B,Tq,(H+2G)*D]. Scores, softmax and dropout are
     * attention_forward's, with positions and the dropout mask's (t1, t2) those of the spec's
     * global positions (the same mask as one rank holding the whole sequence).
     * attention_kv_pack: kv[rows] = the key and value heads of qkv[rows] */
    void (*attention_kv_pack)(void *kv, const void *qkv, int rows, int H, int G, int D);
    /* dqkv's key and value heads of rows (overwritten) = dkv[rows]; query heads untouched */
    void (*attention_kv_unpack)(void *dqkv, const void *dkv, int rows, int H, int G, int D);
    /* out[B,Tq,H*D] = the attention of the block's queries over the block's visible keys alone,
     * normalized over them; lse[B,H,Tq] (fp32) = log of the sum of exp(score) over them (scores
     * q.k / sqrt(D)); a row that sees no key gets out 0, lse -inf */
    void (*attention_block_forward)(void *out, float *lse, const void *qkv, const void *kv, int B, int H, int G,
                                    int D, attention_block_spec spec, dropout_rng rng);
    /* merge a block's result into the running one (log-sum-exp weights): L = log(e^lse + e^blse),
     * out = out e^(lse - L) + block_out e^(block_lse - L), lse = L; over [B,T] rows of H heads */
    void (*attention_merge)(void *out, float *lse, const void *block_out, const float *block_lse, int B, int T,
                            int H, int D);
    /* the block's backward given the merged forward's out and lse (flash attention's:
     * P = exp(score - lse), dP = drop'(dout . v), dS = P (dP - rowsum(dout * out))):
     * dqkv's query heads += dL/dq, dkv += dL/d(k, v) of the block (accumulate: the ring sums
     * over blocks); dqkv's key and value heads untouched */
    void (*attention_block_backward)(void *dqkv, void *dkv, const void *dout, const void *qkv, const void *kv,
                                     const void *out, const float *lse, int B, int H, int G, int D,
                                     attention_block_spec spec, dropout_rng rng);
    /* the all-to-all of --cp-comm-type a2a (heads for sequence): out[k][r][0:width] =
     * in[r][k width : (k+1) width] for k < blocks over rows of blocks x width; and its inverse */
    void (*columns_to_blocks)(void *out, const void *in, int rows, int blocks, int width);
    void (*blocks_to_columns)(void *out, const void *in, int rows, int blocks, int width);

    /* ---- attention over a key/value cache (generation: cpu_ and cuda_decode_attention) ----
     * qkv[B,Tq,(H+2G)*D] (the grouped layout above) holds the new tokens at positions
     * [past, past+Tq) of every sequence. Their keys and values (one head per group) are stored
     * into k_cache and v_cache [B,max_len,G,D] (compute dtype) at those positions; then
     * out[B,Tq,H*D] = softmax(q k^T / sqrt(D)) v over the keys at positions 0..past+t of new
     * token t (causal; no dropout), query head h reading its group h/(H/G) in place; with
     * window_left >= 0 only the keys at positions past+t - window_left .. past+t (the sliding
     * window of attention_forward). */
    void (*decode_attention)(void *out, void *k_cache, void *v_cache, const void *qkv, int B,
                             int Tq, int H, int G, int D, int past, int max_len, int window_left);

    /* ---- elementwise ---- */
    /* GeLU with the tanh approximation (Megatron's/GPT-2's). */
    void (*gelu_forward)(void *out, const void *x, size_t n);
    /* dx = dout * gelu'(x) (overwritten). */
    void (*gelu_backward)(void *dx, const void *x, const void *dout, size_t n);
    /* BERT's heads (Megatron-Core's BertLMHead and Pooler): the exact GeLU of
     * torch.nn.functional.gelu, x Phi(x), and tanh; backward dx = dout * f' (overwritten; dx may
     * alias dout), tanh's from its output y. */
    void (*gelu_erf_forward)(void *out, const void *x, size_t n);
    void (*gelu_erf_backward)(void *dx, const void *x, const void *dout, size_t n);
    void (*tanh_forward)(void *out, const void *x, size_t n);
    void (*tanh_backward)(void *dx, const void *y, const void *dout, size_t n);
    /* SwiGLU (--swiglu): x[N,2F] holds per row the gate half then the up half (the fc1 output
     * of this rank's [gate; up] shard); out[N,F] = silu(gate) * up, silu(a) = a sigmoid(a). */
    void (*swiglu_forward)(void *out, const void *x, int N, int F);
    /* dx[N,2F] (overwritten) = [dout * up * silu'(gate), dout * silu(gate)] */
    void (*swiglu_backward)(void *dx, const void *x, const void *dout, int N, int F);
    /* swiglu_backward, then out[N,F] = swiglu_forward(x) made again in the same pass (fc2's
     * input for its weight gradient when the activation is not kept); out may alias dout (each
     * element read before it is written); bitwise the two ops in turn */
    void (*swiglu_backward_remake)(void *dx, void *out, const void *x, const void *dout, int N, int F);
    /* out = x * mask / (1 - p), mask drawn from rng (inverted dropout; out may alias x). */
    void (*dropout_forward)(void *out, const void *x, size_t n, dropout_rng rng);
    /* dx = dout * mask / (1 - p) with the same mask (dx may alias dout). */
    void (*dropout_backward)(void *dx, const void *dout, size_t n, dropout_rng rng);
    /* out = a + b (out may alias a or b). */
    void (*add)(void *out, const void *a, const void *b, size_t n);
    /* out[n] = sum over k = 0..ranks-1, in that order, of (k == own_rank ? own : received + k*n)[i]
     * (the tensor-parallel reduce-scatter of --tp-comm-overlap: this rank's partial rows and the
     * peers' received ones; received's own_rank block is not read). fp32 accumulation, one
     * rounding to the compute dtype; out may alias own. */
    void (*sum_blocks)(void *out, const void *own, const void *received, int ranks, int own_rank, size_t n);
    /* x *= s (compute dtype) */
    void (*scale)(void *x, float s, size_t n);
    /* x *= s on fp32 (gradient clipping) */
    void (*scale_float)(float *x, float s, size_t n);
    /* out[N,C] += bias[C] per row (the bias of a row-parallel linear, added after the reduction) */
    void (*bias_add)(void *out, const void *bias, int N, int C);
    /* out[N,C] = residual + dropout(x + bias) (bias may be NULL; mask as dropout_forward over the
     * N*C elements): Megatron's bias-dropout-add in one pass; out may alias residual, not x. The
     * CPU gives the bits of bias_add, dropout_forward and add in turn. */
    void (*bias_dropout_add)(void *out, const void *residual, const void *x, const void *bias, int N, int C,
                             dropout_rng rng);
    /* dbias[C] += column sums of dout[N,C] */
    void (*bias_backward)(float *dbias, const void *dout, int N, int C);
    /* dx[N,C] = dropout_backward(dout) (the mask of rng over the N*C elements), then dbias[C] +=
     * column sums of dx: the bits of dropout_backward and bias_backward in turn (dx may alias
     * dout), in one pass where the backend fuses them (the row-parallel linear's bias gradient
     * under hidden dropout). */
    void (*dropout_bias_backward)(void *dx, float *dbias, const void *dout, int N, int C, dropout_rng rng);

    /* ---- vocab-parallel softmax cross-entropy over logits[N,V] (V local columns) ----
     * Three passes so that tensor parallelism can reduce across ranks between them:
     * 1. row_max[n] = max_v logits[n,v]                              (then all-reduce MAX)
     * 2. sum_exp[n] = sum_v exp(logits - row_max); target_logit[n] = logits[n, target-vocab_start]
     *    if the target is local, else 0                              (then all-reduce SUM both)
     * 3. losses[n] = log(sum_exp) + row_max - target_logit; logits are overwritten IN PLACE by
     *    dL/dlogits * grad_scale, i.e. (softmax - onehot(target)) * grad_scale. */
    void (*cross_entropy_max)(float *row_max, const void *logits, int N, int V);
    void (*cross_entropy_sum_exp)(float *sum_exp, float *target_logit, const void *logits,
                                  const float *row_max, const int *targets, int N, int V,
                                  int vocab_start);
    void (*cross_entropy_loss_grad)(float *losses, void *logits, const float *row_max,
                                    const float *sum_exp, const float *target_logit,
                                    const int *targets, int N, int V, int vocab_start,
                                    float grad_scale);
    /* the three passes in one where the vocabulary is not split (vocab_start 0, no reduction in
     * between): the same losses, gradient, row_max, sum_exp and target_logit, bit for bit (CUDA:
     * each row read from memory once) */
    void (*cross_entropy_fused)(float *losses, void *logits, float *row_max, float *sum_exp,
                                float *target_logit, const int *targets, int N, int V,
                                float grad_scale);

    /* greedy decoding without copying logits to the host: per row of logits[N,V] (V local
     * columns) the largest of the first `valid` columns (the real vocabulary, not its padding)
     * and its column, the lowest one on ties (the host's greedy rule); row_max and argmax are
     * backend memory [N]. */
    void (*logits_argmax)(float *row_max, int *argmax, const void *logits, int N, int V, int valid);

    /* ---- mixture of experts (app/model/moe_layer.c; moe_router_spec above) ---- */
    /* route N tokens from their router logits[N,E] (fp32): expert[N,k] (int, -1 where the
     * capacity drops it) and weight[N,k] (fp32, 0 where dropped), in top-k order; stats as
     * MOE_ROUTER_STATS (training: with_losses 1; else the losses are 0) */
    void (*moe_route_forward)(int *expert, float *weight, float *stats, const float *logits, int N,
                              moe_router_spec spec, int with_losses);
    /* dlogits[N,E] (overwritten) = the gradient of sum(dweight * weight) + loss_scale x (aux loss
     * x aux_loss_coeff + z loss x z_loss_coeff) with respect to the logits; expert as
     * moe_route_forward gave it (dropped choices take no gradient) */
    void (*moe_route_backward)(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                               moe_router_spec spec, float loss_scale);
    /* the permutation of the M = N k routed choices (Megatron's permute order: grouped by
     * expert, in token order within an expert): rows[e] = expert e's first permuted row, rows[E]
     * = the rows in all; slot_row[i] = the row of choice i = t k + j (-1 where expert[i] < 0,
     * dropped); row_token[row] = the token t of each row. All in device memory, so that only
     * rows[E+1] need travel to the host (the grouped GEMMs' sizes) */
    void (*moe_permutation)(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E);
    /* out[i,:] = x[rows[i],:] for i < M (the rows of x [.,C] that an expert computes on) */
    void (*gather_rows)(void *out, const void *x, const int *rows, int M, int C);
    /* out[t,:] = sum over j < k, in that order, of weight[t,j] * y[slot_row[t k + j],:] for
     * t < N, skipping slot_row -1 (dropped); fp32 accumulation, one rounding */
    void (*moe_combine)(void *out, const void *y, const int *slot_row, const float *weight, int N, int k, int C);
    /* moe_combine's backward: dy[slot_row[t k + j],:] = weight[t,j] * dout[t,:] (overwritten
     * rows) and dweight[t,j] = dout[t,:] . y[slot_row[t k + j],:] (0 when dropped) */
    void (*moe_combine_backward)(void *dy, float *dweight, const void *dout, const void *y, const int *slot_row,
                                 const float *weight, int N, int k, int C);
    /* dx[t,:] = sum over j < k, in that order, of dxp[slot_row[t k + j],:] (dropped: skipped);
     * overwritten (0 for a token whose choices were all dropped) */
    void (*moe_uncombine)(void *dx, const void *dxp, const int *slot_row, int N, int k, int C);
    /* out = x * (1 + eps (2 u - 1)), u uniform in [0, 1) drawn from rng as dropout draws (the
     * router's input jitter); its own backward with the same rng; out may alias x */
    void (*uniform_jitter)(void *out, const void *x, size_t n, float eps, dropout_rng rng);

    /* ---- fp8 emulation (issue 43; kernels/fp8_format.h, the recipe in kernels/fp8_recipe.h) ----
     * (CUDA: kernels/cuda/cuda_fp8.cu; the CPU emulates the fp8 GEMMs by default by running its GEMMs on
     * the dequantized operands in the compute dtype, CUDA runs them as cuBLASLt fp8 GEMMs; the CPU's
     * fp8 GEMMs below are their reference, taken with MTC_FP8_NATIVE=1: app/model/fp8_linear.h). fp8_quantize: out[i] = the fp8 code (format FP8_E4M3 or FP8_E5M2) of
     * x[i] * *scale, rounded to nearest even and saturating to +-max as TE's cast; *amax =
     * fmaxf(*amax, max |x[i]|) (the unscaled input; NaN elements ignored; the caller zeroes it
     * first: TE's amax_history[0]) and *scale_inv = 1 / *scale, each skipped when NULL. amax,
     * scale and scale_inv are fp32 backend memory. fp8_dequantize: out[i] (compute dtype) = the
     * value of q[i] times *scale_inv. */
    void (*fp8_quantize)(uint8_t *out, float *amax, float *scale_inv, const void *x, size_t n,
                         const float *scale, int format);
    void (*fp8_dequantize)(void *out, const uint8_t *q, size_t n, const float *scale_inv, int format);
    /* *amax = fmaxf(*amax, max |x[i]|) over x[n] (compute dtype; NaN elements ignored): the amax
     * that per-tensor current scaling (--fp8-recipe tensorwise) takes the scale from before
     * fp8_quantize; amax is fp32 backend memory */
    void (*fp8_amax)(float *amax, const void *x, size_t n);
    /* the fp8 GEMM (CUDA: kernels/cuda/cuda_fp8_gemm.cu, cuBLASLt; the CPU's reference
     * kernels/cpu/cpu_fp8_gemm.c decodes the codes exactly and sums in fp32): out[rows, cols] = *x_scale_inv
     * *w_scale_inv (x . w^T) over fp8 codes x [rows, K] and w [cols, K], both K-contiguous
     * (formats as fp8_quantize; not both FP8_E5M2), fp32 accumulation; out in the compute dtype
     * (accumulate 0: overwritten) or fp32 added into (accumulate 1: weight gradients). The
     * forward is x . W^T, the input gradient dout . (W^T)^T, the weight gradient dout^T . (x^T)^T,
     * the transposed codes from fp8_transpose: out[c, r] = in[r, c] for in [rows, cols]. */
    void (*fp8_gemm)(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                     const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols);
    void (*fp8_transpose)(uint8_t *out, const uint8_t *in, int rows, int cols);
    /* fp8_quantize of x [rows, cols] with the codes written both into out [rows, cols] and
     * transposed into out_t [cols, rows], in one pass (on the CPU two): the backward's operands */
    void (*fp8_quantize_transpose)(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const void *x,
                                   int rows, int cols, const float *scale, int format);
    /* a linear layer's forward as one fp8 GEMM: out[N,OC] = *x_scale_inv
     * *w_scale_inv (x . w^T) + bias[OC] + residual[N,OC] over E4M3 codes x [N,IC] and w [OC,IC],
     * fp32 accumulation, the bias and the residual (each may be NULL; compute dtype) added in fp32
     * before out's one rounding to the compute dtype (out must not alias x or residual) */
    void (*fp8_linear_forward)(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                               const float *w_scale_inv, const void *bias, const void *residual, int N, int IC,
                               int OC);
    /* the fp8 producers (NULL on the CPU, where the caller runs the plain op then fp8_quantize):
     * layernorm_forward, rmsnorm_forward, gelu_forward (tanh) and swiglu_forward that also write
     * the fp8 codes of their output `out` as *q says (fp8_output: the same bits as the plain op
     * followed by fp8_quantize) */
    void (*layernorm_forward_fp8)(void *out, float *mean, float *rstd, const void *x, const void *weight,
                                  const void *bias, int N, int C, float eps, const fp8_output *q);
    void (*rmsnorm_forward_fp8)(void *out, float *rstd, const void *x, const void *weight, int N, int C, float eps,
                                const fp8_output *q);
    /* (gelu_forward_fp8's out may be NULL: the codes, amax and scale_inv only) */
    void (*gelu_forward_fp8)(void *out, const void *x, size_t n, const fp8_output *q);
    void (*swiglu_forward_fp8)(void *out, const void *x, int N, int F, const fp8_output *q);
    /* gelu_backward (tanh) of dx, x, dout [rows, cols] that also writes the fp8 codes of dx as *q
     * says and their transpose into codes_t [cols, rows] (NULL on the CPU): bit for bit
     * gelu_backward then fp8_quantize_transpose (fc1's output gradient, the backward's operands;
     * dx may be dout) */
    void (*gelu_backward_fp8)(void *dx, const void *x, const void *dout, int rows, int cols, const fp8_output *q,
                              uint8_t *codes_t);
    /* gelu_forward (tanh) of x [rows, cols] with the codes of out and their transpose likewise
     * (NULL on the CPU): gelu_forward then fp8_quantize_transpose (fc2's input made again for
     * its weight gradient) */
    void (*gelu_forward_fp8_transpose)(void *out, const void *x, int rows, int cols, const fp8_output *q,
                                       uint8_t *codes_t);
    /* the same for SwiGLU (NULL on the CPU): swiglu_backward of dx [N, 2F] (not aliasing x or
     * dout) with the codes of dx and their transpose codes_t [2F, N], and swiglu_forward of
     * out [N, F] with those of out and codes_t [F, N]: bit for bit the plain op followed by
     * fp8_quantize_transpose */
    void (*swiglu_backward_fp8)(void *dx, const void *x, const void *dout, int N, int F, const fp8_output *q,
                                uint8_t *codes_t);
    void (*swiglu_forward_fp8_transpose)(void *out, const void *x, int N, int F, const fp8_output *q,
                                         uint8_t *codes_t);
    /* the fp8 MLP backward's elementwise pass in one (NULL on the CPU; TE's dgelu_cast_transpose_dbias
     * with fc2's input made again; app/model/fp8_linear.h's fp8_mlp_backward_fused): from fc1's
     * output pre [rows, F] (swiglu: [rows, 2F], the gate half then the up half) and fc2's input
     * gradient dact [rows, F]:
     *   x = gelu (tanh) of pre (swiglu: swiglu_forward): only its transposed codes act_t [F, rows]
     *     as *qa says (its amax and scale_inv; qa->codes is not written);
     *   dpre = gelu_backward of pre and dact (swiglu: swiglu_backward, [rows, 2F]): its codes
     *     qg->codes and their transpose grad_t [F or 2F, rows] as *qg says, and with dbias
     *     (fp32 [F or 2F]; may be NULL) dbias += the column sums of dpre as the compute dtype
     *     stores it;
     * bit for bit gelu_forward_fp8_transpose (x's codes, amax, scale_inv), gelu_backward_fp8 and
     * bias_backward over its dpre (the swiglu_* ops likewise). dpre [rows, F or 2F] is
     * compute-dtype scratch (not aliasing pre or dact) that shapes the fused kernel does not take
     * use for those passes; its contents afterwards are unspecified. */
    void (*mlp_backward_fp8)(void *dpre, float *dbias, const void *pre, const void *dact, int rows, int F, int swiglu,
                             const fp8_output *qa, uint8_t *act_t, const fp8_output *qg, uint8_t *grad_t);

    /* ---- optimizer ---- */
    /* Fused AdamW over n elements (Megatron/PyTorch AdamW, bias-corrected at `step` >= 1) on
     * the fp32 master weights:
     * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; master -= lr (m_hat/(sqrt(v_hat)+eps) + wd master),
     * then params (compute dtype) = master. On the CPU backend params aliases master. */
    void (*adamw_update)(float *master, void *params, const float *grads, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step);
    /* returns sum of squares of x[0..n) accumulated in double in a fixed order (deterministic). */
    double (*sum_squares)(const float *x, size_t n);
    /* Multi-tensor forms (one pass over every range, no host round trip per tensor):
     * AdamW as adamw_update on each range, with g = grads[offset + i] * grad_scale (gradient
     * clipping, applied as the product in fp32; grads are not written), masters, m and v at
     * state_offset; master NULL: params are the fp32 masters themselves (at offset, cpu). */
    void (*adamw_update_ranges)(float *master, void *params, const float *grads, float *m, float *v,
                                const tensor_range *ranges, int count, float grad_scale, float lr,
                                float beta1, float beta2, float eps, int step);
    /* sum over the ranges of the sums of squares of x[offset .. offset + length), in double,
     * in a fixed order (deterministic) */
    double (*sum_squares_ranges)(const float *x, const tensor_range *ranges, int count);

    /* ---- --deterministic-mode's fixed summation tree (app/optim/fixed_tree_reduce.h) ----
     * Both backends have them (NULL on a backend would make the training sum gradients in the
     * usual order, with a note at start). */
    /* out = a + b in fp32, one rounding per element (gradients; out may alias a or b) */
    void (*add_float)(float *out, const float *a, const float *b, size_t n);
    /* sums[p] (host) = the squares of x[offset .. offset + length) of piece p (x backend memory;
     * state_offset and weight_decay unused) in double, by one fixed tree that depends on the
     * piece's values alone (not on its place, its alignment or the other pieces): the piece is
     * cut into chunks of SUM_SQUARES_TREE_CHUNK elements from its start; in a chunk, lane t of
     * SUM_SQUARES_TREE_LANES adds the squares of elements t, t + LANES, t + 2 LANES, ... one after
     * the other (from 0.0), then the lanes are summed pairwise by halving (lane t += lane t + s
     * for s = LANES/2, LANES/4, .. 1); the chunks' sums are added in order (from 0.0). Squares of
     * floats are exact in double, so both backends give the same bits. */
    void (*sum_squares_pieces)(double *sums, const float *x, const tensor_range *pieces, int count);
} kernel_ops;

/* the tree of kernel_ops.sum_squares_pieces (the CUDA kernel runs one block of LANES threads
 * per chunk) */
#define SUM_SQUARES_TREE_CHUNK 4096
#define SUM_SQUARES_TREE_LANES 256

/* ---- memory statistics ----
 * Bytes held through ops->alloc (both backends record each allocation and release), now and
 * the most at any time since the start: the peak memory of the training log and the metrics
 * file. Host-side bookkeeping of one process; not thread-safe (allocation is single-threaded).
 * Implemented in kernels/memory_stats.c. */
#ifdef __cplusplus
extern "C" {
#endif
void kernels_memory_record_alloc(void *ptr, size_t bytes);
void kernels_memory_record_release(void *ptr);
size_t kernels_memory_allocated(void);
size_t kernels_memory_peak(void);
size_t kernels_memory_count(void); /* allocations held now (PyTorch's allocation.all.current) */
#ifdef __cplusplus
}
#endif

/* ---- errors: one handler, installed by the application ----
 * A backend never aborts on its own: every failed check (an allocation, a CUDA, cuBLAS or
 * cuBLASLt call, an unsupported shape) calls kernels_fatal(), which formats the message and
 * hands it, with the file and line of the check, to the installed handler. The application
 * installs one that names the rank and ends the whole job with MPI_Abort (error_report_fatal in
 * app/core/error.h); with none installed (the kernel unit tests) the default prints
 * "FATAL at file:line: message" to stderr and calls abort(). A handler must not return (it may
 * longjmp, as a test does); if it does, the default runs. kernels_set_error_handler returns the
 * handler it replaces; NULL restores the default. Implemented in kernels/kernel_error.c. */
#ifdef __cplusplus
extern "C" {
#endif
typedef void (*kernel_error_handler)(const char *file, int line, const char *message);
kernel_error_handler kernels_set_error_handler(kernel_error_handler handler);
void kernels_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#ifdef __cplusplus
}
#endif
#define KERNELS_FATAL(...) kernels_fatal(__FILE__, __LINE__, __VA_ARGS__)

/* The CPU reference backend (always built). */
const kernel_ops *kernels_cpu(void);
#ifdef HAVE_CUDA
/* The CUDA backend (built when nvcc is found): cuda_context_init selects the device (one per
 * rank) before kernels_cuda() is used; cuda_device_count() is 0 without a GPU or driver. */
const kernel_ops *kernels_cuda(void);
/* the same backend with fp16 (IEEE half) as the compute dtype (--fp16): parameters, activations
 * and activation gradients in fp16, everything else as kernels_cuda() */
const kernel_ops *kernels_cuda_fp16(void);
int cuda_device_count(void);
void cuda_context_init(int device);
/* the device's name as the driver reports it (the peak table is the application's); 0 or -1 */
int cuda_device_name(int device, char *name, int name_length);
/* GEMM algorithm tuning, off until turned on: each GEMM problem is timed on first use with the
 * cuBLASLt heuristic's first few algorithms and runs the fastest from then on (not bitwise
 * reproducible across runs: the timing can choose another algorithm, which rounds differently) */
void cuda_matmul_set_tuning(int on);
#endif

/* element i of a compute-dtype buffer */
static inline void *act_at(const kernel_ops *ops, void *base, size_t i) {
    return (char *)base + i * ops->act_bytes;
}

#endif /* KERNELS_H */
