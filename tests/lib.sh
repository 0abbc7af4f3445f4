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

# require_gpus N: the start of a GPU test: the number of visible GPUs in $gpus, and the whole test
# a TAP skip (exit 0) when fewer than N are visible
require_gpus() {
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "${gpus:-0}" -lt "$1" ]; then
        if [ "$1" -le 1 ]; then echo "1..0 # SKIP no GPU"; else echo "1..0 # SKIP needs $1 GPUs (${gpus:-0} visible)"; fi
        exit 0
    fi
    diag "$gpus GPU(s): $(nvidia-smi -L | head -1)"
}

# compare_losses A B TOLERANCE COUNT DESCRIPTION: every loss of $WORK/B.loss within TOLERANCE
# (relative) of $WORK/A.loss's, COUNT of them; one TAP line
compare_losses() {
    paste "$WORK/$1.loss" "$WORK/$2.loss" | awk -v tol="$3" -v count="$4" 'BEGIN { worst = 0; n = 0 }
        { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > worst) worst = d }
        END { printf "# losses: worst relative difference %g over %d iterations (first %s)\n", worst, n, $1;
              exit !(n == count && worst < tol) }'
    status=$?
    [ $status -eq 0 ] || paste "$WORK/$1.loss" "$WORK/$2.loss" | sed -n '1,3p;$p' | sed 's/^/#   /'
    ok $status "$5"
}
