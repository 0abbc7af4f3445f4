#!/bin/sh
# tests/unit/layering_test.sh: the include-direction rule (tests/tools/check_layering.py) holds on
# the tree, and the checker fails on a planted upward include, on an include that is not
# written from the root of the tree, and on a library listed twice on the link line.
. "${top_srcdir:-.}/tests/lib.sh"
CHECK="python3 $top_srcdir/tests/tools/check_layering.py"

$CHECK "$top_srcdir" > "$WORK/tree.txt" 2>&1
ok $? "every include in app/, io/, kernels/ and perf/metrics/ points down the layers; APP_LIBS lists each library once, top down"
sed 's/^/#   /' "$WORK/tree.txt"

# a copy of the sources to plant violations in
copy_tree() {
    rm -rf "$WORK/tree" && mkdir -p "$WORK/tree"
    (cd "$top_srcdir" && tar cf - app io kernels perf/metrics --exclude='*.o' --exclude='*.a') | (cd "$WORK/tree" && tar xf -)
}

copy_tree
printf '#include "app/training/training.h"\n' >> "$WORK/tree/io/jsonl_reader.c"
$CHECK "$WORK/tree" > "$WORK/planted.txt" 2>&1
status=$?
[ "$status" -ne 0 ] && grep -q '^io/jsonl_reader.c:[0-9]*: io includes app/training/training.h' "$WORK/planted.txt"
ok $? "a planted upward include (io -> training) fails, naming file, line and layers: $(head -1 "$WORK/planted.txt")"

copy_tree
printf '#include "app/model/gpt_model.h"\n' >> "$WORK/tree/kernels/cpu/cpu_matmul.c"
$CHECK "$WORK/tree" > "$WORK/planted.txt" 2>&1
[ $? -ne 0 ] && grep -q '^kernels/cpu/cpu_matmul.c:' "$WORK/planted.txt"
ok $? "kernels may include nothing from the application: $(head -1 "$WORK/planted.txt")"

copy_tree
printf '#include "app/training/args.h"\n' >> "$WORK/tree/perf/metrics/flops.c"
$CHECK "$WORK/tree" > "$WORK/planted.txt" 2>&1
[ $? -ne 0 ] && grep -q '^perf/metrics/flops.c:[0-9]*: perf includes app/training/args.h' "$WORK/planted.txt"
ok $? "perf/metrics may include only app/core: $(head -1 "$WORK/planted.txt")"

copy_tree
printf '#include "gpt_model.h"\n' >> "$WORK/tree/app/optim/optimizer.c"
$CHECK "$WORK/tree" > "$WORK/planted.txt" 2>&1
[ $? -ne 0 ] && grep -q 'is not a path from the root of the tree' "$WORK/planted.txt"
ok $? "an include not written from the root of the tree fails: $(head -1 "$WORK/planted.txt")"

copy_tree
sed -i 's#^APP_LIBS = #APP_LIBS = io/libio.a #' "$WORK/tree/app/local.mk"
$CHECK "$WORK/tree" > "$WORK/planted.txt" 2>&1
[ $? -ne 0 ] && grep -q 'io/libio.a is listed 2 times' "$WORK/planted.txt"
ok $? "a library listed twice on the link line fails: $(head -1 "$WORK/planted.txt")"

done_testing
