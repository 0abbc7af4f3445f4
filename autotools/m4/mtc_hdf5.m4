# MTC_CHECK_HDF5_PARALLEL: find HDF5 built with MPI-IO; refuse a serial-only HDF5.
# Looks at pkg-config (hdf5-mpich, hdf5-mpi, hdf5-openmpi, hdf5) unless HDF5_CFLAGS/HDF5_LIBS are given.
AC_DEFUN([MTC_CHECK_HDF5_PARALLEL], [
  AC_ARG_VAR([HDF5_CFLAGS], [C preprocessor flags for parallel HDF5])
  AC_ARG_VAR([HDF5_LIBS], [linker flags for parallel HDF5])
  AS_IF([test -z "$HDF5_LIBS"], [
    for mtc_pc in hdf5-mpich hdf5-mpi hdf5-openmpi hdf5; do
      AS_IF([$PKG_CONFIG --exists $mtc_pc 2>/dev/null], [
        HDF5_CFLAGS=`$PKG_CONFIG --cflags $mtc_pc`
        HDF5_LIBS=`$PKG_CONFIG --libs $mtc_pc`
        mtc_hdf5_from="pkg-config $mtc_pc"
        break])
    done
  ])
  AS_IF([test -z "$HDF5_LIBS"], [HDF5_LIBS="-lhdf5"; mtc_hdf5_from="default -lhdf5"])
  mtc_save_CPPFLAGS=$CPPFLAGS; mtc_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS"; LIBS="$HDF5_LIBS $LIBS"
  AC_CHECK_HEADER([hdf5.h], [],
    [AC_MSG_ERROR([hdf5.h not found; install parallel HDF5: apt-get install libhdf5-mpich-dev])])
  AC_MSG_CHECKING([whether HDF5 is built with parallel (MPI-IO) support])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [])], [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([the HDF5 found ($mtc_hdf5_from) is serial-only; this project needs parallel HDF5: apt-get install libhdf5-mpich-dev (libhdf5-openmpi-dev for Open MPI), or set HDF5_CFLAGS and HDF5_LIBS])])
  AC_MSG_CHECKING([whether parallel HDF5 links])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]], [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL);]])],
    [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link parallel HDF5 with $HDF5_LIBS])])
  CPPFLAGS=$mtc_save_CPPFLAGS; LIBS=$mtc_save_LIBS
  AC_SUBST([HDF5_CFLAGS]) AC_SUBST([HDF5_LIBS])
])
