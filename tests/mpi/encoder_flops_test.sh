#!/bin/sh
# tests/mpi/encoder_flops_test.sh: pretrain_bert and pretrain_t5 log their own FLOP counts
# (perf/metrics/flops.h: BERT's bidirectional encoder and heads, T5's encoder, decoder with
# cross-attention and decoder-side logits), not GPT's: the FLOPs per iteration the metrics imply
# (tflops_per_gpu x 1e12 x ranks x tokens per iteration / tokens_per_second) equal the counts
# by hand below, on 2 data-parallel ranks; the JSON's mfu/hfu are those TFLOP/s over
# --peak-tflops and the log line's "MFU: x% | HFU: y%" prints them; full recomputation adds
# the encoder layers' forward to BERT's hardware FLOPs (HFU), not the heads'. The logits count
# the padded vocabulary Megatron-Core's tokenizer gives: 64 for the lower-case test vocabulary,
# 168 for BertWordPieceCase (its 100 extra ids inside) and T5 (its 100 sentinels).
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
bert_corpus bert 160
bert_corpus t5 160 BertWordPieceCase  # T5's, and cased BERT's
COMMON="--hidden-size 32 --num-attention-heads 4 --micro-batch-size 2 --global-batch-size 8 --train-iters 3 --lr 1e-3
        --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 8 --split 949,50,1
        --device cpu --peak-tflops 0.001"
BERT="$COMMON --num-layers 2 --seq-length 32 --max-position-embeddings 32 --data-path $WORK/bert_text_sentence.h5
      --vocab-file $BERT_VOCAB"
T5="$COMMON --encoder-num-layers 2 --decoder-num-layers 3 --kv-channels 8 --ffn-hidden-size 48 --encoder-seq-length 32
    --decoder-seq-length 12 --max-position-embeddings 32 --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase
    --vocab-file $BERT_VOCAB --data-path $WORK/t5_text_sentence.h5"

# check NAME JSONL OUT TOKENS_PER_ITERATION MODEL HARDWARE: the last train line's FLOPs, MFU, HFU
check() {
    python3 - "$2" "$3" "$4" "$5" "$6" <<'PY'
import json, re, sys
metrics, out, tokens, model, hardware = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
last = [json.loads(l) for l in open(metrics) if '"split": "train"' in l][-1]
seconds = tokens / last["tokens_per_second"]
got_model = last["model_tflops_per_gpu"] * 1e12 * 2 * seconds
got_hardware = last["hardware_tflops_per_gpu"] * 1e12 * 2 * seconds
print(f"# FLOPs per iteration from the metrics: model {got_model:.1f} (by hand {model:.0f}), "
      f"hardware {got_hardware:.1f} (by hand {hardware:.0f})")
assert abs(got_model / model - 1) < 1e-5 and abs(got_hardware / hardware - 1) < 1e-5
assert last["tflops_per_gpu"] == last["model_tflops_per_gpu"]
assert abs(last["mfu"] - last["model_tflops_per_gpu"] / 0.001) < 2e-6, last
assert abs(last["hfu"] - last["hardware_tflops_per_gpu"] / 0.001) < 2e-6, last
line = [l for l in open(out) if re.search(r"iteration +3/", l)][-1]
m = re.search(r"\| MFU: ([0-9.]+)% \| HFU: ([0-9.]+)% \|", line)
assert m, line
print(f"# log line: MFU {m.group(1)}%, HFU {m.group(2)}%; JSON mfu {last['mfu']}, hfu {last['hfu']}")
assert abs(float(m.group(1)) - 100 * last["mfu"]) < 0.0051 and abs(float(m.group(2)) - 100 * last["hfu"]) < 0.0051
PY
    ok $? "$1"
}
padded_vocab() { sed -n 's/^ *padded_vocab_size \.* \([0-9]*\)$/\1/p' "$WORK/out"; }

# BERT, l 2, h 32 (q = kv = 32), ffn 128, s 32, padded V 64 (the test vocabulary's 61 tokens, lower
# case: no extra ids), 8 samples = 256 tokens. Per token
# forward: layer 8 h^2 = 8192 (projections) + 4 q s = 4096 (core attention, bidirectional: not
# halved) + 16 h^2 = 16384 (MLP) = 28672, x 2 = 57344; LM head dense 2 h^2 = 2048, logits 2 h V =
# 4096: 63488 x 256 = 16252928. Per sample the pooler 2 h^2 = 2048 and the binary head 2 h x 2 =
# 128: 2176 x 8 = 17408. x 3: 48811008 (GPT's causal count, without the heads, would be 42467328).
PRETRAIN_GPT="$top_builddir/app/pretrain_bert"
run_app 2 $BERT --metrics-file "$WORK/bert.jsonl"
ok $? "pretrain_bert, DP2"
cp "$WORK/out" "$WORK/bert.out"
[ "$(padded_vocab)" = 64 ]
ok $? "BERT's padded vocabulary is 64 ($(padded_vocab))"
check "BERT: the logged TFLOP/s are 48811008 FLOPs per iteration; MFU and HFU in the JSON and the log line" \
    "$WORK/bert.jsonl" "$WORK/bert.out" 256 48811008 48811008
# --tokenizer-type BertWordPieceCase: the vocabulary is Megatron-Core's BertTokenizer's with its 100
# <extra_id_i>, 61 + 100 = 161, padded V 168 (was 64: the file + [BOS]/[EOS], which left out the
# ids the dataset draws its random tokens from). Logits 2 h V = 10752 per token: 57344 + 2048 +
# 10752 = 70144 x 256 = 17956864, + 17408 = 17974272; x 3: 53922816.
run_app 2 $BERT --tokenizer-type BertWordPieceCase --data-path "$WORK/t5_text_sentence.h5" --metrics-file "$WORK/cased.jsonl"
ok $? "pretrain_bert --tokenizer-type BertWordPieceCase, DP2"
[ "$(padded_vocab)" = 168 ]
ok $? "cased BERT's padded vocabulary is 168, the 100 extra ids included ($(padded_vocab))"
check "cased BERT: 53922816 FLOPs per iteration (the logits over 168 columns)" "$WORK/cased.jsonl" "$WORK/out" 256 \
    53922816 53922816
# --bert-no-binary-head: no pooler or binary head, 48811008 - 3 x 17408 = 48758784
run_app 2 $BERT --bert-no-binary-head --metrics-file "$WORK/nobinary.jsonl"
ok $? "pretrain_bert --bert-no-binary-head, DP2"
check "BERT without the binary head: 48758784 FLOPs (no pooler, no binary head)" \
    "$WORK/nobinary.jsonl" "$WORK/out" 256 48758784 48758784
# full recomputation: hardware adds the layers' forward, 256 x 57344 = 14680064
run_app 2 $BERT --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
    --metrics-file "$WORK/recompute.jsonl"
ok $? "pretrain_bert with full recomputation, DP2"
check "BERT full recompute: model 48811008, hardware + the encoder's forward 14680064 = 63491072 (HFU > MFU)" \
    "$WORK/recompute.jsonl" "$WORK/out" 256 48811008 63491072

# T5, encoder 2 layers over Te 32, decoder 3 layers over Td 12, h 32 (q = kv = 32), ffn 48,
# padded V 168 (the vocabulary's 61 tokens + 100 sentinels = 161, to a multiple of 8), 8 samples.
# Encoder per token: 8192 + 4 q Te = 4096 + MLP 2 x 32 x 48 x 2 = 6144 =
# 18432, per sample x 32 = 589824. Decoder per token: 8192 + causal core 2 q Td = 768 + 6144 +
# cross query and output 4 h q = 4096 + cross core 4 q Te = 4096 = 23296, x 12 = 279552, + cross
# keys and values on the encoder's tokens 2 h 2 kv x 32 = 131072: 410624. Logits 12 x 2 h V =
# 129024. Per sample 2 x 589824 + 3 x 410624 + 129024 = 2540544; x 8 x 3 = 60973056.
PRETRAIN_GPT="$top_builddir/app/pretrain_t5"
run_app 2 $T5 --metrics-file "$WORK/t5.jsonl"
ok $? "pretrain_t5, DP2"
[ "$(padded_vocab)" = 168 ]
ok $? "T5's padded vocabulary is 168, the 100 sentinels included ($(padded_vocab))"
check "T5: the logged TFLOP/s are 60973056 FLOPs per iteration (tokens/s count the encoder's 256); MFU and HFU" \
    "$WORK/t5.jsonl" "$WORK/out" 256 60973056 60973056

done_testing
