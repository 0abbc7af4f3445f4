# MTC_CHECK_PAPI: optional PAPI counters (--with-papi, default: use the system's when found).
# --with-papi=DIR uses the PAPI installed in DIR (DIR/include, DIR/lib, with an rpath so the
# program, ldd and ../shared/device/pack.sh find DIR/lib/libpapi.so), e.g. the PAPI with the cuda
# component that perf/papi/build_papi_cuda.sh builds. Sets PAPI_CPPFLAGS, PAPI_LIBS, HAVE_PAPI;
# have_papi_cuda (for the summary) says whether that PAPI has the cuda component compiled in
# (whether it is usable is known only at run time: papi_phases.c asks PAPI).
AC_DEFUN([MTC_CHECK_PAPI], [
  AC_ARG_WITH([papi], [AS_HELP_STRING([--with-papi@<:@=DIR@:>@],
    [count events with PAPI, the system's or the one installed in DIR (default: the system's when found)])],
    [], [with_papi=check])
  have_papi=no
  have_papi_cuda=no
  PAPI_CPPFLAGS=
  PAPI_LIBS=
  mtc_papi_from=system
  AS_CASE([$with_papi],
    [no], [],
    [yes|check], [mtc_papi_dir=],
    [mtc_papi_dir=$with_papi
     AS_IF([test -f "$mtc_papi_dir/include/papi.h"], [],
       [AC_MSG_ERROR([--with-papi=$with_papi: no $mtc_papi_dir/include/papi.h (perf/papi/build_papi_cuda.sh installs one)])])
     mtc_papi_libdir=$mtc_papi_dir/lib
     AS_IF([test -d "$mtc_papi_dir/lib64" && test ! -d "$mtc_papi_dir/lib"], [mtc_papi_libdir=$mtc_papi_dir/lib64])
     PAPI_CPPFLAGS="-I$mtc_papi_dir/include"
     PAPI_LIBS="-L$mtc_papi_libdir -Wl,-rpath,$mtc_papi_libdir"
     mtc_papi_from=$mtc_papi_dir])
  AS_IF([test "x$with_papi" != xno], [
    mtc_save_CPPFLAGS=$CPPFLAGS
    mtc_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $PAPI_CPPFLAGS"
    LIBS="$PAPI_LIBS $LIBS"
    AS_UNSET([ac_cv_header_papi_h])
    AS_UNSET([ac_cv_lib_papi_PAPI_library_init])
    AC_CHECK_HEADER([papi.h], [AC_CHECK_LIB([papi], [PAPI_library_init], [have_papi=yes])])
    AS_IF([test "x$have_papi" = xyes], [
      # the cuda component is compiled in when libpapi names it (PAPI lists its components by name)
      AC_MSG_CHECKING([whether that PAPI has the cuda component])
      mtc_papi_so=
      AS_IF([test -n "$mtc_papi_dir"], [mtc_papi_so=$mtc_papi_libdir/libpapi.so],
        [mtc_papi_so=`$CC -print-file-name=libpapi.so 2>/dev/null`])
      AS_IF([test -f "$mtc_papi_so" && grep -q "CUDA profiling via NVIDIA" "$mtc_papi_so" 2>/dev/null],
        [have_papi_cuda=yes])
      AC_MSG_RESULT([$have_papi_cuda])
    ])
    CPPFLAGS=$mtc_save_CPPFLAGS
    LIBS=$mtc_save_LIBS
    AS_IF([test "x$have_papi" = xno && test "x$with_papi" != xcheck],
      [AC_MSG_ERROR([--with-papi=$with_papi given but PAPI not found there (papi.h and libpapi); apt-get install libpapi-dev, or perf/papi/build_papi_cuda.sh for the one with GPU counters])])
  ])
  AS_IF([test "x$have_papi" = xyes], [
    PAPI_LIBS="$PAPI_LIBS -lpapi"
    AC_DEFINE([HAVE_PAPI], [1], [Define to 1 when PAPI is used])
  ])
  AC_SUBST([PAPI_CPPFLAGS])
  AC_SUBST([PAPI_LIBS])
  AM_CONDITIONAL([HAVE_PAPI], [test "x$have_papi" = xyes])
])
