# app/data/local.mk: Megatron's GPT, BERT and T5 datasets over our corpora (document, sample and shuffle
# indices, blending, the index cache) and mock data.
noinst_LIBRARIES += app/data/libdata.a
app_data_libdata_a_SOURCES = \
	app/data/gpt_dataset.c app/data/gpt_dataset.h \
	app/data/bert_dataset.c app/data/bert_dataset.h \
	app/data/t5_dataset.c app/data/t5_dataset.h \
	app/data/blended_dataset.c app/data/blended_dataset.h \
	app/data/dataset_index.c app/data/dataset_index.h \
	app/data/index_cache.c app/data/index_cache.h \
	app/data/npy_file.c app/data/npy_file.h \
	app/data/py_json.c app/data/py_json.h \
	app/data/numpy_random.c app/data/numpy_random.h \
	app/data/mock_data.c app/data/mock_data.h
