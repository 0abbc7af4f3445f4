#!/usr/bin/env python3
"""llama_hf_parity.py: Hugging Face transformers' LlamaForCausalLM, loaded from a checkpoint
exported with app/convert_checkpoint --to-hf, against our forward pass (tests/tools/model_logits
on the same checkpoint, fp32 CPU backend) on a few prompts.

For each prompt (OURS_PREFIX.N.tokens / .logits) and each transformers setting (float32 on the
CPU; bfloat16 on the GPU when there is one), and for our bf16 CUDA forward (OURS_PREFIX_cuda.N.logits,
when perf/llama_hf_parity.sh found a GPU) against transformers in float32, prints the largest absolute difference of the
logits and of the per-token log-probabilities (log_softmax over the vocabulary), the largest
logit difference relative to the largest logit, and how often the next-token argmax agrees;
then one PASS/FAIL line per setting. Tolerances: float32 max|d log-prob| <= 1e-4 and relative
logit difference <= 1e-4; bfloat16 (8 mantissa bits, ~4e-3 per rounding, over every layer)
max|d log-prob| <= 0.15 and relative logit difference <= 3e-2. Exits 1 on any FAIL.

usage: llama_hf_parity.py HF_DIR OURS_PREFIX PROMPTS
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import LlamaForCausalLM


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def main():
    hf_dir, prefix, prompts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    vocab = json.load(open(f"{hf_dir}/config.json"))["vocab_size"]
    # (transformers dtype, its device, our logits' prefix, what ours are, limits)
    settings = [("float32", torch.float32, "cpu", prefix, "ours (fp32 CPU)", 1e-4, 1e-4)]
    if torch.cuda.is_available():
        settings.append(("bfloat16", torch.bfloat16, "cuda", prefix, "ours (fp32 CPU)", 0.15, 3e-2))
    if os.path.exists(f"{prefix}_cuda.0.logits"):
        settings.append(("float32", torch.float32, "cpu", prefix + "_cuda", "ours (bf16 CUDA)", 0.15, 3e-2))
    failed = False
    for name, dtype, device, ours_prefix, ours_name, logprob_limit, relative_limit in settings:
        model = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=dtype).to(device).eval()
        worst_logit = worst_logprob = worst_relative = 0.0
        agree = total = 0
        for p in range(prompts):
            tokens = np.fromfile(f"{prefix}.{p}.tokens", dtype=np.int32)
            ours = np.fromfile(f"{ours_prefix}.{p}.logits", dtype=np.float32).reshape(len(tokens), -1)[:, :vocab]
            with torch.no_grad():
                ids = torch.from_numpy(tokens.astype(np.int64)).unsqueeze(0).to(device)
                theirs = model(ids).logits[0].float().cpu().numpy()
            d_logit = np.abs(theirs - ours).max()
            d_logprob = np.abs(log_softmax(theirs.astype(np.float64)) - log_softmax(ours.astype(np.float64))).max()
            relative = d_logit / np.abs(ours).max()
            print(f"  {name:8s} on {device:4s} vs {ours_name} prompt {p} ({len(tokens)} tokens): max|d logit| {d_logit:.3e}, "
                  f"relative {relative:.3e}, max|d log-prob| {d_logprob:.3e}")
            worst_logit, worst_logprob = max(worst_logit, d_logit), max(worst_logprob, d_logprob)
            worst_relative = max(worst_relative, relative)
            agree += int((theirs.argmax(-1) == ours.argmax(-1)).sum())
            total += len(tokens)
        ok = worst_logprob <= logprob_limit and worst_relative <= relative_limit
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} transformers LlamaForCausalLM {name} on {device} vs {ours_name}, "
              f"{prompts} prompts: max|d logit| {worst_logit:.3e}, relative {worst_relative:.3e} (limit "
              f"{relative_limit:g}), max|d log-prob| {worst_logprob:.3e} (limit {logprob_limit:g}); next-token "
              f"argmax agrees on {100.0 * agree / total:.1f}% of {total} positions")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
