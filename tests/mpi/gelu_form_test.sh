#!/bin/sh
# gelu_form_test.sh: the MLP's GeLU as Megatron-LM computes it (pretrain_gpt, fp32 CPU, 2 ranks).
# Megatron's MLP runs bias_gelu_impl, GeLU's tanh approximation, only with the bias-GeLU fusion
# (bias_activation_fusion); --no-bias-gelu-fusion, and --disable-bias-linear (validate_args turns
# the fusion off without biases), leave it F.gelu, the exact erf form (app/model/mlp_gelu.h).
# 1. --no-bias-gelu-fusion changes the losses (large weights, so the forms differ visibly), on
#    DP2 and TP2 alike; --disable-bias-linear with and without it gives the same losses, bitwise.
# 2. Checkpoints record Megatron's bias_gelu_fusion (1 by default, 0 with either flag).
# 3. A --disable-bias-linear checkpoint forged to bias_gelu_fusion 1 and resumed with
#    --use-checkpoint-args computes the tanh form: other losses than the erf one's, and those of
#    the same checkpoint without the attribute (saved before it was recorded: tanh, as then),
#    which a plain --disable-bias-linear resume (the exact form) refuses.
# 4. --use-checkpoint-args restores the exact form: a --no-bias-gelu-fusion checkpoint resumed
#    without the flag gives bitwise the losses of the resume with it; a plain resume without the
#    flag is refused, naming the MLP's GeLU.
# 5. The text generation server takes the form from the checkpoint (below).
. "${top_srcdir:-.}/tests/lib.sh"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"
MODEL="--args-file $TINY_ARGS --num-layers 1 --init-method-std 0.5 --lr-warmup-iters 0 --lr-decay-iters 4 --eval-iters 0
       --log-interval 1"
args_attr() { h5dump -a "/args/$2" "$1" | sed -n 's/^ *(0): *//p' | tr -d '"'; }
losses() {  # losses NAME : the train losses of $WORK/NAME.jsonl into $WORK/NAME.loss
    json_field "$WORK/$1.jsonl" train lm_loss > "$WORK/$1.loss"
}
train() {  # train NAME FLAGS... : 2 iterations on 2 ranks, losses in $WORK/NAME.loss
    name=$1; shift
    run_app 2 $MODEL --train-iters 2 --metrics-file "$WORK/$name.jsonl" "$@"
    status=$?
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -3
    losses "$name"
    return $status
}
same() { [ "$(wc -l < "$WORK/$1.loss")" -eq "$3" ] && cmp -s "$WORK/$1.loss" "$WORK/$2.loss"; }
differ() { [ "$(wc -l < "$WORK/$1.loss")" -eq "$3" ] && [ "$(wc -l < "$WORK/$2.loss")" -eq "$3" ] && ! cmp -s "$WORK/$1.loss" "$WORK/$2.loss"; }
shown() { tr '\n' ' ' < "$WORK/$1.loss"; }

# 1. the flags
train tanh --save "$WORK/tanh" --save-interval 2 && train erf --no-bias-gelu-fusion --save "$WORK/erf" --save-interval 2 &&
    differ tanh erf 2
ok $? "--no-bias-gelu-fusion computes another GeLU (DP2): $(shown tanh)vs $(shown erf)"
train tanh_tp --tensor-model-parallel-size 2 && train erf_tp --tensor-model-parallel-size 2 --no-bias-gelu-fusion &&
    differ tanh_tp erf_tp 2
ok $? "... and on TP2: $(shown tanh_tp)vs $(shown erf_tp)"
train nobias --disable-bias-linear --save "$WORK/nobias" --save-interval 2 &&
    train nobias_flag --disable-bias-linear --no-bias-gelu-fusion && same nobias nobias_flag 2
ok $? "--disable-bias-linear turns the fusion off: the same losses with --no-bias-gelu-fusion, bitwise ($(shown nobias))"

# 2. what checkpoints record
[ "$(args_attr "$WORK/tanh/iter_0000002.h5" bias_gelu_fusion)" = 1 ] &&
    [ "$(args_attr "$WORK/erf/iter_0000002.h5" bias_gelu_fusion)" = 0 ] &&
    [ "$(args_attr "$WORK/nobias/iter_0000002.h5" bias_gelu_fusion)" = 0 ]
ok $? "checkpoints record Megatron's bias_gelu_fusion: 1 by default, 0 with --no-bias-gelu-fusion or --disable-bias-linear"

# 3. the form a checkpoint records is the one --use-checkpoint-args computes
resume() {  # resume NAME CHECKPOINT_DIR FLAGS... : iterations 3 and 4
    name=$1 dir=$2; shift 2
    run_app 2 $MODEL --train-iters 4 --load "$dir" --metrics-file "$WORK/$name.jsonl" "$@"
    status=$?
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -3
    losses "$name"
    return $status
}
cp -r "$WORK/nobias" "$WORK/nobias_tanh" && cp -r "$WORK/nobias" "$WORK/nobias_old" &&
    "$FIXTURE" set-arg "$WORK/nobias_tanh/iter_0000002.h5" bias_gelu_fusion int:1 &&
    "$FIXTURE" set-arg "$WORK/nobias_old/iter_0000002.h5" bias_gelu_fusion delete &&
    [ -z "$(args_attr "$WORK/nobias_old/iter_0000002.h5" bias_gelu_fusion 2>/dev/null)" ]
ok $? "copies of the --disable-bias-linear checkpoint: bias_gelu_fusion forged to 1, and removed"
resume nobias_resumed "$WORK/nobias" --disable-bias-linear && resume nobias_tanh "$WORK/nobias_tanh" --use-checkpoint-args &&
    grep -q "bias_gelu_fusion 1" "$WORK/out" && differ nobias_resumed nobias_tanh 2
ok $? "--use-checkpoint-args computes the recorded tanh form: $(shown nobias_tanh)vs the exact form's $(shown nobias_resumed)"
resume nobias_old "$WORK/nobias_old" --use-checkpoint-args && same nobias_tanh nobias_old 2
ok $? "a checkpoint without the attribute (from before it was recorded) computes the tanh form, as it did"
resume nobias_old_plain "$WORK/nobias_old" --disable-bias-linear
[ $? -ne 0 ] && grep -q "the MLP's GeLU = tanh approximation (bias_gelu_fusion 1; this run: exact erf from --disable-bias-linear" "$WORK/err"
ok $? "... and a plain --disable-bias-linear resume of it is refused, naming the form: $(grep -o "the MLP's GeLU[^;]*;[^;]*" "$WORK/err" | head -1)"

# 4. --use-checkpoint-args restores the exact form; a plain resume must match it
resume erf_flag "$WORK/erf" --no-bias-gelu-fusion && resume erf_args "$WORK/erf" --use-checkpoint-args &&
    grep -q "bias_gelu_fusion 0" "$WORK/out" && same erf_flag erf_args 2
ok $? "--use-checkpoint-args restores --no-bias-gelu-fusion: the losses of the resume with the flag, bitwise ($(shown erf_args))"
resume erf_plain "$WORK/erf"
[ $? -ne 0 ] && grep -q "the MLP's GeLU = exact erf (bias_gelu_fusion 0; this run: tanh approximation from the bias-GeLU fusion; --use-checkpoint-args takes the checkpoint's)" "$WORK/err"
ok $? "a resume without the flag is refused: $(grep -o "the MLP's GeLU[^;]*;[^;]*" "$WORK/err" | head -1)"
resume tanh_plain "$WORK/tanh" --no-bias-gelu-fusion
[ $? -ne 0 ] && grep -q "the MLP's GeLU = tanh approximation (bias_gelu_fusion 1; this run: exact erf from --no-bias-gelu-fusion; --use-checkpoint-args takes the checkpoint's)" "$WORK/err"
ok $? "... and so is the other way round"

# 5. inference reads the form from the checkpoint: the server's scores of the --no-bias-gelu-fusion
#    checkpoint and of a copy forged to bias_gelu_fusion 1 are each those of the training forward
#    without a cache in that form (tests/tools/gpt_forward_reference), within 1e-4, and the two
#    differ by more than that
SERVER="$top_builddir/app/run_text_generation_server"
REFERENCE="$top_builddir/tests/tools/gpt_forward_reference"
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
cp -r "$WORK/erf" "$WORK/erf_forged" && "$FIXTURE" set-arg "$WORK/erf_forged/iter_0000002.h5" bias_gelu_fusion int:1
echo "30 31 32 33 34 90 91" > "$WORK/score.line"
score() {  # score NAME CHECKPOINT REFERENCE_FLAGS... : the server's scores in NAME.json, the reference's in NAME.ref
    name=$1 ckpt=$2; shift 2
    rm -f "$WORK/$name.port"
    "$SERVER" --load "$ckpt" --port 0 --port-file "$WORK/$name.port" --device cpu >"$WORK/$name.out" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    port=$(cat "$WORK/$name.port" 2>/dev/null)
    curl -s -o "$WORK/$name.json" -X PUT -H "Content-Type: application/json" \
        --data-binary '{"prompts": ["30 31 32 33 34 90 91"], "tokens_to_generate": 0, "logprobs": true}' "http://127.0.0.1:$port/api"
    kill $pid 2>/dev/null
    timeout 120 "$MPIEXEC" -n 1 "$REFERENCE" score "$WORK/score.line" $MODEL --load "$ckpt" --no-load-optim --no-load-rng \
        --micro-batch-size 1 --global-batch-size 1 "$@" > "$WORK/$name.ref" 2>&1
}
score served_erf "$WORK/erf" --no-bias-gelu-fusion
score served_tanh "$WORK/erf_forged"
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
got, worst = {}, 0.0
for name in ("served_erf", "served_tanh"):
    got[name] = json.load(open(f"{work}/{name}.json"))["logprobs"][0]
    ref = [list(map(float, l.split()[1:])) for l in open(f"{work}/{name}.ref") if l.startswith("logprobs:")][0]
    assert len(got[name]) == 6 == len(ref), (name, got[name], ref)
    worst = max([worst] + [abs(a - b) for a, b in zip(got[name], ref)])
apart = max(abs(a - b) for a, b in zip(got["served_erf"], got["served_tanh"]))
print("# served vs the no-cache forward: worst %.3g; the two forms apart by %.3g" % (worst, apart))
sys.exit(0 if worst < 1e-4 and apart > 1e-4 else 1)
PY
ok $? "the server computes the checkpoint's form: exact with bias_gelu_fusion 0, tanh with 1, as the training forward"
done_testing
