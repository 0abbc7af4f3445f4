#!/bin/sh
# slowest_tests.sh: the shell tests of the last `make check` ranked by wall time (the
# "# elapsed: N s" line tests/lib.sh's done_testing writes into each test's .log), slowest first,
# with the total: where to look when the suite outgrows its CI budget.
#   tests/tools/slowest_tests.sh [N]      (run from the build tree)
n=${1:-15}
find tests -name '*.log' ! -name test-suite.log -exec grep -H '^# elapsed: ' {} + |
    sed 's/\.log:# elapsed: / /; s/ s$//' | sort -k2,2 -n -r |
    awk -v n="$n" '{ total += $2; if (NR <= n) printf "%6d s  %s\n", $2, $1 } END { printf "%6d s  total of %d shell tests\n", total, NR }'
