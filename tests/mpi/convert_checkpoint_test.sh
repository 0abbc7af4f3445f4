#!/bin/sh
# tests/mpi/convert_checkpoint_test.sh: convert_checkpoint between Hugging Face GPT-2 safetensors and
# our HDF5 checkpoint. A tiny GPT-2 (2 layers, n_embd 64, 4 heads, vocab 300, 32 positions)
# made by tests/make_hf_fixture goes HF -> HDF5 -> HF and comes back bitwise identical (tied,
# untied, without the "transformer." prefix, with old attention buffers, sharded, BF16); the
# HDF5 side has Megatron's names, global shapes and qkv layout (checked element by element on
# structured values); bad inputs get one message and leave no output behind.
. "${top_srcdir:-.}/tests/lib.sh"
CONVERT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"

convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
fails_with() {  # fails_with TEXT : the last conversion failed and said TEXT
    [ "$status" -ne 0 ] && grep -qF -- "$1" "$WORK/err"
}
get() {  # get DATASET I [J] : one element of $WORK/ckpt/release.h5
    "$FIXTURE" get "$WORK/ckpt/release.h5" "$@"
}
args_attr() {  # args_attr FILE NAME : the value of an /args attribute
    h5dump -a "/args/$2" "$1" | sed -n 's/^ *(0): *//p' | tr -d '"'
}
nothing_in() {  # nothing_in DIR : DIR missing or empty
    [ ! -d "$1" ] || [ -z "$(ls -A "$1")" ]
}

# ---- tied GPT-2, F32: import ---------------------------------------------------------------
mkdir -p "$WORK/hf"
"$FIXTURE" write "$WORK/hf"; ok $? "fixture: tiny tied GPT-2 in safetensors"
convert --from-hf --input "$WORK/hf" --save "$WORK/ckpt"
ok $? "--from-hf imports it" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
[ "$(cat "$WORK/ckpt/latest_checkpointed_iteration.txt")" = release ] && [ -f "$WORK/ckpt/release.h5" ] &&
    [ ! -e "$WORK/ckpt/release.h5.partial" ] && [ ! -e "$WORK/ckpt/latest_checkpointed_iteration.txt.tmp" ]
ok $? "release.h5 and tracker 'release' written, no temporary files left"

h5ls -r "$WORK/ckpt/release.h5" > "$WORK/ls"
listed() { grep -qF "/model/$1 Dataset {$2}" "$WORK/ls"; }
listed embedding.word_embeddings.weight "384, 64" && listed embedding.position_embeddings.weight "32, 64" &&
    listed decoder.layers.1.input_layernorm.weight 64 && listed decoder.layers.1.input_layernorm.bias 64 &&
    listed decoder.layers.0.self_attention.linear_qkv.weight "192, 64" &&
    listed decoder.layers.0.self_attention.linear_qkv.bias 192 &&
    listed decoder.layers.0.self_attention.linear_proj.weight "64, 64" &&
    listed decoder.layers.1.pre_mlp_layernorm.bias 64 &&
    listed decoder.layers.1.mlp.linear_fc1.weight "256, 64" && listed decoder.layers.1.mlp.linear_fc1.bias 256 &&
    listed decoder.layers.1.mlp.linear_fc2.weight "64, 256" && listed decoder.final_layernorm.weight 64
ok $? "h5ls lists Megatron names in global shapes (vocab 300 padded to 384)"
[ "$(grep -c '^/model/' "$WORK/ls")" -eq 28 ] && ! grep -q output_layer "$WORK/ls" && ! grep -q '^/optimizer' "$WORK/ls"
ok $? "28 tensors, no output_layer (tied), no /optimizer"
R="$WORK/ckpt/release.h5"
[ "$(args_attr "$R" padded_vocab_size)" = 384 ] && [ "$(args_attr "$R" vocab_size)" = 300 ] &&
    [ "$(args_attr "$R" untie_embeddings_and_output_weights)" = 0 ] && [ "$(args_attr "$R" kv_channels)" = 16 ] &&
    [ "$(args_attr "$R" ffn_hidden_size)" = 256 ] && [ "$(args_attr "$R" max_position_embeddings)" = 32 ] &&
    [ "$(args_attr "$R" tokenizer_type)" = GPT2BPETokenizer ]
ok $? "/args: padded_vocab_size 384, vocab_size 300, tied, kv_channels 16, ffn 256, 32 positions"
h5dump -A "$R" > "$WORK/attrs"
grep -A4 'ATTRIBUTE "tokenizer_type"' "$WORK/attrs" | grep -q 'STRSIZE [0-9]' &&
    [ "$(h5dump -a /complete "$R" | sed -n 's/^ *(0): *//p')" = 1 ] &&
    [ "$(h5dump -a /rng/seed "$R" | sed -n 's/^ *(0): *//p')" = 1234 ] &&
    [ "$(h5dump -a /lr_scheduler/num_steps "$R" | sed -n 's/^ *(0): *//p')" = 0 ]
ok $? "complete = 1, fixed-length string attributes, /rng seed 1234, /lr_scheduler num_steps 0"

# c_attn.weight[i][j] = 1000 j + i in layer 0: our row h*48 + s*16 + d is HF column s*64 + h*16 + d
qkv=decoder.layers.0.self_attention.linear_qkv
[ "$(get $qkv.weight 0 0)" = 0 ] && [ "$(get $qkv.weight 16 0)" = 64000 ] && [ "$(get $qkv.weight 32 0)" = 128000 ] &&
    [ "$(get $qkv.weight 48 0)" = 16000 ] && [ "$(get $qkv.weight 69 5)" = 85005 ] &&
    [ "$(get $qkv.weight 191 63)" = 191063 ] && [ "$(get $qkv.weight 100 7)" = 36007 ]
ok $? "qkv weight rows are per head {q, k, v} (head 1's k row 5 = HF column 85), transposed"
[ "$(get $qkv.bias 0)" = 0.5 ] && [ "$(get $qkv.bias 16)" = 64.5 ] && [ "$(get $qkv.bias 69)" = 85.5 ] &&
    [ "$(get $qkv.bias 191)" = 191.5 ]
ok $? "qkv bias permuted the same way"
[ "$(get decoder.layers.0.self_attention.linear_proj.weight 2 5)" = 5002 ] &&
    [ "$(get decoder.layers.0.self_attention.linear_proj.weight 63 1)" = 1063 ]
ok $? "attn.c_proj [in, out] transposed into linear_proj [out, in]"
[ "$(get embedding.word_embeddings.weight 300 0)" = 0 ] && [ "$(get embedding.word_embeddings.weight 383 63)" = 0 ] &&
    [ "$(get embedding.word_embeddings.weight 299 63)" != 0 ]
ok $? "padding rows 300..383 of the embedding are zero"

# ---- export: bitwise round trip ---------------------------------------------------------------
convert --to-hf --load "$WORK/ckpt" --output "$WORK/back"
ok $? "--to-hf exports the folder's checkpoint" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
cmp "$WORK/hf/model.safetensors" "$WORK/back/model.safetensors" && cmp "$WORK/hf/config.json" "$WORK/back/config.json"
ok $? "HF -> HDF5 -> HF: model.safetensors and config.json identical byte for byte"
! grep -aq lm_head "$WORK/back/model.safetensors" && grep -q '"tie_word_embeddings": true' "$WORK/back/config.json"
ok $? "tied model: no lm_head.weight, tie_word_embeddings true"
convert --to-hf --load "$WORK/ckpt/release.h5" --output "$WORK/back_file"
cmp -s "$WORK/hf/model.safetensors" "$WORK/back_file/model.safetensors"
ok $? "--load also takes the .h5 file itself"
convert --to-hf --load "$WORK/ckpt" --output "$WORK/back"
status=$?; fails_with "model.safetensors already exists; pass --overwrite"
ok $? "an existing export is kept unless --overwrite: $(cat "$WORK/err")"
convert --to-hf --load "$WORK/ckpt" --output "$WORK/back" --overwrite && cmp -s "$WORK/hf/model.safetensors" "$WORK/back/model.safetensors"
ok $? "--overwrite replaces it"

# ---- untied, lm_head equal to wte, GPT2Model names, old buffers, other dtypes ------------------
mkdir -p "$WORK/untied"
"$FIXTURE" write "$WORK/untied" --untied
convert --from-hf --input "$WORK/untied" --save "$WORK/ckpt_untied" &&
    [ "$(args_attr "$WORK/ckpt_untied/release.h5" untie_embeddings_and_output_weights)" = 1 ] &&
    h5ls -r "$WORK/ckpt_untied/release.h5" | grep -qF '/model/output_layer.weight Dataset {384, 64}'
ok $? "a different lm_head.weight imports as an untied output_layer.weight [384, 64]"
convert --to-hf --load "$WORK/ckpt_untied" --output "$WORK/untied_back" &&
    cmp "$WORK/untied/model.safetensors" "$WORK/untied_back/model.safetensors" &&
    cmp "$WORK/untied/config.json" "$WORK/untied_back/config.json" &&
    grep -q '"tie_word_embeddings": false' "$WORK/untied_back/config.json"
ok $? "untied model round-trips bitwise with its lm_head, tie_word_embeddings false"

mkdir -p "$WORK/tied_copy"
"$FIXTURE" write "$WORK/tied_copy" --tied-lm-head
convert --from-hf --input "$WORK/tied_copy/model.safetensors" --save "$WORK/ckpt_tied_copy" &&
    [ "$(args_attr "$WORK/ckpt_tied_copy/release.h5" untie_embeddings_and_output_weights)" = 0 ] &&
    convert --to-hf --load "$WORK/ckpt_tied_copy" --output "$WORK/tied_copy_back" &&
    cmp "$WORK/hf/model.safetensors" "$WORK/tied_copy_back/model.safetensors"
ok $? "an lm_head.weight equal to wte imports as tied (input given as the .safetensors file)"

mkdir -p "$WORK/bare"
"$FIXTURE" write "$WORK/bare" --no-prefix --attn-buffers
convert --from-hf --input "$WORK/bare" --save "$WORK/ckpt_bare" &&
    convert --to-hf --load "$WORK/ckpt_bare" --output "$WORK/bare_back" &&
    cmp "$WORK/hf/model.safetensors" "$WORK/bare_back/model.safetensors"
ok $? "names without 'transformer.' (GPT2Model) and attn.bias/masked_bias buffers: imported, exported with the prefix" ||
    sed 's/^/# /' "$WORK/err"

mkdir -p "$WORK/sharded"
"$FIXTURE" write "$WORK/sharded" --shards 2
convert --from-hf --input "$WORK/sharded" --save "$WORK/ckpt_sharded" && grep -q 'from 2 files' "$WORK/out" &&
    convert --to-hf --load "$WORK/ckpt_sharded" --output "$WORK/sharded_back" &&
    cmp "$WORK/hf/model.safetensors" "$WORK/sharded_back/model.safetensors"
ok $? "a sharded model (model.safetensors.index.json, 2 files) imports like the single file"

mkdir -p "$WORK/bf16"
"$FIXTURE" write "$WORK/bf16" --dtype BF16
convert --from-hf --input "$WORK/bf16" --save "$WORK/ckpt_bf16" &&
    convert --to-hf --load "$WORK/ckpt_bf16" --output "$WORK/bf16_back" --dtype bfloat16 &&
    cmp "$WORK/bf16/model.safetensors" "$WORK/bf16_back/model.safetensors" &&
    cmp "$WORK/bf16/config.json" "$WORK/bf16_back/config.json"
ok $? "BF16 safetensors -> float32 HDF5 -> --dtype bfloat16: identical bytes"

mkdir -p "$WORK/f16"
"$FIXTURE" write "$WORK/f16" --dtype F16
convert --from-hf --input "$WORK/f16" --save "$WORK/ckpt_f16" &&
    convert --to-hf --load "$WORK/ckpt_f16" --output "$WORK/f16_back" &&
    "$FIXTURE" same-values "$WORK/f16/model.safetensors" "$WORK/f16_back/model.safetensors"
ok $? "F16 safetensors import exactly (float32 export holds the same values)"

convert --from-hf --input "$WORK/hf" --save "$WORK/ckpt64" --make-vocab-size-divisible-by 64 &&
    [ "$(args_attr "$WORK/ckpt64/release.h5" padded_vocab_size)" = 320 ] &&
    [ "$(args_attr "$WORK/ckpt64/release.h5" make_vocab_size_divisible_by)" = 64 ]
ok $? "--make-vocab-size-divisible-by 64 pads 300 to 320"

# ---- refusals: one message, no output -------------------------------------------------------
mkdir -p "$WORK/wide"
cp "$WORK/hf/model.safetensors" "$WORK/wide/"
sed 's/"n_embd": 64/"n_embd": 128/' "$WORK/hf/config.json" > "$WORK/wide/config.json"
convert --from-hf --input "$WORK/wide" --save "$WORK/out_wide"
status=$?; fails_with "tensor 'transformer.wte.weight' has shape [300, 64], expected [300, 128]" &&
    grep -qF "config.json says n_layer 2, n_embd 128" "$WORK/err" && [ "$(wc -l < "$WORK/err")" -eq 1 ] &&
    nothing_in "$WORK/out_wide"
ok $? "config n_embd 128 vs 64-wide tensors: tensor and both shapes named, nothing written"
sed 's/^/# /' "$WORK/err"

mkdir -p "$WORK/short"
sed 's/"n_layer": 2/"n_layer": 1/' "$WORK/hf/config.json" > "$WORK/short/config.json"
cp "$WORK/hf/model.safetensors" "$WORK/short/"
convert --from-hf --input "$WORK/short" --save "$WORK/out_short"
status=$?; fails_with "tensor 'transformer.h.1." && fails_with "is not a parameter" && nothing_in "$WORK/out_short"
ok $? "tensors beyond the config's layers are refused: $(cat "$WORK/err")"

mkdir -p "$WORK/relu"
sed 's/"gelu_new"/"relu"/' "$WORK/hf/config.json" > "$WORK/relu/config.json"
cp "$WORK/hf/model.safetensors" "$WORK/relu/"
convert --from-hf --input "$WORK/relu" --save "$WORK/out_relu"
status=$?; fails_with 'activation_function "relu" cannot be converted' && nothing_in "$WORK/out_relu"
ok $? "another activation function is refused: $(cat "$WORK/err")"

mkdir -p "$WORK/cut"
cp "$WORK/hf/config.json" "$WORK/cut/"
head -c 300000 "$WORK/hf/model.safetensors" > "$WORK/cut/model.safetensors"
convert --from-hf --input "$WORK/cut" --save "$WORK/out_cut"
status=$?; fails_with "cut/model.safetensors: tensor '" && fails_with "truncated" && nothing_in "$WORK/out_cut"
ok $? "a truncated safetensors file is named with its tensor, nothing written: $(cat "$WORK/err")"

convert --from-hf --input "$WORK/no_such_dir" --save "$WORK/out_missing"
status=$?; fails_with "no_such_dir: No such file or directory" && nothing_in "$WORK/out_missing"
ok $? "a missing input is named: $(cat "$WORK/err")"
convert --to-hf --load "$WORK/no_such_ckpt" --output "$WORK/out_missing2"
status=$?; fails_with "no_such_ckpt: No such file or directory" && nothing_in "$WORK/out_missing2"
ok $? "a missing checkpoint is named: $(cat "$WORK/err")"
convert --to-hf --load "$WORK/hf" --output "$WORK/out_notckpt"
status=$?; fails_with "latest_checkpointed_iteration.txt: cannot read the tracker" && nothing_in "$WORK/out_notckpt"
ok $? "a folder without a tracker is refused: $(cat "$WORK/err")"

cp "$WORK/ckpt/release.h5" "$WORK/incomplete.h5"
"$FIXTURE" set-attr "$WORK/incomplete.h5" complete 0
convert --to-hf --load "$WORK/incomplete.h5" --output "$WORK/out_incomplete"
status=$?; fails_with "incomplete.h5: the checkpoint is not complete" && nothing_in "$WORK/out_incomplete"
ok $? "a checkpoint with complete = 0 is refused, nothing written: $(cat "$WORK/err")"

convert --from-hf --input "$WORK/hf" --save "$WORK/ckpt"
status=$?; fails_with "release.h5 already exists; pass --overwrite"
ok $? "an existing checkpoint is kept unless --overwrite"
convert --from-hf --input "$WORK/untied" --save "$WORK/ckpt" --overwrite &&
    [ "$(args_attr "$WORK/ckpt/release.h5" untie_embeddings_and_output_weights)" = 1 ]
ok $? "--overwrite replaces it"

convert --to-hf --from-hf --load "$WORK/ckpt" --output "$WORK/x"
status=$?; fails_with "exactly one of --to-hf and --from-hf"
ok $? "flag mistakes are one message: $(cat "$WORK/err")"
convert --help && grep -q -- '--make-vocab-size-divisible-by' "$WORK/out"
ok $? "--help describes the flags"
timeout 120 "$MPIEXEC" -n 2 "$CONVERT" --to-hf --load "$WORK/ckpt" --output "$WORK/out_mpi" >"$WORK/out" 2>"$WORK/err"
status=$?; fails_with "runs as one process, not 2" && nothing_in "$WORK/out_mpi"
ok $? "more than one MPI rank is refused"
done_testing
