#!/bin/sh
# megatron_tools_test.sh: Megatron-LM's inference and evaluation tools run with the flags of
# Megatron's own scripts, sizes shrunk, on tiny checkpoints trained here (issue 47, part 3):
#  - pretrain_gpt --mock-data with a tokenizer and no --vocab-size takes the vocabulary from the
#    tokenizer, padded by --make-vocab-size-divisible-by x tp (50257 -> 50304, 50432 at TP2);
#  - run_text_generation_server with the flags of examples/inference/
#    run_text_generation_server_345M.sh (and its 8-way tensor-parallel variant, on 2 ranks) and
#    of examples/inference/llama_mistral/run_text_generation_llama3.sh (a Llama-architecture
#    checkpoint, HuggingFaceTokenizer), answering PUT /api; text_generation_cli HOST:PORT as
#    Megatron's client is called;
#  - evaluate with the flags of examples/evaluate_zeroshot_gpt.sh (LAMBADA, and WIKITEXT103);
#  - convert_checkpoint with tools/checkpoint/convert.py's flags (--loader llama_mistral
#    --saver core, and --saver hf);
#  - a flag that contradicts the checkpoint is refused naming the flag's value and the
#    checkpoint's; flags that change nothing are named on a start-up line.
. "${top_srcdir:-.}/tests/lib.sh"
SERVER="$top_builddir/app/run_text_generation_server"
EVALUATE="$top_builddir/app/evaluate"
CLI="$top_builddir/app/text_generation_cli"
CONVERT="$top_builddir/app/convert_checkpoint"
GPT2="$top_srcdir/configs/tokenizers/gpt2"
VOCAB_FILE="$GPT2/vocab.json"
MERGE_FILE="$GPT2/merges.txt"
HF_TOKENIZER="$top_srcdir/tests/data/hf-bpe-600"
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# one_error PROGRAM TEXT...: the last run ($WORK/err) exited 2 with exactly one line, which
# holds every TEXT
one_error() {
    status=$1; shift
    [ "$status" -eq 2 ] && [ "$(wc -l < "$WORK/err")" -eq 1 ] || return 1
    for text in "$@"; do grep -qF -- "$text" "$WORK/err" || return 1; done
}

# ---- the checkpoints: Megatron's 345M GPT shrunk, trained on mock data with GPT-2's tokenizer --
GPT_SHAPE="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --max-position-embeddings 64 --seq-length 64"
TRAIN="--micro-batch-size 1 --global-batch-size 4 --train-iters 2 --lr 1e-3 --eval-iters 0 --log-interval 1 --mock-data"
padded() { sed -n 's/^ *padded_vocab_size \.* \([0-9]*\)$/\1/p' "$WORK/out"; }
run_app 1 $GPT_SHAPE $TRAIN --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB_FILE" --merge-file "$MERGE_FILE" \
    --save "$WORK/gpt"
status=$?
[ $status -eq 0 ] && [ "$(padded)" = 50304 ]
ok $? "--mock-data with GPT-2's tokenizer and no --vocab-size trains: vocabulary 50257 padded to $(padded)" ||
    sed 's/^/#   /' "$WORK/err" | head -3
run_app 2 $GPT_SHAPE $TRAIN --vocab-file "$VOCAB_FILE" --merge-file "$MERGE_FILE" --tensor-model-parallel-size 2 \
    --save "$WORK/gpt_tp2"
[ $? -eq 0 ] && [ "$(padded)" = 50432 ]
ok $? "the same with --vocab-file/--merge-file alone at TP2: padded by 128 x 2 to $(padded)"
run_app 1 $GPT_SHAPE $TRAIN
one_error $? "--vocab-size is required with --mock-data"
ok $? "--mock-data without a tokenizer still needs --vocab-size: $(cat "$WORK/err")"
run_app 1 $GPT_SHAPE $TRAIN --tokenizer-type NullTokenizer
one_error $? "--vocab-size is required with --mock-data and --tokenizer-type NullTokenizer"
ok $? "so does the NullTokenizer"

# a Llama-architecture checkpoint with the HuggingFaceTokenizer (its vocabulary from the tokenizer too)
LLAMA_SHAPE="--num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --group-query-attention
             --num-query-groups 2 --max-position-embeddings 64 --seq-length 64 --position-embedding-type rope
             --rotary-base 500000 --normalization RMSNorm --swiglu --disable-bias-linear --untie-embeddings-and-output-weights"
run_app 1 $LLAMA_SHAPE $TRAIN --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF_TOKENIZER" --save "$WORK/llama"
ok $? "a tiny Llama trains on mock data with the HuggingFaceTokenizer's vocabulary" || sed 's/^/#   /' "$WORK/err" | head -3

# ---- run_text_generation_server --------------------------------------------------------------
# start_server NRANKS NAME FLAGS...: serve on a free port (sets PORT, SERVER_PID); 0 when serving
start_server() {
    n=$1; name=$2; shift 2
    rm -f "$WORK/$name.port"
    timeout 300 "$MPIEXEC" -n "$n" "$SERVER" --port 0 --port-file "$WORK/$name.port" --device cpu "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    SERVER_PID=$!
    i=0
    while [ ! -s "$WORK/$name.port" ] && [ $i -lt 600 ] && kill -0 $SERVER_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$WORK/$name.port" 2>/dev/null)
    [ -n "$PORT" ]
}
stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID"
    SERVER_PID=""
}
put() {  # put BODY OUT: the status code on stdout, the answer in OUT
    curl -s -m 120 -o "$2" -w "%{http_code}" -X PUT -H "Content-Type: application/json" --data-binary "$1" "http://127.0.0.1:$PORT/api"
}
REQUEST='{"prompts": ["The quick brown fox"], "tokens_to_generate": 4, "top_k": 1}'

# examples/inference/run_text_generation_server_345M.sh, every flag, sizes shrunk
SERVER_345M="--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 $GPT_SHAPE --load $WORK/gpt
             --tokenizer-type GPT2BPETokenizer --fp16 --micro-batch-size 1 --vocab-file $VOCAB_FILE
             --merge-file $MERGE_FILE --seed 42"
start_server 1 s345m $SERVER_345M
ok $? "the server starts with the flags of run_text_generation_server_345M.sh" || sed 's/^/#   /' "$WORK/s345m.err" | head -3
status=$(put "$REQUEST" "$WORK/answer.json")
[ "$status" = 200 ] && grep -q '"text": *\["The quick brown fox' "$WORK/answer.json"
ok $? "it answers PUT /api (status $status)"
grep -q "^> accepted with no effect here (see --help): .*--fp16.*--seq-length.*--micro-batch-size" "$WORK/s345m.out"
ok $? "start-up names the flags that change nothing: $(grep -m1 'no effect' "$WORK/s345m.out" | cut -c1-120)"
# Megatron's client: text_generation_cli.py HOST:PORT, prompt and token count on standard input
printf 'The quick brown fox\n3\n' | timeout 60 "$CLI" "127.0.0.1:$PORT" > "$WORK/cli.out" 2>&1
grep -q "Megatron Response: The quick brown fox" "$WORK/cli.out"
ok $? "text_generation_cli 127.0.0.1:$PORT (Megatron's form of the address) gets the answer"
stop_server

# its 8-way tensor-parallel variant, on 2 ranks
start_server 2 s345m_tp $(echo "$SERVER_345M" | sed 's/--tensor-model-parallel-size 1/--tensor-model-parallel-size 2/')
ok $? "the server starts with run_text_generation_server_345M_8_tensor_parallel.sh's flags at TP2" ||
    sed 's/^/#   /' "$WORK/s345m_tp.err" | head -3
status=$(put "$REQUEST" "$WORK/answer_tp.json")
[ "$status" = 200 ] && grep -q '"text": *\["The quick brown fox' "$WORK/answer_tp.json"
ok $? "it answers PUT /api from 2 ranks (status $status)"
stop_server

# examples/inference/llama_mistral/run_text_generation_llama3.sh, every flag, sizes shrunk
SERVER_LLAMA3="--use-checkpoint-args --disable-bias-linear --tokenizer-type HuggingFaceTokenizer
               --tokenizer-model $HF_TOKENIZER --transformer-impl transformer_engine --normalization RMSNorm
               --group-query-attention --num-query-groups 2 --no-masked-softmax-fusion --attention-softmax-in-fp32
               --attention-dropout 0.0 --hidden-dropout 0.0 --untie-embeddings-and-output-weights
               --position-embedding-type rope --rotary-percent 1.0 --rotary-base 500000
               --use-rotary-position-embeddings --swiglu --tensor-model-parallel-size 1
               --pipeline-model-parallel-size 1 --num-layers 2 --hidden-size 64 --ffn-hidden-size 128
               --load $WORK/llama --num-attention-heads 4 --max-position-embeddings 64 --bf16
               --micro-batch-size 1 --seq-length 64"
start_server 1 llama3 $SERVER_LLAMA3
ok $? "the server starts with the flags of run_text_generation_llama3.sh" || sed 's/^/#   /' "$WORK/llama3.err" | head -3
status=$(put "$REQUEST" "$WORK/answer_llama.json")
[ "$status" = 200 ] && grep -q '"text"' "$WORK/answer_llama.json"
ok $? "it answers PUT /api (status $status)"
stop_server

# refused_flag DESCRIPTION PROGRAM_ARGS... -- TEXT...: one error line holding every TEXT
refused_flag() {
    description=$1; shift
    args=""
    while [ "$1" != -- ]; do args="$args $1"; shift; done
    shift
    timeout 120 "$MPIEXEC" -n 1 $args >"$WORK/out" 2>"$WORK/err"
    one_error $? "$@"
    ok $? "$description: $(cat "$WORK/err" | cut -c1-160)"
}
refused_flag "server: --num-layers 24 contradicts the checkpoint" \
    "$SERVER" $SERVER_345M --num-layers 24 --device cpu -- "--num-layers 24" "has num_layers 2"
refused_flag "server: --hidden-size 1024 contradicts the checkpoint" \
    "$SERVER" $SERVER_345M --hidden-size 1024 --device cpu -- "--hidden-size 1024" "hidden_size 64"
refused_flag "server: --max-position-embeddings 1024 contradicts the checkpoint" \
    "$SERVER" $SERVER_345M --max-position-embeddings 1024 --device cpu -- "--max-position-embeddings 1024" "max_position_embeddings 64"
refused_flag "server: --swiglu on a GeLU checkpoint" \
    "$SERVER" $SERVER_345M --swiglu --device cpu -- "--swiglu" "swiglu False"
refused_flag "server: --normalization LayerNorm on an RMSNorm checkpoint" \
    "$SERVER" $SERVER_LLAMA3 --normalization LayerNorm --device cpu -- "--normalization LayerNorm" "normalization RMSNorm"
refused_flag "server: --num-query-groups 4 on a checkpoint of 2 groups" \
    "$SERVER" $SERVER_LLAMA3 --num-query-groups 4 --device cpu -- "num_query_groups 2"
refused_flag "server: --rotary-base 10000 contradicts the checkpoint's 500000" \
    "$SERVER" $SERVER_LLAMA3 --rotary-base 10000 --device cpu -- "--rotary-base 10000" "rotary_base 500000"
refused_flag "evaluate: --vocab-size 1000 contradicts the checkpoint" \
    "$EVALUATE" --task LAMBADA --valid-data x --load "$WORK/gpt" --vocab-size 1000 --device cpu -- "--vocab-size 1000" "vocab_size 50257"

# ---- evaluate: examples/evaluate_zeroshot_gpt.sh, sizes shrunk -----------------------------------
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
with open(work + "/lambada.jsonl", "w") as f:
    for text in ["The cat sat on the mat and looked at the dog", "She opened the door and walked into the room",
                 "He picked up the phone and called his mother"]:
        f.write(json.dumps({"text": text}) + "\n")
open(work + "/wiki.test.tokens", "w").write(" = Valkyria Chronicles = \n The game began development in 2010 , carrying over a large portion of the work . \n")
PY
# --batch-size 8 of the script is Megatron's old name, which Megatron itself now refuses
EVAL_ZEROSHOT="--valid-data $WORK/lambada.jsonl --tokenizer-type GPT2BPETokenizer --strict-lambada --vocab-file $VOCAB_FILE
               --merge-file $MERGE_FILE --load $WORK/gpt --tensor-model-parallel-size 1 --num-layers 2 --hidden-size 64
               --num-attention-heads 4 --micro-batch-size 8 --seq-length 64 --max-position-embeddings 64
               --log-interval 10 --fp16 --no-load-optim --no-load-rng --device cpu"
timeout 120 "$MPIEXEC" -n 1 "$EVALUATE" --task LAMBADA $EVAL_ZEROSHOT > "$WORK/lambada.out" 2>&1
[ $? -eq 0 ] && grep -q "validation results on LAMBADA | number correct" "$WORK/lambada.out" &&
    grep -q "^> accepted with no effect here (see --help): .*--fp16.*--no-load-optim.*--no-load-rng" "$WORK/lambada.out"
ok $? "evaluate --task LAMBADA with the script's flags: $(grep -o 'avg accuracy.*' "$WORK/lambada.out")" ||
    sed 's/^/#   /' "$WORK/lambada.out" | tail -3
timeout 120 "$MPIEXEC" -n 1 "$EVALUATE" --task WIKITEXT103 $(echo "$EVAL_ZEROSHOT" | sed "s|$WORK/lambada.jsonl|$WORK/wiki.test.tokens|; s/--strict-lambada//") \
    --overlapping-eval 32 > "$WORK/wiki.out" 2>&1
[ $? -eq 0 ] && grep -q "validation results on WIKITEXT103 | avg loss" "$WORK/wiki.out"
ok $? "evaluate --task WIKITEXT103 with the same flags: $(grep -o 'ppl:[^|]*' "$WORK/wiki.out" | head -1)" ||
    sed 's/^/#   /' "$WORK/wiki.out" | tail -3
refused_flag "evaluate: --batch-size (refused by Megatron too) says to use --micro-batch-size" \
    "$EVALUATE" --task LAMBADA $EVAL_ZEROSHOT --batch-size 8 -- "--batch-size" "use --micro-batch-size"

# ---- convert_checkpoint: tools/checkpoint/convert.py's flags ------------------------------------
timeout 120 "$MPIEXEC" -n 1 "$CONVERT" --model-type GPT --loader core --saver hf --load-dir "$WORK/llama" \
    --save-dir "$WORK/llama_hf" --target-tensor-parallel-size 1 > "$WORK/out" 2>&1
[ $? -eq 0 ] && [ -s "$WORK/llama_hf/config.json" ] && grep -q "no effect here.*--target-tensor-parallel-size" "$WORK/out"
ok $? "convert.py's --loader core --saver hf --load-dir --save-dir exports to Hugging Face" || sed 's/^/#   /' "$WORK/out" | tail -3
# the Llama conversion of the RL and multimodal READMEs, every flag
timeout 120 "$MPIEXEC" -n 1 "$CONVERT" --bf16 --model-type GPT --loader llama_mistral --saver core \
    --target-tensor-parallel-size 2 --checkpoint-type hf --load-dir "$WORK/llama_hf" --save-dir "$WORK/llama_back" \
    --tokenizer-model "$HF_TOKENIZER" --model-size llama3 --loader-transformer-impl transformer_engine \
    --make-vocab-size-divisible-by 128 > "$WORK/out" 2>&1
[ $? -eq 0 ] && [ "$(cat "$WORK/llama_back/latest_checkpointed_iteration.txt")" = release ]
ok $? "convert.py's --loader llama_mistral --saver core imports it back" || sed 's/^/#   /' "$WORK/out" | tail -3
start_server 1 back --load "$WORK/llama_back" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF_TOKENIZER" \
    --num-layers 2 --hidden-size 64 --swiglu --normalization RMSNorm --bf16
status=$(put "$REQUEST" "$WORK/answer_back.json")
[ "$status" = 200 ]
ok $? "the imported checkpoint serves with the model flags (status $status)"
stop_server
refused_flag "convert: --loader core --saver core (resharding) says to load into the new layout directly" \
    "$CONVERT" --model-type GPT --loader core --saver core --load-dir "$WORK/gpt" --save-dir "$WORK/x" \
    --target-tensor-parallel-size 2 -- "not needed here" "--tensor-model-parallel-size"
refused_flag "convert: --checkpoint-type meta is refused saying what to do" \
    "$CONVERT" --model-type GPT --loader llama_mistral --saver core --checkpoint-type meta --load-dir x --save-dir y -- \
    "--checkpoint-type meta" "Hugging Face first"
refused_flag "convert: --loader llava is named" \
    "$CONVERT" --model-type GPT --loader loader_llava --saver mcore --load-dir x --save-dir y -- "--loader loader_llava"
# --loader mixtral_hf is Hugging Face's side, as --from-hf (tests/mpi/mixtral_hf_test.sh converts with it)
! "$CONVERT" --model-type GPT --loader loader_mixtral_hf --saver mcore --load-dir "$WORK/no_such_model" --save-dir "$WORK/y" \
    > /dev/null 2> "$WORK/err" && grep -q "no_such_model: No such file or directory" "$WORK/err"
ok $? "convert: --loader loader_mixtral_hf is accepted (the missing folder is the one complaint): $(cat "$WORK/err")"

done_testing
