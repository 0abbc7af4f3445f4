#!/bin/sh
# t5_hf_test.sh: convert_checkpoint between our T5 checkpoint and Hugging Face
# T5ForConditionalGeneration (issue 46). A tiny T5 of the kind HF computes as ours (relative
# positions, RMSNorm, no biases, untied output layer, SwiGLU = HF gated-silu; 2 heads of d_kv 16,
# 3 encoder and 2 decoder layers, padded vocabulary = the tokenizer's) trained 3 iterations on
# DP2 goes ours -> HF -> ours -> HF: every tensor comes back bitwise (h5diff), the second export
# is the first byte for byte; the safetensors header and config.json are what transformers'
# T5ForConditionalGeneration loads (names, shapes, T5Config fields), and the q/k/v, cross k/v and
# wi_0/wi_1 splits are checked element by element against our fused tensors, the queries divided
# by sqrt(d_kv) = 4 (HF's attention has no 1/sqrt(d) scaling); and our logits (tests/tools/t5_logits)
# are those of HF's forward pass written out in float64 from modeling_t5.py
# (tests/tools/hf_t5_reference.py) on the export, within 1e-4 of the largest logit (measured 9e-7;
# leaving out HF's missing scaling there gives 0.8). The imported checkpoint fine-tunes
# with the original's losses, bitwise. A GeLU variant (wi; "gelu": Megatron's MLP without linear
# biases computes the exact GeLU; its logits too; "gelu_new" from a checkpoint recording the
# tanh form) and a bfloat16 export follow, then what is refused both ways, each naming the missing feature.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
CONVERT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"
PRETRAIN_GPT="$top_builddir/app/pretrain_t5"   # run_app's program
convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
safetensors_header() {  # FILE : "NAME DTYPE d0,d1" per tensor, sorted
    python3 - "$1" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
assert 8 + n + end == len(data), "the tensors do not fill the file"
for name in sorted(k for k in header if k != "__metadata__"):
    v = header[name]
    print(name, v["dtype"], ",".join(map(str, v["shape"])))
PY
}
safetensors_value() {  # FILE NAME ROW COL : one F32 element
    python3 - "$@" <<'PY'
import json, struct, sys
path, name, row, col = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
cols = t["shape"][1] if len(t["shape"]) == 2 else 1
offset = 8 + n + t["data_offsets"][0] + 4 * (row * cols + col)
print("%.9g" % struct.unpack("<f", data[offset:offset + 4])[0])
PY
}
ours_value() { printf '%.9g\n' "$("$FIXTURE" get "$1" "$2" "$3" "$4")"; }
config() { python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1] + "/config.json"))[sys.argv[2]]))' "$1" "$2"; }

bert_corpus t5 120 BertWordPieceCase
HF_T5="--encoder-num-layers 3 --decoder-num-layers 2 --hidden-size 32 --num-attention-heads 2 --kv-channels 16
       --ffn-hidden-size 24 --encoder-seq-length 32 --decoder-seq-length 12 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --log-interval 1 --eval-iters 0
       --make-vocab-size-divisible-by 1 --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file $BERT_VOCAB
       --data-path $WORK/t5_text_sentence.h5 --split 949,50,1 --position-embedding-type relative
       --relative-attention-num-buckets 16 --relative-attention-max-distance 20 --normalization RMSNorm
       --norm-epsilon 1e-6 --disable-bias-linear --untie-embeddings-and-output-weights --hidden-dropout 0
       --attention-dropout 0 --init-method-std 0.2"
REFERENCE="$top_srcdir/tests/tools/hf_t5_reference.py"
logits() {  # logits CKPT PREFIX FLAGS... : our logits of t5_logits' sample (seed 7)
    ck=$1 prefix=$2; shift 2
    timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/t5_logits" "$prefix" $HF_T5 "$@" --micro-batch-size 1 \
        --global-batch-size 1 --train-iters 1 --load "$ck" --finetune --seed 7 > "$WORK/logits.out" 2>&1
}
run_app 2 $HF_T5 --swiglu --train-iters 3 --save "$WORK/ck" --save-interval 3
ok $? "a tiny HF-compatible T5 (SwiGLU) trains 3 iterations on DP2 and saves"
CK="$WORK/ck/iter_0000003.h5"

convert --to-hf --load "$WORK/ck" --output "$WORK/hf"
ok $? "exported: $(cat "$WORK/out")"
ST="$WORK/hf/model.safetensors"
safetensors_header "$ST" > "$WORK/header"
V=$(config "$WORK/hf" vocab_size)
expected() {
    echo "shared.weight F32 $V,32"; echo "lm_head.weight F32 $V,32"
    echo "encoder.final_layer_norm.weight F32 32"; echo "decoder.final_layer_norm.weight F32 32"
    for s in encoder decoder; do echo "$s.block.0.layer.0.SelfAttention.relative_attention_bias.weight F32 16,2"; done
    for l in 0 1 2; do
        b="encoder.block.$l.layer"
        echo "$b.0.layer_norm.weight F32 32"; echo "$b.1.layer_norm.weight F32 32"
        for p in q k v; do echo "$b.0.SelfAttention.$p.weight F32 32,32"; done
        echo "$b.0.SelfAttention.o.weight F32 32,32"
        echo "$b.1.DenseReluDense.wi_0.weight F32 24,32"; echo "$b.1.DenseReluDense.wi_1.weight F32 24,32"
        echo "$b.1.DenseReluDense.wo.weight F32 32,24"
    done
    for l in 0 1; do
        b="decoder.block.$l.layer"
        echo "$b.0.layer_norm.weight F32 32"; echo "$b.1.layer_norm.weight F32 32"; echo "$b.2.layer_norm.weight F32 32"
        for p in q k v o; do echo "$b.0.SelfAttention.$p.weight F32 32,32"; echo "$b.1.EncDecAttention.$p.weight F32 32,32"; done
        echo "$b.2.DenseReluDense.wi_0.weight F32 24,32"; echo "$b.2.DenseReluDense.wi_1.weight F32 24,32"
        echo "$b.2.DenseReluDense.wo.weight F32 32,24"
    done
}
expected | sort > "$WORK/expected"
diff "$WORK/expected" "$WORK/header" > "$WORK/header.diff"
ok $? "model.safetensors holds T5ForConditionalGeneration's $(wc -l < "$WORK/header") tensors, named and shaped as transformers loads them"
sed 's/^/#   /' "$WORK/header.diff" | head -6
[ "$(config "$WORK/hf" model_type)" = '"t5"' ] && [ "$(config "$WORK/hf" architectures)" = '["T5ForConditionalGeneration"]' ] &&
    [ "$(config "$WORK/hf" feed_forward_proj)" = '"gated-silu"' ] && [ "$(config "$WORK/hf" tie_word_embeddings)" = false ] &&
    [ "$(config "$WORK/hf" num_layers)" = 3 ] && [ "$(config "$WORK/hf" num_decoder_layers)" = 2 ] &&
    [ "$(config "$WORK/hf" d_kv)" = 16 ] && [ "$(config "$WORK/hf" d_ff)" = 24 ] && [ "$(config "$WORK/hf" num_heads)" = 2 ] &&
    [ "$(config "$WORK/hf" relative_attention_num_buckets)" = 16 ] &&
    [ "$(config "$WORK/hf" relative_attention_max_distance)" = 20 ] && [ "$(config "$WORK/hf" layer_norm_epsilon)" = 1e-06 ] &&
    [ "$(config "$WORK/hf" dropout_rate)" = 0.0 ] && [ "$V" -gt 0 ]
ok $? "config.json is T5Config's: model_type t5, gated-silu, untied, 3 + 2 layers, d_kv 16, d_ff 24, 16 buckets of max distance 20, epsilon 1e-06, vocab $V"

# element by element: q (divided by sqrt(16) = 4), k, v of head 1; cross k, v; wi_0, wi_1
L=encoder.layers.1 B=encoder.block.1.layer D=decoder.layers.1 DB=decoder.block.1.layer
q=$(ours_value "$CK" $L.self_attention.linear_qkv.weight $((3 * 16 + 5)) 7)
[ "$(safetensors_value "$ST" $B.0.SelfAttention.q.weight $((16 + 5)) 7)" = \
  "$(python3 -c "import struct; print('%.9g' % (struct.unpack('f', struct.pack('f', $q))[0] / 4))")" ] &&
    [ "$(safetensors_value "$ST" $B.0.SelfAttention.k.weight $((16 + 5)) 7)" = "$(ours_value "$CK" $L.self_attention.linear_qkv.weight $((4 * 16 + 5)) 7)" ] &&
    [ "$(safetensors_value "$ST" $B.0.SelfAttention.v.weight 3 9)" = "$(ours_value "$CK" $L.self_attention.linear_qkv.weight $((2 * 16 + 3)) 9)" ] &&
    [ "$(safetensors_value "$ST" $DB.1.EncDecAttention.k.weight $((16 + 2)) 4)" = "$(ours_value "$CK" $D.cross_attention.linear_kv.weight $((2 * 16 + 2)) 4)" ] &&
    [ "$(safetensors_value "$ST" $DB.1.EncDecAttention.v.weight $((16 + 2)) 4)" = "$(ours_value "$CK" $D.cross_attention.linear_kv.weight $((3 * 16 + 2)) 4)" ] &&
    [ "$(safetensors_value "$ST" $B.1.DenseReluDense.wi_0.weight 5 6)" = "$(ours_value "$CK" $L.mlp.linear_fc1.weight 5 6)" ] &&
    [ "$(safetensors_value "$ST" $B.1.DenseReluDense.wi_1.weight 5 6)" = "$(ours_value "$CK" $L.mlp.linear_fc1.weight $((24 + 5)) 6)" ] &&
    [ "$(safetensors_value "$ST" decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight 3 1)" = \
      "$(ours_value "$CK" decoder_relative_pos_emb.relative_attention_bias.weight 3 1)" ]
ok $? "q (ours / 4), k, v of head 1, the cross-attention's k and v, wi_0 (gate) and wi_1 (up), the decoder's bias table: element by element"

logits "$WORK/ck" "$WORK/ours" --swiglu && python3 "$REFERENCE" "$WORK/hf" "$WORK/ours" > "$WORK/reference.out" 2>&1
ok $? "our logits are HF T5ForConditionalGeneration's (its forward written out in float64, tests/tools/hf_t5_reference.py): $(cut -c1-170 "$WORK/reference.out")"

convert --from-hf --input "$WORK/hf" --save "$WORK/back" --make-vocab-size-divisible-by 1
ok $? "imported back: $(cat "$WORK/out")"
h5diff "$CK" "$WORK/back/release.h5" /model /model > "$WORK/diff" 2>&1
ok $? "every tensor comes back bitwise (h5diff /model)"
convert --to-hf --load "$WORK/back" --output "$WORK/hf2"
cmp -s "$ST" "$WORK/hf2/model.safetensors" && cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json"
ok $? "exported again, model.safetensors and config.json are the first export's, byte for byte"

# transformers 5 saves a new T5's lm_head, tied to the shared embedding at creation, once (as
# shared.weight): with tie_word_embeddings false that matrix is the unscaled output layer
rm -rf "$WORK/hf_nohead" "$WORK/nohead"; cp -r "$WORK/hf" "$WORK/hf_nohead"
python3 - "$WORK/hf_nohead/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body, kept, offset = data[8 + n:], {}, 0
blobs = []
for name, v in header.items():
    if name == "lm_head.weight": continue
    if name != "__metadata__":
        b, e = v["data_offsets"]
        blobs.append(body[b:e]); v = dict(v, data_offsets=[offset, offset + e - b]); offset += e - b
    kept[name] = v
text = json.dumps(kept).encode(); text += b" " * (-len(text) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
convert --from-hf --input "$WORK/hf_nohead" --save "$WORK/nohead" --make-vocab-size-divisible-by 1 &&
    grep -q "has no lm_head.weight" "$WORK/out" &&
    [ "$(ours_value "$WORK/nohead/release.h5" lm_head.output_layer.weight 7 5)" = "$(ours_value "$CK" embedding.word_embeddings.weight 7 5)" ] &&
    [ "$(ours_value "$WORK/nohead/release.h5" lm_head.output_layer.weight 40 31)" = "$(ours_value "$CK" embedding.word_embeddings.weight 40 31)" ]
ok $? "an export without lm_head.weight (transformers 5's tied save) imports with the shared embedding as its output layer: $(grep -o 'has no lm_head.*' "$WORK/out" | cut -c1-90)"

# the stacks' embed_tokens saved beside shared.weight (transformers 4's tied save; 5's untied
# one): equal copies import, a differing one (untied input embeddings) is refused by name
add_embed_copies() {  # add_embed_copies DIR DECODER_DELTA
    rm -rf "$WORK/$1" "$WORK/emb_$1"; cp -r "$WORK/hf" "$WORK/$1"
    python3 - "$WORK/$1/model.safetensors" "$2" <<'PY'
import json, struct, sys
path, delta = sys.argv[1], float(sys.argv[2])
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = data[8 + n:]
b, e = header["shared.weight"]["data_offsets"]
shared = body[b:e]
decoder = bytearray(shared)
if delta:
    first = struct.unpack_from("<f", decoder, 0)[0]
    struct.pack_into("<f", decoder, 0, first + delta)
blobs, offset = [body], len(body)
for name, blob in (("encoder.embed_tokens.weight", shared), ("decoder.embed_tokens.weight", bytes(decoder))):
    header[name] = dict(header["shared.weight"], data_offsets=[offset, offset + len(blob)])
    blobs.append(blob); offset += len(blob)
text = json.dumps(header).encode(); text += b" " * (-len(text) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
    convert --from-hf --input "$WORK/$1" --save "$WORK/emb_$1" --make-vocab-size-divisible-by 1
}
add_embed_copies hf_copies 0 && h5diff "$CK" "$WORK/emb_hf_copies/release.h5" /model /model > "$WORK/diff" 2>&1
ok $? "encoder and decoder embed_tokens equal to shared.weight import (the same tensors as without them)"
add_embed_copies hf_untied 0.5
[ $? -ne 0 ] && grep -q "'decoder.embed_tokens.weight' differs from 'shared.weight'" "$WORK/err" && [ ! -e "$WORK/emb_hf_untied/release.h5" ]
ok $? "a decoder embed_tokens unlike shared.weight (untied input embeddings) is refused: $(grep -o "differs from.*" "$WORK/err" | head -1 | cut -c1-100)"

# the imported checkpoint trains as the original does
run_app 2 $HF_T5 --swiglu --train-iters 2 --load "$WORK/ck" --finetune --metrics-file "$WORK/a.jsonl"
ok $? "the original checkpoint fine-tunes on DP2"
run_app 2 $HF_T5 --swiglu --train-iters 2 --load "$WORK/back" --finetune --metrics-file "$WORK/b.jsonl"
ok $? "the imported one too"
a=$(json_field "$WORK/a.jsonl" train lm_loss | tr '\n' ' ') b=$(json_field "$WORK/b.jsonl" train lm_loss | tr '\n' ' ')
[ -n "$a" ] && [ "$a" = "$b" ]
ok $? "with the same losses, bitwise: $b"

# GeLU (wi): without linear biases Megatron's MLP has no bias-GeLU fusion and computes the exact
# GeLU (F.gelu), HF's "gelu"; a checkpoint recording the fusion's tanh form (bias_gelu_fusion 1,
# forged on a copy; pretrain_t5 --use-checkpoint-args keeps it) exports as gelu_new; both
# imports record their form, so the round trip gives the same feed_forward_proj
run_app 1 $HF_T5 --train-iters 1 --global-batch-size 2 --save "$WORK/gelu" --save-interval 1
convert --to-hf --load "$WORK/gelu" --output "$WORK/hf_gelu"
[ $? -eq 0 ] && [ "$(config "$WORK/hf_gelu" feed_forward_proj)" = '"gelu"' ] &&
    [ "$(config "$WORK/hf_gelu" dense_act_fn)" = '"gelu"' ] &&
    safetensors_header "$WORK/hf_gelu/model.safetensors" | grep -q "^encoder.block.2.layer.1.DenseReluDense.wi.weight F32 24,32$" &&
    ! safetensors_header "$WORK/hf_gelu/model.safetensors" | grep -q "wi_0"
ok $? "a GeLU T5 (exact GeLU: --disable-bias-linear turns the fusion off) exports as feed_forward_proj gelu with DenseReluDense.wi"
logits "$WORK/gelu" "$WORK/ours_gelu" && python3 "$REFERENCE" "$WORK/hf_gelu" "$WORK/ours_gelu" > "$WORK/reference.out" 2>&1
ok $? "its logits are HF's too: $(cut -c1-170 "$WORK/reference.out")"
cp -r "$WORK/gelu" "$WORK/gelu_tanh"
"$FIXTURE" set-arg "$WORK/gelu_tanh/iter_0000001.h5" bias_gelu_fusion int:1 > /dev/null 2>&1 &&
    convert --to-hf --load "$WORK/gelu_tanh" --output "$WORK/hf_gelu_tanh" &&
    [ "$(config "$WORK/hf_gelu_tanh" feed_forward_proj)" = '"gelu_new"' ]
ok $? "a checkpoint recording the tanh form (bias_gelu_fusion 1) exports as gelu_new"
logits "$WORK/gelu_tanh" "$WORK/ours_gelu_tanh" --use-checkpoint-args &&
    python3 "$REFERENCE" "$WORK/hf_gelu_tanh" "$WORK/ours_gelu_tanh" > "$WORK/reference.out" 2>&1 &&
    ! python3 "$REFERENCE" "$WORK/hf_gelu" "$WORK/ours_gelu_tanh" 1e-6 > "$WORK/other.out" 2>&1
ok $? "with --use-checkpoint-args its logits are HF's gelu_new ones, not gelu's: $(cut -c1-120 "$WORK/reference.out")"
for form in gelu gelu_tanh; do
    rm -rf "$WORK/back_$form" "$WORK/hf_back_$form"
    convert --from-hf --input "$WORK/hf_$form" --save "$WORK/back_$form" &&
        convert --to-hf --load "$WORK/back_$form" --output "$WORK/hf_back_$form" &&
        [ "$(config "$WORK/hf_back_$form" feed_forward_proj)" = "$(config "$WORK/hf_$form" feed_forward_proj)" ]
    ok $? "import and export of the $form export keep feed_forward_proj $(config "$WORK/hf_$form" feed_forward_proj)"
done
convert --to-hf --load "$WORK/gelu" --output "$WORK/hf_bf16" --dtype bfloat16
[ $? -eq 0 ] && [ "$(config "$WORK/hf_bf16" torch_dtype)" = '"bfloat16"' ] &&
    ! safetensors_header "$WORK/hf_bf16/model.safetensors" | grep -qv " BF16 "
ok $? "--dtype bfloat16 writes every tensor BF16, torch_dtype bfloat16"

# refused on export, naming the missing feature (the /args forged on a copy)
refuse_export() {  # refuse_export WHAT MESSAGE ARG VALUE
    cp "$CK" "$WORK/forged.h5"
    "$FIXTURE" set-arg "$WORK/forged.h5" "$3" "$4" > /dev/null 2>&1
    convert --to-hf --load "$WORK/forged.h5" --output "$WORK/refused"
    [ $? -ne 0 ] && grep -q -- "$2" "$WORK/err" && [ ! -e "$WORK/refused/model.safetensors" ]
    ok $? "export of $1 is refused: $(sed 's/.*layout: //' "$WORK/err" | head -1 | cut -c1-110)"
}
refuse_export "learned positions" "learned absolute position embeddings; HF T5 has relative position buckets only" \
    position_embedding_type str:learned_absolute
refuse_export "LayerNorm" "RMSNorm without bias (--normalization RMSNorm)" normalization str:LayerNorm
refuse_export "linear biases" "linear biases; HF T5 has none (--disable-bias-linear)" add_bias_linear int:1
refuse_export "a tied output layer" "scales by d_model^-0.5" untie_embeddings_and_output_weights int:0

# refused on import: config.json settings our model does not compute
refuse_import() {  # refuse_import WHAT MESSAGE PYTHON_EDIT
    rm -rf "$WORK/hf_bad" "$WORK/bad"; cp -r "$WORK/hf" "$WORK/hf_bad"
    python3 -c "import json; p='$WORK/hf_bad/config.json'; c=json.load(open(p)); $3; json.dump(c, open(p, 'w'))"
    convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad"
    [ $? -ne 0 ] && grep -q -- "$2" "$WORK/err" && [ ! -e "$WORK/bad/release.h5" ]
    ok $? "import of $1 is refused: $(sed 's/.*equivalent here: //' "$WORK/err" | head -1 | cut -c1-110)"
}
refuse_import "T5 v1.1's gated GeLU" "gated GeLU (T5 v1.1, Flan-T5" "c['feed_forward_proj'] = 'gated-gelu'"
refuse_import "the original T5's ReLU" "its MLP is ReLU (the original T5)" "del c['feed_forward_proj']"
refuse_import "tied embeddings" "tied to the embeddings (tie_word_embeddings" "c['tie_word_embeddings'] = True"
refuse_import "a missing decoder layer" "decoder.block.2.layer.0.layer_norm.weight" "c['num_decoder_layers'] = 3"
done_testing
