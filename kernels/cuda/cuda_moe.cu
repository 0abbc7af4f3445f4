/* cuda_moe.cu: the mixture-of-experts operations of the CUDA backend (kernels/kernels.h,
 * moe_router_spec), against the CPU reference kernels/cpu/cpu_moe.c:
 *   routing      one thread per token runs the row arithmetic both backends share
 *                (kernels/moe_routing.h): scores, (group-limited) top-k, weights; capacity
 *                dropping, when asked, on the host with the CPU's code (one copy each way);
 *   losses       tokens per expert under the loss's routing map with integer atomics (exact, so
 *                order-free), each token's aux and z terms, then one block sums them in a fixed
 *                order: the statistics are bitwise reproducible;
 *   backward     one thread per token, the same shared row code;
 *   dispatch     row gathers, the weighted combination of the experts' outputs (fp32
 *                accumulation, top-k order, one rounding) and its backward (a block per token,
 *                the weight gradients' dot products through fixed-order block sums);
 *   jitter       the router's input jitter from the dropout generator (kernels/philox.h).
 * Activations are templates on the 16-bit element type (cuda_kernels_t.cuh); the router works
 * in fp32. A thread's row scratch is sized by a template bound on the expert count (8 to 256). */
#include "kernels/cuda/cuda_common.cuh"
extern "C" {
#include "kernels/cpu/cpu_kernels.h" /* cpu_moe_drop_over_capacity */
}
#include "kernels/moe_routing.h"
#include "kernels/philox.h"

#include <stdlib.h>

#define MOE_CUDA_MAX_EXPERTS 256

/* a row's scratch arrays in the thread's frame, for at most EMAX experts */
#define THREAD_ROW_SCRATCH(x)                                                                      \
    float x##_s[EMAX], x##_a[EMAX], x##_g[EMAX], x##_w[EMAX], x##_dw[EMAX], x##_gs[EMAX], x##_b[EMAX];          \
    int x##_idx[EMAX], x##_best[EMAX];                                                             \
    unsigned char x##_allowed[EMAX];                                                               \
    moe_row_scratch x = {x##_s, x##_a, x##_g, x##_w, x##_dw, x##_gs, x##_b, x##_idx, x##_best, x##_allowed}

/* ---- routing ---- */

template <int EMAX>
static __global__ void route_kernel(int *expert, float *weight, const float *logits, int N, moe_router_spec spec) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    THREAD_ROW_SCRATCH(x);
    size_t k = (size_t)spec.topk;
    moe_route_row(expert + t * k, weight + t * k, logits + (size_t)t * spec.num_experts, spec, x);
}

/* counts[b E + e] += 1 for each expert e of the loss's routing map of each token of sequence b */
template <int EMAX>
static __global__ void aux_count_kernel(int *counts, const float *logits, int N, int T, moe_router_spec spec) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    THREAD_ROW_SCRATCH(x);
    moe_aux_choice(x.idx, logits + (size_t)t * spec.num_experts, spec, x);
    for (int j = 0; j < spec.topk; j++) atomicAdd(&counts[(size_t)(t / T) * spec.num_experts + x.idx[j]], 1);
}

static __global__ void counts_to_float_kernel(float *out, const int *counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)counts[i];
}

/* each token's term of the aux loss (when counts is not NULL) and its logsumexp squared */
template <int EMAX>
static __global__ void loss_terms_kernel(double *aux_term, double *z_term, const float *logits, const float *counts,
                                         int N, int T, moe_router_spec spec) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    THREAD_ROW_SCRATCH(x);
    const float *l = logits + (size_t)t * spec.num_experts;
    if (counts) aux_term[t] = moe_aux_term(l, counts + (size_t)(t / T) * spec.num_experts, spec, x);
    float lse = moe_logsumexp(l, spec.num_experts);
    z_term[t] = (double)lse * lse;
}

/* one block: the statistics from the per-token terms, summed in a fixed order (as the CPU:
 * aux = mean over sequences of E / (k T^2) x their sums; z = mean; tokens per expert) */
static __global__ void loss_stats_kernel(float *stats, const double *aux_term, const double *z_term,
                                         const float *counts, int N, int T, int balancing, int z_loss,
                                         moe_router_spec spec) {
    __shared__ double shared[32];
    int E = spec.num_experts, k = spec.topk, sequences = N / T;
    if (balancing) {
        double aux = 0.0;
        for (int b = 0; b < sequences; b++) {
            double part = 0.0;
            for (int t = b * T + threadIdx.x; t < (b + 1) * T; t += blockDim.x) part += aux_term[t];
            double sum = block_sum_f64(part, shared);
            aux += sum * E / ((double)k * T * T);
        }
        for (int e = threadIdx.x; e < E; e += blockDim.x) {
            float total = 0.0f;
            for (int b = 0; b < sequences; b++) total += counts[(size_t)b * E + e];
            stats[2 + e] = total;
        }
        if (threadIdx.x == 0) stats[0] = (float)(aux / sequences);
    }
    if (z_loss) {
        double part = 0.0;
        for (int t = threadIdx.x; t < N; t += blockDim.x) part += z_term[t];
        double sum = block_sum_f64(part, shared);
        if (threadIdx.x == 0) stats[1] = (float)(sum / N);
    }
}

/* the launches of one template bound */
template <int EMAX> struct router_launch {
    static void route(int *expert, float *weight, const float *logits, int N, moe_router_spec spec) {
        route_kernel<EMAX><<<ceil_div(N, 128), 128, 0, compute_stream()>>>(expert, weight, logits, N, spec);
        CHECK_LAUNCH();
    }
    static void count(int *counts, const float *logits, int N, int T, moe_router_spec spec) {
        aux_count_kernel<EMAX><<<ceil_div(N, 128), 128, 0, compute_stream()>>>(counts, logits, N, T, spec);
        CHECK_LAUNCH();
    }
    static void terms(double *aux_term, double *z_term, const float *logits, const float *counts, int N, int T,
                      moe_router_spec spec) {
        loss_terms_kernel<EMAX><<<ceil_div(N, 128), 128, 0, compute_stream()>>>(aux_term, z_term, logits, counts, N,
                                                                                  T, spec);
        CHECK_LAUNCH();
    }
    static void backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                         moe_router_spec spec, const float *counts, int T, float aux_scale, float z_scale);
};

/* calls router_launch<EMAX>::CALL for the smallest bound that holds E experts */
#define WITH_EXPERT_BOUND(E, CALL)                                                                         \
    do {                                                                                                   \
        if ((E) <= 8) router_launch<8>::CALL;                                                              \
        else if ((E) <= 16) router_launch<16>::CALL;                                                       \
        else if ((E) <= 32) router_launch<32>::CALL;                                                       \
        else if ((E) <= 64) router_launch<64>::CALL;                                                       \
        else if ((E) <= 128) router_launch<128>::CALL;                                                     \
        else router_launch<256>::CALL;                                                                     \
    } while (0)

/* the scratch of one routing call: per-sequence counts (int, then float) and per-token terms */
typedef struct route_scratch {
    int *counts;
    float *counts_float;
    double *aux_term, *z_term;
} route_scratch;

static route_scratch route_scratch_for(int N, int sequences, int E) {
    size_t count_bytes = ((sizeof(int) * (size_t)sequences * E + 15) / 16) * 16;
    size_t float_bytes = ((sizeof(float) * (size_t)sequences * E + 15) / 16) * 16;
    size_t term_bytes = sizeof(double) * (size_t)N;
    char *base = (char *)stream_scratch(count_bytes + float_bytes + 2 * term_bytes);
    route_scratch s;
    s.counts = (int *)base;
    s.counts_float = (float *)(base + count_bytes);
    s.aux_term = (double *)(base + count_bytes + float_bytes);
    s.z_term = (double *)(base + count_bytes + float_bytes + term_bytes);
    return s;
}

/* tokens per expert of each sequence's loss routing map, into s.counts_float */
static void sequence_counts(route_scratch s, const float *logits, int N, int T, moe_router_spec spec) {
    int n = (N / T) * spec.num_experts;
    CHECK_CUDA(cudaMemsetAsync(s.counts, 0, sizeof(int) * (size_t)n, compute_stream()));
    WITH_EXPERT_BOUND(spec.num_experts, count(s.counts, logits, N, T, spec));
    counts_to_float_kernel<<<ceil_div(n, 256), 256, 0, compute_stream()>>>(s.counts_float, s.counts, n);
    CHECK_LAUNCH();
}

static void check_experts(int E) {
    if (E > MOE_CUDA_MAX_EXPERTS)
        kernels_fatal(__FILE__, __LINE__, "%d experts: the CUDA router handles at most %d", E, MOE_CUDA_MAX_EXPERTS);
}

/* Megatron's token dropping over capacity, on the host with the CPU reference's code */
static void drop_on_host(int *expert, float *weight, int N, moe_router_spec spec) {
    size_t M = (size_t)N * spec.topk;
    int *host_expert = (int *)malloc(sizeof(int) * M);
    float *host_weight = (float *)malloc(sizeof(float) * M);
    if (!host_expert || !host_weight) kernels_fatal(__FILE__, __LINE__, "out of host memory routing %d tokens", N);
    CHECK_CUDA(cudaMemcpyAsync(host_expert, expert, sizeof(int) * M, cudaMemcpyDeviceToHost, compute_stream()));
    CHECK_CUDA(cudaMemcpyAsync(host_weight, weight, sizeof(float) * M, cudaMemcpyDeviceToHost, compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream()));
    cpu_moe_drop_over_capacity(host_expert, host_weight, N, spec);
    CHECK_CUDA(cudaMemcpyAsync(expert, host_expert, sizeof(int) * M, cudaMemcpyHostToDevice, compute_stream()));
    CHECK_CUDA(cudaMemcpyAsync(weight, host_weight, sizeof(float) * M, cudaMemcpyHostToDevice, compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream())); /* the host arrays are freed next */
    free(host_expert);
    free(host_weight);
}

extern "C" void cuda_moe_route_forward(int *expert, float *weight, float *stats, const float *logits, int N,
                                       moe_router_spec spec, int with_losses) {
    int E = spec.num_experts;
    check_experts(E);
    CHECK_CUDA(cudaMemsetAsync(stats, 0, sizeof(float) * MOE_ROUTER_STATS(E), compute_stream()));
    if (N == 0) return;
    WITH_EXPERT_BOUND(E, route(expert, weight, logits, N, spec));
    if (spec.capacity_factor > 0.0f) drop_on_host(expert, weight, N, spec);
    if (!with_losses) return;
    int balancing = spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f;
    int z_loss = spec.z_loss_coeff > 0.0f;
    if (!balancing && !z_loss) return;
    int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N;
    route_scratch s = route_scratch_for(N, N / T, E);
    if (balancing) sequence_counts(s, logits, N, T, spec);
    WITH_EXPERT_BOUND(E, terms(s.aux_term, s.z_term, logits, balancing ? s.counts_float : NULL, N, T, spec));
    loss_stats_kernel<<<1, 256, 0, compute_stream()>>>(stats, s.aux_term, s.z_term, s.counts_float, N, T, balancing,
                                                       z_loss, spec);
    CHECK_LAUNCH();
}

template <int EMAX>
static __global__ void route_backward_kernel(float *dlogits, const float *dweight, const float *logits,
                                             const int *expert, int N, moe_router_spec spec, const float *counts,
                                             int T, float aux_scale, float z_scale) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= N) return;
    THREAD_ROW_SCRATCH(x);
    size_t E = (size_t)spec.num_experts, k = (size_t)spec.topk;
    moe_route_backward_row(dlogits + t * E, dweight + t * k, expert + t * k, logits + t * E, spec,
                           counts ? counts + (size_t)(t / T) * E : NULL, aux_scale, z_scale, N, x);
}

template <int EMAX>
void router_launch<EMAX>::backward(float *dlogits, const float *dweight, const float *logits, const int *expert, int N,
                                   moe_router_spec spec, const float *counts, int T, float aux_scale, float z_scale) {
    route_backward_kernel<EMAX><<<ceil_div(N, 128), 128, 0, compute_stream()>>>(dlogits, dweight, logits, expert, N,
                                                                                  spec, counts, T, aux_scale, z_scale);
    CHECK_LAUNCH();
}

extern "C" void cuda_moe_route_backward(float *dlogits, const float *dweight, const float *logits, const int *expert,
                                        int N, moe_router_spec spec, float loss_scale) {
    int E = spec.num_experts, k = spec.topk;
    check_experts(E);
    if (N == 0) return;
    int balancing = spec.balancing != MOE_BALANCE_NONE && spec.aux_loss_coeff > 0.0f;
    int T = spec.balancing == MOE_BALANCE_SEQ_AUX_LOSS ? spec.seq_length : N, sequences = N / T;
    float aux_scale = loss_scale * spec.aux_loss_coeff * (float)E / ((float)k * (float)T * (float)T * (float)sequences);
    float z_scale = spec.z_loss_coeff > 0.0f ? loss_scale * spec.z_loss_coeff * 2.0f : 0.0f;
    const float *counts = NULL;
    if (balancing) {
        route_scratch s = route_scratch_for(N, sequences, E);
        sequence_counts(s, logits, N, T, spec);
        counts = s.counts_float;
    }
    WITH_EXPERT_BOUND(E, backward(dlogits, dweight, logits, expert, N, spec, counts, T, aux_scale, z_scale));
}

/* ---- the permutation (a stable counting sort of the choices by expert) ----
 * Chunks of PERMUTE_CHUNK choices, one per thread of a block: (1) each chunk counts its choices
 * per expert; (2) one block turns the counts into each chunk's first row per expert (experts in
 * order, chunks in order within an expert) and rows[]; (3) each chunk places its choices: a
 * warp ranks lanes of the same expert with __match_any_sync, warps in order through per-warp
 * counts in shared memory. Token order within an expert, as the CPU's loop gives. */
#define PERMUTE_CHUNK 1024

static __global__ void permute_count_kernel(int *chunk_counts, const int *expert, int M, int E) {
    extern __shared__ int hist[];
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
    __syncthreads();
    size_t i = (size_t)blockIdx.x * PERMUTE_CHUNK + threadIdx.x;
    if (i < (size_t)M && expert[i] >= 0) atomicAdd(&hist[expert[i]], 1);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) chunk_counts[(size_t)blockIdx.x * E + e] = hist[e];
}

/* chunk_counts[c E + e] becomes chunk c's first row of expert e; rows[0..E] the experts' starts */
static __global__ void permute_offsets_kernel(int *rows, int *chunk_counts, int chunks, int E) {
    extern __shared__ int start[];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int sum = 0;
        for (int c = 0; c < chunks; c++) {
            int n = chunk_counts[(size_t)c * E + e];
            chunk_counts[(size_t)c * E + e] = sum;
            sum += n;
        }
        start[e] = sum;  /* expert e's total, for now */
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int e = 0; e < E; e++) {
            int n = start[e];
            start[e] = rows[e] = sum;
            sum += n;
        }
        rows[E] = sum;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        for (int c = 0; c < chunks; c++) chunk_counts[(size_t)c * E + e] += start[e];
}

static __global__ void permute_place_kernel(int *slot_row, int *row_token, const int *chunk_first, const int *expert,
                                            int M, int k, int E) {
    extern __shared__ int warp_counts[];  /* [32 warps][E]: then each warp's first row within the chunk */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int x = threadIdx.x; x < 32 * E; x += blockDim.x) warp_counts[x] = 0;
    __syncthreads();
    size_t i = (size_t)blockIdx.x * PERMUTE_CHUNK + threadIdx.x;
    int e = i < (size_t)M ? expert[i] : -1;
    unsigned same = __match_any_sync(0xffffffffu, e);
    int rank = __popc(same & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) warp_counts[warp * E + e] = __popc(same);
    __syncthreads();
    for (int x = threadIdx.x; x < E; x += blockDim.x) {  /* exclusive sums over the warps, in order */
        int sum = 0;
        for (int w = 0; w < 32; w++) {
            int n = warp_counts[w * E + x];
            warp_counts[w * E + x] = sum;
            sum += n;
        }
    }
    __syncthreads();
    if (i >= (size_t)M) return;
    if (e < 0) {
        slot_row[i] = -1;
        return;
    }
    int row = chunk_first[(size_t)blockIdx.x * E + e] + warp_counts[warp * E + e] + rank;
    slot_row[i] = row;
    row_token[row] = (int)(i / (size_t)k);
}

extern "C" void cuda_moe_permutation(int *rows, int *slot_row, int *row_token, const int *expert, int M, int k, int E) {
    check_experts(E);
    int chunks = ceil_div(M, PERMUTE_CHUNK);
    if (M == 0) {
        CHECK_CUDA(cudaMemsetAsync(rows, 0, sizeof(int) * (size_t)(E + 1), compute_stream()));
        return;
    }
    int *chunk_counts = (int *)stream_scratch(sizeof(int) * (size_t)chunks * E);
    permute_count_kernel<<<chunks, PERMUTE_CHUNK, sizeof(int) * E, compute_stream()>>>(chunk_counts, expert, M, E);
    CHECK_LAUNCH();
    permute_offsets_kernel<<<1, 256, sizeof(int) * E, compute_stream()>>>(rows, chunk_counts, chunks, E);
    CHECK_LAUNCH();
    permute_place_kernel<<<chunks, PERMUTE_CHUNK, sizeof(int) * 32 * E, compute_stream()>>>(
        slot_row, row_token, chunk_counts, expert, M, k, E);
    CHECK_LAUNCH();
}

/* ---- token dispatch and combination ---- */

/* out[i,:] = x[rows[i],:]: a block per row, 16-byte copies when the rows allow them */
template <typename E>
static __global__ void gather_rows_kernel(E *out, const E *x, const int *rows, int C, bool vectorized) {
    size_t i = blockIdx.x, from = (size_t)rows[i];
    if (vectorized) {
        const uint4 *src = reinterpret_cast<const uint4 *>(x + from * C);
        uint4 *dst = reinterpret_cast<uint4 *>(out + i * C);
        for (int c = threadIdx.x; c < C / 8; c += blockDim.x) dst[c] = src[c];
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) out[i * C + c] = x[from * C + c];
    }
}

template <typename E>
static void gather_rows_t(E *out, const E *x, const int *rows, int M, int C) {
    if (M == 0) return;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(x);
    gather_rows_kernel<E><<<M, 128, 0, compute_stream()>>>(out, x, rows, C, vectorized);
    CHECK_LAUNCH();
}

/* W consecutive elements of a row: one 16-byte load or store when W = 8 (rows of C % 8 == 0,
 * aligned), element by element when W = 1 */
template <typename E, int W> struct alignas(W * sizeof(E)) row_pack {
    E v[W];
};
template <typename E, int W> static __device__ __forceinline__ row_pack<E, W> load_pack(const E *p) {
    return *reinterpret_cast<const row_pack<E, W> *>(p);
}
template <typename E, int W> static __device__ __forceinline__ void store_pack(E *p, const row_pack<E, W> &v) {
    *reinterpret_cast<row_pack<E, W> *>(p) = v;
}

/* out[t,:] = sum over j (in order) of weight[t,j] y[slot_row[t k + j],:]; a block per token, each
 * thread W columns at a time */
template <typename E, int W>
static __global__ void combine_kernel(E *out, const E *y, const int *slot_row, const float *weight, int k, int C) {
    size_t t = blockIdx.x;
    for (int c = threadIdx.x * W; c < C; c += blockDim.x * W) {
        float acc[W] = {};
        for (int j = 0; j < k; j++) {
            int row = slot_row[t * k + j];
            if (row < 0) continue;
            float w = weight[t * k + j];
            row_pack<E, W> v = load_pack<E, W>(y + (size_t)row * C + c);
#pragma unroll
            for (int q = 0; q < W; q++) acc[q] += w * to_float(v.v[q]);
        }
        row_pack<E, W> o;
#pragma unroll
        for (int q = 0; q < W; q++) o.v[q] = from_float<E>(acc[q]);
        store_pack<E, W>(out + t * C + c, o);
    }
}

/* dy[slot_row[t k + j],:] = weight[t,j] dout[t,:]; dweight[t,j] = dout[t,:] . y[slot_row[t k + j],:] */
template <typename E, int W>
static __global__ void combine_backward_kernel(E *dy, float *dweight, const E *dout, const E *y, const int *slot_row,
                                               const float *weight, int k, int C) {
    __shared__ float shared[32];
    size_t t = blockIdx.x;
    for (int j = 0; j < k; j++) {
        int row = slot_row[t * k + j];
        if (row < 0) {
            if (threadIdx.x == 0) dweight[t * k + j] = 0.0f;
            continue;
        }
        float w = weight[t * k + j], dot = 0.0f;
        for (int c = threadIdx.x * W; c < C; c += blockDim.x * W) {
            row_pack<E, W> d = load_pack<E, W>(dout + t * C + c), v = load_pack<E, W>(y + (size_t)row * C + c), o;
#pragma unroll
            for (int q = 0; q < W; q++) {
                float dq = to_float(d.v[q]);
                dot += dq * to_float(v.v[q]);
                o.v[q] = from_float<E>(w * dq);
            }
            store_pack<E, W>(dy + (size_t)row * C + c, o);
        }
        dot = block_sum_f32(dot, shared);
        if (threadIdx.x == 0) dweight[t * k + j] = dot;
    }
}

/* dx[t,:] = sum over j (in order) of dxp[slot_row[t k + j],:] */
template <typename E, int W>
static __global__ void uncombine_kernel(E *dx, const E *dxp, const int *slot_row, int k, int C) {
    size_t t = blockIdx.x;
    for (int c = threadIdx.x * W; c < C; c += blockDim.x * W) {
        float acc[W] = {};
        for (int j = 0; j < k; j++) {
            int row = slot_row[t * k + j];
            if (row < 0) continue;
            row_pack<E, W> v = load_pack<E, W>(dxp + (size_t)row * C + c);
#pragma unroll
            for (int q = 0; q < W; q++) acc[q] += to_float(v.v[q]);
        }
        row_pack<E, W> o;
#pragma unroll
        for (int q = 0; q < W; q++) o.v[q] = from_float<E>(acc[q]);
        store_pack<E, W>(dx + t * C + c, o);
    }
}

/* out = x (1 + eps (2u - 1)), u drawn as dropout draws its element */
template <typename E>
static __global__ void uniform_jitter_kernel(E *out, const E *x, size_t n, float eps, dropout_rng rng) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = philox_uniform(rng.seed, rng.stream, rng.offset + i);
        out[i] = from_float<E>(to_float(x[i]) * (1.0f + eps * (2.0f * u - 1.0f)));
    }
}

/* a block per token: threads enough for one pass over a row at W columns each (32 to 256) */
static int row_threads(int C, int W) {
    int threads = (ceil_div(C, W) + 31) / 32 * 32;
    return threads < 32 ? 32 : threads > 256 ? 256 : threads;
}
static bool rows_of_8(int C, const void *a, const void *b, const void *c) {
    return C % 8 == 0 && aligned16(a) && aligned16(b) && (c == NULL || aligned16(c));
}

template <typename E>
static void combine_t(E *out, const E *y, const int *slot_row, const float *weight, int N, int k, int C) {
    if (N == 0) return;
    if (rows_of_8(C, out, y, NULL))
        combine_kernel<E, 8><<<N, row_threads(C, 8), 0, compute_stream()>>>(out, y, slot_row, weight, k, C);
    else
        combine_kernel<E, 1><<<N, row_threads(C, 1), 0, compute_stream()>>>(out, y, slot_row, weight, k, C);
    CHECK_LAUNCH();
}

template <typename E>
static void combine_backward_t(E *dy, float *dweight, const E *dout, const E *y, const int *slot_row,
                               const float *weight, int N, int k, int C) {
    if (N == 0) return;
    if (rows_of_8(C, dy, dout, y))
        combine_backward_kernel<E, 8><<<N, row_threads(C, 8), 0, compute_stream()>>>(dy, dweight, dout, y, slot_row,
                                                                                      weight, k, C);
    else
        combine_backward_kernel<E, 1><<<N, row_threads(C, 1), 0, compute_stream()>>>(dy, dweight, dout, y, slot_row,
                                                                                      weight, k, C);
    CHECK_LAUNCH();
}

template <typename E>
static void uncombine_t(E *dx, const E *dxp, const int *slot_row, int N, int k, int C) {
    if (N == 0) return;
    if (rows_of_8(C, dx, dxp, NULL))
        uncombine_kernel<E, 8><<<N, row_threads(C, 8), 0, compute_stream()>>>(dx, dxp, slot_row, k, C);
    else
        uncombine_kernel<E, 1><<<N, row_threads(C, 1), 0, compute_stream()>>>(dx, dxp, slot_row, k, C);
    CHECK_LAUNCH();
}

template <typename E>
static void uniform_jitter_t(E *out, const E *x, size_t n, float eps, dropout_rng rng) {
    if (n == 0) return;
    uniform_jitter_kernel<E><<<grid_stride_blocks(n, 256), 256, 0, compute_stream()>>>(out, x, n, eps, rng);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_gather_rows(bf16 *out, const bf16 *x, const int *rows, int M, int C) {
    gather_rows_t(as_nv(out), as_nv(x), rows, M, C);
}
extern "C" void cuda_gather_rows_fp16(fp16 *out, const fp16 *x, const int *rows, int M, int C) {
    gather_rows_t(as_half(out), as_half(x), rows, M, C);
}
extern "C" void cuda_moe_combine(bf16 *out, const bf16 *y, const int *slot_row, const float *weight, int N, int k,
                                 int C) {
    combine_t(as_nv(out), as_nv(y), slot_row, weight, N, k, C);
}
extern "C" void cuda_moe_combine_fp16(fp16 *out, const fp16 *y, const int *slot_row, const float *weight, int N,
                                      int k, int C) {
    combine_t(as_half(out), as_half(y), slot_row, weight, N, k, C);
}
extern "C" void cuda_moe_combine_backward(bf16 *dy, float *dweight, const bf16 *dout, const bf16 *y,
                                          const int *slot_row, const float *weight, int N, int k, int C) {
    combine_backward_t(as_nv(dy), dweight, as_nv(dout), as_nv(y), slot_row, weight, N, k, C);
}
extern "C" void cuda_moe_combine_backward_fp16(fp16 *dy, float *dweight, const fp16 *dout, const fp16 *y,
                                               const int *slot_row, const float *weight, int N, int k, int C) {
    combine_backward_t(as_half(dy), dweight, as_half(dout), as_half(y), slot_row, weight, N, k, C);
}
extern "C" void cuda_moe_uncombine(bf16 *dx, const bf16 *dxp, const int *slot_row, int N, int k, int C) {
    uncombine_t(as_nv(dx), as_nv(dxp), slot_row, N, k, C);
}
extern "C" void cuda_moe_uncombine_fp16(fp16 *dx, const fp16 *dxp, const int *slot_row, int N, int k, int C) {
    uncombine_t(as_half(dx), as_half(dxp), slot_row, N, k, C);
}
extern "C" void cuda_uniform_jitter(bf16 *out, const bf16 *x, size_t n, float eps, dropout_rng rng) {
    uniform_jitter_t(as_nv(out), as_nv(x), n, eps, rng);
}
extern "C" void cuda_uniform_jitter_fp16(fp16 *out, const fp16 *x, size_t n, float eps, dropout_rng rng) {
    uniform_jitter_t(as_half(out), as_half(x), n, eps, rng);
}
