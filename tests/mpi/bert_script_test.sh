#!/bin/sh
# tests/mpi/bert_script_test.sh: Megatron-LM's examples/bert/train_bert_340m_distributed.sh,
# every flag kept and the sizes shrunk (tests/data/train_bert_340m_tiny.sh: a tiny BERT on 4
# ranks, tensor-parallel 2 x pipeline-parallel 2, CPU backend), runs through pretrain_bert with
# torchrun replaced by mpiexec: the WordPiece tokenizer by default, Megatron's BertDataset over a
# sentence-split corpus, --fp16 as the CPU's fp32 with the loss scaler, lm and sop losses logged
# every 5 iterations with validation, checkpoints at 5 and 10, TensorBoard scalars, the loss
# falling; run again, it resumes from its checkpoint (the final validation to the digit). Then
# what pretrain_bert refuses (--mock-data, a GPT tokenizer), and pretrain_gpt BERT's flags. (On
# the GPU: tests/gpu/gpu_bert_test.sh.)
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
bert_corpus corpus 400
PRETRAIN_BERT="$top_builddir/app/pretrain_bert"
export MPIEXEC PRETRAIN_BERT
timeout 300 bash "$top_srcdir/tests/data/train_bert_340m_tiny.sh" "$WORK/checkpoints" "$WORK/tensorboard" "$BERT_VOCAB" \
    "$WORK/corpus_text_sentence.h5" > "$WORK/out" 2> "$WORK/err"
status=$?
ok $status "the BERT 340M example script trains on 4 ranks (tensor-parallel 2 x pipeline-parallel 2)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
[ "$(grep -c '] iteration .*| lm loss: [0-9.E+-]* | sop loss: [0-9.E+-]* |' "$WORK/out")" -eq 2 ] &&
    [ -f "$WORK/checkpoints/iter_0000005.h5" ] && [ -f "$WORK/checkpoints/iter_0000010.h5" ] &&
    [ "$(grep -c 'validation loss at iteration .* lm loss value: .* sop loss value: [0-9.E+-]* | sop loss PPL' "$WORK/out")" -ge 2 ]
ok $? "it logs lm and sop losses every 5 iterations, validates (lm and sop loss values), and saves iterations 5 and 10 in its CHECKPOINT_PATH"
timeout 300 bash "$top_srcdir/tests/data/train_bert_340m_tiny.sh" "$WORK/checkpoints" "$WORK/tensorboard2" "$BERT_VOCAB" \
    "$WORK/corpus_text_sentence.h5" > "$WORK/out2" 2> "$WORK/err2"
status=$?
final() { grep 'validation loss at iteration 10 on validation set' "$1"; }
[ $status -eq 0 ] && grep -q "loaded checkpoint .*iter_0000010.h5: iteration 10" "$WORK/out2" && ! grep -q '] iteration ' "$WORK/out2" &&
    [ -n "$(final "$WORK/out")" ] && [ "$(final "$WORK/out")" = "$(final "$WORK/out2")" ]
ok $? "run again, the script loads iteration 10 from its CHECKPOINT_PATH, has nothing left to train, and its final validation (the same samples) prints the first run's lm and sop losses to the digit"
grep -q "tokenizer_type \.*\s*BertWordPieceLowerCase$" "$WORK/out" &&
    grep -q "^> accepted with no effect here (see --help): --attention-backend$" "$WORK/out" &&
    grep -q "^> --fp16: the CPU backend computes in fp32" "$WORK/out" &&
    grep -q "BERTMaskedWordPieceDataset" "$WORK/out"
ok $? "start-up: pretrain_bert.py's default tokenizer BertWordPieceLowerCase, Megatron's BERT dataset, the no-effect flag, --fp16 on the CPU"
python3 "$top_srcdir/tests/tools/tensorboard_scalars.py" "$WORK/tensorboard" > "$WORK/scalars" 2> "$WORK/scalars.err"
[ $? -eq 0 ] && [ "$(grep -c '^lm loss	' "$WORK/scalars")" -eq 10 ] && [ "$(grep -c '^sop loss	' "$WORK/scalars")" -eq 10 ]
ok $? "its TensorBoard event file reads back with the lm and sop losses of each iteration ($(wc -l < "$WORK/scalars") scalars)"
losses=$(grep -o '| lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*: //' | tr '\n' ' ')
echo "$losses" | awk '{ exit !(NF == 2 && $2 < $1 - 0.1) }'
ok $? "the lm loss falls: $losses"

# what pretrain_bert refuses, with one line before any work
SMALL="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 --train-iters 1
       --lr 1e-3 --vocab-file $BERT_VOCAB"
refused() {  # refused WHAT MESSAGE FLAGS...
    what=$1 message=$2; shift 2
    timeout 60 "$MPIEXEC" -n 1 "$PRETRAIN_BERT" $SMALL "$@" > "$WORK/out" 2> "$WORK/err"
    [ $? -ne 0 ] && grep -q -- "$message" "$WORK/err"
    ok $? "$what is refused: $(grep -m1 error: "$WORK/err" | cut -c1-140)"
}
refused "--mock-data" "pretrain_bert reads a sentence-split WordPiece corpus" --mock-data
refused "a GPT-2 tokenizer" "pretrain_bert needs a WordPiece vocabulary" --data-path "$WORK/corpus_text_sentence.h5" \
    --tokenizer-type GPT2BPETokenizer
"$MPIEXEC" -n 1 "$PRETRAIN_GPT" --args-file "$TINY_ARGS" --train-iters 1 --mask-prob 0.2 > "$WORK/out" 2> "$WORK/err"
[ $? -ne 0 ] && grep -q -- "--mask-prob is a BERT flag: run pretrain_bert" "$WORK/err"
ok $? "pretrain_gpt refuses BERT's flags: $(grep -m1 error: "$WORK/err" | cut -c1-120)"
done_testing
