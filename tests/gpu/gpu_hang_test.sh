#!/bin/sh
# gpu_hang_test.sh: a rank of a 2-GPU job that hangs (SIGSTOP) makes the job abort within
# --distributed-timeout-minutes + 10%, with a line naming the operation that did not complete:
# the NCCL watchdog (app/parallel/nccl_watchdog.h) or the MPI deadline (app/parallel/timeout.h),
# whichever waits first. Data-parallel (gradient all-reduce) and tensor-parallel (all-reduces
# inside the forward) jobs; the stopped rank is rank 1 in one and rank 0 in the other. A third
# job's rank stops itself just before an all-reduce (MTC_FAULT_NCCL_STOP), which leaves the NCCL
# watchdog as the only way out. Skipped with fewer than 2 GPUs.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 2
MODEL="--args-file $TINY_ARGS --device cuda --lr-warmup-iters 1 --eval-iters 0 --log-interval 1 --train-iters 100000"

ranks_of() { pgrep -f "^$PRETRAIN_GPT .*$1" ; }
lines_at_least() { [ -f "$1" ] && [ "$(grep -c "$2" "$1")" -ge "$3" ]; }
wait_for() {  # poll (20 ms) until the command succeeds, at most 120 s
    n=0
    until "$@"; do
        n=$((n + 1)); [ $n -lt 6000 ] || return 1
        sleep 0.02
    done
}

# end_or_dump LAUNCHER PATTERN SECONDS: wait for the job (its launcher's pid) at most SECONDS (longer
# than it may take); when it has not ended, each of its ranks' threads as diag lines (name, kernel wait
# channel, system call; backtraces where gdb or eu-stack is installed), then kill it. Its exit status,
# or 124 when it was killed.
end_or_dump() {
    n=0
    while kill -0 "$1" 2>/dev/null && [ $n -lt $(($3 * 10)) ]; do sleep 0.1; n=$((n + 1)); done
    if kill -0 "$1" 2>/dev/null; then
        for pid in $(ranks_of "$2"); do
            diag "still running: pid $pid (PMI_RANK $(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^PMI_RANK=//p'), state $(awk '{print $3}' "/proc/$pid/stat"))"
            for task in /proc/$pid/task/*; do
                diag "  thread $(basename "$task") $(cat "$task/comm"): wchan $(cat "$task/wchan" 2>/dev/null), syscall $(cut -d' ' -f1 "$task/syscall" 2>/dev/null)"
            done
            if command -v gdb >/dev/null; then
                timeout 60 gdb -batch -p "$pid" -ex "thread apply all bt 15" 2>&1 | grep -E '^(Thread|#)' | cut -c1-200 | sed 's/^/#   /'
            elif command -v eu-stack >/dev/null; then
                timeout 60 eu-stack -p "$pid" -n 15 2>&1 | cut -c1-200 | sed 's/^/#   /'
            fi
            kill -KILL "$pid" 2>/dev/null
        done
        kill "$1" 2>/dev/null
        wait "$1"
        return 124
    fi
    wait "$1"
}

# hang NAME VICTIM FLAGS...: SIGSTOP world rank VICTIM after 3 iterations
hang() {
    case_name=$1; victim_rank=$2; shift 2
    dir="$WORK/$(echo "$case_name" | tr -c 'a-zA-Z0-9\n' '_')"; mkdir -p "$dir"
    timeout 180 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL "$@" --distributed-timeout-minutes 0.25 \
        --metrics-file "$dir/run.jsonl" >"$dir/out" 2>"$dir/err" &
    launcher=$!
    if ! wait_for lines_at_least "$dir/run.jsonl" '"split": "train"' 3; then
        kill $launcher 2>/dev/null; wait $launcher
        ok 1 "$case_name: the job did not reach iteration 3 ($(tail -2 "$dir/err"))"
        return
    fi
    victim=""
    for pid in $(ranks_of "$dir/run.jsonl"); do
        [ "$(tr '\0' '\n' < "/proc/$pid/environ" | sed -n 's/^PMI_RANK=//p')" = "$victim_rank" ] && victim=$pid
    done
    start=$(date +%s.%N)
    kill -STOP "$victim"
    end_or_dump $launcher "$dir/run.jsonl" 45
    status=$?
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    kill -KILL "$victim" 2>/dev/null
    diag "$case_name: the job ended $seconds s after the SIGSTOP of rank $victim_rank (status $status)"
    diag "$(grep -m1 "did not complete within" "$dir/err" | cut -c1-300)"
    [ $status -eq 124 ] && tail -3 "$dir/err" | cut -c1-300 | sed 's/^/#   stderr: /'
    [ $status -ne 0 ] && [ $status -ne 124 ] && awk -v s="$seconds" 'BEGIN { exit !(s <= 16.5) }' &&
        grep -q "did not complete within --distributed-timeout-minutes 0.25" "$dir/err"
    ok $? "$case_name: rank $victim_rank stopped; the job aborts within 15 s + 10%, naming the operation"
}

hang "DP2 on 2 GPUs" 1
hang "TP2 on 2 GPUs" 0 --tensor-model-parallel-size 2

# the NCCL watchdog's own path: rank 1 of a TP2 job stops itself just before its 40th all-reduce
# (MTC_FAULT_NCCL_STOP), so rank 0's GPU waits inside that all-reduce and its host in the next
# device synchronization, where no MPI deadline can fire. The watchdog must end the job within
# the timeout + 10% of the all-reduce's enqueueing, naming it, even though aborting the
# communicators does not return there (the job does not wait for it).
dir="$WORK/watchdog"; mkdir -p "$dir"
start=$(date +%s.%N)
MTC_FAULT_NCCL_STOP=1:40 timeout 180 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --tensor-model-parallel-size 2 \
    --distributed-timeout-minutes 0.25 --metrics-file "$dir/run.jsonl" >"$dir/out" 2>"$dir/err" &
end_or_dump $! "$dir/run.jsonl" 90
status=$?
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
message=$(grep -m1 "NCCL all-reduce on group .* did not complete within --distributed-timeout-minutes 0.25" "$dir/err")
diag "watchdog: the job ended after $seconds s (status $status): $(echo "$message" | cut -c1-300)"
enqueued=$(echo "$message" | sed -n 's/.*(enqueued \([0-9.]*\) s ago.*/\1/p')
[ $status -eq 124 ] && tail -3 "$dir/err" | cut -c1-300 | sed 's/^/#   stderr: /'
[ $status -ne 0 ] && [ $status -ne 124 ] && [ -n "$enqueued" ] && awk -v s="$enqueued" 'BEGIN { exit !(s <= 16.5) }' &&
    awk -v s="$seconds" 'BEGIN { exit !(s <= 60) }'
ok $? "TP2, rank 1 stopped before an all-reduce: the NCCL watchdog ends the job ($enqueued s after the all-reduce was enqueued), naming it"
done_testing
