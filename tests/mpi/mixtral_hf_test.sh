#!/bin/sh
# mixtral_hf_test.sh: convert_checkpoint between our checkpoint of a mixture of experts and
# Hugging Face MixtralForCausalLM. A tiny Mixtral (configs/mixtral-tiny.args: 2 layers, 4 SwiGLU
# experts of width 48, top-2 softmax routing, GQA, RoPE, RMSNorm, untied) trained 3 iterations
# with expert parallelism 2 goes ours -> HF -> ours -> HF: every tensor comes back bitwise, the
# second export is the first byte for byte (sharded too); the safetensors names and shapes and
# config.json are MixtralForCausalLM's, the expert [w1; w3] split and the router are checked element
# by element, and the import records Megatron's router flags that compute Mixtral's routing. The
# imported model's logits (tests/tools/model_logits, CPU backend, fp32) match an independent
# plain-Python reference of HF's Mixtral forward (tests/tools/mixtral_reference.py, float64)
# within 1e-4, and two deliberately wrong references (no top-k renormalization, w1/w3 swapped)
# fail the same check. A Mixtral that transformers itself saved (tests/data/mixtral-hf-tiny:
# BF16, transformers 5's config.json) imports, and our forward of it gives transformers' own
# recorded logits within 1e-4, as does the reference. The refusals follow: a missing expert tensor, a wrong expert count or
# width, a sliding window, a Qwen2-MoE config over Mixtral's tensors, DeepSeek's shared experts,
# and exports of checkpoints Mixtral cannot express (a dense layer, sigmoid scores, pre-softmax
# routing; shared experts go to Qwen2-MoE: tests/mpi/qwen2_moe_hf_test.sh).
. "${top_srcdir:-.}/tests/lib.sh"
CONVERT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"
REFERENCE="$top_srcdir/tests/tools/mixtral_reference.py"

convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
MIXTRAL="--args-file $top_srcdir/configs/mixtral-tiny.args --seq-length 32 --micro-batch-size 2 --global-batch-size 4
         --lr-warmup-iters 1 --log-interval 1 --eval-iters 0"

safetensors_header() {  # the tensors of FILE, one per line "NAME DTYPE d0,d1", sorted
    python3 - "$1" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
assert n % 8 == 0 and 8 + n + end == len(data), "malformed"
for name in sorted(k for k in header if k != "__metadata__"):
    print(name, header[name]["dtype"], ",".join(map(str, header[name]["shape"])))
EOF
}
safetensors_value() {  # safetensors_value FILE NAME ROW COL : one F32 element
    python3 - "$@" <<'EOF'
import json, struct, sys
path, name, row, col = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
offset = 8 + n + t["data_offsets"][0] + 4 * (row * t["shape"][1] + col)
print("%.9g" % struct.unpack("<f", data[offset:offset + 4])[0])
EOF
}
safetensors_without() {  # safetensors_without IN OUT NAME : IN less tensor NAME
    python3 - "$@" <<'EOF'
import json, struct, sys
source, target, dropped = sys.argv[1:4]
data = open(source, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body, kept, offset = data[8 + n:], {"__metadata__": header.get("__metadata__", {})}, 0
parts = []
for name, v in header.items():
    if name in ("__metadata__", dropped):
        continue
    chunk = body[v["data_offsets"][0]:v["data_offsets"][1]]
    kept[name] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [offset, offset + len(chunk)]}
    parts.append(chunk)
    offset += len(chunk)
text = json.dumps(kept).encode()
text += b" " * (-len(text) % 8)
open(target, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(parts))
EOF
}
ours_value() {  # ours_value FILE.h5 NAME ROW COL
    printf '%.9g\n' "$("$FIXTURE" get "$1" "$2" "$3" "$4")"
}
config() {  # config DIR KEY : a config.json value as JSON
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1] + "/config.json"))[sys.argv[2]]))' "$1" "$2"
}
edit_config() {  # edit_config IN_DIR OUT_DIR PYTHON_STATEMENT : OUT_DIR with IN_DIR's tensors and an edited config c
    rm -rf "$2" && mkdir "$2" && ln -s "$1/model.safetensors" "$2/" &&
        python3 -c 'import json, sys; c = json.load(open(sys.argv[1] + "/config.json")); exec(sys.argv[3]); json.dump(c, open(sys.argv[2] + "/config.json", "w"))' "$1" "$2" "$3"
}
same_model() {  # same_model A.h5 B.h5 : every /model tensor of B equals A's, and they have the same names
    h5ls "$1/model" | awk '{print $1}' | sort > "$WORK/names_a" &&
        h5ls "$2/model" | awk '{print $1}' | sort > "$WORK/names_b" &&
        cmp -s "$WORK/names_a" "$WORK/names_b" || return 1
    while read -r name; do
        h5diff -d 0 "$1" "$2" "/model/$name" "/model/$name" > /dev/null || { diag "differs: $name"; return 1; }
    done < "$WORK/names_a"
}
args_attr() { h5dump -a "/args/$2" "$1" | sed -n 's/^ *(0): *//p' | tr -d '"'; }

# ---- ours -> HF ------------------------------------------------------------------------------------
run_app 2 $MIXTRAL --expert-model-parallel-size 2 --train-iters 3 --save "$WORK/trained" --save-interval 3
ok $? "a tiny Mixtral trains 3 iterations on EP2 and saves" || tail -3 "$WORK/err" | sed 's/^/# /'
A="$WORK/trained/iter_0000003.h5"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out" "$WORK/err"
grep -q "MixtralForCausalLM, 2 layers, hidden 64, 4 heads in 2 query groups, 4 experts of ffn 48, top 2, vocab 256" "$WORK/out"
ok $? "the export says MixtralForCausalLM with the shape"

safetensors_header "$WORK/hf/model.safetensors" > "$WORK/header"
ok $? "the safetensors file is well formed"
has() { grep -qx "$1" "$WORK/header"; }
has "model.embed_tokens.weight F32 256,64" && has "lm_head.weight F32 256,64" && has "model.norm.weight F32 64" &&
    has "model.layers.1.input_layernorm.weight F32 64" && has "model.layers.1.post_attention_layernorm.weight F32 64" &&
    has "model.layers.0.self_attn.q_proj.weight F32 64,64" && has "model.layers.0.self_attn.k_proj.weight F32 32,64" &&
    has "model.layers.0.self_attn.v_proj.weight F32 32,64" && has "model.layers.0.self_attn.o_proj.weight F32 64,64" &&
    has "model.layers.1.block_sparse_moe.gate.weight F32 4,64" &&
    has "model.layers.1.block_sparse_moe.experts.3.w1.weight F32 48,64" &&
    has "model.layers.1.block_sparse_moe.experts.3.w3.weight F32 48,64" &&
    has "model.layers.0.block_sparse_moe.experts.0.w2.weight F32 64,48"
ok $? "MixtralForCausalLM's names and shapes: gate [E, C], experts.X.w1/w3 [Fm, C], w2 [C, Fm]"
[ "$(wc -l < "$WORK/header")" -eq 41 ] && ! grep -q -e bias -e '\.mlp\.' "$WORK/header"
ok $? "41 tensors (7 + 4 x 3 per layer, embeddings, norm, lm_head), no biases, no dense MLP"
[ "$(config "$WORK/hf" model_type)" = '"mixtral"' ] && [ "$(config "$WORK/hf" architectures)" = '["MixtralForCausalLM"]' ] &&
    [ "$(config "$WORK/hf" num_local_experts)" = 4 ] && [ "$(config "$WORK/hf" num_experts_per_tok)" = 2 ] &&
    [ "$(config "$WORK/hf" intermediate_size)" = 48 ] && [ "$(config "$WORK/hf" num_key_value_heads)" = 2 ] &&
    [ "$(config "$WORK/hf" head_dim)" = 16 ] && [ "$(config "$WORK/hf" sliding_window)" = null ] &&
    [ "$(config "$WORK/hf" rope_theta)" = 10000.0 ] && [ "$(config "$WORK/hf" rms_norm_eps)" = 1e-05 ] &&
    [ "$(config "$WORK/hf" router_aux_loss_coef)" = 0.01 ] && [ "$(config "$WORK/hf" tie_word_embeddings)" = false ] &&
    [ "$(config "$WORK/hf" output_router_logits)" = false ] && [ "$(config "$WORK/hf" hidden_act)" = '"silu"' ]
ok $? "config.json: mixtral, 4 local experts, 2 per token, intermediate_size 48 (the expert's), no sliding window"
! grep -q "no moe_aux_loss_coeff in /args" "$WORK/err"
ok $? "the aux-loss coefficient is the one training recorded (--moe-aux-loss-coeff 1e-2 of mixtral-tiny.args)"

check_element() {  # check_element HF_NAME HF_ROW OUR_NAME OUR_ROW COL
    [ "$(safetensors_value "$WORK/hf/model.safetensors" "model.layers.1.$1" "$2" "$5")" = \
      "$(ours_value "$A" "decoder.layers.1.$3" "$4" "$5")" ]
}
check_element block_sparse_moe.experts.2.w1.weight 0 mlp.experts.local_experts.2.linear_fc1.weight 0 5 &&
    check_element block_sparse_moe.experts.2.w1.weight 47 mlp.experts.local_experts.2.linear_fc1.weight 47 63 &&
    check_element block_sparse_moe.experts.2.w3.weight 0 mlp.experts.local_experts.2.linear_fc1.weight 48 5 &&
    check_element block_sparse_moe.experts.3.w3.weight 47 mlp.experts.local_experts.3.linear_fc1.weight 95 1 &&
    check_element block_sparse_moe.experts.1.w2.weight 63 mlp.experts.local_experts.1.linear_fc2.weight 63 47 &&
    check_element block_sparse_moe.gate.weight 3 mlp.router.weight 3 9
ok $? "each expert's w1 and w3 are the two halves of its fc1 ([w1; w3] as Megatron's Mixtral loader), w2 its fc2, the gate the router"
[ "$(safetensors_value "$WORK/hf/model.safetensors" model.layers.1.block_sparse_moe.experts.2.w1.weight 0 5)" != \
  "$(ours_value "$A" decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight 0 5)" ]
ok $? "(the element check tells the experts apart)"

# ---- HF -> ours -> HF ------------------------------------------------------------------------------
convert --from-hf --input "$WORK/hf" --save "$WORK/imported" --make-vocab-size-divisible-by 64
ok $? "--from-hf imports the export (config.json says mixtral)" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
R="$WORK/imported/release.h5"
same_model "$A" "$R"
ok $? "ours -> HF -> ours: every /model tensor bitwise equal to the trained checkpoint's, same names"
[ "$(args_attr "$R" num_experts)" = 4 ] && [ "$(args_attr "$R" moe_ffn_hidden_size)" = 48 ] &&
    [ "$(args_attr "$R" moe_router_topk)" = 2 ] && [ "$(args_attr "$R" moe_layer_freq)" = 1 ] &&
    [ "$(args_attr "$R" moe_router_score_function)" = softmax ] && [ "$(args_attr "$R" moe_router_pre_softmax)" = 0 ] &&
    [ "$(args_attr "$R" moe_router_load_balancing_type)" = aux_loss ] && [ "$(args_attr "$R" moe_router_dtype)" = fp32 ] &&
    [ "$(args_attr "$R" moe_aux_loss_coeff)" = 0.01 ] && [ "$(args_attr "$R" add_bias_linear)" = 0 ] &&
    [ "$(args_attr "$R" num_query_groups)" = 2 ]
ok $? "/args: 4 experts of 48, top 2 in every layer, softmax scores after the top-k (no pre-softmax), aux_loss 0.01"
convert --to-hf --load "$WORK/imported" --output "$WORK/hf2" && cmp -s "$WORK/hf/model.safetensors" "$WORK/hf2/model.safetensors" &&
    cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json"
ok $? "HF -> ours -> HF: model.safetensors and config.json byte for byte the same"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf_sharded" --max-shard-size 100KB &&
    [ "$(ls "$WORK/hf_sharded" | grep -c '^model-0000[0-9]-of-0000[0-9]\.safetensors$')" -ge 3 ] &&
    convert --from-hf --input "$WORK/hf_sharded" --save "$WORK/imported_sharded" --make-vocab-size-divisible-by 64 &&
    same_model "$A" "$WORK/imported_sharded/release.h5"
ok $? "a sharded export imports bitwise too ($(grep -o '[0-9]* tensors from [0-9]* files' "$WORK/out"))"
convert --model-type GPT --loader mixtral_hf --saver core --load-dir "$WORK/hf" --save-dir "$WORK/imported_megatron" &&
    same_model "$A" "$WORK/imported_megatron/release.h5"
ok $? "Megatron's convert.py spelling (--loader mixtral_hf --saver core) imports it the same"

# the imported checkpoint fine-tunes on EP2 exactly as the original does
losses() { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out"; }
run_app 2 $MIXTRAL --expert-model-parallel-size 2 --train-iters 2 --load "$WORK/trained" --finetune
ok $? "the trained checkpoint fine-tunes on EP2" || tail -3 "$WORK/err" | sed 's/^/# /'
losses > "$WORK/losses_original"
run_app 2 $MIXTRAL --expert-model-parallel-size 2 --train-iters 2 --load "$WORK/imported" --finetune
ok $? "the imported checkpoint fine-tunes on EP2" || tail -3 "$WORK/err" | sed 's/^/# /'
losses > "$WORK/losses_imported"
[ "$(wc -l < "$WORK/losses_imported")" -eq 2 ] && cmp -s "$WORK/losses_original" "$WORK/losses_imported"
ok $? "with the original's losses: $(tr '\n' ' ' < "$WORK/losses_imported")"

# ---- logits against an independent reference of HF's Mixtral forward ------------------------------
timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/model_logits" "$WORK/ours" --args-file "$top_srcdir/configs/mixtral-tiny.args" \
    --seq-length 32 --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 0 --min-lr 0 --lr-warmup-iters 0 \
    --seed 1001 --load "$WORK/imported" --finetune > "$WORK/out" 2>&1
ok $? "our CPU forward of the imported model on 32 mock tokens (model_logits)" || tail -3 "$WORK/out" | sed 's/^/# /'
timeout 120 python3 "$REFERENCE" "$WORK/hf" "$WORK/ours.tokens" "$WORK/ours.logits" > "$WORK/reference" 2>&1
ok $? "its logits match HF Mixtral's forward (plain-Python float64 reference) within 1e-4: $(head -1 "$WORK/reference")"
tail -1 "$WORK/reference" | sed 's/^/# /'
for variant in no-renormalize swap-gate-up; do
    timeout 120 python3 "$REFERENCE" "$WORK/hf" "$WORK/ours.tokens" "$WORK/ours.logits" --variant $variant > "$WORK/reference" 2>&1
    [ $? -eq 1 ] && grep -q '^FAIL' "$WORK/reference"
    ok $? "a reference with $variant fails the same check: $(head -1 "$WORK/reference" | sed 's/.*: max/max/')"
done

# ---- a Mixtral saved by transformers, against the logits transformers computed ---------------------
FIXTURE_HF="$top_srcdir/tests/data/mixtral-hf-tiny"
compare_logits() {  # compare_logits THEIRS OURS VOCAB : max |d logit| relative to the largest and max |d log-prob|, within 1e-4
    python3 - "$@" <<'EOF'
import math, sys
from array import array
theirs, ours = array("f"), array("f")
theirs.frombytes(open(sys.argv[1], "rb").read())
ours.frombytes(open(sys.argv[2], "rb").read())
V = int(sys.argv[3])
T = len(theirs) // V
padded = len(ours) // T
def log_softmax(row):
    top = max(row)
    return [x - top - math.log(sum(math.exp(y - top) for y in row)) for x in row]
d_logit = d_logprob = largest = 0.0
for t in range(T):
    a, b = theirs[t * V:(t + 1) * V].tolist(), ours[t * padded:t * padded + V].tolist()
    d_logit = max(d_logit, max(abs(x - y) for x, y in zip(a, b)))
    d_logprob = max(d_logprob, max(abs(x - y) for x, y in zip(log_softmax(a), log_softmax(b))))
    largest = max(largest, max(map(abs, a)))
print("max|d logit| %.3e (relative %.3e), max|d log-prob| %.3e" % (d_logit, d_logit / largest, d_logprob))
sys.exit(0 if d_logit / largest <= 1e-4 and d_logprob <= 1e-4 else 1)
EOF
}
convert --from-hf --input "$FIXTURE_HF" --save "$WORK/from_transformers" --make-vocab-size-divisible-by 32
ok $? "a Mixtral saved by transformers 5.17 (BF16, rope_parameters) imports: $(cat "$WORK/out")" || sed 's/^/# /' "$WORK/err"
timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/model_logits" "$WORK/fixture" --tokens "$FIXTURE_HF/tokens.i32" \
    --use-checkpoint-args --load "$WORK/from_transformers" --finetune --mock-data --seq-length 24 --make-vocab-size-divisible-by 32 \
    --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 0 --min-lr 0 --hidden-dropout 0 --attention-dropout 0 > "$WORK/out" 2>&1
ok $? "our forward of it, its shape taken from the checkpoint (--use-checkpoint-args)" || tail -3 "$WORK/out" | sed 's/^/# /'
compare_logits "$FIXTURE_HF/logits.f32" "$WORK/fixture.logits" 96 > "$WORK/compare"
ok $? "our logits are transformers' recorded float32 logits within 1e-4: $(cat "$WORK/compare")"
timeout 120 python3 "$REFERENCE" "$FIXTURE_HF" "$FIXTURE_HF/tokens.i32" "$FIXTURE_HF/logits.f32" > "$WORK/reference" 2>&1
ok $? "and so is the plain-Python reference's (the reference checked against transformers): $(head -1 "$WORK/reference" | sed 's/.*: max/max/')"

# ---- import refusals ------------------------------------------------------------------------------
mkdir "$WORK/hf_missing" && cp "$WORK/hf/config.json" "$WORK/hf_missing/" &&
    safetensors_without "$WORK/hf/model.safetensors" "$WORK/hf_missing/model.safetensors" \
        model.layers.1.block_sparse_moe.experts.3.w2.weight &&
    ! convert --from-hf --input "$WORK/hf_missing" --save "$WORK/refused" &&
    grep -q "hf_missing/model.safetensors: no tensor 'model.layers.1.block_sparse_moe.experts.3.w2.weight'" "$WORK/err" &&
    [ "$(wc -l < "$WORK/err")" -eq 1 ] && [ ! -e "$WORK/refused" ]
ok $? "a missing expert tensor is named with its file, nothing written: $(cat "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_experts" 'c["num_local_experts"] = 8' &&
    ! convert --from-hf --input "$WORK/hf_experts" --save "$WORK/refused" &&
    grep -q "tensor 'model.layers.0.block_sparse_moe.gate.weight' has shape \[4, 64\], expected \[8, 64\] (.*num_local_experts 8" "$WORK/err"
ok $? "a wrong expert count is named by the router's shape: $(cat "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_experts" 'c["num_local_experts"] = 3' &&
    ! convert --from-hf --input "$WORK/hf_experts" --save "$WORK/refused" &&
    grep -q "has shape \[4, 64\], expected \[3, 64\]" "$WORK/err"
ok $? "fewer experts in config.json than in the file too"
edit_config "$WORK/hf" "$WORK/hf_width" 'c["intermediate_size"] = 40' &&
    ! convert --from-hf --input "$WORK/hf_width" --save "$WORK/refused" &&
    grep -q "tensor 'model.layers.0.block_sparse_moe.experts.0.w1.weight' has shape \[48, 64\], expected \[40, 64\] (.*intermediate_size 40" "$WORK/err"
ok $? "an expert width that disagrees is named: $(cat "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_topk" 'c["num_experts_per_tok"] = 5' &&
    ! convert --from-hf --input "$WORK/hf_topk" --save "$WORK/refused" && grep -q "num_experts_per_tok 5 exceeds num_local_experts 4" "$WORK/err"
ok $? "more experts per token than experts is refused"
edit_config "$WORK/hf" "$WORK/hf_window" 'c["sliding_window"] = 16' &&
    ! convert --from-hf --input "$WORK/hf_window" --save "$WORK/refused" &&
    grep -q '"sliding_window" 16 is shorter than max_position_embeddings 64' "$WORK/err"
ok $? "a sliding window shorter than the context is refused: $(cat "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_window" 'c["sliding_window"] = 64' &&
    convert --from-hf --input "$WORK/hf_window" --save "$WORK/window_ok" && same_model "$A" "$WORK/window_ok/release.h5"
ok $? "(a window as long as the context computes the same and imports)"
edit_config "$WORK/hf" "$WORK/hf_qwen" 'c.update(model_type="qwen2_moe", architectures=["Qwen2MoeForCausalLM"], shared_expert_intermediate_size=96)' &&
    ! convert --from-hf --input "$WORK/hf_qwen" --save "$WORK/refused" &&
    grep -q "model.layers.0.self_attn.q_proj.bias" "$WORK/err"
ok $? "a Qwen2-MoE config over Mixtral's tensors is refused naming a tensor it lacks: $(cut -c 1-160 "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_qwen" 'c["n_shared_experts"] = 1' &&
    ! convert --from-hf --input "$WORK/hf_qwen" --save "$WORK/refused" &&
    grep -q '"n_shared_experts": DeepSeek.s shared experts are not supported' "$WORK/err"
ok $? "DeepSeek's n_shared_experts is refused (its multi-head latent attention is not built)"

# ---- export refusals ------------------------------------------------------------------------------
refused_export() {  # refused_export CKPT_DIR TEXT : --to-hf fails with TEXT, writing nothing
    ! convert --to-hf --load "$1" --output "$WORK/hf_refused" && grep -q "$2" "$WORK/err" && [ ! -e "$WORK/hf_refused" ]
}
run_app 1 $MIXTRAL --moe-layer-freq '[1,0]' --train-iters 1 --save "$WORK/dense_layer" --save-interval 1 &&
    refused_export "$WORK/dense_layer" "no Hugging Face Mixtral layout: layer 1 has a dense MLP (--moe-layer-freq \[1,0\])"
ok $? "a dense layer is refused: $(cat "$WORK/err")"
run_app 1 $MIXTRAL --moe-router-pre-softmax --train-iters 1 --save "$WORK/pre_softmax" --save-interval 1 &&
    refused_export "$WORK/pre_softmax" "before the top-k (--moe-router-pre-softmax)"
ok $? "a model trained with --moe-router-pre-softmax is refused (training records the routing in /args)"
cp -r "$WORK/trained" "$WORK/forged"
F="$WORK/forged/iter_0000003.h5"
"$FIXTURE" set-arg "$F" moe_router_score_function str:sigmoid &&
    refused_export "$WORK/forged" "its router scores with sigmoid (--moe-router-score-function); Mixtral's with softmax"
ok $? "sigmoid scores are refused: $(cat "$WORK/err")"
"$FIXTURE" set-arg "$F" moe_router_score_function str:softmax && "$FIXTURE" set-arg "$F" moe_router_pre_softmax int:1 &&
    refused_export "$WORK/forged" "before the top-k (--moe-router-pre-softmax), which leaves the k weights unnormalized"
ok $? "pre-softmax routing (no renormalization) is refused"
"$FIXTURE" set-arg "$F" moe_router_pre_softmax int:0 && "$FIXTURE" set-arg "$F" moe_shared_expert_intermediate_size int:96 &&
    refused_export "$WORK/forged" "no Hugging Face Qwen2-MoE layout: its shared experts have no gate"
ok $? "shared experts go to Qwen2-MoE, which gates them: ungated ones are refused"
"$FIXTURE" set-arg "$F" moe_shared_expert_intermediate_size int:0 && "$FIXTURE" set-arg "$F" moe_aux_loss_coeff real:0.02 &&
    convert --to-hf --load "$WORK/forged" --output "$WORK/hf_coeff" && [ "$(config "$WORK/hf_coeff" router_aux_loss_coef)" = 0.02 ] &&
    cmp -s "$WORK/hf/model.safetensors" "$WORK/hf_coeff/model.safetensors"
ok $? "(with those set back it exports, the recorded --moe-aux-loss-coeff as router_aux_loss_coef)"

done_testing
