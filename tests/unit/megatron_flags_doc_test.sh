#!/bin/sh
# megatron_flags_doc_test.sh: app/MEGATRON_FLAGS.md, the table of Megatron-LM's flags, cannot go
# stale: it must be `pretrain_gpt --help-megatron-flags` verbatim (with the count of Megatron's
# parser flags by status above it), and every flag of Megatron-LM's example scripts
# (tests/data/megatron_example_flags.txt) must be a row of it (working, accepted with no effect,
# or refused), never "unknown flag". tests/unit/megatron_parser_flags_test covers every flag of
# Megatron's parser.
. "${top_srcdir:-.}/tests/lib.sh"
python3 "$top_srcdir/tests/tools/megatron_flag_table.py" --check "$PRETRAIN_GPT" "$top_srcdir/app/MEGATRON_FLAGS.md" > "$WORK/diff" 2>&1
status=$?
ok $status "app/MEGATRON_FLAGS.md is pretrain_gpt --help-megatron-flags"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/diff" | head -20
grep -q "option strings; here [0-9]* work, [0-9]* are accepted with no effect, [0-9]* are refused\. " "$top_srcdir/app/MEGATRON_FLAGS.md"
ok $? "it counts Megatron's parser flags by status, none missing: $(grep -o 'here [0-9]* work[^.]*' "$top_srcdir/app/MEGATRON_FLAGS.md")"
"$PRETRAIN_GPT" --help-megatron-flags > "$WORK/table.md"
missing=""
count=0
for flag in $(grep -v '^#' "$top_srcdir/tests/data/megatron_example_flags.txt"); do
    count=$((count + 1))
    grep -q "^| \`$flag[ \`]" "$WORK/table.md" || missing="$missing $flag"
done
[ -z "$missing" ] && [ "$count" -ge 80 ]
ok $? "all $count flags of Megatron-LM's example scripts have a status (missing:${missing:- none})"
done_testing
