/* attention_dropout_lanes_test.cc: the GPU attention kernels' dropout draw
 * (kernels/cuda/cuda_attention_dropout.cuh, attn_drop_keep_bits) run on the host, 32 threads
 * standing for the lanes of a warp and __shfl_xor_sync emulated through a barrier, so that the
 * lane arithmetic (which lane draws which 2 x 4 block, which word and half each lane takes, the
 * three exchanges) is checked without a GPU: every visible element's keep bit, in the forward
 * layout (rows are queries) and the backward's (S^T, rows are keys), at tiles of 2, 4 and 8 n8
 * groups on and off the diagonal and past the sequence end, must equal philox_keep_attention
 * (the CPU's decision). The GPU tests (tests/gpu/cuda_attention_test) check the kernels
 * themselves the same way. Integer arithmetic only. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <atomic>
#include <thread>
#include <vector>

#define __device__
#define __forceinline__ inline

static pthread_barrier_t lanes_barrier;
static uint32_t lanes_exchange[32];
static thread_local int this_lane;

/* every lane posts its value, then reads its partner's; the second barrier keeps the next
 * exchange from overwriting a value not read yet */
static uint32_t __shfl_xor_sync(unsigned mask, uint32_t value, int lane_mask) {
    (void)mask;
    lanes_exchange[this_lane] = value;
    pthread_barrier_wait(&lanes_barrier);
    const uint32_t got = lanes_exchange[this_lane ^ lane_mask];
    pthread_barrier_wait(&lanes_barrier);
    return got;
}

#include "kernels/cuda/cuda_attention_dropout.cuh"

/* one lane's bits of one tile against the CPU: returns the number of wrong decisions */
template <int NT, bool QUERY_ROWS>
static long check_tile(int lane, int T, int row0, int col0, float p, uint64_t head_base, long *checked) {
    attn_drop_rng rng;
    rng.seed = 0x243f6a8885a308d3ull;
    rng.stream = 0xa4093822299f31d0ull + (uint64_t)T;
    rng.head_base = head_base;
    rng.Tk = T;
    rng.threshold = philox_threshold16(p);
    /* causal: the kernels' own mask (a block is drawn if some key <= some query inside T) */
    const uint32_t bits = attn_drop_keep_bits<NT, QUERY_ROWS>(rng, row0, col0, lane, [&](int query, int key) {
        return query < T && key <= query + 1;
    });
    const int g = lane >> 2, t = lane & 3;
    long wrong = 0;
    for (int n = 0; n < NT; n++)
        for (int e = 0; e < 4; e++) {
            const int row = row0 + g + 8 * (e >> 1), col = col0 + 8 * n + 2 * t + (e & 1);
            const int query = QUERY_ROWS ? row : col, key = QUERY_ROWS ? col : row;
            if (query >= T || key > query) continue; /* not visible: the kernels ignore the bit */
            const int want = philox_keep_attention(rng.seed, rng.stream, head_base, T, query, key, p);
            wrong += want != (int)((bits >> (4 * n + e)) & 1u);
            (*checked)++;
        }
    return wrong;
}

int main(void) {
    static const int Ts[] = {16, 130, 333};
    std::atomic<long> wrong_forward{0}, wrong_backward{0}, checked{0};
    pthread_barrier_init(&lanes_barrier, NULL, 32);
    std::vector<std::thread> lanes;
    for (int lane = 0; lane < 32; lane++)
        lanes.emplace_back([&, lane] {
            this_lane = lane;
            long wf = 0, wb = 0, n = 0;
            for (int T : Ts)
                for (int row0 = 0; row0 < T; row0 += 16)
                    for (int col0 = 0; col0 < T; col0 += (T > 200 ? 24 : 8)) {
                        const uint64_t head_base = 1000u + 7u * (uint64_t)T * (uint64_t)T;
                        wf += check_tile<8, true>(lane, T, row0, col0, 0.1f, head_base, &n);
                        wf += check_tile<2, true>(lane, T, row0, col0, 0.5f, head_base, &n);
                        wb += check_tile<8, false>(lane, T, row0, col0, 0.1f, head_base, &n);
                        wb += check_tile<4, false>(lane, T, row0, col0, 0.3f, head_base, &n);
                    }
            wrong_forward += wf;
            wrong_backward += wb;
            checked += n;
        });
    for (auto &l : lanes) l.join();
    pthread_barrier_destroy(&lanes_barrier);

    int failed = 0;
    printf("%sok 1 - forward layout (rows are queries): lanes' keep bits are the CPU's (%ld wrong)\n",
           wrong_forward ? "not " : "", wrong_forward.load());
    printf("%sok 2 - backward layout (rows are keys): lanes' keep bits are the CPU's (%ld wrong)\n",
           wrong_backward ? "not " : "", wrong_backward.load());
    printf("%sok 3 - elements checked: %ld\n", checked > 100000 ? "" : "not ", checked.load());
    failed = wrong_forward != 0 || wrong_backward != 0 || checked <= 100000;
    printf("1..3\n");
    return failed;
}
