#!/bin/sh
# portability_run.sh: the whole suite (tests/run.sh) under one set of OpenBLAS kernels and on a
# given number of CPUs, for the record in tests/portability.md: prints that file's table row
# (date, commit, coretype, CPUs, passed / failed / skipped, minutes) and keeps the suite's output
# in portability-CORETYPE-Nc.out of the build tree.
#   tests/tools/portability_run.sh CORETYPE CPUS     e.g.  tests/tools/portability_run.sh Prescott 1
# CORETYPE is an OPENBLAS_CORETYPE value (Prescott, Haswell, SkylakeX, Zen, ...) or "default"
# (the kernels OpenBLAS picks for this CPU); CPUS the number of cores the suite may use (taskset
# -c 0..CPUS-1; tests/run.sh then builds and runs with that many jobs). Run one at a time.
set -u
[ $# -eq 2 ] || { echo "usage: $0 CORETYPE|default CPUS" >&2; exit 2; }
coretype=$1 cpus=$2
case $cpus in ''|*[!0-9]*|0) echo "$0: CPUS must be a positive number, not '$cpus'" >&2; exit 2;; esac
available=$(nproc --all 2>/dev/null || echo 1)
[ "$cpus" -le "$available" ] || { echo "$0: $cpus CPUs asked, this machine has $available" >&2; exit 2; }
cd "$(dirname "$0")/../.."
out="portability-$coretype-${cpus}c.out"
if [ "$coretype" = default ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE="$coretype"; fi
started=$(date +%s)
taskset -c "0-$((cpus - 1))" sh tests/run.sh > "$out" 2>&1
status=$?
minutes=$(( ($(date +%s) - started + 30) / 60 ))
counts=$(tail -1 "$out")
case $counts in *" passed, "*" failed, "*" skipped") ;; *) counts="(no count line: see $out)";; esac
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "| $(date -u +%Y-%m-%d) | $commit | $coretype | $cpus | $counts | $minutes |"
grep -E '^(FAIL|ERROR):' "$out" | sed 's/^/  /'
exit $status
