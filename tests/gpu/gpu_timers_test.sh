#!/bin/sh
# gpu_timers_test.sh: Megatron's phase timers on the CUDA backend. Skipped where no GPU is visible.
#  - one GPU, a model large enough that kernels outlast their launches: the timers synchronize
#    the device, so backward-compute holds the backward's GPU time (1.1 to 5 times
#    forward-compute; launches alone would be a small fraction), and forward-backward >=
#    forward-compute + backward-compute
#  - --deterministic-mode at level 0 and at level 2: the same final parameter hash (timers
#    change no result)
#  - two GPUs (when present), PP2 at level 2: the pipeline's send/recv timers are printed
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt with top_srcdir holding
# tests/ and configs/.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

BIG="--args-file $TINY_ARGS --device cuda --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024
     --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 16 --train-iters 6 --lr-warmup-iters 1
     --log-interval 3 --eval-iters 0"
run_app 1 $BIG --timing-log-level 2 --timing-log-option all --metrics-file "$WORK/big.jsonl"; status=$?
python3 - "$WORK/big.jsonl" > "$WORK/check" 2>&1 <<'EOF'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l][-1]
t = {name: v["max"] for name, v in last["timers_ms"].items()}
ratio = t["backward-compute"] / t["forward-compute"]
print("forward-backward %.2f ms, forward-compute %.2f, backward-compute %.2f (x%.2f), optimizer %.2f" % (
    t["forward-backward"], t["forward-compute"], t["backward-compute"], ratio, t["optimizer"]))
assert 1.1 <= ratio <= 5.0, "backward-compute / forward-compute = %.2f" % ratio
assert t["forward-backward"] >= t["forward-compute"] + t["backward-compute"], t
EOF
checked=$?
[ $status -eq 0 ] && [ $checked -eq 0 ]
ok $? "one GPU, level 2: the timers hold the GPU time of each phase: $(cat "$WORK/check" | tail -1)"

SMALL="--args-file $TINY_ARGS --device cuda --train-iters 6 --lr-warmup-iters 1 --log-interval 3 --eval-iters 0 --deterministic-mode"
run_app 1 $SMALL; status0=$?
hash0=$(grep "final parameter hash" "$WORK/out")
run_app 1 $SMALL --timing-log-level 2; status2=$?
hash2=$(grep "final parameter hash" "$WORK/out")
[ $status0 -eq 0 ] && [ $status2 -eq 0 ] && [ -n "$hash0" ] && [ "$hash0" = "$hash2" ] && grep -q "forward-compute \.*: (" "$WORK/out"
ok $? "--deterministic-mode: level 2 trains the same bits as level 0 ($hash2)"

if [ "$gpus" -ge 2 ]; then
    run_app 2 $SMALL --pipeline-model-parallel-size 2 --timing-log-level 2; status=$?
    [ $status -eq 0 ] && grep -q "forward-send-backward-recv \.*: (" "$WORK/out" && grep -q "forward-recv \.*: (" "$WORK/out"
    ok $? "two GPUs, PP2, level 2: the pipeline's send/recv timers"
fi

done_testing
