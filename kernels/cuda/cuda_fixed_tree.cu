/* cuda_fixed_tree.cu: the two kernels --deterministic-mode's fixed summation tree needs
 * (app/optim/fixed_tree_reduce.h), with the CPU reference's results bit for bit
 * (kernels/cpu/cpu_adamw.c, cpu_add_float and cpu_sum_squares_pieces):
 *  - add_float: out = a + b in fp32, one rounding per element (__fadd_rn: nothing to fuse);
 *  - sum_squares_pieces: each piece's squares in double by kernels.h's fixed tree. One block of
 *    SUM_SQUARES_TREE_LANES threads per chunk of SUM_SQUARES_TREE_CHUNK elements: thread t adds
 *    the squares of elements t, t + LANES, ... in turn (coalesced loads), the block halves the
 *    lanes pairwise in shared memory; a second launch adds each piece's chunk sums in order (one
 *    thread per piece). A float's square is exact in double, so a fused multiply-add rounds as
 *    the separate add does, and the order is the CPU's: the same bits on both backends, on any
 *    GPU, whatever the pieces' alignment. */
#include "kernels/cuda/cuda_common.cuh"

/* ---- add_float ---- */

static __global__ void add_float_kernel(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __fadd_rn(a[i], b[i]);
}

static __global__ void add_float4_kernel(float4 *out, const float4 *a, const float4 *b, size_t n4) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        out[i] = make_float4(__fadd_rn(x.x, y.x), __fadd_rn(x.y, y.y), __fadd_rn(x.z, y.z), __fadd_rn(x.w, y.w));
    }
}

extern "C" void cuda_add_float(float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    size_t vectors = aligned16(out) && aligned16(a) && aligned16(b) ? n / 4 : 0;
    if (vectors > 0) {
        add_float4_kernel<<<grid_stride_blocks(vectors, 256), 256, 0, compute_stream()>>>(
            reinterpret_cast<float4 *>(out), reinterpret_cast<const float4 *>(a), reinterpret_cast<const float4 *>(b),
            vectors);
        CHECK_LAUNCH();
    }
    size_t done = 4 * vectors;
    if (done < n) {
        add_float_kernel<<<grid_stride_blocks(n - done, 256), 256, 0, compute_stream()>>>(out + done, a + done,
                                                                                          b + done, n - done);
        CHECK_LAUNCH();
    }
}

/* ---- sum_squares_pieces ---- */

/* the device table: the pieces' offsets [count], lengths [count] and first chunks [count + 1]
 * (a prefix sum of their chunk counts) */
typedef struct piece_table {
    const size_t *offset, *length, *first_chunk;
    int count;
} piece_table;

/* the piece holding chunk c: the last p with first_chunk[p] <= c (empty pieces own no chunk) */
static __device__ int piece_of_chunk(const piece_table table, size_t c) {
    int lo = 0, hi = table.count - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (table.first_chunk[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* chunk_sums[c]: chunk c's lanes, then their pairwise halving (blockDim.x = LANES) */
static __global__ void __launch_bounds__(SUM_SQUARES_TREE_LANES)
sum_squares_tree_chunks_kernel(double *chunk_sums, const float *x, const piece_table table) {
    __shared__ double lanes[SUM_SQUARES_TREE_LANES];
    const size_t c = blockIdx.x;
    const int p = piece_of_chunk(table, c);
    const size_t begin = (c - table.first_chunk[p]) * SUM_SQUARES_TREE_CHUNK;
    const size_t rest = table.length[p] - begin;
    const size_t n = rest < SUM_SQUARES_TREE_CHUNK ? rest : SUM_SQUARES_TREE_CHUNK;
    const float *xs = x + table.offset[p] + begin;
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += SUM_SQUARES_TREE_LANES) {
        double v = (double)xs[i];
        acc = __dadd_rn(acc, __dmul_rn(v, v));
    }
    lanes[threadIdx.x] = acc;
    __syncthreads();
    for (int s = SUM_SQUARES_TREE_LANES / 2; s >= 1; s /= 2) {
        if ((int)threadIdx.x < s) lanes[threadIdx.x] = __dadd_rn(lanes[threadIdx.x], lanes[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) chunk_sums[c] = lanes[0];
}

/* piece_sums[p]: piece p's chunk sums added in order */
static __global__ void sum_squares_tree_pieces_kernel(double *piece_sums, const double *chunk_sums,
                                                      const piece_table table) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= table.count) return;
    double total = 0.0;
    for (size_t c = table.first_chunk[p]; c < table.first_chunk[p + 1]; c++) total = __dadd_rn(total, chunk_sums[c]);
    piece_sums[p] = total;
}

/* blocks until sums[] is on the host */
extern "C" void cuda_sum_squares_pieces(double *sums, const float *x, const tensor_range *pieces, int count) {
    if (count <= 0) return;
    size_t words = 3 * (size_t)count + 1;
    size_t *host = (size_t *)malloc(sizeof(size_t) * words);
    if (host == NULL) KERNELS_FATAL("cuda backend: out of host memory for %d pieces of the gradient norm", count);
    size_t chunks = 0;
    for (int p = 0; p < count; p++) {
        host[p] = pieces[p].offset;
        host[count + p] = pieces[p].length;
        host[2 * (size_t)count + p] = chunks;
        chunks += (pieces[p].length + SUM_SQUARES_TREE_CHUNK - 1) / SUM_SQUARES_TREE_CHUNK;
    }
    host[3 * (size_t)count] = chunks;
    if (chunks > (size_t)INT32_MAX)
        KERNELS_FATAL("cuda backend: %zu chunks of the gradient norm are more than one launch takes", chunks);
    /* scratch: the table, then the chunk sums and the piece sums (doubles: 8-byte aligned) */
    size_t table_bytes = sizeof(size_t) * words;
    char *scratch = (char *)stream_scratch(table_bytes + sizeof(double) * (chunks + (size_t)count));
    size_t *device_table = (size_t *)scratch;
    double *chunk_sums = (double *)(scratch + table_bytes), *piece_sums = chunk_sums + chunks;
    CHECK_CUDA(cudaMemcpyAsync(device_table, host, table_bytes, cudaMemcpyHostToDevice, compute_stream()));
    piece_table table = {device_table, device_table + count, device_table + 2 * (size_t)count, count};
    if (chunks > 0) {
        sum_squares_tree_chunks_kernel<<<(unsigned int)chunks, SUM_SQUARES_TREE_LANES, 0, compute_stream()>>>(
            chunk_sums, x, table);
        CHECK_LAUNCH();
    }
    sum_squares_tree_pieces_kernel<<<ceil_div((size_t)count, 128), 128, 0, compute_stream()>>>(piece_sums, chunk_sums,
                                                                                              table);
    CHECK_LAUNCH();
    CHECK_CUDA(cudaMemcpyAsync(sums, piece_sums, sizeof(double) * (size_t)count, cudaMemcpyDeviceToHost,
                               compute_stream()));
    CHECK_CUDA(cudaStreamSynchronize(compute_stream())); /* sums is read next, host is freed */
    free(host);
}
