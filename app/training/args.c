/* args.c: pretrain_gpt's flags (see args.h): Megatron-LM's names in one table for the option
 * engine (app/core/options.h), which parses them, checks each value and prints --help; this file
 * adds the defaults that derive from other flags and the checks that involve several flags. */
#include "config.h"

#include "app/training/args.h"
#include "app/training/microbatches.h"
#include "app/core/error.h"
#include "app/core/options.h"
#include "app/training/checkpoint_args.h"
#include "app/model/gpt_model.h"
#include "app/model/moe_layer.h"
#include "app/model/relative_position.h"
#include "app/model/window_attention.h"
#include "app/model/fp8_linear.h"
#include "kernels/fp8_recipe.h"

#include <stddef.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(field) OPTION_AT(args, field)

static const option_spec specs[] = {
    {"num-layers", "network size", OPTION_INT, AT(num_layers), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "number of transformer layers"},
    {"hidden-size", "network size", OPTION_INT, AT(hidden_size), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "transformer hidden size"},
    {"num-attention-heads", "network size", OPTION_INT, AT(num_attention_heads), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "number of attention heads"},
    {"ffn-hidden-size", "network size", OPTION_INT, AT(ffn_hidden_size), .range = "[1, inf)", .help = "MLP hidden size (default 4 * hidden size)"},
    {"kv-channels", "network size", OPTION_INT, AT(kv_channels), .range = "[1, inf)", .help = "projection size per head (default hidden size / heads)"},
    {"seq-length", "network size", OPTION_INT, AT(seq_length), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "sequence length in tokens"},
    {"max-position-embeddings", "network size", OPTION_INT, AT(max_position_embeddings), .range = "[1, inf)", .help = "learned position embeddings (default seq length)"},
    {"vocab-size", "network size", OPTION_INT, AT(vocab_size), .range = "[1, inf)", .help = "vocabulary size (mock data / NullTokenizer)"},
    {"make-vocab-size-divisible-by", "network size", OPTION_INT, AT(make_vocab_size_divisible_by), "128", .range = "[1, inf)", .help = "pad the vocabulary to a multiple of this"},
    {"layernorm-epsilon", "network size", OPTION_FLOAT, AT(layernorm_epsilon), "1e-5", .range = "(0, inf)", .help = "layer norm epsilon (older name of --norm-epsilon)"},
    {"untie-embeddings-and-output-weights", "network size", OPTION_FLAG, AT(untie_embeddings_and_output_weights), .help = "separate output layer instead of the tied word embeddings"},
    {"norm-epsilon", "network size", OPTION_FLOAT, AT(layernorm_epsilon), "1e-5", .range = "(0, inf)", .help = "epsilon of every LayerNorm/RMSNorm"},
    {"normalization", "network size", OPTION_CHOICE, AT(normalization), "LayerNorm", .choices = "LayerNorm|RMSNorm", .help = "the norm of every layer and the final norm"},
    {"apply-layernorm-1p", "network size", OPTION_FLAG, AT(apply_layernorm_1p), .help = "zero-centred norm weights: stored as w - 1 (zero at initialization) and applied as 1 + w, for LayerNorm and RMSNorm (Megatron-Core's layernorm_zero_centered_gamma, as Transformer Engine computes it)"},
    {"position-embedding-type", "network size", OPTION_CHOICE, AT(position_embedding_type), "learned_absolute", .choices = "learned_absolute|rope|none|relative", .help = "learned absolute positions, rotary embeddings of q and k, none, or (pretrain_t5 only) T5's relative position bias on the self-attention scores"},
    {"relative-attention-num-buckets", "network size", OPTION_INT, AT(relative_attention_num_buckets), "32", .range = "[1, inf)", .help = "--position-embedding-type relative: buckets of relative positions (rows of each stack's bias table; half of them per direction in the encoder)"},
    {"relative-attention-max-distance", "network size", OPTION_INT, AT(relative_attention_max_distance), "128", .range = "[1, inf)", .help = "--position-embedding-type relative: relative positions this far or farther share the last bucket"},
    {"use-rotary-position-embeddings", "network size", OPTION_FLAG, AT(use_rotary_position_embeddings), .help = "deprecated: same as --position-embedding-type rope"},
    {"no-position-embedding", "network size", OPTION_FLAG, AT(no_position_embedding), .help = "deprecated (accepted with rope, which has no position embedding table): use --position-embedding-type"},
    {"rotary-base", "network size", OPTION_INT, AT(rotary_base), "10000", .range = "[1, inf)", .help = "base of the rotary frequencies"},
    {"rotary-percent", "network size", OPTION_FLOAT, AT(rotary_percent), "1.0", .range = "(0, 1]", .help = "fraction of each head's channels that rotate"},
    {"rotary-interleaved", "network size", OPTION_FLAG, AT(rotary_interleaved), .help = "rotate pairs of even and odd channels (RoFormer) instead of the two halves (Llama)"},
    {"rotary-seq-len-interpolation-factor", "network size", OPTION_INT, AT(rotary_seq_len_interpolation_factor), .range = "[1, inf)", .help = "divide rotary positions by this (position interpolation)"},
    {"use-rope-scaling", "network size", OPTION_FLAG, AT(use_rope_scaling), .help = "Llama 3.x's rope scaling: slow the low rotary frequencies by --rope-scaling-factor (low/high frequency factors 1 and 4, original context 8192, as Megatron-Core)"},
    {"rope-scaling-factor", "network size", OPTION_FLOAT, AT(rope_scaling_factor), "8.0", .range = "(0, inf)", .help = "the factor of --use-rope-scaling"},
    {"swiglu", "network size", OPTION_FLAG, AT(swiglu), .help = "SwiGLU MLP: fc1 gives gate and up halves, silu(gate) * up (default --ffn-hidden-size: 4h*2/3 rounded down to 64)"},
    {"group-query-attention", "network size", OPTION_FLAG, AT(group_query_attention), .help = "grouped-query attention (with --num-query-groups)"},
    {"num-query-groups", "network size", OPTION_INT, AT(num_query_groups), "1", .range = "[1, inf)", .help = "key/value heads with --group-query-attention; the query heads share them in groups"},
    {"disable-bias-linear", "network size", OPTION_FLAG, AT(disable_bias_linear), .help = "no biases in the linear layers (QKV, projection, MLP); as in Megatron this turns the bias-GeLU fusion off: a GeLU MLP computes exact (erf) GeLU"},
    {"add-qkv-bias", "network size", OPTION_FLAG, AT(add_qkv_bias), .help = "a bias on the QKV projection even with --disable-bias-linear (Qwen2's attention, as Megatron-Core's add_qkv_bias)"},
    {"window-size", "network size", OPTION_STRING, AT(window_size), .metavar = "LEFT,RIGHT", .help = "sliding-window attention, as Megatron with Transformer Engine: a query at position i sees the keys at i - LEFT .. i (-1: unbounded); the attention is causal, so RIGHT must be 0 ((-1,-1) and a RIGHT other than 0 become 0 with Transformer Engine's warning)"},
    {"window-attn-skip-freq", "network size", OPTION_STRING, AT(window_attn_skip_freq), .metavar = "N|PATTERN", .help = "which layers --window-size applies to: an integer N makes layers N, 2N, ... (1-based) full attention, or a Python list expression of 0/1 per layer, 1 for the windowed layers, e.g. \"[1,1,1,0]*3\""},

    {"hidden-dropout", "regularization", OPTION_FLOAT, AT(hidden_dropout), "0.1", .range = "[0, 1)", .help = "dropout on the transformer hidden state"},
    {"attention-dropout", "regularization", OPTION_FLOAT, AT(attention_dropout), "0.1", .range = "[0, 1)", .help = "dropout on the attention probabilities"},
    {"weight-decay", "regularization", OPTION_FLOAT, AT(weight_decay), "0.01", .range = "[0, inf)", .help = "decoupled weight decay (not on biases and norms)"},
    {"clip-grad", "regularization", OPTION_FLOAT, AT(clip_grad), "1.0", .range = "[0, inf)", .help = "clip gradients to this global L2 norm (0 disables)"},
    {"adam-beta1", "regularization", OPTION_FLOAT, AT(adam_beta1), "0.9", .range = "[0, 1)", .help = "Adam beta1"},
    {"adam-beta2", "regularization", OPTION_FLOAT, AT(adam_beta2), "0.999", .range = "[0, 1)", .help = "Adam beta2"},
    {"adam-eps", "regularization", OPTION_FLOAT, AT(adam_eps), "1e-8", .range = "(0, inf)", .help = "Adam epsilon"},

    {"micro-batch-size", "training", OPTION_INT, AT(micro_batch_size), .range = "[1, inf)", .flags = OPTION_REQUIRED, .help = "samples per micro-batch per data-parallel rank"},
    {"global-batch-size", "training", OPTION_INT, AT(global_batch_size), .range = "[1, inf)", .help = "samples per iteration (default micro batch * data-parallel size)"},
    {"train-iters", "training", OPTION_INT64, AT(train_iters), .range = "[1, inf)", .help = "iterations to train (or --train-samples)"},
    {"train-samples", "training", OPTION_INT64, AT(train_samples), .range = "[1, inf)", .help = "samples to train on (sample-based training: iterations = samples / global batch)"},
    {"recompute-activations", "training", OPTION_FLAG, AT(recompute_activations), .help = "recompute the attention core in the backward instead of keeping its state (same as --recompute-granularity selective)"},
    {"recompute-granularity", "training", OPTION_CHOICE, AT(recompute_granularity), .choices = "full|selective", .help = "selective: recompute the attention core (softmax, dropout) in the backward; full: keep only the inputs of checkpointed transformer layers and run their forward again (with --recompute-method and --recompute-num-layers)"},
    {"recompute-modules", "training", OPTION_LIST, AT(recompute_modules), "core_attn", .metavar = "MODULE ...", .help = "selective recompute: what it recomputes in the backward instead of keeping: core_attn (the attention core's state), layernorm (the outputs of both layer norms of each layer, the qkv and fc1 inputs: [micro-batch x sequence, hidden] twice per layer less, for one more norm pass each), moe_act (the experts' activation, fc2's input, computed again from fc1's output in the backward: what every MoE layer does without --keep-mlp-activation, and with it the MoE layers then keep only the dense layers' activation); moe (the whole MoE layer: only its input is kept, and the backward runs its forward again, all-to-alls included, into one set of buffers shared by the layers: the router logits, routing, fc1 and expert outputs of each layer and micro-batch less), shared_experts (the shared experts' fc1 output and gate values likewise: their forward runs again in the backward); mlp and the MLA modules are refused"},
    {"recompute-method", "training", OPTION_CHOICE, AT(recompute_method), .choices = "uniform|block", .help = "full recompute: uniform checkpoints every layer of a stage in groups of --recompute-num-layers layers (only each group's input kept); block checkpoints the first --recompute-num-layers layers of each stage (of each model chunk with virtual stages) and keeps the others whole; pretrain_t5: of each stack, encoder and decoder, as Megatron-Core's T5Model"},
    {"recompute-num-layers", "training", OPTION_INT, AT(recompute_num_layers), .range = "[1, inf)", .help = "full recompute: layers per group (uniform) or layers recomputed per pipeline stage (block; pretrain_t5: per stack)"},
    {"keep-mlp-activation", "training", OPTION_FLAG, AT(keep_mlp_activation), .help = "keep the MLP's activation (GeLU or SwiGLU output, fc2's input) for the backward instead of computing it again there, as Megatron does: one pass less per layer, [micro-batch x sequence, ffn-hidden-size / tp] more activation memory per layer"},
    {"keep-mlp-activation-num-layers", "training", OPTION_INT, AT(keep_mlp_activation_num_layers), .range = "[1, inf)", .help = "keep the MLP's activation only in the first N layers of each pipeline stage (of each model chunk with virtual stages), as --recompute-method block counts layers: the memory of N layers for N/L of the gain"},
    {"memory-efficient-layer-norm", "training", OPTION_FLAG, AT(memory_efficient_layer_norm), .help = "the norms' backward from their outputs (kept anyway, the next GEMM's input) instead of their inputs, as Apex's memory-efficient kernels (norm = (y - bias) / weight, the weight clamped in magnitude to at least --layernorm-epsilon): the residual stream's values are not kept per layer, [micro-batch x sequence, hidden] twice per layer less (/ tp with --sequence-parallel); not with --recompute-modules layernorm"},
    {"cross-entropy-chunk-rows", "training", OPTION_INT, AT(cross_entropy_chunk_rows), .range = "[0, inf)", .help = "token rows per pass of the output layer and the cross entropy, whose backward then runs in the same pass, so that only one chunk's logits exist at a time (ours); 0 (default): the fewest chunks of at most 2 GiB of logits; micro-batch x sequence or more: one pass"},
    {"distribute-saved-activations", "training", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "splitting the kept layer inputs over tensor-parallel ranks is not supported; use --sequence-parallel, which keeps 1/tp of them on each rank"},

    {"bert-no-binary-head", "BERT (pretrain_bert)", OPTION_FLAG, AT(bert_no_binary_head), .help = "pretrain_bert only (pretrain_gpt refuses it): no sentence-order (binary) head, pooler or tokentype embeddings; the samples are single segments"},
    {"mask-prob", "BERT (pretrain_bert)", OPTION_FLOAT, AT(mask_prob), "0.15", .range = "[0, 1]", .help = "pretrain_bert and pretrain_t5 only (pretrain_gpt refuses it): probability of masking a word (BERT: whole-word N-grams, N <= 3; T5: spans of geometric length, N <= 10)"},
    {"encoder-num-layers", "T5 (pretrain_t5)", OPTION_INT, AT(encoder_num_layers), .range = "[1, inf)", .help = "pretrain_t5 only: encoder layers (instead of --num-layers, which means the same)"},
    {"decoder-num-layers", "T5 (pretrain_t5)", OPTION_INT, AT(decoder_num_layers), .range = "[1, inf)", .help = "pretrain_t5 only: decoder layers (default: the encoder's; Megatron's T5 builds as many decoder layers as encoder layers whatever this says)"},
    {"encoder-seq-length", "T5 (pretrain_t5)", OPTION_INT, AT(encoder_seq_length), .range = "[1, inf)", .help = "pretrain_t5 only: encoder sequence length (instead of --seq-length, which means the same)"},
    {"decoder-seq-length", "T5 (pretrain_t5)", OPTION_INT, AT(decoder_seq_length), .range = "[1, inf)", .help = "pretrain_t5 only (required there): decoder sequence length"},
    {"vocab-extra-ids", "T5 (pretrain_t5)", OPTION_INT, AT(vocab_extra_ids), "0", .range = "[0, inf)", .help = "pretrain_t5 only: sentinel tokens; as in Megatron-Core, --tokenizer-type BertWordPieceCase brings its 100 (extra_id_0 .. extra_id_99) whatever this says, and the model's vocabulary holds them (the file's tokens + 100, padded)"},
    {"task", "tasks (finetune_bert)", OPTION_STRING, AT(task), .metavar = "MNLI|RACE", .help = "finetune_bert only: the downstream task (MNLI sentence-pair classification, RACE multiple choice)"},
    {"train-data", "tasks (finetune_bert)", OPTION_LIST, AT(train_data), .metavar = "PATH ...", .help = "finetune_bert only: the training data (MNLI: GLUE TSV files; RACE: directories of *.txt JSON passages)"},
    {"valid-data", "tasks (finetune_bert)", OPTION_LIST, AT(valid_data), .metavar = "PATH ...", .help = "finetune_bert only: the validation data, whose accuracy is reported after each epoch"},
    {"pretrained-checkpoint", "tasks (finetune_bert)", OPTION_STRING, AT(pretrained_checkpoint), .help = "finetune_bert only: the BERT checkpoint (pretrain_bert --save) whose encoder, tokentype embeddings and pooler the model starts from (weights only; the task head starts random)"},
    {"epochs", "tasks (finetune_bert)", OPTION_INT, AT(epochs), .range = "[1, inf)", .help = "finetune_bert only: passes over the training data; --train-iters is epochs x iterations per epoch"},
    {"short-seq-prob", "BERT (pretrain_bert)", OPTION_FLOAT, AT(short_seq_prob), "0.1", .range = "[0, 1]", .help = "pretrain_bert and pretrain_t5 only (pretrain_gpt refuses it): probability of a shorter target length for a sample"},

    {"seed", "initialization", OPTION_UINT64, AT(seed), "1234", .help = "random seed (initialization, dropout, data order)"},
    {"init-method-std", "initialization", OPTION_FLOAT, AT(init_method_std), "0.02", .range = "(0, inf)", .help = "standard deviation of the normal initialization"},

    {"lr", "learning rate", OPTION_FLOAT, AT(lr), .range = "[0, inf)", .flags = OPTION_REQUIRED, .help = "peak learning rate"},
    {"min-lr", "learning rate", OPTION_FLOAT, AT(min_lr), "0.0", .help = "learning rate floor after decay"},
    {"decoupled-lr", "learning rate", OPTION_FLOAT, AT(decoupled_lr), "-1", .help = "a separate peak learning rate for the input embedding and the output layer (Megatron's is_embedding_or_output_parameter), on the same schedule"},
    {"decoupled-min-lr", "learning rate", OPTION_FLOAT, AT(decoupled_min_lr), "-1", .help = "the floor of --decoupled-lr (default --min-lr)"},
    {"lr-decay-style", "learning rate", OPTION_CHOICE, AT(lr_decay_style), "linear", .choices = "constant|linear|cosine", .help = "decay shape after warm-up"},
    {"lr-warmup-iters", "learning rate", OPTION_INT64, AT(lr_warmup_iters), "0", .range = "[0, inf)", .help = "linear warm-up iterations"},
    {"lr-warmup-init", "learning rate", OPTION_FLOAT, AT(lr_warmup_init), "0.0", .range = "[0, inf)", .help = "the learning rate the linear warm-up starts from (it rises to --lr over the warm-up; --decoupled-lr's warm-up starts there too)"},
    {"lr-warmup-fraction", "learning rate", OPTION_FLOAT, AT(lr_warmup_fraction), .range = "[0, 1]", .help = "warm-up as a fraction of --lr-decay-iters"},
    {"lr-decay-iters", "learning rate", OPTION_INT64, AT(lr_decay_iters), .range = "[1, inf)", .help = "iterations to decay over (default train iters)"},
    {"lr-warmup-samples", "learning rate", OPTION_INT64, AT(lr_warmup_samples), "0", .range = "[0, inf)", .help = "linear warm-up samples (with --train-samples)"},
    {"lr-decay-samples", "learning rate", OPTION_INT64, AT(lr_decay_samples), .range = "[1, inf)", .help = "samples to decay over (with --train-samples; default train samples)"},

    {"eval-interval", "validation", OPTION_INT64, AT(eval_interval), "1000", .range = "[1, inf)", .help = "evaluate on the validation split every N iterations"},
    {"eval-iters", "validation", OPTION_INT64, AT(eval_iters), "100", .range = "[0, inf)", .help = "iterations (global batches) per evaluation"},

    {"mock-data", "data and dataloader", OPTION_FLAG, AT(mock_data), .help = "deterministic synthetic tokens from the seed"},
    {"data-path", "data and dataloader", OPTION_LIST, AT(data_path), .metavar = "[W] PREFIX ...", .help = "corpus prefix(es), optionally weighted: PREFIX or W1 PREFIX1 W2 PREFIX2 ... (PREFIX.h5 or PREFIX.bin/.idx)"},
    {"train-data-path", "data and dataloader", OPTION_LIST, AT(train_data_path), .metavar = "[W] PREFIX ...", .help = "the training split's own corpora (instead of --data-path and --split)"},
    {"valid-data-path", "data and dataloader", OPTION_LIST, AT(valid_data_path), .metavar = "[W] PREFIX ...", .help = "the validation split's own corpora"},
    {"test-data-path", "data and dataloader", OPTION_LIST, AT(test_data_path), .metavar = "[W] PREFIX ...", .help = "the test split's own corpora"},
    {"per-split-data-args-path", "data and dataloader", OPTION_STRING, AT(per_split_data_args_path), .help = "JSON file {\"train\": [...], \"valid\": [...], \"test\": [...]} of per-split --data-path lists"},
    {"print-sample", "data and dataloader", OPTION_STRING, AT(print_sample), .metavar = "SPLIT:I[-J]", .help = "print the token ids of samples I..J of SPLIT (train, valid, test), global indices as Megatron's GPTDataset/BlendedDataset number them, and exit"},
    {"split", "data and dataloader", OPTION_STRING, AT(split), "969, 30, 1", .metavar = "A,B,C", .help = "train, validation, test proportions of the documents"},
    {"data-cache-path", "data and dataloader", OPTION_STRING, AT(data_cache_path), .help = "directory for the built dataset indices"},
    {"tokenizer-type", "data and dataloader", OPTION_CHOICE, AT(tokenizer_type), .choices = "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer|HuggingFaceTokenizer|Llama2Tokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer", .help = "tokenizer of the corpus (gives the vocabulary size; default GPT2BPETokenizer when --vocab-file and --merge-file are given)"},
    {"vocab-file", "data and dataloader", OPTION_STRING, AT(vocab_file), .help = "vocabulary (vocab.json for GPT-2, vocab.txt for WordPiece)"},
    {"merge-file", "data and dataloader", OPTION_STRING, AT(merge_file), .help = "BPE merges (merges.txt)"},
    {"tokenizer-model", "data and dataloader", OPTION_STRING, AT(tokenizer_model), .help = "HuggingFaceTokenizer: a directory with tokenizer.json (and tokenizer_config.json for the EOS) or the tokenizer.json file; Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer: the SentencePiece tokenizer.model"},
    {"tiktoken-pattern", "data and dataloader", OPTION_CHOICE, .choices = "v1|v2", .flags = OPTION_NO_EFFECT, .help = "read only by --tokenizer-type TikTokenizer, which is not offered here (HuggingFaceTokenizer takes the pattern from tokenizer.json)"},
    {"num-workers", "data and dataloader", OPTION_INT, .range = "[0, inf)", .flags = OPTION_NO_EFFECT, .help = "there are no dataloader worker processes: each rank reads its own samples (HDF5 hyperslabs or mmapped .bin)"},
    {"no-mmap-bin-files", "data and dataloader", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "Megatron .bin files are always mmapped here; the tokens read are the same either way"},
    {"no-create-attention-mask-in-dataloader", "data and dataloader", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "no attention mask is ever built: attention is causal by construction"},
    {"step-batch-size-schedule", "data and dataloader", OPTION_STRING, .metavar = "\"T:BS ...\"", .flags = OPTION_REFUSED, .help = "step-wise batch-size schedules are not supported yet; use a constant --global-batch-size"},
    {"rampup-batch-size", "training", OPTION_LIST, AT(rampup_batch_size), .metavar = "START INCR SAMPLES", .help = "grow the global batch from START by INCR over SAMPLES consumed samples (Megatron's RampupBatchsizeNumMicroBatchesCalculator; needs --train-samples)"},

    {"save", "checkpointing", OPTION_STRING, AT(save), .help = "directory to save checkpoints in (one parallel-HDF5 file each)"},
    {"load", "checkpointing", OPTION_STRING, AT(load), .help = "directory to load the latest checkpoint from (resharded to this run's layout)"},
    {"save-interval", "checkpointing", OPTION_INT64, AT(save_interval), "0", .range = "[0, inf)", .help = "save a checkpoint every N iterations (and always at the end)", .aliases = "persistent-save-interval"},
    {"exit-interval", "checkpointing", OPTION_INT64, AT(exit_interval), "0", .range = "[0, inf)", .help = "save (with --save) and exit when the iteration is a multiple of N"},
    {"finetune", "checkpointing", OPTION_FLAG, AT(finetune), .help = "load model weights only: iteration 0, fresh optimizer and RNG"},
    {"no-load-optim", "checkpointing", OPTION_FLAG, AT(no_load_optim), .help = "do not load the optimizer state"},
    {"no-load-rng", "checkpointing", OPTION_FLAG, AT(no_load_rng), .help = "do not load the RNG state (keep this run's --seed for dropout)"},
    {"no-save-optim", "checkpointing", OPTION_FLAG, AT(no_save_optim), .help = "do not save the optimizer state"},
    {"hdf5-debug", "checkpointing", OPTION_FLAG, AT(hdf5_debug), .help = "print HDF5's own error stack when an HDF5 call fails (default: one line naming the file, the call and the reason; not a Megatron flag)"},
    {"no-verify-checksums", "checkpointing", OPTION_FLAG, AT(no_verify_checksums), .help = "skip checking checkpoint tensors and corpus token ranges against their checksums (not a Megatron flag)"},
    {"ckpt-collective-io", "checkpointing", OPTION_FLAG, AT(ckpt_collective_io), .help = "move tensor data with MPI-IO collective buffering (default: each rank writes its own pieces independently)"},
    {"exit-signal-handler", "checkpointing", OPTION_FLAG, AT(exit_signal_handler), .help = "on SIGTERM (or SIGUSR1/SIGUSR2) save a checkpoint and exit cleanly"},
    {"override-opt-param-scheduler", "checkpointing", OPTION_FLAG, AT(override_opt_param_scheduler), .help = "the learning-rate schedule comes from this run's flags, ignoring the checkpoint's", .aliases = "override-opt_param-scheduler"},
    {"exit-on-missing-checkpoint", "checkpointing", OPTION_FLAG, AT(exit_on_missing_checkpoint), .help = "stop with an error when --load DIR holds no checkpoint (a mistyped path) instead of training from random initialization"},
    {"use-checkpoint-args", "checkpointing", OPTION_FLAG, AT(use_checkpoint_args), .help = "take the model's shape and architecture from the checkpoint in --load: the shape flags fill what the command line leaves out, the architecture flags (query groups, position embeddings, RoPE, biases, SwiGLU, untied output, normalization) override it"},
    {"use-checkpoint-opt_param-scheduler", "checkpointing", OPTION_FLAG, AT(use_checkpoint_opt_param_scheduler), .help = "the learning-rate schedule comes from the checkpoint, ignoring this run's flags", .aliases = "use-checkpoint-opt-param-scheduler"},

    {"check-for-nan-in-loss-and-grad", "robustness", OPTION_FLAG, AT(check_for_nan_in_loss_and_grad), .help = "stop with a message naming the iteration, the rank and the tensor when the loss or the gradient norm is NaN or infinite (the default)"},
    {"no-check-for-nan-in-loss-and-grad", "robustness", OPTION_FLAG, AT(no_check_for_nan_in_loss_and_grad), .help = "go on after a non-finite loss or gradient norm (the step is skipped and counted)"},
    {"check-for-spiky-loss", "robustness", OPTION_FLAG, AT(check_for_spiky_loss), .help = "warn when an iteration's loss exceeds 10x the largest loss of the 100 iterations before it"},
    {"exit-duration-in-mins", "robustness", OPTION_FLOAT, AT(exit_duration_in_mins), "0", .range = "[0, inf)", .help = "save (with --save) and exit once this many minutes have passed since the job started (SLURM_JOB_START_TIME, else the process start); fractions allowed; 0: no limit"},
    {"distributed-timeout-minutes", "robustness", OPTION_FLOAT, AT(distributed_timeout_minutes), "10", .range = "[0, inf)", .help = "a collective or point-to-point wait longer than this ends the job with a message naming the operation and the ranks that did not arrive; fractions allowed; 0: wait forever"},
    {"log-straggler", "robustness", OPTION_FLAG, AT(log_straggler), .help = "at every --log-interval, gather each rank's step and section times (forward-backward, optimizer, time waiting in MPI) to rank 0, which names the --straggler-minmax-count slowest and fastest ranks by compute time (the step less the waits) with their host and device, relative to the median (Megatron's MnRtt/MxRtt line, and \"stragglers\" in --metrics-file)"},
    {"disable-straggler-on-startup", "robustness", OPTION_FLAG, AT(disable_straggler_on_startup), .help = "start with the straggler report off; Megatron turns it on from an HTTP controller (--straggler-ctrlr-port) that is not built here, so it stays off for the run"},
    {"straggler-minmax-count", "robustness", OPTION_INT, AT(straggler_minmax_count), "1", .range = "[1, inf)", .help = "how many of the slowest and of the fastest ranks the straggler report names"},
    {"heartbeat-interval", "robustness", OPTION_FLOAT, AT(heartbeat_interval), "300", .range = "[0, inf)", .help = "seconds between heartbeat lines: from rank 0 in the training loop and from any rank waiting that long in a collective; 0: none"},

    {"async-save", "checkpointing", OPTION_FLAG, AT(async_save), .help = "the save waits only for a copy of this rank's checkpoint state into host memory; a background thread writes the parallel-HDF5 file (--ckpt-format torch_dist, the only format here) while training goes on and commits it once every rank has written; at most one save in flight, the job's end and exits wait for it; needs MPI_THREAD_MULTIPLE and host memory for one copy of the state"},
    {"non-persistent-save-interval", "checkpointing", OPTION_INT64, AT(non_persistent_save_interval), "0", .range = "[0, inf)", .help = "with --save: every N iterations (when --save-interval does not save), save a non-persistent checkpoint of --non-persistent-ckpt-type; loading (--load) takes it when it is at least as new as --load's newest; 0: none"},
    {"non-persistent-ckpt-type", "checkpointing", OPTION_CHOICE, AT(non_persistent_ckpt_type), .choices = "global|local", .help = "global: a normal checkpoint in --non-persistent-global-ckpt-dir (default <save>/non_persistent), only the newest two kept; local: every rank writes its own shard into --non-persistent-local-ckpt-dir (node-local storage) and sends a replica to the rank at its place on the next node; on restart the newest complete set is loaded (a replica where a rank's own file is gone), falling back to --load's global checkpoint with one line saying why; local checkpoints need the same TP/PP/DP layout"},
    {"non-persistent-global-ckpt-dir", "checkpointing", OPTION_STRING, AT(non_persistent_global_ckpt_dir), .help = "where --non-persistent-ckpt-type global saves and loads (default <save>/non_persistent, <load>/non_persistent when loading)"},
    {"non-persistent-local-ckpt-dir", "checkpointing", OPTION_STRING, AT(non_persistent_local_ckpt_dir), .help = "node-local folder of --non-persistent-ckpt-type local: rank r keeps DIR/rank_r (its own shards and the replicas of its peer on the previous node)"},
    {"non-persistent-local-ckpt-algo", "checkpointing", OPTION_CHOICE, AT(non_persistent_local_ckpt_algo), "fully_parallel", .choices = "fully_parallel|atomic", .help = "atomic: every rank saves all the state it holds; fully_parallel: the parts replicated over data parallelism are saved by data-parallel rank 0 only and broadcast from it on load (mixture-of-experts models save as atomic)"},
    {"ckpt-format", "checkpointing", OPTION_CHOICE, AT(ckpt_format), "torch_dist", .choices = "torch|torch_dist|torch_dcp|fsdp_dtensor", .help = "torch_dist: a distributed checkpoint that loads into any parallel layout, which is what the parallel-HDF5 format here is (io/CHECKPOINT_FORMAT.md); torch, torch_dcp and fsdp_dtensor are refused"},

    {"log-interval", "logging", OPTION_INT64, AT(log_interval), "100", .range = "[1, inf)", .help = "print the iteration line every N iterations"},
    {"metrics-file", "logging", OPTION_STRING, AT(metrics_file), .help = "also write each logged iteration as a JSON line here"},
    {"papi-events", "logging", OPTION_STRING, AT(papi_events), .metavar = "EV1,EV2,...", .help = "count these PAPI events per phase (data, forward, backward, grad_reduce, optimizer, checkpoint), summed over ranks, into --metrics-file and a table at the end (every iteration, or one in --papi-sample-interval); 'default': PAPI_TOT_INS,PAPI_TOT_CYC,PAPI_L2_TCM,PAPI_L3_TCM, and on --device cuda the GPU's DRAM bytes, SM and tensor-pipe active cycles and bf16 tensor ops; GPU events are PAPI's cuda component names, cuda:::METRIC:stat=sum (on this rank's GPU unless :device=N), with a PAPI built by perf/papi/build_papi_cuda.sh"},
    {"papi-sample-interval", "logging", OPTION_INT64, AT(papi_sample_interval), "1", .range = "[0, inf)", .help = "with --papi-events: count one iteration in N (the iterations whose number is a multiple of N; 0: N = --log-interval, the logged ones), the event sets stopped in between; each metrics line then says how many iterations its counts cover (papi_iterations). On a GPU every phase switch reads the counters through CUPTI's profiler, which costs (GPT 1.3B on an H200: +58% counting every iteration), so sample there"},

    {"tensor-model-parallel-size", "distributed and run time", OPTION_INT, AT(tensor_model_parallel_size), "1", .range = "[1, inf)", .help = "tensor-parallel ranks"},
    {"pipeline-model-parallel-size", "distributed and run time", OPTION_INT, AT(pipeline_model_parallel_size), "1", .range = "[1, inf)", .help = "pipeline stages"},
    {"sequence-parallel", "distributed and run time", OPTION_FLAG, AT(sequence_parallel), .help = "shard layer norms and dropout over the sequence inside the tensor-parallel group"},
    {"tp-comm-overlap", "distributed and run time", OPTION_FLAG, AT(tp_comm_overlap), .help = "overlap the sequence-parallel all-gathers and reduce-scatters with the GEMMs: token-row blocks are copied between the tensor-parallel ranks' memory (on CUDA by the copy engines over CUDA IPC, no SMs; the ranks must share a node and have peer access) while the GEMM runs on the blocks already here; needs --sequence-parallel"},
    {"disable-tp-comm-overlap-ag", "distributed and run time", OPTION_FLAG, AT(disable_tp_comm_overlap_ag), .help = "with --tp-comm-overlap: keep the all-gathers (before the qkv and fc1 GEMMs, and the backward's before the attention projection's and fc2's input gradients) as NCCL collectives, not overlapped", .aliases = "no-tp-comm-overlap-ag"},
    {"disable-tp-comm-overlap-rs", "distributed and run time", OPTION_FLAG, AT(disable_tp_comm_overlap_rs), .help = "with --tp-comm-overlap: keep the reduce-scatters (after the attention projection and fc2, and the backward's of the column-parallel input gradients) as NCCL collectives, not overlapped", .aliases = "no-tp-comm-overlap-rs"},
    {"num-layers-per-virtual-pipeline-stage", "distributed and run time", OPTION_INT, AT(num_layers_per_virtual_pipeline_stage), .help = "layers per virtual stage (interleaved 1F1B schedule)"},
    {"virtual-pipeline-model-parallel-size", "distributed and run time", OPTION_INT, AT(virtual_pipeline_model_parallel_size), .help = "model chunks per pipeline stage (interleaved 1F1B schedule)", .aliases = "num-virtual-stages-per-pipeline-rank"},
    {"use-distributed-optimizer", "distributed and run time", OPTION_FLAG, AT(use_distributed_optimizer), .help = "shard optimizer state over data-parallel ranks (ZeRO-1)"},
    {"overlap-grad-reduce", "distributed and run time", OPTION_FLAG, AT(overlap_grad_reduce), .help = "reduce a gradient bucket as soon as its gradients are complete"},
    {"overlap-param-gather", "distributed and run time", OPTION_FLAG, AT(overlap_param_gather), .help = "gather updated parameters while the next forward runs (distributed optimizer)"},
    {"ddp-bucket-size", "distributed and run time", OPTION_INT64, AT(ddp_bucket_size), .range = "[1, inf)", .help = "gradient bucket size in elements (default max(40M, 1M x data-parallel size))"},
    {"parallel-order", "distributed and run time", OPTION_STRING, AT(parallel_order), "tp-cp-ep-dp-pp", .metavar = "ORDER", .help = "order of the parallel dimensions over ranks, fastest first"},
    {"deterministic-mode", "distributed and run time", OPTION_FLAG, AT(deterministic_mode), .help = "bitwise reproducible: fixed-order reductions, no atomics, no GEMM algorithm tuning; on the CPU backend also the same bits at every power-of-two data-parallel size (gradients and loss summed over the global batch by one fixed tree; costs log2(micro-batches per rank) + 1 gradient buffers)"},
    {"no-gemm-tuning", "distributed and run time", OPTION_FLAG, AT(no_gemm_tuning), .help = "cuda: run the cuBLASLt heuristic's first algorithm for every GEMM instead of timing its first eight on first use and keeping the fastest (the default unless --deterministic-mode: the timing can choose differently between runs)"},
    {"device", "distributed and run time", OPTION_CHOICE, AT(device), "auto", .choices = "auto|cpu|cuda", .help = "kernel backend (auto: cuda when a GPU is present, else cpu); on cuda each rank takes the GPU of its node-local rank, and a node that starts more ranks than it sees GPUs is refused with one message naming both counts"},
    {"timing-log-level", "logging", OPTION_INT, AT(timing_log_level), "0", .range = "[0, 2]", .help = "per-phase timers, as Megatron's: 0 the iteration time only (the log line); 1 also the phases of a step (forward-backward, all-grads-sync, embedding- and layernorm-grads-all-reduce, optimizer-clip-main-grad, optimizer-inner-step, params-all-gather, optimizer); 2 also the pipeline's (forward-compute, backward-compute, batch-generator, forward/backward send and recv). Printed after each logged iteration line, averaged over the interval, and in --metrics-file as timers_ms; a timer synchronizes the device at its start and stop"},
    {"timing-log-option", "logging", OPTION_CHOICE, AT(timing_log_option), "minmax", .choices = "max|minmax|all", .help = "how the timers are reported over ranks: the maximum, the minimum and maximum, or every rank's time"},
    {"log-timers-to-tensorboard", "logging", OPTION_FLAG, AT(log_timers_to_tensorboard), .help = "also write the timers (NAME-time, the maximum over ranks in seconds per iteration) and iteration-time to --tensorboard-dir"},
    {"no-barrier-with-level-1-timing", "logging", OPTION_FLAG, AT(no_barrier_with_level_1_timing), .help = "start level-1 timers without a barrier over all ranks first (the barrier is Megatron's default: it lines the ranks up, so a timer measures the phase and not the wait for the slowest rank)"},
    {"log-throughput", "logging", OPTION_FLAG, AT(log_throughput), .help = "throughput (TFLOP/s per GPU, tokens per second) is always in the log line; with --log-timers-to-tensorboard also the throughput scalar (TFLOP/s per GPU) at each logged iteration, as Megatron"},
    {"tensorboard-dir", "logging", OPTION_STRING, AT(tensorboard_dir), .help = "write TensorBoard scalars here under Megatron's tags, at every iteration that --tensorboard-log-interval divides: learning-rate, batch-size, lm loss (the iteration's), loss-scale, grad-norm, each also \"vs samples\"; lm loss validation at each evaluation; the --log-* switches add theirs"},
    {"tensorboard-log-interval", "logging", OPTION_INT64, AT(tensorboard_log_interval), "1", .range = "[1, inf)", .help = "write the training scalars at every iteration this divides (Megatron's default 1: every iteration)"},
    {"tensorboard-queue-size", "logging", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "there is no event queue: every scalar is written and flushed at once, so a killed run keeps what it logged"},
    {"log-params-norm", "logging", OPTION_FLAG, AT(log_params_norm), .help = "compute the L2 norm of the parameters (the fp32 masters, each parameter counted once over the tensor- and pipeline-parallel ranks) after every step: \"params norm\" in the log line and params-norm (and \"vs samples\") in --tensorboard-dir"},
    {"log-num-zeros-in-grad", "logging", OPTION_FLAG, AT(log_num_zeros_in_grad), .help = "count the zero elements of the gradient (unscaled, before clipping, each parameter counted once) at every step that is not skipped: \"num zeros\" in the log line and num-zeros (and \"vs samples\") in --tensorboard-dir"},
    {"log-validation-ppl-to-tensorboard", "logging", OPTION_FLAG, AT(log_validation_ppl_to_tensorboard), .help = "also write the validation perplexity: lm loss validation ppl (and \"vs samples\") in --tensorboard-dir"},
    {"log-memory-to-tensorboard", "logging", OPTION_FLAG, AT(log_memory_to_tensorboard), .help = "also write rank 0's backend memory (everything allocated through the kernel backend; there is no caching allocator, so reserved equals allocated): mem-reserved-bytes, mem-allocated-bytes, mem-max-allocated-bytes, mem-allocated-count in --tensorboard-dir"},
    {"log-world-size-to-tensorboard", "logging", OPTION_FLAG, AT(log_world_size_to_tensorboard), .help = "also write the number of ranks: world-size (and \"vs samples\") in --tensorboard-dir"},
    {"log-learning-rate-to-tensorboard", "logging", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "learning-rate is always written to --tensorboard-dir, as Megatron-LM writes it now (older versions had this flag; not in its current parser)"},
    {"no-log-learning-rate-to-tensorboard", "logging", OPTION_FLAG, AT(no_log_learning_rate_to_tensorboard), .help = "leave the learning-rate scalars out of --tensorboard-dir (an older Megatron-LM flag, not in its current parser)"},
    {"log-batch-size-to-tensorboard", "logging", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "batch-size is always written to --tensorboard-dir, as Megatron-LM writes it now (older versions had this flag; not in its current parser)"},
    {"no-log-loss-scale-to-tensorboard", "logging", OPTION_FLAG, AT(no_log_loss_scale_to_tensorboard), .help = "leave the loss-scale scalars out of --tensorboard-dir (written by default)", .aliases = "disable-log-loss-scale-to-tensorboard"},
    {"wandb-project", "logging", OPTION_STRING, .flags = OPTION_REFUSED, .help = "Weights & Biases logging is not supported; use --metrics-file PATH (JSON lines) and upload those"},
    {"wandb-exp-name", "logging", OPTION_STRING, .flags = OPTION_REFUSED, .help = "Weights & Biases logging is not supported; use --metrics-file PATH (JSON lines) and upload those"},
    {"profile", "logging", OPTION_FLAG, AT(profile), .help = "open the CUDA profiler's capture range (cudaProfilerStart/Stop) around iterations [--profile-step-start, --profile-step-end) on the --profile-ranks: run under ncu --profile-from-start off or nsys --capture-range=cudaProfilerApi (the CPU backend has no such range)"},
    {"profile-step-start", "logging", OPTION_INT, AT(profile_step_start), "10", .range = "[0, inf)", .help = "the iteration count at which --profile starts capturing (Megatron's default 10)"},
    {"profile-step-end", "logging", OPTION_INT, AT(profile_step_end), "12", .range = "[0, inf)", .help = "the iteration count at which --profile stops capturing (Megatron's default 12)"},
    {"profile-ranks", "logging", OPTION_LIST, AT(profile_ranks), "0", .metavar = "RANK ...", .help = "global ranks that --profile captures on (default: 0)"},
    {"use-pytorch-profiler", "logging", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "there is no PyTorch profiler here; profile with nsys or ncu"},
    {"peak-tflops", "logging", OPTION_FLOAT, AT(peak_tflops), .range = "[0, inf)", .help = "peak dense TFLOP/s per device for MFU (default: recognized from the GPU name)"},
    {"context-parallel-size", "distributed and run time", OPTION_INT, AT(context_parallel_size), "1", .range = "[1, inf)", .help = "ranks that split each sequence (Megatron's context parallelism): each holds 2 of its 2 x CP pieces (pieces i and 2CP-1-i), attention runs as a ring over them; gradients are reduced over data-parallel x context-parallel ranks"},
    {"cp-comm-type", "distributed and run time", OPTION_LIST, AT(cp_comm_type), "p2p", .metavar = "TYPE ...", .help = "context parallelism's attention: p2p (ring attention, keys and values passed around the ring while the attention computes), allgather (keys and values all-gathered, then local attention), a2a (heads exchanged for the sequence by all-to-all, Ulysses-style) or a2a+p2p (hierarchical: a2a inside groups of --hierarchical-context-parallel-sizes' first size, then a p2p ring over the second); one type for all layers or one per layer"},
    {"hierarchical-context-parallel-sizes", "distributed and run time", OPTION_LIST, AT(hierarchical_context_parallel_sizes), .metavar = "N ...", .help = "the two levels of --cp-comm-type a2a+p2p, inner first: N1 N2 with N1 x N2 = --context-parallel-size; the heads are exchanged by all-to-all among N1 consecutive context-parallel ranks, and the keys and values of the resulting longer sequences pass around a ring of the N2 ranks N1 apart (Megatron's hierarchical groups)"},
    {"expert-model-parallel-size", "distributed and run time", OPTION_INT, AT(expert_model_parallel_size), "1", .range = "[1, inf)", .help = "expert-parallel ranks: the experts of each MoE layer split over this many of the data-parallel ranks (it divides the data-parallel size and --num-experts); tokens reach them by an all-to-all"},
    {"expert-tensor-parallel-size", "distributed and run time", OPTION_INT, AT(expert_tensor_parallel_size), .range = "[1, inf)", .help = "tensor-parallel ranks of each expert (default: --tensor-model-parallel-size): that size or a divisor of it, down to 1 (each expert whole on its rank); below it the expert-parallel and expert-data-parallel groups span the tensor-parallel ranks, as Megatron's expert rank generator (tp = this size) lays them out, and each expert tensor-parallel group dispatches its members' sequence shares; needs --sequence-parallel when the tensor-parallel size is above 1, and tp first in --parallel-order between 1 and that size; with --fp8-format the experts' amaxes reduce over the expert tensor- and data-parallel ranks; not yet with context parallelism or local non-persistent checkpoints"},
    {"distributed-backend", "distributed and run time", OPTION_CHOICE, .choices = "nccl|gloo", .flags = OPTION_NO_EFFECT, .help = "the collectives follow --device: NCCL on cuda, MPI on cpu (MPI also bootstraps and carries host control everywhere)"},
    {"use-cpu-initialization", "distributed and run time", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "parameters are always initialized on the host from the counter-based generator (seed, name, element), the same on every backend and layout"},
    {"dump-parameters", "logging", OPTION_STRING, AT(dump_parameters), .help = "write every parameter in its global shape to PATH at the end (raw float32 with names)"},

    {"bf16", "mixed precision", OPTION_FLAG, AT(bf16), .help = "bf16 mixed precision: on --device cuda the kernels compute in bf16 with fp32 master weights, gradient accumulation and reductions (the CUDA backend always does); the CPU backend is the fp32 reference and computes in fp32 either way"},
    {"fp16", "mixed precision", OPTION_FLAG, AT(fp16), .help = "fp16 mixed precision with Megatron's loss scaling (dynamic unless --loss-scale): on --device cuda the kernels compute in fp16 (parameters, activations and their gradients) with fp32 master weights, gradient accumulation and reductions; the CPU backend computes in fp32 with the loss scaler fully active either way (overflowed steps are skipped and lower the scale)"},
    {"loss-scale", "mixed precision", OPTION_FLOAT, AT(loss_scale), .range = "(0, inf)", .help = "a constant loss scale (Megatron's ConstantGradScaler; positive powers of 2 are exact) with --fp16, --bf16 or --use-distributed-optimizer; without --loss-scale, --fp16 scales dynamically"},
    {"initial-loss-scale", "mixed precision", OPTION_FLOAT, AT(initial_loss_scale), "4294967296", .range = "(0, inf)", .help = "the dynamic loss scale's start (--fp16; default 2^32)"},
    {"min-loss-scale", "mixed precision", OPTION_FLOAT, AT(min_loss_scale), "1.0", .range = "(0, inf)", .help = "the dynamic loss scale never backs off below this"},
    {"loss-scale-window", "mixed precision", OPTION_FLOAT, AT(loss_scale_window), "1000", .range = "(0, inf)", .help = "the dynamic loss scale doubles after this many consecutive steps without overflow"},
    {"hysteresis", "mixed precision", OPTION_INT, AT(hysteresis), "2", .range = "[1, inf)", .help = "the dynamic loss scale halves at the hysteresis-th overflow since the last growth (then at every further one)"},
    {"fp8-format", "mixed precision", OPTION_CHOICE, AT(fp8_format), .choices = "e4m3|hybrid", .metavar = "FORMAT", .help = "FP8 training of the transformer layers' linear layers (linear_qkv, linear_proj, linear_fc1, linear_fc2, the experts' and shared experts'; attention, the router and the output layer stay in bf16), as Megatron with Transformer Engine: e4m3 everywhere, or hybrid (E4M3 forward, E5M2 gradients); needs --bf16. On --device cuda the layers' GEMMs are cuBLASLt fp8 GEMMs, the experts' one per expert (MTC_FP8_EMULATE=1 emulates all, MTC_FP8_EXPERTS_EMULATE=1 the experts); on --device cpu they are emulated: the operands are rounded to fp8 with their scales and the GEMM runs on the dequantized values in fp32, as an fp8 GEMM computes (MTC_FP8_NATIVE=1: the CPU's reference of the fp8 GEMMs on codes instead)"},
    {"fp8-recipe", "mixed precision", OPTION_STRING, AT(fp8_recipe), "delayed", .metavar = "RECIPE", .help = "how --fp8-format scales its tensors: delayed (TE's DelayedScaling: a scale per tensor from the amax history of past steps) or tensorwise (TE's Float8CurrentScaling: each tensor's scale from its own amax); blockwise, mxfp8 and custom are refused"},
    {"fp8-margin", "mixed precision", OPTION_INT, AT(fp8_margin), "0", .help = "delayed scaling: scale = fp8_max * 2^-margin / amax"},
    {"fp8-interval", "mixed precision", OPTION_INT, AT(fp8_interval), "1", .help = "deprecated and ignored (as from Transformer Engine 1.8, with Megatron's warning when not 1)"},
    {"fp8-amax-history-len", "mixed precision", OPTION_INT, AT(fp8_amax_history_len), "1", .range = "[1, inf)", .help = "delayed scaling: the steps of amax history each scale is computed from (saved in checkpoints as the linear layers' _extra_state)"},
    {"fp8-amax-compute-algo", "mixed precision", OPTION_CHOICE, AT(fp8_amax_compute_algo), "most_recent", .choices = "most_recent|max", .metavar = "ALGO", .help = "delayed scaling: the amax a scale is computed from: the latest step's (most_recent) or the largest of the history (max)"},
    {"no-fp8-wgrad", "mixed precision", OPTION_FLAG, AT(no_fp8_wgrad), .aliases = "disable-fp8-wgrad", .help = "with --fp8-format: the weight gradients' GEMMs take the unquantized output gradient and input (TE's override_linear_precision); the input gradients stay in fp8"},
    {"first-last-layers-bf16", "mixed precision", OPTION_FLAG, AT(first_last_layers_bf16), .help = "with --fp8-format: the first --num-layers-at-start-in-bf16 and the last --num-layers-at-end-in-bf16 layers stay in bf16 (refused with --fp8-recipe delayed, as Megatron)"},
    {"num-layers-at-start-in-bf16", "mixed precision", OPTION_INT, AT(num_layers_at_start_in_bf16), "1", .help = "--first-last-layers-bf16: layers at the start kept in bf16 (0 to the layers per pipeline stage)"},
    {"num-layers-at-end-in-bf16", "mixed precision", OPTION_INT, AT(num_layers_at_end_in_bf16), "1", .help = "--first-last-layers-bf16: layers at the end kept in bf16 (0 to the layers per pipeline stage)"},
    {"fp8-param-gather", "mixed precision", OPTION_FLAG, AT(fp8_param_gather), .help = "with --fp8-format and --use-distributed-optimizer: Megatron keeps the weights in fp8 and all-gathers them in fp8; the emulation gathers the fp32 weights and quantizes them after with the same scales, which gives the same numbers"},
    {"attention-softmax-in-fp32", "mixed precision", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the attention softmax is always computed in fp32 (flash attention's running max and sum are fp32)"},
    {"accumulate-allreduce-grads-in-fp32", "mixed precision", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "gradients are always accumulated and reduced in fp32"},
    {"grad-reduce-in-bf16", "mixed precision", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "gradients are reduced in fp32 here, which is more precise and moves twice the bytes of a bf16 reduction"},

    {"use-mcore-models", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the model is Megatron-Core's GPTModel already (its parameter names and layout)"},
    {"transformer-impl", "Megatron-LM implementation switches", OPTION_CHOICE, .choices = "local|transformer_engine|inference_optimized", .flags = OPTION_NO_EFFECT, .help = "one implementation of the layers here, the same math as both"},
    {"attention-backend", "Megatron-LM implementation switches", OPTION_CHOICE, .choices = "flash|fused|unfused|local|auto", .flags = OPTION_NO_EFFECT, .help = "attention is the CPU reference on --device cpu and flash attention on cuda, whatever this says (the same softmax(QK^T/sqrt(d))V)"},
    {"use-flash-attn", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the CUDA backend always uses flash attention"},
    {"no-masked-softmax-fusion", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "kernel fusion changes speed, not results, and the kernels here are fixed"},
    {"no-bias-gelu-fusion", "Megatron-LM implementation switches", OPTION_FLAG, AT(no_bias_gelu_fusion), .help = "no bias-GeLU fusion (Megatron's bias_activation_fusion off): the MLP's GeLU (not --swiglu) is F.gelu's exact erf form instead of the fused kernel's tanh approximation; --disable-bias-linear switches the fusion off too"},
    {"no-bias-dropout-fusion", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "kernel fusion changes speed, not results, and the kernels here are fixed"},
    {"no-gradient-accumulation-fusion", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "weight gradients always accumulate into the fp32 gradient buffer; fusing that changes speed, not results"},
    {"cross-entropy-loss-fusion", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the vocab-parallel cross-entropy is always one fused pass that never gathers the logits"},
    {"calculate-per-token-loss", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "every sample has --seq-length tokens with loss (no loss mask), so the per-token average over the global batch equals the average of micro-batch means used here"},
    {"manual-gc", "Megatron-LM implementation switches", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "there is no Python garbage collector to schedule"},
    {"empty-unused-memory-level", "Megatron-LM implementation switches", OPTION_INT, .range = "[0, 2]", .flags = OPTION_NO_EFFECT, .help = "there is no caching allocator to empty: buffers are allocated once at start-up"},
    /* mixture of experts: Megatron-Core's MoELayer (app/model/moe_layer.h) */
    {"num-experts", "mixture of experts", OPTION_INT, AT(num_experts), .range = "[1, inf)", .help = "experts per MoE layer (none: a dense model)"},
    {"moe-ffn-hidden-size", "mixture of experts", OPTION_INT, AT(moe_ffn_hidden_size), .range = "[1, inf)", .help = "each expert's MLP width (default --ffn-hidden-size)"},
    {"moe-layer-freq", "mixture of experts", OPTION_STRING, AT(moe_layer_freq), "1", .metavar = "N|PATTERN", .help = "which layers are MoE: an integer N (layers 0, N, 2N, ...) or a Python list expression of 0/1 per layer, e.g. \"([0]*1+[1]*3)*2\""},
    {"moe-router-topk", "mixture of experts", OPTION_INT, AT(moe_router_topk), "2", .range = "[1, inf)", .help = "experts each token is routed to"},
    {"moe-router-score-function", "mixture of experts", OPTION_CHOICE, AT(moe_router_score_function), "softmax", .choices = "softmax|sigmoid|sqrtsoftplus", .help = "the router's score function"},
    {"moe-router-pre-softmax", "mixture of experts", OPTION_FLAG, AT(moe_router_pre_softmax), .help = "softmax over all experts before the top-k (else over the k chosen logits)"},
    {"moe-router-topk-scaling-factor", "mixture of experts", OPTION_FLOAT, AT(moe_router_topk_scaling_factor), .range = "(0, inf)", .help = "multiply the routing weights by this"},
    {"moe-router-dtype", "mixture of experts", OPTION_CHOICE, AT(moe_router_dtype), .choices = "fp32|fp64", .help = "the router's precision: it computes in fp32 here (fp64 is refused)"},
    {"moe-router-num-groups", "mixture of experts", OPTION_INT, AT(moe_router_num_groups), .range = "[1, inf)", .help = "group-limited routing: experts in this many equal groups"},
    {"moe-router-group-topk", "mixture of experts", OPTION_INT, AT(moe_router_group_topk), .range = "[1, inf)", .help = "group-limited routing: groups each token may use (by the sum of each group's top topk/group-topk scores)"},
    {"moe-router-load-balancing-type", "mixture of experts", OPTION_LIST, AT(moe_router_load_balancing_type), "aux_loss", .metavar = "TYPE", .help = "aux_loss (GShard/Switch), seq_aux_loss (per sequence, DeepSeek-V2) or none"},
    {"moe-aux-loss-coeff", "mixture of experts", OPTION_FLOAT, AT(moe_aux_loss_coeff), "0", .range = "[0, inf)", .help = "the load-balancing loss's coefficient (0: none)"},
    {"moe-z-loss-coeff", "mixture of experts", OPTION_FLOAT, AT(moe_z_loss_coeff), .range = "[0, inf)", .help = "the router z-loss's coefficient (ST-MoE; none: 0)"},
    {"moe-input-jitter-eps", "mixture of experts", OPTION_FLOAT, AT(moe_input_jitter_eps), .range = "[0, 1)", .help = "in training, multiply the router's input by uniform noise in [1-eps, 1+eps]"},
    {"moe-expert-capacity-factor", "mixture of experts", OPTION_FLOAT, AT(moe_expert_capacity_factor), .range = "(0, inf)", .help = "each expert takes at most ceil(tokens x topk / experts x factor) tokens of a micro-batch (none: dropless)"},
    {"moe-token-drop-policy", "mixture of experts", OPTION_CHOICE, AT(moe_token_drop_policy), "probs", .choices = "probs|position", .help = "with a capacity: drop the tokens of lowest routing weight (probs) or the last ones (position)"},
    {"moe-pad-expert-input-to-capacity", "mixture of experts", OPTION_FLAG, AT(moe_pad_expert_input_to_capacity), .help = "accepted: padding rows carry weight 0 and change no result; the experts compute only their routed rows here"},
    {"moe-token-dispatcher-type", "mixture of experts", OPTION_CHOICE, AT(moe_token_dispatcher_type), "allgather", .choices = "allgather|alltoall|flex", .help = "how tokens reach their experts' ranks (the same results; flex is refused)"},
    {"moe-grouped-gemm", "mixture of experts", OPTION_FLAG, AT(moe_grouped_gemm), .help = "the experts' GEMMs as one grouped GEMM (the same math; the CPU backend runs one GEMM per expert)"},
    {"moe-per-layer-logging", "mixture of experts", OPTION_FLAG, AT(moe_per_layer_logging), .help = "log the load-balancing and z losses of every MoE layer, not only their mean"},
    {"moe-permute-fusion", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "fusing the token permutation changes speed, not results"},
    {"moe-router-fusion", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "fusing the router's kernels changes speed, not results"},
    {"moe-shared-expert-intermediate-size", "mixture of experts", OPTION_INT, AT(moe_shared_expert_intermediate_size), .range = "[1, inf)", .help = "shared experts: a dense MLP of this width (num_shared_experts x each one's) that every token of an MoE layer goes through, its output added to the routed experts' (none: no shared experts)"},
    {"moe-shared-expert-gate", "mixture of experts", OPTION_FLAG, AT(moe_shared_expert_gate), .help = "scale the shared experts' output per token by sigmoid(x . gate_weight) (a [1, hidden] weight, mlp.shared_experts.gate_weight)"},
    {"moe-shared-expert-overlap", "mixture of experts", OPTION_FLAG, AT(moe_shared_expert_overlap), .help = "with expert parallelism, compute the shared experts while the expert-parallel all-to-alls are in flight (as Megatron-Core: fc1 and the activation during the dispatch, fc2 and the gate during the combine; in the backward fc2's gradients during the first all-to-all, fc1's during the second; NCCL runs them on a side stream); the same results bit for bit. Needs --moe-token-dispatcher-type alltoall (refused otherwise, as Megatron does); with expert-parallel size 1 there is nothing to overlap"},
    {"moe-router-enable-expert-bias", "mixture of experts", OPTION_FLAG, AT(moe_router_enable_expert_bias), .help = "aux-loss-free load balancing: a per-layer expert bias added to the scores for the top-k choice only (not the weights), moved by --moe-router-bias-update-rate towards balance after every iteration from the global batch's tokens per expert (sigmoid or sqrtsoftplus score function)"},
    {"moe-router-bias-update-rate", "mixture of experts", OPTION_FLOAT, AT(moe_router_bias_update_rate), "1e-3", .range = "[0, inf)", .help = "the expert bias's step per iteration: + for experts with fewer tokens than the mean, - for those with more"},
    {"moe-layer-recompute", "mixture of experts", OPTION_FLAG, AT(moe_layer_recompute), .help = "deprecated in Megatron, kept: the same as --recompute-granularity selective with moe added to --recompute-modules (refused with --recompute-granularity full)"},

    /* the rest of Megatron-LM's parser (tests/data/megatron_parser_flags.txt): no effect here, or refused */
#include "app/training/args_megatron_compat.inc"

    /* the rest of Megatron's MoE flags: implementation and performance choices that change no
     * result here (no effect), or features not built (refused, naming what to use instead) */
    {"expert-tensor-parallel-num-weight-shards", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_REFUSED, .help = "expert generalized tensor parallelism with weight rematerialization (expert GTP) is not built: experts split over --expert-tensor-parallel-size ranks; leave it unset (its default, the expert-tensor-parallel size)"},
    {"overlap-moe-expert-parallel-comm", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "overlapping one micro-batch's expert-parallel all-to-all with another's compute (Megatron's combined 1F1B schedule) changes speed, not results; the all-to-alls here run in order"},
    {"overlap-dispatch-backward-with-experts-wgrad", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "overlapping the dispatch's backward all-to-all with the experts' weight-gradient GEMMs changes speed, not results; they run in order here"},
    {"ep-overlap-early-attn-memory-release", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "a memory-release schedule of --overlap-moe-expert-parallel-comm (no effect here): nothing to release early"},
    {"high-priority-a2a-comm-stream", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the all-to-all's stream priority changes speed, not results (no separate all-to-all stream here)"},
    {"use-grouped-gemm-for-shared-expert", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the shared experts as a one-group grouped GEMM (Transformer Engine's fused SwiGLU path) is the same math as their GEMMs here"},
    {"moe-shared-expert-glu-interleave-size", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_REFUSED, .help = "block-interleaved GLU weights are not built: the shared experts' fc1 holds the gate half then the up half (Megatron's default layout); leave it unset"},
    {"moe-enable-routing-replay", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "routing replay belongs to Megatron's dynamic inference engine (recorded routing replayed in RL training), which is not built here; training routes each token itself"},
    {"moe-router-padding-for-quantization", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "pads each expert's rows to a multiple of 16/32 with tokens of routing weight 0 for fp8/fp4 GEMMs: those rows add 0 to the output and their weight gradient is dropped by the top-k scatter, and the grouped GEMMs here take any row count (the emulated fp8 scales come from the routed rows only)"},
    {"moe-router-padding-for-fp8", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the older name of --moe-router-padding-for-quantization (no effect here: padding rows carry routing weight 0)"},
    {"moe-router-quantile-balancing-ema", "mixture of experts", OPTION_FLOAT, .range = "[0, 1]", .flags = OPTION_REFUSED, .help = "only read with --moe-router-load-balancing-type quantile_balancing, which is not built; use aux_loss, seq_aux_loss or --moe-router-enable-expert-bias (aux-loss-free balancing)"},
    {"moe-router-force-load-balancing", "mixture of experts", OPTION_FLAG, AT(moe_router_force_load_balancing), .help = "benchmarks only: the router's logits replaced by standard normal draws (Philox, keyed by seed, iteration, layer and the micro-batch's samples), so that the experts get about equal tokens; the gradient reaches the router's weight as if they were its logits (Megatron's straight-through RandomSTE)"},
    {"moe-router-force-biased", "mixture of experts", OPTION_FLOAT, AT(moe_router_force_biased), .metavar = "STD", .help = "benchmarks only: random router logits (as --moe-router-force-load-balancing) plus a random per-expert bias of this std, the same on every rank: drawn anew each iteration (Megatron: each forward pass) when positive, once per layer for the whole run when negative (std |STD|), skewing the routing"},
    {"use-grouped-gemm-for-dense-mlp", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the dense MLP as a one-group grouped GEMM (an MXFP8 fusion on SM100) is the same math as its GEMMs here"},
    {"moe-use-grouped-tensor", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "Transformer Engine's GroupedTensor path of --moe-grouped-gemm (padded segments for CUDA graphs): the grouped GEMMs here already take the experts' rows from one buffer, with the same results (needs --moe-grouped-gemm, as Megatron)"},
    {"moe-single-grouped-weight", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "the experts' weights as one grouped parameter: here they already lie contiguous in the flat parameter buffer, and checkpoints keep Megatron's per-expert names (needs --moe-grouped-gemm and --moe-use-grouped-tensor, as Megatron)"},
    {"moe-single-grouped-bias", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "the experts' biases as one grouped parameter: the experts here have no biases (MoE needs --disable-bias-linear), and Megatron refuses it without biases; leave it out"},
    {"moe-enable-deepep", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "DeepEP's dispatcher is not built here: use --moe-token-dispatcher-type alltoall (the all-to-all over MPI or NCCL)"},
    {"moe-flex-dispatcher-backend", "mixture of experts", OPTION_CHOICE, .choices = "deepep|hybridep|ncclep", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-permute-fusion-into-hybridep", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-hybridep-pad-uneven-dispatch-inputs", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-pad-experts-for-cuda-graph-inference", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "dropping and padding at decode time for CUDA-graphed inference: pretrain_gpt runs no inference decode, and capacity-free padding drops no token"},
    {"moe-apply-probs-on-input", "mixture of experts", OPTION_FLAG, AT(moe_apply_probs_on_input), .help = "the routing weight scales each token's row before its expert (w x) instead of the expert's output, which then adds with weight 1; --moe-router-topk 1 only (as Megatron)"},
    {"moe-latent-size", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_REFUSED, .help = "MoE latent projections (fc1_latent_proj, fc2_latent_proj) are not built: the experts work at --hidden-size; leave it unset"},
    {"moe-flex-dispatcher-num-sms", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-deepep-num-sms", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-hybridep-num-sms", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-hybridep-num-blocks-permute", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-hybridep-num-blocks-unpermute", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-hybridep-num-sms-preprocessing", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-ncclep-zero-copy", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-dispatch-fwd-dtype", "mixture of experts", OPTION_CHOICE, .choices = "bf16|mxfp8", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-combine-bwd-dtype", "mixture of experts", OPTION_CHOICE, .choices = "bf16|mxfp8", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL)"},
    {"moe-mlp-glu-interleave-size", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_REFUSED, .help = "block-interleaved GLU weights are not built: each expert's fc1 holds the gate half then the up half (Megatron's default layout); leave it unset"},
    {"moe-expert-rank-capacity-factor", "mixture of experts", OPTION_FLOAT, .range = "(0, inf)", .flags = OPTION_NO_EFFECT, .help = "only read by the flex token dispatcher (--moe-token-dispatcher-type flex: DeepEP, HybridEP, NCCL EP), which is not built here; tokens travel by --moe-token-dispatcher-type alltoall (the comm interface's all-to-all: MPI or NCCL); a per-expert capacity is --moe-expert-capacity-factor"},
    {"inference-moe-disable-fused-quant-kernels", "mixture of experts", OPTION_FLAG, .flags = OPTION_NO_EFFECT, .help = "Megatron's inference engine's MXFP8 kernels: pretrain_gpt runs no inference, and the kernels here are fixed"},
    {"inference-moe-token-dispatcher-type", "mixture of experts", OPTION_CHOICE, .choices = "nccl|nvls", .flags = OPTION_NO_EFFECT, .help = "Megatron's inference engine's dispatcher: pretrain_gpt runs no inference (generation here dispatches as training does)"},
    {"moe-paged-stash", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "stashing the experts' activations in paged buffers is not built; to cut MoE activation memory use --recompute-granularity selective --recompute-modules moe (the whole MoE layer), moe_act or shared_experts"},
    {"moe-paged-stash-page-size", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read with --moe-paged-stash, which is refused"},
    {"moe-paged-stash-buffer-size-factor-cuda", "mixture of experts", OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "only read with --moe-paged-stash, which is refused"},
    {"moe-paged-stash-buffer-size-factor-cpu", "mixture of experts", OPTION_FLOAT, .flags = OPTION_NO_EFFECT, .help = "only read with --moe-paged-stash, which is refused"},
    {"save-tokens-per-expert-interval", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_REFUSED, .help = "saving tokens-per-expert files is not built: --metrics-file PATH writes every logged iteration's tokens per expert of each MoE layer (\"tokens_per_expert\")"},
    {"moe-use-upcycling", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "upcycling a dense checkpoint into an MoE model is not built; train the MoE model from initialization, or import a Hugging Face Mixtral with app/convert_checkpoint"},
    {"moe-upcycling-granularity", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read with --moe-use-upcycling, which is refused"},
    {"moe-routing-trace-path", "mixture of experts", OPTION_STRING, .metavar = "DIR", .flags = OPTION_REFUSED, .help = "router decision traces are not built; --metrics-file PATH writes each logged iteration's tokens per expert of every MoE layer"},
    {"moe-routing-trace-max-training-iters", "mixture of experts", OPTION_INT, .range = "[1, inf)", .flags = OPTION_NO_EFFECT, .help = "only read with --moe-routing-trace-path, which is refused"},
    {"moe-routing-trace-capture-logits", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "router decision traces are not built; --metrics-file PATH writes each logged iteration's tokens per expert of every MoE layer"},
    {"moe-routing-trace-capture-hidden-states", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "router decision traces are not built; --metrics-file PATH writes each logged iteration's tokens per expert of every MoE layer"},
    {"moe-routing-trace-dump-weights", "mixture of experts", OPTION_FLAG, .flags = OPTION_REFUSED, .help = "router decision traces are not built; --metrics-file PATH writes each logged iteration's tokens per expert of every MoE layer"},
};
#define NUM_FLAGS ((int)(sizeof specs / sizeof specs[0]))

static const option_table table = {
    .usage = "[--args-file PATH] [--FLAG VALUE ...]",
    .description = "Trains a GPT model with Megatron-LM's flags. Flags may also come from an args file\n"
                   "(one flag per line, '#' starts a comment); the command line overrides the file.\n",
    .specs = specs,
    .count = NUM_FLAGS,
};

/* what the cross-flag checks need: which flags were given, and where a message goes */
typedef struct check_state {
    const unsigned char *given;
    char *err;
    size_t errlen;
} check_state;

static int given(const check_state *st, const char *name) {
    return options_given(&table, st->given, name);
}

/* the Llama family's options: Megatron's legacy position flags, grouped-query attention, RoPE */
static int validate_architecture(check_state *st, args *a) {
    if (a->use_rotary_position_embeddings) snprintf(a->position_embedding_type, sizeof a->position_embedding_type, "rope");
    int rope = strcmp(a->position_embedding_type, "rope") == 0;
    if (!strcmp(a->position_embedding_type, "relative")) {
        if (!a->t5)
            return error_format(st->err, st->errlen, "--position-embedding-type relative is T5's relative position bias (Megatron-Core's T5Model): run pretrain_t5 (%s trains %s, which take learned_absolute, rope or none)",
                                program_name, a->bert ? "BERT" : "decoder-only GPT and Llama models");
        const char *why_not = relative_position_check(a->relative_attention_num_buckets, a->relative_attention_max_distance);
        if (why_not)
            return error_format(st->err, st->errlen, "%s (given %d and %d)", why_not, a->relative_attention_num_buckets,
                                a->relative_attention_max_distance);
    }
    if (a->no_position_embedding && !rope)
        return error_format(st->err, st->errlen, "--no-position-embedding is deprecated, use --position-embedding-type (Megatron accepts it only with rope)");
    if (!a->group_query_attention) {
        if (given(st, "num-query-groups"))
            return error_format(st->err, st->errlen, "--num-query-groups needs --group-query-attention");
        a->num_query_groups = a->num_attention_heads;
    }
    if (a->num_query_groups > a->num_attention_heads || a->num_attention_heads % a->num_query_groups != 0)
        return error_format(st->err, st->errlen, "--num-attention-heads %d is not divisible by --num-query-groups %d",
                    a->num_attention_heads, a->num_query_groups);
    if (rope) {
        int rotary_dim = a->rotary_percent < 1.0f ? (int)((float)a->kv_channels * a->rotary_percent) : a->kv_channels;
        if (rotary_dim < 2 || rotary_dim % 2 != 0)
            return error_format(st->err, st->errlen, "rotary embeddings turn channel pairs: --kv-channels %d x --rotary-percent %g = %d channels is not an even number >= 2",
                        a->kv_channels, a->rotary_percent, rotary_dim);
    }
    /* Megatron's validate_args: no bias-GeLU fusion without linear biases; the MLP's GeLU is then
     * F.gelu (erf) rather than bias_gelu_impl (tanh). --use-checkpoint-args takes the checkpoint's. */
    if (!a->bias_gelu_fusion_from_checkpoint) a->bias_gelu_fusion = !a->no_bias_gelu_fusion && !a->disable_bias_linear;
    if (!rope && (a->use_rope_scaling || given(st, "rope-scaling-factor")))
        return error_format(st->err, st->errlen, "--use-rope-scaling and --rope-scaling-factor scale rotary frequencies: they need --position-embedding-type rope");
    if (given(st, "rope-scaling-factor") && !a->use_rope_scaling)
        return error_format(st->err, st->errlen, "--rope-scaling-factor needs --use-rope-scaling");
    gpt_config window;  /* --window-size and --window-attn-skip-freq, checked here, set in gpt_config_set_architecture */
    if (window_attention_configure(&window, a->window_size, a->window_attn_skip_freq, a->num_layers, NULL, 0, st->err,
                                   st->errlen))
        return -1;
    return 0;
}

/* mixture of experts: Megatron's checks (megatron/training/arguments.py) and what is not built
 * yet here, each with what to use instead */
static int validate_moe(check_state *st, args *a) {
    static const char *const moe_flags[] = {"moe-ffn-hidden-size", "moe-router-topk", "moe-router-score-function",
        "moe-router-pre-softmax", "moe-router-topk-scaling-factor", "moe-router-num-groups", "moe-router-group-topk",
        "moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-input-jitter-eps", "moe-expert-capacity-factor",
        "moe-token-drop-policy", "moe-pad-expert-input-to-capacity", "moe-grouped-gemm", "moe-layer-freq",
        "moe-shared-expert-intermediate-size", "moe-shared-expert-gate", "moe-shared-expert-overlap",
        "moe-router-enable-expert-bias", "moe-router-bias-update-rate", "moe-router-force-load-balancing",
        "moe-router-force-biased", "moe-apply-probs-on-input"};
    if (a->num_experts == 0) {
        if (a->expert_model_parallel_size > 1)
            return error_format(st->err, st->errlen, "--expert-model-parallel-size %d needs --num-experts (a mixture-of-experts model)",
                                a->expert_model_parallel_size);
        for (size_t i = 0; i < sizeof moe_flags / sizeof moe_flags[0]; i++)
            if (given(st, moe_flags[i]))
                return error_format(st->err, st->errlen, "--%s needs --num-experts (a mixture-of-experts model)", moe_flags[i]);
        if (a->expert_tensor_parallel_size > 0 && a->expert_tensor_parallel_size != a->tensor_model_parallel_size)
            return error_format(st->err, st->errlen, "--expert-tensor-parallel-size needs --num-experts");
        return 0;
    }
    if (!given(st, "moe-ffn-hidden-size")) a->moe_ffn_hidden_size = a->ffn_hidden_size;
    a->moe_router_force_biased_given = given(st, "moe-router-force-biased");
    if (a->moe_apply_probs_on_input && a->moe_router_topk != 1)
        return error_format(st->err, st->errlen, "--moe-apply-probs-on-input only works with --moe-router-topk 1 (Megatron), got %d",
                            a->moe_router_topk);
    /* Megatron's TransformerConfig checks of the grouped-tensor layout flags (no effect here) */
    if (given(st, "moe-use-grouped-tensor") && !a->moe_grouped_gemm)
        return error_format(st->err, st->errlen, "--moe-use-grouped-tensor needs --moe-grouped-gemm (as Megatron)");
    if (given(st, "moe-single-grouped-weight") && (!a->moe_grouped_gemm || !given(st, "moe-use-grouped-tensor")))
        return error_format(st->err, st->errlen, "--moe-single-grouped-weight needs --moe-grouped-gemm and --moe-use-grouped-tensor (as Megatron)");
    if (a->moe_router_topk > a->num_experts)
        return error_format(st->err, st->errlen, "--moe-router-topk %d exceeds --num-experts %d", a->moe_router_topk, a->num_experts);
    if (a->num_experts > 1024)
        return error_format(st->err, st->errlen, "--num-experts %d: at most 1024 experts per layer here", a->num_experts);
    if (!a->disable_bias_linear)
        return error_format(st->err, st->errlen, "--num-experts: the experts and router have no biases here; add --disable-bias-linear (as Megatron's MoE examples do)");
    if (a->moe_router_group_topk > 0 || a->moe_router_num_groups > 0) {
        if (a->moe_router_group_topk == 0 || a->moe_router_num_groups == 0)
            return error_format(st->err, st->errlen, "group-limited routing needs both --moe-router-num-groups and --moe-router-group-topk");
        if (a->num_experts % a->moe_router_num_groups != 0)
            return error_format(st->err, st->errlen, "--num-experts %d is not divisible by --moe-router-num-groups %d", a->num_experts, a->moe_router_num_groups);
        if (a->moe_router_group_topk > a->moe_router_num_groups || a->moe_router_topk % a->moe_router_group_topk != 0)
            return error_format(st->err, st->errlen, "--moe-router-group-topk %d must be at most --moe-router-num-groups %d and divide --moe-router-topk %d",
                                a->moe_router_group_topk, a->moe_router_num_groups, a->moe_router_topk);
        if (a->moe_router_topk / a->moe_router_group_topk > a->num_experts / a->moe_router_num_groups)
            return error_format(st->err, st->errlen, "--moe-router-topk %d / --moe-router-group-topk %d experts per group exceed the %d experts of a group",
                                a->moe_router_topk, a->moe_router_group_topk, a->num_experts / a->moe_router_num_groups);
    }
    const char *balance = a->moe_router_load_balancing_type;
    if (strchr(balance, ' '))
        return error_format(st->err, st->errlen, "--moe-router-load-balancing-type %s: one type at a time here (aux_loss, seq_aux_loss or none)", balance);
    if (strcmp(balance, "aux_loss") && strcmp(balance, "seq_aux_loss") && strcmp(balance, "none")) {
        if (!strcmp(balance, "sinkhorn") || !strcmp(balance, "global_aux_loss") || !strcmp(balance, "quantile_balancing"))
            return error_format(st->err, st->errlen, "--moe-router-load-balancing-type %s is not supported here yet; use aux_loss or seq_aux_loss (with --moe-aux-loss-coeff), or none", balance);
        return error_format(st->err, st->errlen, "--moe-router-load-balancing-type %s: expected aux_loss, seq_aux_loss or none", balance);
    }
    if (!strcmp(a->moe_router_dtype, "fp64"))
        return error_format(st->err, st->errlen, "--moe-router-dtype fp64 is not supported here; the router computes in fp32 (use fp32 or leave it out)");
    if (!strcmp(a->moe_token_dispatcher_type, "flex"))
        return error_format(st->err, st->errlen, "--moe-token-dispatcher-type flex (DeepEP) is not supported here; use alltoall or allgather");
    if (given(st, "moe-token-drop-policy") && a->moe_expert_capacity_factor == 0)
        return error_format(st->err, st->errlen, "--moe-token-drop-policy needs --moe-expert-capacity-factor (dropless routing drops nothing)");
    if (a->moe_pad_expert_input_to_capacity && a->moe_expert_capacity_factor == 0)
        return error_format(st->err, st->errlen, "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
    if (a->num_experts % a->expert_model_parallel_size != 0)
        return error_format(st->err, st->errlen, "--num-experts %d is not divisible by --expert-model-parallel-size %d",
                            a->num_experts, a->expert_model_parallel_size);
    int etp = a->expert_tensor_parallel_size > 0 ? a->expert_tensor_parallel_size : a->tensor_model_parallel_size;
    if (etp != a->tensor_model_parallel_size) {
        /* Megatron's expert rank generator with tp = etp: built here for etp dividing tp */
        int tp = a->tensor_model_parallel_size;
        if (etp > tp || tp % etp != 0)
            return error_format(st->err, st->errlen, "--expert-tensor-parallel-size %d does not divide --tensor-model-parallel-size %d: each expert is split over a divisor of the tensor-parallel ranks here (1, ..., %d; leave it out for %d)",
                                etp, tp, tp, tp);
        /* the ranks of an expert tensor-parallel group must be tensor-parallel ranks of one
         * group (they dispatch the same tokens): etp consecutive ordered ranks, tp's first */
        if (etp > 1 && strncmp(a->parallel_order, "tp-", 3) != 0)
            return error_format(st->err, st->errlen, "--expert-tensor-parallel-size %d (between 1 and --tensor-model-parallel-size %d) needs tp first in --parallel-order (as Megatron's supported orders have it); this run's is %s",
                                etp, tp, a->parallel_order);
        if (a->context_parallel_size > 1)
            return error_format(st->err, st->errlen, "--expert-tensor-parallel-size %d with --tensor-model-parallel-size %d is not built with --context-parallel-size %d yet (leave one out)",
                                etp, tp, a->context_parallel_size);
        if (!strcmp(a->non_persistent_ckpt_type, "local"))
            return error_format(st->err, st->errlen, "--expert-tensor-parallel-size %d with --tensor-model-parallel-size %d is not built with --non-persistent-ckpt-type local yet (use global, or leave one out)",
                                etp, tp);
        if (tp / etp * a->data_parallel_size % a->expert_model_parallel_size != 0)
            return error_format(st->err, st->errlen, "--expert-model-parallel-size %d does not divide --tensor-model-parallel-size %d / --expert-tensor-parallel-size %d x the data-parallel size %d: with an expert tensor-parallel size below the tensor-parallel size the expert-parallel ranks are tensor- and data-parallel ranks",
                                a->expert_model_parallel_size, tp, etp, a->data_parallel_size);
    } else if (a->data_parallel_size % a->expert_model_parallel_size != 0)
        return error_format(st->err, st->errlen, "--expert-model-parallel-size %d does not divide the data-parallel size %d (world %d / (tensor %d x pipeline %d)): expert-parallel ranks are data-parallel ranks",
                            a->expert_model_parallel_size, a->data_parallel_size, a->world_size,
                            a->tensor_model_parallel_size, a->pipeline_model_parallel_size);
    if (a->tensor_model_parallel_size > 1 && !a->sequence_parallel)
        return error_format(st->err, st->errlen, "a mixture of experts with --tensor-model-parallel-size %d needs --sequence-parallel (as Megatron requires)",
                            a->tensor_model_parallel_size);
    if (a->tp_comm_overlap)
        return error_format(st->err, st->errlen, "--tp-comm-overlap is not supported with --num-experts yet (leave it out)");
    if (a->moe_ffn_hidden_size % etp != 0)
        return error_format(st->err, st->errlen, "--moe-ffn-hidden-size %d is not divisible by %s %d", a->moe_ffn_hidden_size,
                            etp == a->tensor_model_parallel_size ? "--tensor-model-parallel-size" : "--expert-tensor-parallel-size", etp);
    /* shared experts (Megatron's TransformerConfig checks) */
    int shared = a->moe_shared_expert_intermediate_size > 0;
    if (!shared && (a->moe_shared_expert_gate || a->moe_shared_expert_overlap))
        return error_format(st->err, st->errlen, "--%s needs --moe-shared-expert-intermediate-size (shared experts)",
                            a->moe_shared_expert_gate ? "moe-shared-expert-gate" : "moe-shared-expert-overlap");
    if (shared && a->moe_shared_expert_intermediate_size % a->tensor_model_parallel_size != 0)
        return error_format(st->err, st->errlen, "--moe-shared-expert-intermediate-size %d is not divisible by --tensor-model-parallel-size %d",
                            a->moe_shared_expert_intermediate_size, a->tensor_model_parallel_size);
    if (a->moe_shared_expert_overlap && strcmp(a->moe_token_dispatcher_type, "alltoall") != 0)
        return error_format(st->err, st->errlen, "--moe-shared-expert-overlap only works with --moe-token-dispatcher-type alltoall (or flex) (as Megatron requires); this run's is %s",
                            a->moe_token_dispatcher_type);
    /* the expert bias: Megatron's TransformerConfig refuses it with softmax scores */
    if (a->moe_router_enable_expert_bias && strcmp(a->moe_router_score_function, "sigmoid") != 0 &&
        strcmp(a->moe_router_score_function, "sqrtsoftplus") != 0)
        return error_format(st->err, st->errlen, "--moe-router-enable-expert-bias only supports the sigmoid and sqrtsoftplus score functions (as Megatron); set --moe-router-score-function sigmoid or sqrtsoftplus, or leave the expert bias out");
    if (given(st, "moe-router-bias-update-rate") && !a->moe_router_enable_expert_bias)
        return error_format(st->err, st->errlen, "--moe-router-bias-update-rate needs --moe-router-enable-expert-bias");
    return moe_layer_pattern_parse(a->moe_layer_freq, a->num_layers, a->moe_layer, st->err, st->errlen);
}

/* context parallelism (Megatron's checks, and what is not built here) */
static int validate_context_parallel(check_state *st, args *a) {
    int cp = a->context_parallel_size;
    int types = 0, a2a = 0, hierarchical = 0;
    char copy[sizeof a->cp_comm_type];
    snprintf(copy, sizeof copy, "%s", a->cp_comm_type);
    for (char *save = NULL, *word = strtok_r(copy, " ", &save); word; word = strtok_r(NULL, " ", &save)) {
        types++;
        if (strcmp(word, "p2p") != 0 && strcmp(word, "allgather") != 0 && strcmp(word, "a2a") != 0 && strcmp(word, "a2a+p2p") != 0)
            return error_format(st->err, st->errlen, "--cp-comm-type '%s' is not a context-parallel communication type: p2p, allgather, a2a, a2a+p2p", word);
        a2a += !strcmp(word, "a2a");
        hierarchical += !strcmp(word, "a2a+p2p");
    }
    if (types != 1 && types != a->num_layers)
        return error_format(st->err, st->errlen, "--cp-comm-type gives %d types: give one for all layers or one per layer (--num-layers %d)",
                            types, a->num_layers);
    /* --hierarchical-context-parallel-sizes: Megatron asserts the product is the CP size, and
     * a2a+p2p needs the sizes; its a2a+p2p attention takes two levels */
    a->hierarchical_cp_sizes[0] = a->hierarchical_cp_sizes[1] = 0;
    if (a->hierarchical_context_parallel_sizes[0]) {
        int count = 0, product = 1;
        snprintf(copy, sizeof copy, "%s", a->hierarchical_context_parallel_sizes);
        for (char *save = NULL, *word = strtok_r(copy, " ", &save); word; word = strtok_r(NULL, " ", &save), count++) {
            char *end;
            long size = strtol(word, &end, 10);
            if (*end || size < 1 || size > 1 << 20)
                return error_format(st->err, st->errlen, "--hierarchical-context-parallel-sizes: '%s' is not a positive integer", word);
            if (count < 2) a->hierarchical_cp_sizes[count] = (int)size;
            product *= (int)size;
        }
        if (count != 2)
            return error_format(st->err, st->errlen, "--hierarchical-context-parallel-sizes gives %d sizes: give two, the a2a group's and the p2p ring's (--cp-comm-type a2a+p2p)", count);
        if (product != cp)
            return error_format(st->err, st->errlen, "--hierarchical-context-parallel-sizes %d x %d = %d is not --context-parallel-size %d",
                                a->hierarchical_cp_sizes[0], a->hierarchical_cp_sizes[1], product, cp);
        if (!hierarchical)
            return error_format(st->err, st->errlen, "--hierarchical-context-parallel-sizes is used by --cp-comm-type a2a+p2p only (here: %s)", a->cp_comm_type);
    }
    if (hierarchical && !a->hierarchical_context_parallel_sizes[0])
        return error_format(st->err, st->errlen, "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes (the a2a group's size and the p2p ring's)");
    int tp_heads = a->num_attention_heads / a->tensor_model_parallel_size, tp_groups = a->num_query_groups / a->tensor_model_parallel_size;
    if (hierarchical && (tp_heads % a->hierarchical_cp_sizes[0] != 0 || tp_groups % a->hierarchical_cp_sizes[0] != 0))
        return error_format(st->err, st->errlen, "--cp-comm-type a2a+p2p splits each tensor-parallel rank's heads over the a2a group: --num-attention-heads %d and the query groups %d divided by --tensor-model-parallel-size %d must be multiples of --hierarchical-context-parallel-sizes' first size %d",
                            a->num_attention_heads, a->num_query_groups, a->tensor_model_parallel_size, a->hierarchical_cp_sizes[0]);
    if (cp == 1) return 0;
    if (a->seq_length % (2 * cp) != 0)
        return error_format(st->err, st->errlen, "--seq-length %d is not a multiple of 2 x --context-parallel-size %d (= %d): each context-parallel rank holds 2 of the sequence's 2 x CP equal pieces",
                            a->seq_length, cp, 2 * cp);
    int tp = a->tensor_model_parallel_size;
    if (a2a && (a->num_attention_heads / tp % cp != 0 || a->num_query_groups / tp % cp != 0))
        return error_format(st->err, st->errlen, "--cp-comm-type a2a splits each tensor-parallel rank's heads over the context-parallel ranks: --num-attention-heads %d and the query groups %d divided by --tensor-model-parallel-size %d must be multiples of --context-parallel-size %d",
                            a->num_attention_heads, a->num_query_groups, tp, cp);
    if (a->num_experts > 0)
        return error_format(st->err, st->errlen, "--context-parallel-size %d with --num-experts is not supported here yet: use context parallelism with dense models, or --sequence-parallel with the experts", cp);
    if (a->num_layers > 1024 && types > 1)
        return error_format(st->err, st->errlen, "--cp-comm-type per layer is limited to 1024 layers here (--num-layers %d): give one type for all", a->num_layers);
    return 0;
}

/* check the parallel layout against the model shape; derive data-parallel size and virtual stages */
static int validate_parallel(check_state *st, args *a, int world_size) {
    int tp = a->tensor_model_parallel_size, pp = a->pipeline_model_parallel_size, cp = a->context_parallel_size;
    if (cp > 1 && world_size % (tp * pp * cp) != 0)
        return error_format(st->err, st->errlen, "world size %d is not divisible by --tensor-model-parallel-size %d x --pipeline-model-parallel-size %d x --context-parallel-size %d (= %d)",
                    world_size, tp, pp, cp, tp * pp * cp);
    if (world_size % (tp * pp) != 0)
        return error_format(st->err, st->errlen, "world size %d is not divisible by --tensor-model-parallel-size %d x --pipeline-model-parallel-size %d (= %d)",
                    world_size, tp, pp, tp * pp);
    a->data_parallel_size = world_size / (tp * pp * cp);
    if (validate_context_parallel(st, a)) return -1;
    if (a->num_attention_heads % tp != 0)
        return error_format(st->err, st->errlen, "--num-attention-heads %d is not divisible by --tensor-model-parallel-size %d",
                    a->num_attention_heads, tp);
    if (a->num_query_groups % tp != 0)
        return error_format(st->err, st->errlen, "--num-query-groups %d is not divisible by --tensor-model-parallel-size %d (tensor parallelism splits whole query groups)",
                    a->num_query_groups, tp);
    if (a->ffn_hidden_size % tp != 0)
        return error_format(st->err, st->errlen, "--ffn-hidden-size %d is not divisible by --tensor-model-parallel-size %d",
                    a->ffn_hidden_size, tp);
    if (a->num_layers % pp != 0)
        return error_format(st->err, st->errlen, "--num-layers %d is not divisible by --pipeline-model-parallel-size %d",
                    a->num_layers, pp);
    args_set_vocab_size(a, a->vocab_size);
    if (tp == 1) a->sequence_parallel = 0; /* as Megatron: nothing to shard */
    if (a->tp_comm_overlap && !a->sequence_parallel)
        return error_format(st->err, st->errlen, "--tp-comm-overlap needs --sequence-parallel (and --tensor-model-parallel-size > 1): it overlaps the sequence-parallel all-gathers and reduce-scatters with the GEMMs");
    if (a->sequence_parallel && a->seq_length % tp != 0)
        return error_format(st->err, st->errlen, "--seq-length %d is not divisible by --tensor-model-parallel-size %d (needed by --sequence-parallel)",
                    a->seq_length, tp);
    if (a->sequence_parallel && (a->seq_length / cp) % tp != 0)
        return error_format(st->err, st->errlen, "--seq-length %d / --context-parallel-size %d = %d tokens per rank is not divisible by --tensor-model-parallel-size %d (needed by --sequence-parallel)",
                    a->seq_length, cp, a->seq_length / cp, tp);

    int layers_per_stage = a->num_layers / pp;
    if (given(st, "num-layers-per-virtual-pipeline-stage") && given(st, "virtual-pipeline-model-parallel-size"))
        return error_format(st->err, st->errlen, "--num-layers-per-virtual-pipeline-stage and --virtual-pipeline-model-parallel-size cannot both be given");
    if (given(st, "num-layers-per-virtual-pipeline-stage")) {
        int per = a->num_layers_per_virtual_pipeline_stage;
        if (per <= 0 || layers_per_stage % per != 0)
            return error_format(st->err, st->errlen, "--num-layers-per-virtual-pipeline-stage %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        per, layers_per_stage, a->num_layers, pp);
        a->virtual_pipeline_model_parallel_size = layers_per_stage / per;
    } else if (given(st, "virtual-pipeline-model-parallel-size")) {
        int vp = a->virtual_pipeline_model_parallel_size;
        if (vp <= 0 || layers_per_stage % vp != 0)
            return error_format(st->err, st->errlen, "--virtual-pipeline-model-parallel-size %d does not divide the %d layers of each pipeline stage (--num-layers %d / --pipeline-model-parallel-size %d)",
                        vp, layers_per_stage, a->num_layers, pp);
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage / vp;
    } else {
        a->virtual_pipeline_model_parallel_size = 1;
        a->num_layers_per_virtual_pipeline_stage = layers_per_stage;
    }
    if (a->virtual_pipeline_model_parallel_size > 1 && pp == 1)
        return error_format(st->err, st->errlen, "the interleaved schedule (virtual pipeline stages) needs --pipeline-model-parallel-size > 1");

    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        return error_format(st->err, st->errlen, "--overlap-param-gather needs --use-distributed-optimizer");
    if (!given(st, "ddp-bucket-size")) {
        int64_t floor = (int64_t)1000000 * a->data_parallel_size;
        a->ddp_bucket_size = floor > 40000000 ? floor : 40000000;
    }

    /* the order must name each of tp, cp, ep, dp, pp once */
    const char *dims[] = {"tp", "cp", "ep", "dp", "pp"};
    char order[sizeof a->parallel_order];
    snprintf(order, sizeof order, "%s", a->parallel_order);
    int seen[5] = {0}, count = 0;
    for (char *save = NULL, *tok = strtok_r(order, "-", &save); tok; tok = strtok_r(NULL, "-", &save), count++) {
        int k = 0;
        while (k < 5 && strcmp(tok, dims[k]) != 0) k++;
        if (k == 5 || seen[k]++)
            return error_format(st->err, st->errlen, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    }
    if (count != 5)
        return error_format(st->err, st->errlen, "--parallel-order '%s' must list tp, cp, ep, dp and pp once each, separated by '-'", a->parallel_order);
    return 0;
}

/* Megatron's rules (arguments.py, TransformerConfig): --recompute-activations means selective;
 * selective takes no method and no layer count; full needs both */
/* Megatron's: --fp16 and --bf16 exclude each other; the dynamic scaler's asserts; with dynamic
 * loss scaling a NaN/Inf gradient is the scaler's signal, so the NaN check is turned off */
static int validate_fp16(check_state *st, args *a) {
    if (a->fp16 && a->bf16) return error_format(st->err, st->errlen, "--fp16 and --bf16 cannot both be given (Megatron's: one params dtype)");
    if (a->fp16 && a->loss_scale == 0 && a->min_loss_scale > a->initial_loss_scale)
        return error_format(st->err, st->errlen, "--min-loss-scale %g exceeds --initial-loss-scale %g", a->min_loss_scale, a->initial_loss_scale);
    if (a->fp16 && a->loss_scale == 0) a->check_for_nan_in_loss_and_grad = 0;
    return 0;
}

/* FP8 training (Megatron's TransformerConfig and arguments.py checks, and what is built here) */
static int validate_fp8(check_state *st, const args *a) {
    int fp8 = a->fp8_format[0] != 0;
    if (a->fp8_param_gather && !fp8)
        return error_format(st->err, st->errlen, "--fp8-param-gather needs --fp8-format (Megatron: fp8_param must be used together with fp8 mode)");
    if (!fp8) return 0;
    /* the fp8 path's switches (fp8_linear.h), checked on every rank before any reads them */
    const char *switches[] = {"MTC_FP8_NATIVE", "MTC_FP8_EMULATE", "MTC_FP8_EXPERTS_EMULATE"};
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) {
        const char *value = getenv(switches[i]);
        if (value && *value && strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
            return error_format(st->err, st->errlen, "%s=%s: expected 0 or 1", switches[i], value);
    }
    const char *recipe = a->fp8_recipe;
    if (!strcmp(recipe, "blockwise"))
        return error_format(st->err, st->errlen, "--fp8-recipe blockwise (TE's Float8BlockScaling) is not supported here: use --fp8-recipe tensorwise (per-tensor current scaling) or delayed");
    if (!strcmp(recipe, "mxfp8"))
        return error_format(st->err, st->errlen, "--fp8-recipe mxfp8 needs Blackwell's block-scaled fp8 GEMMs and is not supported here: use --fp8-recipe delayed or tensorwise");
    if (!strcmp(recipe, "custom"))
        return error_format(st->err, st->errlen, "--fp8-recipe custom (a Python quantizer factory) is not supported here: use --fp8-recipe delayed or tensorwise");
    if (strcmp(recipe, "delayed") != 0 && strcmp(recipe, "tensorwise") != 0)
        return error_format(st->err, st->errlen, "--fp8-recipe '%s' is not one of Megatron's recipes (tensorwise, delayed, mxfp8, blockwise, custom); supported here: delayed, tensorwise", recipe);
    if (!a->bf16)
        return error_format(st->err, st->errlen, "--fp8-format %s needs --bf16: fp8 training keeps bf16 parameters and fp32 master weights (as Megatron's fp8 runs)", a->fp8_format);
    if (a->first_last_layers_bf16 && !strcmp(recipe, "delayed"))
        return error_format(st->err, st->errlen, "--first-last-layers-bf16: Delayed scaling does not support first / last layer in BF16 (Megatron's); use --fp8-recipe tensorwise");
    int per_stage = a->num_layers / a->pipeline_model_parallel_size;
    if (a->first_last_layers_bf16) {
        const char *names[2] = {"num-layers-at-start-in-bf16", "num-layers-at-end-in-bf16"};
        int values[2] = {a->num_layers_at_start_in_bf16, a->num_layers_at_end_in_bf16};
        for (int i = 0; i < 2; i++)
            if (values[i] < 0 || values[i] > per_stage)
                return error_format(st->err, st->errlen, "--%s %d must be between 0 and the number of layers per pipeline stage (%d)",
                                    names[i], values[i], per_stage);
    }
    if (a->fp8_param_gather && !a->use_distributed_optimizer)
        return error_format(st->err, st->errlen, "--fp8-param-gather only supported with distributed optimizer (Megatron's; add --use-distributed-optimizer)");
    return 0;
}

/* --recompute-modules: each word one Megatron knows; the ones this program builds */
static int validate_recompute_modules(check_state *st, const args *a) {
    static const char *const absent[][2] = {
        {"mla_up_proj", "multi-latent attention"},
        {"gdn_norm_out", "GatedDeltaNet layers"}, {"gdp_in_proj", "GatedDeltaProduct layers"},
        {"gdp_qkv", "GatedDeltaProduct layers"}, {"mhc", "hyper-connections"}};
    char words[sizeof a->recompute_modules];
    snprintf(words, sizeof words, "%s", a->recompute_modules);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (!strcmp(w, "core_attn") || !strcmp(w, "layernorm")) continue;
        if (!strcmp(w, "moe_act") || !strcmp(w, "moe") || !strcmp(w, "shared_experts")) {
            if (a->t5)
                return error_format(st->err, st->errlen, "--recompute-modules %s: T5 (pretrain_t5) has no "
                                    "mixture-of-experts layers (its modules: core_attn layernorm)", w);
            if (a->num_experts == 0)
                return error_format(st->err, st->errlen, "--recompute-modules %s needs --num-experts (a mixture-of-experts model)", w);
            if (!strcmp(w, "moe_act") && !a->moe_grouped_gemm)
                return error_format(st->err, st->errlen, "--recompute-modules moe_act needs --moe-grouped-gemm (as Megatron)");
            if (!strcmp(w, "moe_act") && a->fp8_format[0] && !strcmp(a->fp8_recipe, "delayed"))
                return error_format(st->err, st->errlen, "--recompute-modules moe_act: delayed scaling does not support it "
                                    "with fp8 (Megatron's check); use --fp8-recipe tensorwise");
            if (!strcmp(w, "shared_experts") && a->moe_shared_expert_intermediate_size == 0)
                return error_format(st->err, st->errlen, "--recompute-modules shared_experts needs shared experts "
                                    "(--moe-shared-expert-intermediate-size)");
            if (!strcmp(w, "shared_experts") && a->moe_shared_expert_overlap)
                return error_format(st->err, st->errlen, "--recompute-modules shared_experts cannot work with --moe-shared-expert-overlap (Megatron)");
            if (strcmp(w, "moe_act") != 0 && a->fp8_format[0])
                return error_format(st->err, st->errlen, "--recompute-modules %s with --fp8-format is not built (the "
                                    "recomputed forward would record the experts' amax again); use --recompute-granularity "
                                    "full, or moe_act", w);
            continue;
        }
        if (!strcmp(w, "mlp"))
            return error_format(st->err, st->errlen, "--recompute-modules mlp (the whole dense MLP) is not supported: "
                                "--recompute-granularity full recomputes whole layers (and the MLP's activation is "
                                "computed again in the backward unless --keep-mlp-activation)");
        for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
            if (!strcmp(w, absent[i][0]))
                return error_format(st->err, st->errlen, "--recompute-modules %s needs %s, which this program does not build "
                                    "(supported: core_attn layernorm%s)", w, absent[i][1],
                                    a->t5 ? " with T5" : " moe_act moe shared_experts");
        return error_format(st->err, st->errlen, "--recompute-modules: unknown module '%s' (Megatron's choices: core_attn "
                            "layernorm mlp moe_act moe shared_experts mla_up_proj ...; supported here: core_attn layernorm moe_act moe shared_experts)", w);
    }
    if (a->memory_efficient_layer_norm && args_recompute_module(a, "layernorm"))
        return error_format(st->err, st->errlen, "--memory-efficient-layer-norm computes the norms' backward from their "
                            "kept outputs, which --recompute-modules layernorm drops (it keeps their inputs instead): "
                            "give one of the two");
    if (given(st, "recompute-modules") && strcmp(a->recompute_granularity, "selective") != 0)
        return error_format(st->err, st->errlen, "--recompute-modules %s needs --recompute-granularity selective (Megatron "
                            "reads the modules only then)", a->recompute_modules);
    return 0;
}

int args_recompute_module(const args *a, const char *module) {
    if (strcmp(a->recompute_granularity, "selective") != 0) return 0;
    char words[sizeof a->recompute_modules];
    snprintf(words, sizeof words, "%s", a->recompute_modules);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (!strcmp(w, module)) return 1;
    return 0;
}

static int validate_recompute(check_state *st, args *a) {
    if (a->recompute_activations) snprintf(a->recompute_granularity, sizeof a->recompute_granularity, "selective");
    if (a->moe_layer_recompute) {  /* Megatron's TransformerConfig: selective with "moe" added */
        if (!strcmp(a->recompute_granularity, "full"))
            return error_format(st->err, st->errlen, "Do not set --moe-layer-recompute with full recompute granularity (Megatron)");
        snprintf(a->recompute_granularity, sizeof a->recompute_granularity, "selective");
        if (!args_recompute_module(a, "moe")) {
            size_t used = strlen(a->recompute_modules);
            if (used + 4 >= sizeof a->recompute_modules)
                return error_format(st->err, st->errlen, "--recompute-modules: too long to add moe for --moe-layer-recompute");
            snprintf(a->recompute_modules + used, sizeof a->recompute_modules - used, "%smoe", used ? " " : "");
        }
    }
    if (validate_recompute_modules(st, a)) return -1;
    int layers_per_stage = a->num_layers / a->pipeline_model_parallel_size;
    if (!strcmp(a->recompute_granularity, "selective")) {
        if (a->recompute_method[0])
            return error_format(st->err, st->errlen, "--recompute-method %s is not supported with --recompute-granularity selective%s (Megatron: recompute method is not yet supported for selective recomputing granularity)",
                                a->recompute_method, a->recompute_activations ? " (which --recompute-activations sets)" : "");
        if (given(st, "recompute-num-layers"))
            return error_format(st->err, st->errlen, "--recompute-num-layers must not be given with --recompute-granularity selective%s",
                                a->recompute_activations ? " (which --recompute-activations sets)" : "");
    } else if (!strcmp(a->recompute_granularity, "full")) {
        if (!a->recompute_method[0])
            return error_format(st->err, st->errlen, "--recompute-granularity full needs --recompute-method uniform or block");
        if (!given(st, "recompute-num-layers"))
            return error_format(st->err, st->errlen, "--recompute-granularity full needs --recompute-num-layers between 1 and the layers per pipeline stage (%d)",
                                layers_per_stage);
    }
    return 0;
}

/* fill derived values and check the combinations (each value alone was checked against the
 * table); every message names the flags involved */
/* pretrain_bert's flags and limits (encoder mode), and its flags refused by pretrain_gpt */
/* the training iterations finetune_bert found for its data (args_set_task_train_iters); 0: not yet */
static int64_t task_train_iters;
void args_set_task_train_iters(int64_t iterations) { task_train_iters = iterations; }

/* finetune_bert's flags (Megatron's tasks/main.py), refused by the other programs; the data
 * come from --train-data / --valid-data, the iterations from --epochs */
static int validate_task(check_state *st, args *a) {
    static const char *const task_flags[] = {"task", "train-data", "valid-data", "pretrained-checkpoint", "epochs"};
    if (!a->bert_task) {
        for (size_t i = 0; i < sizeof task_flags / sizeof *task_flags; i++)
            if (given(st, task_flags[i]))
                return error_format(st->err, st->errlen, "--%s is a fine-tuning flag: run finetune_bert (Megatron's tasks/main.py)%s", task_flags[i],
                                    i == 3 ? "; to start from a checkpoint's weights here use --load DIR with --finetune" : "");
        return 0;
    }
    if (!a->task[0]) return error_format(st->err, st->errlen, "finetune_bert needs --task MNLI or RACE");
    if (strcmp(a->task, "MNLI") && strcmp(a->task, "RACE"))
        return error_format(st->err, st->errlen, "--task %s: finetune_bert runs MNLI or RACE", a->task);
    if (!a->train_data[0] || !a->valid_data[0])
        return error_format(st->err, st->errlen, "finetune_bert needs --train-data and --valid-data");
    if (!given(st, "epochs")) return error_format(st->err, st->errlen, "finetune_bert needs --epochs");
    static const char *const corpus_flags[] = {"data-path", "train-data-path", "valid-data-path", "test-data-path",
                                               "per-split-data-args-path", "mock-data", "train-iters", "train-samples",
                                               "rampup-batch-size", "bert-no-binary-head", "mask-prob", "short-seq-prob"};
    for (size_t i = 0; i < sizeof corpus_flags / sizeof *corpus_flags; i++)
        if (given(st, corpus_flags[i]))
            return error_format(st->err, st->errlen, "--%s: finetune_bert reads --train-data and --valid-data for --epochs epochs (Megatron's tasks/main.py)", corpus_flags[i]);
    if (a->load[0] && a->pretrained_checkpoint[0])
        return error_format(st->err, st->errlen, "finetune_bert: --load (resuming a fine-tuning run) with --pretrained-checkpoint is not supported yet: give one of them");
    a->train_iters = task_train_iters > 0 ? task_train_iters : 1;  /* 1: the first pass, before the data are read */
    a->eval_iters = 0;  /* the validation set's accuracy after each epoch instead of --eval-iters batches */
    if (a->pretrained_checkpoint[0]) {  /* Megatron: load the weights only, no optimizer, no RNG */
        snprintf(a->load, sizeof a->load, "%s", a->pretrained_checkpoint);
        a->finetune = 1;
    }
    return 0;
}

/* pretrain_t5's flags and limits (encoder-decoder mode), and its flags refused elsewhere;
 * --encoder-num-layers and --encoder-seq-length were folded into --num-layers and --seq-length */
static int validate_t5(check_state *st, args *a) {
    static const char *const t5_flags[] = {"encoder-num-layers", "decoder-num-layers", "encoder-seq-length",
                                           "decoder-seq-length", "vocab-extra-ids"};
    if (!a->t5) {
        for (size_t i = 0; i < sizeof t5_flags / sizeof *t5_flags; i++)
            if (given(st, t5_flags[i]))
                return error_format(st->err, st->errlen, "--%s is a T5 flag: run pretrain_t5 (%s trains %s)", t5_flags[i],
                                    program_name, a->bert ? "BERT" : "decoder-only GPT and Llama models");
        return 0;
    }
    if (!given(st, "decoder-seq-length"))
        return error_format(st->err, st->errlen, "pretrain_t5 needs --decoder-seq-length (the decoder's sequence length)");
    if (!given(st, "decoder-num-layers")) a->decoder_num_layers = a->num_layers;
    if (a->mock_data)
        return error_format(st->err, st->errlen, "--mock-data: pretrain_t5 reads a sentence-split WordPiece corpus (--data-path, from preprocess_data --split-sentences)");
    if (a->pipeline_model_parallel_size > 1)
        return error_format(st->err, st->errlen, "--pipeline-model-parallel-size %d: pipeline parallelism is not supported for T5 (Megatron's pretrain_t5.py refuses it too)",
                            a->pipeline_model_parallel_size);
    const char *refused = a->num_experts > 0 ? "--num-experts" : a->context_parallel_size > 1 ? "--context-parallel-size > 1"
                        : a->window_size[0] ? "--window-size"
                        : a->group_query_attention ? "--group-query-attention (Megatron-Core's CrossAttention refuses it)"
                        : a->fp8_format[0] ? "--fp8-format"
                        : a->tp_comm_overlap ? "--tp-comm-overlap" : a->memory_efficient_layer_norm ? "--memory-efficient-layer-norm"
                        : strcmp(a->position_embedding_type, "learned_absolute") && strcmp(a->position_embedding_type, "relative")
                            ? "--position-embedding-type other than learned_absolute and relative"
                        : a->print_sample[0] ? "--print-sample (for T5 samples use tests/tools/t5_samples)" : NULL;
    if (refused) return error_format(st->err, st->errlen, "pretrain_t5: %s is not supported with T5 here", refused);
    if (a->sequence_parallel && (a->micro_batch_size * a->decoder_seq_length) % a->tensor_model_parallel_size)
        return error_format(st->err, st->errlen, "--sequence-parallel: --micro-batch-size %d x --decoder-seq-length %d is not divisible by --tensor-model-parallel-size %d",
                            a->micro_batch_size, a->decoder_seq_length, a->tensor_model_parallel_size);
    return 0;
}

static int validate_bert(check_state *st, args *a) {
    static const char *const bert_flags[] = {"bert-no-binary-head", "mask-prob", "short-seq-prob"};
    if (validate_task(st, a)) return -1;
    if (validate_t5(st, a)) return -1;
    if (a->t5) return given(st, "bert-no-binary-head") ? error_format(st->err, st->errlen, "--bert-no-binary-head is a BERT flag: run pretrain_bert") : 0;
    if (!a->bert) {
        for (size_t i = 0; i < sizeof bert_flags / sizeof *bert_flags; i++)
            if (given(st, bert_flags[i]))
                return error_format(st->err, st->errlen, "--%s is a BERT flag: run pretrain_bert (%s trains decoder-only GPT and Llama models)",
                                    bert_flags[i], program_name);
        return 0;
    }
    if (a->bert_task) {
        if (a->num_experts > 0 || a->context_parallel_size > 1)
            return error_format(st->err, st->errlen, "finetune_bert: %s is not supported yet", a->num_experts > 0 ? "--num-experts" : "--context-parallel-size > 1");
    } else if (a->mock_data)
        return error_format(st->err, st->errlen, "--mock-data: pretrain_bert reads a sentence-split WordPiece corpus (--data-path, from preprocess_data --split-sentences); Megatron has no mock BERT data either");
    if (strcmp(a->tokenizer_type, "BertWordPieceLowerCase") && strcmp(a->tokenizer_type, "BertWordPieceCase"))
        return error_format(st->err, st->errlen, "--tokenizer-type %s: pretrain_bert needs a WordPiece vocabulary (--tokenizer-type BertWordPieceLowerCase or BertWordPieceCase with --vocab-file)",
                            a->tokenizer_type[0] ? a->tokenizer_type : "(none)");
    if (a->num_experts > 0 || a->context_parallel_size > 1)
        return error_format(st->err, st->errlen, "pretrain_bert: %s is not supported with BERT", a->num_experts > 0 ? "--num-experts" : "--context-parallel-size > 1");
    if (a->window_size[0])
        return error_format(st->err, st->errlen, "--window-size: BERT's bidirectional attention takes no sliding window here (GPT and Llama models only)");
    if (a->print_sample[0])
        return error_format(st->err, st->errlen, "--print-sample prints GPT token windows: for BERT samples use tests/tools/bert_samples");
    return 0;
}

static int validate(check_state *st, args *a, int world_size) {
    if (validate_bert(st, a)) return -1;
    int per_split = a->train_data_path[0] || a->valid_data_path[0] || a->test_data_path[0] || a->per_split_data_args_path[0];
    if (a->data_path[0] && per_split)
        return error_format(st->err, st->errlen, "--data-path cannot be combined with --train-data-path/--valid-data-path/--test-data-path/--per-split-data-args-path");
    if (a->per_split_data_args_path[0] && (a->train_data_path[0] || a->valid_data_path[0] || a->test_data_path[0]))
        return error_format(st->err, st->errlen, "--per-split-data-args-path cannot be combined with --train-data-path/--valid-data-path/--test-data-path");
    int real_data = a->data_path[0] || per_split || a->bert_task;  /* finetune_bert: --train-data */
    if (!a->mock_data && !real_data) return error_format(st->err, st->errlen, "no data source: pass --data-path PREFIX (or --mock-data)");
    if (a->mock_data && real_data) return error_format(st->err, st->errlen, "--mock-data and --data-path cannot both be given");
    if (a->print_sample[0] && !real_data) return error_format(st->err, st->errlen, "--print-sample needs --data-path (or the per-split data paths)");
    if (!a->bert_task && !given(st, "train-iters") && !given(st, "train-samples"))
        return error_format(st->err, st->errlen, "--train-iters is required (or --train-samples for sample-based training)");
    if (given(st, "train-iters") && given(st, "train-samples"))
        return error_format(st->err, st->errlen, "--train-iters and --train-samples cannot both be given");
    if (!a->train_samples && (given(st, "lr-warmup-samples") || given(st, "lr-decay-samples")))
        return error_format(st->err, st->errlen, "--lr-warmup-samples and --lr-decay-samples need --train-samples (sample-based training)");
    if (a->train_samples && (given(st, "lr-warmup-iters") || given(st, "lr-decay-iters")))
        return error_format(st->err, st->errlen, "--lr-warmup-iters and --lr-decay-iters need --train-iters; with --train-samples use --lr-warmup-samples and --lr-decay-samples");
    if (given(st, "decoupled-lr") && a->decoupled_lr < 0)
        return error_format(st->err, st->errlen, "--decoupled-lr %g is negative", a->decoupled_lr);
    if (given(st, "decoupled-min-lr") && (a->decoupled_min_lr < 0 || !given(st, "decoupled-lr")))
        return error_format(st->err, st->errlen, a->decoupled_min_lr < 0 ? "--decoupled-min-lr is negative"
                            : "--decoupled-min-lr needs --decoupled-lr (Megatron ignores it alone)");
    /* Megatron's GPT-3 example gives --vocab-file and --merge-file without a --tokenizer-type:
     * they name GPT-2's BPE */
    if (!a->tokenizer_type[0] && a->vocab_file[0] && a->merge_file[0])
        snprintf(a->tokenizer_type, sizeof a->tokenizer_type, "GPT2BPETokenizer");
    /* mock data with a tokenizer takes its vocabulary from the tokenizer, as Megatron
     * (pretrain_gpt pads it by --make-vocab-size-divisible-by x tp); alone, or with the
     * NullTokenizer, it needs the size */
    if (a->mock_data && !given(st, "vocab-size") && (!a->tokenizer_type[0] || !strcmp(a->tokenizer_type, "NullTokenizer")))
        return error_format(st->err, st->errlen, "--vocab-size is required with --mock-data%s (or give a tokenizer: "
                            "--tokenizer-type with its --vocab-file/--merge-file or --tokenizer-model)",
                            a->tokenizer_type[0] ? " and --tokenizer-type NullTokenizer" : "");
    if (real_data && !a->tokenizer_type[0] && !given(st, "vocab-size"))
        return error_format(st->err, st->errlen, "--data-path needs --tokenizer-type (with --vocab-file/--merge-file) or --vocab-size");
    if (!strcmp(a->tokenizer_type, "GPT2BPETokenizer") && (!a->vocab_file[0] || !a->merge_file[0]))
        return error_format(st->err, st->errlen, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (!strncmp(a->tokenizer_type, "BertWordPiece", 13) && !a->vocab_file[0])
        return error_format(st->err, st->errlen, "--tokenizer-type %s needs --vocab-file", a->tokenizer_type);
    if ((!strcmp(a->tokenizer_type, "HuggingFaceTokenizer") || strstr(a->tokenizer_type, "SentencePiece") ||
         !strcmp(a->tokenizer_type, "Llama2Tokenizer")) && !a->tokenizer_model[0])
        return error_format(st->err, st->errlen, "--tokenizer-type %s needs --tokenizer-model", a->tokenizer_type);

    /* flags whose other values are not supported: one message saying what works */
    if (strcmp(a->ckpt_format, "torch_dist") != 0)
        return error_format(st->err, st->errlen, "--ckpt-format %s is not supported here: checkpoints are parallel-HDF5 files that load into any layout (Megatron's torch_dist); use --ckpt-format torch_dist or leave it out, and app/convert_checkpoint for Hugging Face weights", a->ckpt_format);
    if (!a->tensorboard_dir[0]) {
        /* Megatron writes these only to a TensorBoard writer: without one they would do nothing */
        static const char *const needs_dir[] = {"tensorboard-log-interval", "log-validation-ppl-to-tensorboard",
            "log-memory-to-tensorboard", "log-world-size-to-tensorboard", "no-log-loss-scale-to-tensorboard",
            "no-log-learning-rate-to-tensorboard",
            "log-timers-to-tensorboard"};
        for (size_t i = 0; i < sizeof needs_dir / sizeof needs_dir[0]; i++)
            if (given(st, needs_dir[i]))
                return error_format(st->err, st->errlen, "--%s writes TensorBoard scalars: it needs --tensorboard-dir DIR", needs_dir[i]);
    }
    if (a->profile && a->profile_step_end <= a->profile_step_start)
        return error_format(st->err, st->errlen, "--profile-step-end %d must be greater than --profile-step-start %d", a->profile_step_end, a->profile_step_start);
    for (const char *r = a->profile_ranks; *r;) {
        char *end;
        long rank = strtol(r, &end, 10);
        if (end == r || rank < 0 || (*end && *end != ' '))
            return error_format(st->err, st->errlen, "--profile-ranks: '%s' is not a list of non-negative ranks", a->profile_ranks);
        r = *end ? end + 1 : end;
    }

    if (a->save_interval > 0 && !a->save[0]) return error_format(st->err, st->errlen, "--save-interval needs --save DIR");
    if (a->exit_signal_handler && !a->save[0]) return error_format(st->err, st->errlen, "--exit-signal-handler needs --save DIR (where to save on the signal)");
    if ((a->finetune || a->no_load_optim || a->no_load_rng) && !a->load[0])
        return error_format(st->err, st->errlen, "--%s needs --load DIR", a->finetune ? "finetune" : a->no_load_optim ? "no-load-optim" : "no-load-rng");
    if (a->exit_on_missing_checkpoint && !a->load[0]) return error_format(st->err, st->errlen, "--exit-on-missing-checkpoint needs --load DIR");
    if (a->non_persistent_save_interval > 0 && !a->non_persistent_ckpt_type[0])
        return error_format(st->err, st->errlen, "--non-persistent-save-interval needs --non-persistent-ckpt-type global|local");
    if (!strcmp(a->non_persistent_ckpt_type, "local") && !a->non_persistent_local_ckpt_dir[0])
        return error_format(st->err, st->errlen, "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir DIR (Megatron: \"Tried to use local checkpointing without specifying --local-ckpt-dir!\")");
    if (!strcmp(a->non_persistent_ckpt_type, "local") && a->use_checkpoint_args)
        return error_format(st->err, st->errlen, "--use-checkpoint-args is not supported with --non-persistent-ckpt-type local (as in Megatron: all arguments must be known before the local checkpoints are looked at)");
    if (a->no_save_optim && !a->save[0]) return error_format(st->err, st->errlen, "--no-save-optim needs --save DIR");
    if (a->check_for_nan_in_loss_and_grad && a->no_check_for_nan_in_loss_and_grad)
        return error_format(st->err, st->errlen, "--check-for-nan-in-loss-and-grad and --no-check-for-nan-in-loss-and-grad cannot both be given");
    a->check_for_nan_in_loss_and_grad = !a->no_check_for_nan_in_loss_and_grad;
    if (validate_fp16(st, a)) return -1;
    if (a->override_opt_param_scheduler && a->use_checkpoint_opt_param_scheduler)
        return error_format(st->err, st->errlen, "--override-opt-param-scheduler and --use-checkpoint-opt_param-scheduler cannot both be given");
    if (a->use_checkpoint_opt_param_scheduler && !a->load[0])
        return error_format(st->err, st->errlen, "--use-checkpoint-opt_param-scheduler needs --load DIR");

    if (!given(st, "kv-channels")) {
        if (a->hidden_size % a->num_attention_heads != 0)
            return error_format(st->err, st->errlen, "--hidden-size %d is not divisible by --num-attention-heads %d (or give --kv-channels)",
                        a->hidden_size, a->num_attention_heads);
        a->kv_channels = a->hidden_size / a->num_attention_heads;
    }
    if (!given(st, "ffn-hidden-size"))  /* Megatron's: SwiGLU keeps about 8h^2 MLP weights */
        a->ffn_hidden_size = a->swiglu ? (int)(4.0 * a->hidden_size * 2 / 3 / 64) * 64 : 4 * a->hidden_size;
    if (a->ffn_hidden_size < 1)
        return error_format(st->err, st->errlen, "--swiglu with --hidden-size %d gives no MLP (default --ffn-hidden-size rounds 8h/3 down to 64): give --ffn-hidden-size",
                    a->hidden_size);
    if (validate_architecture(st, a)) return -1;
    if (!given(st, "max-position-embeddings")) a->max_position_embeddings = a->seq_length;
    if (a->seq_length > a->max_position_embeddings)
        return error_format(st->err, st->errlen, "--seq-length %d exceeds --max-position-embeddings %d", a->seq_length,
                    a->max_position_embeddings);
    if (a->t5 && a->decoder_seq_length > a->max_position_embeddings)
        return error_format(st->err, st->errlen, "--decoder-seq-length %d exceeds --max-position-embeddings %d", a->decoder_seq_length,
                            a->max_position_embeddings);

    if (a->lr_warmup_init > a->lr)
        return error_format(st->err, st->errlen, "--lr-warmup-init %g exceeds --lr %g (the warm-up rises from it to --lr)", a->lr_warmup_init, a->lr);
    if (a->min_lr < 0 || a->min_lr > a->lr)
        return error_format(st->err, st->errlen, "--min-lr %g must be between 0 and --lr %g", a->min_lr, a->lr);
    if (a->train_samples) {
        /* update_train_iters needs the global batch: the lr fields are filled after it */
    } else if (!given(st, "lr-decay-iters")) {
        a->lr_decay_iters = a->train_iters;
    }
    if (given(st, "lr-warmup-fraction") && given(st, "lr-warmup-iters"))
        return error_format(st->err, st->errlen, "--lr-warmup-fraction and --lr-warmup-iters cannot both be given");
    if (given(st, "lr-warmup-fraction") && given(st, "lr-warmup-samples"))
        return error_format(st->err, st->errlen, "--lr-warmup-fraction and --lr-warmup-samples cannot both be given");
    if (a->train_samples) {
        if (!given(st, "lr-decay-samples")) a->lr_decay_samples = a->train_samples;
        if (given(st, "lr-warmup-fraction"))
            a->lr_warmup_samples = (int64_t)(a->lr_warmup_fraction * (double)a->lr_decay_samples);
        if (a->lr_warmup_samples > a->lr_decay_samples)
            return error_format(st->err, st->errlen, "--lr-warmup-samples %lld exceeds --lr-decay-samples %lld",
                                (long long)a->lr_warmup_samples, (long long)a->lr_decay_samples);
    } else if (given(st, "lr-warmup-fraction"))
        a->lr_warmup_iters = (int64_t)(a->lr_warmup_fraction * (double)a->lr_decay_iters);
    if (!given(st, "lr-warmup-fraction")) a->lr_warmup_fraction = -1;
    if (!a->train_samples && a->lr_warmup_iters > a->lr_decay_iters)
        return error_format(st->err, st->errlen, "--lr-warmup-iters %lld exceeds --lr-decay-iters %lld",
                    (long long)a->lr_warmup_iters, (long long)a->lr_decay_iters);

    a->world_size = world_size;
    if (validate_parallel(st, a, world_size)) return -1;
    if (validate_moe(st, a)) return -1;
    if (validate_fp8(st, a)) return -1;
    if (validate_recompute(st, a)) return -1;
    int per_step = a->micro_batch_size * a->data_parallel_size;
    if (!given(st, "global-batch-size")) a->global_batch_size = per_step;
    if (a->global_batch_size % per_step != 0)
        return error_format(st->err, st->errlen, "--global-batch-size %d is not a multiple of --micro-batch-size %d x data-parallel size %d (= %d)",
                    a->global_batch_size, a->micro_batch_size, a->data_parallel_size, per_step);
    a->num_micro_batches = a->global_batch_size / per_step;
    if (a->rampup_batch_size[0]) {
        long long v[3];
        char extra;
        if (sscanf(a->rampup_batch_size, "%lld %lld %lld %c", &v[0], &v[1], &v[2], &extra) != 3)
            return error_format(st->err, st->errlen, "--rampup-batch-size %s: expected the following format: "
                                "--rampup-batch-size <start batch size> <batch size incerement> <ramp-up samples>",
                                a->rampup_batch_size);
        if (!a->train_samples)
            return error_format(st->err, st->errlen, "--rampup-batch-size: expected no batch-size rampup for "
                                "iteration-based training (give --train-samples instead of --train-iters)");
        for (int i = 0; i < 3; i++) a->rampup[i] = v[i];
        a->has_rampup = 1;
    }
    microbatch_calculator calculator;
    char why[512];
    if (microbatches_init(&calculator, a->global_batch_size, a->micro_batch_size, a->data_parallel_size,
                          a->has_rampup ? a->rampup : NULL, why, sizeof why) != 0)
        return error_format(st->err, st->errlen, "--rampup-batch-size %s: %s", a->rampup_batch_size, why);
    if (a->train_samples) {
        /* Megatron's update_train_iters (with the ramp-up: its iterations, then constant batches) */
        a->train_iters = microbatches_train_iters(&calculator, a->train_samples);
        if (a->train_iters < 1)
            return error_format(st->err, st->errlen, "--train-samples %lld is less than one global batch (%d)",
                                (long long)a->train_samples, a->global_batch_size);
    }
    if (a->virtual_pipeline_model_parallel_size > 1 && a->num_micro_batches % a->pipeline_model_parallel_size != 0)
        return error_format(st->err, st->errlen, "the interleaved schedule needs the number of micro-batches (%d = --global-batch-size %d / (--micro-batch-size %d x data-parallel size %d)) to be a multiple of --pipeline-model-parallel-size %d",
                    a->num_micro_batches, a->global_batch_size, a->micro_batch_size, a->data_parallel_size,
                    a->pipeline_model_parallel_size);

#ifndef HAVE_CUDA
    if (strcmp(a->device, "cuda") == 0)
        return error_format(st->err, st->errlen, "--device cuda: this build has no CUDA backend (configure found no CUDA toolkit); use --device cpu");
#endif
    return 0;
}

void gpt_config_set_architecture(gpt_config *c, const args *a) {
    c->position_embedding_type = !strcmp(a->position_embedding_type, "rope") ? POSITION_ROPE
                               : !strcmp(a->position_embedding_type, "none") ? POSITION_NONE
                               : !strcmp(a->position_embedding_type, "relative") ? POSITION_RELATIVE
                               : POSITION_LEARNED_ABSOLUTE;
    c->relative_attention_num_buckets = a->relative_attention_num_buckets;
    c->relative_attention_max_distance = a->relative_attention_max_distance;
    c->rotary_base = (float)a->rotary_base;
    c->rotary_percent = a->rotary_percent;
    c->rotary_interleaved = a->rotary_interleaved;
    c->rotary_seq_len_interpolation_factor = (float)a->rotary_seq_len_interpolation_factor;
    c->rope_scaling_factor = a->use_rope_scaling ? a->rope_scaling_factor : 0.0f;
    c->apply_layernorm_1p = a->apply_layernorm_1p;
    c->rmsnorm = !strcmp(a->normalization, "RMSNorm");
    c->swiglu = a->swiglu;
    c->gelu_erf = !a->swiglu && !a->bias_gelu_fusion;
    c->num_query_groups = a->num_query_groups;
    c->disable_bias_linear = a->disable_bias_linear;
    c->add_qkv_bias = a->add_qkv_bias;
    c->num_experts = a->num_experts;
    c->moe_ffn_hidden_size = a->moe_ffn_hidden_size;
    memcpy(c->moe_layer, a->moe_layer, sizeof c->moe_layer);
    char err[512];
    if (window_attention_configure(c, a->window_size, a->window_attn_skip_freq, a->num_layers, NULL, 0, err, sizeof err))
        FATAL("%s (validated flags)", err);
    moe_router_spec *r = &c->moe_router;
    memset(r, 0, sizeof *r);
    r->num_experts = a->num_experts;
    r->topk = a->moe_router_topk;
    r->score_function = !strcmp(a->moe_router_score_function, "sigmoid") ? MOE_SCORE_SIGMOID
                      : !strcmp(a->moe_router_score_function, "sqrtsoftplus") ? MOE_SCORE_SQRTSOFTPLUS : MOE_SCORE_SOFTMAX;
    r->pre_softmax = a->moe_router_pre_softmax;
    r->topk_scaling_factor = a->moe_router_topk_scaling_factor;
    r->num_groups = a->moe_router_num_groups;
    r->group_topk = a->moe_router_group_topk;
    r->capacity_factor = a->moe_expert_capacity_factor;
    r->drop_by_position = !strcmp(a->moe_token_drop_policy, "position");
    r->balancing = !strcmp(a->moe_router_load_balancing_type, "aux_loss") ? MOE_BALANCE_AUX_LOSS
                 : !strcmp(a->moe_router_load_balancing_type, "seq_aux_loss") ? MOE_BALANCE_SEQ_AUX_LOSS : MOE_BALANCE_NONE;
    r->aux_loss_coeff = a->moe_aux_loss_coeff;
    r->z_loss_coeff = a->moe_z_loss_coeff;
    r->seq_length = a->seq_length;
    c->moe_input_jitter_eps = a->moe_input_jitter_eps;
    c->moe_shared_expert_intermediate_size = a->num_experts ? a->moe_shared_expert_intermediate_size : 0;
    c->moe_shared_expert_gate = a->moe_shared_expert_gate;
    c->moe_shared_expert_overlap = a->num_experts && a->moe_shared_expert_overlap;
    c->moe_router_enable_expert_bias = a->moe_router_enable_expert_bias;
    c->moe_router_bias_update_rate = a->moe_router_bias_update_rate;
    c->moe_pad_expert_input_to_capacity = a->moe_pad_expert_input_to_capacity;
    c->moe_apply_probs_on_input = a->num_experts && a->moe_apply_probs_on_input;
    c->moe_router_force_random = a->num_experts && (a->moe_router_force_load_balancing || a->moe_router_force_biased_given);
    c->moe_router_force_biased_given = a->num_experts && a->moe_router_force_biased_given;
    c->moe_router_force_biased = a->moe_router_force_biased;
    gpt_fp8_config *f = &c->fp8;
    memset(f, 0, sizeof *f);
    f->enabled = a->fp8_format[0] != 0;
    f->hybrid = !strcmp(a->fp8_format, "hybrid");
    f->recipe = !strcmp(a->fp8_recipe, "tensorwise") ? FP8_RECIPE_TENSORWISE : FP8_RECIPE_DELAYED;
    f->margin = a->fp8_margin;
    f->amax_history_len = a->fp8_amax_history_len > 0 ? a->fp8_amax_history_len : 1;
    fp8_amax_compute_algo algo = FP8_AMAX_MOST_RECENT;
    if (a->fp8_amax_compute_algo[0] && fp8_amax_compute_algo_parse(a->fp8_amax_compute_algo, &algo) != 0)
        algo = FP8_AMAX_MOST_RECENT; /* the option's choices admit no other name */
    f->amax_compute_algo = (int)algo;
    f->wgrad = !a->no_fp8_wgrad;
    f->layers_at_start_in_bf16 = a->first_last_layers_bf16 ? a->num_layers_at_start_in_bf16 : 0;
    f->layers_at_end_in_bf16 = a->first_last_layers_bf16 ? a->num_layers_at_end_in_bf16 : 0;
}

void args_set_vocab_size(args *a, int vocab_size) {
    int multiple = a->make_vocab_size_divisible_by * a->tensor_model_parallel_size;
    a->vocab_size = vocab_size;
    a->padded_vocab_size = (vocab_size + multiple - 1) / multiple * multiple;
}

/* Megatron's validate_args for T5: --encoder-num-layers is --num-layers and
 * --encoder-seq-length is --seq-length (one of each pair, not both) */
static int t5_fold_encoder_flags(args *a, unsigned char *flags_given, char *err, size_t errlen) {
    static const char *const pairs[2][2] = {{"num-layers", "encoder-num-layers"}, {"seq-length", "encoder-seq-length"}};
    int *values[2][2] = {{&a->num_layers, &a->encoder_num_layers}, {&a->seq_length, &a->encoder_seq_length}};
    for (int i = 0; i < 2; i++) {
        int plain = options_given(&table, flags_given, pairs[i][0]), encoder = options_given(&table, flags_given, pairs[i][1]);
        if (plain && encoder)
            return error_format(err, errlen, "cannot have both --%s and --%s (they mean the same for T5)", pairs[i][0], pairs[i][1]);
        if (encoder) {
            *values[i][0] = *values[i][1];
            for (int k = 0; k < NUM_FLAGS; k++)
                if (!strcmp(specs[k].name, pairs[i][0])) flags_given[k] = 1;
        }
        *values[i][1] = *values[i][0];
    }
    return 0;
}

/* --use-checkpoint-args reads and marks the flags given, by name */
static int flag_given(void *given, const char *flag) { return options_given(&table, given, flag); }
static void mark_given(void *given, const char *flag) {
    for (int i = 0; i < NUM_FLAGS; i++)
        if (!strcmp(specs[i].name, flag)) ((unsigned char *)given)[i] = 1;
}

int args_parse_checked(args *a, int argc, char **argv, int world_size, char *err, size_t errlen) {
    unsigned char flags_given[NUM_FLAGS];
    memset(a, 0, sizeof *a);
    int rc = options_parse_flags(&table, a, flags_given, argc, argv, err, errlen);
    a->bert_task = !strcmp(program_name, "finetune_bert");
    a->bert = !strcmp(program_name, "pretrain_bert") || a->bert_task;
    a->t5 = !strcmp(program_name, "pretrain_t5");
    /* pretrain_bert.py's and pretrain_t5.py's args_defaults */
    if ((a->bert || a->t5) && !options_given(&table, flags_given, "tokenizer-type"))
        snprintf(a->tokenizer_type, sizeof a->tokenizer_type, "BertWordPieceLowerCase");
    if (rc) return rc;
    if (a->t5 && t5_fold_encoder_flags(a, flags_given, err, errlen)) return -1;
    flag_marks marks = {flags_given, flag_given, mark_given};
    if (a->use_checkpoint_args && checkpoint_args_apply(a, &marks, err, errlen)) return -1;
    if (options_check_required(&table, flags_given, err, errlen)) return -1;
    a->vocab_size_flag = a->vocab_size;
    check_state st = {flags_given, err, errlen};
    options_no_effect_given(&table, flags_given, a->no_effect_flags, sizeof a->no_effect_flags);
    return validate(&st, a, world_size);
}

void args_parse(args *a, int argc, char **argv, int world_size) {
    char err[2048];
    int rc = args_parse_checked(a, argc, argv, world_size, err, sizeof err);
    if (rc == OPTIONS_HELP || rc == OPTIONS_HELP_FLAGS) {
        int rank;
        CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        if (rank == 0 && rc == OPTIONS_HELP) args_print_help();
        if (rank == 0 && rc == OPTIONS_HELP_FLAGS) options_print_flag_table(&table);
        MPI_Finalize();
        exit(0);
    }
    if (rc) user_error("%s", err);
}

void args_print(const args *a) {
    printf("------------------------ arguments ------------------------\n");
    for (int i = 0; i < NUM_FLAGS; i++) {
        if (specs[i].flags & (OPTION_NO_EFFECT | OPTION_REFUSED)) continue; /* no value kept */
        char value[ARGS_PATH_MAX + 8];
        options_format_value(&specs[i], a, value, sizeof value);
        char name[64];
        snprintf(name, sizeof name, "%s", specs[i].name);
        for (char *c = name; *c; c++) if (*c == '-') *c = '_';
        printf("  %s %.*s %s\n", name, (int)(48 - strlen(name)), "................................................", value);
    }
    printf("  %s %.*s %d\n", "data_parallel_size", 48 - 18, "................................................", a->data_parallel_size);
    printf("  %s %.*s %d\n", "padded_vocab_size", 48 - 17, "................................................", a->padded_vocab_size);
    printf("  %s %.*s %d\n", "num_micro_batches", 48 - 17, "................................................", a->num_micro_batches);
    printf("-------------------- end of arguments ---------------------\n");
    if (a->from_checkpoint[0])
        printf("> --use-checkpoint-args: %s%s\n", strncmp(a->from_checkpoint, "no checkpoint", 13) ? "from the checkpoint: " : "",
               a->from_checkpoint);
    if (a->no_effect_flags[0])
        printf("> accepted with no effect here (see --help): %s\n", a->no_effect_flags);
    if (a->bf16 && strcmp(a->device, "cpu") == 0)
        printf("> --bf16: the CPU backend computes in fp32 (the reference); bf16 runs on --device cuda\n");
    if (a->fp16 && strcmp(a->device, "cuda") == 0)
        printf("> --fp16: the CUDA kernels compute in fp16 with fp32 master weights and Megatron's %s loss scaler\n",
               a->loss_scale > 0 ? "constant" : "dynamic");
    else if (a->fp16)
        printf("> --fp16: the CPU backend computes in fp32 (the reference) with Megatron's %s loss scaler\n",
               a->loss_scale > 0 ? "constant" : "dynamic");
    if (a->fp16 && a->loss_scale == 0)
        printf("WARNING: Setting args.check_for_nan_in_loss_and_grad to False since dynamic loss scaling is being used\n");
    if (a->fp8_format[0]) {
        gpt_config c;
        memset(&c, 0, sizeof c);
        c.num_layers = a->num_layers;
        gpt_config_set_architecture(&c, a);
        char line[512];
        fp8_describe(&c, line, sizeof line);
        int cpu = strcmp(a->device, "cpu") == 0, native = fp8_native_requested(cpu);
        /* the experts' GEMMs as fp8 GEMMs where their widths allow (fp8_experts_native_shapes) */
        int etp = a->expert_tensor_parallel_size > 0 ? a->expert_tensor_parallel_size : a->tensor_model_parallel_size;
        int F = a->moe_ffn_hidden_size / (etp > 0 ? etp : 1), C = a->hidden_size;
        int fc1 = fp8_experts_native_shapes(C, a->swiglu ? 2 * F : F), fc2 = fp8_experts_native_shapes(F, C);
        const char *experts = c.num_experts == 0 ? ""
                              : fp8_experts_emulation_requested() ? ", the experts' emulated (MTC_FP8_EXPERTS_EMULATE=1)"
                              : fc1 && fc2 ? ", the experts' as one fp8 GEMM per expert"
                              : fc1 ? ", the experts' fc1 as one fp8 GEMM per expert, their fc2 emulated (its widths are "
                                      "not multiples of 16)"
                              : fc2 ? ", the experts' fc2 as one fp8 GEMM per expert, their fc1 emulated (its widths are "
                                      "not multiples of 16)"
                                    : ", the experts' emulated (their widths are not multiples of 16)";
        const char *gemms = cpu ? "fp8 GEMMs on codes (the CPU's reference of cuBLASLt's: MTC_FP8_NATIVE=1)"
                                : "cuBLASLt fp8 GEMMs";
        char path[320];
        snprintf(path, sizeof path, " (the GEMMs as %s%s)", gemms, experts);
        printf("> %s%s\n", line,
               native ? path : cpu ? " (emulated on the CPU backend)" : " (emulated: MTC_FP8_EMULATE=1)");
        if (a->fp8_param_gather)
            printf("> --fp8-param-gather: the distributed optimizer gathers the fp32 weights and the forward quantizes them with the weights' fp8 scales (the numbers of an fp8 gather)\n");
    }
    if (a->window_size[0]) {
        gpt_config c;
        char notice[256], err[512];
        if (window_attention_configure(&c, a->window_size, a->window_attn_skip_freq, a->num_layers, notice,
                                       sizeof notice, err, sizeof err) == 0 && notice[0])
            printf("%s\n", notice);
    }
    if (a->fp8_interval != 1)
        printf("WARNING: fp8_interval is deprecated and ignored from Transformer-Engine v1.8.0.\n");
    if (a->loss_scale > 0 && !a->fp16 && !a->bf16 && !a->use_distributed_optimizer)
        printf("> --loss-scale has no effect in fp32 without --use-distributed-optimizer (Megatron's FP32Optimizer has no grad scaler)\n");
}

void args_print_help(void) { options_print_help(&table); }

const option_table *args_option_table(void) { return &table; }

/* "--async-save" as a whole word of an args file (a line "--async-save", maybe among others) */
static int args_file_has_async_save(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char word[256];
    int found = 0;
    while (!found && fscanf(f, "%255s", word) == 1) {
        if (word[0] == '#') {   /* a comment: the rest of the line */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {}
            continue;
        }
        found = !strcmp(word, "--async-save");
    }
    fclose(f);
    return found;
}

int args_want_async_save(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--async-save")) return 1;
        if (!strcmp(argv[i], "--args-file") && i + 1 < argc && args_file_has_async_save(argv[i + 1])) return 1;
        if (!strncmp(argv[i], "--args-file=", 12) && args_file_has_async_save(argv[i] + 12)) return 1;
    }
    return 0;
}
