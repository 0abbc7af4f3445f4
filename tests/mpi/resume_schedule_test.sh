#!/bin/sh
# resume_schedule_test.sh: interrupted-and-resumed runs with --decoupled-lr/--decoupled-min-lr
# and with --use-rope-scaling/--rope-scaling-factor are bitwise equal to unbroken ones (2 ranks,
# llama-tiny), and a resume with other values is refused or overridden as Megatron's flags say:
# the decoupled group's peak and floor, like the weight decay, are part of the saved schedule (refused,
# --override-opt-param-scheduler takes this run's, --use-checkpoint-opt_param-scheduler the
# checkpoint's); the rotary flags are part of the model check (refused, --use-checkpoint-args
# takes the checkpoint's, --finetune loads only the weights).
. "${top_srcdir:-.}/tests/lib.sh"
R="--args-file $top_srcdir/configs/llama-tiny.args --train-iters 6 --lr-warmup-iters 2 --lr-decay-iters 6
   --eval-iters 0 --log-interval 1 --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --deterministic-mode"
losses() { json_field "$1" train lm_loss; }
why() { grep -m1 -o 'conflict.*' "$WORK/err" | cut -c1-160; }

# resume NAME FLAGS... : 6 iterations straight, and 3 + save + load + 3; the same losses and
# final parameters, bit for bit; the checkpoint of iteration 3 stays in $WORK/NAME, its
# parameters in $WORK/NAME.at3.bin
resume() {
    name=$1; shift
    run_app 2 $R "$@" --metrics-file "$WORK/$name.straight.jsonl" --dump-parameters "$WORK/$name.straight.bin" &&
    run_app 2 $R "$@" --exit-interval 3 --save "$WORK/$name" --metrics-file "$WORK/$name.first.jsonl" \
        --dump-parameters "$WORK/$name.at3.bin" &&
    run_app 2 $R "$@" --load "$WORK/$name" --metrics-file "$WORK/$name.second.jsonl" --dump-parameters "$WORK/$name.resumed.bin"
    status=$?
    losses "$WORK/$name.straight.jsonl" > "$WORK/straight.loss"
    cat "$WORK/$name.first.jsonl" "$WORK/$name.second.jsonl" > "$WORK/resumed.jsonl"
    losses "$WORK/resumed.jsonl" > "$WORK/resumed.loss"
    [ $status -eq 0 ] && grep -q "loaded checkpoint .*iteration 3" "$WORK/out" && [ "$(wc -l < "$WORK/straight.loss")" -eq 6 ] &&
        cmp -s "$WORK/straight.loss" "$WORK/resumed.loss" && cmp -s "$WORK/$name.straight.bin" "$WORK/$name.resumed.bin"
}
# changed DUMP_A DUMP_B : "NAME changed|same" for each tensor of two --dump-parameters files
changed() {
    python3 - "$1" "$2" <<'EOF'
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
for line in open(sys.argv[1] + ".index"):
    name, rows, cols, offset = line.split()
    n = int(rows) * max(int(cols), 1)
    lo, hi = 4 * int(offset), 4 * (int(offset) + n)
    print(name, "changed" if a[lo:hi] != b[lo:hi] else "same")
EOF
}

# ---- --decoupled-lr / --decoupled-min-lr ---------------------------------------------------------
D="--decoupled-lr 1e-2 --decoupled-min-lr 1e-4"
resume dec $D
ok $? "--decoupled-lr 1e-2 --decoupled-min-lr 1e-4: 3 + 3 iterations through a checkpoint equal 6 straight (losses, parameters)"
run_app 2 $R --decoupled-lr 5e-3 --decoupled-min-lr 1e-4 --load "$WORK/dec"
[ $? -ne 0 ] && grep -q -- "--decoupled-lr = 0.01 (this run: 0.005)" "$WORK/err"
ok $? "another --decoupled-lr is refused: $(why)"
run_app 2 $R --decoupled-lr 1e-2 --decoupled-min-lr 1e-3 --load "$WORK/dec"
[ $? -ne 0 ] && grep -q -- "--decoupled-min-lr = 0.0001 (this run: 0.001)" "$WORK/err"
ok $? "another --decoupled-min-lr is refused: $(why)"
run_app 2 $R --load "$WORK/dec"
[ $? -ne 0 ] && grep -q -- "--decoupled-lr = 0.01 (this run: none)" "$WORK/err"
ok $? "dropping --decoupled-lr is refused: $(why)"
run_app 2 $R $D --weight-decay 0.05 --load "$WORK/dec"
[ $? -ne 0 ] && grep -q -- "--weight-decay = 0.1 (this run: 0.05)" "$WORK/err"
ok $? "another --weight-decay is refused (Megatron's start_wd/end_wd): $(why)"
run_app 2 $R --decoupled-lr 5e-3 --weight-decay 0.05 --load "$WORK/dec" --use-checkpoint-opt_param-scheduler \
    --dump-parameters "$WORK/dec.ckpt.bin"
[ $? -eq 0 ] && cmp -s "$WORK/dec.straight.bin" "$WORK/dec.ckpt.bin"
ok $? "--use-checkpoint-opt_param-scheduler: the checkpoint's 1e-2, 1e-4 and weight decay 0.1, bitwise the unbroken run"
run_app 2 $R --load "$WORK/dec" --use-checkpoint-opt_param-scheduler --dump-parameters "$WORK/dec.ckpt2.bin"
[ $? -eq 0 ] && cmp -s "$WORK/dec.straight.bin" "$WORK/dec.ckpt2.bin"
ok $? "... also when this run gives no --decoupled-lr at all"
# --override-opt-param-scheduler with a decoupled rate of 0: from the checkpoint on, the word
# embeddings and the output layer stay as saved while every other tensor trains
run_app 2 $R --decoupled-lr 0 --decoupled-min-lr 0 --load "$WORK/dec" --override-opt-param-scheduler \
    --dump-parameters "$WORK/dec.override.bin"
status=$?
changed "$WORK/dec.at3.bin" "$WORK/dec.override.bin" > "$WORK/changed"
[ $status -eq 0 ] && grep -qx "embedding.word_embeddings.weight same" "$WORK/changed" &&
    grep -qx "output_layer.weight same" "$WORK/changed" && [ "$(grep -c ' same$' "$WORK/changed")" -eq 2 ]
ok $? "--override-opt-param-scheduler --decoupled-lr 0: this run's rate (embedding and output layer unchanged, $(grep -c ' changed$' "$WORK/changed") tensors trained)"
resume plain
run_app 2 $R --decoupled-lr 3e-3 --decoupled-min-lr 3e-4 --load "$WORK/plain" --override-opt-param-scheduler \
    --dump-parameters "$WORK/plain.override.bin"
[ $? -eq 0 ] && cmp -s "$WORK/plain.straight.bin" "$WORK/plain.override.bin"
ok $? "a checkpoint without --decoupled-lr resumed with --override-opt-param-scheduler and --decoupled-lr = --lr: bitwise the unbroken run"

# ---- --use-rope-scaling / --rope-scaling-factor -----------------------------------------------------
S="--rotary-base 500000 --use-rope-scaling --rope-scaling-factor 8"
resume rope $S
ok $? "--use-rope-scaling --rope-scaling-factor 8: 3 + 3 iterations through a checkpoint equal 6 straight"
run_app 2 $R --rotary-base 500000 --use-rope-scaling --rope-scaling-factor 4 --load "$WORK/rope"
[ $? -ne 0 ] && grep -q -- "--rope-scaling-factor = 8 (this run: 4)" "$WORK/err"
ok $? "another --rope-scaling-factor is refused: $(why)"
run_app 2 $R --rotary-base 500000 --load "$WORK/rope"
[ $? -ne 0 ] && grep -q -- "--use-rope-scaling = 1 (this run: 0)" "$WORK/err"
ok $? "dropping --use-rope-scaling is refused: $(why)"
run_app 2 $R $S --rotary-base 10000 --load "$WORK/rope"
[ $? -ne 0 ] && grep -q -- "--rotary-base = 500000 (this run: 10000)" "$WORK/err"
ok $? "another --rotary-base is refused: $(why)"
run_app 2 $R --load "$WORK/rope" --use-checkpoint-args --dump-parameters "$WORK/rope.args.bin"
[ $? -eq 0 ] && grep -q "from the checkpoint: .*use_rope_scaling 1, rope_scaling_factor 8" "$WORK/out" &&
    cmp -s "$WORK/rope.straight.bin" "$WORK/rope.args.bin"
ok $? "--use-checkpoint-args takes the rotary base and the scaling from the checkpoint: bitwise the unbroken run"
run_app 2 $R --rotary-base 500000 --use-rope-scaling --rope-scaling-factor 4 --load "$WORK/rope" --finetune
ok $? "--finetune loads only the weights under another factor"
done_testing
