# app/model/local.mk: the GPT model over flat buffers (with its BERT encoder and T5 encoder-decoder modes), its parameter table, and its Hugging Face
# GPT-2, Llama and MegatronBert layouts.
noinst_LIBRARIES += app/model/libmodel.a
app_model_libmodel_a_SOURCES = \
	app/model/gpt_model.c app/model/gpt_model.h app/model/gpt_model_t5.inc app/model/t5_activations.h \
	app/model/relative_position.c app/model/relative_position.h \
	app/model/bert_heads.c app/model/bert_heads.h \
	app/model/bert_encoder.c app/model/bert_encoder.h \
	app/model/bert_task_head.c app/model/bert_task_head.h \
	app/model/grad_first_write.c app/model/grad_first_write.h \
	app/model/context_parallel.c app/model/context_parallel.h \
	app/model/moe_layer.c app/model/moe_layer.h app/model/mlp_gelu.h \
	app/model/layer_pattern.c app/model/layer_pattern.h \
	app/model/window_attention.c app/model/window_attention.h \
	app/model/moe_shared_expert.c app/model/moe_shared_expert.h \
	app/model/moe_expert_bias.c app/model/moe_expert_bias.h \
	app/model/moe_forced_routing.c app/model/moe_forced_routing.h \
	app/model/fp8_linear.c app/model/fp8_linear.h app/model/fp8_config.h \
	app/model/gpt_parameter_table.c app/model/gpt_parameter_table.h \
	app/model/gpt_sharded_state.c app/model/gpt_sharded_state.h \
	app/model/hf_gpt2_layout.c app/model/hf_gpt2_layout.h \
	app/model/hf_gpt2_config.c app/model/hf_gpt2_config.h \
	app/model/hf_llama_layout.c app/model/hf_llama_layout.h \
	app/model/hf_llama_config.c app/model/hf_llama_config.h \
	app/model/hf_real_text.c app/model/hf_real_text.h \
	app/model/hf_bert_layout.c app/model/hf_bert_layout.h \
	app/model/hf_bert_config.c app/model/hf_bert_config.h \
	app/model/hf_t5_layout.c app/model/hf_t5_layout.h \
	app/model/hf_t5_config.c app/model/hf_t5_config.h
app_model_libmodel_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
