# app/inference/local.mk: generation (KV-cache decoding, sampling), Megatron's REST request and
# response, and the zero-shot evaluations (WikiText perplexity, LAMBADA), over the model loaded
# from a checkpoint.
noinst_LIBRARIES += app/inference/libinference.a
app_inference_libinference_a_SOURCES = \
	app/inference/inference_model.c app/inference/inference_model.h \
	app/inference/inference_moe.c app/inference/inference_moe.h \
	app/inference/sampling.c app/inference/sampling.h \
	app/inference/generation.c app/inference/generation.h \
	app/inference/generation_lockstep.c app/inference/generation_lockstep.h \
	app/inference/generate_request.c app/inference/generate_request.h \
	app/inference/generate_api.c app/inference/generate_api.h \
	app/inference/wikitext_detokenizer.c app/inference/wikitext_detokenizer.h \
	app/inference/zeroshot_eval.c app/inference/zeroshot_eval.h \
	app/inference/inference_setup.c app/inference/inference_setup.h \
	app/inference/model_flags.c app/inference/model_flags.h
app_inference_libinference_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) $(PCRE2_CFLAGS) $(UTF8PROC_CFLAGS)
# the model's forward with a key/value cache is the model's own code (app/model/gpt_inference.c);
# it is listed here so that app/model/local.mk stays as the model's authors keep it
app_model_libmodel_a_SOURCES += app/model/gpt_inference.c app/model/gpt_inference.h
