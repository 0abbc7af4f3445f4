#!/usr/bin/env python3
"""mixtral_hf_parity.py: the transformers side of issue 42's Mixtral logits parity (run on a
machine with torch and transformers; perf/mixtral_hf_parity.sh is the other side). Builds a
seeded random MixtralForCausalLM (4 layers, hidden 256, 8 query heads in 2 groups of head_dim 32,
8 experts of width 512, top-2, vocab 1000, rope_theta 1e6), its weights rounded to bfloat16 values,
computes its float32 logits on PROMPTS x 64 random tokens, and saves the model as transformers
does (save_pretrained, bfloat16, sharded at 10MB) with the tokens and logits:

  OUT/hf/ (config.json, model-0000K-of-00003.safetensors, model.safetensors.index.json)
  OUT/tokens.i32 (int32 [PROMPTS, 64]), OUT/logits.f32 (float32 [PROMPTS, 64, 1000])

The weights are drawn larger than an initialization's (std 0.05, the router 0.3, embeddings 1) so
that the routing is decisive and the logits are not all near zero; the smallest gap between a
token's second and third routing probability is printed per layer (a gap below ~1e-6 could let
float32 round a choice the other way). The bfloat16 values make the saved model exact.

usage: mixtral_hf_parity.py OUT [PROMPTS]
"""
import os
import sys

import numpy as np
import torch
import transformers
from transformers import MixtralConfig, MixtralForCausalLM


def main():
    out, prompts = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(3)
    config = MixtralConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                           num_attention_heads=8, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
                           rope_theta=1e6, rms_norm_eps=1e-5, num_local_experts=8, num_experts_per_tok=2,
                           tie_word_embeddings=False, sliding_window=None)
    model = MixtralForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 1.0 if "embed" in name else 0.3 if ".gate." in name else 0.05
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in name else scale * torch.randn_like(p))
            p.copy_(p.bfloat16().float())
    tokens = torch.randint(0, 1000, (prompts, 64), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        result = model(tokens, output_router_logits=True)
    for layer, logits in enumerate(result.router_logits):
        p = torch.softmax(logits.float(), -1).sort(-1, descending=True).values
        print(f"layer {layer}: smallest gap between the 2nd and 3rd routing probability {float((p[:, 1] - p[:, 2]).min()):.3e}")
    np.asarray(tokens.numpy(), dtype="<i4").tofile(os.path.join(out, "tokens.i32"))
    np.asarray(result.logits.numpy(), dtype="<f4").tofile(os.path.join(out, "logits.f32"))
    model.to(torch.bfloat16).save_pretrained(os.path.join(out, "hf"), max_shard_size="10MB")
    extra = os.path.join(out, "hf", "generation_config.json")
    if os.path.exists(extra):
        os.remove(extra)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {sorted(os.listdir(os.path.join(out, 'hf')))}")


if __name__ == "__main__":
    main()
