#!/bin/sh
# megatron_script_test.sh: a launch script written the way Megatron-LM's examples are carries
# over by changing the executable. Megatron's examples/gpt3/train_gpt3_175b_distributed.sh, its
# flag arrays kept whole with the sizes shrunk to a tiny GPT, paths from its arguments and
# torchrun replaced by mpiexec (2 ranks, CPU backend, pipeline-parallel 2), trains, saves, writes
# TensorBoard scalars (read back by tests/tools/tensorboard_scalars.py, and by TensorBoard itself
# where it is installed) and logs the no-effect flags; the two upstream flags that are refused
# here each stop the run with the message saying what to use. Then every row of `pretrain_gpt --help-megatron-flags`: each
# refused flag gives "flag --X of Megatron-LM is not supported here: REASON", each no-effect flag
# is accepted, and all of them together leave training bitwise unchanged (the same parameter hash).
. "${top_srcdir:-.}/tests/lib.sh"
GPT2="$top_srcdir/configs/tokenizers/gpt2"

awk 'BEGIN { RS = ""; n = 0 } n < 200 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/docs.jsonl"
"$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$GPT2/vocab.json" --merge-file "$GPT2/merges.txt" --append-eod \
    > "$WORK/pre.out" 2>&1
ok $? "the script's data: Shakespeare preprocessed with GPT-2's BPE"

# Megatron-LM's GPT-3 175B example (d98e8a64), shrunk. Changed from upstream, besides sizes and
# paths: --step-batch-size-schedule is left out (refused here; Megatron itself refuses it next
# to --global-batch-size); --fp16 is upstream's (the CPU backend: fp32 with the loss scaler). EXTRA_ARGS puts the
# upstream lines back one at a time.
cat > "$WORK/train_gpt3_tiny.sh" <<'EOF'
#!/bin/bash

# Runs the "175B" parameter model (shrunk to a tiny GPT on 2 CPU ranks)

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=2
NUM_NODES=1
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CHECKPOINT_PATH=$1 #<Specify path>
TENSORBOARD_LOGS_PATH=$2 #<Specify path>
VOCAB_FILE=$3 #<Specify path to file>/gpt2-vocab.json
MERGE_FILE=$4 #<Specify path to file>/gpt2-merges.txt
DATA_PATH=$5 #<Specify path and file prefix>_text_document

GPT_MODEL_ARGS=(
    --num-layers 2 
    --hidden-size 32 
    --num-attention-heads 4 
    --seq-length 32 
    --max-position-embeddings 32 
    --attention-backend auto # Can use (flash/fused/unfused/local)
)

TRAINING_ARGS=(
    --micro-batch-size 2 
    --global-batch-size 8
    --train-iters 10
    --weight-decay 0.1 
    --adam-beta1 0.9 
    --adam-beta2 0.95 
    --init-method-std 0.02 
    --clip-grad 1.0 
    --fp16
    --lr 6.0e-3 
    --lr-decay-style cosine 
    --min-lr 6.0e-4
    --lr-warmup-fraction .1 
    --lr-decay-iters 9 
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 1 
	--pipeline-model-parallel-size 2 
)

DATA_ARGS=(
    --data-path $DATA_PATH 
    --vocab-file $VOCAB_FILE 
    --merge-file $MERGE_FILE 
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 5
    --save-interval 5 
    --eval-interval 5 
    --save $CHECKPOINT_PATH 
    --load $CHECKPOINT_PATH 
    --eval-iters 1
    --tensorboard-dir $TENSORBOARD_LOGS_PATH 
)

"$MPIEXEC" -n $WORLD_SIZE "$PRETRAIN_GPT" --device cpu \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]} \
    ${EXTRA_ARGS}
EOF
export MPIEXEC PRETRAIN_GPT
script() {  # script CHECKPOINT_DIR: run the launch script, output in $WORK/out and $WORK/err
    timeout 300 bash "$WORK/train_gpt3_tiny.sh" "$1" "$WORK/tensorboard" "$GPT2/vocab.json" "$GPT2/merges.txt" \
        "$WORK/corpus_text_document" > "$WORK/out" 2> "$WORK/err"
}
script "$WORK/checkpoints"
status=$?
ok $status "the GPT-3 example script trains on 2 ranks (pipeline-parallel 2)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
[ "$(grep -c '] iteration ' "$WORK/out")" -eq 2 ] && [ -f "$WORK/checkpoints/iter_0000005.h5" ] && [ -f "$WORK/checkpoints/iter_0000010.h5" ]
ok $? "it logs every 5 iterations and saves iterations 5 and 10 in its CHECKPOINT_PATH"
python3 "$top_srcdir/tests/tools/tensorboard_scalars.py" "$WORK/tensorboard" > "$WORK/scalars" 2> "$WORK/scalars.err"
ok $? "its TensorBoard event file reads back ($(wc -l < "$WORK/scalars") scalars$(grep -q tensorboard "$WORK/scalars.err" && echo ', TensorBoard agrees'))"
# the "lm loss" scalars are each iteration's (Megatron's --tensorboard-log-interval 1); their mean
# over each log interval, without the iterations an fp16 overflow skipped (those have no grad-norm
# scalar), is the log line's at 5 and 10; validation at 5, at 10 and at the end of training
# (Megatron evaluates at the last iteration and again after the loop)
grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/iteration *\([0-9]*\)\/.*lm loss: \(.*\)/\1 \2/' > "$WORK/logged"
awk -F '\t' '$1 == "grad-norm" { stepped[$2] = 1 } $1 == "lm loss" { loss[$2] = $3; n++ }
    END { if (n != 10) exit 1
          for (i in loss) if (i in stepped) { end = int((i + 4) / 5) * 5; sum[end] += loss[i]; count[end]++ }
          for (e = 5; e <= 10; e += 5) printf "%d %.9g\n", e, sum[e] / count[e] }' "$WORK/scalars" > "$WORK/tb_loss"
awk 'NR == FNR { want[$1] = $2; next } { n++; if (!($1 in want) || (want[$1] - $2) ^ 2 > 1e-10) bad++ } END { exit !(n == 2 && !bad) }' \
    "$WORK/logged" "$WORK/tb_loss" && [ "$(grep -c '^lm loss validation	' "$WORK/scalars")" -eq 3 ] &&
    grep -q '^learning-rate vs samples	80	' "$WORK/scalars"
ok $? "the scalars are Megatron's tags: lm loss at iterations 1-10, the means of the steps taken as printed at $(cut -d' ' -f1 "$WORK/tb_loss" | tr '\n' ' '); validation, learning-rate vs samples"
diag "log line: $(tr '\n' ' ' < "$WORK/logged"); TensorBoard means: $(tr '\n' ' ' < "$WORK/tb_loss")"
first=$(head -1 "$WORK/tb_loss" | cut -d' ' -f2); last=$(tail -1 "$WORK/tb_loss" | cut -d' ' -f2)
awk -v f="$first" -v l="$last" 'BEGIN { exit !(f > 10.0 && l < f - 0.5) }'
ok $? "the loss falls (from $first to $last)"
grep -q "^> accepted with no effect here (see --help): --attention-backend$" "$WORK/out" &&
    grep -q "^> --fp16: the CPU backend computes in fp32 (the reference) with Megatron's dynamic loss scaler" "$WORK/out" &&
    grep -q "| loss scale: 4294967296.0 |" "$WORK/out" && grep -q "^loss-scale	5	4294967296" "$WORK/scalars" &&
    grep -q "tokenizer_type \.*\s*GPT2BPETokenizer$" "$WORK/out"
ok $? "start-up names the no-effect flag, what --fp16 means on the CPU (loss scale 2^32 logged and in TensorBoard), and the GPT-2 tokenizer the vocab and merge files imply"

# the upstream lines that are refused here, put back one at a time
for upstream in "--step-batch-size-schedule 0:16|step-wise batch-size schedules are not supported yet"; do
    EXTRA_ARGS=${upstream%%|*} script "$WORK/checkpoints-refused"
    status=$?
    flag=${upstream%% *}; flag=${flag%%|*}
    [ $status -ne 0 ] && grep -q -- "error: flag $flag of Megatron-LM is not supported here: ${upstream#*|}" "$WORK/err" &&
        [ ! -d "$WORK/checkpoints-refused" ]
    ok $? "upstream $flag stops the script before any work: $(grep -m1 error: "$WORK/err" | cut -c1-120)"
done

# ---- every row of the status table ----
"$MPIEXEC" -n 1 "$PRETRAIN_GPT" --help-megatron-flags > "$WORK/table.md" 2>&1
ok $? "--help-megatron-flags prints the table ($(grep -c '^| `--' "$WORK/table.md") flags)"
# value ROW: a value that the row's synopsis accepts ("" for a flag without one)
value() {
    synopsis=$(echo "$1" | sed 's/^| `\([^`]*\)`.*/\1/')
    case "$synopsis" in
    *" {"*) echo "$synopsis" | sed 's/.*{\([^\\}|]*\).*/\1/' ;;
    *" N"|*" X") echo 1 ;;
    *" "*) echo x ;;
    esac
}
refused_ok=0; refused=0
grep '^| `--.*` | refused: ' "$WORK/table.md" > "$WORK/refused.rows"
while IFS= read -r row; do
    flag=$(echo "$row" | sed 's/^| `\(--[a-z0-9_-]*\).*/\1/')
    # an alias's row ends "(another spelling of --NAME)"; the refusal gives the reason alone
    reason=$(echo "$row" | sed 's/.*` | refused: \(.*\) |$/\1/; s/ (another spelling of --[a-z0-9_-]*)$//' | sed 's/\\|/|/g')
    refused=$((refused + 1))
    run_app 1 --args-file "$TINY_ARGS" "$flag" $(value "$row") </dev/null
    if [ $? -eq 2 ] && grep -qF -- "pretrain_gpt: error: flag $flag of Megatron-LM is not supported here: $reason" "$WORK/err"; then
        refused_ok=$((refused_ok + 1))
    else
        diag "$flag: $(cat "$WORK/err" | head -2)"
    fi
done < "$WORK/refused.rows"
[ "$refused" -ge 10 ] && [ "$refused_ok" -eq "$refused" ]
ok $? "each of the $refused refused flags stops with its own message ($refused_ok did)"

# values of accepted flags that are refused, with what to use instead
for case in "--ckpt-format torch|--ckpt-format torch is not supported here: checkpoints are parallel-HDF5" \
    "--ckpt-format zarr|--ckpt-format must be one of torch|torch_dist|torch_dcp|fsdp_dtensor, got 'zarr'" \
    "--timing-log-level 3|--timing-log-level must be in [0, 2], got 3" \
    "--cp-comm-type a2a+p2p|--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes (the a2a group's size and the p2p ring's)" \
    "--expert-model-parallel-size 2|--expert-model-parallel-size 2 needs --num-experts (a mixture-of-experts model)"; do
    run_app 1 --args-file "$TINY_ARGS" ${case%%|*}
    [ $? -eq 2 ] && grep -qF -- "${case#*|}" "$WORK/err"
    ok $? "${case%%|*} is refused: $(grep -m1 error: "$WORK/err" | cut -c1-110)"
done

# all no-effect flags at once: accepted, named at start-up, and training bitwise the same
NO_EFFECT=""
names=""
while IFS= read -r row; do
    flag=$(echo "$row" | sed 's/^| `\(--[a-z0-9_-]*\).*/\1/')
    NO_EFFECT="$NO_EFFECT $flag $(value "$row")"
    names="$names${names:+, }$flag"
done <<EOF
$(grep '^| `--.*` | accepted, no effect: ' "$WORK/table.md" | grep -v '(another spelling of --[a-z0-9_-]*) |$')
EOF
SHORT="--args-file $TINY_ARGS --train-iters 6 --lr-warmup-iters 2 --eval-iters 0 --log-interval 3 --device cpu"
run_app 2 $SHORT --ckpt-format torch_dist --timing-log-level 0 --context-parallel-size 1 --expert-model-parallel-size 1
base_hash=$(grep "final parameter hash" "$WORK/out")
run_app 2 $SHORT $NO_EFFECT
status=$?
hash=$(grep "final parameter hash" "$WORK/out")
[ $status -eq 0 ] && [ -n "$base_hash" ] && [ "$hash" = "$base_hash" ]
ok $? "the $(echo "$names" | tr ',' '\n' | wc -l) no-effect flags are accepted together and training is bitwise unchanged ($hash)"
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
grep -qxF -- "> accepted with no effect here (see --help): $names" "$WORK/out"
ok $? "start-up names every no-effect flag given"
"$MPIEXEC" -n 1 "$PRETRAIN_GPT" --help > "$WORK/help" 2>&1
grep -q -- "--use-mcore-models .*accepted, no effect here: the model is Megatron-Core's GPTModel" "$WORK/help" &&
    ! grep -q -- "--moe-enable-deepep" "$WORK/help"
ok $? "--help lists no-effect flags with their reason and leaves refused ones to --help-megatron-flags"

done_testing
