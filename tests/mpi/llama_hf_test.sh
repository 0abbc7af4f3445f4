#!/bin/sh
# llama_hf_test.sh: convert_checkpoint between our checkpoint of a Llama-architecture model and
# Hugging Face LlamaForCausalLM. A tiny Llama (RoPE, RMSNorm, SwiGLU, 4 heads in 2 query groups,
# no biases, untied) trained 3 iterations on TP2 goes ours -> HF -> ours -> HF: every tensor comes
# back bitwise (h5diff) and the second export is the first byte for byte, sharded too; the safetensors header
# and config.json are what transformers' LlamaForCausalLM loads (names, shapes, dtypes, GQA
# fields), and the q/k/v and gate/up split is checked element by element against our fused
# tensors. The imported checkpoint trains on TP2 x PP2 with exactly the losses of the original
# one. A tied variant with linear biases and Llama 3 rope scaling, BF16 export, and the refusals
# (interleaved rotary, unknown rope scaling, mismatched biases, a missing layer) follow.
. "${top_srcdir:-.}/tests/lib.sh"
CONVERT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"

convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
# the tiny Llama of configs/llama-tiny.args, written out so that variants can drop flags
LLAMA="--num-layers 2 --hidden-size 64 --ffn-hidden-size 96 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 64 --position-embedding-type rope --normalization RMSNorm --swiglu
       --vocab-size 256 --make-vocab-size-divisible-by 64 --mock-data --micro-batch-size 2 --global-batch-size 8
       --lr 3e-3 --lr-warmup-iters 1 --init-method-std 0.02 --hidden-dropout 0 --attention-dropout 0
       --seed 1234 --log-interval 1 --eval-iters 0"
GQA="--group-query-attention --num-query-groups 2"

# safetensors_header FILE : the JSON header, one tensor per line "NAME DTYPE d0,d1", sorted
safetensors_header() {
    python3 - "$1" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
assert n % 8 == 0, "header length not a multiple of 8"
end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
assert 8 + n + end == len(data), "the tensors do not fill the file"
print("__metadata__", json.dumps(header.get("__metadata__"), sort_keys=True))
for name in sorted(k for k in header if k != "__metadata__"):
    v = header[name]
    print(name, v["dtype"], ",".join(map(str, v["shape"])))
EOF
}
# safetensors_value FILE NAME ROW COL : one F32 element
safetensors_value() {
    python3 - "$@" <<'EOF'
import json, struct, sys
path, name, row, col = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
cols = t["shape"][1] if len(t["shape"]) == 2 else 1
offset = 8 + n + t["data_offsets"][0] + 4 * (row * cols + col)
print("%.9g" % struct.unpack("<f", data[offset:offset + 4])[0])
EOF
}
ours_value() {  # ours_value FILE.h5 NAME ROW COL
    printf '%.9g\n' "$("$FIXTURE" get "$1" "$2" "$3" "$4")"
}
config() {  # config DIR KEY : a config.json value as JSON
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1] + "/config.json"))[sys.argv[2]]))' "$1" "$2"
}
same_model() {  # same_model A.h5 B.h5 : every /model tensor of B equals A's, and they have the same names
    h5ls "$1/model" | awk '{print $1}' | sort > "$WORK/names_a" &&
        h5ls "$2/model" | awk '{print $1}' | sort > "$WORK/names_b" &&
        cmp -s "$WORK/names_a" "$WORK/names_b" || return 1
    while read -r name; do
        h5diff -d 0 "$1" "$2" "/model/$name" "/model/$name" > /dev/null || { diag "differs: $name"; return 1; }
    done < "$WORK/names_a"
}

# ---- the untied GQA Llama: ours -> HF ----------------------------------------------------------
run_app 2 $LLAMA $GQA --disable-bias-linear --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 \
    --train-iters 3 --save "$WORK/trained" --save-interval 3
ok $? "a tiny Llama trains 3 iterations on TP2 and saves" || tail -3 "$WORK/err" | sed 's/^/# /'
A="$WORK/trained/iter_0000003.h5"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
grep -q "LlamaForCausalLM, 2 layers, hidden 64, 4 heads in 2 query groups, ffn 96, vocab 256" "$WORK/out"
ok $? "the export says LlamaForCausalLM with the shape"

safetensors_header "$WORK/hf/model.safetensors" > "$WORK/header"
ok $? "the safetensors file is well formed (8-byte aligned header, data fills the file)"
sed 's/^/# /' "$WORK/header" | head -12
has() { grep -qx "$1" "$WORK/header"; }
has '__metadata__ {"format": "pt"}' && has "model.embed_tokens.weight F32 256,64" && has "lm_head.weight F32 256,64" &&
    has "model.norm.weight F32 64" && has "model.layers.1.input_layernorm.weight F32 64" &&
    has "model.layers.1.post_attention_layernorm.weight F32 64" &&
    has "model.layers.0.self_attn.q_proj.weight F32 64,64" && has "model.layers.0.self_attn.k_proj.weight F32 32,64" &&
    has "model.layers.0.self_attn.v_proj.weight F32 32,64" && has "model.layers.0.self_attn.o_proj.weight F32 64,64" &&
    has "model.layers.1.mlp.gate_proj.weight F32 96,64" && has "model.layers.1.mlp.up_proj.weight F32 96,64" &&
    has "model.layers.1.mlp.down_proj.weight F32 64,96"
ok $? "LlamaForCausalLM's names and shapes: q_proj [H*D, C], k/v_proj [G*D, C], gate/up [F, C], lm_head"
[ "$(grep -vc __metadata__ "$WORK/header")" -eq 21 ] && ! grep -q bias "$WORK/header"
ok $? "21 tensors (9 per layer, embeddings, norm, lm_head), no biases"
[ "$(config "$WORK/hf" model_type)" = '"llama"' ] && [ "$(config "$WORK/hf" architectures)" = '["LlamaForCausalLM"]' ] &&
    [ "$(config "$WORK/hf" num_key_value_heads)" = 2 ] && [ "$(config "$WORK/hf" num_attention_heads)" = 4 ] &&
    [ "$(config "$WORK/hf" head_dim)" = 16 ] && [ "$(config "$WORK/hf" intermediate_size)" = 96 ] &&
    [ "$(config "$WORK/hf" hidden_act)" = '"silu"' ] && [ "$(config "$WORK/hf" rms_norm_eps)" = 1e-05 ] &&
    [ "$(config "$WORK/hf" rope_theta)" = 10000.0 ] && [ "$(config "$WORK/hf" tie_word_embeddings)" = false ] &&
    [ "$(config "$WORK/hf" attention_bias)" = false ] && [ "$(config "$WORK/hf" mlp_bias)" = false ] &&
    [ "$(config "$WORK/hf" rope_scaling)" = null ] && [ "$(config "$WORK/hf" vocab_size)" = 256 ] &&
    [ "$(config "$WORK/hf" max_position_embeddings)" = 64 ] && [ "$(config "$WORK/hf" torch_dtype)" = '"float32"' ]
ok $? "config.json: llama, 2 key/value heads of 4, head_dim 16, silu, rms_norm_eps 1e-05, rope_theta 10000.0, untied, no biases"

# element checks on the split: group g's query heads j, then its k and v, each D = 16 rows
# (per = H/G = 2: our rows per group are [q0 q1 k v]); fc1 is [gate; up]
check_element() {  # check_element HF_NAME HF_ROW OUR_NAME OUR_ROW COL
    [ "$(safetensors_value "$WORK/hf/model.safetensors" "model.layers.1.$1" "$2" "$5")" = \
      "$(ours_value "$A" "decoder.layers.1.$3" "$4" "$5")" ]
}
check_element self_attn.q_proj.weight 0 self_attention.linear_qkv.weight 0 5 &&
    check_element self_attn.q_proj.weight 17 self_attention.linear_qkv.weight 17 3 &&
    check_element self_attn.k_proj.weight 1 self_attention.linear_qkv.weight 33 7 &&
    check_element self_attn.v_proj.weight 2 self_attention.linear_qkv.weight 50 0 &&
    check_element self_attn.q_proj.weight 35 self_attention.linear_qkv.weight 67 63 &&
    check_element self_attn.q_proj.weight 63 self_attention.linear_qkv.weight 95 1 &&
    check_element self_attn.k_proj.weight 20 self_attention.linear_qkv.weight 100 2 &&
    check_element self_attn.v_proj.weight 31 self_attention.linear_qkv.weight 127 9 &&
    check_element mlp.gate_proj.weight 95 mlp.linear_fc1.weight 95 4 &&
    check_element mlp.up_proj.weight 0 mlp.linear_fc1.weight 96 4 &&
    check_element mlp.up_proj.weight 95 mlp.linear_fc1.weight 191 63
ok $? "q/k/v rows taken from each query group's [q..., k, v] block; gate and up the two halves of fc1"
[ "$(safetensors_value "$WORK/hf/model.safetensors" model.layers.0.self_attn.q_proj.weight 0 0)" != \
  "$(ours_value "$A" decoder.layers.0.self_attention.linear_qkv.weight 0 1)" ]
ok $? "(the element check tells neighbouring values apart)"

# ---- HF -> ours -> HF ----------------------------------------------------------------------------
convert --from-hf --input "$WORK/hf" --save "$WORK/imported" --make-vocab-size-divisible-by 64
ok $? "--from-hf imports the export (config.json says llama)" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
R="$WORK/imported/release.h5"
same_model "$A" "$R"
ok $? "ours -> HF -> ours: every /model tensor bitwise equal to the trained checkpoint's, same names"
args_attr() { h5dump -a "/args/$2" "$1" | sed -n 's/^ *(0): *//p' | tr -d '"'; }
[ "$(args_attr "$R" num_query_groups)" = 2 ] && [ "$(args_attr "$R" swiglu)" = 1 ] &&
    [ "$(args_attr "$R" add_bias_linear)" = 0 ] && [ "$(args_attr "$R" normalization)" = RMSNorm ] &&
    [ "$(args_attr "$R" position_embedding_type)" = rope ] && [ "$(args_attr "$R" untie_embeddings_and_output_weights)" = 1 ]
ok $? "/args: 2 query groups, swiglu, no biases, RMSNorm, rope, untied"
convert --to-hf --load "$WORK/imported" --output "$WORK/hf2" && cmp -s "$WORK/hf/model.safetensors" "$WORK/hf2/model.safetensors" &&
    cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json"
ok $? "HF -> ours -> HF: model.safetensors and config.json byte for byte the same"

# sharded: save_pretrained's layout past --max-shard-size, and back
convert --to-hf --load "$WORK/trained" --output "$WORK/hf_sharded" --max-shard-size 40KB
ok $? "--max-shard-size 40KB exports shards" || sed 's/^/# /' "$WORK/err"
shards=$(ls "$WORK/hf_sharded" | grep -c '^model-000[0-9][0-9]-of-000[0-9][0-9]\.safetensors$')
python3 - "$WORK/hf_sharded" <<'EOF' > "$WORK/index_check"
import json, os, struct, sys
folder = sys.argv[1]
index = json.load(open(folder + "/model.safetensors.index.json"))
files = sorted(set(index["weight_map"].values()))
total = 0
for f in files:
    data = open(os.path.join(folder, f), "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    for name, v in header.items():
        if name != "__metadata__":
            assert index["weight_map"][name] == f, name
            total += v["data_offsets"][1] - v["data_offsets"][0]
    assert 8 + n + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__") == len(data)
print(len(index["weight_map"]), len(files), total == index["metadata"]["total_size"],
      all(f.endswith("-of-%05d.safetensors" % len(files)) for f in files))
EOF
[ "$shards" -ge 3 ] && [ ! -e "$WORK/hf_sharded/model.safetensors" ] && [ "$(cat "$WORK/index_check")" = "21 $shards True True" ]
ok $? "$shards shards and model.safetensors.index.json: every tensor in the file the weight_map names, total_size right ($(cat "$WORK/index_check"))"
convert --from-hf --input "$WORK/hf_sharded" --save "$WORK/imported_sharded" --make-vocab-size-divisible-by 64 &&
    same_model "$A" "$WORK/imported_sharded/release.h5"
ok $? "the sharded export imports bitwise ($(grep -o '[0-9]* tensors from [0-9]* files' "$WORK/out"))"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf_bad" --max-shard-size 5XB
[ $? -ne 0 ] && grep -q "max-shard-size '5XB' is not a size" "$WORK/err" && [ ! -e "$WORK/hf_bad" ]
ok $? "a malformed --max-shard-size is refused"

# the import trains in another layout exactly as the original checkpoint does
losses() { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out"; }
run_app 4 $LLAMA $GQA --disable-bias-linear --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --train-iters 2 --load "$WORK/trained" --finetune
ok $? "the trained checkpoint fine-tunes on TP2 x PP2" || tail -3 "$WORK/err" | sed 's/^/# /'
losses > "$WORK/losses_original"
run_app 4 $LLAMA $GQA --disable-bias-linear --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --train-iters 2 --load "$WORK/imported" --finetune
ok $? "the imported checkpoint trains on TP2 x PP2" || tail -3 "$WORK/err" | sed 's/^/# /'
losses > "$WORK/losses_imported"
[ "$(wc -l < "$WORK/losses_imported")" -eq 2 ] && cmp -s "$WORK/losses_original" "$WORK/losses_imported"
ok $? "the same losses as the original checkpoint: $(tr '\n' ' ' < "$WORK/losses_imported")"

# ---- tied, biases, Llama 3 rope scaling, bf16 ----------------------------------------------------
run_app 1 $LLAMA --rotary-base 500000 --use-rope-scaling --rope-scaling-factor 32 --train-iters 1 \
    --save "$WORK/tied" --save-interval 1
ok $? "a tied Llama with linear biases and rope scaling trains and saves" || tail -3 "$WORK/err" | sed 's/^/# /'
convert --to-hf --load "$WORK/tied" --output "$WORK/hf_tied" &&
    safetensors_header "$WORK/hf_tied/model.safetensors" > "$WORK/header"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
! grep -q lm_head "$WORK/header" && has "model.layers.0.self_attn.q_proj.bias F32 64" &&
    has "model.layers.0.self_attn.k_proj.bias F32 64" && has "model.layers.1.self_attn.o_proj.bias F32 64" &&
    has "model.layers.1.mlp.gate_proj.bias F32 96" && has "model.layers.1.mlp.down_proj.bias F32 64" &&
    [ "$(config "$WORK/hf_tied" tie_word_embeddings)" = true ] && [ "$(config "$WORK/hf_tied" attention_bias)" = true ] &&
    [ "$(config "$WORK/hf_tied" mlp_bias)" = true ] && [ "$(config "$WORK/hf_tied" rope_theta)" = 500000.0 ] &&
    [ "$(config "$WORK/hf_tied" rope_scaling)" = '{"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}' ]
ok $? "tied (no lm_head), multi-head, biases as attention_bias/mlp_bias, rope_scaling llama3 factor 32"
convert --from-hf --input "$WORK/hf_tied" --save "$WORK/tied_back" --make-vocab-size-divisible-by 64 &&
    same_model "$WORK/tied/iter_0000001.h5" "$WORK/tied_back/release.h5" &&
    [ "$(args_attr "$WORK/tied_back/release.h5" use_rope_scaling)" = 1 ] &&
    [ "$(args_attr "$WORK/tied_back/release.h5" rope_scaling_factor)" = 32 ]
ok $? "and back: bitwise the same tensors, rope scaling kept" || sed 's/^/# /' "$WORK/err"
convert --to-hf --load "$WORK/tied" --output "$WORK/hf_bf16" --dtype bfloat16 &&
    safetensors_header "$WORK/hf_bf16/model.safetensors" > "$WORK/header" &&
    has "model.embed_tokens.weight BF16 256,64" && [ "$(config "$WORK/hf_bf16" torch_dtype)" = '"bfloat16"' ]
ok $? "--dtype bfloat16 writes BF16 tensors and torch_dtype bfloat16"

# ---- refusals ------------------------------------------------------------------------------------
run_app 1 $LLAMA --rotary-interleaved --train-iters 1 --save "$WORK/interleaved" --save-interval 1 &&
    ! convert --to-hf --load "$WORK/interleaved" --output "$WORK/hf_interleaved" &&
    grep -q "no Hugging Face Llama layout: its rotary embedding is interleaved" "$WORK/err" && [ ! -e "$WORK/hf_interleaved" ]
ok $? "an interleaved-rotary checkpoint is refused with the reason, nothing written: $(cat "$WORK/err")"
sed 's/"rope_scaling": null/"rope_scaling": {"type": "yarn", "factor": 4.0}/' "$WORK/hf/config.json" > "$WORK/yarn.json" &&
    mkdir "$WORK/hf_yarn" && cp "$WORK/yarn.json" "$WORK/hf_yarn/config.json" && ln -s "$WORK/hf/model.safetensors" "$WORK/hf_yarn/" &&
    ! convert --from-hf --input "$WORK/hf_yarn" --save "$WORK/yarn_ckpt" && grep -q 'rope_scaling type "yarn" cannot be converted' "$WORK/err" &&
    [ ! -e "$WORK/yarn_ckpt" ]
ok $? "rope_scaling yarn is refused by name: $(cat "$WORK/err")"
sed 's/"mlp_bias": false/"mlp_bias": true/' "$WORK/hf/config.json" > "$WORK/hf_yarn/config.json" &&
    ! convert --from-hf --input "$WORK/hf_yarn" --save "$WORK/yarn_ckpt" && grep -q 'attention_bias false with mlp_bias true' "$WORK/err"
ok $? "attention_bias != mlp_bias is refused (one --disable-bias-linear in Megatron)"
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 3/' "$WORK/hf/config.json" > "$WORK/hf_yarn/config.json" &&
    ! convert --from-hf --input "$WORK/hf_yarn" --save "$WORK/yarn_ckpt" && grep -q "no tensor 'model.layers.2.input_layernorm.weight'" "$WORK/err"
ok $? "a missing layer is named: $(cat "$WORK/err")"

done_testing
