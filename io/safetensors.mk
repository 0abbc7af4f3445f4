# io/safetensors.mk: safetensors reader/writer and the convert_checkpoint tool (being written).
