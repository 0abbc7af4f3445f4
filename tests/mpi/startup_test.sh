#!/bin/sh
# startup_test.sh: the start-up figures of a 2-rank run of the tiny GPT. Each rank is started
# through a shell that sleeps 1 s and then execs pretrain_gpt (the same process), so the figures,
# which count from the process's start (Megatron's _TRAIN_START_TIME) and not from main(), are
# all at least 1 s. Megatron's lines ("time to initialize megatron (seconds)", print_datetime's
# "[...] datetime:" in order), one {"split": "startup"} metrics record with its stages in order
# and below the run's wall time, and a resumed run (--load) appending its own record.
. "${top_srcdir:-.}/tests/lib.sh"

SHORT="--args-file $TINY_ARGS --lr-decay-iters 5 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0"
# run_late NAME FLAGS...: 2 ranks, each sleeping 1 s in its own process before exec; the run's
# wall time (seconds) in $WORK/NAME.wall
run_late() {
    name=$1; shift
    t0=$(date +%s.%N)
    timeout 300 "$MPIEXEC" -n 2 sh -c 'sleep 1; exec "$0" "$@"' "$PRETRAIN_GPT" "$@" >"$WORK/$name.out" 2>&1
    s=$?
    awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }' > "$WORK/$name.wall"
    return $s
}

run_late first $SHORT --train-iters 3 --metrics-file "$WORK/run.jsonl" --save "$WORK/ckpt" --save-interval 3
ok $? "the run through a 1 s delay before exec trains (exit status)"
init=$(sed -n 's/^time to initialize megatron (seconds): \([0-9.]*\)$/\1/p' "$WORK/first.out")
awk -v x="$init" 'BEGIN { exit !(x >= 1.0 && x < 60) }'
ok $? "'time to initialize megatron (seconds): $init' counts from the process's start (>= 1 s)"
grep -o '^\[[a-z ,]*\] datetime: [0-9-]* [0-9:.]* $' "$WORK/first.out" | sed 's/\] datetime.*/]/' > "$WORK/stamps"
printf '%s\n' "[after megatron is initialized]" "[after model, optimizer, and learning rate scheduler are built]" \
    "[before the start of training step]" "[after training is done]" | cmp -s - "$WORK/stamps"
ok $? "Megatron's print_datetime lines, once each, in order ($(tr '\n' ' ' < "$WORK/stamps"))"

# check_startup JSONL RECORDS WALL: the last startup record's stages in order, from >= 1 s to
# below the run's wall time; RECORDS of them in the file
check_startup() {
    python3 - "$@" <<'PY'
import json, sys
path, count, wall = sys.argv[1], int(sys.argv[2]), float(open(sys.argv[3]).read())
records = [json.loads(l) for l in open(path) if '"startup"' in l]
assert len(records) == count, "%d startup records" % len(records)
s = records[-1]
order = [s["time_to_initialize_s"], s["time_to_training_start_s"], s["time_to_first_iteration_s"]]
assert 1.0 <= order[0] <= order[1] <= order[2] < wall, (order, wall)
assert 0 <= s["model_setup_s"] <= order[1] and 0 <= s["data_setup_s"] <= order[1], s
print("# start-up: %s (wall %.2f s)" % (s, wall))
PY
}
check_startup "$WORK/run.jsonl" 1 "$WORK/first.wall"
ok $? "one startup metrics record: initialized <= first step starts <= first step done, >= 1 s and below the wall time"
grep -q "^> start-up (seconds since the first process started): initialized [0-9.]*, data [0-9.]* and model [0-9.]* set up, training started [0-9.]*, first step done [0-9.]*$" "$WORK/first.out"
ok $? "the start-up line on stdout"

run_late resumed $SHORT --train-iters 5 --metrics-file "$WORK/run.jsonl" --load "$WORK/ckpt"
ok $? "the resumed run trains on from iteration 3 (exit status)"
check_startup "$WORK/run.jsonl" 2 "$WORK/resumed.wall"
ok $? "the resumed run appends its own startup record"
done_testing
