# MTC_CHECK_CBLAS: a CBLAS for the CPU backend's matmuls (OpenBLAS first, then BLIS, then generic).
AC_DEFUN([MTC_CHECK_CBLAS], [
  AC_ARG_VAR([BLAS_LIBS], [linker flags for a CBLAS library])
  AC_CHECK_HEADER([cblas.h], [],
    [AC_MSG_ERROR([cblas.h not found; install a BLAS: apt-get install libopenblas-dev])])
  mtc_save_LIBS=$LIBS
  AS_IF([test -n "$BLAS_LIBS"], [LIBS="$BLAS_LIBS $LIBS"
    AC_CHECK_FUNC([cblas_sgemm], [], [AC_MSG_ERROR([cblas_sgemm not found with BLAS_LIBS=$BLAS_LIBS])])],
    [AC_SEARCH_LIBS([cblas_sgemm], [openblas blis cblas blas], [BLAS_LIBS=$ac_cv_search_cblas_sgemm],
      [AC_MSG_ERROR([no library with cblas_sgemm; install a BLAS: apt-get install libopenblas-dev])])])
  AS_IF([test "x$BLAS_LIBS" = "xnone required"], [BLAS_LIBS=""])
  AC_CHECK_FUNCS([openblas_set_num_threads])
  LIBS=$mtc_save_LIBS
  AC_SUBST([BLAS_LIBS])
])
