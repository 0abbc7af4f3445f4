# io/local.mk: file formats (parallel HDF5 corpora and checkpoints, JSONL, .bin/.idx,
# safetensors) arrive with the data and checkpoint issues.
