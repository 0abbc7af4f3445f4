#!/bin/sh
# local_checkpoint_test.sh: non-persistent checkpoints (app/training/non_persistent_checkpoint.h,
# app/checkpoint/local_checkpoint.h) on 4 ranks, TP2 x DP2 with the distributed optimizer, the
# ranks split into two pretended nodes (MTC_PRETEND_RANKS_PER_NODE=2: ranks 0, 1 on node 0 and
# 2, 3 on node 1, so rank r's replica lives on rank (r + 2) mod 4). A run is killed (SIGKILL of
# rank 1 at iteration 7, MTC_FAULT_KILL_AT_LOG) after local saves at 2, 4 and 6; then:
#  - the restart loads the local set of iteration 6 and logs the unbroken run's losses of
#    iterations 7 and 8 bit for bit, ending with its parameters (fully_parallel and atomic);
#  - a rank's folder deleted (its node lost), or its file damaged: its replica is used, bitwise;
#  - a rank's file and its replica both gone: the set is incomplete, one line says so, and the
#    global checkpoint of --load (iteration 4) is loaded instead, bitwise;
#  - an interrupted save (iteration 8 written by one rank only, a .partial beside it) does not
#    shadow the complete set of 6;
#  - another layout (TP1 x DP4) refuses the local set with a line naming both layouts and loads
#    the global one;
#  - --non-persistent-ckpt-type global saves into <save>/non_persistent, keeps the newest two,
#    and the restart loads it bitwise; the end of training still saves --save's checkpoint;
#  - --fp16: the dynamic loss scaler's state comes back from the local files (losses and scale);
#  - bad flags stop the job with one message.
. "${top_srcdir:-.}/tests/lib.sh"
export MTC_PRETEND_RANKS_PER_NODE=2

MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1 --use-distributed-optimizer --mock-data
       --vocab-size 127 --tokenizer-type NullTokenizer --train-iters 8"
TP2="--tensor-model-parallel-size 2"
LOCAL="--non-persistent-save-interval 2 --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir $WORK/local"

# "ITERATION LOSS" per logged training iteration of a metrics file
iteration_losses() {
    [ -f "$1" ] || return 0
    grep '"split": "train"' "$1" | sed -e 's/.*"iteration": \([0-9]*\).*"lm_loss": \([^,}]*\).*/\1 \2/'
}
fail_details() { sed 's/^/#   /' "$WORK/err" | tail -5; grep -i "local\|WARN" "$WORK/out" | sed 's/^/#   /' | tail -5; }
check() { ok "$1" "$2"; [ "$1" -eq 0 ] || fail_details; }  # check STATUS DESCRIPTION: ok, with the logs on failure

run_app 4 $MODEL $TP2 --save "$WORK/ref" --metrics-file "$WORK/ref.jsonl" --dump-parameters "$WORK/ref.bin"
status=$?
iteration_losses "$WORK/ref.jsonl" > "$WORK/ref.loss"
[ $status -eq 0 ] && [ "$(wc -l < "$WORK/ref.loss")" -eq 8 ]
check $? "reference: the unbroken run logs 8 losses"

# killed_run ALGO: a run saving locally every 2 iterations (and globally every 4) killed at
# iteration 7; its local folder is $WORK/local, its global one $WORK/global
killed_run() {
    rm -rf "$WORK/local" "$WORK/global"
    MTC_FAULT_KILL_AT_LOG=1:7 run_app 4 $MODEL $TP2 $LOCAL --non-persistent-local-ckpt-algo "$1" \
        --save "$WORK/global" --save-interval 4
    status=$?
    [ $status -ne 0 ] && [ -f "$WORK/local/rank_00003/iter_0000006.rank_00003.local" ] &&
        [ -f "$WORK/local/rank_00003/iter_0000006.rank_00001.local" ] &&
        [ ! -e "$WORK/local/rank_00000/iter_0000004.rank_00000.local" ] && [ -f "$WORK/global/iter_0000004.h5" ]
}

# keep_killed / from_killed: a copy of the killed run's folders, put back for each case below
keep_killed() { rm -rf "$WORK/killed" && mkdir "$WORK/killed" && cp -r "$WORK/local" "$WORK/global" "$WORK/killed/"; }
from_killed() { rm -rf "$WORK/local" "$WORK/global" && cp -r "$WORK/killed/local" "$WORK/killed/global" "$WORK/"; }

# resume NAME [FLAGS...]: restart from $WORK/global and the local folder; losses in $WORK/NAME.loss
resume() {
    name=$1; shift
    rm -f "$WORK/$name.jsonl"
    run_app 4 $MODEL $TP2 $LOCAL --save "$WORK/global" --load "$WORK/global" --metrics-file "$WORK/$name.jsonl" \
        --dump-parameters "$WORK/$name.bin" "$@"
    status=$?
    iteration_losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

# same_as_reference NAME FIRST: NAME's losses are the reference's from iteration FIRST on, and its
# final parameters the reference's
same_as_reference() {
    awk -v first="$2" '$1 >= first' "$WORK/ref.loss" > "$WORK/expected"
    cmp -s "$WORK/expected" "$WORK/$1.loss" && cmp -s "$WORK/ref.bin" "$WORK/$1.bin"
}

for algo in atomic fully_parallel; do
    killed_run $algo
    status=$?
    keep_killed
    check $status "$algo: the killed run leaves the local set of iteration 6 (own files and replicas) and removed the older"
    resume $algo --non-persistent-local-ckpt-algo $algo &&
        grep -q "^> loaded local checkpoint of iteration 6 from " "$WORK/out" && same_as_reference $algo 7
    check $? "$algo: the restart loads the local set of iteration 6 and continues bitwise (losses 7, 8, parameters)"
done
ls "$WORK"/local/rank_00000 > "$WORK/left"
[ "$(cat "$WORK/left")" = "iter_0000008.rank_00000.local
iter_0000008.rank_00002.local" ] && [ -f "$WORK/global/iter_0000008.h5" ]
ok $? "after the restart: only the newest local set is kept, and the end of training saved --save's checkpoint"

# a node lost: rank 3's folder (its own file and rank 1's replica) gone
from_killed
rm -rf "$WORK/local/rank_00003"
resume lost_folder && grep -q "^> rank 3: its local checkpoint file of iteration 6 is missing: using its replica from rank 1" "$WORK/out" &&
    same_as_reference lost_folder 7
check $? "a rank's local folder deleted: its replica (on the next node) is used and the losses are bitwise"

# a damaged file: one byte of rank 2's own file changed
from_killed
file="$WORK/local/rank_00002/iter_0000006.rank_00002.local"
printf 'X' | dd of="$file" bs=1 seek=200 conv=notrunc 2>/dev/null
resume damaged && grep -q "^WARNING: rank 2: local checkpoint: .*rank_00002.local is damaged (its XXH3 checksum disagrees)" "$WORK/err" &&
    grep -q "^> rank 2: its local checkpoint file of iteration 6 is damaged: using its replica from rank 0" "$WORK/out" &&
    same_as_reference damaged 7
check $? "a damaged local file: the checksum catches it and the replica is used, bitwise"

# an interrupted save of iteration 8: only rank 0's file of it was written (taken from a run that
# saved 8), and a .partial of rank 1's
from_killed
resume finished_8
cp "$WORK/local/rank_00000/iter_0000008.rank_00000.local" "$WORK/"
from_killed
mv "$WORK/iter_0000008.rank_00000.local" "$WORK/local/rank_00000/"
echo partial > "$WORK/local/rank_00001/iter_0000008.rank_00001.local.partial"
resume interrupted && grep -q "^WARNING: the local checkpoint of iteration 8 in .* is incomplete: rank 1's file (missing) and its replica on rank 3 (missing) are both unusable" "$WORK/out" &&
    grep -q "^> loaded local checkpoint of iteration 6 " "$WORK/out" && same_as_reference interrupted 7
check $? "an interrupted local save (one rank's file of iteration 8) does not shadow the complete set of 6"

# incomplete: rank 1's file and its replica (on rank 3) both gone -> the global checkpoint
from_killed
rm -f "$WORK/local/rank_00001/iter_0000006.rank_00001.local" "$WORK/local/rank_00003/iter_0000006.rank_00001.local"
resume incomplete &&
    grep -q "^> not loading a local checkpoint: the local checkpoint of iteration 6 in .* is incomplete: rank 1's file (missing) and its replica on rank 3 (missing) are both unusable; loading the newest global checkpoint from --load " "$WORK/out" &&
    grep -q "^> loaded checkpoint .*/global/iter_0000004.h5: iteration 4" "$WORK/out" && same_as_reference incomplete 5
check $? "an incomplete local set: one line says why, the global checkpoint of iteration 4 loads, bitwise"

# another layout: TP2 x DP1 on 2 ranks refuses the local set and loads the global one
from_killed
run_app 2 $MODEL $TP2 $LOCAL --save "$WORK/global" --load "$WORK/global"
status=$?
[ $status -eq 0 ] &&
    grep -q "^> not loading a local checkpoint: the local checkpoint of iteration 6 in .* is not this run's: .* was saved with another layout (ranks 4, TP 2, PP 1, DP 2, CP 1, EP 1; this run: ranks 2, TP 2, PP 1, DP 1, CP 1, EP 1): local checkpoints need the same layout; loading the newest global checkpoint" "$WORK/out" &&
    grep -q "^> loaded checkpoint .*/global/iter_0000004.h5" "$WORK/out"
check $? "another layout (TP2 x DP1): the local set is refused with both layouts named, the global one loads"

# the global type: <save>/non_persistent, the newest two kept, the restart from it bitwise
rm -rf "$WORK/g2"
MTC_FAULT_KILL_AT_LOG=1:7 run_app 4 $MODEL $TP2 --non-persistent-save-interval 2 --non-persistent-ckpt-type global \
    --save "$WORK/g2" --save-interval 4
ls "$WORK/g2/non_persistent" > "$WORK/np"
[ "$(cat "$WORK/np")" = "iter_0000002.h5
iter_0000006.h5
latest_checkpointed_iteration.txt" ] && [ "$(cat "$WORK/g2/latest_checkpointed_iteration.txt")" = 4 ]
check $? "global type: saved into <save>/non_persistent (iteration 4 went to --save), the newest two kept"
rm -f "$WORK/g2.jsonl"
run_app 4 $MODEL $TP2 --non-persistent-save-interval 2 --non-persistent-ckpt-type global --save "$WORK/g2" \
    --load "$WORK/g2" --metrics-file "$WORK/g2.jsonl" --dump-parameters "$WORK/g2.bin"
status=$?
iteration_losses "$WORK/g2.jsonl" > "$WORK/g2.loss"
[ $status -eq 0 ] && grep -q "^> loading the non-persistent checkpoint of iteration 6 from .*/g2/non_persistent" "$WORK/out" &&
    same_as_reference g2 7 && [ "$(cat "$WORK/g2/latest_checkpointed_iteration.txt")" = 8 ]
check $? "global type: the restart loads the non-persistent iteration 6 bitwise, and the end saves --save's"

# --fp16 with a dynamic loss scale growing every 2 steps: the scaler's state is in the local files
FP16="--fp16 --initial-loss-scale 1024 --loss-scale-window 2"
scales() { grep '"split": "train"' "$1" | sed -e 's/.*"iteration": \([0-9]*\).*"lm_loss": \([^,}]*\).*"loss_scale": \([^,}]*\).*/\1 \2 \3/'; }
run_app 2 $MODEL $FP16 --metrics-file "$WORK/fp16_ref.jsonl"
rm -rf "$WORK/local16"
MTC_PRETEND_RANKS_PER_NODE=1 MTC_FAULT_KILL_AT_LOG=1:7 run_app 2 $MODEL $FP16 --save "$WORK/g16" \
    --non-persistent-save-interval 2 --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir "$WORK/local16"
MTC_PRETEND_RANKS_PER_NODE=1 run_app 2 $MODEL $FP16 --save "$WORK/g16" --load "$WORK/g16" --non-persistent-save-interval 2 \
    --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir "$WORK/local16" --metrics-file "$WORK/fp16.jsonl"
status=$?
scales "$WORK/fp16_ref.jsonl" | awk '$1 >= 7' > "$WORK/expected"
scales "$WORK/fp16.jsonl" > "$WORK/fp16.scales"
[ $status -eq 0 ] && grep -q "^> loaded local checkpoint of iteration 6 " "$WORK/out" && [ "$(wc -l < "$WORK/expected")" -eq 2 ] &&
    cmp -s "$WORK/expected" "$WORK/fp16.scales"
check $? "--fp16: the restart from the local set goes on with the unbroken run's losses and loss scale ($(tr '\n' ' ' < "$WORK/fp16.scales"))"

# bad flags
expect_error() {  # expect_error MESSAGE FLAGS...
    message=$1; shift
    run_app 1 $MODEL "$@"
    [ $? -ne 0 ] && grep -qF -- "$message" "$WORK/err"
}
expect_error "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir DIR" --non-persistent-ckpt-type local &&
    expect_error "--non-persistent-save-interval needs --non-persistent-ckpt-type global|local" --non-persistent-save-interval 2 &&
    expect_error "in_memory" --non-persistent-ckpt-type in_memory
check $? "bad flags: a local type without its folder, an interval without a type, in_memory"

done_testing
