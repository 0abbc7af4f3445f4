#!/usr/bin/env python3
"""generation_vs_hf.py: our generation server (app/run_text_generation_server --device cuda)
against Hugging Face transformers on the same GPT-2 checkpoint (exported with
app/convert_checkpoint --to-hf), on one GPU, in one run:

  parity  for each prompt, our greedy continuation (top_k 1) token for token against
          transformers' generate(do_sample=False) in float32 and bfloat16, and our per-token
          log-probabilities (prompt and output) against log_softmax of transformers' logits on
          the same tokens (max |difference|);
  speed   time to first token (a request of 1 token: prefill + one step) and generation tokens/s
          ((B * N) / (time of N tokens - time to first token)) at batch 1 and 32, ours over HTTP
          next to a plain PyTorch KV-cache greedy loop (GPT2LMHeadModel in bfloat16,
          past_key_values, argmax) on the same prompt tokens.

Prints markdown tables and PASS/FAIL lines (greedy tokens equal the float32 model's until the first
position where its top two logits are closer than bf16 resolution; log-probabilities within 0.1 of
the bfloat16 model's). usage: generation_vs_hf.py PORT HF_DIR [NEW_TOKENS]
"""
import json
import sys
import time
import urllib.request

import torch
from transformers import GPT2LMHeadModel

PROMPTS = [
    "The capital of France is",
    "In a shocking finding, scientists discovered a herd of unicorns living in",
    "def fibonacci(n):",
    "Once upon a time there was a",
    "The meaning of life is",
    "Megatron-LM is a library for",
    "1, 2, 3, 4, 5,",
    "The weather today is",
]


def put(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api", data=json.dumps(body).encode(), method="PUT")
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def prompt_tokens(port, text):
    return put(port, {"prompts": [text], "tokens_to_generate": 0, "logprobs": True})["tokens"][0]


def parity(port, hf_dir, new_tokens):
    device = "cuda"
    models = {dt: GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=dt).to(device).eval()
              for dt in (torch.float32, torch.bfloat16)}
    vocab = models[torch.float32].config.vocab_size
    print("| prompt | prompt tokens | ours = HF fp32 (tokens) | ours = HF bf16 (tokens) | max abs logprob diff vs fp32 | vs bf16 |")
    print("| --- | --- | --- | --- | --- | --- |")
    failed = False
    for text in PROMPTS:
        ours = put(port, {"prompts": [text], "tokens_to_generate": new_tokens, "top_k": 1, "logprobs": True})
        tokens, logprobs = ours["tokens"][0], ours["logprobs"][0]
        prompt = prompt_tokens(port, text)
        ids = torch.tensor([prompt], device=device)
        row = [text[:40], str(len(prompt))]
        diffs = []
        for dt, model in models.items():
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=len(tokens) - len(prompt), pad_token_id=50256)[0].tolist()
                logits = model(torch.tensor([tokens], device=device)).logits[0].float()
            same = 0
            while same < len(tokens) and same < len(out) and tokens[same] == out[same]:
                same += 1
            row.append(f"{'yes' if out == tokens else 'no'} ({same - len(prompt)} of {len(tokens) - len(prompt)})")
            theirs = torch.log_softmax(logits[:, :vocab], dim=-1)
            target = torch.tensor(tokens[1:], device=device)
            hf_lp = theirs[torch.arange(len(tokens) - 1, device=device), target].cpu()
            diff = (hf_lp - torch.tensor(logprobs)).abs().max().item()
            diffs.append(diff)
            if dt == torch.float32 and out != tokens:
                # a divergence is acceptable only where fp32 itself is nearly tied
                top2 = logits[same - 1].topk(2).values
                if (top2[0] - top2[1]).item() > 0.05:
                    failed = True
        row += [f"{d:.3g}" for d in diffs]
        failed |= diffs[1] > 0.1
        print("| " + " | ".join(row) + " |")
    print("PASS" if not failed else "FAIL", "greedy tokens and log-probabilities against transformers")
    return failed


def speed(port, hf_dir):
    device = "cuda"
    model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.bfloat16).to(device).eval()
    print("| batch | prompt | new tokens | ours TTFT ms | ours tokens/s | peer TTFT ms | peer tokens/s | ours / peer tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for batch in (1, 32):
        n = 128
        prompt_text = "The quick brown fox jumps over the lazy dog. " * 13
        body = {"prompts": [prompt_text] * batch, "top_k": 1}
        put(port, dict(body, tokens_to_generate=4))  # warm-up
        t0 = time.perf_counter(); put(port, dict(body, tokens_to_generate=1)); ttft = time.perf_counter() - t0
        t0 = time.perf_counter(); r = put(port, dict(body, tokens_to_generate=n)); total = time.perf_counter() - t0
        generated = sum(len(t) for t in r["tokens"]) - batch * len(prompt_tokens(port, prompt_text))
        ours_rate = (generated - batch) / max(total - ttft, 1e-9)
        ids = torch.tensor([prompt_tokens(port, prompt_text)] * batch, device=device)
        with torch.no_grad():
            for _ in range(2):  # warm-up, then timed
                torch.cuda.synchronize(); t0 = time.perf_counter()
                out = model(ids, use_cache=True)
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                torch.cuda.synchronize(); peer_ttft = time.perf_counter() - t0
                past = out.past_key_values
                for _ in range(n - 1):
                    out = model(nxt, past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                torch.cuda.synchronize(); peer_total = time.perf_counter() - t0
        peer_rate = batch * (n - 1) / (peer_total - peer_ttft)
        print(f"| {batch} | {ids.shape[1]} | {n} | {ttft * 1e3:.1f} | {ours_rate:.0f} | {peer_ttft * 1e3:.1f} | "
              f"{peer_rate:.0f} | {ours_rate / peer_rate:.2f} |")


def main():
    port, hf_dir = sys.argv[1], sys.argv[2]
    new_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    failed = parity(port, hf_dir, new_tokens)
    speed(port, hf_dir)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
