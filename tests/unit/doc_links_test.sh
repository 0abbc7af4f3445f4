#!/bin/sh
# doc_links_test.sh: no document points to a missing file: every relative Markdown link of every
# *.md file, and every perf/results/... path named in a document or a source file, exists
# (tests/tools/check_doc_links.py). Skips in a release tarball, which carries no perf/results.
. "${top_srcdir:-.}/tests/lib.sh"
[ -d "$top_srcdir/perf/results" ] || { echo "1..0 # SKIP no perf/results (a release tarball)"; exit 77; }
python3 "$top_srcdir/tests/tools/check_doc_links.py" "$top_srcdir" > "$WORK/missing" 2> "$WORK/count"
status=$?
ok $status "every relative link and perf/results path in the documents exists ($(cat "$WORK/count"))"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/missing" | head -40
done_testing
