# MTC_CHECK_PAPI: optional PAPI host counters (--with-papi, default: use it when found).
AC_DEFUN([MTC_CHECK_PAPI], [
  AC_ARG_WITH([papi], [AS_HELP_STRING([--with-papi], [count host events with PAPI (default: when found)])],
    [], [with_papi=check])
  have_papi=no
  AS_IF([test "x$with_papi" != xno], [
    AC_CHECK_HEADER([papi.h], [AC_CHECK_LIB([papi], [PAPI_library_init], [have_papi=yes])])
    AS_IF([test "x$have_papi" = xno && test "x$with_papi" = xyes],
      [AC_MSG_ERROR([--with-papi given but PAPI not found; apt-get install libpapi-dev])])
  ])
  AS_IF([test "x$have_papi" = xyes], [PAPI_LIBS="-lpapi"; AC_DEFINE([HAVE_PAPI], [1], [Define to 1 when PAPI is used])])
  AC_SUBST([PAPI_LIBS])
  AM_CONDITIONAL([HAVE_PAPI], [test "x$have_papi" = xyes])
])
