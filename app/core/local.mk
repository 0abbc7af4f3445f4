# app/core/local.mk: what every layer may use: the error handler (PETSc-style: one path that
# names the call, rank, file and line and aborts the job), the option engine of every program,
# the string -> integer hash map, the FNV-1a hash, and Megatron's phase timers (timers.c) with
# their report across ranks (timers_report.c), and when the process started (process_start.c).
noinst_LIBRARIES += app/core/libcore.a
app_core_libcore_a_SOURCES = \
	app/core/error.c app/core/error.h \
	app/core/options.c app/core/options.h \
	app/core/hashmap.c app/core/hashmap.h \
	app/core/hash.h \
	app/core/timers.c app/core/timers.h \
	app/core/process_start.c app/core/process_start.h \
	app/core/timers_report.c app/core/timers_report.h
