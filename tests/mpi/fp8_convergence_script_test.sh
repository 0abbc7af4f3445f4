#!/bin/sh
# fp8_convergence_script_test.sh: perf/fp8_convergence.sh (issue 43's bf16-against-fp8 validation
# curves on the bundled corpus; its real run is the 124M GPT for 2000 iterations on a GPU) runs
# end to end on the CPU backend's fp8 emulation with a tiny GPT: the corpus made, both runs
# trained with validation every 10 iterations, the curves written (CSV and, with gnuplot, a
# PNG), the verdict PASS with the final losses named; and an unknown MODEL is refused.
. "${top_srcdir:-.}/tests/lib.sh"
SCRIPT="$top_srcdir/perf/fp8_convergence.sh"
DEVICE=cpu MODEL=tiny ITERS=20 EVAL_INTERVAL=10 NP=1 BIN="$top_builddir" sh "$SCRIPT" "$WORK/out" > "$WORK/log" 2>&1
status=$?
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/log" | tail -6
ok $status "the script trains bf16 and fp8 and passes: $(grep -o '^PASS.*' "$WORK/log" | cut -c1-150)"
[ "$(sed -n 1p "$WORK/out/curves.csv")" = "iteration,bf16,fp8" ] && [ "$(wc -l < "$WORK/out/curves.csv")" -eq 3 ] &&
    grep -q -- "--fp8-format hybrid --fp8-recipe delayed" "$WORK/log"
ok $? "curves.csv holds the validation losses at iterations 10 and 20 of both runs; the fp8 run's flags are TE's recipe"
if command -v gnuplot > /dev/null 2>&1; then
    [ "$(head -c 8 "$WORK/out/curves.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
    ok $? "curves.png is a PNG"
fi
MODEL=huge sh "$SCRIPT" "$WORK/bad" > "$WORK/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "MODEL=huge: gpt2-124m or tiny" "$WORK/bad.log"
ok $? "an unknown MODEL is refused: $(cat "$WORK/bad.log")"
done_testing
