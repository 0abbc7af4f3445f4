# kernels/local.mk: the compute backends behind kernels/kernels.h.
noinst_LIBRARIES += kernels/libkernels.a
kernels_libkernels_a_SOURCES = kernels/kernels.h kernels/philox.h kernels/moe_routing.h kernels/fp8_format.h kernels/fp8_recipe.h kernels/fp8_recipe.c kernels/kernel_error.c kernels/memory_stats.c \
	kernels/cpu/cpu_backend.c kernels/cpu/cpu_memory.c kernels/cpu/cpu_init.c kernels/cpu/cpu_embedding.c \
	kernels/cpu/cpu_layernorm.c kernels/cpu/cpu_matmul.c kernels/cpu/cpu_attention.c kernels/cpu/cpu_attention_padded.c kernels/cpu/cpu_attention_block.c \
	kernels/cpu/cpu_decode_attention.c kernels/cpu/cpu_elementwise.c kernels/cpu/cpu_bert_elementwise.c kernels/cpu/cpu_cross_entropy.c kernels/cpu/cpu_adamw.c \
	kernels/cpu/cpu_rmsnorm.c kernels/cpu/cpu_rope.c kernels/cpu/cpu_swiglu.c kernels/cpu/cpu_moe.c kernels/cpu/cpu_fp8.c kernels/cpu/cpu_fp8_gemm.c \
	kernels/cpu/cpu_kernels.h

# the CUDA backend: one object per .cu file, compiled by nvcc and added to the library
CUDA_CU_FILES = kernels/cuda/cuda_device.cu kernels/cuda/cuda_context.cu \
	kernels/cuda/cuda_elementwise.cu kernels/cuda/cuda_bias_dropout_add.cu kernels/cuda/cuda_embedding.cu \
	kernels/cuda/cuda_layernorm.cu kernels/cuda/cuda_matmul.cu kernels/cuda/cuda_adamw.cu \
	kernels/cuda/cuda_attention.cu kernels/cuda/cuda_attention_sm90.cu kernels/cuda/cuda_decode_attention.cu kernels/cuda/cuda_cross_entropy.cu \
	kernels/cuda/cuda_backend.cu kernels/cuda/cuda_rmsnorm.cu kernels/cuda/cuda_rope.cu \
	kernels/cuda/cuda_swiglu.cu kernels/cuda/cuda_init.cu kernels/cuda/cuda_moe.cu \
	kernels/cuda/cuda_fp8.cu kernels/cuda/cuda_fp8_mlp.cu kernels/cuda/cuda_fp8_gemm.cu \
	kernels/cuda/cuda_attention_block.cu kernels/cuda/cuda_fixed_tree.cu kernels/cuda/cuda_bert_elementwise.cu
# headers of the flash-attention tiles and context parallelism's ring attention, included by the objects named below only
CUDA_RING_ATTENTION_INCLUDES = kernels/cuda/cuda_attention_block.cuh kernels/cuda/cuda_attention_tiles.cuh
CUDA_INCLUDE_FILES = kernels/cuda/cuda_check.h kernels/cuda/cuda_kernels.h \
	kernels/cuda/cuda_common.cuh kernels/cuda/cuda_kernels_t.cuh kernels/cuda/cuda_norm_backward.cuh \
	kernels/cuda/cuda_fp8_out.cuh kernels/cuda/cuda_gelu.cuh kernels/cuda/cuda_swiglu.cuh
if HAVE_CUDA
CUDA_OBJECT_FILES = $(CUDA_CU_FILES:.cu=.o)
kernels_libkernels_a_SOURCES += $(CUDA_INCLUDE_FILES) $(CUDA_RING_ATTENTION_INCLUDES)
kernels_libkernels_a_LIBADD = $(CUDA_OBJECT_FILES)
EXTRA_kernels_libkernels_a_DEPENDENCIES = $(CUDA_OBJECT_FILES)
CLEANFILES += $(CUDA_OBJECT_FILES)
NVCCFLAGS = -O3 -std=c++17 $(NVCC_ARCH_FLAGS) -Xcompiler -Wall,-Wextra,-fPIC \
	-I$(top_srcdir) -I$(top_builddir) $(CUDA_CFLAGS)
kernels/cuda/%.o: $(top_srcdir)/kernels/cuda/%.cu $(top_srcdir)/kernels/kernels.h \
		$(top_srcdir)/kernels/philox.h $(top_srcdir)/kernels/moe_routing.h $(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%)
	@$(MKDIR_P) kernels/cuda
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -c $< -o $@
kernels/cuda/cuda_attention.o kernels/cuda/cuda_attention_block.o kernels/cuda/cuda_backend.o: \
		$(CUDA_RING_ATTENTION_INCLUDES:%=$(top_srcdir)/%)
# the attention dropout's draw, shared by the mma.sync and the Hopper kernels
kernels/cuda/cuda_attention.o kernels/cuda/cuda_attention_sm90.o: $(top_srcdir)/kernels/cuda/cuda_attention_dropout.cuh
endif
EXTRA_DIST += $(CUDA_CU_FILES) $(CUDA_INCLUDE_FILES) $(CUDA_RING_ATTENTION_INCLUDES) kernels/cuda/cuda_attention_dropout.cuh

# the attention benchmark (perf/attention_bench.cu includes cuda_attention.cu itself; the library
# supplies only kernels_fatal); built only on request:
# make perf/attention_bench [ATTN_BENCH_FLAGS='-DATTN_FWD_WARPS=4 ...']
if HAVE_CUDA
perf/attention_bench: $(top_srcdir)/perf/attention_bench.cu \
		$(top_srcdir)/kernels/cuda/cuda_attention.cu $(top_srcdir)/kernels/cuda/cuda_attention_tiles.cuh $(top_srcdir)/kernels/philox.h \
		$(top_srcdir)/kernels/cuda/cuda_attention_dropout.cuh \
		$(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%) kernels/libkernels.a
	@$(MKDIR_P) perf
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $(ATTN_BENCH_FLAGS) $< kernels/libkernels.a -o $@
CLEANFILES += perf/attention_bench
endif
EXTRA_DIST += perf/attention_bench.cu

# the norm and bias-gradient benchmark (perf/norm_bench.cu calls the library's entry points and
# supplies cuda_stream itself); built only on request: make perf/norm_bench
if HAVE_CUDA
perf/norm_bench: $(top_srcdir)/perf/norm_bench.cu $(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%) \
		kernels/libkernels.a
	@$(MKDIR_P) perf
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $< kernels/libkernels.a -o $@
CLEANFILES += perf/norm_bench
endif
EXTRA_DIST += perf/norm_bench.cu

# the fp8 quantization benchmark (perf/fp8_quant_bench.cu: quantize and quantize_transpose against
# the device's copy bandwidth, through the library's entry points); on request: make perf/fp8_quant_bench
if HAVE_CUDA
perf/fp8_quant_bench: $(top_srcdir)/perf/fp8_quant_bench.cu $(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%) \
		kernels/libkernels.a
	@$(MKDIR_P) perf
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $< kernels/libkernels.a -lcublasLt -o $@
CLEANFILES += perf/fp8_quant_bench
endif
EXTRA_DIST += perf/fp8_quant_bench.cu

# the optimizer-overlap benchmark (perf/optimizer_overlap_bench.cu: AdamW beside the forward's
# GEMMs, through the library's entry points); built only on request: make perf/optimizer_overlap_bench
if HAVE_CUDA
perf/optimizer_overlap_bench: $(top_srcdir)/perf/optimizer_overlap_bench.cu \
		$(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%) kernels/libkernels.a
	@$(MKDIR_P) perf
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $< kernels/libkernels.a -lcublasLt -o $@
CLEANFILES += perf/optimizer_overlap_bench
endif
EXTRA_DIST += perf/optimizer_overlap_bench.cu

# the GEMM algorithm survey (perf/gemm_algos.cu includes cuda_matmul.cu itself); on request:
# make perf/gemm_algos
if HAVE_CUDA
perf/gemm_algos: $(top_srcdir)/perf/gemm_algos.cu $(top_srcdir)/kernels/cuda/cuda_matmul.cu \
		$(CUDA_INCLUDE_FILES:%=$(top_srcdir)/%) kernels/libkernels.a
	@$(MKDIR_P) perf
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) $< kernels/libkernels.a -lcublasLt -o $@
CLEANFILES += perf/gemm_algos
endif
EXTRA_DIST += perf/gemm_algos.cu
