# io/local.mk: everything that touches files: our parallel-HDF5 corpus, Megatron's .bin/.idx,
# streaming JSONL (plain and gzip), distributed and serial checkpoint files, safetensors,
# TensorBoard event files.
noinst_LIBRARIES += io/libio.a
io_libio_a_SOURCES = \
	io/hdf5_corpus.c io/hdf5_corpus.h \
	io/corpus_check.c io/corpus_check.h \
	io/mmap_indexed.c io/mmap_indexed.h \
	io/jsonl_reader.c io/jsonl_reader.h \
	io/hdf5_check.h io/hdf5_attributes.c io/hdf5_attributes.h io/hdf5_lock.c io/hdf5_lock.h \
	io/io_error.c io/io_error.h io/io_fault.c io/io_fault.h \
	io/checkpoint_format.c io/checkpoint_format.h \
	io/checkpoint_file.c io/checkpoint_file.h \
	io/checkpoint_checksum.c io/checkpoint_checksum.h \
	io/checkpoint_serial.c io/checkpoint_serial.h \
	io/local_checkpoint_file.c io/local_checkpoint_file.h \
	io/safetensors.c io/safetensors.h \
	io/tensorboard_events.c io/tensorboard_events.h
io_libio_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
EXTRA_DIST += io/CORPUS_FORMAT.md io/CHECKPOINT_FORMAT.md
