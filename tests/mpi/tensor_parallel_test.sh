#!/bin/sh
# tests/mpi/tensor_parallel_test.sh: runs tests/mpi/tensor_parallel_test (every tensor- and
# sequence-parallel region mapping, forward and backward) on 1, 2 and 4 MPI ranks; then trains a
# tiny GPT with TP2 (with and without sequence parallelism) with the column-parallel input
# gradient reduced while the weight gradient is computed (MTC_TP_COMM_OVERLAP=1) and after it
# (the default): the same final parameters, bit for bit.
. "${top_srcdir:-.}/tests/lib.sh"
TEST="$top_builddir/tests/mpi/tensor_parallel_test"

for n in 1 2 4; do
    timeout 120 "$MPIEXEC" -n "$n" "$TEST" >"$WORK/test.$n.out" 2>&1
    status=$?
    grep '^not ok' "$WORK/test.$n.out" | sed 's/^/#   /'
    ok $status "tensor_parallel_test on $n rank(s): $(grep -c '^ok' "$WORK/test.$n.out") checks passed"
done

SHORT="--args-file $TINY_ARGS --train-iters 4 --lr-warmup-iters 1 --log-interval 2 --eval-iters 0 --tensor-model-parallel-size 2"
for sp in "" "--sequence-parallel"; do
    MTC_TP_COMM_OVERLAP=1 run_app 2 $SHORT $sp; s1=$?; h1=$(grep -o 'final parameter hash: [0-9a-f]*' "$WORK/out")
    run_app 2 $SHORT $sp; s0=$?; h0=$(grep -o 'final parameter hash: [0-9a-f]*' "$WORK/out")
    [ $s1 -eq 0 ] && [ $s0 -eq 0 ] && [ -n "$h1" ] && [ "$h1" = "$h0" ]
    ok $? "TP2 ${sp:-without sequence parallelism}: overlapped and serial input-gradient reduction train the same bits ($h1 / $h0)"
done
done_testing
