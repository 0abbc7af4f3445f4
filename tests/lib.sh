# tests/lib.sh: shared helpers for the shell tests (TAP output, running the app under MPI).
# Sourced by tests/*.sh; make check sets top_srcdir, top_builddir and MPIEXEC.
: "${top_srcdir:=.}" "${top_builddir:=.}" "${MPIEXEC:=mpiexec}"
top_srcdir=$(cd "$top_srcdir" && pwd)      # absolute: tests may change directory
top_builddir=$(cd "$top_builddir" && pwd)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
PRETRAIN_GPT="$top_builddir/app/pretrain_gpt"
TINY_ARGS="$top_srcdir/configs/gpt-tiny.args"
tap_n=0
tap_failed=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mtc-test.XXXXXX")
tap_started=$(date +%s)
trap 'rm -rf "$WORK"' EXIT

ok() {  # ok CONDITION_EXIT_STATUS DESCRIPTION
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $tap_n - $2"; else echo "not ok $tap_n - $2"; tap_failed=$((tap_failed + 1)); fi
}
diag() { echo "# $*"; }
# the plan line, then the test's wall time (tests/tools/slowest_tests.sh ranks the suite by it)
done_testing() { echo "1..$tap_n"; echo "# elapsed: $(( $(date +%s) - tap_started )) s"; [ "$tap_failed" -eq 0 ]; }

# run_app NRANKS ARGS... : run pretrain_gpt under MPI with a time limit; output in $WORK/out, $WORK/err
run_app() {
    n=$1; shift
    timeout 300 "$MPIEXEC" -n "$n" "$PRETRAIN_GPT" "$@" >"$WORK/out" 2>"$WORK/err"
}

# json_field FILE SPLIT FIELD : the FIELD values of the metric lines of SPLIT, one per line
json_field() {
    grep "\"split\": \"$2\"" "$1" | sed -e "s/.*\"$3\": \([^,}]*\).*/\1/"
}
