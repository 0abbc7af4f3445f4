#!/bin/sh
# checksum_test.sh: every checkpoint tensor carries XXH3 checksums of the boxes its ranks wrote
# (io/CHECKPOINT_FORMAT.md, "Checksums"), verified on load:
#  - a 2-rank save verifies on load in the same layout, in another (TP2: the written boxes are
#    read again), and with convert_checkpoint --verify;
#  - one float changed behind HDF5's back (a NaN in an Adam moment, a weight) is refused by the
#    load and by --verify, naming the file and the tensor, in one line however many ranks read it;
#    --no-verify-checksums loads it anyway;
#  - saved in small pieces (many boxes per tensor) and loaded whole, it verifies too;
#  - a checkpoint without checksums (saved before they existed) loads with a note.
. "${top_srcdir:-.}/tests/lib.sh"
POKE="$top_builddir/tests/tools/h5_poke"
CONVERT="$top_builddir/app/convert_checkpoint"
MODEL="--args-file $TINY_ARGS --lr-warmup-iters 1 --eval-iters 0 --log-interval 1"

run_app 2 $MODEL --train-iters 2 --use-distributed-optimizer --save "$WORK/good"
ok $? "a 2-rank run (distributed optimizer) saves iteration 2"
FILE="$WORK/good/iter_0000002.h5"
h5ls -r "$FILE" | grep -q "^/checksums/optimizer/exp_avg/decoder.layers.1.mlp.linear_fc1.weight Dataset"
ok $? "the file holds a checksum table per tensor (/checksums/<tensor path>)"
"$CONVERT" --verify "$WORK/good" > "$WORK/verify.out" 2>&1
status=$?; diag "$(cat "$WORK/verify.out")"
[ $status -eq 0 ] && grep -q "every checksum matches" "$WORK/verify.out"
ok $? "convert_checkpoint --verify passes the good checkpoint"
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/good"
ok $? "the good checkpoint loads in its own layout"
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/good" --tensor-model-parallel-size 2
ok $? "the good checkpoint loads with TP2 (written boxes verified by extra reads)"

cp -r "$WORK/good" "$WORK/bad"
"$POKE" "$WORK/bad/iter_0000002.h5" /optimizer/exp_avg/decoder.layers.1.mlp.linear_fc1.weight 100 nan
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/bad"
status=$?; diag "$(head -1 "$WORK/err")"
[ $status -ne 0 ] && grep -q "iter_0000002.h5: tensor /optimizer/exp_avg/decoder.layers.1.mlp.linear_fc1.weight: .*do not match their checksum" "$WORK/err" &&
    ! grep -q "iteration        3" "$WORK/out"
ok $? "a NaN written into an Adam moment is refused at load, naming the file and the tensor"
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/bad" --tensor-model-parallel-size 2
[ $? -ne 0 ] && grep -q "tensor /optimizer/exp_avg/decoder.layers.1.mlp.linear_fc1.weight" "$WORK/err"
ok $? "... and refused when loading with TP2"
"$CONVERT" --verify "$WORK/bad" > "$WORK/verify.out" 2>&1
status=$?; diag "$(cat "$WORK/verify.out")"
[ $status -eq 1 ] && grep -q "tensor /optimizer/exp_avg/decoder.layers.1.mlp.linear_fc1.weight: box rows" "$WORK/verify.out"
ok $? "convert_checkpoint --verify exits 1 naming the damaged tensor"
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/bad" --no-verify-checksums
ok $? "--no-verify-checksums loads it anyway"
cp -r "$WORK/good" "$WORK/bad2"
"$POKE" "$WORK/bad2/iter_0000002.h5" /model/embedding.word_embeddings.weight 7 0.5
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/bad2" --no-load-optim
status=$?; diag "$(grep error "$WORK/err")"
[ $status -ne 0 ] && grep -q "tensor /model/embedding.word_embeddings.weight" "$WORK/err"
ok $? "a changed weight is refused naming /model/embedding.word_embeddings.weight"
[ "$(grep -c "error" "$WORK/err")" -eq 1 ]
ok $? "... in one line, although both data-parallel replicas read the damaged box"

MTC_CKPT_PIECE_ELEMENTS=1000 run_app 2 $MODEL --train-iters 2 --save "$WORK/pieces"
ok $? "a save in pieces of 1000 elements"
records=$(h5dump -H -d /checksums/model/embedding.word_embeddings.weight "$WORK/pieces/iter_0000002.h5" | grep -o "( [0-9]*, 5 )" | head -1)
diag "embedding checksum table: $records"
[ "$records" = "( 18, 5 )" ]
ok $? "... stores one record per piece (18 of 15 rows for the 256 x 64 embedding)"
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/pieces"
ok $? "... loads in whole tensors (the 18 written boxes read again and verified)"
cp -r "$WORK/pieces" "$WORK/pieces_bad"
"$POKE" "$WORK/pieces_bad/iter_0000002.h5" /model/embedding.word_embeddings.weight 5000 nan
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/pieces_bad"
[ $? -ne 0 ] && grep -q "embedding.word_embeddings.weight: rows \[75, 90) columns \[0, 64) do not match" "$WORK/err"
ok $? "... a NaN in element 5000 is found in the box of rows [75, 90)"

cp -r "$WORK/good" "$WORK/old"
"$POKE" "$WORK/old/iter_0000002.h5" --strip-checksums
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/old"
status=$?
[ $status -eq 0 ] && grep -q "note: checkpoint .* has no checksums" "$WORK/out"
ok $? "a checkpoint without checksums loads, with a note"
"$CONVERT" --verify "$WORK/old" > "$WORK/verify.out" 2>&1
[ $? -eq 0 ] && grep -q "no checksums" "$WORK/verify.out"
ok $? "--verify of a checkpoint without checksums says so"

done_testing
