#!/bin/sh
# bert_hf_test.sh: convert_checkpoint between our BERT (pretrain_bert, Megatron's pre-LN encoder)
# and Hugging Face MegatronBertForPreTraining (issue 46). A tiny BERT trained 3 iterations on TP2
# goes ours -> HF -> ours -> HF: the safetensors header and config.json are what transformers'
# MegatronBertForPreTraining loads (names, shapes, dtype, well-formed header; the tied decoder
# left out), q/k/v are taken from each head's [q; k; v] rows of our fused linear_qkv (element by
# element, telling neighbouring rows apart); every tensor comes back bitwise and the second export
# is the first byte for byte. The imported checkpoint trains (pretrain_bert --finetune) on TP2
# and on one rank with exactly the losses of the original (also with --use-checkpoint-args), and
# finetune_bert starts from it with the original's losses. Then: --bert-no-binary-head as MegatronBertForMaskedLM (zero token
# types), an untied decoder, a padded vocabulary (rows dropped, zeros back), bf16, and the
# refusals: BertForPreTraining (post-LN), a non-LayerNorm BERT, a finetune_bert checkpoint,
# --model-type against the files, a missing tensor, a stranger, nonzero token types without a
# binary head, another activation. Our forward's logits (tests/tools/bert_logits) are those of a
# plain-Python reference of transformers' MegatronBert forward on the export
# (tests/tools/megatron_bert_reference.py; LM head with exact GeLU), also for the MaskedLM and
# untied exports; the post-LN layer and swapped key/value projections fail it. With
# --no-bias-gelu-fusion the MLP's GeLU is exact too: hidden_act "gelu", exact for both.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
PRETRAIN_GPT="$top_builddir/app/pretrain_bert"   # run_app's program
CONVERT="$top_builddir/app/convert_checkpoint"
FINETUNE="$top_builddir/app/finetune_bert"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"
LOGITS="$top_builddir/tests/tools/bert_logits"
REFERENCE="$top_srcdir/tests/tools/megatron_bert_reference.py"
DATA="$top_srcdir/tests/data"

convert() {  # output in $WORK/out, $WORK/err
    timeout 120 "$CONVERT" "$@" >"$WORK/out" 2>"$WORK/err"
}
bert_corpus bert 120
# a vocabulary of 64 ids (the 61 of the test vocabulary and three more words; pretrain_bert's
# vocabulary is the file's, as Megatron-Core's BertTokenizer: no [BOS]/[EOS]): no padding rows at
# --make-vocab-size-divisible-by 16 x TP2, so that a round trip keeps every row
cp "$BERT_VOCAB" "$WORK/vocab64.txt" && printf 'zebra\nyak\nxylophone\n' >> "$WORK/vocab64.txt"
MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --make-vocab-size-divisible-by 16 --hidden-dropout 0 --attention-dropout 0 --split 949,50,1
       --data-path $WORK/bert_text_sentence.h5 --vocab-file $WORK/vocab64.txt"

# safetensors_header FILE : the JSON header, one tensor per line "NAME DTYPE d0,d1", sorted
safetensors_header() {
    python3 - "$1" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
assert n % 8 == 0, "header length not a multiple of 8"
spans = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "tensors overlap or leave gaps"
assert 8 + n + spans[-1][1] == len(data), "the tensors do not fill the file"
print("__metadata__", json.dumps(header.get("__metadata__"), sort_keys=True))
for name in sorted(k for k in header if k != "__metadata__"):
    v = header[name]
    size = {"F32": 4, "BF16": 2}[v["dtype"]]
    count = 1
    for d in v["shape"]:
        count *= d
    assert v["data_offsets"][1] - v["data_offsets"][0] == size * count, name + ": size does not match its shape"
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
# safetensors_zero FILE NAME : 0 when every element of the F32 tensor is 0
safetensors_zero() {
    python3 - "$@" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[sys.argv[2]]
body = data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
sys.exit(0 if body == bytes(len(body)) and len(body) > 0 else 1)
EOF
}
# safetensors_rewrite IN OUT PYTHON_EXPR : OUT holds IN's tensors, changed by PYTHON_EXPR acting on
# `tensors` (a dict name -> [dtype, shape, bytes]), e.g. "tensors.pop('x')"
safetensors_rewrite() {
    python3 - "$@" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
tensors = {k: [v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]]
           for k, v in header.items() if k != "__metadata__"}
exec(sys.argv[3])
out, offset, body = {"__metadata__": {"format": "pt"}}, 0, b""
for k, (dtype, shape, raw) in tensors.items():
    out[k] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
    offset += len(raw)
    body += raw
text = json.dumps(out).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + body)
EOF
}
ours_value() {  # ours_value FILE.h5 NAME ROW [COL] (a vector's element: ROW only); "missing" when unreadable
    value=$("$FIXTURE" get "$@") && printf '%.9g\n' "$value" || echo missing | tee -a "$WORK/ours_values"
}
config() {  # config DIR KEY : a config.json value as JSON
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1] + "/config.json"))[sys.argv[2]]))' "$1" "$2"
}
same_model() {  # same_model A.h5 B.h5 : every /model tensor of B equals A's, and they have the same names
    h5ls "$1/model" | awk '{print $1}' | sort > "$WORK/names_a" &&
        h5ls "$2/model" | awk '{print $1}' | sort > "$WORK/names_b" &&
        cmp -s "$WORK/names_a" "$WORK/names_b" || { diag "the tensor names differ"; return 1; }
    while read -r name; do
        h5diff -d 0 "$1" "$2" "/model/$name" "/model/$name" > /dev/null || { diag "differs: $name"; return 1; }
    done < "$WORK/names_a"
}
args_attr() { h5dump -a "/args/$2" "$1" | sed -n 's/^ *(0): *//p' | tr -d '"'; }

# ---- ours -> HF ----------------------------------------------------------------------------------
run_app 2 $MODEL --tensor-model-parallel-size 2 --train-iters 3 --save "$WORK/trained" --save-interval 3
ok $? "a tiny BERT trains 3 iterations on TP2 and saves" || tail -3 "$WORK/err" | sed 's/^/# /'
A="$WORK/trained/iter_0000003.h5"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
grep -q "MegatronBertForPreTraining, 2 layers, hidden 32, 4 heads, ffn 128, vocab 64 (0 padding rows dropped), tied embeddings, float32" "$WORK/out"
ok $? "the export says MegatronBertForPreTraining with the shape"

safetensors_header "$WORK/hf/model.safetensors" > "$WORK/header"
ok $? "the safetensors file is well formed (8-byte aligned header, every tensor's bytes its shape's, no gaps, data fills the file)"
has() { grep -qx "$1" "$WORK/header"; }
has '__metadata__ {"format": "pt"}' && has "bert.embeddings.word_embeddings.weight F32 64,32" &&
    has "bert.embeddings.position_embeddings.weight F32 32,32" && has "bert.embeddings.token_type_embeddings.weight F32 2,32" &&
    has "bert.encoder.layer.1.attention.ln.weight F32 32" && has "bert.encoder.layer.1.attention.ln.bias F32 32" &&
    has "bert.encoder.layer.0.attention.self.query.weight F32 32,32" && has "bert.encoder.layer.0.attention.self.key.weight F32 32,32" &&
    has "bert.encoder.layer.0.attention.self.value.weight F32 32,32" && has "bert.encoder.layer.0.attention.self.value.bias F32 32" &&
    has "bert.encoder.layer.0.attention.output.dense.weight F32 32,32" && has "bert.encoder.layer.0.ln.bias F32 32" &&
    has "bert.encoder.layer.1.intermediate.dense.weight F32 128,32" && has "bert.encoder.layer.1.output.dense.weight F32 32,128" &&
    has "bert.encoder.ln.weight F32 32" && has "bert.pooler.dense.weight F32 32,32" &&
    has "cls.predictions.transform.dense.weight F32 32,32" && has "cls.predictions.transform.LayerNorm.weight F32 32" &&
    has "cls.predictions.transform.LayerNorm.bias F32 32" && has "cls.predictions.bias F32 64" &&
    has "cls.seq_relationship.weight F32 2,32" && has "cls.seq_relationship.bias F32 2"
ok $? "MegatronBertForPreTraining's names and shapes: embeddings, attention.ln, self.query/key/value, ln, intermediate, output, encoder.ln, pooler, cls"
[ "$(grep -vc __metadata__ "$WORK/header")" -eq 46 ] && ! grep -q 'cls.predictions.decoder' "$WORK/header"
ok $? "46 tensors (16 per layer, 3 embeddings, final norm, 5 of the LM head, pooler, binary head); the tied decoder left out"
[ "$(config "$WORK/hf" model_type)" = '"megatron-bert"' ] &&
    [ "$(config "$WORK/hf" architectures)" = '["MegatronBertForPreTraining"]' ] &&
    [ "$(config "$WORK/hf" hidden_size)" = 32 ] && [ "$(config "$WORK/hf" num_hidden_layers)" = 2 ] &&
    [ "$(config "$WORK/hf" num_attention_heads)" = 4 ] && [ "$(config "$WORK/hf" intermediate_size)" = 128 ] &&
    [ "$(config "$WORK/hf" max_position_embeddings)" = 32 ] && [ "$(config "$WORK/hf" vocab_size)" = 64 ] &&
    [ "$(config "$WORK/hf" type_vocab_size)" = 2 ] && [ "$(config "$WORK/hf" layer_norm_eps)" = 1e-05 ] &&
    [ "$(config "$WORK/hf" hidden_act)" = '"gelu_new"' ] && [ "$(config "$WORK/hf" position_embedding_type)" = '"absolute"' ] &&
    [ "$(config "$WORK/hf" tie_word_embeddings)" = true ] && [ "$(config "$WORK/hf" torch_dtype)" = '"float32"' ] &&
    [ "$(config "$WORK/hf" hidden_dropout_prob)" = 0.0 ] && [ "$(config "$WORK/hf" attention_probs_dropout_prob)" = 0.0 ]
ok $? "config.json: megatron-bert, MegatronBertForPreTraining, the dimensions, 2 token types, eps 1e-05, gelu_new, absolute positions, tied, float32, the dropouts"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(list(d) != sorted(d))' "$WORK/hf/config.json"
ok $? "config.json's keys are sorted (as transformers writes them)"

# placement: our linear_qkv rows are per head h [q; k; v], D = 8 rows each: HF query row h D + d is
# our row 24 h + d, key 24 h + 8 + d, value 24 h + 16 + d (biases likewise)
check_element() {  # check_element HF_NAME HF_ROW OUR_NAME OUR_ROW COL (COL 0 of a vector: its element)
    case $3 in *.bias) col= ;; *) col=$5 ;; esac
    [ "$(safetensors_value "$WORK/hf/model.safetensors" "bert.encoder.layer.1.$1" "$2" "$5")" = \
      "$(ours_value "$A" "encoder.layers.1.$3" "$4" $col)" ]
}
check_element attention.self.query.weight 0 self_attention.linear_qkv.weight 0 5 &&
    check_element attention.self.query.weight 9 self_attention.linear_qkv.weight 25 3 &&
    check_element attention.self.key.weight 0 self_attention.linear_qkv.weight 8 7 &&
    check_element attention.self.key.weight 17 self_attention.linear_qkv.weight 57 0 &&
    check_element attention.self.value.weight 9 self_attention.linear_qkv.weight 41 2 &&
    check_element attention.self.value.weight 31 self_attention.linear_qkv.weight 95 31 &&
    check_element attention.self.query.weight 31 self_attention.linear_qkv.weight 79 30 &&
    check_element attention.self.query.bias 10 self_attention.linear_qkv.bias 26 0 &&
    check_element attention.self.key.bias 10 self_attention.linear_qkv.bias 34 0 &&
    check_element attention.self.value.bias 23 self_attention.linear_qkv.bias 71 0 &&
    check_element intermediate.dense.weight 100 mlp.linear_fc1.weight 100 4 &&
    check_element output.dense.weight 3 mlp.linear_fc2.weight 3 127
ok $? "query/key/value rows (and biases) taken from each head's [q; k; v] block of linear_qkv; fc1, fc2 as they are"
[ "$(safetensors_value "$WORK/hf/model.safetensors" bert.encoder.layer.1.attention.self.key.weight 0 7)" != \
  "$(ours_value "$A" encoder.layers.1.self_attention.linear_qkv.weight 7 7)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" bert.encoder.layer.1.attention.self.key.weight 0 7)" != \
      "$(ours_value "$A" encoder.layers.1.self_attention.linear_qkv.weight 9 7)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" bert.encoder.layer.1.attention.self.query.bias 10 0)" != \
      "$(ours_value "$A" encoder.layers.1.self_attention.linear_qkv.bias 25)" ] &&
    ! grep -q missing "$WORK/ours_values"
ok $? "(the element checks tell neighbouring rows apart)"
[ "$(safetensors_value "$WORK/hf/model.safetensors" cls.predictions.bias 63 0)" = "$(ours_value "$A" output_layer.bias 63)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" cls.predictions.transform.dense.weight 5 6)" = "$(ours_value "$A" lm_head.dense.weight 5 6)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" cls.seq_relationship.weight 1 30)" = "$(ours_value "$A" binary_head.weight 1 30)" ] &&
    [ "$(safetensors_value "$WORK/hf/model.safetensors" bert.embeddings.token_type_embeddings.weight 1 2)" = \
      "$(ours_value "$A" embedding.tokentype_embeddings.weight 1 2)" ]
ok $? "the LM head's bias and transform, the binary head and the token types in place"

# ---- HF -> ours -> HF -------------------------------------------------------------------------------
convert --from-hf --input "$WORK/hf" --save "$WORK/imported" --make-vocab-size-divisible-by 16
ok $? "--from-hf imports the export (config.json says megatron-bert)" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out"
R="$WORK/imported/release.h5"
same_model "$A" "$R"
ok $? "ours -> HF -> ours: every /model tensor bitwise equal to the trained TP2 checkpoint's, same names"
[ "$(args_attr "$R" normalization)" = LayerNorm ] && [ "$(args_attr "$R" position_embedding_type)" = learned_absolute ] &&
    [ "$(args_attr "$R" num_query_groups)" = 4 ] && [ "$(args_attr "$R" add_bias_linear)" = 1 ] &&
    [ "$(args_attr "$R" padded_vocab_size)" = 64 ] && [ "$(args_attr "$R" untie_embeddings_and_output_weights)" = 0 ] &&
    [ "$(args_attr "$R" tensor_model_parallel_size)" = 1 ]
ok $? "/args: LayerNorm, learned positions, 4 heads, biases, padded vocab 64, tied"
convert --to-hf --load "$WORK/imported" --output "$WORK/hf2" && cmp -s "$WORK/hf/model.safetensors" "$WORK/hf2/model.safetensors" &&
    cmp -s "$WORK/hf/config.json" "$WORK/hf2/config.json"
ok $? "HF -> ours -> HF: model.safetensors and config.json byte for byte the same"

# ---- logits: our forward against a plain-Python reference of transformers' MegatronBert -----------
# (tests/tools/megatron_bert_reference.py, float64): exact with the LM head's GeLU exact (what our
# model computes); as transformers computes config.json's gelu_new there, within the tanh
# approximation; the post-LN layer (BertForPreTraining's) and a key/value swap fail it
our_logits() {  # our_logits PREFIX CHECKPOINT FLAGS... : bert_logits on one sample (28 of 32 positions valid)
    prefix=$1; checkpoint=$2; shift 2
    timeout 120 "$MPIEXEC" -n 1 "$LOGITS" "$prefix" $MODEL --micro-batch-size 1 --global-batch-size 1 --train-iters 1 \
        --load "$checkpoint" --finetune "$@" > "$WORK/out" 2> "$WORK/err"
}
reference() {  # reference HF_DIR PREFIX OPTIONS... : output in $WORK/reference
    python3 "$REFERENCE" "$@" > "$WORK/reference" 2>&1
}
our_logits "$WORK/ours" "$WORK/imported"
ok $? "our CPU forward of the imported checkpoint on a sample with token types and padding (bert_logits)" || sed 's/^/# /' "$WORK/err"
sed 's/^/# /' "$WORK/out" | grep bert_logits
reference "$WORK/hf" "$WORK/ours" --lm-head-gelu exact
ok $? "the reference of the export with the LM head's exact GeLU: $(cat "$WORK/reference")"
reference "$WORK/hf" "$WORK/ours" --tol 1e-3
ok $? "as transformers computes config.json (gelu_new in the LM head too), within 1e-3: $(cat "$WORK/reference")"
for variant in post-ln swap-key-value; do
    reference "$WORK/hf" "$WORK/ours" --lm-head-gelu exact --variant $variant
    [ $? -eq 1 ] && grep -q '^FAIL' "$WORK/reference"
    ok $? "negative control: the reference with $variant differs: $(cat "$WORK/reference")"
done

# --no-bias-gelu-fusion: the MLP's GeLU is exact (F.gelu, Megatron without the fusion) as the LM
# head's, so the export says hidden_act "gelu", exact for both: the reference as transformers
# computes config.json; the same checkpoint run with the tanh MLP (without the flag) fails it;
# the import records bias_gelu_fusion 0 and exports again byte for byte
run_app 1 $MODEL --no-bias-gelu-fusion --train-iters 1 --save "$WORK/erf" --save-interval 1
ok $? "a BERT with --no-bias-gelu-fusion trains and saves (bias_gelu_fusion $(args_attr "$WORK/erf/iter_0000001.h5" bias_gelu_fusion))"
convert --to-hf --load "$WORK/erf" --output "$WORK/hf_erf" && [ "$(config "$WORK/hf_erf" hidden_act)" = '"gelu"' ] &&
    [ "$(config "$WORK/hf" hidden_act)" = '"gelu_new"' ]
ok $? "it exports with hidden_act gelu (the fused tanh MLP's export keeps gelu_new)"
our_logits "$WORK/ours_erf" "$WORK/erf" --no-bias-gelu-fusion && reference "$WORK/hf_erf" "$WORK/ours_erf"
ok $? "its logits are the reference's with config.json's gelu in the MLP and the LM head: $(cat "$WORK/reference")"
our_logits "$WORK/ours_erf_tanh" "$WORK/erf" && reference "$WORK/hf_erf" "$WORK/ours_erf_tanh" --tol 1e-6
[ $? -eq 1 ] && grep -q '^FAIL' "$WORK/reference"
ok $? "negative control: its weights run with the tanh MLP differ: $(cat "$WORK/reference")"
rm -rf "$WORK/imported_erf" "$WORK/hf_erf2"
convert --from-hf --input "$WORK/hf_erf" --save "$WORK/imported_erf" --make-vocab-size-divisible-by 16 &&
    [ "$(args_attr "$WORK/imported_erf/release.h5" bias_gelu_fusion)" = 0 ] &&
    [ "$(args_attr "$WORK/imported/release.h5" bias_gelu_fusion)" = 1 ] &&
    convert --to-hf --load "$WORK/imported_erf" --output "$WORK/hf_erf2" &&
    cmp -s "$WORK/hf_erf/config.json" "$WORK/hf_erf2/config.json"
ok $? "imported, hidden_act gelu is bias_gelu_fusion 0 (gelu_new 1), and exports again as gelu"

# the import trains exactly as the original checkpoint, on TP2 and on one rank
losses() { grep -o 'lm loss: [0-9.E+-]* | sop loss: [0-9.E+-]*' "$WORK/out"; }
for n in 2 1; do
    run_app $n $MODEL --tensor-model-parallel-size $n --train-iters 2 --load "$WORK/trained" --finetune
    ok $? "TP$n: the trained checkpoint continues (--finetune)" || tail -3 "$WORK/err" | sed 's/^/# /'
    losses > "$WORK/losses_original"
    run_app $n $MODEL --tensor-model-parallel-size $n --train-iters 2 --load "$WORK/imported" --finetune
    ok $? "TP$n: the imported checkpoint continues (--finetune)" || tail -3 "$WORK/err" | sed 's/^/# /'
    losses > "$WORK/losses_imported"
    [ "$(wc -l < "$WORK/losses_imported")" -eq 2 ] && cmp -s "$WORK/losses_original" "$WORK/losses_imported"
    ok $? "TP$n: the imported checkpoint's lm and sop losses are the original's, bitwise: $(head -1 "$WORK/losses_imported")"
done
# the shape from the import's /args (--use-checkpoint-args): the same run as the original's on one rank
run_app 1 --use-checkpoint-args --load "$WORK/imported" --finetune --train-iters 2 \
    --data-path "$WORK/bert_text_sentence.h5" --vocab-file "$WORK/vocab64.txt" --split 949,50,1 --micro-batch-size 2 \
    --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --make-vocab-size-divisible-by 16 \
    --hidden-dropout 0 --attention-dropout 0 && losses > "$WORK/losses_args" && cmp -s "$WORK/losses_original" "$WORK/losses_args"
ok $? "pretrain_bert --use-checkpoint-args takes the model from the import's /args: the same losses" || tail -3 "$WORK/err" | sed 's/^/# /'
head -49 "$DATA/mnli_synthetic_train.tsv" > "$WORK/mnli_train.tsv"  # 48 samples: 12 iterations
FT="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
    --make-vocab-size-divisible-by 16 --vocab-file $WORK/vocab64.txt --task MNLI --train-data $WORK/mnli_train.tsv
    --valid-data $DATA/mnli_synthetic_dev_matched.tsv --micro-batch-size 4 --lr 1e-3 --log-interval 1 --epochs 1
    --hidden-dropout 0 --attention-dropout 0 --tensor-model-parallel-size 2"
for source in trained imported; do
    timeout 300 "$MPIEXEC" -n 2 "$FINETUNE" $FT --pretrained-checkpoint "$WORK/$source" > "$WORK/ft_$source" 2> "$WORK/err"
    ok $? "finetune_bert (MNLI, TP2) starts from the $source checkpoint" || tail -3 "$WORK/err" | sed 's/^/# /'
    grep -o ' loss: [0-9.E+-]*' "$WORK/ft_$source" > "$WORK/ft_$source.loss"
done
[ "$(wc -l < "$WORK/ft_imported.loss")" -gt 10 ] && cmp -s "$WORK/ft_trained.loss" "$WORK/ft_imported.loss"
ok $? "finetune_bert from the imported checkpoint: the original's $(wc -l < "$WORK/ft_imported.loss") losses, bitwise"

# ---- without the binary head: MegatronBertForMaskedLM, zero token types ---------------------------
run_app 1 $MODEL --bert-no-binary-head --train-iters 1 --save "$WORK/nobinary" --save-interval 1
ok $? "a BERT without the binary head trains and saves" || tail -3 "$WORK/err" | sed 's/^/# /'
convert --to-hf --load "$WORK/nobinary" --output "$WORK/hf_nobinary" &&
    safetensors_header "$WORK/hf_nobinary/model.safetensors" > "$WORK/header"
ok $? "--to-hf exports it" || sed 's/^/# /' "$WORK/err"
[ "$(config "$WORK/hf_nobinary" architectures)" = '["MegatronBertForMaskedLM"]' ] &&
    has "bert.embeddings.token_type_embeddings.weight F32 2,32" &&
    safetensors_zero "$WORK/hf_nobinary/model.safetensors" bert.embeddings.token_type_embeddings.weight &&
    ! grep -q 'pooler\|seq_relationship' "$WORK/header" && [ "$(grep -vc __metadata__ "$WORK/header")" -eq 42 ]
ok $? "MegatronBertForMaskedLM: zero token_type_embeddings [2, 32], no pooler, no seq_relationship (42 tensors)"
convert --from-hf --input "$WORK/hf_nobinary" --save "$WORK/nobinary_back" --make-vocab-size-divisible-by 16 &&
    same_model "$WORK/nobinary/iter_0000001.h5" "$WORK/nobinary_back/release.h5" &&
    convert --to-hf --load "$WORK/nobinary_back" --output "$WORK/hf_nobinary2" &&
    cmp -s "$WORK/hf_nobinary/model.safetensors" "$WORK/hf_nobinary2/model.safetensors"
ok $? "and back: bitwise the same tensors (no token types), the re-export byte for byte" || sed 's/^/# /' "$WORK/err"
run_app 1 $MODEL --bert-no-binary-head --train-iters 1 --load "$WORK/nobinary_back" --finetune
ok $? "pretrain_bert --bert-no-binary-head continues from it" || tail -3 "$WORK/err" | sed 's/^/# /'
our_logits "$WORK/ours_nobinary" "$WORK/nobinary" --bert-no-binary-head && [ ! -e "$WORK/ours_nobinary.binary" ] &&
    reference "$WORK/hf_nobinary" "$WORK/ours_nobinary" --lm-head-gelu exact
ok $? "MegatronBertForMaskedLM's reference (zero token types) computes our logits: $(cat "$WORK/reference")"

# ---- untied decoder, padded vocabulary, bf16 --------------------------------------------------------
run_app 1 $MODEL --untie-embeddings-and-output-weights --train-iters 1 --save "$WORK/untied" --save-interval 1 &&
    convert --to-hf --load "$WORK/untied" --output "$WORK/hf_untied" &&
    safetensors_header "$WORK/hf_untied/model.safetensors" > "$WORK/header" &&
    has "cls.predictions.decoder.weight F32 64,32" && [ "$(config "$WORK/hf_untied" tie_word_embeddings)" = false ] &&
    convert --from-hf --input "$WORK/hf_untied" --save "$WORK/untied_back" --make-vocab-size-divisible-by 16 &&
    same_model "$WORK/untied/iter_0000001.h5" "$WORK/untied_back/release.h5"
ok $? "an untied output layer: cls.predictions.decoder.weight, tie_word_embeddings false, and back bitwise" || sed 's/^/# /' "$WORK/err"
our_logits "$WORK/ours_untied" "$WORK/untied" --untie-embeddings-and-output-weights &&
    reference "$WORK/hf_untied" "$WORK/ours_untied" --lm-head-gelu exact
ok $? "the untied decoder's reference computes our logits: $(cat "$WORK/reference")"
run_app 2 $(echo $MODEL | sed "s|$WORK/vocab64.txt|$BERT_VOCAB|") --make-vocab-size-divisible-by 8 --tensor-model-parallel-size 2 \
    --train-iters 1 --save "$WORK/padded" --save-interval 1 &&
    convert --to-hf --load "$WORK/padded" --output "$WORK/hf_padded" && grep -q "vocab 61 (3 padding rows dropped)" "$WORK/out" &&
    safetensors_header "$WORK/hf_padded/model.safetensors" > "$WORK/header" &&
    has "bert.embeddings.word_embeddings.weight F32 61,32" && has "cls.predictions.bias F32 61" &&
    [ "$(config "$WORK/hf_padded" vocab_size)" = 61 ]
ok $? "61 words padded to 64 on TP2: the export keeps the 61 rows (vocab_size 61)" || sed 's/^/# /' "$WORK/err"
convert --from-hf --input "$WORK/hf_padded" --save "$WORK/padded_back" --make-vocab-size-divisible-by 16 &&
    [ "$(ours_value "$WORK/padded_back/release.h5" embedding.word_embeddings.weight 61 5)" = 0 ] &&
    [ "$(ours_value "$WORK/padded_back/release.h5" embedding.word_embeddings.weight 63 5)" = 0 ] &&
    [ "$(ours_value "$WORK/padded_back/release.h5" output_layer.bias 61)" = 0 ] &&
    [ "$(ours_value "$WORK/padded_back/release.h5" embedding.word_embeddings.weight 60 5)" = \
      "$(ours_value "$WORK/padded/iter_0000001.h5" embedding.word_embeddings.weight 60 5)" ]
ok $? "and back padded to 64 with zero rows (the real rows kept)"
convert --to-hf --load "$WORK/trained" --output "$WORK/hf_bf16" --dtype bfloat16 &&
    safetensors_header "$WORK/hf_bf16/model.safetensors" > "$WORK/header" &&
    has "bert.encoder.layer.0.attention.self.query.weight BF16 32,32" && [ "$(config "$WORK/hf_bf16" torch_dtype)" = '"bfloat16"' ]
ok $? "--dtype bfloat16 writes BF16 tensors and torch_dtype bfloat16"

# ---- refusals: one message naming the file and what is wrong, nothing written ----------------------
refused() {  # refused PATTERN DESCRIPTION : the last convert failed with PATTERN on stderr
    [ "$status" -ne 0 ] && grep -q "$1" "$WORK/err" && [ "$(wc -l < "$WORK/err")" -eq 1 ]
    ok $? "$2: $(cat "$WORK/err")"
}
mkdir "$WORK/hf_bad"
ln -s "$WORK/hf/model.safetensors" "$WORK/hf_bad/model.safetensors"
sed 's/"model_type": "megatron-bert"/"model_type": "bert"/; s/MegatronBertForPreTraining/BertForPreTraining/' \
    "$WORK/hf/config.json" > "$WORK/hf_bad/config.json"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused "model_type \"bert\" (BertForPreTraining) cannot be converted: .*post-LN.*MegatronBertForPreTraining" \
    "BertForPreTraining (post-LN) is refused, naming why and what converts"
[ ! -e "$WORK/bad_ckpt" ]
ok $? "(nothing written)"
sed 's/"hidden_act": "gelu_new"/"hidden_act": "relu"/' "$WORK/hf/config.json" > "$WORK/hf_bad/config.json"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused 'hidden_act "relu" cannot be converted' "another activation is refused"
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 3/' "$WORK/hf/config.json" > "$WORK/hf_bad/config.json"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused "model.safetensors: no tensor 'bert.encoder.layer.2.attention.ln.weight'.*says 3 layers" "a missing layer is named with the file"
cp "$WORK/hf/config.json" "$WORK/hf_bad/config.json" && rm "$WORK/hf_bad/model.safetensors" &&
    safetensors_rewrite "$WORK/hf/model.safetensors" "$WORK/hf_bad/model.safetensors" \
        "tensors.pop('bert.encoder.layer.1.attention.self.value.bias')"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused "hf_bad/model.safetensors: no tensor 'bert.encoder.layer.1.attention.self.value.bias'" "a missing tensor is named with the file"
safetensors_rewrite "$WORK/hf/model.safetensors" "$WORK/hf_bad/model.safetensors" \
    "tensors['bert.encoder.layer.0.attention.self.distance_embedding.weight'] = ['F32', [1], bytes(4)]"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused "tensor 'bert.encoder.layer.0.attention.self.distance_embedding.weight' is not a parameter of the MegatronBertForPreTraining" \
    "a tensor no parameter claims is named"
cp "$WORK/hf_nobinary/config.json" "$WORK/hf_bad/config.json" &&
    safetensors_rewrite "$WORK/hf_nobinary/model.safetensors" "$WORK/hf_bad/model.safetensors" \
        "t = tensors['bert.embeddings.token_type_embeddings.weight']; t[2] = struct.pack('<f', 0.5) + t[2][4:]"
convert --from-hf --input "$WORK/hf_bad" --save "$WORK/bad_ckpt"; status=$?
refused "token_type_embeddings.weight is not zero, but there is no binary head" "nonzero token types without a binary head are refused"
convert --model-type GPT --loader llama_mistral --saver core --load-dir "$WORK/hf" --save-dir "$WORK/bad_ckpt"; status=$?
refused "model-type GPT, but .*config.json describes a BERT" "convert.py's --model-type GPT with a MegatronBert folder is refused"
convert --model-type BERT --loader megatron --saver hf --load-dir "$WORK/trained" --save-dir "$WORK/hf_megatron_flags" &&
    cmp -s "$WORK/hf/model.safetensors" "$WORK/hf_megatron_flags/model.safetensors"
ok $? "convert.py's --model-type BERT --loader megatron --saver hf exports the same file" || sed 's/^/# /' "$WORK/err"
run_app 1 $MODEL --normalization RMSNorm --train-iters 1 --save "$WORK/rms" --save-interval 1
convert --to-hf --load "$WORK/rms" --output "$WORK/hf_rms"; status=$?
refused "no Hugging Face MegatronBert layout: its norms are not LayerNorm" "an RMSNorm BERT is refused with the reason"
[ ! -e "$WORK/hf_rms" ]
ok $? "(nothing written)"
timeout 300 "$MPIEXEC" -n 2 "$FINETUNE" $FT --pretrained-checkpoint "$WORK/trained" --save "$WORK/finetuned" > "$WORK/out" 2> "$WORK/err"
convert --to-hf --load "$WORK/finetuned" --output "$WORK/hf_finetuned"; status=$?
refused "it is a finetune_bert checkpoint" "a finetune_bert checkpoint is refused with the reason"
done_testing
