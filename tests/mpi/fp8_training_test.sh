#!/bin/sh
# fp8_training_test.sh: FP8 training (issue 43, app/model/fp8_linear.h) emulated on the CPU
# backend, with Megatron's --fp8-* flags, on a tiny GPT over the bundled Shakespeare corpus:
#  - fp8 (hybrid, delayed scaling) trains: the loss falls, within 1% of bf16 at every one of 20
#    iterations, and is not bitwise bf16's (the operands are rounded to fp8);
#  - tensor parallelism (TP2, TP2 with sequence parallelism, TP2 x DP2) gives TP1's losses within
#    3e-4 relative over 10 iterations, and after one step the same scales: the weights' bitwise
#    (the amaxes are reduced over TP and DP), the inputs' within 1e-6 and the gradients' within
#    1e-3 (a later layer's input and every gradient come from sums in another order, whose last
#    bits depend on the BLAS kernels, and the gradients pass through fp8 roundings on the way:
#    6.5e-5 measured under OPENBLAS_CORETYPE=Prescott), hence the looser loss tolerance than
#    bf16's; --tp-comm-overlap gives the run without's losses within 1e-6 (bitwise where the BLAS
#    kernels' blocking does not change with the overlap's row chunks: not under Haswell's);
#  - tensorwise scaling, e4m3 and --no-fp8-wgrad each run and change the numbers;
#  - --first-last-layers-bf16 keeps exactly the named layers in bf16 (the log names them, the
#    checkpoint holds _extra_state for the others only, all layers in bf16 is bitwise bf16);
#  - --deterministic-mode reruns and a checkpoint save/resume are bitwise the unbroken run (the
#    amax histories and scales come back from the checkpoint); bf16 <-> fp8 checkpoints load;
#  - a mixture of experts in fp8 (each expert's GEMMs on its own scales): EP2 within 3e-4 of
#    one rank, EP2 with --moe-shared-expert-overlap bitwise EP2 without, a save/resume under EP2
#    bitwise, the experts' _extra_state in the checkpoint; --expert-tensor-parallel-size 1 with
#    TP2 + SP (EP2, EP1) and 2 with TP4 + SP (EP2) within 3e-4 of the run with the experts split
#    over all tensor-parallel ranks, and after one step the same expert scaling state (the
#    experts' amaxes reduced over the expert tensor- and data-parallel ranks), a save/resume of
#    ETP1 x EP2 bitwise with every expert's scales in the checkpoint;
#  - bad values are refused with one line; Megatron's Llama 3 fp8 example (tests/data/
#    train_llama3_8b_tiny.sh with DTYPE=fp8: hybrid, history 1024, max, --fp8-param-gather) trains.
. "${top_srcdir:-.}/tests/lib.sh"

. "$top_srcdir/tests/mpi/fp8_corpus.sh"
GPT="$BASE --bf16"
hash_of() { grep "final parameter hash" "$WORK/out"; }
# extra_state FILE NAME : the /model/NAME._extra_state dataset [3, 5]: its rows, one per line
extra_state() {
    h5dump -y -w 0 -m %.9g -d "/model/$2._extra_state" "$1" | awk '/DATA \{/ { on = 1; next } /^ *\}/ { on = 0 } on' |
        tr -d ',' | tr -s ' \n' '\n\n' | grep . | paste - - - - -
}

# ---- fp8 against bf16 on the corpus --------------------------------------------------------------
run_app 1 $GPT --train-iters 20; losses > "$WORK/bf16"; bf16_hash=$(hash_of)
run_app 1 $GPT --train-iters 20 $FP8
status=$?; losses > "$WORK/fp8"
ok $status "fp8 (hybrid, delayed scaling) trains 20 iterations" || tail -3 "$WORK/err" | sed 's/^/# /'
grep -q "^> fp8: hybrid format (E4M3 forward, E5M2 gradients), delayed scaling (amax history 4, max, margin 0), fp8 wgrad; 2 of 2 layers in fp8" "$WORK/out"
ok $? "the start-up names the recipe: $(grep -m1 '^> fp8:' "$WORK/out" | cut -c1-120)..."
first=$(head -1 "$WORK/fp8"); last=$(tail -1 "$WORK/fp8")
[ "$(wc -l < "$WORK/fp8")" -eq 20 ] && awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.5) }'
ok $? "the fp8 loss falls: $first -> $last"
worst=$(within "$WORK/bf16" "$WORK/fp8" 0.01)
ok $? "every fp8 loss within 1% of bf16's (largest difference $worst relative; bf16 ends at $(tail -1 "$WORK/bf16"))"
! cmp -s "$WORK/bf16" "$WORK/fp8" && [ "$(hash_of)" != "$bf16_hash" ]
ok $? "fp8 is not bitwise bf16 (the GEMM operands are rounded to fp8)"

# ---- tensor and data parallelism ----------------------------------------------------------------
run_app 1 $GPT $FP8; losses > "$WORK/tp1"
run_app 1 $GPT $FP8 --train-iters 1 --lr-warmup-iters 1 --save "$WORK/ck_tp1"
for layout in "2 --tensor-model-parallel-size 2" "2 --tensor-model-parallel-size 2 --sequence-parallel" \
              "4 --tensor-model-parallel-size 2 --sequence-parallel"; do
    ranks=${layout%% *}; flags=${layout#* }
    run_app "$ranks" $GPT $FP8 $flags; losses > "$WORK/tp"
    worst=$(within "$WORK/tp1" "$WORK/tp" 3e-4)
    ok $? "$ranks ranks, $flags (data-parallel $((ranks / 2))): TP1's losses within 3e-4 (largest difference $worst)"
done
run_app 2 $GPT $FP8 --tensor-model-parallel-size 2 --sequence-parallel --train-iters 4; sp_hash=$(hash_of)
losses > "$WORK/sp"
run_app 2 $GPT $FP8 --tensor-model-parallel-size 2 --sequence-parallel --train-iters 4 --tp-comm-overlap
losses > "$WORK/sp_overlap"
worst=$(within "$WORK/sp" "$WORK/sp_overlap" 1e-6)
ok $? "--tp-comm-overlap with fp8 (the fp8 layers' GEMMs on whole gathered rows): the run without's losses within 1e-6 ($worst; hashes $sp_hash / $(hash_of | sed 's/.*: //'): bitwise where the BLAS kernels' blocking does not change with the overlap's row chunks)"
run_app 4 $GPT $FP8 --tensor-model-parallel-size 2 --sequence-parallel --train-iters 1 --lr-warmup-iters 1 --save "$WORK/ck_tp2dp2"
bad=0
for layer in 0 1; do
    for gemm in self_attention.linear_qkv self_attention.linear_proj mlp.linear_fc1 mlp.linear_fc2; do
        extra_state "$WORK/ck_tp1/iter_0000001.h5" "decoder.layers.$layer.$gemm" > "$WORK/s1"
        extra_state "$WORK/ck_tp2dp2/iter_0000001.h5" "decoder.layers.$layer.$gemm" > "$WORK/s2"
        [ "$(wc -l < "$WORK/s1")" -eq 3 ] && [ "$(sed -n 2p "$WORK/s1")" = "$(sed -n 2p "$WORK/s2")" ] &&
            sed '2d' "$WORK/s1" > "$WORK/g1" && sed '2d' "$WORK/s2" > "$WORK/g2" &&
            paste "$WORK/g1" "$WORK/g2" | awk '{ n = NF / 2; t = NR == 1 ? 1e-6 : 1e-3
                                                  for (i = 1; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d;
                                                  if (d > t * ($i < 0 ? -$i : $i)) exit 1 } }' ||
            { bad=$((bad + 1)); diag "layer $layer $gemm: TP1 $(tr '\n\t' '; ' < "$WORK/s1") TP2xDP2 $(tr '\n\t' '; ' < "$WORK/s2")"; }
    done
done
ok $bad "after one step TP2 x DP2 holds TP1's scaling state: weight scales and histories bitwise, the inputs' within 1e-6, the gradients' within 1e-3"

# ---- the recipes and formats --------------------------------------------------------------------
run_app 1 $GPT --fp8-format hybrid --fp8-recipe tensorwise; losses > "$WORK/tensorwise"; tensorwise_hash=$(hash_of)
ok $? "--fp8-recipe tensorwise trains" || tail -3 "$WORK/err" | sed 's/^/# /'
run_app 1 $GPT --fp8-format hybrid; delayed_hash=$(hash_of)
[ -n "$tensorwise_hash" ] && [ "$tensorwise_hash" != "$delayed_hash" ] && [ "$(tail -1 "$WORK/tensorwise")" \< "$(head -1 "$WORK/tensorwise")" ]
ok $? "tensorwise (current scaling) trains other numbers than delayed: losses $(head -1 "$WORK/tensorwise") -> $(tail -1 "$WORK/tensorwise")"
run_app 1 $GPT --fp8-format e4m3; e4m3_hash=$(hash_of)
run_app 1 $GPT --fp8-format hybrid --no-fp8-wgrad; nowgrad_hash=$(hash_of)
[ -n "$e4m3_hash" ] && [ -n "$nowgrad_hash" ] && [ "$e4m3_hash" != "$delayed_hash" ] && [ "$nowgrad_hash" != "$delayed_hash" ] &&
    [ "$e4m3_hash" != "$nowgrad_hash" ]
ok $? "--fp8-format e4m3 (E4M3 gradients) and --no-fp8-wgrad (high-precision weight gradients) each change the result"

# ---- --first-last-layers-bf16 -------------------------------------------------------------------
FOUR="--num-layers 4 --fp8-format hybrid --fp8-recipe tensorwise --first-last-layers-bf16"
run_app 1 $GPT $FOUR --train-iters 2 --save "$WORK/ck_fl"
grep -q "2 of 4 layers in fp8: layers 1-2, the first 1 and the last 1 in bf16" "$WORK/out" &&
    h5ls -r "$WORK/ck_fl/iter_0000002.h5" | grep -o '^/model/decoder.layers.[0-9]*.[a-z_.0-9]*_extra_state' | sort -u > "$WORK/extra" &&
    [ "$(wc -l < "$WORK/extra")" -eq 8 ] && ! grep -q 'layers\.[03]\.' "$WORK/extra"
ok $? "--first-last-layers-bf16: layers 0 and 3 in bf16, the log says so and only layers 1-2 hold fp8 _extra_state"
run_app 1 $GPT --num-layers 4 --train-iters 3; plain4=$(hash_of)
run_app 1 $GPT $FOUR --train-iters 3 --num-layers-at-start-in-bf16 2 --num-layers-at-end-in-bf16 2
[ -n "$plain4" ] && [ "$(hash_of)" = "$plain4" ] && grep -q "0 of 4 layers in fp8" "$WORK/out"
ok $? "all four layers kept in bf16 (2 at the start, 2 at the end): bitwise the bf16 run ($plain4)"
run_app 1 $GPT $FOUR --train-iters 3
[ "$(hash_of)" != "$plain4" ]
ok $? "with layers 1-2 in fp8 the result changes"

# ---- determinism and checkpoints ----------------------------------------------------------------
DET="$GPT $FP8 --deterministic-mode --train-iters 8"
run_app 1 $DET; unbroken=$(hash_of); losses > "$WORK/unbroken"
run_app 1 $DET; [ -n "$unbroken" ] && [ "$(hash_of)" = "$unbroken" ]
ok $? "--deterministic-mode with fp8: a rerun is bitwise the same ($unbroken)"
run_app 1 $DET --save "$WORK/ck" --save-interval 4 --exit-interval 4
run_app 1 $DET --load "$WORK/ck"
status=$?
[ "$status" -eq 0 ] && [ "$(hash_of)" = "$unbroken" ] && grep -q "loaded checkpoint .*iteration 4" "$WORK/out"
ok $? "saved at iteration 4 and resumed: bitwise the unbroken run (the amax histories and scales restored)"
extra_state "$WORK/ck/iter_0000004.h5" decoder.layers.1.mlp.linear_fc1 > "$WORK/s1"
[ "$(wc -l < "$WORK/s1")" -eq 3 ] && [ "$(awk '{ print NF }' "$WORK/s1" | sort -u)" = 5 ] && awk '$1 == 1 { exit 1 }' "$WORK/s1"
ok $? "decoder.layers.1.mlp.linear_fc1._extra_state is [3, 1 + 4]: scales (not the initial 1) and amax histories"
run_app 1 $DET --load "$WORK/ck" --fp8-amax-history-len 8
[ $? -ne 0 ] && grep -q "_extra_state" "$WORK/err"
ok $? "another --fp8-amax-history-len is refused naming the tensor: $(grep -m1 -o 'decoder[^ ]*_extra_state[^ ]*' "$WORK/err")"
run_app 1 $GPT --train-iters 6 --exit-interval 4 --save "$WORK/ck_bf16"
run_app 1 $GPT $FP8 --train-iters 6 --load "$WORK/ck_bf16"
status=$?
[ "$status" -eq 0 ] && grep -q "holds no fp8 scaling state .*fresh scaling state" "$WORK/out" && [ "$(losses | wc -l)" -eq 2 ]
ok $? "a bf16 checkpoint loads into an fp8 run (fresh scaling state, with a note)"
run_app 1 $GPT --train-iters 8 --load "$WORK/ck"
status=$?
[ "$status" -eq 0 ] && grep -q "trained with --fp8-format hybrid: its fp8 scaling state .* is not used" "$WORK/out"
ok $? "an fp8 checkpoint loads into a bf16 run (its scaling state ignored, with a note)"

# ---- a mixture of experts (configs/mixtral-tiny.args): the experts and shared experts in fp8 ---------
MOE="--args-file $top_srcdir/configs/mixtral-tiny.args --train-iters 6 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
     --bf16 --device cpu --deterministic-mode $FP8 --moe-shared-expert-intermediate-size 32"
run_app 1 $MOE --moe-shared-expert-intermediate-size 0 --fp8-format e4m3; losses > "$WORK/moe_e4m3"
run_app 1 $MOE; losses > "$WORK/moe_ep1"
grep -q "the experts' and shared experts'; attention, the router and the output layer in the compute dtype" "$WORK/out" &&
    ! cmp -s "$WORK/moe_e4m3" "$WORK/moe_ep1"
ok $? "an MoE model trains in fp8 (experts, shared experts; the router in the compute dtype): $(tail -1 "$WORK/moe_ep1")"
run_app 2 $MOE --expert-model-parallel-size 2; losses > "$WORK/moe_ep2"; moe_hash=$(hash_of)
worst=$(within "$WORK/moe_ep1" "$WORK/moe_ep2" 3e-4)
ok $? "expert parallelism 2: the one-rank losses within 3e-4 (largest difference $worst)"
run_app 2 $MOE --expert-model-parallel-size 2 --moe-shared-expert-overlap; losses > "$WORK/moe_ep2_overlap"
[ -n "$moe_hash" ] && [ "$(hash_of)" = "$moe_hash" ] && [ -s "$WORK/moe_ep2" ] && cmp -s "$WORK/moe_ep2" "$WORK/moe_ep2_overlap" &&
    grep -q "the shared experts' fc1 and activation compute while the dispatch all-to-all is in flight" "$WORK/out"
ok $? "EP2 with --moe-shared-expert-overlap (the shared experts' fp8 GEMMs while the all-to-alls are in flight): the losses and parameters without it, bit for bit"
run_app 2 $MOE --expert-model-parallel-size 2 --save "$WORK/moe_ck" --save-interval 3 --exit-interval 3
run_app 2 $MOE --expert-model-parallel-size 2 --load "$WORK/moe_ck"
[ -n "$moe_hash" ] && [ "$(hash_of)" = "$moe_hash" ] &&
    h5dump -H -d /model/decoder.layers.1.mlp.experts.linear_fc2._extra_state "$WORK/moe_ck/iter_0000003.h5" | grep -q "( 12, 5 )" &&
    h5dump -H -d /model/decoder.layers.0.mlp.shared_experts.linear_fc1._extra_state "$WORK/moe_ck/iter_0000003.h5" | grep -q "( 3, 5 )"
ok $? "EP2 saved at iteration 3 and resumed: bitwise the unbroken run; mlp.experts.linear_fc2._extra_state [3 x 4 experts, 5], shared_experts' [3, 5]"
# --expert-tensor-parallel-size 1 with TP2 + SP: each expert whole on its rank, its amaxes reduced
# over the expert-data-parallel group (the tensor-parallel peers hold other experts with EP2,
# other tokens with EP1) in place of the tensor-parallel one: the losses of ETP2 (= TP2, experts
# split) within the EP2 tolerance, and a save/resume bitwise (each expert's _extra_state written
# by the rank holding it)
TP2="--tensor-model-parallel-size 2 --sequence-parallel"
ETP1="$TP2 --expert-tensor-parallel-size 1"
run_app 2 $MOE $TP2; losses > "$WORK/moe_tp2"
run_app 2 $MOE $ETP1 --expert-model-parallel-size 2; losses > "$WORK/moe_etp1_ep2"; etp1_hash=$(hash_of)
worst=$(within "$WORK/moe_tp2" "$WORK/moe_etp1_ep2" 3e-4)
ok $? "ETP1 x TP2 + SP x EP2: the ETP2 (= TP2) losses within 3e-4 (largest difference $worst)"
run_app 2 $MOE $ETP1; losses > "$WORK/moe_etp1_ep1"
worst=$(within "$WORK/moe_tp2" "$WORK/moe_etp1_ep1" 3e-4)
ok $? "ETP1 x TP2 + SP (EP1: the amaxes of each rank's tokens reduced over the expert-data-parallel pair): the ETP2 losses within 3e-4 (largest difference $worst)"
# after one step, every expert's scaling state as ETP2's: weight scales and histories bitwise (each
# whole expert's amax; MAX over the tensor-parallel peers would meet other experts' weights), the
# inputs' within 1e-6, the gradients' within 1e-3 (as TP2 x DP2 against TP1 above)
same_expert_states() {  # same_expert_states A.h5 B.h5: the experts' _extra_state of both MoE layers
    for layer in 0 1; do
        for fc in 1 2; do
            extra_state "$1" "decoder.layers.$layer.mlp.experts.linear_fc$fc" > "$WORK/s1"
            extra_state "$2" "decoder.layers.$layer.mlp.experts.linear_fc$fc" > "$WORK/s2"
            [ "$(wc -l < "$WORK/s1")" -eq 12 ] && [ "$(wc -l < "$WORK/s2")" -eq 12 ] &&
                paste "$WORK/s1" "$WORK/s2" | awk '{ n = NF / 2; role = (NR - 1) % 3; t = role == 0 ? 1e-6 : role == 1 ? 0 : 1e-3
                                                      for (i = 1; i <= n; i++) { d = $i - $(i + n); if (d < 0) d = -d;
                                                      if (d > t * ($i < 0 ? -$i : $i)) exit 1 } }' ||
                { diag "layer $layer experts' fc$fc: $(paste "$WORK/s1" "$WORK/s2" | tr '\n\t' '; ' | cut -c1-300)"; return 1; }
        done
    done
}
ONE_STEP="--train-iters 1 --lr-warmup-iters 1"
run_app 2 $MOE $TP2 $ONE_STEP --save "$WORK/moe_tp2_ck"
run_app 2 $MOE $ETP1 --expert-model-parallel-size 2 $ONE_STEP --save "$WORK/moe_etp1_ep2_ck"
same_expert_states "$WORK/moe_tp2_ck/iter_0000001.h5" "$WORK/moe_etp1_ep2_ck/iter_0000001.h5"
ok $? "after one step ETP1 x TP2 x EP2 holds ETP2's expert scaling state (weights bitwise, inputs within 1e-6, gradients within 1e-3)"
run_app 2 $MOE $ETP1 $ONE_STEP --save "$WORK/moe_etp1_ck"
same_expert_states "$WORK/moe_tp2_ck/iter_0000001.h5" "$WORK/moe_etp1_ck/iter_0000001.h5"
ok $? "after one step ETP1 x TP2 (EP1: each rank's tokens, the amaxes reduced over the pair) holds ETP2's expert scaling state likewise"
# --expert-tensor-parallel-size 2 with TP4 + SP (4 query groups): the experts' amaxes reduced
# over the expert tensor- and data-parallel group ([0,1,2,3] with EP1, pairs [0,1] [2,3] with EP2)
TP4="--tensor-model-parallel-size 4 --sequence-parallel --num-query-groups 4"
run_app 4 $MOE $TP4; losses > "$WORK/moe_tp4"
run_app 4 $MOE $TP4 --expert-tensor-parallel-size 2 --expert-model-parallel-size 2; losses > "$WORK/moe_etp2_tp4"
worst=$(within "$WORK/moe_tp4" "$WORK/moe_etp2_tp4" 3e-4)
ok $? "ETP2 x TP4 + SP x EP2: the ETP4 (= TP4) losses within 3e-4 (largest difference $worst)"
run_app 4 $MOE $TP4 $ONE_STEP --save "$WORK/moe_tp4_ck"
run_app 4 $MOE $TP4 --expert-tensor-parallel-size 2 $ONE_STEP --save "$WORK/moe_etp2_tp4_ck"
same_expert_states "$WORK/moe_tp4_ck/iter_0000001.h5" "$WORK/moe_etp2_tp4_ck/iter_0000001.h5"
ok $? "after one step ETP2 x TP4 (EP1: each pair's tokens, the amaxes reduced over the expert tensor- and data-parallel ranks) holds ETP4's expert scaling state"
run_app 2 $MOE $ETP1 --expert-model-parallel-size 2 --save "$WORK/etp1_ck" --save-interval 3 --exit-interval 3
run_app 2 $MOE $ETP1 --expert-model-parallel-size 2 --load "$WORK/etp1_ck"
[ -n "$etp1_hash" ] && [ "$(hash_of)" = "$etp1_hash" ] &&
    [ "$(extra_state "$WORK/etp1_ck/iter_0000003.h5" decoder.layers.1.mlp.experts.linear_fc1 | awk '$1 > 0' | wc -l)" -eq 12 ]
ok $? "ETP1 x TP2 x EP2 saved at iteration 3 and resumed: bitwise the unbroken run; every expert's scales in the checkpoint"

# ---- refused values -----------------------------------------------------------------------------
refused() {  # refused "WHAT IS EXPECTED IN THE ERROR" FLAGS...
    expected=$1; shift
    run_app 1 $GPT "$@"
    [ $? -ne 0 ] && [ "$(grep -c 'error:' "$WORK/err")" -eq 1 ] && grep -q -- "$expected" "$WORK/err"
    ok $? "refused: $* -> $(grep -m1 'error:' "$WORK/err" | cut -c1-150)"
}
refused "e4m3|hybrid" --fp8-format e5m2
refused "use --fp8-recipe tensorwise" --fp8-format hybrid --fp8-recipe blockwise
refused "mxfp8 needs Blackwell" --fp8-format hybrid --fp8-recipe mxfp8
refused "not one of Megatron's recipes" --fp8-format hybrid --fp8-recipe fancy
run_app 1 $BASE --fp8-format hybrid
[ $? -ne 0 ] && [ "$(grep -c 'error:' "$WORK/err")" -eq 1 ] && grep -q -- "--fp8-format hybrid needs --bf16" "$WORK/err"
ok $? "refused without --bf16: $(grep -m1 'error:' "$WORK/err" | cut -c1-150)"
refused "Delayed scaling does not support first / last layer in BF16" --fp8-format hybrid --first-last-layers-bf16
refused "num-layers-at-end-in-bf16 3 must be between 0" --fp8-format hybrid --fp8-recipe tensorwise --first-last-layers-bf16 --num-layers-at-end-in-bf16 3
refused "only supported with distributed optimizer" --fp8-format hybrid --fp8-param-gather
refused "needs --fp8-format" --fp8-param-gather --use-distributed-optimizer
refused "fp8-amax-history-len" --fp8-format hybrid --fp8-amax-history-len 0
refused "custom (a Python quantizer factory) is not supported" --fp8-format hybrid --fp8-recipe custom
refused "most_recent|max" --fp8-format hybrid --fp8-amax-compute-algo mean
run_app 1 $GPT $FP8 --fp8-interval 2 --train-iters 1 --lr-warmup-iters 1
[ $? -eq 0 ] && grep -q "WARNING: fp8_interval is deprecated and ignored" "$WORK/out"
ok $? "--fp8-interval 2 is accepted with Megatron's deprecation warning"

# ---- Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh with DTYPE=fp8 -----------------------
export MPIEXEC PRETRAIN_GPT
(cd "$WORK" && DTYPE=fp8 DATA_CACHE_PATH="$WORK/cache_llama" timeout 300 bash "$top_srcdir/tests/data/train_llama3_8b_tiny.sh" \
    "$WORK/llama_ck" "$WORK/llama_tb" "$HF_TOKENIZER" "$WORK/corpus_text_document" > "$WORK/out" 2> "$WORK/err")
status=$?
ok $status "the Llama 3 fp8 example script, every flag kept (fp8 on), trains on 2 ranks (TP2, sequence parallel, distributed optimizer)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*lm loss: //' > "$WORK/script_losses"
first=$(head -1 "$WORK/script_losses"); last=$(tail -1 "$WORK/script_losses")
[ "$(wc -l < "$WORK/script_losses")" -eq 12 ] && awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.5) }' &&
    grep -q "^> fp8: hybrid format .*delayed scaling (amax history 1024, max, margin 0)" "$WORK/out" &&
    grep -q "^> --fp8-param-gather" "$WORK/out"
ok $? "12 fp8 iterations (hybrid, amax history 1024, max, --fp8-param-gather) and the loss falls (from $first to $last)"
R="$WORK/llama_ck/iter_0000012.h5"
[ -f "$R" ] && h5dump -H -d /model/decoder.layers.1.self_attention.linear_qkv._extra_state "$R" | grep -q "( 3, 1025 )"
ok $? "its checkpoint holds decoder.layers.L.self_attention.linear_qkv._extra_state [3, 1025]"

done_testing
