# perf/metrics/local.mk: FLOP accounting (MFU and HFU), the GPU peak table and PAPI counters per
# phase; shared by the training log and the performance harness. Uses only app/core.
noinst_LIBRARIES += perf/metrics/libperfmetrics.a
perf_metrics_libperfmetrics_a_SOURCES = \
	perf/metrics/flops.c perf/metrics/flops.h \
	perf/metrics/peak_flops.c perf/metrics/peak_flops.h \
	perf/metrics/papi_phases.c perf/metrics/papi_phases.h
perf_metrics_libperfmetrics_a_CPPFLAGS = $(AM_CPPFLAGS) $(PAPI_CPPFLAGS)
# PAPI with the cuda component (built by hand, not in CI) and the figures from its GPU counts
EXTRA_DIST += perf/papi/build_papi_cuda.sh perf/papi/gpu_figures.py
