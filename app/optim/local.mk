# app/optim/local.mk: AdamW over the flat buffers, the learning-rate schedule, and the
# data-parallel gradient buckets with the distributed optimizer's shards, and the optimizer's
# checkpoint shards.
noinst_LIBRARIES += app/optim/liboptim.a
app_optim_liboptim_a_SOURCES = \
	app/optim/optimizer.c app/optim/optimizer.h \
	app/optim/optimizer_sharded_state.c app/optim/optimizer_sharded_state.h \
	app/optim/lr_schedule.c app/optim/lr_schedule.h \
	app/optim/grad_scaler.c app/optim/grad_scaler.h \
	app/optim/data_parallel.c app/optim/data_parallel.h \
	app/optim/fixed_tree_reduce.c app/optim/fixed_tree_reduce.h
