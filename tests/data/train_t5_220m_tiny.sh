#!/bin/bash

# train_t5_220m_tiny.sh: Megatron-LM's examples/t5/train_t5_220m_distributed.sh (779c5b748d) with every
# flag kept, for tests/mpi/t5_script_test.sh. Changed from upstream: the sizes (a tiny T5: 2
# encoder and 2 decoder layers, hidden 32, 4 heads of 8 channels, FFN 128, encoder sequence 64,
# decoder sequence 16; micro-batch 2, global batch 8; 10 iterations, decay over 9, logging,
# saving and evaluating every 5 with 2 evaluation batches), the split (949,50,1: the tiny corpus
# would give the validation split no document at 99982,9,9), 2 ranks instead of 8 (the same
# layout: tensor- and pipeline-parallel 1, so data-parallel), torchrun replaced by mpiexec
# (MPIEXEC, PRETRAIN_T5 and DEVICE come from the environment; DEVICE cpu unless given) and the
# learning rate x30 (so that 10 iterations show the loss falling).

# Runs the "220M" parameter model

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=2
# Change for multinode config
MASTER_ADDR=localhost
MASTER_PORT=29500
NUM_NODES=1
NODE_RANK=0
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CHECKPOINT_PATH=$1 #<Specify path>
TENSORBOARD_DIR=$2 #<Specify path>
VOCAB_FILE=$3 #<Specify path to file>/bert-large-cased-vocab.txt
DATA_PATH=$4 #<Specify path and file prefix>_text_document

DISTRIBUTED_ARGS="
    --nproc_per_node $GPUS_PER_NODE \
    --nnodes $NUM_NODES \
    --node_rank $NODE_RANK \
    --master_addr $MASTER_ADDR \
    --master_port $MASTER_PORT
"

T5_ARGS="
    --encoder-num-layers 2 \
    --decoder-num-layers 2 \
    --hidden-size 32 \
    --num-attention-heads 4 \
    --kv-channels 8 \
    --ffn-hidden-size 128 \
    --encoder-seq-length 64 \
    --decoder-seq-length 16 \
    --max-position-embeddings 64 \
    --micro-batch-size 2 \
    --global-batch-size 8 \
    --lr 0.003 \
    --train-iters 10 \
    --lr-decay-iters 9 \
    --lr-decay-style linear \
    --min-lr 0.0003 \
    --weight-decay 1e-2 \
    --lr-warmup-fraction .01 \
    --clip-grad 1.0 \
    --bf16 \
    --vocab-extra-ids 100 \
    --init-method-std 0.015 \
    --transformer-impl transformer_engine \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1 \
    --attention-backend auto \
"

DATA_ARGS="
    --data-path $DATA_PATH \
    --vocab-file $VOCAB_FILE \
    --tokenizer-type BertWordPieceCase \
    --split 949,50,1 \
"

OUTPUT_ARGS="
    --log-interval 5 \
    --tensorboard-dir ${TENSORBOARD_DIR} \
    --save-interval 5 \
    --eval-interval 5 \
    --eval-iters 2
"

"$MPIEXEC" -n $WORLD_SIZE "$PRETRAIN_T5" --device "${DEVICE:-cpu}" \
    $T5_ARGS \
    $DATA_ARGS \
    $OUTPUT_ARGS \
    --distributed-backend nccl \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH \
