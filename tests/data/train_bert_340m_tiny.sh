#!/bin/bash

# train_bert_340m_tiny.sh: Megatron-LM's examples/bert/train_bert_340m_distributed.sh (d98e8a64)
# with every flag kept, for tests/mpi/bert_script_test.sh. Changed from upstream: the sizes (a
# tiny BERT: 4 layers, hidden 32, 4 heads, sequence 64; micro-batch 2, global batch 8; 10
# iterations, decay over 9, logging, saving and evaluating every 5 with 2 evaluation batches),
# the layout (tensor-parallel 2 x pipeline-parallel 2 on 4 ranks instead of 8 x 16), torchrun
# replaced by mpiexec (MPIEXEC and PRETRAIN_BERT come from the environment, and for
# tests/gpu/gpu_encoder_scripts_test.sh DEVICE, cpu unless given, GPUS_PER_NODE,
# TENSOR_PARALLEL, PIPELINE_PARALLEL, 4, 2, 2 unless given, and EXTRA_ARGS appended: on a GPU
# --fp16 starts at Megatron's loss scale 2^32, which overflows and skips all of 10 iterations) and
# the learning rate x30 (so that 10 iterations show the loss falling).

# Runs the "340M" parameter model (Bert - Large)

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=${GPUS_PER_NODE:-4}
# Change for multinode config
MASTER_ADDR=localhost
MASTER_PORT=29500
NUM_NODES=1
NODE_RANK=0
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CHECKPOINT_PATH=$1 #<Specify path>
TENSORBOARD_LOGS_PATH=$2 #<Specify path>
VOCAB_FILE=$3 #<Specify path to file>/bert-vocab.json
DATA_PATH=$4 #<Specify path and file prefix>_text_document

BERT_MODEL_ARGS=(
    --num-layers 4 
    --hidden-size 32 
    --num-attention-heads 4 
    --seq-length 64 
    --max-position-embeddings 64 
    --attention-backend auto # Can use (flash/fused/unfused/local)
)

TRAINING_ARGS=(
    --micro-batch-size 2 
    --global-batch-size 8 
    --train-iters 10 
    --weight-decay 1e-2 
    --clip-grad 1.0 
    --fp16
    --lr 0.003
    --lr-decay-iters 9 
    --lr-decay-style linear 
    --min-lr 3.0e-4 
    --weight-decay 1e-2 
    --lr-warmup-fraction .01 
    --clip-grad 1.0 
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size ${TENSOR_PARALLEL:-2} 
	--pipeline-model-parallel-size ${PIPELINE_PARALLEL:-2} 
)

DATA_ARGS=(
    --data-path $DATA_PATH 
    --vocab-file $VOCAB_FILE 
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 5
    --save-interval 5 
    --eval-interval 5 
    --save $CHECKPOINT_PATH 
    --load $CHECKPOINT_PATH 
    --eval-iters 2
    --tensorboard-dir $TENSORBOARD_LOGS_PATH 
)

"$MPIEXEC" -n $WORLD_SIZE "$PRETRAIN_BERT" --device "${DEVICE:-cpu}" \
    ${BERT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]} \
    ${EXTRA_ARGS:-}
