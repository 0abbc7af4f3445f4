#!/bin/sh
# tests/mpi/t5_script_test.sh: Megatron-LM's examples/t5/train_t5_220m_distributed.sh, every flag
# kept and the sizes shrunk (tests/data/train_t5_220m_tiny.sh: a tiny T5 on 2 ranks, data
# parallel as upstream's layout, CPU backend), runs through pretrain_t5 with torchrun replaced by
# mpiexec: BertWordPieceCase with its sentinels, Megatron's T5 dataset over a sentence-split
# corpus, --bf16 as the CPU's fp32, the lm loss logged every 5 iterations with validation,
# checkpoints at 5 and 10, TensorBoard scalars, the loss falling. Run again, it loads iteration
# 10 (the final validation to the digit); pointed back at iteration 5, it resumes there and ends
# on the first run's iteration-10 loss, grad norm, validation and parameter hash, bit for bit.
# Then what pretrain_t5 refuses, and the other programs T5's flags.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
bert_corpus corpus 400 BertWordPieceCase
PRETRAIN_T5="$top_builddir/app/pretrain_t5"
export MPIEXEC PRETRAIN_T5
script() {  # script OUT TENSORBOARD_DIR: the example on the corpus; on failure its errors as diagnostics
    timeout 300 bash "$top_srcdir/tests/data/train_t5_220m_tiny.sh" "$WORK/checkpoints" "$WORK/$2" "$BERT_VOCAB" \
        "$WORK/corpus_text_sentence.h5" > "$WORK/$1" 2> "$WORK/err" && return 0
    sed 's/^/#   /' "$WORK/err" | head -5
    return 1
}
script out tensorboard
ok $? "the T5 220M example script trains on 2 ranks"
[ "$(grep -c '] iteration .*| lm loss: [0-9.E+-]* |' "$WORK/out")" -eq 2 ] &&
    [ -f "$WORK/checkpoints/iter_0000005.h5" ] && [ -f "$WORK/checkpoints/iter_0000010.h5" ] &&
    [ "$(grep -c 'validation loss at iteration .* lm loss value: [0-9.E+-]* | lm loss PPL' "$WORK/out")" -ge 2 ]
ok $? "it logs the lm loss every 5 iterations, validates, and saves iterations 5 and 10 in its CHECKPOINT_PATH"
grep -q "tokenizer_type \.*\s*BertWordPieceCase$" "$WORK/out" &&
    grep -q "^> accepted with no effect here (see --help): --distributed-backend, --transformer-impl, --attention-backend$" "$WORK/out" &&
    grep -q "^> --bf16: the CPU backend computes in fp32" "$WORK/out" && grep -q "T5MaskedWordPieceDataset" "$WORK/out"
ok $? "start-up: BertWordPieceCase, Megatron's T5 dataset, the no-effect flags, --bf16 on the CPU"
python3 "$top_srcdir/tests/tools/tensorboard_scalars.py" "$WORK/tensorboard" > "$WORK/scalars" 2> "$WORK/scalars.err"
[ $? -eq 0 ] && [ "$(grep -c '^lm loss	' "$WORK/scalars")" -eq 10 ]
ok $? "its TensorBoard event file reads back with the lm loss of each iteration ($(wc -l < "$WORK/scalars") scalars)"
losses=$(grep -o '| lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*: //' | tr '\n' ' ')
echo "$losses" | awk '{ exit !(NF == 2 && $2 < $1 - 0.1) }'
ok $? "the lm loss falls: $losses"

final() { grep 'validation loss at iteration 10 on validation set' "$WORK/$1"; }
last_step() { grep '] iteration *10/' "$WORK/$1" | grep -o '| lm loss: .*grad norm: [0-9.]*' | sed 's/| loss scale[^|]*//'; }
hash_of() { grep -o 'final parameter hash: [0-9a-f]*' "$WORK/$1"; }
script out2 tensorboard2 && grep -q "loaded checkpoint .*iter_0000010.h5: iteration 10" "$WORK/out2" && ! grep -q '] iteration ' "$WORK/out2" &&
    [ -n "$(final out)" ] && [ "$(final out)" = "$(final out2)" ] && [ "$(hash_of out)" = "$(hash_of out2)" ]
ok $? "run again, the script loads iteration 10, has nothing left to train, and its final validation prints the first run's lm loss to the digit"
echo 5 > "$WORK/checkpoints/latest_checkpointed_iteration.txt"
script out3 tensorboard3 && grep -q "loaded checkpoint .*iter_0000005.h5: iteration 5" "$WORK/out3" && [ -n "$(last_step out)" ] &&
    [ "$(last_step out)" = "$(last_step out3)" ] && [ "$(final out)" = "$(final out3)" ] && [ -n "$(hash_of out)" ] &&
    [ "$(hash_of out)" = "$(hash_of out3)" ]
ok $? "resumed from iteration 5, iterations 6-10 end on the first run's loss and grad norm ($(last_step out3)), validation and $(hash_of out3), bitwise"

# what pretrain_t5 refuses, with one line before any work
SMALL="--encoder-num-layers 1 --decoder-num-layers 1 --hidden-size 32 --num-attention-heads 4 --encoder-seq-length 32
       --decoder-seq-length 8 --micro-batch-size 2 --train-iters 1 --lr 1e-3 --vocab-file $BERT_VOCAB"
refused() {  # refused WHAT MESSAGE PROGRAM FLAGS...
    what=$1 message=$2 program=$3; shift 3
    timeout 60 "$MPIEXEC" -n 1 "$program" "$@" > "$WORK/out" 2> "$WORK/err"
    [ $? -ne 0 ] && grep -q -- "$message" "$WORK/err"
    ok $? "$what is refused: $(grep -m1 error: "$WORK/err" | cut -c1-150)"
}
DATA="--data-path $WORK/corpus_text_sentence.h5"
# --device cuda is T5's too (issue 46; tests/gpu/gpu_t5_test.sh trains it): where no GPU is
# visible (or the build has no CUDA) it is refused for that alone, never for being T5
timeout 120 "$MPIEXEC" -n 1 "$PRETRAIN_T5" $SMALL $DATA --device cuda --tokenizer-type BertWordPieceCase \
    > "$WORK/out" 2> "$WORK/err"
status=$?
! grep -q "T5" "$WORK/err" && { [ $status -eq 0 ] || grep -q "GPU\|CUDA" "$WORK/err"; }
ok $? "--device cuda is not refused for T5 (exit $status$(grep -m1 error: "$WORK/err" | cut -c1-120 | sed 's/^/: /'))"
refused "--mock-data" "pretrain_t5 reads a sentence-split WordPiece corpus" "$PRETRAIN_T5" $SMALL --mock-data
refused "a vocabulary without sentinels (pretrain_t5.py's default BertWordPieceLowerCase)" "extra_id\|sentinel" \
    "$PRETRAIN_T5" $SMALL $DATA
refused "--num-layers with --encoder-num-layers" "cannot have both --num-layers and --encoder-num-layers" \
    "$PRETRAIN_T5" $SMALL $DATA --num-layers 2
refused "no --decoder-seq-length" "pretrain_t5 needs --decoder-seq-length" "$PRETRAIN_T5" --num-layers 1 --hidden-size 32 \
    --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 --train-iters 1 --lr 1e-3 $DATA
refused "--decoder-seq-length beyond the position embeddings" "exceeds --max-position-embeddings" "$PRETRAIN_T5" $SMALL $DATA \
    --decoder-seq-length 40 --tokenizer-type BertWordPieceCase
refused "pretrain_gpt given --encoder-num-layers" "is a T5 flag: run pretrain_t5" "$PRETRAIN_GPT" --args-file "$TINY_ARGS" \
    --train-iters 1 --encoder-num-layers 2
refused "pretrain_bert given --decoder-seq-length" "is a T5 flag: run pretrain_t5" "$top_builddir/app/pretrain_bert" \
    --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 --train-iters 1 --lr 1e-3 \
    --vocab-file "$BERT_VOCAB" $DATA --decoder-seq-length 8
done_testing
