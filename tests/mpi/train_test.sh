#!/bin/sh
# train_test.sh: end-to-end training through pretrain_gpt under MPI: the tiny GPT learns the
# mock data with 4 ranks; reruns are bitwise identical; 1 and 2 data-parallel ranks give the
# same losses; a different seed gives a different run (so the comparisons can fail).
. "${top_srcdir:-.}/tests/lib.sh"

# --- the tiny GPT learns with 4 data-parallel ranks ---
run_app 4 --args-file "$TINY_ARGS" --metrics-file "$WORK/tiny.jsonl"; status=$?
ok $status "gpt-tiny trains with 4 MPI ranks (exit status $status)"
first=$(json_field "$WORK/tiny.jsonl" train lm_loss | head -1)
last=$(json_field "$WORK/tiny.jsonl" train lm_loss | tail -1)
valid=$(json_field "$WORK/tiny.jsonl" validation lm_loss | tail -1)
diag "lm loss first interval $first, last interval $last, validation $valid"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(f > 5.0 && l < 1.5) }'
ok $? "loss falls from above 5.0 to below 1.5 (from $first to $last)"
awk -v v="$valid" 'BEGIN { exit !(v > 0 && v < 1.5) }'
ok $? "validation loss at the end is below 1.5 ($valid)"
[ "$(json_field "$WORK/tiny.jsonl" train iteration | wc -l)" -eq 20 ]
ok $? "one metrics line per logged iteration (20 over 200 iterations)"
grep -q "lm loss: .* grad norm: .* number of skipped iterations: .* number of nan iterations:" "$WORK/out"
ok $? "Megatron-style iteration log line"

# --- bitwise reproducibility, with dropout on ---
SHORT="--args-file $TINY_ARGS --train-iters 30 --log-interval 1 --eval-interval 15 --hidden-dropout 0.1 --attention-dropout 0.1 --deterministic-mode"
run_app 2 $SHORT --metrics-file "$WORK/a.jsonl"; s1=$?; grep "final parameter hash" "$WORK/out" > "$WORK/a.hash"
run_app 2 $SHORT --metrics-file "$WORK/b.jsonl"; s2=$?; grep "final parameter hash" "$WORK/out" > "$WORK/b.hash"
json_field "$WORK/a.jsonl" train lm_loss > "$WORK/a.loss"; json_field "$WORK/b.jsonl" train lm_loss > "$WORK/b.loss"
json_field "$WORK/a.jsonl" train grad_norm >> "$WORK/a.loss"; json_field "$WORK/b.jsonl" train grad_norm >> "$WORK/b.loss"
json_field "$WORK/a.jsonl" validation lm_loss >> "$WORK/a.loss"; json_field "$WORK/b.jsonl" validation lm_loss >> "$WORK/b.loss"
# 30 losses, 30 grad norms, 3 validations: at 15, at 30 and after training (Megatron evaluates
# at the last iteration too, then once more after the loop)
[ $s1 -eq 0 ] && [ $s2 -eq 0 ] && [ "$(wc -l < "$WORK/a.loss")" -eq 63 ] && cmp -s "$WORK/a.loss" "$WORK/b.loss"
ok $? "two identical runs give bitwise-identical losses, grad norms and validation losses"
[ -s "$WORK/a.hash" ] && cmp -s "$WORK/a.hash" "$WORK/b.hash"
ok $? "two identical runs end with bitwise-identical parameters ($(cut -d: -f2 "$WORK/a.hash"))"

run_app 2 $SHORT --seed 4321 --metrics-file "$WORK/c.jsonl"
json_field "$WORK/c.jsonl" train lm_loss > "$WORK/c.loss"
! cmp -s "$WORK/a.loss" "$WORK/c.loss" && ! grep -q "$(cut -d: -f2 "$WORK/a.hash")" "$WORK/out"
ok $? "another --seed gives another run"

# --- data parallelism: 1 rank with 4 micro-batches == 2 ranks with 2 each == 4 ranks with 1 ---
EQ="--args-file $TINY_ARGS --train-iters 20 --log-interval 1 --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1"
run_app 1 $EQ --metrics-file "$WORK/dp1.jsonl"
run_app 2 $EQ --metrics-file "$WORK/dp2.jsonl"
run_app 4 $EQ --metrics-file "$WORK/dp4.jsonl"
for n in 1 2 4; do json_field "$WORK/dp$n.jsonl" train lm_loss > "$WORK/dp$n.loss"; done
check_close() {
    paste "$WORK/dp1.loss" "$WORK/$1.loss" | awk 'BEGIN { worst = 0; n = 0 }
        { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > worst) worst = d }
        END { printf "# worst relative difference %g over %d iterations\n", worst, n; exit !(n == 20 && worst < 1e-5) }'
}
check_close dp2; ok $? "2 data-parallel ranks match 1 rank within 1e-5 (dropout on)"
check_close dp4; ok $? "4 data-parallel ranks match 1 rank within 1e-5 (dropout on)"

done_testing
