# app/training/local.mk: pretrain_gpt's arguments, the training loop, pipeline schedules, the
# log, checkpointing glue, exit signals.
noinst_LIBRARIES += app/training/libtraining.a
app_training_libtraining_a_SOURCES = \
	app/training/args.c app/training/args.h app/training/args_megatron_compat.inc \
	app/training/training.c app/training/training.h \
	app/training/data_setup.c app/training/data_setup.h \
	app/training/batch_check.c app/training/batch_check.h \
	app/training/train_log.c app/training/train_log.h \
	app/training/train_timers.c app/training/train_timers.h \
	app/training/pipeline_schedule.c app/training/pipeline_schedule.h \
	app/training/exit_signal.c app/training/exit_signal.h \
	app/training/nan_check.c app/training/nan_check.h \
	app/training/param_dump.c app/training/param_dump.h \
	app/training/checkpointing.c app/training/checkpointing.h \
	app/training/non_persistent_checkpoint.c app/training/non_persistent_checkpoint.h \
	app/training/checkpoint_args.c app/training/checkpoint_args.h \
	app/training/memory_estimate.c app/training/memory_estimate.h \
	app/training/microbatches.c app/training/microbatches.h \
	app/training/straggler.c app/training/straggler.h \
	app/training/pretrain_main.c app/training/pretrain_main.h
app_training_libtraining_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
