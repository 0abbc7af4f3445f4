#!/bin/sh
# io_fault_test.sh: I/O error injection at every call of a checkpoint save (SQLite's method,
# io/io_fault.h). A 2-rank run loads iteration 1 and saves iteration 2; the k-th write, fsync,
# rename or writing HDF5 call of rank 0 fails with ENOSPC, for every k of the save (every 3rd k in
# the suite, MTC_IO_FAULT_STEP=1 for all) (and every
# 32nd call of rank 1 with EIO, every 70th of rank 0 with EDQUOT). After each: the job exits non-zero with one line naming the file and "No
# space left on device", the tracker still names iteration 1 and its file is unchanged, byte for
# byte (so it loads bit-exactly: checked by loading it at the end). Prints the table of
# tests/tools/fault_table.sh.
. "${top_srcdir:-.}/tests/lib.sh"
TABLE="$top_srcdir/tests/tools/fault_table.sh"
MODEL="--args-file $TINY_ARGS --num-layers 1 --lr-warmup-iters 1 --eval-iters 0 --log-interval 1 --deterministic-mode
       --no-save-optim"

run_app 2 $MODEL --train-iters 1 --save "$WORK/base"
ok $? "a 2-rank run saves iteration 1"
MTC_FAIL_IO_CALL=0 run_app 2 $MODEL --train-iters 2 --load "$WORK/base" --no-load-optim --save "$WORK/count"
calls0=$(sed -n 's/^io_fault: \([0-9]*\) calls on rank 0$/\1/p' "$WORK/err")
MTC_FAIL_IO_CALL=0 MTC_FAIL_IO_RANK=1 run_app 2 $MODEL --train-iters 2 --load "$WORK/base" --no-load-optim --save "$WORK/count"
calls1=$(sed -n 's/^io_fault: \([0-9]*\) calls on rank 1$/\1/p' "$WORK/err")
[ "${calls0:-0}" -gt 50 ] && [ "${calls1:-0}" -gt 50 ]
ok $? "a save makes $calls0 I/O calls on rank 0 and $calls1 on rank 1"

MTC_FAIL_IO_CALL=0 run_app 2 $MODEL --train-iters 2 --load "$WORK/base" --no-load-optim --save "$WORK/reference"
REFERENCE="$WORK/reference/iter_0000002.h5"

reason() { case "$1" in ENOSPC) echo "No space left on device" ;; EDQUOT) echo "Disk quota exceeded" ;;
                        EROFS) echo "Read-only file system" ;; *) echo "Input/output error" ;; esac; }

# trial RANK K ERRNO: a copy of the base checkpoint, a run whose rank RANK fails its K-th call
trial() {
    dir="$WORK/t.$1.$2"
    rm -rf "$dir" && cp -r "$WORK/base" "$dir"
    MTC_FAIL_IO_CALL=$2 MTC_FAIL_IO_RANK=$1 MTC_FAIL_IO_ERRNO=$3 timeout 120 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL \
        --train-iters 2 --load "$dir" --no-load-optim --save "$dir" > "$dir.out" 2> "$dir.err"
    echo $? > "$dir.status"
}

# survives DIR ERRNO: the job failed with one line naming the save and the reason, and the
# checkpoint the tracker names is the old one, unchanged, or (a failure after the new tracker was
# in place) the new one, complete and equal to the reference
survives() {
    [ "$(cat "$1.status")" -ne 0 ] || return 1
    [ "$(grep -c "error" "$1.err")" -eq 1 ] || return 1
    grep "error" "$1.err" | grep "^pretrain_gpt: error: saving checkpoint" | grep -q "$(reason "$2")" || return 1
    case "$(cat "$1/latest_checkpointed_iteration.txt")" in
        1) cmp -s "$WORK/base/iter_0000001.h5" "$1/iter_0000001.h5" ;;
        2) h5diff -q "$REFERENCE" "$1/iter_0000002.h5" /model /model ;;
        *) return 1 ;;
    esac
}

# inject RANK FIRST STEP LAST ERRNO CASE: fail call k = FIRST, FIRST+STEP, ... <= LAST of RANK,
# four jobs at a time (a failing job spends most of its time in the launcher's abort)
inject() {
    rank=$1 first=$2 step=$3 last=$4 errno=$5
    k=$first running=0
    while [ "$k" -le "$last" ]; do
        trial "$rank" "$k" "$errno" &
        running=$((running + 1))
        [ $running -lt 4 ] || { wait; running=0; }
        k=$((k + step))
    done
    wait
    trials=0 survived=0 first_bad="" k=$first
    while [ "$k" -le "$last" ]; do
        trials=$((trials + 1))
        if survives "$WORK/t.$rank.$k" "$errno"; then survived=$((survived + 1))
        elif [ -z "$first_bad" ]; then
            first_bad="call $k: status $(cat "$WORK/t.$rank.$k.status"): $(grep -m2 error "$WORK/t.$rank.$k.err" | head -c 400)"
        fi
        rm -rf "$WORK/t.$rank.$k"
        k=$((k + step))
    done
    [ -z "$first_bad" ] || diag "first failure: $first_bad"
    "$TABLE" row "$6" "$trials" "$survived"
    [ "$survived" -eq "$trials" ] && [ "$trials" -gt 0 ]
}

# MTC_IO_FAULT_STEP=1 fails every one of rank 0's calls (SQLite's exhaustive run); the suite's
# default takes every 3rd, from a start that moves with the day, so successive CI runs cover all
step=${MTC_IO_FAULT_STEP:-3}
start=$(( $(date +%j | sed 's/^0*//') % step + 1 ))
"$TABLE" header
inject 0 "$start" "$step" "$calls0" ENOSPC "rank 0, one call in $step from call $start, ENOSPC" > "$WORK/table0"
status=$?; cat "$WORK/table0"
ok $status "rank 0's save calls $start, $((start + step)), ... of $calls0 failed in turn (ENOSPC): each reported in one line, no checkpoint lost"
inject 1 1 32 "$calls1" EIO "rank 1, every 32nd call, EIO" > "$WORK/table1"
status=$?; cat "$WORK/table1"
ok $status "every 32nd of rank 1's $calls1 calls failed (EIO): the same"
inject 0 5 70 "$calls0" EDQUOT "rank 0, every 70th call, EDQUOT" > "$WORK/table2"
status=$?; cat "$WORK/table2"
ok $status "EDQUOT is named too"
failed=$(( (calls0 - start) / step + 1 + (calls1 + 31) / 32 + (calls0 - 5) / 70 + 1 ))
diag "io_fault_test: failed $failed I/O calls in all"

# the newest complete checkpoint still loads bit-exactly after a failed save
rm -rf "$WORK/run"; cp -r "$WORK/base" "$WORK/run"
MTC_FAIL_IO_CALL=$((calls0 / 2)) run_app 2 $MODEL --train-iters 2 --load "$WORK/run" --no-load-optim --save "$WORK/run"
run_app 2 $MODEL --train-iters 2 --load "$WORK/run" --no-load-optim --save "$WORK/after"
status=$?
h5diff -q "$REFERENCE" "$WORK/after/iter_0000002.h5" /model /model
ok $(( status + $? )) "after a failed save, iteration 1 loads and training reaches the reference's iteration 2 exactly"

# a real HDF5 failure (the .partial name taken by a folder): one line without HDF5's stack, the
# stack with --hdf5-debug
rm -rf "$WORK/run"; cp -r "$WORK/base" "$WORK/run"; mkdir "$WORK/run/iter_0000002.h5.partial"
run_app 2 $MODEL --train-iters 2 --load "$WORK/run" --no-load-optim --save "$WORK/run"
status=$?; diag "$(grep error "$WORK/err")"
[ $status -ne 0 ] && [ "$(grep -c error "$WORK/err")" -eq 1 ] && ! grep -q "HDF5-DIAG" "$WORK/err" &&
    grep -q "saving checkpoint $WORK/run/iter_0000002.h5.partial: H5Fcreate .* failed: Invalid file name" "$WORK/err"
ok $? "a real HDF5 failure is one line naming the file and H5Fcreate, without HDF5's error stack"
run_app 2 $MODEL --train-iters 2 --load "$WORK/run" --no-load-optim --save "$WORK/run" --hdf5-debug
[ $? -ne 0 ] && grep -q "HDF5-DIAG" "$WORK/err"
ok $? "--hdf5-debug prints HDF5's error stack"

# a real full disk (a 600 KiB tmpfs, where this test may mount one): one line naming the file and ENOSPC
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=600k tmpfs "$WORK/small" 2>/dev/null; then
    run_app 2 $MODEL --train-iters 1 --save "$WORK/small/ckpt"
    status=$?; diag "$(grep error "$WORK/err")"
    [ $status -ne 0 ] && [ "$(grep -c error "$WORK/err")" -eq 1 ] &&
        grep -q "saving checkpoint $WORK/small/ckpt/iter_0000001.h5.partial: .* failed: No space left on device" "$WORK/err"
    ok $? "a save onto a full disk prints one line naming the file and 'No space left on device'"
    umount "$WORK/small"
else
    diag "cannot mount a tmpfs here (not root): the real full-disk case is not run"
fi
done_testing
