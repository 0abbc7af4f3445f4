/* nvpw_passes.c: what perfworks (libnvperf_host, host side only: no GPU needed) says about a set of
 * GPU metrics on a chip: whether each name exists, how many replay passes it needs alone, and how
 * many the whole set needs together, as one CUPTI profiler configuration with maxPassCount=1, the
 * way PAPI 7.2's cuda component builds it at PAPI_start (its add-time check looks at each metric
 * alone). Also lists the metrics whose names contain a substring.
 *   nvpw_passes CHIP passes METRIC.ROLLUP...     e.g. GH100 passes dram__bytes_read.sum sm__cycles_active.sum
 *   nvpw_passes CHIP list SUBSTRING              e.g. GH100 list tensor_op
 *   nvpw_passes chips                            the chips this libnvperf_host knows
 * Exit status: 0 when every metric exists and the set fits one pass, 1 otherwise, 2 on bad usage.
 * Build: cc -o nvpw_passes nvpw_passes.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvperf_host
 *        -Wl,-rpath,/usr/local/cuda/lib64 (perf/papi/build_probes.sh does it). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <nvperf_cuda_host.h>
#include <nvperf_host.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVPW_OK(call, what)                                                                         \
    do {                                                                                            \
        NVPA_Status status_ = (call);                                                               \
        if (status_ != NVPA_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "nvpw_passes: %s failed: NVPA status %d\n", what, (int)status_);       \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

typedef struct raw_requests {
    NVPA_RawMetricRequest *items;
    size_t count;
} raw_requests;

static NVPW_MetricsEvaluator *evaluator_create(const char *chip, uint8_t **scratch) {
    NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize_Params size = {.structSize = NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize_Params_STRUCT_SIZE};
    size.pChipName = chip;
    NVPW_OK(NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize(&size), "MetricsEvaluator_CalculateScratchBufferSize (unknown chip?)");
    *scratch = malloc(size.scratchBufferSize);
    NVPW_CUDA_MetricsEvaluator_Initialize_Params init = {.structSize = NVPW_CUDA_MetricsEvaluator_Initialize_Params_STRUCT_SIZE};
    init.pChipName = chip;
    init.pScratchBuffer = *scratch;
    init.scratchBufferSize = size.scratchBufferSize;
    NVPW_OK(NVPW_CUDA_MetricsEvaluator_Initialize(&init), "MetricsEvaluator_Initialize");
    return init.pMetricsEvaluator;
}

/* append metric's raw counters to requests; 0, or -1 when the name is not a metric of the chip */
static int add_raw_dependencies(NVPW_MetricsEvaluator *evaluator, const char *metric, raw_requests *requests) {
    NVPW_MetricEvalRequest request;
    NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest_Params convert = {.structSize = NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest_Params_STRUCT_SIZE};
    convert.pMetricsEvaluator = evaluator;
    convert.pMetricName = metric;
    convert.pMetricEvalRequest = &request;
    convert.metricEvalRequestStructSize = NVPW_MetricEvalRequest_STRUCT_SIZE;
    if (NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest(&convert) != NVPA_STATUS_SUCCESS) return -1;
    NVPW_MetricsEvaluator_GetMetricRawDependencies_Params deps = {.structSize = NVPW_MetricsEvaluator_GetMetricRawDependencies_Params_STRUCT_SIZE};
    deps.pMetricsEvaluator = evaluator;
    deps.pMetricEvalRequests = &request;
    deps.numMetricEvalRequests = 1;
    deps.metricEvalRequestStructSize = NVPW_MetricEvalRequest_STRUCT_SIZE;
    deps.metricEvalRequestStrideSize = sizeof request;
    NVPW_OK(NVPW_MetricsEvaluator_GetMetricRawDependencies(&deps), "GetMetricRawDependencies (count)");
    const char **names = calloc(deps.numRawDependencies + 1, sizeof *names);
    deps.ppRawDependencies = names;
    NVPW_OK(NVPW_MetricsEvaluator_GetMetricRawDependencies(&deps), "GetMetricRawDependencies");
    requests->items = realloc(requests->items, (requests->count + deps.numRawDependencies) * sizeof *requests->items);
    for (size_t i = 0; i < deps.numRawDependencies; i++) {
        NVPA_RawMetricRequest raw = {.structSize = NVPA_RAW_METRIC_REQUEST_STRUCT_SIZE};
        raw.pMetricName = strdup(names[i]);
        raw.isolated = 1;
        raw.keepInstances = 1;
        requests->items[requests->count++] = raw;
    }
    free(names);
    return 0;
}

/* passes the raw counters need together (no pass limit), and whether AddMetrics accepts them
 * under maxPassCount=1 (PAPI's configuration) */
static size_t passes_of(const char *chip, const raw_requests *requests, int *fits_one_pass) {
    size_t passes = 0;
    for (int limited = 0; limited < 2; limited++) {
        NVPW_CUDA_RawMetricsConfig_Create_V2_Params create = {.structSize = NVPW_CUDA_RawMetricsConfig_Create_V2_Params_STRUCT_SIZE};
        create.activityKind = NVPA_ACTIVITY_KIND_PROFILER;
        create.pChipName = chip;
        NVPW_OK(NVPW_CUDA_RawMetricsConfig_Create_V2(&create), "RawMetricsConfig_Create_V2");
        NVPW_RawMetricsConfig_BeginPassGroup_Params begin = {.structSize = NVPW_RawMetricsConfig_BeginPassGroup_Params_STRUCT_SIZE};
        begin.pRawMetricsConfig = create.pRawMetricsConfig;
        begin.maxPassCount = limited ? 1 : 0;
        NVPW_OK(NVPW_RawMetricsConfig_BeginPassGroup(&begin), "RawMetricsConfig_BeginPassGroup");
        NVPW_RawMetricsConfig_AddMetrics_Params add = {.structSize = NVPW_RawMetricsConfig_AddMetrics_Params_STRUCT_SIZE};
        add.pRawMetricsConfig = create.pRawMetricsConfig;
        add.pRawMetricRequests = requests->items;
        add.numMetricRequests = requests->count;
        NVPA_Status added = NVPW_RawMetricsConfig_AddMetrics(&add);
        if (limited) {
            *fits_one_pass = added == NVPA_STATUS_SUCCESS;
        } else {
            NVPW_OK(added, "RawMetricsConfig_AddMetrics");
            NVPW_RawMetricsConfig_EndPassGroup_Params end = {.structSize = NVPW_RawMetricsConfig_EndPassGroup_Params_STRUCT_SIZE};
            end.pRawMetricsConfig = create.pRawMetricsConfig;
            NVPW_OK(NVPW_RawMetricsConfig_EndPassGroup(&end), "RawMetricsConfig_EndPassGroup");
            NVPW_RawMetricsConfig_GetNumPasses_Params num = {.structSize = NVPW_RawMetricsConfig_GetNumPasses_Params_STRUCT_SIZE};
            num.pRawMetricsConfig = create.pRawMetricsConfig;
            NVPW_OK(NVPW_RawMetricsConfig_GetNumPasses(&num), "RawMetricsConfig_GetNumPasses");
            passes = num.numPipelinedPasses + num.numIsolatedPasses;
        }
        NVPW_RawMetricsConfig_Destroy_Params destroy = {.structSize = NVPW_RawMetricsConfig_Destroy_Params_STRUCT_SIZE};
        destroy.pRawMetricsConfig = create.pRawMetricsConfig;
        NVPW_RawMetricsConfig_Destroy(&destroy);
    }
    return passes;
}

static void list_metrics(NVPW_MetricsEvaluator *evaluator, const char *substring) {
    static const char *const type_names[] = {"counter", "ratio", "throughput"};
    for (uint8_t type = 0; type < NVPW_METRIC_TYPE__COUNT; type++) {
        NVPW_MetricsEvaluator_GetMetricNames_Params names = {.structSize = NVPW_MetricsEvaluator_GetMetricNames_Params_STRUCT_SIZE};
        names.pMetricsEvaluator = evaluator;
        names.metricType = type;
        NVPW_OK(NVPW_MetricsEvaluator_GetMetricNames(&names), "MetricsEvaluator_GetMetricNames");
        for (size_t i = 0; i < names.numMetrics; i++) {
            const char *name = names.pMetricNames + names.pMetricNameBeginIndices[i];
            if (strstr(name, substring)) printf("%s %s\n", type_names[type], name);
        }
    }
}

int main(int argc, char **argv) {
    NVPW_InitializeHost_Params host = {.structSize = NVPW_InitializeHost_Params_STRUCT_SIZE};
    NVPW_OK(NVPW_InitializeHost(&host), "NVPW_InitializeHost");
    if (argc == 2 && !strcmp(argv[1], "chips")) {
        NVPW_GetSupportedChipNames_Params chips = {.structSize = NVPW_GetSupportedChipNames_Params_STRUCT_SIZE};
        NVPW_OK(NVPW_GetSupportedChipNames(&chips), "GetSupportedChipNames");
        for (size_t i = 0; i < chips.numChipNames; i++) printf("%s\n", chips.ppChipNames[i]);
        return 0;
    }
    if (argc < 4 || (strcmp(argv[2], "passes") && strcmp(argv[2], "list"))) {
        fprintf(stderr, "usage: nvpw_passes CHIP passes METRIC.ROLLUP... | nvpw_passes CHIP list SUBSTRING | nvpw_passes chips\n");
        return 2;
    }
    const char *chip = argv[1];
    uint8_t *scratch;
    NVPW_MetricsEvaluator *evaluator = evaluator_create(chip, &scratch);
    if (!strcmp(argv[2], "list")) {
        list_metrics(evaluator, argv[3]);
        return 0;
    }
    int all_fine = 1;
    raw_requests set = {0};
    for (int i = 3; i < argc; i++) {
        raw_requests alone = {0};
        if (add_raw_dependencies(evaluator, argv[i], &alone)) {
            printf("%s %s: not a metric of this chip\n", chip, argv[i]);
            all_fine = 0;
            continue;
        }
        int fits;
        size_t passes = passes_of(chip, &alone, &fits);
        add_raw_dependencies(evaluator, argv[i], &set);
        int set_fits;
        size_t set_passes = passes_of(chip, &set, &set_fits);
        printf("%s %s: %zu raw counters, %zu pass(es) alone; with the ones before: %zu raw counters, %zu pass(es)%s\n",
               chip, argv[i], alone.count, passes, set.count, set_passes,
               set_fits ? "" : " -- does NOT fit one pass (AddMetrics with maxPassCount=1 fails)");
        if (!set_fits) all_fine = 0;
    }
    return all_fine ? 0 : 1;
}
