#!/bin/bash
# train_mixtral_8x7b_tiny.sh: Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh
# (d98e8a64) with every flag kept, for tests/mpi/mixtral_script_test.sh. Changed from upstream:
# the sizes (2 layers, hidden 64, 4 heads in 2 query groups, FFN 96, 4 experts instead of 8,
# sequence 64, 4 ranks instead of 8 GPUs per node, PP 2 instead of 4, EP 2 instead of 8), the batch and iteration counts (16 per batch, 10 iterations,
# warm-up 2, evaluation every 5 iterations on 2 batches, saving at 10), the learning rate x30 (so
# that 10 iterations show the loss falling), --split 90,8,2 instead of 99990,8,2 (the bundled
# text has 200 documents: the upstream split leaves validation none), torchrun replaced by mpiexec (MPIEXEC and
# PRETRAIN_GPT come from the environment). --bf16 stays: the CPU backend computes in fp32.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=4
# Change for multinode config
MASTER_ADDR=${MASTER_ADDR:-"localhost"}
MASTER_PORT=${MASTER_PORT:-"29500"}
NNODES=${SLURM_NNODES:-"1"}
NODE_RANK=${RANK:-"0"}
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))

CHECKPOINT_PATH=$1
TOKENIZER_MODEL=$2
DATA_PATH=$3

DISTRIBUTED_ARGS=(
    -n $WORLD_SIZE
)

MODEL_ARGS=(
    --use-mcore-models
    --disable-bias-linear
    --seq-length 64
    --max-position-embeddings 512
    --num-layers 2
    --hidden-size 64
    --ffn-hidden-size 96
    --num-attention-heads 4
    --init-method-std 0.01
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --normalization RMSNorm
    --position-embedding-type rope
    --swiglu
    --untie-embeddings-and-output-weights
    --group-query-attention
    --num-query-groups 2
    --no-masked-softmax-fusion
    --no-position-embedding
    --rotary-base 1000000
)

MOE_ARGS=(
    --num-experts 4
    --moe-router-topk 2
    --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
    --overlap-param-gather
    --overlap-grad-reduce
)

DATA_ARGS=(
    --tokenizer-type Llama2Tokenizer
    --tokenizer-model ${TOKENIZER_MODEL}
    --data-path $DATA_PATH
    --split 90,8,2
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 16
    --lr 3e-3
    --train-iters 10
    --lr-decay-iters 10
    --lr-decay-style cosine
    --min-lr 3.0e-4
    --weight-decay 0.1
    --lr-warmup-iters 2
    --clip-grad 1.0
    --bf16
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 2
    --expert-model-parallel-size 2
    --use-distributed-optimizer
    --sequence-parallel
)

LOGGING_ARGS=(
    --log-interval 1 \
    --save-interval 10 \
    --eval-interval 5 \
    --eval-iters 2 \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH \
    --tensorboard-dir "${CHECKPOINT_PATH}/tensorboard" \
    --no-load-optim \
    --no-load-rng
)

if [ -n "${WANDB_API_KEY}" ]; then
    LOGGING_ARGS+=(
        --wandb-project ${WANDB_PROJECT:-"Mixtral"}
        --wandb-exp-name ${WANDB_NAME:-"Mixtral_8x7B"}
    )
fi


"${MPIEXEC:-mpiexec}" ${DISTRIBUTED_ARGS[@]} "${PRETRAIN_GPT:-pretrain_gpt}" \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${LOGGING_ARGS[@]}
