#!/bin/sh
# fault_injection_test.sh: the job survives what kills jobs on clusters (issue 21), on a tiny
# model with 2 ranks (TP2 and DP2). Each case states what it expects; the suite ends with the
# table of tests/tools/fault_table.sh (case, trials, survived).
#  - SIGKILL of one rank (chosen at random) at a random iteration of training, and in the middle
#    of a save (MTC_FAULT_PAUSE_IN_SAVE): the job ends non-zero, the tracker never loses a save
#    that was reported, and a restart with the same flags loads the newest complete checkpoint
#    and logs the losses of an unbroken run, bit for bit (--deterministic-mode).
#  - SIGTERM to one rank with --exit-signal-handler: every rank saves the same iteration and the
#    job exits 0; the restart goes on with the unbroken run's losses.
#  - A hanging rank (SIGSTOP): the job aborts within --distributed-timeout-minutes + 10%, naming
#    the operation and the stopped rank; also where the rank stops at a log line's collectives.
#  - A stopped launcher (SIGSTOP of the Hydra proxy that relays the ranks' output): the rank
#    that logs blocks on its full stdout pipe, the other rank's deadline fires and its MPI_Abort
#    waits on the stopped proxy; the bounded abort (app/core/error.h) ends that rank within the
#    timeout + a few seconds of the block, and once the proxy runs again the job ends with the
#    message.
#  - A full disk during a save (a small tmpfs; needs root to mount): the message names ENOSPC
#    and the file, the previous checkpoint stays the newest and loads.
#  - A read-only checkpoint folder: refused before training with a message naming it.
#  - Truncated checkpoint, corpus (.bin) and index (.idx) files, and bit flips in a checkpoint's
#    HDF5 metadata and in an index: refused with a message naming the file (an exit status of 1
#    or 2, not a crash), never a hang. A byte flipped at random in a random tensor's data is
#    refused by its checksum, naming the tensor; a flipped token by the corpus's checksum (HDF5)
#    or, in a .bin, by the vocabulary check (issue 22).
#  - A truncated or corrupt .jsonl.gz given to preprocess_data: an error naming the file and
#    zlib's cause ("unexpected end of file", "incorrect data check", ...), nothing written.
# FAULT_SEED=N repeats a run's random choices (the seed is printed).
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/tools/fault_table.sh"

SEED=${FAULT_SEED:-$(date +%s)}
diag "random seed $SEED (FAULT_SEED=$SEED repeats these kill points)"
random_state=$SEED
random() {  # random N: sets R to a pseudo-random integer in [0, N)
    random_state=$(( (random_state * 1103515245 + 12345) % 2147483648 ))
    R=$(( random_state / 65536 % $1 ))
}

ITERS=6
MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --vocab-size 128
       --make-vocab-size-divisible-by 64 --micro-batch-size 2 --global-batch-size 8 --lr 1e-3
       --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --mock-data --deterministic-mode
       --hidden-dropout 0.1 --attention-dropout 0.1 --train-iters $ITERS"
TP2="--tensor-model-parallel-size 2"
DP2="--use-distributed-optimizer"

# "ITERATION LOSS" per logged training iteration of a metrics file
iteration_losses() {
    [ -f "$1" ] || return 0
    grep '"split": "train"' "$1" | sed -e 's/.*"iteration": \([0-9]*\).*"lm_loss": \([^,}]*\).*/\1 \2/'
}
# the ranks of the job whose flags mention DIR (not the launcher)
ranks_of() { pgrep -f "^$PRETRAIN_GPT .*$1" ; }
# wait_for COMMAND...: poll (20 ms) until the command succeeds, at most 60 s
wait_for() {
    n=0
    until "$@"; do
        n=$((n + 1)); [ $n -lt 3000 ] || return 1
        sleep 0.02
    done
}
lines_at_least() { [ -f "$1" ] && [ "$(grep -c "$2" "$1")" -ge "$3" ]; }
tracker_of() { cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0; }
last_saved() {  # the last iteration a run reported as saved (0: none)
    grep -o "saved checkpoint at iteration [0-9]*" "$1" 2>/dev/null | tail -1 | grep -o "[0-9]*$" || echo 0
}

# ---- reference: unbroken runs ----
for layout in TP2 DP2; do
    eval flags=\$$layout
    run_app 2 $MODEL $flags --metrics-file "$WORK/reference_$layout.jsonl"
    status=$?
    iteration_losses "$WORK/reference_$layout.jsonl" > "$WORK/reference_$layout.loss"
    [ $status -eq 0 ] && [ "$(wc -l < "$WORK/reference_$layout.loss")" -eq $ITERS ]
    ok $? "reference: an unbroken $layout run logs $ITERS losses"
done

# check_losses LAYOUT FILES...: every logged loss equals the unbroken run's, bit for bit
check_losses() {
    layout=$1; shift
    for f in "$@"; do iteration_losses "$f"; done | sort -u | while read -r iteration loss; do
        grep -qx "$iteration $loss" "$WORK/reference_$layout.loss" || { echo "iteration $iteration: loss $loss"; break; }
    done
}

# restart_and_check CASE LAYOUT DIR TRACKER_BEFORE FIRST_METRICS: restart with the same flags;
# it must load the tracker's checkpoint and finish with the unbroken run's losses
restart_and_check() {
    case_name=$1; layout=$2; dir=$3; expected=$4; first=$5
    eval flags=\$$layout
    run_app 2 $MODEL $flags --save "$dir/ckpt" --load "$dir/ckpt" --save-interval 2 --metrics-file "$dir/restart.jsonl"
    status=$?
    if [ $status -ne 0 ]; then fault_trial "$case_name" 1 "the restart failed ($status): $(tail -1 "$WORK/err")"; return; fi
    if [ "$expected" -gt 0 ]; then
        grep -q "loaded checkpoint .*iter_$(printf %07d "$expected").h5: iteration $expected," "$WORK/out"
    else
        grep -q "could not find the metadata file" "$WORK/out"
    fi || { fault_trial "$case_name" 1 "the restart did not load iteration $expected: $(grep 'loaded checkpoint' "$WORK/out")"; return; }
    restarted=$(iteration_losses "$dir/restart.jsonl" | wc -l)
    if [ "$restarted" -ne $((ITERS - expected)) ]; then
        fault_trial "$case_name" 1 "the restart logged $restarted iterations, not $((ITERS - expected))"; return
    fi
    wrong=$(check_losses "$layout" "$first" "$dir/restart.jsonl")
    if [ -n "$wrong" ]; then fault_trial "$case_name" 1 "a loss differs from the unbroken run's: $wrong"; return; fi
    fault_trial "$case_name" 0
}

# kill_trial CASE LAYOUT MODE: MODE train (SIGKILL after a random iteration) or save (SIGKILL in
# the middle of a random save)
trial=0
kill_trial() {
    case_name=$1; layout=$2; mode=$3
    trial=$((trial + 1)); dir="$WORK/trial$trial"; mkdir -p "$dir"
    eval flags=\$$layout
    if [ "$mode" = save ]; then export MTC_FAULT_PAUSE_IN_SAVE=1; else export MTC_FAULT_ITERATION_PAUSE_MS=60; fi
    timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $flags --save "$dir/ckpt" --load "$dir/ckpt" --save-interval 2 \
        --metrics-file "$dir/first.jsonl" >"$dir/first.out" 2>"$dir/first.err" &
    launcher=$!
    unset MTC_FAULT_PAUSE_IN_SAVE MTC_FAULT_ITERATION_PAUSE_MS
    if [ "$mode" = save ]; then
        random $((ITERS / 2)); k=$((R + 1))
        wait_for lines_at_least "$dir/first.err" "pausing" $k
        random 500; sleep "0.$(printf %03d $R)"
        where="in save $k of $((ITERS / 2))"
    else
        random $((ITERS - 2)); k=$((R + 1))
        wait_for lines_at_least "$dir/first.jsonl" '"split": "train"' $k
        random 40; sleep "0.$(printf %03d $R)"
        where="after iteration $k"
    fi
    set -- $(ranks_of "$dir/ckpt")
    random 2; [ $R -eq 1 ] && [ $# -eq 2 ] && shift
    victim=$1
    [ -n "$victim" ] && kill -KILL "$victim"
    wait $launcher
    status=$?
    if [ -z "$victim" ] || [ $status -eq 0 ]; then
        # the run finished before the kill (its last iterations take milliseconds): that tests
        # nothing, so the trial is run again, up to 4 times
        kill_attempt=$(( ${kill_attempt:-1} + 1 ))
        if [ $kill_attempt -le 4 ]; then
            diag "$layout: the job ended before the kill $where (attempt $((kill_attempt - 1))): again"
            kill_trial "$case_name" "$layout" "$mode"; return
        fi
        kill_attempt=1
        fault_trial "$case_name" 1 "$layout: no rank was killed $where (the job ended $status first)"; return
    fi
    kill_attempt=1
    if [ $status -eq 124 ]; then fault_trial "$case_name" 1 "$layout: the job hung after the kill"; return; fi
    saved=$(last_saved "$dir/first.out")
    tracker=$(tracker_of "$dir/ckpt")
    if [ "$tracker" -lt "$saved" ]; then
        fault_trial "$case_name" 1 "$layout: the run reported saving iteration $saved, the tracker names $tracker"; return
    fi
    restart_and_check "$case_name" "$layout" "$dir" "$tracker" "$dir/first.jsonl"
}

CASE_TRAIN="SIGKILL of a rank during training"
CASE_SAVE="SIGKILL of a rank in the middle of a save"
for i in 1 2 3 4 5; do
    kill_trial "$CASE_TRAIN" TP2 train
    kill_trial "$CASE_TRAIN" DP2 train
    kill_trial "$CASE_SAVE" TP2 save
    kill_trial "$CASE_SAVE" DP2 save
done
fault_case_ok "$CASE_TRAIN" "the restart loads the newest complete checkpoint and logs the unbroken run's losses"
fault_case_ok "$CASE_SAVE" "the previous checkpoint stays the newest; the restart goes on bitwise"

# ---- SIGTERM with --exit-signal-handler ----
CASE_TERM="SIGTERM to one rank with --exit-signal-handler"
for layout in TP2 DP2; do
  # a signal that lands after the last iteration's check finds the run done (exit 0, every
  # iteration saved, no exit line): that tests nothing, so the trial is run again (up to 4 times)
  for attempt in 1 2 3 4; do
    trial=$((trial + 1)); dir="$WORK/trial$trial"; mkdir -p "$dir"
    eval flags=\$$layout
    timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $flags --save "$dir/ckpt" --load "$dir/ckpt" --save-interval 2 \
        --exit-signal-handler --metrics-file "$dir/first.jsonl" >"$dir/first.out" 2>"$dir/first.err" &
    launcher=$!
    random $((ITERS - 3)); wait_for lines_at_least "$dir/first.jsonl" '"split": "train"' $((R + 1))
    set -- $(ranks_of "$dir/ckpt"); random 2; [ $R -eq 1 ] && [ $# -eq 2 ] && shift
    kill -TERM "$1"
    wait $launcher
    status=$?
    at=$(grep -o "exiting program after receiving signal 15 at iteration [0-9]*" "$dir/first.out" | grep -o "[0-9]*$")
    if [ $status -eq 0 ] && [ -z "$at" ] && [ "$(tracker_of "$dir/ckpt")" = $ITERS ] && [ $attempt -lt 4 ]; then
        diag "$layout: the signal came after the last iteration (attempt $attempt): again"
        continue
    fi
    break
  done
    if [ $status -ne 0 ] || [ -z "$at" ] || [ "$(tracker_of "$dir/ckpt")" != "$at" ]; then
        fault_trial "$CASE_TERM" 1 "$layout: status $status, exit line '$at', tracker $(tracker_of "$dir/ckpt")"
        continue
    fi
    restart_and_check "$CASE_TERM" "$layout" "$dir" "$at" "$dir/first.jsonl"
done
fault_case_ok "$CASE_TERM" "every rank saves the same iteration, exit 0, the restart goes on bitwise"

# ---- a hanging rank ----
CASE_HANG="SIGSTOP of a rank (--distributed-timeout-minutes 0.25)"
dir="$WORK/hang"; mkdir -p "$dir"
timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --train-iters 100000 \
    --distributed-timeout-minutes 0.25 --metrics-file "$dir/run.jsonl" --seed 77 >"$dir/out" 2>"$dir/err" &
launcher=$!
wait_for lines_at_least "$dir/run.jsonl" '"split": "train"' 3
set -- $(ranks_of "$dir/run.jsonl"); random 2; [ $R -eq 1 ] && [ $# -eq 2 ] && shift
victim=$1
victim_rank=$(tr '\0' '\n' < "/proc/$victim/environ" | sed -n 's/^PMI_RANK=//p')
start=$(date +%s.%N)
kill -STOP "$victim"
wait $launcher
status=$?
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
kill -KILL "$victim" 2>/dev/null
diag "the job ended $seconds s after the SIGSTOP of rank $victim_rank (status $status)"
grep "did not complete within" "$dir/err" | head -1 | sed 's/^/# /'
if [ $status -ne 0 ] && [ $status -ne 124 ] && awk -v s="$seconds" 'BEGIN { exit !(s <= 16.5) }' &&
    grep -q "did not complete within --distributed-timeout-minutes 0.25 .*ranks that did not arrive: $victim_rank (no answer" "$dir/err"; then
    fault_trial "$CASE_HANG" 0
else
    fault_trial "$CASE_HANG" 1 "status $status after $seconds s: $(grep -m1 FATAL "$dir/err")"
fi
fault_case_ok "$CASE_HANG" "the job aborts within the timeout + 10%, naming the operation and the stopped rank"

# a rank stopped where the log line's collectives begin (MTC_FAULT_STOP_AT_LOG): the other rank
# waits in the peak-memory all-reduce, which must be under the timeout too (it was a plain
# MPI_Allreduce, and a job whose rank stopped there hung on two GPUs)
CASE_LOG="SIGSTOP at a log line's collectives"
dir="$WORK/hang_log"; mkdir -p "$dir"
start=$(date +%s.%N)
MTC_FAULT_STOP_AT_LOG=1:3 timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --train-iters 100000 \
    --distributed-timeout-minutes 0.25 --metrics-file "$dir/run.jsonl" --seed 77 >"$dir/out" 2>"$dir/err"
status=$?
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
pkill -KILL -f "^$PRETRAIN_GPT .*$dir/run.jsonl" 2>/dev/null
grep "did not complete within" "$dir/err" | head -1 | cut -c1-300 | sed 's/^/# /'
if [ $status -ne 0 ] && [ $status -ne 124 ] && grep -q \
    "all-reduce (peak memory) on group world .*did not complete within --distributed-timeout-minutes 0.25 .*ranks that did not arrive: 1 (no answer" "$dir/err"; then
    fault_trial "$CASE_LOG" 0
else
    fault_trial "$CASE_LOG" 1 "status $status after $seconds s: $(grep -m1 FATAL "$dir/err")"
fi
fault_case_ok "$CASE_LOG" "the job aborts after the timeout, naming the log line's all-reduce and the stopped rank"

# ---- a stopped launcher: the proxy that relays the ranks' output stops (SIGSTOP) ----
CASE_PROXY="SIGSTOP of the launcher's proxy (--distributed-timeout-minutes 0.1)"
# the timing of a stopped proxy depends on how the machine schedules the launcher and the ranks
# (CI failed it twice in a row once, on a machine where it always passes here under any load;
# the cause was not recorded): a failed attempt is reported with its measurements and tried
# again; the case fails when three attempts fail, its TAP line naming the first failure's cause
for attempt in 1 2 3; do
dir="$WORK/proxy$attempt"; mkdir -p "$dir"
timeout 400 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --train-iters 100000000 \
    --distributed-timeout-minutes 0.1 --metrics-file "$dir/run.jsonl" --seed 77 >"$dir/out" 2>"$dir/err" &
launcher=$!
wait_for lines_at_least "$dir/run.jsonl" '"split": "train"' 3
rank_pids=$(ranks_of "$dir/run.jsonl")
proxy=$(ps -o ppid= -p "$(echo $rank_pids | cut -d' ' -f1)" | tr -d ' ')
# ended PID...: one of the ranks has ended (a zombie of the stopped proxy, or gone)
ended() { for p in "$@"; do case $(ps -o stat= -p "$p") in Z*|"") return 0;; esac; done; return 1; }
# blocked PID...: one of the ranks waits to write into a full pipe
blocked() { for p in "$@"; do case $(ps -o wchan= -p "$p") in *pipe_write*) return 0;; esac; done; return 1; }
if [ "$(ps -o comm= -p "$proxy")" != hydra_pmi_proxy ]; then
    kill -KILL $rank_pids 2>/dev/null; wait $launcher
    fault_skip_case "$CASE_PROXY" "the ranks' parent is $(ps -o comm= -p "$proxy"), not Hydra's proxy"
    proxy_skipped=1
    break
else
    start=$(date +%s.%N)
    kill -STOP "$proxy"
    # the logging rank blocks once its stdout pipe is full (how soon depends on the machine's
    # speed: up to 240 s allowed); from then on the other rank's deadline fires after 6 s and
    # its abort is bounded by 6 s more: it must have ended 40 s after the block (12 s here,
    # loaded or not)
    n=0
    until blocked $rank_pids || ended $rank_pids || [ $n -ge 2400 ]; do sleep 0.1; n=$((n + 1)); done
    blocked_at=$(date +%s.%N)
    n=0
    until ended $rank_pids || [ $n -ge 400 ]; do sleep 0.1; n=$((n + 1)); done
    fill=$(awk -v a="$start" -v b="$blocked_at" 'BEGIN { printf "%.2f", b - a }')
    seconds=$(awk -v a="$blocked_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    ended $rank_pids; rank_ended=$?
    states=$(for p in $rank_pids; do printf '%s ' "$(ps -o stat=,wchan= -p "$p" | tr -s ' ')"; done)
    kill -CONT "$proxy"
    resumed=$(date +%s.%N)
    # a job that does not end after the resume (its ranks train on) is stopped after 70 s
    ( sleep 70; kill -TERM $launcher 2>/dev/null ) & stopper=$!
    wait $launcher
    status=$?
    kill $stopper 2>/dev/null; wait $stopper 2>/dev/null
    after=$(awk -v a="$resumed" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    kill -KILL $rank_pids 2>/dev/null
    diag "a rank blocked on its full pipe $fill s after the proxy stopped; another ended by itself $seconds s later (ranks: $states); the job ended $after s after the proxy resumed (status $status)"
    grep "did not complete within" "$dir/err" | head -1 | cut -c1-200 | sed 's/^/# /'
    if [ $rank_ended -eq 0 ] && awk -v s="$seconds" 'BEGIN { exit !(s <= 40) }' && [ $status -ne 0 ] && [ $status -ne 124 ] && awk -v s="$after" 'BEGIN { exit !(s <= 60) }' &&
        grep -q "did not complete within --distributed-timeout-minutes 0.1 .*ranks that did not arrive" "$dir/err"; then
        fault_trial "$CASE_PROXY" 0
        break
    fi
    why="rank ended: $([ $rank_ended -eq 0 ] && echo yes || echo no) ($states) $seconds s after the block ($fill s after the stop), status $status $after s after the resume; the message: $(grep -c 'did not complete within' "$dir/err") lines; stderr: $(grep -m1 -i 'error\|fatal\|abort' "$dir/err" | cut -c1-160)"
    if [ $attempt -eq 3 ]; then fault_trial "$CASE_PROXY" 1 "$why"; else diag "attempt $attempt failed ($why): once more"; fi
fi
done
[ -n "${proxy_skipped:-}" ] || fault_case_ok "$CASE_PROXY" "the aborting rank exits by itself while the proxy is stopped; resumed, the job ends with the message"

# ---- a full disk during a save ----
CASE_FULL="full disk (tmpfs) during a save"
dir="$WORK/full"; mkdir -p "$dir/ckpt"
size=$(( $(stat -c %s "$WORK/trial1/ckpt/iter_0000002.h5") * 3 / 2 / 1024 + 4 ))
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=${size}k tmpfs "$dir/ckpt" 2>/dev/null; then
    run_app 2 $MODEL $TP2 --save "$dir/ckpt" --save-interval 2 --metrics-file "$dir/first.jsonl"
    status=$?
    grep FATAL "$WORK/err" | head -1 | cut -c1-240 | sed 's/^/# /'
    if [ $status -ne 0 ] && grep -q "iter_0000004.h5.partial: .*No space left on device" "$WORK/err" &&
        [ "$(tracker_of "$dir/ckpt")" = 2 ]; then
        cp -r "$dir/ckpt" "$dir/copy"
        # a rank of the aborted job may still hold a file there for a moment (seen under load:
        # "target is busy", and the copy then went inside the old folder)
        wait_for umount "$dir/ckpt" 2>/dev/null || umount "$dir/ckpt"
        rm -rf "$dir/ckpt" && mv "$dir/copy" "$dir/ckpt"
        restart_and_check "$CASE_FULL" TP2 "$dir" 2 "$dir/first.jsonl"
    else
        fault_trial "$CASE_FULL" 1 "status $status, tracker $(tracker_of "$dir/ckpt"): $(grep -m1 FATAL "$WORK/err")"
        wait_for umount "$dir/ckpt" 2>/dev/null || umount "$dir/ckpt"
    fi
    fault_case_ok "$CASE_FULL" "the message names ENOSPC and the file; the previous checkpoint loads"
else
    fault_skip_case "$CASE_FULL" "mounting a tmpfs needs root (uid $(id -u))"
fi

# ---- a read-only checkpoint folder ----
CASE_RO="read-only checkpoint folder"
dir="$WORK/readonly"; mkdir -p "$dir/ckpt"
cp "$WORK/trial1/ckpt/iter_0000002.h5" "$dir/ckpt/" && echo 2 > "$dir/ckpt/latest_checkpointed_iteration.txt"
if [ "$(id -u)" = 0 ]; then
    mount --bind "$dir/ckpt" "$dir/ckpt" && mount -o remount,bind,ro "$dir/ckpt"
else
    chmod a-w "$dir/ckpt"
fi
run_app 2 $MODEL $TP2 --save "$dir/ckpt" --load "$dir/ckpt" --save-interval 2
status=$?
if [ $status -eq 2 ] && grep -q "\-\-save $dir/ckpt: cannot write in $dir/ckpt: \(Read-only file system\|Permission denied\)" "$WORK/err" &&
    ! grep -q "iteration  *1/" "$WORK/out"; then
    fault_trial "$CASE_RO" 0
else
    fault_trial "$CASE_RO" 1 "status $status: $(head -c 300 "$WORK/err")"
fi
if [ "$(id -u)" = 0 ]; then wait_for umount "$dir/ckpt" 2>/dev/null || umount "$dir/ckpt"; else chmod u+w "$dir/ckpt"; fi
fault_case_ok "$CASE_RO" "refused before training, naming the folder"

# ---- damaged files: refused with a message naming them (exit 1 or 2: no crash, no hang) ----
# damaged CASE FILE: run the command in $run (a string) and check the refusal
refused() {
    case_name=$1; file=$2; shift 2
    timeout 120 "$@" >"$WORK/out" 2>"$WORK/err"
    status=$?
    if { [ $status -eq 1 ] || [ $status -eq 2 ]; } && grep -q "$(basename "$file")" "$WORK/err"; then
        fault_trial "$case_name" 0
        grep -m1 "error\|FATAL" "$WORK/err" | cut -c1-200 | sed 's/^/#   /'
    else
        fault_trial "$case_name" 1 "status $status: $(grep -m1 . "$WORK/err" | cut -c1-200)"
    fi
}
flip_byte() {  # flip_byte FILE OFFSET: invert every bit of one byte
    byte=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((255 - byte)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

CASE_CKPT_TRUNC="truncated checkpoint file"
dir="$WORK/damaged"; mkdir -p "$dir"
for cut in 2 3; do
    rm -rf "$dir/ckpt"; cp -r "$WORK/trial1/ckpt" "$dir/ckpt"
    newest="$dir/ckpt/iter_$(printf %07d "$(tracker_of "$dir/ckpt")").h5"
    truncate -s $(( $(stat -c %s "$newest") * (cut - 1) / cut )) "$newest"
    refused "$CASE_CKPT_TRUNC" "$newest" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --load "$dir/ckpt"
done
fault_case_ok "$CASE_CKPT_TRUNC" "refused, naming the file"
CASE_CKPT_FLIP="bit-flipped checkpoint file (HDF5 superblock and metadata)"
for offset in 0 9; do
    rm -rf "$dir/ckpt"; cp -r "$WORK/trial1/ckpt" "$dir/ckpt"
    newest="$dir/ckpt/iter_$(printf %07d "$(tracker_of "$dir/ckpt")").h5"
    flip_byte "$newest" $offset
    refused "$CASE_CKPT_FLIP" "$newest" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --load "$dir/ckpt"
done
fault_case_ok "$CASE_CKPT_FLIP" "refused, naming the file"
# a byte of one tensor's data, chosen at random (a model weight or an Adam moment), inverted where
# HDF5 stores it: the per-tensor XXH3 checksums refuse the load, naming the file and the tensor
CASE_TENSOR_FLIP="bit-flipped checkpoint tensor data (random tensor, byte)"
h5ls -r "$WORK/trial1/ckpt/iter_$(printf %07d "$(tracker_of "$WORK/trial1/ckpt")").h5" |
    awk '$2 == "Dataset" && $1 ~ /^\/(model|optimizer)\// { print $1 }' > "$WORK/tensors"
tensors=$(wc -l < "$WORK/tensors")
for trial in 1 2 3; do
    rm -rf "$dir/ckpt"; cp -r "$WORK/trial1/ckpt" "$dir/ckpt"
    newest="$dir/ckpt/iter_$(printf %07d "$(tracker_of "$dir/ckpt")").h5"
    random "$tensors"; tensor=$(sed -n "$((R + 1))p" "$WORK/tensors")
    layout=$(h5dump -p -H -d "$tensor" "$newest")
    size=$(echo "$layout" | awk '$1 == "SIZE" { print $2; exit }')
    offset=$(echo "$layout" | awk '$1 == "OFFSET" { print $2; exit }')
    if [ -z "$size" ] || [ -z "$offset" ]; then fault_trial "$CASE_TENSOR_FLIP" 1 "no contiguous storage for $tensor"; continue; fi
    random "$size"
    diag "trial $trial: byte $R of $tensor ($size bytes at file offset $offset)"
    flip_byte "$newest" $((offset + R))
    refused "$CASE_TENSOR_FLIP" "$newest" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL $TP2 --load "$dir/ckpt"
    grep -q "tensor $tensor: .*do not match their checksum" "$WORK/err" ||
        fault_trial "$CASE_TENSOR_FLIP" 1 "the message does not name $tensor: $(head -1 "$WORK/err" | cut -c1-200)"
done
fault_case_ok "$CASE_TENSOR_FLIP" "refused, naming the file and the tensor"

# corpus and index: a small WordPiece corpus in Megatron's .bin/.idx
CORPUS_ARGS="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 2
             --global-batch-size 4 --train-iters 2 --lr 1e-3 --log-interval 1 --eval-iters 0 --split 100,0,0
             --tokenizer-type BertWordPieceLowerCase --vocab-file $top_srcdir/tests/data/wordpiece-vocab.txt"
awk 'BEGIN { RS = ""; n = 0 } n < 300 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/corpus.jsonl"
"$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type BertWordPieceLowerCase --vocab-file "$top_srcdir/tests/data/wordpiece-vocab.txt" --append-eod \
    > "$WORK/pre.out" 2>&1 &&
    "$top_builddir/app/convert_corpus" --input "$WORK/corpus_text_document.h5" --output-prefix "$WORK/mmap" --to mmap \
    >> "$WORK/pre.out" 2>&1 &&
    run_app 2 $CORPUS_ARGS --data-path "$WORK/mmap"
ok $? "corpus: the intact .bin/.idx corpus trains"
# damaged_corpus CASE EXT HOW: damage a copy of the corpus's EXT file and train on it
damaged_corpus() {
    rm -rf "$WORK/dc"; mkdir -p "$WORK/dc"; cp "$WORK/mmap.bin" "$WORK/mmap.idx" "$WORK/dc/"
    f="$WORK/dc/mmap.$2"
    case $3 in
    truncate) truncate -s $(( $(stat -c %s "$f") / 2 )) "$f" ;;
    header) flip_byte "$f" 3 ;;
    sizes) flip_byte "$f" 40 ;;
    esac
    refused "$1" "$f" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $CORPUS_ARGS --data-path "$WORK/dc/mmap"
}
CASE_CORPUS_TRUNC="truncated corpus (.bin) and index (.idx) files"
damaged_corpus "$CASE_CORPUS_TRUNC" bin truncate
damaged_corpus "$CASE_CORPUS_TRUNC" idx truncate
fault_case_ok "$CASE_CORPUS_TRUNC" "refused, naming the file"
CASE_CORPUS_FLIP="bit-flipped index (.idx header, sizes)"
damaged_corpus "$CASE_CORPUS_FLIP" idx header
damaged_corpus "$CASE_CORPUS_FLIP" idx sizes
fault_case_ok "$CASE_CORPUS_FLIP" "refused, naming the file"
# a flipped token: in the HDF5 corpus any byte of /tokens (chosen at random) fails the dataset's
# XXH3 checksum; in a .bin, whose format has no checksum, a flipped high byte makes an id outside
# the vocabulary, which the scan at the door refuses (a flip that stays inside the vocabulary
# cannot be told from data, in Megatron's format as here)
CASE_TOKEN_FLIP="bit-flipped corpus tokens (.h5 any byte, .bin high byte)"
for trial in 1 2; do
    rm -rf "$WORK/dc"; mkdir -p "$WORK/dc"; cp "$WORK/corpus_text_document.h5" "$WORK/dc/"
    f="$WORK/dc/corpus_text_document.h5"
    layout=$(h5dump -p -H -d /tokens "$f")
    size=$(echo "$layout" | awk '$1 == "SIZE" { print $2; exit }')
    offset=$(echo "$layout" | awk '$1 == "OFFSET" { print $2; exit }')
    random "${size:-1}"
    diag "trial $trial: byte $R of /tokens ($size bytes at file offset $offset)"
    flip_byte "$f" $((offset + R))
    refused "$CASE_TOKEN_FLIP" "$f" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $CORPUS_ARGS --data-path "$WORK/dc/corpus_text_document"
done
rm -rf "$WORK/dc"; mkdir -p "$WORK/dc"; cp "$WORK/mmap.bin" "$WORK/mmap.idx" "$WORK/dc/"
random $(( $(stat -c %s "$WORK/dc/mmap.bin") / 2 ))
diag ".bin: the high byte of token $R"
flip_byte "$WORK/dc/mmap.bin" $((2 * R + 1))
refused "$CASE_TOKEN_FLIP" "$WORK/dc/mmap.bin" "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $CORPUS_ARGS --data-path "$WORK/dc/mmap"
fault_case_ok "$CASE_TOKEN_FLIP" "refused, naming the file"

# ---- a truncated or corrupt compressed input to preprocess_data ----
CASE_GZ="truncated or corrupt .jsonl.gz (preprocess_data)"
gzip -c "$WORK/corpus.jsonl" > "$WORK/corpus.jsonl.gz"
gz_size=$(stat -c %s "$WORK/corpus.jsonl.gz")
for how in truncated corrupt truncated corrupt; do
    rm -rf "$WORK/gz"; mkdir -p "$WORK/gz"
    f="$WORK/gz/$how.jsonl.gz"
    cp "$WORK/corpus.jsonl.gz" "$f"
    random $((gz_size / 2))
    cut=$((gz_size / 4 + R))  # inside the deflate data: past the header, before the trailer
    if [ $how = truncated ]; then truncate -s $cut "$f"; cause="unexpected end of file"
    else flip_byte "$f" $cut; cause="corrupt gzip stream"; fi
    timeout 120 "$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$f" --output-prefix "$WORK/gz/out" \
        --tokenizer-type BertWordPieceLowerCase --vocab-file "$top_srcdir/tests/data/wordpiece-vocab.txt" \
        >"$WORK/out" 2>"$WORK/err"
    status=$?
    left=$(ls "$WORK/gz" | grep -v "^$how.jsonl.gz$" | tr '\n' ' ')
    grep -m1 "error" "$WORK/err" | cut -c1-200 | sed 's/^/#   /'
    if { [ $status -eq 1 ] || [ $status -eq 2 ]; } && [ "$(grep -c "error" "$WORK/err")" -eq 1 ] &&
        grep "error" "$WORK/err" | grep -q "$how.jsonl.gz: .*$cause" && [ -z "$left" ]; then
        fault_trial "$CASE_GZ" 0
    else
        fault_trial "$CASE_GZ" 1 "$how at byte $cut of $gz_size: status $status, left behind '$left': $(grep -m1 . "$WORK/err" | cut -c1-200)"
    fi
done
fault_case_ok "$CASE_GZ" "an error naming the file and zlib's cause, nothing written"

fault_print_table
done_testing
