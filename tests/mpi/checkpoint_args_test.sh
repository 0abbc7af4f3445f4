#!/bin/sh
# checkpoint_args_test.sh: --use-checkpoint-args as Megatron's load_args_from_checkpoint. A tiny
# Llama (RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases, untied output, dropout on) is
# saved on 2 ranks; resuming it with --use-checkpoint-args and none of its shape or architecture
# flags (and a contrary --normalization, which the checkpoint overrides) gives bitwise the losses
# of a resume with every flag; a shape flag on the command line wins over the checkpoint (the
# load then names the tensor whose shape differs); --use-checkpoint-args needs --load; a folder without a
# checkpoint leaves the flags as given.
. "${top_srcdir:-.}/tests/lib.sh"
LLAMA="--args-file $top_srcdir/configs/llama-tiny.args --train-iters 4 --lr-warmup-iters 1 --lr-decay-iters 4
       --log-interval 1 --eval-iters 0 --device cpu --hidden-dropout 0.1 --attention-dropout 0.05"
# what a run needs besides the model: batch, schedule, data
RUN="--micro-batch-size 4 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 1
     --lr-decay-iters 4 --weight-decay 0.1 --train-iters 4 --log-interval 1 --eval-iters 0 --mock-data --device cpu"

run_app 2 $LLAMA --train-iters 2 --save "$WORK/ckpt"
ok $? "a tiny Llama saves iteration 2"
run_app 2 $LLAMA --load "$WORK/ckpt" --metrics-file "$WORK/full.jsonl"
ok $? "resumed with every flag"
run_app 2 $RUN --use-checkpoint-args --load "$WORK/ckpt" --normalization LayerNorm --metrics-file "$WORK/args.jsonl"
status=$?
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -3
ok $status "resumed with --use-checkpoint-args and no model flags (--num-layers, --hidden-size, ... are required otherwise)"
grep "use-checkpoint-args: from the checkpoint:" "$WORK/out" | sed 's/^/# /'
grep -q "from the checkpoint: num_layers 2, hidden_size 64, ffn_hidden_size 96, seq_length 64, num_attention_heads 4, .*num_query_groups 2, position_embedding_type rope, .*hidden_dropout 0.1, attention_dropout 0.05, .*add_bias_linear 0, add_qkv_bias 0, swiglu 1, untie_embeddings_and_output_weights 1, normalization RMSNorm" "$WORK/out"
ok $? "the start-up log names what came from the checkpoint (RMSNorm over the command line's LayerNorm)"
json_field "$WORK/full.jsonl" train lm_loss > "$WORK/full.loss"
json_field "$WORK/args.jsonl" train lm_loss > "$WORK/args.loss"
[ "$(wc -l < "$WORK/full.loss")" -eq 2 ] && cmp -s "$WORK/full.loss" "$WORK/args.loss"
ok $? "the losses of iterations 3 and 4 are bitwise those of the resume with every flag ($(tr '\n' ' ' < "$WORK/args.loss"))"

run_app 2 $RUN --use-checkpoint-args --load "$WORK/ckpt" --hidden-size 128
[ $? -ne 0 ] && grep -q "word_embeddings.weight has shape \[256, 64\], but this model's is \[256, 128\]" "$WORK/err"
ok $? "a shape flag given on the command line wins over the checkpoint (Megatron's), and the load names the mismatch"
run_app 1 $RUN --use-checkpoint-args
[ $? -ne 0 ] && grep -q "use-checkpoint-args requires --load DIR" "$WORK/err"
ok $? "--use-checkpoint-args without --load is refused"
mkdir -p "$WORK/empty"
run_app 1 --args-file "$TINY_ARGS" --train-iters 1 --lr-warmup-iters 0 --eval-iters 0 --use-checkpoint-args --load "$WORK/empty"
[ $? -eq 0 ] && grep -q "no checkpoint in .*empty to provide arguments: using the flags as given" "$WORK/out"
ok $? "a --load folder without a checkpoint leaves the flags as given"
done_testing
