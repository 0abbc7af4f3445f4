# MTC_PROG_MPI: use an MPI compiler wrapper as CC (MPICH's first, any MPI-3 library works)
# and find the matching launcher for the tests and the quickstart.
AC_DEFUN([MTC_PROG_MPI], [
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper (default: mpicc.mpich, then mpicc)])
  AC_ARG_VAR([MPIEXEC], [MPI launcher matching MPICC (default: mpiexec.mpich, then mpiexec)])
  AS_IF([test -z "$MPICC"], [AC_CHECK_PROGS([MPICC], [mpicc.mpich mpicc mpicc.openmpi])])
  AS_IF([test -z "$MPICC"],
    [AC_MSG_ERROR([no MPI compiler wrapper found (mpicc); install MPICH: apt-get install mpich libmpich-dev])])
  AS_IF([test -z "$CC"], [CC="$MPICC"])
  AS_IF([test -z "$MPIEXEC"], [
    AS_CASE(["`$MPICC -show 2>/dev/null`"],
      [*mpich*], [AC_PATH_PROGS([MPIEXEC], [mpiexec.mpich mpiexec.hydra mpiexec mpirun])],
      [*open-rte*|*openmpi*|*open-pal*], [AC_PATH_PROGS([MPIEXEC], [mpiexec.openmpi mpiexec mpirun])],
      [AC_PATH_PROGS([MPIEXEC], [mpiexec mpirun])])
  ])
  AS_IF([test -z "$MPIEXEC"], [AC_MSG_ERROR([no MPI launcher (mpiexec) found next to $MPICC])])
])

# MTC_CHECK_MPI3: the compiler (after AC_PROG_CC) must compile and link an MPI-3 program.
AC_DEFUN([MTC_CHECK_MPI3], [
  AC_MSG_CHECKING([whether $CC builds MPI-3 programs])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#if MPI_VERSION < 3
#error MPI-3 required
#endif]], [[MPI_Comm c; MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$CC cannot build MPI-3 programs; install MPICH (apt-get install mpich libmpich-dev) or pass MPICC=...])])
  mtc_mpi_flavor=unknown
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not mpich
#endif]], [])], [mtc_mpi_flavor=MPICH],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not open mpi
#endif]], [])], [mtc_mpi_flavor="Open MPI"])])
])
