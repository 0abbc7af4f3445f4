# tests/local.mk: every test, registered in one place. Every test speaks TAP; tests/run.sh
# prints "N passed, N failed". Folders: unit/ (no MPI job: kernels, model, schedules, parsers),
# mpi/ (integration under mpiexec, tools included), gpu/ (skip with exit 77 without a GPU),
# slurm/ (a real slurmctld/slurmd on loopback), tools/ (helper programs the tests run).
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/autotools/aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/exit77.sh
# the CUDA compiler for tests/unit/wgmma_ptxas_test.sh: empty (the test skips) in a build without CUDA
if HAVE_CUDA
TESTS_NVCC = $(NVCC)
else
TESTS_NVCC =
endif
AM_TESTS_ENVIRONMENT = top_srcdir='$(top_srcdir)' top_builddir='$(top_builddir)' \
	MPIEXEC='$(MPIEXEC)' OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 NVCC='$(TESTS_NVCC)' CUDA_CFLAGS='$(CUDA_CFLAGS)' ; \
	export top_srcdir top_builddir MPIEXEC OPENBLAS_NUM_THREADS OMP_NUM_THREADS NVCC CUDA_CFLAGS ;
EXTRA_DIST += tests/tap.h tests/run.sh tests/lib.sh tests/exit77.sh tests/unit/model_fd.h

# ---- unit ----
check_PROGRAMS += tests/unit/kernels_grad_test tests/unit/gpt_model_test \
	tests/unit/parameter_table_test tests/unit/lr_schedule_test tests/unit/tokenizer_test \
	tests/unit/safetensors_test tests/unit/checkpoint_boxes_test tests/unit/checkpoint_format_test
tests_unit_kernels_grad_test_SOURCES = tests/unit/kernels_grad_test.c
tests_unit_kernels_grad_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
# the attention dropout's numbering (kernels/philox.h: a Philox4x32-7 call per 2 x 4 block, 16 bits each)
check_PROGRAMS += tests/unit/philox_attention_test
tests_unit_philox_attention_test_SOURCES = tests/unit/philox_attention_test.c
tests_unit_philox_attention_test_LDADD = -lm
TESTS += tests/unit/philox_attention_test
# the hidden dropout's numbering (kernels/philox.h: 16 bits per element, eight per Philox4x32-10 call)
check_PROGRAMS += tests/unit/hidden_dropout_rule_test
tests_unit_hidden_dropout_rule_test_SOURCES = tests/unit/hidden_dropout_rule_test.c
tests_unit_hidden_dropout_rule_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/unit/hidden_dropout_rule_test
# the GPU kernels' dropout draw (kernels/cuda/cuda_attention_dropout.cuh) on 32 host threads as
# the lanes of a warp (shuffles through a barrier), against the CPU's decisions: no GPU needed
check_PROGRAMS += tests/unit/attention_dropout_lanes_test
tests_unit_attention_dropout_lanes_test_SOURCES = tests/unit/attention_dropout_lanes_test.cc
tests_unit_attention_dropout_lanes_test_CXXFLAGS = -std=c++17 -pthread -Wall -Wextra -Wno-unknown-pragmas
tests_unit_attention_dropout_lanes_test_LDFLAGS = -pthread
TESTS += tests/unit/attention_dropout_lanes_test
check_PROGRAMS += tests/unit/attention_block_test
tests_unit_attention_block_test_SOURCES = tests/unit/attention_block_test.c
tests_unit_attention_block_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/unit/attention_block_test
# fp8 emulation (issue 43): E4M3/E5M2 codes, rounding, saturation, quantize ops, delayed scaling
check_PROGRAMS += tests/unit/fp8_format_test
tests_unit_fp8_format_test_SOURCES = tests/unit/fp8_format_test.c
tests_unit_fp8_format_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/unit/fp8_format_test
# the same rounding against the GPU's own fp8 conversion, all 2^32 fp32 patterns (skips without nvcc or a GPU)
TESTS += tests/gpu/fp8_format_gpu_test.sh
EXTRA_DIST += tests/gpu/fp8_format_gpu_check.cu
# issue 43: fp8 training emulated on the CPU backend (app/model/fp8_linear.h): the operands and
# scaling state against fp8_format.h by hand, then training runs
check_PROGRAMS += tests/unit/fp8_linear_test
tests_unit_fp8_linear_test_SOURCES = tests/unit/fp8_linear_test.c
tests_unit_fp8_linear_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/fp8_linear_test tests/mpi/fp8_training_test.sh tests/mpi/fp8_convergence_script_test.sh
# the fp8 GEMMs on codes (the CUDA path, the experts' too) on the CPU's reference of them (MTC_FP8_NATIVE=1)
TESTS += tests/mpi/fp8_native_cpu_test.sh
# the fp8 GEMMs keeping the norms' outputs as fp8 codes for the backward (CPU reference GEMMs)
TESTS += tests/mpi/fp8_kept_codes_test.sh
# BERT's heads (issue 46) against a double reference and finite differences
check_PROGRAMS += tests/unit/bert_heads_test
tests_unit_bert_heads_test_SOURCES = tests/unit/bert_heads_test.c
tests_unit_bert_heads_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/bert_heads_test
check_PROGRAMS += tests/unit/bert_task_head_test
tests_unit_bert_task_head_test_SOURCES = tests/unit/bert_task_head_test.c
tests_unit_bert_task_head_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/bert_task_head_test
# the BERT encoder mode of the model (issue 46): names, finite differences, padding, fitting a batch
# a micro-batch's token ids against the padded vocabulary (issue 46)
check_PROGRAMS += tests/unit/batch_check_test
tests_unit_batch_check_test_SOURCES = tests/unit/batch_check_test.c
tests_unit_batch_check_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/batch_check_test
check_PROGRAMS += tests/unit/bert_model_test
tests_unit_bert_model_test_SOURCES = tests/unit/bert_model_test.c
tests_unit_bert_model_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/bert_model_test
check_PROGRAMS += tests/unit/t5_model_test
tests_unit_t5_model_test_SOURCES = tests/unit/t5_model_test.c
tests_unit_t5_model_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/t5_model_test
check_PROGRAMS += tests/unit/t5_relative_test
tests_unit_t5_relative_test_SOURCES = tests/unit/t5_relative_test.c
tests_unit_t5_relative_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/t5_relative_test
tests_unit_gpt_model_test_SOURCES = tests/unit/gpt_model_test.c
tests_unit_gpt_model_test_LDADD = $(APP_LIBS)
tests_unit_parameter_table_test_SOURCES = tests/unit/parameter_table_test.c
tests_unit_parameter_table_test_LDADD = $(APP_LIBS)
tests_unit_lr_schedule_test_SOURCES = tests/unit/lr_schedule_test.c
tests_unit_lr_schedule_test_LDADD = $(APP_LIBS)
tests_unit_tokenizer_test_SOURCES = tests/unit/tokenizer_test.c
tests_unit_tokenizer_test_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_tokenizer_test_LDADD = $(APP_LIBS)
tests_unit_safetensors_test_SOURCES = tests/unit/safetensors_test.c
tests_unit_safetensors_test_LDADD = $(APP_LIBS)
check_PROGRAMS += tests/unit/pipeline_schedule_test tests/unit/rank_layout_test
tests_unit_pipeline_schedule_test_SOURCES = tests/unit/pipeline_schedule_test.c
tests_unit_pipeline_schedule_test_LDADD = $(APP_LIBS)
tests_unit_rank_layout_test_SOURCES = tests/unit/rank_layout_test.c
tests_unit_rank_layout_test_LDADD = $(APP_LIBS)
check_PROGRAMS += tests/unit/window_attention_args_test
tests_unit_window_attention_args_test_SOURCES = tests/unit/window_attention_args_test.c
tests_unit_window_attention_args_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/window_attention_args_test
tests_unit_checkpoint_boxes_test_SOURCES = tests/unit/checkpoint_boxes_test.c
tests_unit_checkpoint_boxes_test_LDADD = $(APP_LIBS)
tests_unit_checkpoint_format_test_SOURCES = tests/unit/checkpoint_format_test.c
tests_unit_checkpoint_format_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/kernels_grad_test tests/unit/gpt_model_test tests/unit/parameter_table_test \
	tests/unit/lr_schedule_test tests/unit/tokenizer_test tests/unit/safetensors_test \
	tests/unit/pipeline_schedule_test tests/unit/rank_layout_test tests/unit/checkpoint_boxes_test \
	tests/unit/checkpoint_format_test tests/unit/args_test.sh tests/unit/tools_args_test.sh \
	tests/unit/layering_test.sh tests/unit/fp16_map_test.sh tests/unit/wgmma_ptxas_test.sh

# the kernels' error path (kernels_fatal and the handler an application installs)
check_PROGRAMS += tests/unit/kernel_error_test
tests_unit_kernel_error_test_SOURCES = tests/unit/kernel_error_test.c
tests_unit_kernel_error_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/unit/kernel_error_test

# ---- tools the tests run ----
check_PROGRAMS += tests/tools/compare_params tests/tools/corpus_tool tests/tools/checkpoint_vs_dump \
	tests/tools/h5_set_attribute tests/tools/make_hf_fixture tests/tools/model_logits tests/tools/bert_logits
tests_tools_compare_params_SOURCES = tests/tools/compare_params.c
tests_tools_compare_params_LDADD = -lm
tests_tools_corpus_tool_SOURCES = tests/tools/corpus_tool.c
tests_tools_corpus_tool_LDADD = $(APP_LIBS)
tests_tools_checkpoint_vs_dump_SOURCES = tests/tools/checkpoint_vs_dump.c
tests_tools_checkpoint_vs_dump_LDADD = $(HDF5_LIBS)
tests_tools_h5_set_attribute_SOURCES = tests/tools/h5_set_attribute.c
tests_tools_h5_set_attribute_LDADD = $(HDF5_LIBS)
tests_tools_make_hf_fixture_SOURCES = tests/tools/make_hf_fixture.c
tests_tools_make_hf_fixture_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_tools_make_hf_fixture_LDADD = $(APP_LIBS)
tests_tools_model_logits_SOURCES = tests/tools/model_logits.c
tests_tools_model_logits_LDADD = $(APP_LIBS)
tests_tools_bert_logits_SOURCES = tests/tools/bert_logits.c
tests_tools_bert_logits_LDADD = $(APP_LIBS)
check_PROGRAMS += tests/tools/t5_logits
tests_tools_t5_logits_SOURCES = tests/tools/t5_logits.c
tests_tools_t5_logits_LDADD = $(APP_LIBS)
check_PROGRAMS += tests/tools/bert_samples tests/tools/task_samples
tests_tools_task_samples_SOURCES = tests/tools/task_samples.c
tests_tools_task_samples_LDADD = $(APP_LIBS)
tests_tools_bert_samples_SOURCES = tests/tools/bert_samples.c
tests_tools_bert_samples_LDADD = $(APP_LIBS)
check_PROGRAMS += tests/tools/t5_samples
tests_tools_t5_samples_SOURCES = tests/tools/t5_samples.c
tests_tools_t5_samples_LDADD = $(APP_LIBS)

# ---- MPI integration ----
check_PROGRAMS += tests/mpi/dataset_test tests/mpi/tensor_parallel_test tests/mpi/expert_comm_test
tests_mpi_expert_comm_test_SOURCES = tests/mpi/expert_comm_test.c
tests_mpi_expert_comm_test_LDADD = $(APP_LIBS)
tests_mpi_dataset_test_SOURCES = tests/mpi/dataset_test.c
tests_mpi_dataset_test_LDADD = $(APP_LIBS)
tests_mpi_tensor_parallel_test_SOURCES = tests/mpi/tensor_parallel_test.c
tests_mpi_tensor_parallel_test_LDADD = $(APP_LIBS)
TESTS += tests/mpi/train_test.sh tests/mpi/parallel_test.sh tests/mpi/train_data_test.sh \
	tests/mpi/checkpoint_test.sh tests/mpi/dataset_test.sh tests/mpi/preprocess_test.sh \
	tests/mpi/convert_checkpoint_test.sh tests/mpi/tensor_parallel_test.sh tests/mpi/tp_comm_overlap_test.sh tests/mpi/grad_first_write_test.sh

# the Llama family (RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases) on every layout
TESTS += tests/mpi/llama_parallel_test.sh
TESTS += tests/mpi/cp_parallel_test.sh
TESTS += tests/mpi/cp_hierarchical_test.sh
TESTS += tests/mpi/window_attention_test.sh
TESTS += tests/mpi/moe_parallel_test.sh
# resilience (issue 45): asynchronous saves
TESTS += tests/mpi/async_save_test.sh
TESTS += tests/mpi/local_checkpoint_test.sh
TESTS += tests/mpi/restart_test.sh
# --deterministic-mode: the same bits at data-parallel sizes 1, 2, 4, 8
TESTS += tests/mpi/dp_bitwise_test.sh
TESTS += tests/mpi/moe_test.sh
TESTS += tests/mpi/expert_comm_test.sh
TESTS += tests/mpi/mixtral_script_test.sh
EXTRA_DIST += tests/mpi/parallel_compare.sh tests/mpi/fp8_corpus.sh

# a failure inside the kernels ends the whole job through the application's handler
TESTS += tests/mpi/fatal_error_test.sh

# the scaling-study driver: small weak/strong studies on the CPU backend, render, collect, report
TESTS += tests/mpi/harness_test.sh
# its plots: each kind of study in its own kind of plot (made-up records, no MPI, a few seconds);
# it reads the default plot of every study
TESTS += tests/unit/harness_plots_test.sh tests/unit/harness_papi_test.sh
EXTRA_DIST += $(wildcard $(srcdir)/perf/studies/*.study)
EXTRA_DIST += perf/harness perf/perf_record.py perf/studies/strong-cpu.study perf/studies/weak-cpu.study \
	perf/studies/strong-gpt-1.3b.study perf/studies/weak-gpt3.study

# ---- GPU (each skips with exit 77 where there is no GPU) ----
if HAVE_CUDA
check_PROGRAMS += tests/gpu/cuda_kernels_test tests/gpu/cuda_attention_test
tests_gpu_cuda_kernels_test_SOURCES = tests/gpu/cuda_kernels_test.c tests/gpu/cuda_test_util.h
tests_gpu_cuda_kernels_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_kernels_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_attention_test_SOURCES = tests/gpu/cuda_attention_test.c tests/gpu/cuda_test_util.h tests/gpu/attention_test_util.h
tests_gpu_cuda_attention_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_attention_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_kernels_test tests/gpu/cuda_attention_test
# the mixture-of-experts kernels against the CPU's (bf16, and fp16 with -DTEST_FP16)
check_PROGRAMS += tests/gpu/cuda_moe_test tests/gpu/cuda_moe_fp16_test
tests_gpu_cuda_moe_test_SOURCES = tests/gpu/cuda_moe_test.c tests/gpu/cuda_test_util.h
tests_gpu_cuda_moe_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_moe_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_moe_fp16_test_SOURCES = tests/gpu/cuda_moe_test.c tests/gpu/cuda_test_util.h tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_moe_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_moe_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_moe_test tests/gpu/cuda_moe_fp16_test
check_PROGRAMS += tests/gpu/cuda_fp8_test
tests_gpu_cuda_fp8_test_SOURCES = tests/gpu/cuda_fp8_test.c tests/gpu/cuda_test_util.h
tests_gpu_cuda_fp8_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_fp8_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_fp8_test
# context parallelism's ring-attention kernels against the CPU's (bf16, and fp16 with -DTEST_FP16)
check_PROGRAMS += tests/gpu/cuda_attention_block_test tests/gpu/cuda_attention_block_fp16_test
tests_gpu_cuda_attention_block_test_SOURCES = tests/gpu/cuda_attention_block_test.c tests/gpu/cuda_test_util.h
tests_gpu_cuda_attention_block_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_attention_block_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_attention_block_fp16_test_SOURCES = tests/gpu/cuda_attention_block_test.c tests/gpu/cuda_test_util.h \
	tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_attention_block_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_attention_block_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_attention_block_test tests/gpu/cuda_attention_block_fp16_test
# BERT's kernels (padded bidirectional attention, exact GeLU, tanh) against the CPU, bf16 and fp16
check_PROGRAMS += tests/gpu/cuda_bert_kernels_test tests/gpu/cuda_bert_kernels_fp16_test
tests_gpu_cuda_bert_kernels_test_SOURCES = tests/gpu/cuda_bert_kernels_test.c tests/gpu/cuda_test_util.h tests/gpu/attention_test_util.h
tests_gpu_cuda_bert_kernels_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_bert_kernels_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_bert_kernels_fp16_test_SOURCES = tests/gpu/cuda_bert_kernels_test.c tests/gpu/cuda_test_util.h \
	tests/gpu/attention_test_util.h tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_bert_kernels_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_bert_kernels_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_bert_kernels_test tests/gpu/cuda_bert_kernels_fp16_test
# T5's cross-attention kernels against the CPU, bf16 and fp16
check_PROGRAMS += tests/gpu/cuda_t5_kernels_test tests/gpu/cuda_t5_kernels_fp16_test
tests_gpu_cuda_t5_kernels_test_SOURCES = tests/gpu/cuda_t5_kernels_test.c tests/gpu/cuda_test_util.h tests/gpu/attention_test_util.h
tests_gpu_cuda_t5_kernels_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_t5_kernels_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_t5_kernels_fp16_test_SOURCES = tests/gpu/cuda_t5_kernels_test.c tests/gpu/cuda_test_util.h \
	tests/gpu/attention_test_util.h tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_t5_kernels_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_t5_kernels_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_t5_kernels_test tests/gpu/cuda_t5_kernels_fp16_test
endif
TESTS += tests/gpu/gpu_train_test.sh tests/gpu/gpu_checkpoint_test.sh tests/gpu/gpu_moe_test.sh tests/gpu/gpu_cp_test.sh \
	tests/gpu/gpu_fp8_test.sh tests/gpu/gpu_bert_test.sh tests/gpu/gpu_t5_test.sh tests/gpu/gpu_encoder_scripts_test.sh
# --deterministic-mode bitwise across data-parallel sizes on GPUs (app/optim/fixed_tree_reduce.h)
TESTS += tests/gpu/gpu_dp_bitwise_test.sh

# ---- Slurm (a real slurmctld/slurmd/munge on loopback) ----
TESTS += tests/slurm/slurm_test.sh tests/slurm/restart_slurm_test.sh
EXTRA_DIST += tests/slurm/cluster.sh

# scripts and data the tests read
EXTRA_DIST += $(filter %.sh,$(TESTS)) tests/gpu/cuda_kernels_test.c tests/gpu/cuda_attention_test.c tests/gpu/cuda_moe_test.c \
	tests/gpu/cuda_attention_block_test.c tests/gpu/cuda_fp8_test.c tests/gpu/cuda_bert_kernels_test.c \
	tests/gpu/cuda_t5_kernels_test.c \
	tests/gpu/cuda_test_util.h tests/data/gpt2_encode_vectors.jsonl tests/data/wordpiece-vocab.txt \
	configs/tokenizers/gpt2/vocab.json configs/tokenizers/gpt2/merges.txt \
	configs/tokenizers/gpt2/LICENSE configs/data/tinyshakespeare.txt \
	io/CORPUS_FORMAT.md perf/preprocess_bench.sh perf/checkpoint_bench.sh perf/hf_logits_check.py \
	tests/tools/check_layering.py
# the documents: every relative link and every perf/results path they name exists (issue 47)
TESTS += tests/unit/doc_links_test.sh
EXTRA_DIST += tests/tools/check_doc_links.py

# FLOPs (MFU/HFU), the GPU peak table, PAPI counters per phase (perf/metrics)
check_PROGRAMS += tests/unit/flops_test
tests_unit_flops_test_SOURCES = tests/unit/flops_test.c
tests_unit_flops_test_LDADD = perf/metrics/libperfmetrics.a app/core/libcore.a $(PAPI_LIBS) -lm
TESTS += tests/unit/flops_test tests/mpi/papi_test.sh
# pretrain_bert and pretrain_t5 log their own FLOP counts (MFU, HFU), not GPT's
TESTS += tests/mpi/encoder_flops_test.sh
check_PROGRAMS += tests/unit/train_log_test
tests_unit_train_log_test_SOURCES = tests/unit/train_log_test.c
tests_unit_train_log_test_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_train_log_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/train_log_test
# the cluster acceptance suite's CPU variant (perf/accept/accept --machine cpu --quick)
TESTS += tests/mpi/accept_test.sh
EXTRA_DIST += tests/mpi/accept_test.sh

# ---- text generation, the REST server and zero-shot evaluation (app/inference) ----
check_PROGRAMS += tests/tools/gpt_forward_reference tests/unit/detokenizer_test tests/unit/sampling_test
tests_tools_gpt_forward_reference_SOURCES = tests/tools/gpt_forward_reference.c
tests_tools_gpt_forward_reference_LDADD = $(APP_LIBS)
tests_unit_detokenizer_test_SOURCES = tests/unit/detokenizer_test.c
tests_unit_detokenizer_test_LDADD = $(APP_LIBS)
tests_unit_sampling_test_SOURCES = tests/unit/sampling_test.c
tests_unit_sampling_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/detokenizer_test tests/unit/sampling_test tests/mpi/text_generation_test.sh
# Megatron-LM's inference, evaluation and conversion scripts' flags on the tools (issue 47)
TESTS += tests/mpi/megatron_tools_test.sh
EXTRA_DIST += perf/generation_vs_hf.sh perf/generation_vs_hf.py
if HAVE_CUDA
check_PROGRAMS += tests/gpu/cuda_decode_attention_test
tests_gpu_cuda_decode_attention_test_SOURCES = tests/gpu/cuda_decode_attention_test.c tests/gpu/cuda_test_util.h
tests_gpu_cuda_decode_attention_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_gpu_cuda_decode_attention_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_decode_attention_test
endif
EXTRA_DIST += tests/gpu/cuda_decode_attention_test.c

# ---- fp16 on the CUDA backend (--fp16): the three kernel tests above built again with
# -DTEST_FP16 (tests/gpu/cuda_fp16_map.h maps every bf16 entry point to its fp16 twin and the
# host rounding to IEEE half), and training with --fp16 on one and two GPUs ----
if HAVE_CUDA
check_PROGRAMS += tests/gpu/cuda_kernels_fp16_test tests/gpu/cuda_attention_fp16_test \
	tests/gpu/cuda_decode_attention_fp16_test
tests_gpu_cuda_kernels_fp16_test_SOURCES = tests/gpu/cuda_kernels_test.c tests/gpu/cuda_test_util.h \
	tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_kernels_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_kernels_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_attention_fp16_test_SOURCES = tests/gpu/cuda_attention_test.c tests/gpu/cuda_test_util.h tests/gpu/attention_test_util.h \
	tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_attention_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_attention_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_gpu_cuda_decode_attention_fp16_test_SOURCES = tests/gpu/cuda_decode_attention_test.c \
	tests/gpu/cuda_test_util.h tests/gpu/cuda_fp16_map.h
tests_gpu_cuda_decode_attention_fp16_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -DTEST_FP16
tests_gpu_cuda_decode_attention_fp16_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/gpu/cuda_kernels_fp16_test tests/gpu/cuda_attention_fp16_test \
	tests/gpu/cuda_decode_attention_fp16_test
endif
TESTS += tests/gpu/gpu_fp16_test.sh
EXTRA_DIST += tests/gpu/cuda_fp16_map.h

# ---- Llama generation and model-parallel serving/evaluation in lockstep (app/inference) ----
TESTS += tests/mpi/parallel_generation_test.sh tests/gpu/gpu_generation_test.sh
EXTRA_DIST += tests/mpi/parallel_generation_test.sh tests/gpu/gpu_generation_test.sh tests/fuzz/corpus/generate_request
# --apply-layernorm-1p and --use-rope-scaling checkpoints in generation; what pipeline stages send
TESTS += tests/mpi/generation_variants_test.sh
# mixture-of-experts checkpoints in generation and evaluation (KV cache, TP, PP, EP)
TESTS += tests/mpi/moe_generation_test.sh
EXTRA_DIST += tests/mpi/moe_generation_test.sh
EXTRA_DIST += tests/mpi/generation_variants_test.sh
# Megatron-LM launch-script compatibility: HuggingFaceTokenizer (tokenizer.json) and SentencePiece
# tokenizers, the flags of Megatron's example scripts (works / no effect / refused), the README table
check_PROGRAMS += tests/unit/tokenizer_hf_test
tests_unit_tokenizer_hf_test_SOURCES = tests/unit/tokenizer_hf_test.c
tests_unit_tokenizer_hf_test_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_unit_tokenizer_hf_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/tokenizer_hf_test
TESTS += tests/mpi/llama_tokenizer_test.sh
TESTS += tests/mpi/megatron_script_test.sh
TESTS += tests/unit/megatron_flags_doc_test.sh
# every option string of Megatron-LM's parser (tests/data/megatron_parser_flags.txt, extracted by
# tests/tools/megatron_parser_flags.py) is a row of pretrain_gpt's table and parses as its status says
check_PROGRAMS += tests/unit/megatron_parser_flags_test
tests_unit_megatron_parser_flags_test_SOURCES = tests/unit/megatron_parser_flags_test.c
tests_unit_megatron_parser_flags_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/megatron_parser_flags_test
# the TensorBoard switches: Megatron's tags, values checked against a parameter dump and the log
TESTS += tests/mpi/tensorboard_test.sh
EXTRA_DIST += tests/data/megatron_parser_flags.txt tests/tools/megatron_parser_flags.py app/MEGATRON_FLAGS.md
EXTRA_DIST += tests/data/megatron_example_flags.txt tests/tools/megatron_flag_table.py \
	tests/tools/tensorboard_scalars.py tests/data/hf-bpe-600/tokenizer.json \
	tests/data/hf-bpe-600/tokenizer_config.json tests/data/hf-bpe-600/vectors.jsonl
# the data pipeline against an independent Megatron-Core reference (tests/tools/megatron_gpt_samples.py,
# numpy RandomState): samples token for token, split boundaries, numpy's MT19937 stream
check_PROGRAMS += tests/unit/numpy_random_test tests/unit/split_bounds_test
tests_unit_numpy_random_test_SOURCES = tests/unit/numpy_random_test.c
tests_unit_numpy_random_test_LDADD = $(APP_LIBS)
tests_unit_split_bounds_test_SOURCES = tests/unit/split_bounds_test.c
tests_unit_split_bounds_test_LDADD = $(APP_LIBS)
TESTS += tests/mpi/megatron_samples_test.sh tests/unit/split_bounds_test.sh tests/unit/numpy_random_test.sh \
	tests/mpi/eval_iterator_test.sh tests/mpi/sample_training_test.sh
EXTRA_DIST += tests/tools/megatron_gpt_samples.py
# BERT samples (issue 46) against tests/tools/megatron_bert_samples.py
TESTS += tests/mpi/bert_samples_test.sh
# pretrain_bert (issue 46): every parallel layout trains like one rank; checkpoints resume bitwise
TESTS += tests/mpi/bert_parallel_test.sh
# BERT fine-tuning, MNLI and RACE (issue 46 part 3)
TESTS += tests/mpi/finetune_bert_test.sh
# BERT's vocabulary (issue 46): Megatron-Core's padded size, every id the dataset emits inside it
TESTS += tests/mpi/bert_vocab_test.sh
EXTRA_DIST += tests/tools/megatron_task_samples.py tests/tools/make_task_data.py tests/data/mnli_synthetic_train.tsv \
	tests/data/mnli_synthetic_dev_matched.tsv tests/data/race_tiny/train/passages.txt tests/data/race_tiny/dev/passages.txt
# Megatron's examples/bert/train_bert_340m_distributed.sh, every flag, shrunk (issue 46)
TESTS += tests/mpi/bert_script_test.sh
# BERT to and from Hugging Face MegatronBertForPreTraining (issue 46 item 4), and the GPU
# machine's logits parity against transformers
TESTS += tests/mpi/bert_hf_test.sh
EXTRA_DIST += perf/bert_hf_parity.sh perf/bert_hf_parity.py tests/tools/megatron_bert_reference.py
EXTRA_DIST += tests/data/train_bert_340m_tiny.sh tests/data/train_t5_220m_tiny.sh
EXTRA_DIST += tests/mpi/bert_corpus.sh
EXTRA_DIST += tests/tools/megatron_bert_samples.py
# T5 samples (issue 46) against tests/tools/megatron_t5_samples.py
TESTS += tests/mpi/t5_samples_test.sh
# T5 training (issue 46): every layout Megatron supports for T5, and its example script
TESTS += tests/mpi/t5_parallel_test.sh tests/mpi/t5_script_test.sh
# T5's vocabulary (issue 46): Megatron-Core's padded size, every sentinel an id of the model
TESTS += tests/mpi/t5_vocab_test.sh
EXTRA_DIST += tests/tools/megatron_t5_samples.py
# T5 with relative position embeddings (issue 46)
TESTS += tests/mpi/t5_relative_test.sh
# T5 and Hugging Face T5ForConditionalGeneration (issue 46)
TESTS += tests/mpi/t5_hf_test.sh
EXTRA_DIST += tests/tools/hf_t5_reference.py perf/t5_hf_parity.sh perf/t5_hf_parity.py
# T5 with activation recomputation, full and selective (issue 46)
TESTS += tests/mpi/t5_recompute_test.sh
# robustness (issue 21): NaN/Inf stop, time limits, heartbeat, checkpoint argument checks; the
# fault-injection suite (SIGKILL/SIGTERM/SIGSTOP, full disk, read-only folder, damaged files)
TESTS += tests/mpi/robustness_test.sh tests/mpi/fault_injection_test.sh
# the straggler report (issue 45): --log-straggler names a rank slowed on purpose (MTC_FAULT_SLOW_RANK)
TESTS += tests/mpi/straggler_test.sh
# ---- untrusted bytes (issue 22): checksums, validation at the door, I/O failures ----
check_PROGRAMS += tests/tools/h5_poke
tests_tools_h5_poke_SOURCES = tests/tools/h5_poke.c
tests_tools_h5_poke_LDADD = $(HDF5_LIBS)
TESTS += tests/mpi/checksum_test.sh tests/mpi/corpus_check_test.sh tests/mpi/io_fault_test.sh \
	tests/unit/sanitizer_build_test.sh tests/fuzz/fuzz_test.sh
EXTRA_DIST += tests/fuzz/README.md tests/fuzz/fuzz_util.h tests/fuzz/corpus $(wildcard $(srcdir)/tests/fuzz/fuzz_*.c)
EXTRA_DIST += tests/tools/fault_table.sh tests/tools/portability_run.sh tests/portability.md
# issue 17: Hugging Face LlamaForCausalLM export and import (convert_checkpoint), and a Llama
# training script written as Megatron-LM's examples/llama
TESTS += tests/mpi/llama_hf_test.sh tests/mpi/llama_script_test.sh
TESTS += tests/gpu/gpu_llama_script_test.sh tests/gpu/gpu_hang_test.sh
EXTRA_DIST += tests/data/train_llama3_8b_tiny.sh tests/data/train_mixtral_8x7b_tiny.sh perf/llama_hf_parity.sh perf/llama_hf_parity.py
# issue 42: Hugging Face MixtralForCausalLM export and import, logits against a plain-Python
# reference of HF's Mixtral forward
TESTS += tests/mpi/mixtral_hf_test.sh
EXTRA_DIST += tests/tools/mixtral_reference.py perf/mixtral_hf_parity.sh perf/mixtral_hf_parity.py \
	tests/data/mixtral-hf-tiny/README.md tests/data/mixtral-hf-tiny/config.json \
	tests/data/mixtral-hf-tiny/model.safetensors tests/data/mixtral-hf-tiny/tokens.i32 tests/data/mixtral-hf-tiny/logits.f32
# Hugging Face Qwen2MoeForCausalLM (gated shared experts, dense layers, q/k/v biases) export and
# import, logits against a plain-Python reference of HF's Qwen2-MoE forward
TESTS += tests/mpi/qwen2_moe_hf_test.sh
EXTRA_DIST += tests/mpi/qwen2_moe_hf_test.sh tests/tools/qwen2_moe_reference.py perf/qwen2_moe_hf_parity.py

# ---- activation recomputation (issue 21) ----
TESTS += tests/mpi/recompute_test.sh
TESTS += tests/mpi/memory_efficient_norm_test.sh
# the loss in chunks of token rows (issue 19: the logits of one chunk at a time)
TESTS += tests/mpi/loss_chunk_test.sh
TESTS += tests/mpi/checkpoint_args_test.sh
TESTS += tests/mpi/gelu_form_test.sh
# Megatron's index cache files (issue 18 item 4, issue 22 item 1): names, descriptions and .npy
# bytes against numpy, XXH3 checksums, a cache written by Megatron, the default directory
TESTS += tests/mpi/index_cache_test.sh
# --rampup-batch-size (issue 18): Megatron's calculator by hand, a ramped 2-rank run with resume
check_PROGRAMS += tests/unit/microbatches_test
tests_unit_microbatches_test_SOURCES = tests/unit/microbatches_test.c
tests_unit_microbatches_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/microbatches_test tests/mpi/rampup_test.sh
# the test set evaluated after training (issue 18), as Megatron's pretrain() does
TESTS += tests/mpi/test_split_test.sh
# Megatron's phase timers (issue 19): levels, synchronization, Megatron's max/minmax/all text,
# the metrics JSON; then --timing-log-level 1/2 in 2-rank PP2 and DP2 runs
check_PROGRAMS += tests/unit/timers_test
tests_unit_timers_test_SOURCES = tests/unit/timers_test.c
tests_unit_timers_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/timers_test tests/mpi/timers_test.sh tests/mpi/startup_test.sh
TESTS += tests/gpu/gpu_timers_test.sh
EXTRA_DIST += perf/phase_timers.py
# --fp16 with Megatron's loss scaling (issue 17 item 2, issue 21 item 2): the scaler's state
# machine by hand, then 2-rank runs: overflow skips, constant scales bitwise, resume, errors
check_PROGRAMS += tests/unit/grad_scaler_test
tests_unit_grad_scaler_test_SOURCES = tests/unit/grad_scaler_test.c
tests_unit_grad_scaler_test_LDADD = $(APP_LIBS)
TESTS += tests/unit/grad_scaler_test tests/mpi/fp16_test.sh
# resume with --decoupled-lr and --use-rope-scaling (issue 17); index-cache names of the Hugging
# Face and SentencePiece tokenizers (issue 18)
TESTS += tests/mpi/resume_schedule_test.sh tests/mpi/tokenizer_cache_name_test.sh

# Megatron's MoE flags: the refused ones name what to use instead, the no-effect ones train
TESTS += tests/unit/moe_flags_test.sh
EXTRA_DIST += tests/unit/moe_flags_test.sh
# --recompute-modules moe_act: bitwise the run that keeps the experts' activation, less memory
TESTS += tests/mpi/moe_recompute_test.sh
EXTRA_DIST += tests/mpi/moe_recompute_test.sh
# --moe-router-force-load-balancing and --moe-router-force-biased (Megatron's benchmark routers)
TESTS += tests/mpi/moe_forced_routing_test.sh
EXTRA_DIST += tests/mpi/moe_forced_routing_test.sh
# --moe-apply-probs-on-input: layouts agree, recompute is bitwise
TESTS += tests/mpi/moe_probs_on_input_test.sh
EXTRA_DIST += tests/mpi/moe_probs_on_input_test.sh
