#!/usr/bin/env python3
"""t5_hf_parity.py: Hugging Face transformers' T5ForConditionalGeneration against our T5 (see
perf/t5_hf_parity.sh).

  t5_hf_parity.py compare HF_DIR OURS_PREFIX PROMPTS
      loads HF_DIR (exported by convert_checkpoint --to-hf, or made below) and, for each prompt
      (OURS_PREFIX.N.enc, .enc_mask, .dec, .logits from tests/tools/t5_logits on the same
      weights, fp32 CPU), runs T5ForConditionalGeneration(input_ids, attention_mask,
      decoder_input_ids) in float32 on the CPU and, with a GPU, in bfloat16 on it; prints the
      largest absolute difference of the logits and of the per-token log-probabilities, the
      largest logit difference relative to the largest logit, and how often the argmax agrees,
      then one PASS/FAIL line per setting. Tolerances: float32 max|d log-prob| <= 1e-4 and
      relative logit difference <= 1e-4; bfloat16 max|d log-prob| <= 0.15 and relative <= 3e-2.
      Exits 1 on any FAIL.
  t5_hf_parity.py make OUT_DIR LIKE_CONFIG
      saves a randomly initialized T5ForConditionalGeneration (seed 0, float32) with
      LIKE_CONFIG's T5Config (the export's: gated-silu or gelu, untied), for the import
      direction.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import T5Config, T5ForConditionalGeneration


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(hf_dir, prefix, prompts):
    vocab = json.load(open(f"{hf_dir}/config.json"))["vocab_size"]
    settings = [("float32", torch.float32, "cpu", 1e-4, 1e-4)]
    if torch.cuda.is_available():
        settings.append(("bfloat16", torch.bfloat16, "cuda", 0.15, 3e-2))
    failed = False
    for name, dtype, device, logprob_limit, relative_limit in settings:
        model = T5ForConditionalGeneration.from_pretrained(hf_dir, torch_dtype=dtype).to(device).eval()
        worst_logit = worst_logprob = worst_relative = 0.0
        agree = total = 0
        for p in range(prompts):
            enc = np.fromfile(f"{prefix}.{p}.enc", dtype=np.int32)
            mask = np.fromfile(f"{prefix}.{p}.enc_mask", dtype=np.int32)
            dec = np.fromfile(f"{prefix}.{p}.dec", dtype=np.int32)
            ours = np.fromfile(f"{prefix}.{p}.logits", dtype=np.float32).reshape(len(dec), -1)[:, :vocab]
            as_ids = lambda a: torch.from_numpy(a.astype(np.int64)).unsqueeze(0).to(device)
            with torch.no_grad():
                theirs = model(input_ids=as_ids(enc), attention_mask=as_ids(mask),
                               decoder_input_ids=as_ids(dec)).logits[0].float().cpu().numpy()
            d_logit = np.abs(theirs - ours).max()
            d_logprob = np.abs(log_softmax(theirs.astype(np.float64)) - log_softmax(ours.astype(np.float64))).max()
            relative = d_logit / np.abs(ours).max()
            print(f"  {name:8s} on {device:4s} prompt {p} ({mask.sum()} of {len(enc)} encoder tokens, {len(dec)} "
                  f"decoder): max|d logit| {d_logit:.3e}, relative {relative:.3e}, max|d log-prob| {d_logprob:.3e}")
            worst_logit, worst_logprob = max(worst_logit, d_logit), max(worst_logprob, d_logprob)
            worst_relative = max(worst_relative, relative)
            agree += int((theirs.argmax(-1) == ours.argmax(-1)).sum())
            total += len(dec)
        ok = worst_logprob <= logprob_limit and worst_relative <= relative_limit
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} transformers T5ForConditionalGeneration {name} on {device} vs ours (fp32 "
              f"CPU), {hf_dir}, {prompts} prompts: max|d logit| {worst_logit:.3e}, relative {worst_relative:.3e} "
              f"(limit {relative_limit:g}), max|d log-prob| {worst_logprob:.3e} (limit {logprob_limit:g}); argmax "
              f"agrees on {100.0 * agree / total:.1f}% of {total} positions")
    return 1 if failed else 0


def make(out_dir, like):
    config = T5Config(**{k: v for k, v in json.load(open(like)).items() if k not in ("architectures", "torch_dtype")})
    # transformers 5 builds a T5 with its lm_head tied to the shared embedding and saves
    # tie_word_embeddings true whatever the dict said: untie it (a matrix of its own, no
    # d_model^-0.5 scaling) as the export's config.json says
    config.tie_word_embeddings = False
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config).eval()
    model.config.tie_word_embeddings = False
    if model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr():
        model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach().clone())
    torch.nn.init.normal_(model.lm_head.weight, std=0.05)
    # transformers 5 with tie_word_embeddings false also gives the encoder and the decoder
    # embeddings of their own (random, unlike shared.weight); Megatron's T5 has one embedding
    # for both stacks, so they take shared.weight's values (kept as separate equal tensors)
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            if stack.embed_tokens.weight.data_ptr() != model.shared.weight.data_ptr():
                stack.embed_tokens.weight.copy_(model.shared.weight)
    model.save_pretrained(out_dir, safe_serialization=True)
    path = os.path.join(out_dir, "config.json")
    saved = json.load(open(path))
    if saved.get("tie_word_embeddings", True):
        saved["tie_word_embeddings"] = False
        json.dump(saved, open(path, "w"), indent=2)
        print("# config.json: tie_word_embeddings written false by hand (transformers saved it true)")
    print(f"# made a random T5ForConditionalGeneration like {like} in {out_dir}")
    return 0


def main():
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    if sys.argv[1] == "make":
        sys.exit(make(sys.argv[2], sys.argv[3]))
    sys.exit(f"usage: {sys.argv[0]} compare HF_DIR OURS_PREFIX PROMPTS | make OUT_DIR LIKE_CONFIG")


if __name__ == "__main__":
    main()
