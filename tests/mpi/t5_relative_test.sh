#!/bin/sh
# tests/mpi/t5_relative_test.sh: pretrain_t5 with T5's relative position bias (issue 46;
# --position-embedding-type relative, Megatron-Core's T5Model with RelativePositionEmbedding:
# a bidirectional table for the encoder's self-attention, a causal one for the decoder's, no
# learned positions). Fp32 CPU with dropout on, 32 buckets of max distance 128 over an encoder
# of 32 positions (the logarithmic buckets in use):
#  - the checkpoint holds the two tables under Megatron's names, [buckets, heads], whole, and no
#    position embeddings;
#  - TP2, TP2 + sequence parallel, DP2, DP2 with the distributed optimizer and TP2 x DP2 (SP,
#    distributed optimizer) give the one-rank losses of 5 iterations within 1e-6 relative, every
#    parameter (tables included) within 1e-5 (measured: losses within 1.7e-8, parameters within
#    2.2e-6 under OPENBLAS_CORETYPE=Prescott);
#  - saved after 3 iterations and resumed, iterations 4-5 and the final parameters are the
#    uninterrupted run's, bit for bit; a resume with other buckets is refused;
#  - GPT, BERT and ill-formed bucket settings are refused with one message.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
. "$top_srcdir/tests/mpi/parallel_compare.sh"
TOLERANCE=1e-6 KV_CHANNELS=8
PRETRAIN_GPT="$top_builddir/app/pretrain_t5"   # run_app's program
bert_corpus t5 160 BertWordPieceCase
MODEL="--encoder-num-layers 2 --decoder-num-layers 2 --hidden-size 32 --num-attention-heads 4 --kv-channels 8
       --ffn-hidden-size 48 --encoder-seq-length 32 --decoder-seq-length 12 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1
       --eval-iters 0 --make-vocab-size-divisible-by 81 --hidden-dropout 0.1 --attention-dropout 0.1
       --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file $BERT_VOCAB
       --data-path $WORK/t5_text_sentence.h5 --split 949,50,1 --position-embedding-type relative
       --relative-attention-num-buckets 32 --relative-attention-max-distance 128"

reference one
grep -q '| lm loss: [0-9.E+-]* |' "$WORK/out"
ok $? "a T5 with relative positions trains on one rank: lm loss $(losses "$WORK/one.jsonl" | tr '\n' ' ')"

layout "TP2" 2 --tensor-model-parallel-size 2
layout "TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "DP2" 2 --overlap-grad-reduce --ddp-bucket-size 4000
layout "DP2 distributed optimizer" 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 4000
layout "TP2 x DP2, SP + distributed optimizer" 4 --tensor-model-parallel-size 2 --sequence-parallel \
    --use-distributed-optimizer --overlap-grad-reduce

# 3 iterations, a checkpoint, the rest resumed: the same as the uninterrupted run, bit for bit
run_app 1 $MODEL --save-interval 3 --exit-interval 3 --save "$WORK/ckpt" --metrics-file "$WORK/first.jsonl"
ok $? "3 iterations, then a checkpoint"
names=$(h5ls -r "$WORK/ckpt/iter_0000003.h5" 2>/dev/null | grep -E '^/model/.*(relative_pos_emb|position_embeddings)')
echo "$names" | grep -q '^/model/encoder_relative_pos_emb\.relative_attention_bias\.weight *Dataset {32, 4}' &&
    echo "$names" | grep -q '^/model/decoder_relative_pos_emb\.relative_attention_bias\.weight *Dataset {32, 4}' &&
    [ "$(echo "$names" | wc -l)" -eq 2 ]
ok $? "the checkpoint holds encoder_relative_pos_emb and decoder_relative_pos_emb .relative_attention_bias.weight [32, 4], no position embeddings"
[ -n "$names" ] || h5ls -r "$WORK/ckpt/iter_0000003.h5" | head -5 | sed 's/^/#   /'
run_app 1 $MODEL --load "$WORK/ckpt" --metrics-file "$WORK/second.jsonl" --dump-parameters "$WORK/resumed.bin"
ok $? "resumed: $(grep -o 'loaded checkpoint [^:]*: iteration [0-9]*' "$WORK/out")"
tail -2 "$WORK/one.loss" > "$WORK/one_tail.loss"
losses "$WORK/second.jsonl" > "$WORK/second.loss"
[ "$(wc -l < "$WORK/second.loss")" -eq 2 ] && cmp -s "$WORK/one_tail.loss" "$WORK/second.loss" && cmp -s "$WORK/one.bin" "$WORK/resumed.bin"
ok $? "iterations 4-5 ($(tr '\n' ' ' < "$WORK/second.loss")) and the final parameters are the uninterrupted run's, bitwise"
run_app 1 $MODEL --relative-attention-num-buckets 16 --load "$WORK/ckpt"
[ $? -ne 0 ] && grep -q -- "encoder_relative_pos_emb.relative_attention_bias.weight has shape \[32, 4\], but this model's is \[16, 4\]" "$WORK/err"
ok $? "resuming with other buckets is refused: $(grep -m1 error: "$WORK/err" | sed 's/.*tensor/tensor/')"

# what is refused, with one line before any work
refused() {  # refused WHAT MESSAGE PROGRAM FLAGS...
    what=$1 message=$2 program=$3; shift 3
    timeout 60 "$MPIEXEC" -n 1 "$program" "$@" > "$WORK/out" 2> "$WORK/err"
    [ $? -ne 0 ] && grep -q -- "$message" "$WORK/err"
    ok $? "$what is refused: $(grep -m1 error: "$WORK/err" | cut -c1-150)"
}
GPT="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --micro-batch-size 2 --train-iters 1
     --lr 1e-3 --position-embedding-type relative"
refused "GPT with relative positions" "relative is T5's relative position bias (Megatron-Core's T5Model): run pretrain_t5" \
    "$top_builddir/app/pretrain_gpt" $GPT --mock-data --vocab-size 64
refused "BERT with relative positions" "relative is T5's relative position bias.*pretrain_bert trains BERT" \
    "$top_builddir/app/pretrain_bert" $GPT --vocab-file "$BERT_VOCAB" --data-path "$WORK/t5_text_sentence.h5"
refused "2 buckets" "--relative-attention-num-buckets must be at least 4" "$PRETRAIN_GPT" $MODEL --relative-attention-num-buckets 2
refused "a max distance within the exact buckets" "--relative-attention-max-distance must exceed half of" "$PRETRAIN_GPT" \
    $MODEL --relative-attention-max-distance 16
refused "T5 with rope" "other than learned_absolute and relative" "$PRETRAIN_GPT" $MODEL --position-embedding-type rope
done_testing
