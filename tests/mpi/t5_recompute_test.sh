#!/bin/sh
# tests/mpi/t5_recompute_test.sh: activation recomputation for pretrain_t5 (issue 46), as
# Megatron-Core's T5Model runs it: each stack (the encoder's and the decoder's TransformerBlock)
# checkpoints its own layers, --recompute-num-layers counting in each stack. On 1 rank and TP2,
# dropout on, an encoder of 2 layers and a decoder of 3 (different lengths), 3 iterations of 2
# micro-batches: full uniform (groups of 2: the encoder's 2 layers, the decoder's 2 then 1),
# full block 2 (both encoder layers, the decoder's first 2) and block 3 (capped at the encoder's
# 2, all 3 of the decoder), selective core_attn (self- and cross-attention cores), layernorm and
# both give the losses and every parameter bitwise those of the run without recomputation (the
# recomputed forward draws the same dropout masks: the same Philox streams), with lower peak
# memory (peak_memory_gib of the metrics JSON, and the memory estimate's activations); hardware FLOPs (HFU) count the repeated forward
# work as perf/metrics/flops.c does, against figures computed by hand; T5's relative position
# bias recomputes alike; the mixture-of-experts modules, absent from T5, are refused by name.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
PRETRAIN_GPT="$top_builddir/app/pretrain_t5"   # run_app's program
bert_corpus t5 160 BertWordPieceCase
MODEL="--encoder-num-layers 2 --decoder-num-layers 3 --hidden-size 64 --num-attention-heads 4 --kv-channels 16
       --ffn-hidden-size 96 --encoder-seq-length 64 --decoder-seq-length 24 --max-position-embeddings 64
       --micro-batch-size 4 --global-batch-size 8 --train-iters 3 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1
       --eval-iters 0 --make-vocab-size-divisible-by 81 --hidden-dropout 0.1 --attention-dropout 0.1
       --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file $BERT_VOCAB
       --data-path $WORK/t5_text_sentence.h5 --split 949,50,1 --peak-tflops 1"

last() { json_field "$1" train "$2" | tail -1; }

# run_mode RANKS TAG FLAGS...: metrics in $WORK/TAG.jsonl, parameters in TAG.bin
run_mode() {
    ranks=$1; run=$2; shift 2
    run_app "$ranks" $MODEL "$@" --metrics-file "$WORK/$run.jsonl" --dump-parameters "$WORK/$run.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    cp "$WORK/out" "$WORK/$run.out"
    return $status
}

# lower A B: peak memory of run A is below run B's
lower() {
    awk -v a="$(last "$WORK/$1.jsonl" peak_memory_gib)" -v b="$(last "$WORK/$2.jsonl" peak_memory_gib)" \
        'BEGIN { exit !(a + 0 < b + 0 && a + 0 > 0) }'
}

# estimate TAG: the activation MB of the log's theoretical memory footprints (memory_estimate.c)
estimate() { sed -n 's/.*theoretical memory footprints:.* activation=\([0-9.]*\) MB.*/\1/p' "$WORK/$1.out"; }

# check_layout NAME RANKS LAYOUT...: every mode against the run without recomputation
check_layout() {
    name=$1; ranks=$2; shift 2
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_mode "$ranks" "$tag.none" "$@" || { ok 1 "$name: run without recomputation"; return; }
    json_field "$WORK/$tag.none.jsonl" train lm_loss > "$WORK/$tag.none.loss"
    mem="none $(last "$WORK/$tag.none.jsonl" peak_memory_gib)"
    for mode in $MODES; do
        case $mode in
        uniform) flags="--recompute-granularity full --recompute-method uniform --recompute-num-layers 2" ;;
        block) flags="--recompute-granularity full --recompute-method block --recompute-num-layers 2" ;;
        block3) flags="--recompute-granularity full --recompute-method block --recompute-num-layers 3" ;;
        selective) flags="--recompute-activations" ;;
        norms) flags="--recompute-granularity selective --recompute-modules layernorm" ;;
        norms_attn) flags="--recompute-granularity selective --recompute-modules layernorm core_attn" ;;
        esac
        run_mode "$ranks" "$tag.$mode" "$@" $flags || { ok 1 "$name, $mode: run failed"; continue; }
        json_field "$WORK/$tag.$mode.jsonl" train lm_loss > "$WORK/$tag.$mode.loss"
        [ "$(wc -l < "$WORK/$tag.$mode.loss")" -eq 3 ] && cmp -s "$WORK/$tag.none.loss" "$WORK/$tag.$mode.loss" &&
            cmp -s "$WORK/$tag.none.bin" "$WORK/$tag.$mode.bin"
        ok $? "$name, $mode: losses of 3 iterations and every parameter bitwise those without recomputation"
        lower "$tag.$mode" "$tag.none"
        ok $? "$name, $mode: peak memory lower than without recomputation"
        awk -v a="$(estimate "$tag.$mode")" -v b="$(estimate "$tag.none")" 'BEGIN { exit !(a + 0 < b + 0 && a + 0 > 0) }'
        ok $? "$name, $mode: the memory estimate's activations lower too ($(estimate "$tag.$mode") < $(estimate "$tag.none") MB)"
        mem="$mem, $mode $(last "$WORK/$tag.$mode.jsonl" peak_memory_gib)"
    done
    diag "$name: peak GiB: $mem"
}

MODES="uniform block block3 selective norms norms_attn"
check_layout "1 rank" 1
check_layout "TP2" 2 --tensor-model-parallel-size 2
MODES="uniform selective"
check_layout "TP2 + sequence parallel, relative positions" 2 --tensor-model-parallel-size 2 --sequence-parallel \
    --position-embedding-type relative

# HFU by hand (h 64, q = kv = 64, ffn 96, Te 64, Td 24, V 162 padded), per sample forward:
#   encoder layer  Te (8h q + 4 q Te + 4 h ffn) = 64 (32768 + 16384 + 24576)               = 4718592
#   decoder layer  Td (32768 + 2 q Td (causal) + 24576 + 4 h q (cross q, out) + 4 q Te (cross core))
#                  + Te 4 h kv (cross k, v) = 24 (32768 + 3072 + 24576 + 16384 + 16384) + 64 x 16384 = 3284992
#   logits         Td 2 h V = 497664;  model = 3 (2 x 4718592 + 3 x 3284992 + 497664)  = 59369472
# Full uniform repeats every layer (19292160), block 2 two of each stack (16007168), block 3
# the encoder's 2 (capped) and the decoder's 3 (19292160); selective the cores: 2 x 64 x 16384 +
# 3 x 24 x (3072 + 16384) = 3497984; layernorm no GEMM (0).
hfu_ratio() {  # TAG EXPECTED_EXTRA: hardware/model TFLOP/s of the last iteration = 1 + EXTRA/59369472
    awk -v hw="$(last "$WORK/$1.jsonl" hardware_tflops_per_gpu)" -v model="$(last "$WORK/$1.jsonl" model_tflops_per_gpu)" \
        -v want="$2" 'BEGIN { r = model > 0 ? hw / model : 0; e = 1 + want / 59369472;
                              printf "# hardware/model %.9f, by hand %.9f\n", r, e; d = r - e; if (d < 0) d = -d; exit !(d < 1e-7) }'
}
for case in "none 0" "uniform 19292160" "block 16007168" "block3 19292160" "selective 3497984" "norms 0" "norms_attn 3497984"; do
    set -- $case
    hfu_ratio "1_rank.$1" "$2"
    ok $? "HFU, $1: hardware FLOPs = model + $2 per sample, by hand"
done
grep -q "| MFU: [0-9.]*% | HFU: [0-9.]*% |" "$WORK/1_rank.uniform.out" &&
    awk -v m="$(last "$WORK/1_rank.uniform.jsonl" mfu)" -v h="$(last "$WORK/1_rank.uniform.jsonl" hfu)" \
        'BEGIN { exit !(h > m && m > 0) }'
ok $? "the log line shows MFU and HFU, and the JSON's hfu exceeds its mfu with full recompute"

for module in moe moe_act shared_experts; do
    run_app 1 $MODEL --recompute-granularity selective --recompute-modules core_attn $module
    [ $? -ne 0 ] && grep -q "recompute-modules $module: T5 (pretrain_t5) has no mixture-of-experts layers" "$WORK/err"
    ok $? "--recompute-modules $module is refused: $(grep -m1 -o 'recompute-modules.*' "$WORK/err" | cut -c1-100)"
done
run_app 1 $MODEL --recompute-granularity selective --recompute-modules mla_up_proj
[ $? -ne 0 ] && grep -q "recompute-modules mla_up_proj needs multi-latent attention.*supported: core_attn layernorm with T5" "$WORK/err"
ok $? "--recompute-modules mla_up_proj is refused, naming T5's modules"
done_testing
