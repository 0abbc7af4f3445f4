#!/usr/bin/env python3
"""hf_logits_check.py: Hugging Face's GPT2LMHeadModel, loaded from a checkpoint exported with
app/convert_checkpoint --to-hf, against our forward pass (tests/model_logits on the same
checkpoint and tokens). Prints the largest logit difference relative to the largest logit, for
Hugging Face in float32 and in bfloat16; exits 1 when fp32 differs by more than 1e-4 or bf16 by
more than 2e-2 (bf16 keeps 8 bits of mantissa: ~4e-3 per rounding).

usage: hf_logits_check.py HF_DIR OURS_PREFIX   (reads OURS_PREFIX.tokens and OURS_PREFIX.logits)
"""
import json
import sys

import numpy as np
import torch
from transformers import GPT2LMHeadModel


def main():
    hf_dir, prefix = sys.argv[1], sys.argv[2]
    vocab = json.load(open(f"{hf_dir}/config.json"))["vocab_size"]
    tokens = np.fromfile(f"{prefix}.tokens", dtype=np.int32)
    ours = np.fromfile(f"{prefix}.logits", dtype=np.float32).reshape(len(tokens), -1)[:, :vocab]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    limits = {torch.float32: 1e-4, torch.bfloat16: 2e-2}
    failed = False
    for dtype, limit in limits.items():
        model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=dtype).to(device).eval()
        with torch.no_grad():
            ids = torch.from_numpy(tokens.astype(np.int64)).unsqueeze(0).to(device)
            theirs = model(ids).logits[0].float().cpu().numpy()
        diff = np.abs(theirs - ours).max() / np.abs(ours).max()
        argmax_agree = (theirs.argmax(-1) == ours.argmax(-1)).mean()
        ok = diff <= limit
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {str(dtype):15s} on {device}: max|HF - ours| / max|ours| = {diff:.3e} "
              f"(limit {limit:g}); next-token argmax agrees on {100 * argmax_agree:.1f}% of {len(tokens)} positions")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
