# io/safetensors.mk: the safetensors reader/writer (io/libsafetensors.a), the convert_checkpoint
# tool (our HDF5 checkpoint <-> Hugging Face GPT-2) and their tests.
noinst_LIBRARIES += io/libsafetensors.a
io_libsafetensors_a_SOURCES = io/safetensors.c io/safetensors.h
io_libsafetensors_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)

# what convert_checkpoint links: error.c comes from app/libapp.a, the HDF5 attribute helpers from
# io/libio.a
CONVERT_CHECKPOINT_LIBS = io/libsafetensors.a io/libio.a app/libapp.a $(HDF5_LIBS) $(JANSSON_LIBS) -lm

bin_PROGRAMS += app/convert_checkpoint
app_convert_checkpoint_SOURCES = app/convert_checkpoint.c \
	app/hf_gpt2_layout.c app/hf_gpt2_layout.h \
	app/hf_gpt2_config.c app/hf_gpt2_config.h \
	io/checkpoint_serial.c io/checkpoint_serial.h
app_convert_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
app_convert_checkpoint_LDADD = $(CONVERT_CHECKPOINT_LIBS)

check_PROGRAMS += tests/safetensors_test tests/make_hf_fixture
tests_safetensors_test_SOURCES = tests/safetensors_test.c tests/tap.h
tests_safetensors_test_LDADD = $(CONVERT_CHECKPOINT_LIBS)
tests_make_hf_fixture_SOURCES = tests/make_hf_fixture.c app/hf_gpt2_config.c app/hf_gpt2_config.h
tests_make_hf_fixture_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_make_hf_fixture_LDADD = $(CONVERT_CHECKPOINT_LIBS)

TESTS += tests/safetensors_test tests/convert_checkpoint_test.sh
EXTRA_DIST += tests/convert_checkpoint_test.sh
