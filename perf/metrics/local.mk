# perf/metrics/local.mk: FLOP accounting (MFU and HFU), the GPU peak table and PAPI counters per
# phase; shared by the training log and the performance harness. Uses only app/core.
noinst_LIBRARIES += perf/metrics/libperfmetrics.a
perf_metrics_libperfmetrics_a_SOURCES = \
	perf/metrics/flops.c perf/metrics/flops.h \
	perf/metrics/peak_flops.c perf/metrics/peak_flops.h \
	perf/metrics/papi_phases.c perf/metrics/papi_phases.h
perf_metrics_libperfmetrics_a_CPPFLAGS = $(AM_CPPFLAGS) $(PAPI_CPPFLAGS)
# PAPI with the cuda component (built by hand, not in CI: its patch and NVML shim), the figures
# from its GPU counts, and the diagnostics for the GPU machine (built by build_probes.sh)
EXTRA_DIST += perf/papi/build_papi_cuda.sh perf/papi/papi-cuda-one-pass-sets.patch perf/papi/nvml_shim/nvml.h \
	perf/papi/gpu_figures.py perf/papi/build_probes.sh perf/papi/diagnose_gpu.sh \
	perf/papi/papi_cuda_probe.cu perf/papi/nvpw_passes.c
