#!/bin/sh
# tests/unit/numpy_random_test.sh: app/data/numpy_random.c against numpy itself: RandomState(seed)
# raw MT19937 outputs (across several state regenerations), the legacy bounded draws
# (32- and 64-bit masks), RandomState.shuffle, random() and randint (the BERT samples' draws),
# geometric (T5's span lengths: the inversion below p = 1/3, the search above),
# for several seeds and sizes; std::mt19937_64 (the BERT sample index) against the C++
# standard's required value.
. "${top_srcdir:-.}/tests/lib.sh"
TOOL="$top_builddir/tests/unit/numpy_random_test"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

numpy() {  # numpy MODE SEED ARGS...: the same draws from numpy
    "$PYTHON" - "$@" <<'PY'
import sys
import numpy as np
mode, seed = sys.argv[1], int(sys.argv[2])
r = np.random.RandomState(seed)
if mode == "raw":
    values = r.randint(0, 2**32, size=int(sys.argv[3]), dtype=np.uint64)
elif mode == "random":
    values = ["%.17g" % r.random() for _ in range(int(sys.argv[3]))]
elif mode == "randint":
    values = [r.randint(int(sys.argv[3]), int(sys.argv[4])) for _ in range(int(sys.argv[5]))]
elif mode == "geometric":
    values = [r.geometric(float(sys.argv[3])) for _ in range(int(sys.argv[4]))]
elif mode == "interval":
    values = r.randint(0, int(sys.argv[3]) + 1, size=int(sys.argv[4]), dtype=np.uint64)
else:
    values = np.arange(int(sys.argv[3]), dtype=np.int64)
    r.shuffle(values)
sys.stdout.write("".join("%s\n" % v for v in values))
PY
}
check() {  # check DESCRIPTION MODE SEED ARGS...
    what=$1; shift
    "$TOOL" "$@" > "$WORK/ours" && numpy "$@" > "$WORK/numpy" && cmp -s "$WORK/ours" "$WORK/numpy"
    ok $? "$what ($(wc -l < "$WORK/numpy") values)"
}
for seed in 0 1 1234 4294967295; do
    check "raw MT19937 outputs equal numpy's, seed $seed" raw $seed 2000
done
check "32-bit bounded draws (max 1000) equal numpy's" interval 7 1000 3000
check "32-bit bounded draws (max 2^32 - 1) equal numpy's" interval 7 4294967295 1000
check "64-bit bounded draws (max 3 x 2^33 + 5) equal numpy's" interval 5 25769803781 1000
check "64-bit bounded draws (max 2^63) equal numpy's" interval 11 9223372036854775808 500
for n in 0 1 2 10 1000 100000; do
    check "shuffle of arange($n) equals numpy's, seed 1234" shuffle 1234 $n
done
check "shuffle of arange(5000) equals numpy's, seed 0" shuffle 0 5000
check "random() doubles equal numpy's, seed 1234" random 1234 2000
check "random() doubles equal numpy's, seed 4294967295" random 4294967295 700
check "randint(1, 3) equals numpy's" randint 99 1 3 1000
check "randint(0, 30522) equals numpy's" randint 1234 0 30522 1000
check "geometric(0.2) equals numpy's (the inversion: T5's span lengths)" geometric 1234 0.2 3000
check "geometric(0.01) equals numpy's (the inversion, long tails)" geometric 5 0.01 1000
check "geometric(0.5) equals numpy's (the cdf search)" geometric 77 0.5 2000
value=$("$TOOL" mt64 5489 10000 | tail -1)
[ "$value" = 9981545732273789042 ]
ok $? "std::mt19937_64(5489): the 10000th output is the standard's 9981545732273789042 ($value)"
done_testing
