#!/bin/sh
# tests/run.sh: the test command. Bootstraps and configures a fresh clone if needed, builds,
# runs `make check` (unit, MPI, GPU tests that skip without a GPU), and ends with one line
# "N passed, N failed, N skipped". Exits non-zero when anything failed.
# Extra arguments go to ./configure the first time (e.g. --without-cuda).
set -u
cd "$(dirname "$0")/.."
[ -x configure ] || ./autotools/bootstrap || exit 1
[ -f Makefile ] || ./configure "$@" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" || { echo "0 passed, 1 failed (build failed)"; exit 1; }
make -k -j"$jobs" check
status=$?
log=test-suite.log
if [ ! -f "$log" ]; then echo "0 passed, 1 failed (no $log)"; exit 1; fi
count() { sed -n "s/^# $1: *\([0-9]*\).*/\1/p" "$log" | head -1; }
pass=$(count PASS); skip=$(count SKIP); fail=$(count FAIL); xpass=$(count XPASS); error=$(count ERROR)
failed=$(( ${fail:-0} + ${xpass:-0} + ${error:-0} ))
# print the failures' TAP lines so a CI log shows what broke
if [ "$failed" -gt 0 ]; then grep -E '^(FAIL|ERROR|XPASS):' "$log" | head -50; fi
echo "${pass:-0} passed, $failed failed, ${skip:-0} skipped"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
