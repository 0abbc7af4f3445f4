#!/bin/sh
# megatron_flags_doc_test.sh: the README's table of Megatron-LM flags cannot go stale: it must
# be `pretrain_gpt --help-megatron-flags` verbatim, and every flag of Megatron-LM's example
# scripts (tests/data/megatron_example_flags.txt) must be a row of it (working, accepted with no
# effect, or refused), never "unknown flag".
. "${top_srcdir:-.}/tests/lib.sh"
python3 "$top_srcdir/tests/tools/megatron_flag_table.py" --check "$PRETRAIN_GPT" "$top_srcdir/README.md" > "$WORK/diff" 2>&1
status=$?
ok $status "the README's flag table is pretrain_gpt --help-megatron-flags"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/diff" | head -20
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
