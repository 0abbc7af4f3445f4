/* cuda_embedding.cu: token and position embeddings on bf16 or fp16 activations (templates on
 * the element type, cuda_kernels_t.cuh) with fp32 gradients.
 *
 * Forward copies table rows (vocab-parallel: tokens outside [vocab_start, vocab_start +
 * vocab_rows) embed to 0 on this rank) and adds position rows, 8 bf16 per 128-bit access where
 * alignment allows.
 *
 * The token-embedding backward must add many dout rows into the same table row without atomics
 * and in a fixed order. It sorts the token positions by local row (a stable radix sort keeps
 * positions of one row in ascending order) and run-length encodes the sorted rows; for each run
 * of equal rows and column tile, one block starts from dtable, adds the run's dout rows in token
 * order and writes the row back once. That is exactly the CPU reference's order of additions, so
 * the fp32 result matches it bit for bit.
 * The position-embedding backward sums over b in order for each (t, c), likewise exact. */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "kernels/cuda/cuda_common.cuh"

static const int embedding_threads = 256;

#define GRID_STRIDE_LOOP(i, count)                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(count);     \
         i += (size_t)gridDim.x * blockDim.x)

/* ---- token embedding forward ---- */

template <typename E>
static __global__ void embedding_forward_kernel(E *out, const int *tokens,
                                                const E *table, int N, int C,
                                                int vocab_start, int vocab_rows,
                                                bool vectorized) {
    const int width = vectorized ? 8 : 1; /* elements per work item */
    const size_t items_per_row = (size_t)(C / width);
    GRID_STRIDE_LOOP(item, (size_t)N * items_per_row) {
        size_t n = item / items_per_row;
        int c = (int)(item % items_per_row) * width;
        int row = tokens[n] - vocab_start;
        bool local = row >= 0 && row < vocab_rows;
        E *dst = out + n * C + c;
        if (vectorized) {
            uint4 v = make_uint4(0u, 0u, 0u, 0u); /* bf16 zero is all-zero bits */
            if (local) v = *reinterpret_cast<const uint4 *>(table + (size_t)row * C + c);
            *reinterpret_cast<uint4 *>(dst) = v;
        } else {
            *dst = local ? table[(size_t)row * C + c] : from_float<E>(0.0f);
        }
    }
}

template <typename E>
static void embedding_forward_t(E *out, const int *tokens, const E *table, int N,
                                       int C, int vocab_start, int vocab_rows) {
    if (N <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(table);
    size_t items = (size_t)N * C / (vectorized ? 8 : 1);
    embedding_forward_kernel<<<grid_stride_blocks(items, embedding_threads), embedding_threads, 0,
                               compute_stream()>>>(out, tokens, table, N, C,
                                                   vocab_start, vocab_rows, vectorized);
    CHECK_LAUNCH();
}

/* ---- token embedding backward ---- */

/* sort keys: the local row of each position, or vocab_rows (sorted last, skipped) if not local */
static __global__ void embedding_sort_keys_kernel(unsigned int *keys, int *positions,
                                                  const int *tokens, int N, int vocab_start,
                                                  int vocab_rows) {
    GRID_STRIDE_LOOP(n, N) {
        int row = tokens[n] - vocab_start;
        keys[n] = (row >= 0 && row < vocab_rows) ? (unsigned int)row : (unsigned int)vocab_rows;
        positions[n] = (int)n;
    }
}

#define EMBEDDING_RUN_THREADS 128
#define EMBEDDING_RUN_BATCH 16 /* rows of a run loaded together (vectorized path) */

/* The runs of equal rows (after the sort, run-length encoded: row, start, length) are shared
 * round-robin by a persistent grid of blocks; block (b, tile) adds each of its runs' dout rows, in
 * ascending position order, to columns of tile `tile` of that dtable row, which it reads and
 * writes once. The vectorized path loads EMBEDDING_RUN_BATCH rows of a run at once and then adds
 * them in order: a frequent token's run (thousands of rows at micro-batch 32 x 1024) takes one
 * memory latency per batch instead of one per row, with the same additions in the same order. */
template <typename E>
static __global__ void __launch_bounds__(EMBEDDING_RUN_THREADS, 3)
embedding_backward_runs_kernel(float *dtable, const E *dout, const unsigned int *run_rows,
                               const int *run_starts, const int *run_lengths, const int *num_runs,
                               const int *sorted_positions, int C, int vocab_rows, bool vectorized) {
    const int width = vectorized ? 8 : 1;
    int c = (blockIdx.y * EMBEDDING_RUN_THREADS + threadIdx.x) * width;
    if (c >= C) return;
    const int runs = *num_runs;
    for (int r = blockIdx.x; r < runs; r += gridDim.x) {
        unsigned int row = run_rows[r];
        if (row == (unsigned int)vocab_rows) continue;  /* tokens of other ranks */
        const int *positions = sorted_positions + run_starts[r];
        const int length = run_lengths[r];
        float *drow = dtable + (size_t)row * C + c;
        if (!vectorized) {
            float acc = *drow;
            for (int j = 0; j < length; j++) acc += to_float(dout[(size_t)positions[j] * C + c]);
            *drow = acc;
            continue;
        }
        float4 lo = reinterpret_cast<const float4 *>(drow)[0];
        float4 hi = reinterpret_cast<const float4 *>(drow)[1];
        float acc[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        for (int j = 0; j < length; j += EMBEDDING_RUN_BATCH) {
            uint4 raw[EMBEDDING_RUN_BATCH];
#pragma unroll
            for (int u = 0; u < EMBEDDING_RUN_BATCH; u++)
                if (j + u < length) raw[u] = *reinterpret_cast<const uint4 *>(dout + (size_t)positions[j + u] * C + c);
#pragma unroll
            for (int u = 0; u < EMBEDDING_RUN_BATCH; u++) {
                if (j + u >= length) break;
                float v[8];
                load_x8(v, reinterpret_cast<const E *>(&raw[u]));
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += v[k];
            }
        }
        reinterpret_cast<float4 *>(drow)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        reinterpret_cast<float4 *>(drow)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
}

static size_t align_up_256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

template <typename E>
static void embedding_backward_t(float *dtable, const E *dout, const int *tokens,
                                        int N, int C, int vocab_start, int vocab_rows) {
    if (N <= 0 || C <= 0 || vocab_rows <= 0) return;
    /* radix-sort only the bits a key can have (keys are at most vocab_rows) */
    int end_bit = 1;
    while (end_bit < 32 && ((unsigned long long)vocab_rows >> end_bit) != 0) end_bit++;

    size_t sort_bytes = 0, encode_bytes = 0, scan_bytes = 0;
    CHECK_CUDA(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const unsigned int *)NULL,
                                               (unsigned int *)NULL, (const int *)NULL,
                                               (int *)NULL, N, 0, end_bit, compute_stream()));
    CHECK_CUDA(cub::DeviceRunLengthEncode::Encode(NULL, encode_bytes, (const unsigned int *)NULL,
                                                  (unsigned int *)NULL, (int *)NULL, (int *)NULL, N,
                                                  compute_stream()));
    CHECK_CUDA(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (const int *)NULL, (int *)NULL, N,
                                             compute_stream()));
    size_t temp_bytes = align_up_256(sort_bytes > encode_bytes ? sort_bytes : encode_bytes);
    if (align_up_256(scan_bytes) > temp_bytes) temp_bytes = align_up_256(scan_bytes);
    size_t array_bytes = align_up_256((size_t)N * sizeof(int));
    char *scratch = (char *)stream_scratch(7 * array_bytes + 256 + temp_bytes);
    unsigned int *keys = (unsigned int *)scratch;
    int *positions = (int *)(scratch + array_bytes);
    unsigned int *sorted_rows = (unsigned int *)(scratch + 2 * array_bytes);
    int *sorted_positions = (int *)(scratch + 3 * array_bytes);
    unsigned int *run_rows = (unsigned int *)(scratch + 4 * array_bytes);
    int *run_lengths = (int *)(scratch + 5 * array_bytes);
    int *run_starts = (int *)(scratch + 6 * array_bytes);
    int *num_runs = (int *)(scratch + 7 * array_bytes);
    void *temp = scratch + 7 * array_bytes + 256;

    embedding_sort_keys_kernel<<<grid_stride_blocks((size_t)N, embedding_threads),
                                 embedding_threads, 0, compute_stream()>>>(
        keys, positions, tokens, N, vocab_start, vocab_rows);
    CHECK_LAUNCH();
    CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, sort_bytes, keys, sorted_rows, positions,
                                               sorted_positions, N, 0, end_bit, compute_stream()));
    /* the scan runs over N lengths; those past the last run are zero (and never read) */
    CHECK_CUDA(cudaMemsetAsync(run_lengths, 0, (size_t)N * sizeof(int), compute_stream()));
    CHECK_CUDA(cub::DeviceRunLengthEncode::Encode(temp, encode_bytes, sorted_rows, run_rows,
                                                  run_lengths, num_runs, N, compute_stream()));
    CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, run_lengths, run_starts, N, compute_stream()));

    bool vectorized = C % 8 == 0 && aligned16(dtable) && aligned16(dout);
    int columns_per_block = EMBEDDING_RUN_THREADS * (vectorized ? 8 : 1);
    int blocks = 3 * device_sm_count();
    if (blocks > N) blocks = N;
    dim3 grid((unsigned int)blocks, ceil_div((size_t)C, (size_t)columns_per_block));
    embedding_backward_runs_kernel<<<grid, EMBEDDING_RUN_THREADS, 0, compute_stream()>>>(
        dtable, dout, run_rows, run_starts, run_lengths, num_runs, sorted_positions, C, vocab_rows,
        vectorized);
    CHECK_LAUNCH();
}

/* ---- position embedding: out[b,t,:] += wpe[position_start + t,:] ---- */

template <typename E>
static __global__ void position_forward_kernel(E *out, const E *wpe,
                                               int B, int T, int C, int position_start,
                                               bool vectorized) {
    const int width = vectorized ? 8 : 1;
    const size_t items_per_row = (size_t)(C / width);
    GRID_STRIDE_LOOP(item, (size_t)B * T * items_per_row) {
        size_t bt = item / items_per_row;
        int c = (int)(item % items_per_row) * width;
        int t = (int)(bt % (size_t)T);
        E *dst = out + bt * C + c;
        const E *src = wpe + ((size_t)position_start + t) * C + c;
        if (vectorized) {
            float v[8], w[8];
            load_x8(v, dst);
            load_x8(w, src);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] += w[k];
            store_x8(dst, v);
        } else {
            *dst = from_float<E>(to_float(*dst) + to_float(*src));
        }
    }
}

template <typename E>
static void position_embedding_forward_t(E *out, const E *wpe, int B, int T, int C,
                                                int position_start) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(out) && aligned16(wpe);
    size_t items = (size_t)B * T * C / (vectorized ? 8 : 1);
    position_forward_kernel<<<grid_stride_blocks(items, embedding_threads), embedding_threads, 0,
                              compute_stream()>>>(out, wpe, B, T, C,
                                                  position_start, vectorized);
    CHECK_LAUNCH();
}

/* dwpe[position_start + t, c] += sum_b dout[b,t,c]: one thread per (t, column group), b in order */
template <typename E>
static __global__ void position_backward_kernel(float *dwpe, const E *dout, int B,
                                                int T, int C, int position_start,
                                                bool vectorized) {
    const int width = vectorized ? 8 : 1;
    const size_t items_per_row = (size_t)(C / width);
    GRID_STRIDE_LOOP(item, (size_t)T * items_per_row) {
        int t = (int)(item / items_per_row);
        int c = (int)(item % items_per_row) * width;
        float *drow = dwpe + ((size_t)position_start + t) * C + c;
        if (vectorized) {
            float4 lo = reinterpret_cast<const float4 *>(drow)[0];
            float4 hi = reinterpret_cast<const float4 *>(drow)[1];
            float acc[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            for (int b = 0; b < B; b++) {
                float v[8];
                load_x8(v, dout + ((size_t)b * T + t) * C + c);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += v[k];
            }
            reinterpret_cast<float4 *>(drow)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            reinterpret_cast<float4 *>(drow)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        } else {
            float acc = *drow;
            for (int b = 0; b < B; b++) acc += to_float(dout[((size_t)b * T + t) * C + c]);
            *drow = acc;
        }
    }
}

template <typename E>
static void position_embedding_backward_t(float *dwpe, const E *dout, int B, int T,
                                                 int C, int position_start) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    bool vectorized = C % 8 == 0 && aligned16(dwpe) && aligned16(dout);
    size_t items = (size_t)T * C / (vectorized ? 8 : 1);
    position_backward_kernel<<<grid_stride_blocks(items, embedding_threads), embedding_threads, 0,
                               compute_stream()>>>(dwpe, dout, B, T, C, position_start,
                                                   vectorized);
    CHECK_LAUNCH();
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_embedding_forward(bf16 *out, const int *tokens, const bf16 *table, int N,
                                       int C, int vocab_start, int vocab_rows) {
    embedding_forward_t(as_nv(out), tokens, as_nv(table), N, C, vocab_start, vocab_rows);
}

extern "C" void cuda_embedding_forward_fp16(fp16 *out, const int *tokens, const fp16 *table, int N,
                                       int C, int vocab_start, int vocab_rows) {
    embedding_forward_t(as_half(out), tokens, as_half(table), N, C, vocab_start, vocab_rows);
}

extern "C" void cuda_embedding_backward(float *dtable, const bf16 *dout, const int *tokens,
                                        int N, int C, int vocab_start, int vocab_rows) {
    embedding_backward_t(dtable, as_nv(dout), tokens, N, C, vocab_start, vocab_rows);
}

extern "C" void cuda_embedding_backward_fp16(float *dtable, const fp16 *dout, const int *tokens,
                                        int N, int C, int vocab_start, int vocab_rows) {
    embedding_backward_t(dtable, as_half(dout), tokens, N, C, vocab_start, vocab_rows);
}

extern "C" void cuda_position_embedding_forward(bf16 *out, const bf16 *wpe, int B, int T, int C,
                                                int position_start) {
    position_embedding_forward_t(as_nv(out), as_nv(wpe), B, T, C, position_start);
}

extern "C" void cuda_position_embedding_forward_fp16(fp16 *out, const fp16 *wpe, int B, int T, int C,
                                                int position_start) {
    position_embedding_forward_t(as_half(out), as_half(wpe), B, T, C, position_start);
}

extern "C" void cuda_position_embedding_backward(float *dwpe, const bf16 *dout, int B, int T,
                                                 int C, int position_start) {
    position_embedding_backward_t(dwpe, as_nv(dout), B, T, C, position_start);
}

extern "C" void cuda_position_embedding_backward_fp16(float *dwpe, const fp16 *dout, int B, int T,
                                                 int C, int position_start) {
    position_embedding_backward_t(dwpe, as_half(dout), B, T, C, position_start);
}
