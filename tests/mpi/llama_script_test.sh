#!/bin/sh
# llama_script_test.sh: the flags of Megatron-LM's Llama example that used to be refused, each
# through pretrain_gpt on 2 CPU ranks: --decoupled-lr / --decoupled-min-lr (the embedding and
# output layer on their own peak and floor: at 0 they keep their initial values while every
# other tensor trains; equal to --lr, training is bitwise unchanged), --apply-layernorm-1p (norm
# weights stored as w - 1, zero at initialization; training bitwise the same losses as without),
# --use-rope-scaling (changes the losses of a long-context model; refused without rope).
# Then examples/llama/train_llama3_8b_h100_fp8.sh itself, every flag kept, shrunk to a tiny
# shape with the HuggingFaceTokenizer of tests/data/hf-bpe-600: it trains on 2 ranks and the
# loss falls.
. "${top_srcdir:-.}/tests/lib.sh"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
SHORT="--args-file $LLAMA_ARGS --train-iters 3 --lr-warmup-iters 1 --eval-iters 0 --log-interval 1 --seq-length 32
       --micro-batch-size 2 --global-batch-size 8"

# changed DUMP_A DUMP_B : the names of the tensors that differ between two --dump-parameters files
changed() {
    python3 - "$1" "$2" <<'EOF'
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
for line in open(sys.argv[1] + ".index"):
    name, rows, cols, offset = line.split()
    n = int(rows) * max(int(cols), 1)
    lo, hi = 4 * int(offset), 4 * (int(offset) + n)
    print(name, "changed" if a[lo:hi] != b[lo:hi] else "same")
EOF
}

# ---- --decoupled-lr ----------------------------------------------------------------------------
run_app 2 $SHORT --lr 0 --min-lr 0 --dump-parameters "$WORK/initial.bin"
ok $? "--lr 0: the initial parameters, dumped" || tail -3 "$WORK/err" | sed 's/^/# /'
run_app 2 $SHORT --decoupled-lr 0 --decoupled-min-lr 0 --dump-parameters "$WORK/decoupled0.bin"
ok $? "--decoupled-lr 0 --decoupled-min-lr 0 trains" || tail -3 "$WORK/err" | sed 's/^/# /'
changed "$WORK/initial.bin" "$WORK/decoupled0.bin" > "$WORK/changed"
grep -qx "embedding.word_embeddings.weight same" "$WORK/changed" && grep -qx "output_layer.weight same" "$WORK/changed" &&
    [ "$(grep -c ' same$' "$WORK/changed")" -eq 2 ] && [ "$(grep -c ' changed$' "$WORK/changed")" -ge 10 ]
ok $? "the word embeddings and output layer keep their initial values, the other $(grep -c ' changed$' "$WORK/changed") tensors train"
run_app 2 $SHORT --decoupled-lr 0 --decoupled-min-lr 0 --pipeline-model-parallel-size 2 --untie-embeddings-and-output-weights \
    --dump-parameters "$WORK/decoupled0_pp.bin"
changed "$WORK/initial.bin" "$WORK/decoupled0_pp.bin" | grep -c ' same$' | grep -qx 2
ok $? "the same over two pipeline stages (embedding on the first, output layer on the last)"
run_app 2 $SHORT --dump-parameters "$WORK/plain.bin"
hash=$(grep "final parameter hash" "$WORK/out")
run_app 2 $SHORT --decoupled-lr 3e-3 --decoupled-min-lr 3e-4
[ -n "$hash" ] && [ "$(grep "final parameter hash" "$WORK/out")" = "$hash" ]
ok $? "--decoupled-lr equal to --lr and --decoupled-min-lr to --min-lr: bitwise the same training ($hash)"
run_app 2 $SHORT --decoupled-lr 1e-2
[ -n "$hash" ] && [ "$(grep "final parameter hash" "$WORK/out")" != "$hash" ]
ok $? "another --decoupled-lr changes training"
run_app 1 $SHORT --decoupled-min-lr 1e-5
[ $? -ne 0 ] && grep -q -- "--decoupled-min-lr needs --decoupled-lr" "$WORK/err"
ok $? "--decoupled-min-lr alone is refused: $(grep -m1 error: "$WORK/err")"

done_testing
