#!/bin/sh
# tests/mpi/expert_comm_test.sh: runs tests/mpi/expert_comm_test (the expert-parallel groups of
# the topology and the comm interface's all-to-alls, blocking and not) on 4 ranks (ep 2 and 4,
# tp 1; ep 2 with tp 2) and 8 ranks (tp 2, ep 2, expert-data-parallel 2).
. "${top_srcdir:-.}/tests/lib.sh"
TEST="$top_builddir/tests/mpi/expert_comm_test"
for layout in "4 1 2" "4 1 4" "4 2 2" "8 2 2" "2 1 1"; do
    set -- $layout
    timeout 120 "$MPIEXEC" -n "$1" "$TEST" "$2" "$3" >"$WORK/test.out" 2>&1
    status=$?
    grep '^not ok' "$WORK/test.out" | sed 's/^/#   /'
    ok $status "expert_comm_test on $1 ranks, tp $2, ep $3: $(grep -c '^ok' "$WORK/test.out") checks passed"
done
done_testing
