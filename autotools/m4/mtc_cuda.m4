# MTC_CHECK_CUDA: the optional CUDA backend. --with-cuda=DIR (default /usr/local/cuda when nvcc is
# there), --without-cuda. When on, cudart, cuBLASLt and NCCL are required. CUDA sources compile
# whenever nvcc is found, also on machines with no GPU.
AC_DEFUN([MTC_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend from the toolkit in DIR (default: /usr/local/cuda if nvcc is there)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NCCL_HOME], [NCCL install prefix when not inside the CUDA toolkit])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=LIST], [GPU architectures to build for (default: "90 80"; PTX for the first)])],
    [], [with_cuda_arch="90 80"])
  have_cuda=no
  AS_CASE([$with_cuda],
    [no], [CUDA_HOME=],  dnl --without-cuda wins over a CUDA_HOME set in the environment
    [yes|check], [
      AS_IF([test -x /usr/local/cuda/bin/nvcc], [CUDA_HOME=/usr/local/cuda],
        [AC_PATH_PROG([mtc_nvcc_path], [nvcc])
         AS_IF([test -n "$mtc_nvcc_path"], [CUDA_HOME=`dirname \`dirname $mtc_nvcc_path\``])])
      AS_IF([test -z "$CUDA_HOME" && test "x$with_cuda" = xyes], [AC_MSG_ERROR([--with-cuda given but nvcc not found])])],
    [CUDA_HOME=$with_cuda
     AS_IF([test -x "$CUDA_HOME/bin/nvcc"], [], [AC_MSG_ERROR([no nvcc in $CUDA_HOME/bin (from --with-cuda=$with_cuda)])])])
  AS_IF([test -n "$CUDA_HOME"], [
    have_cuda=yes
    AS_IF([test -z "$NVCC"], [NVCC="$CUDA_HOME/bin/nvcc"])
    CUDA_CFLAGS="-I$CUDA_HOME/include"
    mtc_cuda_libdir="$CUDA_HOME/lib64"
    AS_IF([test -d "$mtc_cuda_libdir"], [], [mtc_cuda_libdir="$CUDA_HOME/lib"])
    CUDA_LIBS="-L$mtc_cuda_libdir -Wl,-rpath,$mtc_cuda_libdir"
    AS_IF([test -n "$NCCL_HOME"], [CUDA_CFLAGS="$CUDA_CFLAGS -I$NCCL_HOME/include"
      CUDA_LIBS="$CUDA_LIBS -L$NCCL_HOME/lib -Wl,-rpath,$NCCL_HOME/lib"])
    mtc_save_CPPFLAGS=$CPPFLAGS; mtc_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LIBS="$CUDA_LIBS $LIBS"
    AC_CHECK_HEADER([cuda_runtime_api.h], [], [AC_MSG_ERROR([cuda_runtime_api.h not found under $CUDA_HOME/include])])
    AC_CHECK_HEADER([cublasLt.h], [], [AC_MSG_ERROR([cublasLt.h not found under $CUDA_HOME/include; the CUDA backend needs cuBLASLt])])
    AC_CHECK_HEADER([nccl.h], [], [AC_MSG_ERROR([nccl.h not found; the CUDA backend needs NCCL (install it into the toolkit or set NCCL_HOME), or configure --without-cuda])])
    AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [], [AC_MSG_ERROR([cannot link libcudart from $mtc_cuda_libdir])])
    AC_CHECK_LIB([cublasLt], [cublasLtCreate], [], [AC_MSG_ERROR([cannot link libcublasLt from $mtc_cuda_libdir])])
    AC_CHECK_LIB([nccl], [ncclCommInitRank], [], [AC_MSG_ERROR([cannot link libnccl; set NCCL_HOME or configure --without-cuda])])
    CPPFLAGS=$mtc_save_CPPFLAGS; LIBS=$mtc_save_LIBS
    CUDA_LIBS="$CUDA_LIBS -lnccl -lcublasLt -lcudart -lstdc++"
    NVCC_ARCH_FLAGS=""
    mtc_first_arch=""
    for a in $with_cuda_arch; do
      dnl Hopper's code is built as sm_90a, the architecture-specific target with wgmma
      dnl (kernels/cuda/cuda_attention_sm90.cu); it runs on sm_90 GPUs only
      AS_IF([test "x$a" = x90], [mtc_sass=90a], [mtc_sass=$a])
      NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$mtc_sass,code=sm_$mtc_sass"
      AS_IF([test -z "$mtc_first_arch"], [mtc_first_arch=$a])
    done
    NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$mtc_first_arch,code=compute_$mtc_first_arch"
    AC_DEFINE([HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built])
  ])
  AC_SUBST([CUDA_HOME]) AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([NVCC_ARCH_FLAGS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])
