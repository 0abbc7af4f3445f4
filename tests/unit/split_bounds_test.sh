#!/bin/sh
# tests/unit/split_bounds_test.sh: --split document boundaries equal Megatron-Core's
# (parse_and_normalize_split, convert_split_vector_to_split_matrix, int(round(bookend * n)), as
# the reference tests/tools/megatron_gpt_samples.py computes them in Python) for every document
# count from 1 to 2000, for several --split strings.
. "${top_srcdir:-.}/tests/lib.sh"
TOOL="$top_builddir/tests/unit/split_bounds_test"
REFERENCE="$top_srcdir/tests/tools/megatron_gpt_samples.py"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi
for split in "969,30,1" "949,50,1" "90,5,5" "98,2,0" "969, 30, 1" "1,1,1" "0.7,0.2,0.1" "100,0,0"; do
    "$TOOL" "$split" 2000 > "$WORK/ours" && "$PYTHON" "$REFERENCE" --split-bounds "$split" 2000 > "$WORK/reference"
    cmp -s "$WORK/ours" "$WORK/reference"
    ok $? "--split $split: boundaries equal Megatron's for 1..2000 documents"
    cmp -s "$WORK/ours" "$WORK/reference" || diff "$WORK/ours" "$WORK/reference" | head -3 | sed 's/^/# /'
done
# the example: 310 documents with 969,30,1 train on [0, 300); 98,2,0 over 25 documents
# has a one-document validation split
"$TOOL" "969,30,1" 310 | tail -1 | grep -q "^310: 0-300 300-310 310-310$"
ok $? "310 documents, 969,30,1: train [0,300), valid [300,310), an empty test range"
"$TOOL" "98,2,0" 25 | tail -1 | grep -q '^25: 0-24 24-25 None$'
ok $? "25 documents, 98,2,0: a one-document validation split, no test dataset"
done_testing
