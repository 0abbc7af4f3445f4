#!/bin/sh
# qwen2_moe_hf_test.sh: convert_checkpoint between our checkpoint of a mixture of experts with
# gated shared experts and Hugging Face Qwen2MoeForCausalLM. A tiny Qwen2-MoE (mixtral-tiny's
# layers, 3 of them with the middle one dense (--moe-layer-freq [1,0,1]), a gated shared expert
# of width 32, biases on q, k and v only (--add-qkv-bias), softmax routing without renormalizing
# the top-k (--moe-router-pre-softmax = norm_topk_prob false)) trained 3 iterations on EP2 goes
# ours -> HF -> ours -> HF: every tensor comes back bitwise, the second export is the first byte
# for byte; the names, shapes and config.json are Qwen2MoeForCausalLM's (mlp_only_layers [1],
# qkv_bias, shared_expert_intermediate_size, norm_topk_prob false), the halves of fc1, the shared
# expert's gate and the q/k/v biases are checked element by element, and the import records the
# Megatron flags that compute Qwen2-MoE. The imported model fine-tunes with the original's losses,
# and its logits (tests/tools/model_logits, fp32 CPU) match an independent plain-Python reference
# of HF's Qwen2-MoE forward (tests/tools/qwen2_moe_reference.py, float64) within 1e-4, which three
# deliberately wrong references (the other normalization, no shared-expert gate, no q/k/v biases)
# fail; without --moe-router-pre-softmax the export says norm_topk_prob true and matches too.
# Refusals: a decoder_sparse_step that names other layers than the tensors, a sliding window,
# ungated shared experts, --add-qkv-bias on a Llama or Mixtral export. --add-qkv-bias trains on
# TP2 + SP as on one rank (losses within 1e-5 relative, parameters after 5 steps within 1e-5;
# the key biases, whose gradient is zero, held apart below 5 x lr).
. "${top_srcdir:-.}/tests/lib.sh"
CONVERT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"
REFERENCE="$top_srcdir/tests/tools/qwen2_moe_reference.py"

convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
QWEN_RENORMALIZED="--args-file $top_srcdir/configs/mixtral-tiny.args --num-layers 3 --moe-layer-freq [1,0,1]
      --moe-shared-expert-intermediate-size 32 --moe-shared-expert-gate --add-qkv-bias
      --seq-length 32 --micro-batch-size 2 --global-batch-size 4 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0"
QWEN="$QWEN_RENORMALIZED --moe-router-pre-softmax"

safetensors_header() {  # the tensors of FILE, one per line "NAME DTYPE d0,d1", sorted
    python3 - "$1" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
for name in sorted(k for k in header if k != "__metadata__"):
    print(name, header[name]["dtype"], ",".join(map(str, header[name]["shape"])))
PY
}
safetensors_value() {  # safetensors_value FILE NAME ROW COL : one F32 element (COL -1: a vector's element ROW)
    python3 - "$@" <<'PY'
import json, struct, sys
path, name, row, col = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
index = row if col < 0 else row * t["shape"][1] + col
offset = 8 + n + t["data_offsets"][0] + 4 * index
print("%.9g" % struct.unpack("<f", data[offset:offset + 4])[0])
PY
}
ours_value() {  # ours_value FILE.h5 NAME ROW [COL]
    printf '%.9g\n' "$("$FIXTURE" get "$@")"
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
logits_against_reference() {  # logits_against_reference CKPT_DIR HF_DIR NAME FLAGS... : model_logits, then the reference
    ckpt=$1; hf=$2; name=$3; shift 3
    # shellcheck disable=SC2068
    timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/model_logits" "$WORK/$name" $@ --seq-length 32 \
        --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 0 --min-lr 0 --lr-warmup-iters 0 --seed 1001 \
        --load "$ckpt" --finetune > "$WORK/$name.out" 2>&1 || { tail -3 "$WORK/$name.out" | sed 's/^/# /'; return 1; }
    timeout 120 python3 "$REFERENCE" "$hf" "$WORK/$name.tokens" "$WORK/$name.logits" > "$WORK/$name.reference" 2>&1
}

# ---- ours -> HF ------------------------------------------------------------------------------------
# shellcheck disable=SC2086
run_app 2 $QWEN --expert-model-parallel-size 2 --train-iters 3 --save "$WORK/trained" --save-interval 3
ok $? "a tiny Qwen2-MoE trains 3 iterations on EP2 (--add-qkv-bias, a gated shared expert, a dense layer) and saves" ||
    tail -3 "$WORK/err" | sed 's/^/# /'
A="$WORK/trained/iter_0000003.h5"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out" "$WORK/err"
grep -q "Qwen2MoeForCausalLM, 3 layers, hidden 64, 4 heads in 2 query groups, 4 experts of ffn 48, top 2, vocab 256" "$WORK/out"
ok $? "the export says Qwen2MoeForCausalLM with the shape"
safetensors_header "$WORK/hf/model.safetensors" > "$WORK/header"
has() { grep -qx "$1" "$WORK/header"; }
has "model.layers.0.self_attn.q_proj.bias F32 64" && has "model.layers.2.self_attn.k_proj.bias F32 32" &&
    has "model.layers.1.self_attn.v_proj.bias F32 32" && has "model.layers.0.mlp.gate.weight F32 4,64" &&
    has "model.layers.2.mlp.experts.3.gate_proj.weight F32 48,64" && has "model.layers.2.mlp.experts.3.up_proj.weight F32 48,64" &&
    has "model.layers.0.mlp.experts.0.down_proj.weight F32 64,48" &&
    has "model.layers.0.mlp.shared_expert.gate_proj.weight F32 32,64" && has "model.layers.0.mlp.shared_expert.up_proj.weight F32 32,64" &&
    has "model.layers.2.mlp.shared_expert.down_proj.weight F32 64,32" && has "model.layers.2.mlp.shared_expert_gate.weight F32 1,64" &&
    has "model.layers.1.mlp.gate_proj.weight F32 96,64" && has "model.layers.1.mlp.down_proj.weight F32 64,96"
ok $? "Qwen2MoeForCausalLM's names and shapes: q/k/v biases, mlp.gate, experts.X.{gate,up,down}_proj, shared_expert(_gate), layer 1 dense"
[ "$(wc -l < "$WORK/header")" -eq 67 ] && ! grep -q -e o_proj.bias -e 'layers\.1\.mlp\.gate\.' -e block_sparse "$WORK/header"
ok $? "67 tensors (26 per MoE layer, 12 in the dense one, embeddings, norm, lm_head), no o_proj bias"
[ "$(config "$WORK/hf" model_type)" = '"qwen2_moe"' ] && [ "$(config "$WORK/hf" architectures)" = '["Qwen2MoeForCausalLM"]' ] &&
    [ "$(config "$WORK/hf" num_experts)" = 4 ] && [ "$(config "$WORK/hf" num_experts_per_tok)" = 2 ] &&
    [ "$(config "$WORK/hf" moe_intermediate_size)" = 48 ] && [ "$(config "$WORK/hf" intermediate_size)" = 96 ] &&
    [ "$(config "$WORK/hf" shared_expert_intermediate_size)" = 32 ] && [ "$(config "$WORK/hf" mlp_only_layers)" = '[1]' ] &&
    [ "$(config "$WORK/hf" decoder_sparse_step)" = 1 ] && [ "$(config "$WORK/hf" norm_topk_prob)" = false ] &&
    [ "$(config "$WORK/hf" qkv_bias)" = true ] && [ "$(config "$WORK/hf" router_aux_loss_coef)" = 0.01 ] &&
    [ "$(config "$WORK/hf" use_sliding_window)" = false ] && [ "$(config "$WORK/hf" tie_word_embeddings)" = false ]
ok $? "config.json: qwen2_moe, 4 experts of 48, top 2, shared 32, dense width 96, mlp_only_layers [1], norm_topk_prob false, qkv_bias"
check_element() {  # check_element LAYER HF_NAME HF_ROW OUR_NAME OUR_ROW COL
    [ "$(safetensors_value "$WORK/hf/model.safetensors" "model.layers.$1.$2" "$3" "$6")" = \
      "$(ours_value "$A" "decoder.layers.$1.$4" "$5" "$6")" ]
}
check_element 2 mlp.experts.2.gate_proj.weight 0 mlp.experts.local_experts.2.linear_fc1.weight 0 5 &&
    check_element 2 mlp.experts.2.up_proj.weight 47 mlp.experts.local_experts.2.linear_fc1.weight 95 63 &&
    check_element 0 mlp.experts.1.down_proj.weight 63 mlp.experts.local_experts.1.linear_fc2.weight 63 47 &&
    check_element 0 mlp.shared_expert.gate_proj.weight 31 mlp.shared_experts.linear_fc1.weight 31 7 &&
    check_element 0 mlp.shared_expert.up_proj.weight 0 mlp.shared_experts.linear_fc1.weight 32 7 &&
    check_element 2 mlp.shared_expert.down_proj.weight 5 mlp.shared_experts.linear_fc2.weight 5 31 &&
    check_element 2 mlp.shared_expert_gate.weight 0 mlp.shared_experts.gate_weight 0 17 &&
    check_element 0 mlp.gate.weight 3 mlp.router.weight 3 9 &&
    check_element 1 mlp.up_proj.weight 0 mlp.linear_fc1.weight 96 3
ok $? "experts' and the shared expert's [gate; up] halves of fc1, down_proj = fc2, the shared gate, the router, the dense MLP"
# q of group 1 (query heads 2, 3) is qkv rows 64..95, k of group 1 rows 96..111, v rows 112..127
[ "$(safetensors_value "$WORK/hf/model.safetensors" model.layers.0.self_attn.q_proj.bias 32 -1)" = "$(ours_value "$A" decoder.layers.0.self_attention.linear_qkv.bias 64)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" model.layers.0.self_attn.k_proj.bias 16 -1)" = "$(ours_value "$A" decoder.layers.0.self_attention.linear_qkv.bias 96)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" model.layers.0.self_attn.v_proj.bias 31 -1)" = "$(ours_value "$A" decoder.layers.0.self_attention.linear_qkv.bias 127)" ] &&
    [ "$(ours_value "$A" decoder.layers.0.self_attention.linear_qkv.bias 96)" != 0 ]
ok $? "the grouped qkv bias splits into q_proj.bias, k_proj.bias and v_proj.bias as the weight rows do (trained: nonzero)"

# ---- HF -> ours -> HF ------------------------------------------------------------------------------
convert --from-hf --input "$WORK/hf" --save "$WORK/imported" --make-vocab-size-divisible-by 64
ok $? "--from-hf imports the export (config.json says qwen2_moe)" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
R="$WORK/imported/release.h5"
same_model "$A" "$R"
ok $? "ours -> HF -> ours: every /model tensor bitwise equal to the trained checkpoint's, same names"
[ "$(args_attr "$R" num_experts)" = 4 ] && [ "$(args_attr "$R" moe_ffn_hidden_size)" = 48 ] &&
    [ "$(args_attr "$R" ffn_hidden_size)" = 96 ] && [ "$(args_attr "$R" moe_layer_freq)" = '[1,0,1]' ] &&
    [ "$(args_attr "$R" moe_router_pre_softmax)" = 1 ] && [ "$(args_attr "$R" moe_router_score_function)" = softmax ] &&
    [ "$(args_attr "$R" moe_shared_expert_intermediate_size)" = 32 ] && [ "$(args_attr "$R" moe_shared_expert_gate)" = 1 ] &&
    [ "$(args_attr "$R" add_qkv_bias)" = 1 ] && [ "$(args_attr "$R" add_bias_linear)" = 0 ]
ok $? "/args: --moe-layer-freq [1,0,1], --moe-router-pre-softmax, shared 32 gated, --add-qkv-bias --disable-bias-linear"
convert --to-hf --load "$WORK/imported" --output "$WORK/hf2" && cmp -s "$WORK/hf/model.safetensors" "$WORK/hf2/model.safetensors" &&
    cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json"
ok $? "HF -> ours -> HF: model.safetensors and config.json byte for byte the same"
losses() { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out"; }
# shellcheck disable=SC2086
run_app 1 $QWEN --train-iters 2 --load "$WORK/trained" --finetune && losses > "$WORK/losses_original" &&
    run_app 1 $QWEN --train-iters 2 --load "$WORK/imported" --finetune && losses > "$WORK/losses_imported" &&
    [ "$(wc -l < "$WORK/losses_imported")" -eq 2 ] && cmp -s "$WORK/losses_original" "$WORK/losses_imported"
ok $? "the imported checkpoint fine-tunes with the original's losses: $(tr '\n' ' ' < "$WORK/losses_imported")"

# ---- logits against an independent reference of HF's Qwen2-MoE forward -----------------------------
# shellcheck disable=SC2086
logits_against_reference "$WORK/imported" "$WORK/hf" ours $QWEN
ok $? "our CPU forward of the imported model matches HF Qwen2-MoE's (plain-Python float64) within 1e-4: $(head -1 "$WORK/ours.reference")"
for variant in flip-normalization no-shared-gate no-qkv-bias; do
    timeout 120 python3 "$REFERENCE" "$WORK/hf" "$WORK/ours.tokens" "$WORK/ours.logits" --variant $variant > "$WORK/variant" 2>&1
    [ $? -eq 1 ] && grep -q '^FAIL' "$WORK/variant"
    ok $? "a reference with $variant fails the same check: $(head -1 "$WORK/variant" | sed 's/.*: max/max/')"
done
# without --moe-router-pre-softmax the top-k probabilities are renormalized: norm_topk_prob true
# shellcheck disable=SC2086
run_app 1 $QWEN_RENORMALIZED --train-iters 1 --save "$WORK/normalized" --save-interval 1 &&
    convert --to-hf --load "$WORK/normalized" --output "$WORK/hf_normalized" &&
    [ "$(config "$WORK/hf_normalized" norm_topk_prob)" = true ] &&
    logits_against_reference "$WORK/normalized" "$WORK/hf_normalized" normalized $QWEN_RENORMALIZED
ok $? "trained without --moe-router-pre-softmax: norm_topk_prob true, and the logits match: $(head -1 "$WORK/normalized.reference")"

# ---- refusals ------------------------------------------------------------------------------------
edit_config "$WORK/hf" "$WORK/hf_step" 'c.update(decoder_sparse_step=2, mlp_only_layers=[])' &&
    ! convert --from-hf --input "$WORK/hf_step" --save "$WORK/refused" && grep -q "model.layers.0.mlp.gate_proj.weight" "$WORK/err"
ok $? "decoder_sparse_step 2 makes layer 0 dense, whose tensors are missing: $(cut -c 1-140 "$WORK/err")"
edit_config "$WORK/hf" "$WORK/hf_window" 'c.update(use_sliding_window=True, sliding_window=16)' &&
    ! convert --from-hf --input "$WORK/hf_window" --save "$WORK/refused" && grep -q 'use_sliding_window with "sliding_window" 16' "$WORK/err"
ok $? "a sliding window shorter than the context is refused"
refused_export() {  # refused_export CKPT_DIR TEXT : --to-hf fails with TEXT, writing nothing
    ! convert --to-hf --load "$1" --output "$WORK/hf_refused" && grep -q "$2" "$WORK/err" && [ ! -e "$WORK/hf_refused" ]
}
cp -r "$WORK/trained" "$WORK/forged"
"$FIXTURE" set-arg "$WORK/forged/iter_0000003.h5" moe_shared_expert_gate int:0 &&
    refused_export "$WORK/forged" "no Hugging Face Qwen2-MoE layout: its shared experts have no gate"
ok $? "ungated shared experts are refused: $(cat "$WORK/err")"
run_app 1 --args-file "$top_srcdir/configs/llama-tiny.args" --add-qkv-bias --train-iters 1 --lr-warmup-iters 0 --eval-iters 0 --save "$WORK/llama_qkv" --save-interval 1 &&
    refused_export "$WORK/llama_qkv" "no Hugging Face Llama layout: only its QKV projection has a bias (--add-qkv-bias)"
ok $? "a Llama with --add-qkv-bias is refused (LlamaForCausalLM's attention_bias covers o_proj too): $(cut -c 1-160 "$WORK/err")"

# ---- --add-qkv-bias on tensor parallelism: the one-rank losses and parameters ----------------------
MODEL="$QWEN --train-iters 5 --lr 1e-3 --hidden-dropout 0.1 --attention-dropout 0.1"
# 4 heads in 2 groups; the key biases' zero gradient leaves Adam-normalized noise, at most about lr
# per step: 5 x lr
QUERY_GROUPS=2
KEY_BIAS_BOUND=5e-3
. "$top_srcdir/tests/mpi/parallel_compare.sh"
reference qwen
layout "TP2 + sequence parallel, --add-qkv-bias (the q/k/v bias split by heads)" 2 --tensor-model-parallel-size 2 --sequence-parallel
done_testing
