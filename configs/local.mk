# configs/local.mk: model and run presets shipped with the distribution.
dist_pkgdata_DATA = configs/gpt-tiny.args configs/gpt-tiny-shakespeare.args
# the GPT shapes of Megatron's weak-scaling table (perf/studies/weak-gpt3.study)
dist_pkgdata_DATA += configs/gpt3-1.7b.args configs/gpt3-3.6b.args configs/gpt3-7.5b.args \
	configs/gpt3-18b.args configs/gpt3-39b.args configs/gpt3-76b.args configs/gpt3-145b.args
# the Llama family: a CI-sized model and Megatron's published shapes
dist_pkgdata_DATA += configs/llama-tiny.args configs/llama2-7b.args configs/llama3-8b.args \
	configs/llama3.2-1b.args configs/llama3-70b.args
# mixture of experts: a CI-sized Mixtral
dist_pkgdata_DATA += configs/mixtral-tiny.args configs/mixtral-small.args
# BERT (pretrain_bert): Megatron's BERT-Large example shape
dist_pkgdata_DATA += configs/bert-large.args
# T5 (pretrain_t5): Megatron's T5 220M example shape
dist_pkgdata_DATA += configs/t5-220m.args
