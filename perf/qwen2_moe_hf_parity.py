#!/usr/bin/env python3
"""qwen2_moe_hf_parity.py: the transformers side of issue 42's Qwen2-MoE logits parity (run on a
machine with torch and transformers; perf/mixtral_hf_parity.sh DIR is the other side, the same
comparison as for Mixtral). Builds a seeded random Qwen2MoeForCausalLM (4 layers with layer 2
dense (mlp_only_layers [2]), hidden 256, 8 query heads in 2 groups of head_dim 32, q/k/v biases,
8 experts of width 256, top-2 without renormalization (norm_topk_prob false, Qwen1.5-MoE's), a
gated shared expert of width 512, dense width 768, vocab 1000, rope_theta 1e6), its weights
rounded to bfloat16 values, computes its float32 logits on PROMPTS x 64 random tokens, and saves
the model as transformers does (save_pretrained, bfloat16, sharded at 10MB) with the tokens and
logits:

  OUT/hf/ (config.json, model-0000K-of-0000N.safetensors, model.safetensors.index.json)
  OUT/tokens.i32 (int32 [PROMPTS, 64]), OUT/logits.f32 (float32 [PROMPTS, 64, 1000])

As in mixtral_hf_parity.py the weights are drawn larger than an initialization's so that the
routing is decisive; the smallest gap between a token's 2nd and 3rd routing probability is
printed per sparse layer. NORM_TOPK_PROB=1 in the environment builds the renormalizing variant.

usage: qwen2_moe_hf_parity.py OUT [PROMPTS]
"""
import os
import sys

import numpy as np
import torch
import transformers
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM


def main():
    out, prompts = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(5)
    config = Qwen2MoeConfig(vocab_size=1000, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                            num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
                            rope_theta=1e6, rms_norm_eps=1e-6, num_experts=8, num_experts_per_tok=2,
                            moe_intermediate_size=256, shared_expert_intermediate_size=512, decoder_sparse_step=1,
                            mlp_only_layers=[2], norm_topk_prob=os.environ.get("NORM_TOPK_PROB") == "1",
                            tie_word_embeddings=False, use_sliding_window=False)
    if getattr(config, "head_dim", 32) != 32:
        config.head_dim = 32
    model = Qwen2MoeForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 1.0 if "embed" in name else 0.3 if name.endswith("mlp.gate.weight") else 0.05
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in name else scale * torch.randn_like(p))
            p.copy_(p.bfloat16().float())
    tokens = torch.randint(0, 1000, (prompts, 64), generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        result = model(tokens, output_router_logits=True)
    for layer, logits in enumerate(result.router_logits or ()):
        p = torch.softmax(logits.float(), -1).sort(-1, descending=True).values
        print(f"sparse layer {layer}: smallest gap between the 2nd and 3rd routing probability "
              f"{float((p[:, 1] - p[:, 2]).min()):.3e}")
    np.asarray(tokens.numpy(), dtype="<i4").tofile(os.path.join(out, "tokens.i32"))
    np.asarray(result.logits.numpy(), dtype="<f4").tofile(os.path.join(out, "logits.f32"))
    model.to(torch.bfloat16).save_pretrained(os.path.join(out, "hf"), max_shard_size="10MB")
    extra = os.path.join(out, "hf", "generation_config.json")
    if os.path.exists(extra):
        os.remove(extra)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {sorted(os.listdir(os.path.join(out, 'hf')))}")


if __name__ == "__main__":
    main()
