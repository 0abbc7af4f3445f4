# io/local.mk: file formats: our parallel-HDF5 corpus, Megatron's .bin/.idx, streaming JSONL
# (plain and gzip). Included from the top Makefile.am; checkpoints and safetensors come later.
noinst_LIBRARIES += io/libio.a
io_libio_a_SOURCES = \
	io/hdf5_corpus.c io/hdf5_corpus.h \
	io/mmap_indexed.c io/mmap_indexed.h \
	io/jsonl_reader.c io/jsonl_reader.h
io_libio_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
EXTRA_DIST += io/CORPUS_FORMAT.md
