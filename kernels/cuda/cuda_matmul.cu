/* cuda_matmul.cu: the linear layer y = x W^T + b through cuBLASLt, bf16 or fp16 operands (A, B,
 * bias and aux CUDA_R_16BF or CUDA_R_16F; the weight gradient's C = D fp32, a combination cuBLASLt
 * supports for both), fp32 compute.
 *
 * cuBLASLt is column-major; a row-major [R, C] matrix is the column-major [C, R] matrix with
 * leading dimension C. So, with W [OC, IC], x [N, IC], dout [N, OC]:
 *   forward   out^T [OC,N]  = W (op T, lda IC) . x^T (op N, ldb IC)      m=OC n=N  k=IC, 16-bit D
 *   backward  dx^T  [IC,N]  = W (op N, lda IC) . dout^T (op N, ldb OC)   m=IC n=N  k=OC, 16-bit D
 *             dW^T  [IC,OC] += x^T (op N, lda IC) . dout (op T, ldb OC)  m=IC n=OC k=N,
 *                                                   fp32 C = D, beta = 1
 * The forward fuses the bias (CUBLASLT_EPILOGUE_BIAS) and, when gelu_out is requested, the GeLU
 * (CUBLASLT_EPILOGUE_GELU_AUX[_BIAS]: cuBLASLt writes GeLU to D and the pre-activation to the
 * aux matrix, so D = gelu_out and aux = out). The aux leading dimension must be a multiple of 8:
 * for OC % 8 != 0, or when a pointer is not 16-byte aligned, or when cuBLASLt has no algorithm
 * for an epilogue, the bias and the GeLU run as separate kernels instead. dbias is a separate
 * deterministic column sum (cuda_bias_backward): cuBLASLt's BGRADB epilogue on the weight
 * gradient was measured slower at GPT-2 124M's shapes than the GEMM plus this pass
 * (perf/results/kernels/gemm-algos-h100-2026-11-26.md).
 *
 * Descriptors, layouts and the heuristic's algorithm are cached per problem (shape, transposes,
 * types, epilogue, pointer alignments), so each shape is planned once, always runs the same
 * algorithm, and gives bitwise-identical results from run to run on the same GPU model.
 * If cuBLASLt offers no algorithm at all for a problem, a plain shared-memory tiled kernel
 * (fp32 accumulation) computes it; MEGATRON_C_MATMUL_FALLBACK=1 in the environment forces that
 * path (for tests). */
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "kernels/cuda/cuda_common.cuh"

/* from cuda_context.cu (C++ linkage) */
cublasLtHandle_t cuda_cublaslt_handle(void);
void *cuda_cublaslt_workspace(size_t *bytes);

/* one column-major GEMM D[m,n] = op(A)[m,k] op(B)[k,n] (+ C when accumulate; C is D unless c
 * is given: the residual of matmul_forward_residual) */
typedef struct gemm_problem {
    int m, n, k;
    cublasOperation_t transa, transb;
    cudaDataType_t ab_type; /* A, B, bias and aux: CUDA_R_16BF or CUDA_R_16F */
    const void *a;
    int lda;
    const void *b;
    int ldb;
    void *d;
    cudaDataType_t d_type; /* ab_type or CUDA_R_32F */
    int ldd;
    bool accumulate;       /* beta = 1 (D = ... + C) instead of 0 */
    const void *c;         /* C when it is not D (same type and layout as D); NULL: C = D */
    cublasLtEpilogue_t epilogue;
    const void *bias;      /* BIAS epilogues */
    void *aux;             /* GELU_AUX epilogues (written) and DGELU (read): the pre-activation,
                            * leading dimension ldd */
} gemm_problem;

/* ---- the plan cache ---- */

typedef struct gemm_plan_key {
    int m, n, k, transa, transb, lda, ldb, ldd, ab_type, d_type, accumulate, epilogue, sm_target, bucketed;
    unsigned int align_a, align_b, align_c, align_d, align_bias, align_aux;
} gemm_plan_key;

typedef struct gemm_plan {
    bool used;
    gemm_plan_key key;
    bool has_algo; /* false: cuBLASLt offers nothing, use the fallback */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
    cublasLtMatmulAlgo_t algo;
    bool tuned; /* a bucket's plan that has taken its family's algorithm (or timed it) */
} gemm_plan;

/* an open-addressing hash table of plans: a lookup is one hash and a probe or two per GEMM call.
 * Dense models plan a few dozen shapes; a mixture of experts adds one plan per size bucket and
 * GEMM kind, a few hundred while the routing moves. Should the table fill past
 * GEMM_PLAN_CACHE_FILL, the size buckets' plans are dropped (they are cheap to plan again, being
 * untimed) and the exact, timed ones kept: evicting those made a step replan and retime the
 * output layer's GEMM (65 ms at the mixtral-small shape). */
#define GEMM_PLAN_CACHE_SIZE 4096
#define GEMM_PLAN_CACHE_FILL 3072
static gemm_plan plan_cache[GEMM_PLAN_CACHE_SIZE];
static int plan_count;

/* cuBLASLt's SM count target for the GEMMs planned from now on (0: the device's count), for a
 * concurrent stream that keeps the other SMs busy (perf/optimizer_overlap_bench's split variants) */
static int gemm_sm_target;
extern "C" void cuda_matmul_set_sm_count_target(int sms) { gemm_sm_target = sms > 0 ? sms : 0; }

/* the alignment of a pointer in bytes, capped at 256 (what cuBLASLt assumes by default) */
static unsigned int pointer_alignment(const void *p) {
    uintptr_t address = (uintptr_t)p;
    if (address == 0) return 256;
    unsigned int alignment = 1;
    while (alignment < 256 && (address & alignment) == 0) alignment <<= 1;
    return alignment;
}

/* ---- grouped GEMMs: shapes that change from call to call ----
 * The experts of a mixture of experts get a different number of rows at every step, so planning
 * (and tuning) each exact shape would plan almost every call. While a grouped call runs
 * (gemm_bucketed), a plan is keyed by each dimension rounded up to its size bucket (an eighth of
 * its power of two: 4096, 4608, 5120, ...; at least 64), created and tuned on the first problem of
 * its bucket, and used for the others of the bucket with the layouts' rows and columns set to the
 * call's (cuBLASLt reads them at the call). A bucket's plan takes the heuristic's first algorithm
 * untimed: new buckets keep appearing while the routing moves (timing each on first use made steps
 * of 0.2-0.9 s for the first hundred at the mixtral-small shape, and timing each bucket at its
 * 16th call still added 30-80 ms to a third of the steps 10-30). With tuning on, a bucket takes
 * the algorithm tuned for its family, the buckets of the same GEMM whose sizes share their powers
 * of two; the family's first bucket times the candidates, on its first call's shape. So a GEMM
 * of the experts is timed once per octave of their sizes, in the first steps. Should cuBLASLt refuse the bucket's algorithm for
 * another size of the bucket, that call is planned exactly. Dimensions that are multiples of an
 * eighth of their power of two (1024, 2816, 5632) are their own bucket. */
static bool gemm_bucketed;

static int size_bucket(int x) {
    if (x <= 64) return 64;
    int octave = 31 - __builtin_clz((unsigned int)x), step = 1 << (octave - 3);
    return (x + step - 1) / step * step;
}

static gemm_plan_key plan_key_of(const gemm_problem *p) {
    gemm_plan_key key;
    memset(&key, 0, sizeof key); /* compared with memcmp */
    key.bucketed = gemm_bucketed ? 1 : 0;
    key.m = gemm_bucketed ? size_bucket(p->m) : p->m;
    key.n = gemm_bucketed ? size_bucket(p->n) : p->n;
    key.k = gemm_bucketed ? size_bucket(p->k) : p->k;
    key.transa = (int)p->transa;
    key.transb = (int)p->transb;
    key.lda = p->lda;
    key.ldb = p->ldb;
    key.ldd = p->ldd;
    key.ab_type = (int)p->ab_type;
    key.d_type = (int)p->d_type;
    key.accumulate = p->accumulate ? 1 : 0;
    key.epilogue = (int)p->epilogue;
    key.sm_target = gemm_sm_target;
    key.align_a = pointer_alignment(p->a);
    key.align_b = pointer_alignment(p->b);
    key.align_c = pointer_alignment(p->c != NULL ? p->c : p->d);
    key.align_d = pointer_alignment(p->d);
    key.align_bias = pointer_alignment(p->bias);
    key.align_aux = pointer_alignment(p->aux);
    return key;
}

/* the bias pointer: read by BIAS epilogues, written (a bias gradient, in D's type) by BGRAD ones */
static bool epilogue_has_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}
static bool epilogue_has_aux(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

/* the epilogue pointers are attributes of the descriptor (and the heuristic reads their
 * alignment), so they are set before planning and before every call */
static void set_epilogue_pointers(cublasLtMatmulDesc_t desc, const gemm_problem *p) {
    if (epilogue_has_bias(p->epilogue)) {
        const void *bias = p->bias;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof bias));
    }
    if (epilogue_has_aux(p->epilogue)) {
        void *aux = p->aux;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    }
}

/* the heuristic's constraints for a problem: the workspace we have and the operands' alignments */
static cublasLtMatmulPreference_t plan_preference(const gemm_plan_key *key) {
    cublasLtMatmulPreference_t preference;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    size_t workspace_bytes = 0;
    (void)cuda_cublaslt_workspace(&workspace_bytes);
    uint64_t max_workspace = workspace_bytes;
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace));
    uint32_t align_a = key->align_a, align_b = key->align_b, align_c = key->align_c, align_d = key->align_d;
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d));
    return preference;
}

/* ---- tuning ----
 * With tuning on (cuda_matmul_set_tuning: training turns it on unless --deterministic-mode or
 * --no-gemm-tuning), a problem of at least GEMM_TUNE_MIN_FLOP asks the heuristic for up to
 * GEMM_TUNE_CANDIDATES algorithms when it is first planned, runs each on the problem's own
 * operands (one warm-up call, then GEMM_TUNE_CALLS timed ones) and keeps the fastest for the rest
 * of the process. Over the GEMMs of a training step the heuristic's first was 7.3% (GPT-2 124M)
 * and 4.7% (GPT 1.3B) slower than the best of its first 16 on an H100
 * (perf/results/kernels/gemm-algos-h100-2026-11-26.md, perf/gemm_algos.cu). Timing can choose differently
 * from one run to the next, and another algorithm rounds differently, so a tuned run is not
 * bitwise reproducible across runs (within a run a problem always runs the same algorithm). A
 * problem that adds into its output (C = D) is timed into scratch of D's size, since each call
 * would add again; above GEMM_TUNE_MAX_SCRATCH bytes, or when the device has no room for the
 * scratch, it keeps the heuristic's first. Timing the candidates at the power cap the step runs
 * at (300 ms of the heuristic's first before, 40 calls each) chose no better
 * (perf/results/kernels/qkv-bias-in-attention-h100-2026-11-27.md). */
#define GEMM_TUNE_CANDIDATES 8
#define GEMM_TUNE_CALLS 5
#define GEMM_TUNE_MIN_FLOP 1e9
#define GEMM_TUNE_MAX_SCRATCH ((size_t)256 << 20)

static bool gemm_tuning_on;
static int gemm_tuned_problems; /* problems whose candidates were timed, for tests */

extern "C" void cuda_matmul_set_tuning(int on) { gemm_tuning_on = on != 0; }
extern "C" int cuda_matmul_tuned_problems(void) { return gemm_tuned_problems; }

static size_t output_bytes(const gemm_problem *p) {
    return (size_t)p->ldd * (size_t)p->n * (p->d_type == CUDA_R_32F ? 4 : 2);
}

/* calls repeat into D itself unless they would add into it again (C = D) */
static bool output_needs_scratch(const gemm_problem *p) {
    return p->accumulate && (p->c == NULL || p->c == p->d);
}

static bool problem_tunable(const gemm_problem *p);
static bool tuning_applies(const gemm_problem *p) {
    if (gemm_bucketed) return false; /* a bucket's first problem stands for all of its sizes: not timed */
    return problem_tunable(p);
}

static bool problem_tunable(const gemm_problem *p) {
    if (!gemm_tuning_on || 2.0 * p->m * (double)p->n * p->k < GEMM_TUNE_MIN_FLOP) return false;
    if (p->aux != NULL && p->aux == p->d) return false; /* DGELU in place: a call changes its input */
    return !output_needs_scratch(p) || output_bytes(p) <= GEMM_TUNE_MAX_SCRATCH;
}

/* microseconds per call of one algorithm on the problem (into d; one warm-up call, then `calls`
 * timed ones), or -1 when it does not run (perf/gemm_algos times its survey with it too) */
static float time_algorithm(const gemm_plan *plan, const gemm_problem *p, void *d, const cublasLtMatmulAlgo_t *algo,
                            int calls, cudaEvent_t start, cudaEvent_t stop) {
    float alpha = 1.0f, beta = p->accumulate ? 1.0f : 0.0f;
    size_t workspace_bytes = 0;
    void *workspace = cuda_cublaslt_workspace(&workspace_bytes);
    const void *c = p->c != NULL && p->c != p->d ? p->c : d;
    for (int call = -1; call < calls; call++) {
        if (call == 0) CHECK_CUDA(cudaEventRecord(start, compute_stream()));
        cublasStatus_t status = cublasLtMatmul(cuda_cublaslt_handle(), plan->desc, &alpha, p->a, plan->a_layout, p->b,
                                               plan->b_layout, &beta, c, plan->d_layout, d, plan->d_layout, algo,
                                               workspace, workspace_bytes, compute_stream());
        if (status != CUBLAS_STATUS_SUCCESS) return -1.0f;
    }
    CHECK_CUDA(cudaEventRecord(stop, compute_stream()));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return 1000.0f * ms / calls;
}

/* times the heuristic's candidates and keeps the fastest in plan->algo (the first on ties) */
static void plan_tune(gemm_plan *plan, const gemm_problem *p, const cublasLtMatmulHeuristicResult_t *results,
                      int count) {
    void *d = p->d;
    size_t scratch_bytes = output_needs_scratch(p) ? output_bytes(p) : 0;
    if (scratch_bytes > 0) {
        if (cudaMallocAsync(&d, scratch_bytes, compute_stream()) != cudaSuccess) {
            (void)cudaGetLastError(); /* no room for the scratch: keep the heuristic's first */
            return;
        }
        kernels_memory_record_alloc(d, scratch_bytes);
        CHECK_CUDA(cudaMemsetAsync(d, 0, scratch_bytes, compute_stream()));
    }
    set_epilogue_pointers(plan->desc, p);
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    float best = -1.0f;
    for (int i = 0; i < count; i++) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        float us = time_algorithm(plan, p, d, &results[i].algo, GEMM_TUNE_CALLS, start, stop);
        if (us > 0.0f && (best < 0.0f || us < best)) {
            best = us;
            plan->algo = results[i].algo;
        }
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    gemm_tuned_problems++;
    if (scratch_bytes > 0) {
        kernels_memory_record_release(d);
        CHECK_CUDA(cudaFreeAsync(d, compute_stream()));
    }
}

/* the stored (pre-transpose) shapes of A and B */
static void operand_shapes(const gemm_problem *p, int *a_rows, int *a_cols, int *b_rows, int *b_cols) {
    *a_rows = p->transa == CUBLAS_OP_N ? p->m : p->k;
    *a_cols = p->transa == CUBLAS_OP_N ? p->k : p->m;
    *b_rows = p->transb == CUBLAS_OP_N ? p->k : p->n;
    *b_cols = p->transb == CUBLAS_OP_N ? p->n : p->k;
}

static void set_layout_shape(cublasLtMatrixLayout_t layout, int rows, int cols) {
    uint64_t r = (uint64_t)rows, c = (uint64_t)cols;
    CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof r));
    CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof c));
}

/* a bucket's plan set to this call's shape */
static void set_plan_shape(gemm_plan *plan, const gemm_problem *p) {
    int a_rows, a_cols, b_rows, b_cols;
    operand_shapes(p, &a_rows, &a_cols, &b_rows, &b_cols);
    set_layout_shape(plan->a_layout, a_rows, a_cols);
    set_layout_shape(plan->b_layout, b_rows, b_cols);
    set_layout_shape(plan->d_layout, p->m, p->n);
}

static void plan_create(gemm_plan *plan, const gemm_problem *p, const gemm_plan_key *key) {
    plan->used = true;
    plan->key = *key;
    plan->tuned = false;

    CHECK_CUBLAS(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t transa = (int32_t)p->transa, transb = (int32_t)p->transb;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                sizeof transa));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                                sizeof transb));
    uint32_t epilogue = (uint32_t)p->epilogue;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                &epilogue, sizeof epilogue));
    if (epilogue_has_bias(p->epilogue)) {
        const bool written = p->epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD || p->epilogue == CUBLASLT_EPILOGUE_BGRADB;
        int32_t bias_type = (int32_t)(written ? p->d_type : p->ab_type);
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(
            plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    if (epilogue_has_aux(p->epilogue)) {
        int64_t aux_ld = p->ldd;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                    &aux_ld, sizeof aux_ld));
    }
    set_epilogue_pointers(plan->desc, p);
    if (key->sm_target > 0) {
        int32_t sm_target = key->sm_target;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target,
                                                    sizeof sm_target));
    }

    /* stored (pre-transpose) shapes of the operands */
    int a_rows, a_cols, b_rows, b_cols;
    operand_shapes(p, &a_rows, &a_cols, &b_rows, &b_cols);
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a_layout, p->ab_type, a_rows, a_cols, p->lda));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b_layout, p->ab_type, b_rows, b_cols, p->ldb));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->d_layout, p->d_type, p->m, p->n, p->ldd));

    cublasLtMatmulPreference_t preference = plan_preference(key);
    cublasLtMatmulHeuristicResult_t results[GEMM_TUNE_CANDIDATES];
    memset(results, 0, sizeof results);
    int returned = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        cuda_cublaslt_handle(), plan->desc, plan->a_layout, plan->b_layout, plan->d_layout,
        plan->d_layout, preference, tuning_applies(p) ? GEMM_TUNE_CANDIDATES : 1, results, &returned);
    if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
        CHECK_CUBLAS(status); /* a real error: report it (the job ends) */
    plan->has_algo = status == CUBLAS_STATUS_SUCCESS && returned > 0 &&
                     results[0].state == CUBLAS_STATUS_SUCCESS;
    if (plan->has_algo) plan->algo = results[0].algo;
    if (plan->has_algo && returned > 1) plan_tune(plan, p, results, returned);
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(preference));
}

/* the algorithms tuned for families of size buckets (the bucket key with each size rounded up to
 * its power of two), in a small open-addressing table; when it is full, buckets tune alone */
#define GEMM_FAMILY_TABLE_SIZE 512
typedef struct bucket_family {
    bool used;
    gemm_plan_key key;
    cublasLtMatmulAlgo_t algo;
} bucket_family;
static bucket_family bucket_families[GEMM_FAMILY_TABLE_SIZE];

static int power_of_two_ceil(int x) {
    int p = 1;
    while (p < x) p <<= 1;
    return p;
}

static unsigned int plan_slot(const gemm_plan_key *key);

/* the family entry of a bucket's key (used: its tuned algorithm), or NULL when the table is full */
static bucket_family *family_of(const gemm_plan_key *bucket_key) {
    gemm_plan_key key = *bucket_key;
    key.m = power_of_two_ceil(key.m), key.n = power_of_two_ceil(key.n), key.k = power_of_two_ceil(key.k);
    unsigned int slot = plan_slot(&key) & (GEMM_FAMILY_TABLE_SIZE - 1);
    for (int probes = 0; probes < GEMM_FAMILY_TABLE_SIZE; probes++) {
        bucket_family *f = &bucket_families[slot];
        if (!f->used) {
            f->key = key; /* claimed when tuned (used set then) */
            return f;
        }
        if (memcmp(&f->key, &key, sizeof key) == 0) return f;
        slot = (slot + 1) & (GEMM_FAMILY_TABLE_SIZE - 1);
    }
    return NULL;
}

/* a size bucket's plan at its first call (set_plan_shape done): its family's algorithm when cuBLASLt
 * accepts it for this shape, else its candidates timed on this call's shape for the family */
static void plan_tune_bucket(gemm_plan *plan, const gemm_problem *p) {
    plan->tuned = true;
    if (!problem_tunable(p)) return;
    bucket_family *family = family_of(&plan->key);
    if (family != NULL && family->used) {
        cublasLtMatmulHeuristicResult_t check;
        memset(&check, 0, sizeof check);
        if (cublasLtMatmulAlgoCheck(cuda_cublaslt_handle(), plan->desc, plan->a_layout, plan->b_layout,
                                    plan->d_layout, plan->d_layout, &family->algo, &check) == CUBLAS_STATUS_SUCCESS)
            plan->algo = family->algo;
        return;
    }
    cublasLtMatmulPreference_t preference = plan_preference(&plan->key);
    cublasLtMatmulHeuristicResult_t results[GEMM_TUNE_CANDIDATES];
    memset(results, 0, sizeof results);
    int returned = 0;
    cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(cuda_cublaslt_handle(), plan->desc, plan->a_layout, plan->b_layout,
                                       plan->d_layout, plan->d_layout, preference, GEMM_TUNE_CANDIDATES, results,
                                       &returned);
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(preference));
    if (status != CUBLAS_STATUS_SUCCESS || returned < 2) return;
    plan_tune(plan, p, results, returned);
    if (family != NULL) {
        family->algo = plan->algo;
        family->used = true;
    }
}

static void plan_destroy(gemm_plan *plan) {
    if (!plan->used) return;
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(plan->a_layout));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(plan->b_layout));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(plan->d_layout));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(plan->desc));
    plan->used = false;
}

static unsigned int plan_slot(const gemm_plan_key *key) {
    const unsigned char *bytes = (const unsigned char *)key;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *key; i++) h = (h ^ bytes[i]) * 1099511628211ull;
    return (unsigned int)(h & (GEMM_PLAN_CACHE_SIZE - 1));
}

/* the table entry holding key, or the empty entry where it would go */
static gemm_plan *plan_entry(const gemm_plan_key *key) {
    unsigned int slot = plan_slot(key);
    while (plan_cache[slot].used && memcmp(&plan_cache[slot].key, key, sizeof *key) != 0)
        slot = (slot + 1) & (GEMM_PLAN_CACHE_SIZE - 1);
    return &plan_cache[slot];
}

/* drops the size buckets' plans and puts the others back in their probe order */
static void drop_bucketed_plans(void) {
    gemm_plan *kept = (gemm_plan *)malloc(sizeof(gemm_plan) * GEMM_PLAN_CACHE_SIZE);
    if (kept == NULL) kernels_fatal(__FILE__, __LINE__, "out of host memory for the GEMM plans");
    int count = 0;
    for (int i = 0; i < GEMM_PLAN_CACHE_SIZE; i++) {
        if (!plan_cache[i].used) continue;
        if (plan_cache[i].key.bucketed) plan_destroy(&plan_cache[i]);
        else kept[count++] = plan_cache[i];
    }
    memset(plan_cache, 0, sizeof plan_cache);
    for (int i = 0; i < count; i++) *plan_entry(&kept[i].key) = kept[i];
    plan_count = count;
    free(kept);
}

static gemm_plan *plan_for(const gemm_problem *p) {
    gemm_plan_key key = plan_key_of(p);
    gemm_plan *plan = plan_entry(&key);
    if (plan->used) return plan;
    if (plan_count >= GEMM_PLAN_CACHE_FILL) {
        drop_bucketed_plans();
        plan = plan_entry(&key);
    }
    plan_create(plan, p, &key);
    plan_count++;
    return plan;
}

/* runs the problem through cuBLASLt; false when cuBLASLt has no algorithm for it */
static bool gemm_cublaslt(const gemm_problem *p) {
    gemm_plan *plan = plan_for(p);
    if (!plan->has_algo) return false;
    if (plan->key.bucketed) {
        set_plan_shape(plan, p);
        if (!plan->tuned && gemm_tuning_on) plan_tune_bucket(plan, p);
    }
    set_epilogue_pointers(plan->desc, p);
    float alpha = 1.0f, beta = p->accumulate ? 1.0f : 0.0f;
    size_t workspace_bytes = 0;
    void *workspace = cuda_cublaslt_workspace(&workspace_bytes);
    cublasStatus_t status = cublasLtMatmul(cuda_cublaslt_handle(), plan->desc, &alpha, p->a, plan->a_layout, p->b,
                                           plan->b_layout, &beta, p->c != NULL ? p->c : p->d, plan->d_layout, p->d,
                                           plan->d_layout, &plan->algo, workspace, workspace_bytes, compute_stream());
    if (status == CUBLAS_STATUS_NOT_SUPPORTED && plan->key.bucketed) { /* the bucket's algorithm does not fit: exact */
        gemm_bucketed = false;
        bool done = gemm_cublaslt(p);
        gemm_bucketed = true;
        return done;
    }
    CHECK_CUBLAS(status);
    return true;
}

/* ---- the fallback: a shared-memory tiled GEMM, fp32 accumulation, no epilogue ---- */

#define FALLBACK_TILE 16

template <typename E>
static __device__ __forceinline__ float operand_at(const E *x, int ld, bool trans,
                                                   int row, int col) {
    /* element (row, col) of op(X), X column-major with leading dimension ld */
    return to_float(trans ? x[(size_t)row * ld + col] : x[(size_t)col * ld + row]);
}

template <typename E>
static __global__ void fallback_gemm_kernel(void *d, bool d_is_float, int ldd, bool accumulate,
                                            const E *a, int lda, bool transa,
                                            const E *b, int ldb, bool transb, int m,
                                            int n, int k) {
    __shared__ float a_tile[FALLBACK_TILE][FALLBACK_TILE + 1]; /* [l][i] */
    __shared__ float b_tile[FALLBACK_TILE][FALLBACK_TILE + 1]; /* [j][l] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.x * FALLBACK_TILE + tx; /* row of D */
    const int j = blockIdx.y * FALLBACK_TILE + ty; /* column of D */
    float acc = 0.0f;
    for (int l0 = 0; l0 < k; l0 += FALLBACK_TILE) {
        int a_row = blockIdx.x * FALLBACK_TILE + tx, a_col = l0 + ty;
        a_tile[ty][tx] = (a_row < m && a_col < k) ? operand_at(a, lda, transa, a_row, a_col) : 0.0f;
        int b_row = l0 + tx, b_col = blockIdx.y * FALLBACK_TILE + ty;
        b_tile[ty][tx] = (b_row < k && b_col < n) ? operand_at(b, ldb, transb, b_row, b_col) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int l = 0; l < FALLBACK_TILE; l++) acc += a_tile[l][tx] * b_tile[ty][l];
        __syncthreads();
    }
    if (i < m && j < n) {
        size_t index = (size_t)j * ldd + i;
        if (d_is_float) {
            float *df = (float *)d;
            df[index] = accumulate ? df[index] + acc : acc;
        } else {
            E *db = (E *)d;
            float prior = accumulate ? to_float(db[index]) : 0.0f;
            db[index] = from_float<E>(prior + acc);
        }
    }
}

static bool fallback_forced(void) {
    const char *value = getenv("MEGATRON_C_MATMUL_FALLBACK");
    return value != NULL && value[0] == '1';
}

/* runs the problem, epilogue ignored (callers apply bias and GeLU themselves on this path) */
template <typename E>
static void gemm_fallback_t(const gemm_problem *p) {
    dim3 grid(ceil_div((size_t)p->m, FALLBACK_TILE), ceil_div((size_t)p->n, FALLBACK_TILE));
    fallback_gemm_kernel<<<grid, dim3(FALLBACK_TILE, FALLBACK_TILE), 0, compute_stream()>>>(
        p->d, p->d_type == CUDA_R_32F, p->ldd, p->accumulate, static_cast<const E *>(p->a), p->lda,
        p->transa == CUBLAS_OP_T, static_cast<const E *>(p->b), p->ldb, p->transb == CUBLAS_OP_T, p->m, p->n,
        p->k);
    CHECK_LAUNCH();
}
static void gemm_fallback(const gemm_problem *p) {
    if (p->ab_type == CUDA_R_16F) gemm_fallback_t<__half>(p);
    else gemm_fallback_t<__nv_bfloat16>(p);
}

/* the elementwise kernels (cuda_elementwise.cu) the linear layer falls back on, per element type */
static void bias_add_e(__nv_bfloat16 *out, const __nv_bfloat16 *bias, int N, int C) {
    cuda_bias_add(reinterpret_cast<bf16 *>(out), reinterpret_cast<const bf16 *>(bias), N, C);
}
static void bias_add_e(__half *out, const __half *bias, int N, int C) {
    cuda_bias_add_fp16(reinterpret_cast<fp16 *>(out), reinterpret_cast<const fp16 *>(bias), N, C);
}
static void gelu_forward_e(__nv_bfloat16 *out, const __nv_bfloat16 *x, size_t n) {
    cuda_gelu_forward(reinterpret_cast<bf16 *>(out), reinterpret_cast<const bf16 *>(x), n);
}
static void gelu_forward_e(__half *out, const __half *x, size_t n) {
    cuda_gelu_forward_fp16(reinterpret_cast<fp16 *>(out), reinterpret_cast<const fp16 *>(x), n);
}
static void gelu_backward_e(__nv_bfloat16 *dx, const __nv_bfloat16 *x, const __nv_bfloat16 *dout, size_t n) {
    cuda_gelu_backward(reinterpret_cast<bf16 *>(dx), reinterpret_cast<const bf16 *>(x),
                       reinterpret_cast<const bf16 *>(dout), n);
}
static void gelu_backward_e(__half *dx, const __half *x, const __half *dout, size_t n) {
    cuda_gelu_backward_fp16(reinterpret_cast<fp16 *>(dx), reinterpret_cast<const fp16 *>(x),
                            reinterpret_cast<const fp16 *>(dout), n);
}
static void gelu_backward_recompute_e(__nv_bfloat16 *dx, __nv_bfloat16 *y, const __nv_bfloat16 *x,
                                      const __nv_bfloat16 *dout, size_t n) {
    cuda_gelu_backward_recompute(reinterpret_cast<bf16 *>(dx), reinterpret_cast<bf16 *>(y),
                                 reinterpret_cast<const bf16 *>(x), reinterpret_cast<const bf16 *>(dout), n);
}
static void gelu_backward_recompute_e(__half *dx, __half *y, const __half *x, const __half *dout, size_t n) {
    cuda_gelu_backward_recompute_fp16(reinterpret_cast<fp16 *>(dx), reinterpret_cast<fp16 *>(y),
                                      reinterpret_cast<const fp16 *>(x), reinterpret_cast<const fp16 *>(dout), n);
}

/* ---- the linear layer ---- */

/* the forward product out^T [OC,N] = W (op T) . x^T, D in the operands' type, no epilogue yet */
template <typename E>
static gemm_problem forward_problem(const E *x, const E *weight, int N, int IC, int OC) {
    gemm_problem p;
    memset(&p, 0, sizeof p);
    p.m = OC;
    p.n = N;
    p.k = IC;
    p.transa = CUBLAS_OP_T;
    p.a = weight;
    p.lda = IC;
    p.transb = CUBLAS_OP_N;
    p.b = x;
    p.ldb = IC;
    p.ab_type = cuda_data_type<E>();
    p.d_type = p.ab_type;
    p.ldd = OC;
    p.accumulate = false;
    p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return p;
}

template <typename E>
static void matmul_forward_t(E *out, E *gelu_out, const E *x, const E *weight,
                                    const E *bias, int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (IC <= 0) { /* empty product: out = bias (or 0) */
        CHECK_CUDA(cudaMemsetAsync(out, 0, (size_t)N * OC * sizeof(E), compute_stream()));
        if (bias != NULL) bias_add_e(out, bias, N, OC);
        if (gelu_out != NULL) gelu_forward_e(gelu_out, out, (size_t)N * OC);
        return;
    }
    gemm_problem p = forward_problem(x, weight, N, IC, OC);

    const bool forced = fallback_forced();
    const bool bias_fusable = bias != NULL && aligned16(bias);
    /* 1. everything fused: D = gelu_out, aux = out (the pre-activation) */
    if (!forced && gelu_out != NULL && OC % 8 == 0 && aligned16(out) && aligned16(gelu_out) &&
        (bias == NULL || bias_fusable)) {
        p.d = gelu_out;
        p.aux = out;
        p.bias = bias;
        p.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        if (gemm_cublaslt(&p)) return;
    }
    /* 2. matmul (+ bias) into out, then the rest as separate kernels */
    p.d = out;
    p.aux = NULL;
    bool bias_done = false;
    if (!forced && bias_fusable) {
        p.bias = bias;
        p.epilogue = CUBLASLT_EPILOGUE_BIAS;
        bias_done = gemm_cublaslt(&p);
    }
    if (!bias_done) {
        p.bias = NULL;
        p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        if (forced || !gemm_cublaslt(&p)) gemm_fallback(&p);
        if (bias != NULL) bias_add_e(out, bias, N, OC);
    }
    if (gelu_out != NULL) gelu_forward_e(gelu_out, out, (size_t)N * OC);
}

/* the adds the residual GEMM falls back on, per element type */
static void add_e(__nv_bfloat16 *out, const __nv_bfloat16 *a, const __nv_bfloat16 *b, size_t n) {
    cuda_add(reinterpret_cast<bf16 *>(out), reinterpret_cast<const bf16 *>(a), reinterpret_cast<const bf16 *>(b), n);
}
static void add_e(__half *out, const __half *a, const __half *b, size_t n) {
    cuda_add_fp16(reinterpret_cast<fp16 *>(out), reinterpret_cast<const fp16 *>(a), reinterpret_cast<const fp16 *>(b), n);
}

/* out = residual + x W^T + bias in one GEMM: beta 1 with C = residual, the bias as the BIAS
 * epilogue; where cuBLASLt offers no algorithm (or a pointer is not 16-byte aligned), the product
 * and the adds run as separate kernels */
template <typename E>
static void matmul_forward_residual_t(E *out, const E *x, const E *weight, const E *bias, const E *residual, int N,
                                      int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (IC > 0 && !fallback_forced() && aligned16(out) && aligned16(residual) && (bias == NULL || aligned16(bias))) {
        gemm_problem p = forward_problem(x, weight, N, IC, OC);
        p.d = out;
        p.accumulate = true;
        p.c = residual;
        p.bias = bias;
        p.epilogue = bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
        if (gemm_cublaslt(&p)) return;
    }
    matmul_forward_t(out, (E *)NULL, x, weight, bias, N, IC, OC);
    add_e(out, residual, out, (size_t)N * OC);
}

/* the input-gradient product dx^T [IC,N] = W (op N) . dout^T, no epilogue yet */
template <typename E>
static gemm_problem input_gradient_problem(E *dx, const E *dout, const E *weight, int N, int IC, int OC) {
    gemm_problem p;
    memset(&p, 0, sizeof p);
    p.m = IC;
    p.n = N;
    p.k = OC;
    p.transa = CUBLAS_OP_N;
    p.a = weight;
    p.lda = IC;
    p.transb = CUBLAS_OP_N;
    p.b = dout;
    p.ldb = OC;
    p.d = dx;
    p.ab_type = cuda_data_type<E>();
    p.d_type = p.ab_type;
    p.ldd = IC;
    p.accumulate = false;
    p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return p;
}

/* the weight-gradient product dW^T [IC,OC] += x^T (op N) . dout (op T), fp32 C = D, no epilogue yet */
template <typename E>
static gemm_problem weight_gradient_problem(float *dweight, const E *dout, const E *x, int N, int IC, int OC) {
    gemm_problem p;
    memset(&p, 0, sizeof p);
    p.m = IC;
    p.n = OC;
    p.k = N;
    p.transa = CUBLAS_OP_N;
    p.a = x;
    p.lda = IC;
    p.transb = CUBLAS_OP_T;
    p.b = dout;
    p.ldb = OC;
    p.d = dweight;
    p.ab_type = cuda_data_type<E>();
    p.d_type = CUDA_R_32F;
    p.ldd = IC;
    p.accumulate = true;
    p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return p;
}

/* dx^T [IC,N] = W . dout^T with an optional epilogue (DGELU: times gelu'(aux)); false when
 * cuBLASLt has no algorithm for it (the plain product always runs, on the fallback if needed) */
template <typename E>
static bool input_gradient(E *dx, const E *dout, const E *weight, int N, int IC, int OC,
                           cublasLtEpilogue_t epilogue, const E *aux, bool forced) {
    gemm_problem p = input_gradient_problem(dx, dout, weight, N, IC, OC);
    p.epilogue = epilogue;
    p.aux = const_cast<E *>(aux);
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) return !forced && gemm_cublaslt(&p);
    if (forced || !gemm_cublaslt(&p)) gemm_fallback(&p);
    return true;
}

/* dW^T [IC,OC] += x^T . dout, fp32 (= with overwrite: beta 0) */
template <typename E>
static void weight_gradient(float *dweight, const E *dout, const E *x, int N, int IC, int OC, bool forced,
                            bool overwrite = false) {
    gemm_problem p = weight_gradient_problem(dweight, dout, x, N, IC, OC);
    p.accumulate = !overwrite;
    if (forced || !gemm_cublaslt(&p)) gemm_fallback(&p);
}

template <typename E>
static void matmul_backward_t(E *dx, float *dweight, float *dbias, const E *dout,
                                     const E *x, const E *weight, int N, int IC, int OC) {
    if (N <= 0) return;
    const bool forced = fallback_forced();
    if (dx != NULL && IC > 0) {
        if (OC <= 0) CHECK_CUDA(cudaMemsetAsync(dx, 0, (size_t)N * IC * sizeof(E), compute_stream()));
        else input_gradient(dx, dout, weight, N, IC, OC, CUBLASLT_EPILOGUE_DEFAULT, (const E *)NULL, forced);
    }
    if (dweight != NULL && OC > 0 && IC > 0) weight_gradient(dweight, dout, x, N, IC, OC, forced);
    if (dbias != NULL && OC > 0) bias_backward_e(dbias, dout, N, OC);
}

template <typename E>
static void matmul_backward_weight_overwrite_t(float *dweight, const E *dout, const E *x, int N, int IC, int OC) {
    if (OC <= 0 || IC <= 0) return;
    if (N <= 0) {
        CHECK_CUDA(cudaMemsetAsync(dweight, 0, sizeof(float) * (size_t)OC * IC, compute_stream()));
        return;
    }
    weight_gradient(dweight, dout, x, N, IC, OC, fallback_forced(), true);
}

/* fc2's backward with the GeLU's: the input-gradient GEMM's DGELU epilogue multiplies by
 * gelu'(pre) before the one rounding to bf16 (aux needs IC % 8 == 0 and 16-byte alignment), then
 * x = gelu(pre) again; otherwise the product, then one pass for the GeLU backward in place and
 * x. Unless x_kept, the forward's gelu_out (from the GEMM's fp32 result) was not kept: x is gelu
 * of the rounded pre-activation, within a bf16 rounding of it, which saves [N,IC] of activations
 * per layer. With x_kept, x is that gelu_out: the weight gradient reads it first (dpre may be x),
 * and nothing is computed again. */
template <typename E>
static void matmul_backward_gelu_t(E *dpre, float *dweight, const E *dout, E *x,
                                          const E *pre, const E *weight, int N, int IC, int OC, bool x_kept) {
    if (N <= 0 || IC <= 0) return;
    const bool forced = fallback_forced();
    if (OC <= 0) {
        CHECK_CUDA(cudaMemsetAsync(dpre, 0, (size_t)N * IC * sizeof(E), compute_stream()));
        return;
    }
    const size_t n = (size_t)N * IC;
    if (x_kept && dweight != NULL) weight_gradient(dweight, dout, x, N, IC, OC, forced); /* before dpre (maybe x) is written */
    const bool fusable = IC % 8 == 0 && aligned16(dpre) && aligned16(pre);
    if (fusable && input_gradient(dpre, dout, weight, N, IC, OC, CUBLASLT_EPILOGUE_DGELU, pre, forced)) {
        if (!x_kept) gelu_forward_e(x, pre, n);
    } else {
        input_gradient(dpre, dout, weight, N, IC, OC, CUBLASLT_EPILOGUE_DEFAULT, (const E *)NULL, forced);
        if (x_kept) gelu_backward_e(dpre, pre, dpre, n);
        else gelu_backward_recompute_e(dpre, x, pre, dpre, n);
    }
    if (!x_kept && dweight != NULL) weight_gradient(dweight, dout, x, N, IC, OC, forced);
}

/* the grouped GEMMs (kernels.h: grouped_matmul_forward / _backward): one GEMM per non-empty row
 * block, planned per size bucket (gemm_bucketed above). The blocks' GEMMs are independent: they
 * run on grouped_lanes() lanes in turn (2 by default; MTC_GROUPED_GEMM_LANES=1..4), so that one GEMM's
 * last partial wave of tiles overlaps the next one's first (each GEMM alone leaves SMs idle in its
 * tail). Each GEMM's result does not depend on the lanes: the same algorithm, its own output rows
 * and weight gradient. */
static int grouped_lanes(void) {
    static int lanes = 0;
    if (lanes == 0) {
        /* two lanes: the small Mixtral's step on an H200 76.6 -> 74.4 ms; four gain nothing more
         * (perf/results/peer/moe-vs-peer-h200-2026-11-29-d.md) */
        const char *env = getenv("MTC_GROUPED_GEMM_LANES");
        lanes = env && *env ? atoi(env) : 2;
        lanes = lanes < 1 ? 1 : lanes > CUDA_LANES_MAX ? CUDA_LANES_MAX : lanes;
    }
    return lanes;
}

/* the lanes a grouped call uses: 1 (no fork) unless two blocks or more have rows */
static int lanes_for(const int *rows, int groups) {
    int busy = 0;
    for (int g = 0; g < groups; g++) busy += rows[g + 1] > rows[g];
    int lanes = grouped_lanes();
    return busy < 2 ? 1 : busy < lanes ? busy : lanes;
}

template <typename E>
static void grouped_forward_t(E *out, const E *x, const void *const *weight, const int *rows, int groups, int IC,
                              int OC) {
    const int lanes = lanes_for(rows, groups);
    if (lanes > 1) cuda_lane_fork(lanes);
    const bool was_bucketed = gemm_bucketed; /* inside a matmul_rows_vary scope, or not */
    gemm_bucketed = true;
    for (int g = 0, turn = 0; g < groups; g++) {
        int n = rows[g + 1] - rows[g];
        if (n <= 0) continue;
        if (lanes > 1) cuda_lane_select(turn++ % lanes);
        matmul_forward_t(out + (size_t)rows[g] * OC, (E *)NULL, x + (size_t)rows[g] * IC, (const E *)weight[g],
                         (const E *)NULL, n, IC, OC);
    }
    gemm_bucketed = was_bucketed;
    if (lanes > 1) cuda_lane_join(lanes);
}

template <typename E>
static void grouped_backward_t(E *dx, float *const *dweight, const E *dout, const E *x, const void *const *weight,
                               const int *rows, int groups, int IC, int OC) {
    const int lanes = lanes_for(rows, groups);
    if (lanes > 1) cuda_lane_fork(lanes);
    const bool was_bucketed = gemm_bucketed; /* inside a matmul_rows_vary scope, or not */
    gemm_bucketed = true;
    for (int g = 0, turn = 0; g < groups; g++) {
        int n = rows[g + 1] - rows[g];
        if (n <= 0) continue;
        if (lanes > 1) cuda_lane_select(turn++ % lanes);
        matmul_backward_t(dx ? dx + (size_t)rows[g] * IC : (E *)NULL, dweight ? dweight[g] : (float *)NULL,
                          (float *)NULL, dout + (size_t)rows[g] * OC, x + (size_t)rows[g] * IC, (const E *)weight[g], n,
                          IC, OC);
    }
    gemm_bucketed = was_bucketed;
    if (lanes > 1) cuda_lane_join(lanes);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

/* kernels.h's matmul_rows_vary: the GEMMs until the next call are planned per size bucket */
extern "C" void cuda_matmul_rows_vary(int on) { gemm_bucketed = on != 0; }

extern "C" void cuda_grouped_matmul_forward(bf16 *out, const bf16 *x, const void *const *weight, const int *rows,
                                            int groups, int IC, int OC) {
    grouped_forward_t(as_nv(out), as_nv(x), weight, rows, groups, IC, OC);
}
extern "C" void cuda_grouped_matmul_forward_fp16(fp16 *out, const fp16 *x, const void *const *weight,
                                                 const int *rows, int groups, int IC, int OC) {
    grouped_forward_t(as_half(out), as_half(x), weight, rows, groups, IC, OC);
}
extern "C" void cuda_grouped_matmul_backward(bf16 *dx, float *const *dweight, const bf16 *dout, const bf16 *x,
                                             const void *const *weight, const int *rows, int groups, int IC, int OC) {
    grouped_backward_t(as_nv(dx), dweight, as_nv(dout), as_nv(x), weight, rows, groups, IC, OC);
}
extern "C" void cuda_grouped_matmul_backward_fp16(fp16 *dx, float *const *dweight, const fp16 *dout, const fp16 *x,
                                                  const void *const *weight, const int *rows, int groups, int IC,
                                                  int OC) {
    grouped_backward_t(as_half(dx), dweight, as_half(dout), as_half(x), weight, rows, groups, IC, OC);
}

extern "C" void cuda_matmul_forward_residual(bf16 *out, const bf16 *x, const bf16 *weight, const bf16 *bias,
                                             const bf16 *residual, int N, int IC, int OC) {
    matmul_forward_residual_t(as_nv(out), as_nv(x), as_nv(weight), as_nv(bias), as_nv(residual), N, IC, OC);
}

extern "C" void cuda_matmul_forward_residual_fp16(fp16 *out, const fp16 *x, const fp16 *weight, const fp16 *bias,
                                                  const fp16 *residual, int N, int IC, int OC) {
    matmul_forward_residual_t(as_half(out), as_half(x), as_half(weight), as_half(bias), as_half(residual), N, IC,
                              OC);
}

extern "C" void cuda_matmul_forward(bf16 *out, bf16 *gelu_out, const bf16 *x, const bf16 *weight,
                                    const bf16 *bias, int N, int IC, int OC) {
    matmul_forward_t(as_nv(out), as_nv(gelu_out), as_nv(x), as_nv(weight), as_nv(bias), N, IC, OC);
}

extern "C" void cuda_matmul_forward_fp16(fp16 *out, fp16 *gelu_out, const fp16 *x, const fp16 *weight,
                                    const fp16 *bias, int N, int IC, int OC) {
    matmul_forward_t(as_half(out), as_half(gelu_out), as_half(x), as_half(weight), as_half(bias), N, IC, OC);
}

extern "C" void cuda_matmul_backward(bf16 *dx, float *dweight, float *dbias, const bf16 *dout,
                                     const bf16 *x, const bf16 *weight, int N, int IC, int OC) {
    matmul_backward_t(as_nv(dx), dweight, dbias, as_nv(dout), as_nv(x), as_nv(weight), N, IC, OC);
}

extern "C" void cuda_matmul_backward_fp16(fp16 *dx, float *dweight, float *dbias, const fp16 *dout,
                                     const fp16 *x, const fp16 *weight, int N, int IC, int OC) {
    matmul_backward_t(as_half(dx), dweight, dbias, as_half(dout), as_half(x), as_half(weight), N, IC, OC);
}

extern "C" void cuda_matmul_backward_weight_overwrite(float *dweight, const bf16 *dout, const bf16 *x, int N,
                                                      int IC, int OC) {
    matmul_backward_weight_overwrite_t(dweight, as_nv(dout), as_nv(x), N, IC, OC);
}

extern "C" void cuda_matmul_backward_weight_overwrite_fp16(float *dweight, const fp16 *dout, const fp16 *x, int N,
                                                           int IC, int OC) {
    matmul_backward_weight_overwrite_t(dweight, as_half(dout), as_half(x), N, IC, OC);
}

extern "C" void cuda_matmul_backward_gelu(bf16 *dpre, float *dweight, const bf16 *dout, bf16 *x,
                                          const bf16 *pre, const bf16 *weight, int N, int IC, int OC, int x_kept) {
    matmul_backward_gelu_t(as_nv(dpre), dweight, as_nv(dout), as_nv(x), as_nv(pre), as_nv(weight), N, IC, OC,
                           x_kept != 0);
}

extern "C" void cuda_matmul_backward_gelu_fp16(fp16 *dpre, float *dweight, const fp16 *dout, fp16 *x,
                                          const fp16 *pre, const fp16 *weight, int N, int IC, int OC, int x_kept) {
    matmul_backward_gelu_t(as_half(dpre), dweight, as_half(dout), as_half(x), as_half(pre), as_half(weight), N, IC,
                           OC, x_kept != 0);
}
