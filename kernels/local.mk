# kernels/local.mk: the compute backends behind kernels/kernels.h.
noinst_LIBRARIES += kernels/libkernels.a
kernels_libkernels_a_SOURCES = kernels/kernels.h kernels/philox.h \
	kernels/cpu/cpu_backend.c kernels/cpu/cpu_memory.c kernels/cpu/cpu_embedding.c \
	kernels/cpu/cpu_layernorm.c kernels/cpu/cpu_matmul.c kernels/cpu/cpu_attention.c \
	kernels/cpu/cpu_elementwise.c kernels/cpu/cpu_cross_entropy.c kernels/cpu/cpu_adamw.c \
	kernels/cpu/cpu_kernels.h

if HAVE_CUDA
kernels_libkernels_a_SOURCES += kernels/cuda/cuda_check.h
kernels_libkernels_a_LIBADD = kernels/cuda/cuda_device.o
EXTRA_kernels_libkernels_a_DEPENDENCIES = kernels/cuda/cuda_device.o
CLEANFILES += kernels/cuda/cuda_device.o
NVCCFLAGS = -O3 -std=c++17 $(NVCC_ARCH_FLAGS) -Xcompiler -Wall,-Wextra,-fPIC \
	-I$(top_srcdir) -I$(top_srcdir)/kernels -I$(top_builddir) $(CUDA_CFLAGS)
kernels/cuda/%.o: $(top_srcdir)/kernels/cuda/%.cu $(top_srcdir)/kernels/kernels.h
	@$(MKDIR_P) kernels/cuda
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -c $< -o $@
endif
EXTRA_DIST += kernels/cuda/cuda_device.cu kernels/cuda/cuda_check.h
