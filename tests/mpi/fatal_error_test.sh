#!/bin/sh
# fatal_error_test.sh: one error path (DESIGN.md principles 6 and 8): a failure inside the kernels
# ends the whole MPI job, without hanging, with one line naming the rank, the program, and the
# file and line of the check, reported through the handler pretrain_gpt installs
# (error_report_fatal, app/core/error.c) rather than the kernels' default abort.
# The failure is a real one: a hidden size that passes argument validation, but whose parameter
# buffer (about 26 GB per rank) cannot be allocated under a 4 GiB address-space limit, so the
# CPU backend's allocation fails at once, on every machine, instead of paging for minutes.
. "${top_srcdir:-.}/tests/lib.sh"
LIMIT_KB=4194304

# run_limited ARGS... : pretrain_gpt on 2 ranks under the address-space limit, at most 120 s
run_limited() {
    # the allocation itself must fail here, not the memory estimate that runs before it
    (ulimit -v "$LIMIT_KB" && MTC_SKIP_MEMORY_ESTIMATE=1 timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" "$@") >"$WORK/out" 2>"$WORK/err"
}

# control: the limit alone does not stop gpt-tiny
run_limited --args-file "$TINY_ARGS" --train-iters 2 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
status=$?
ok $status "gpt-tiny runs 2 iterations under the ${LIMIT_KB} KiB address-space limit (status $status)"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5

run_limited --args-file "$TINY_ARGS" --hidden-size 16384 --train-iters 2 --lr-warmup-iters 1
status=$?
[ $status -ne 0 ] && [ $status -ne 124 ] && [ $status -ne 137 ]
ok $? "an allocation failure in the kernels ends the job with a non-zero status, within the time limit (status $status)"
sed 's/^/#   /' "$WORK/err" | head -5

pattern='^\[rank [01]\] pretrain_gpt: FATAL at \([^ ]*/\)\{0,1\}kernels/cpu/cpu_memory\.c:[0-9][0-9]*: cpu backend: out of memory allocating [0-9][0-9]* bytes$'
grep -q "$pattern" "$WORK/err"
ok $? "stderr names the rank, the program, kernels/cpu/cpu_memory.c:LINE and the bytes asked for"

grep -q '\[rank ' "$WORK/err" && grep -q 'FATAL at \([^ ]*/\)\{0,1\}kernels/cpu/' "$WORK/err"
ok $? "the message comes through the application's handler (\"[rank \"), not the kernels' default"

line=$(grep -m1 "$pattern" "$WORK/err" | sed 's/.*cpu_memory\.c:\([0-9]*\):.*/\1/')
[ -n "$line" ] && sed -n "${line}p" "$top_srcdir/kernels/cpu/cpu_memory.c" | grep -q 'KERNELS_FATAL'
ok $? "the line named is the check in kernels/cpu/cpu_memory.c (line ${line:-none})"

! grep -q ' iteration ' "$WORK/out"
ok $? "no iteration ran"

done_testing
