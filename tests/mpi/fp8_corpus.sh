# fp8_corpus.sh: what the fp8 training tests share (sourced after tests/lib.sh): the Shakespeare
# corpus through the HuggingFaceTokenizer of tests/data/hf-bpe-600 (one TAP line), the tiny GPT on
# it ($BASE, CPU, no precision flag), Megatron's fp8 flags of the tests ($FP8), the losses of
# $WORK/out, and `within`, the relative comparison of two loss files.
HF_TOKENIZER="$top_srcdir/tests/data/hf-bpe-600"
awk 'BEGIN { RS = ""; n = 0 } n < 150 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/docs.jsonl"
"$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF_TOKENIZER" --append-eod > "$WORK/pre.out" 2>&1
ok $? "the corpus: Shakespeare with the HuggingFaceTokenizer of tests/data/hf-bpe-600"

BASE="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
     --micro-batch-size 4 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
     --weight-decay 0.1 --clip-grad 1.0 --init-method-std 0.02 --hidden-dropout 0.0 --attention-dropout 0.0
     --seed 1234 --log-interval 1 --eval-iters 0 --split 100,0,0 --data-path $WORK/corpus_text_document
     --data-cache-path $WORK/cache --tokenizer-type HuggingFaceTokenizer --tokenizer-model $HF_TOKENIZER
     --make-vocab-size-divisible-by 64 --device cpu --train-iters 10"
FP8="--fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max"
losses() { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/lm loss: //'; }
# within A B TOLERANCE : the same number of losses (at least 3), each pair within TOLERANCE relative
within() {
    awk -v t="$3" 'NR == FNR { a[FNR] = $1; n = FNR; next } { d = (a[FNR] - $1) / a[FNR]; if (d < 0) d = -d;
                   if (d > worst) worst = d; m = FNR } END { printf "%.2g\n", worst; exit !(n == m && n >= 3 && worst <= t) }' "$1" "$2"
}
