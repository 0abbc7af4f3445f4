#!/bin/sh
# tests/mpi/tensor_parallel_test.sh: runs tests/mpi/tensor_parallel_test (every tensor- and
# sequence-parallel region mapping, forward and backward) on 1, 2 and 4 MPI ranks.
. "${top_srcdir:-.}/tests/lib.sh"
TEST="$top_builddir/tests/mpi/tensor_parallel_test"

for n in 1 2 4; do
    timeout 120 "$MPIEXEC" -n "$n" "$TEST" >"$WORK/test.$n.out" 2>&1
    status=$?
    grep '^not ok' "$WORK/test.$n.out" | sed 's/^/#   /'
    ok $status "tensor_parallel_test on $n rank(s): $(grep -c '^ok' "$WORK/test.$n.out") checks passed"
done
done_testing
