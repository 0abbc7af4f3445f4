# app/checkpoint/local.mk: saving and loading lists of tensor shards as one parallel-HDF5
# checkpoint (Megatron's dist_checkpointing): the shard list, boxes and pieces, the staged
# transfers, and the collective save/load over io/'s checkpoint format.
noinst_LIBRARIES += app/checkpoint/libcheckpoint.a
app_checkpoint_libcheckpoint_a_SOURCES = \
	app/checkpoint/sharded_state.c app/checkpoint/sharded_state.h \
	app/checkpoint/checkpoint_boxes.c app/checkpoint/checkpoint_boxes.h \
	app/checkpoint/checkpoint_transfer.c app/checkpoint/checkpoint_transfer.h \
	app/checkpoint/checkpoint_verify.c app/checkpoint/checkpoint_verify.h \
	app/checkpoint/dist_checkpoint.c app/checkpoint/dist_checkpoint.h \
	app/checkpoint/async_checkpoint.c app/checkpoint/async_checkpoint.h \
	app/checkpoint/local_checkpoint.c app/checkpoint/local_checkpoint.h
