#!/bin/sh
# gpu_t5_test.sh: T5 on the CUDA backend (issue 46: the cross-attention of
# kernels/cuda/cuda_attention.cu's padded flash kernels, the encoder's padded and the decoder's
# causal self-attention) trains like the fp32 CPU reference. Skipped where no GPU is visible.
#  - pretrain_t5 with a tiny T5 (2 encoder and 2 decoder layers, hidden 128, 2 heads of 64, FFN
#    512, encoder sequence 128 with much padding, decoder sequence 32; 2 micro-batches of 4 per
#    iteration; hidden and attention dropout 0.1), 10 iterations on one GPU: every lm loss within
#    2% (relative) of the CPU backend's (same seed, the same dropout masks; bf16 against fp32);
#    --fp16 (from a loss scale of 1024) likewise against the CPU's --fp16;
#  - two --deterministic-mode runs on one GPU: bitwise-identical losses and parameters
#    (--dump-parameters); full recomputation bitwise the run without;
#  - on 2 GPUs (when present): tensor-parallel 2, and tensor-parallel 2 with sequence parallelism,
#    each within 2% of the CPU backend; pipeline parallelism refused as on the CPU (Megatron's
#    pretrain_t5.py refuses it too).
# On the accelerator machine: GPU_PRETRAIN_T5 and PREPROCESS_DATA (default: the build's
# app/pretrain_t5 and app/preprocess_data) with top_srcdir holding tests/.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
PRETRAIN_T5=${GPU_PRETRAIN_T5:-$top_builddir/app/pretrain_t5}

require_gpus 1

bert_corpus corpus 400 BertWordPieceCase
MODEL="--encoder-num-layers 2 --decoder-num-layers 2 --hidden-size 128 --num-attention-heads 2 --kv-channels 64
       --ffn-hidden-size 512 --encoder-seq-length 128 --decoder-seq-length 32 --max-position-embeddings 128
       --micro-batch-size 4 --global-batch-size 8 --train-iters 10 --lr 1e-3 --lr-decay-iters 9
       --lr-decay-style linear --min-lr 1e-4 --lr-warmup-fraction .01 --weight-decay 1e-2 --clip-grad 1.0
       --init-method-std 0.015 --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file $BERT_VOCAB
       --data-path $WORK/corpus_text_sentence.h5 --split 949,50,1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1"

pretrain() {  # pretrain NAME NRANKS FLAGS...: one run, its lm losses in $WORK/NAME.loss, parameters in NAME.bin
    name=$1; n=$2; shift 2
    timeout 300 "$MPIEXEC" -n "$n" "$PRETRAIN_T5" $MODEL "$@" --metrics-file "$WORK/$name.jsonl" \
        --dump-parameters "$WORK/$name.bin" > "$WORK/$name.out" 2> "$WORK/$name.err"
    status=$?
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/$name.err" | tail -8
    json_field "$WORK/$name.jsonl" train lm_loss > "$WORK/$name.loss"
    return $status
}

case_pair() {  # case_pair NAME FLAGS...: CPU and one-GPU runs of one configuration compared
    pair=$1; shift
    pretrain "${pair}_cpu" 1 --device cpu "$@"
    ok $? "$pair: CPU reference run"
    pretrain "${pair}_gpu" 1 --device cuda "$@"
    ok $? "$pair: one-GPU run"
    diag "$(grep 'iteration       10/' "$WORK/${pair}_gpu.out" | cut -c1-240)"
    compare_losses "${pair}_cpu" "${pair}_gpu" 2e-2 10 "$pair: GPU lm losses over 10 iterations within 2% of the fp32 CPU backend"
}

case_pair t5
grep -q "GPU 0 of .*computing in bf16" "$WORK/t5_gpu.out"
ok $? "the GPU run computes in bf16 on the GPU ($(grep -o 'GPU 0 of.*' "$WORK/t5_gpu.out" | cut -c1-80))"
case_pair fp16 --fp16 --initial-loss-scale 1024
grep -q "computing in fp16" "$WORK/fp16_gpu.out"
ok $? "--fp16 computes in fp16 on the GPU"

pretrain det1 1 --device cuda --deterministic-mode
ok $? "--deterministic-mode: first run"
pretrain det2 1 --device cuda --deterministic-mode
ok $? "--deterministic-mode: second run"
cmp -s "$WORK/det1.loss" "$WORK/det2.loss" && [ "$(wc -l < "$WORK/det1.loss")" -eq 10 ]
ok $? "--deterministic-mode on one GPU: two runs give bitwise-identical losses"
cmp -s "$WORK/det1.bin" "$WORK/det2.bin" && [ -s "$WORK/det1.bin" ]
ok $? "--deterministic-mode on one GPU: two runs give bitwise-identical parameters"

pretrain recompute 1 --device cuda --deterministic-mode --recompute-granularity full --recompute-method uniform \
    --recompute-num-layers 1
ok $? "full recomputation (uniform, 1 layer per group) on one GPU: run"
cmp -s "$WORK/det1.loss" "$WORK/recompute.loss" && cmp -s "$WORK/det1.bin" "$WORK/recompute.bin"
ok $? "full recomputation on one GPU: losses and parameters bitwise those without"

if [ "$gpus" -ge 2 ]; then
    # the vocabulary is padded to a multiple of --make-vocab-size-divisible-by x tp (Megatron), and
    # the padded columns take part in the softmax: 64 x 2 keeps the one-rank reference's 128
    for layout in "tp2|--tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64" \
                  "tp2_sp|--tensor-model-parallel-size 2 --sequence-parallel --make-vocab-size-divisible-by 64"; do
        case_name=${layout%%|*}; flags=${layout#*|}
        pretrain "$case_name" 2 --device cuda $flags
        ok $? "2 GPUs, $case_name ($flags): run"
        compare_losses t5_cpu "$case_name" 2e-2 10 "2 GPUs, $case_name: lm losses within 2% of the CPU backend's"
    done
    timeout 300 "$MPIEXEC" -n 2 "$PRETRAIN_T5" $MODEL --device cuda --pipeline-model-parallel-size 2 \
        > "$WORK/pp2.out" 2> "$WORK/pp2.err"
    status=$?
    [ $status -ne 0 ] && grep -q "pipeline parallelism is not supported for T5" "$WORK/pp2.err"
    ok $? "2 GPUs, pipeline parallelism refused as on the CPU: $(grep -m1 error: "$WORK/pp2.err" | cut -c1-120)"
else
    diag "one GPU: the 2-GPU layouts (TP2, TP2 + SP) are not run"
fi
done_testing
