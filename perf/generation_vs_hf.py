#!/usr/bin/env python3
"""generation_vs_hf.py: our generation server (app/run_text_generation_server) against Hugging Face
transformers on the same GPT-2-shaped checkpoint (exported with app/convert_checkpoint --to-hf), in
one run (perf/generation_vs_hf.sh starts the servers and trains or initializes the checkpoints).

  parity HF_DIR FP32_PORT BF16_PORT|none [NEW_TOKENS]
          for each prompt, our greedy continuation (top_k 1, "stop_token": -1 so that every one of
          NEW_TOKENS is generated, the end-of-document token included) token for token against
          transformers' GPT2LMHeadModel greedy argmax over the tokenizer's ids, no stop either:
          the fp32 server (--device cpu) against the float32 model, the bf16 server (--device cuda)
          against the bfloat16 model; our per-token log-probabilities (prompt and output) against
          log_softmax of the model's logits on our tokens (max |difference|). PASS: fp32 tokens equal
          until the first position where the float32 model's top two logits are within 1e-3 (an
          fp32 near-tie), fp32 log-probabilities within 1e-3; bf16 tokens equal until a top-two gap
          under 0.05, bf16 log-probabilities within 0.1 of the bfloat16 model's.
  speed HF_DIR PORT [NEW_TOKENS]
          time to first token (a request of one new token: prefill and one step, median of 3) and
          generation tokens/s (B * (N - 1) / (time of N tokens - time to first token)) at batch 1
          and 32, every sequence generating all N tokens (stop_token -1; checked), ours over HTTP
          next to two peers on the same weights in bfloat16: a plain PyTorch KV-cache greedy loop
          (past_key_values, argmax) and transformers' generate(do_sample=False, min_new_tokens =
          max_new_tokens = N).

Prints markdown tables and PASS/FAIL lines; exits 1 on FAIL. Without torch it measures our side only.
"""
import json
import statistics
import sys
import time
import urllib.request

try:
    import torch
    from transformers import GPT2LMHeadModel
except ImportError as e:  # our side alone (a check of the script on a machine without torch)
    torch = None
    print(f"# peer unavailable: {e}")

PROMPTS = [
    "ROMEO:\nBut, soft! what light through yonder window breaks?",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "KING RICHARD III:\nNow is the winter of our discontent",
    "The capital of France is",
    "Once upon a time there was a",
    "JULIET:\nO Romeo, Romeo! wherefore art thou",
    "1, 2, 3, 4, 5,",
    "MENENIUS:\nWhat work's, my countrymen, in hand? where go you",
]
VOCAB = 50257  # the GPT-2 tokenizer's ids (the model's rows are padded beyond)


def put(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api", data=json.dumps(body).encode(), method="PUT")
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.load(r)


def prompt_tokens(port, text):
    return put(port, {"prompts": [text], "tokens_to_generate": 0, "logprobs": True})["tokens"][0]


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def hf_greedy(model, prompt, n):
    """greedy argmax over the tokenizer's ids for n tokens, no stop; the logits of every step"""
    ids = torch.tensor([prompt], device=device())
    with torch.no_grad():
        out = model(ids, use_cache=True)
        past, tokens = out.past_key_values, list(prompt)
        gaps = []
        for _ in range(n):
            last = out.logits[0, -1, :VOCAB].float()
            top2 = last.topk(2).values
            gaps.append((top2[0] - top2[1]).item())
            nxt = int(last.argmax())
            tokens.append(nxt)
            out = model(torch.tensor([[nxt]], device=device()), past_key_values=past, use_cache=True)
            past = out.past_key_values
    return tokens, gaps


def compare(label, port, model, new_tokens, tie, logprob_tolerance):
    print(f"\n### {label}\n")
    print("| prompt | prompt tokens | new tokens | equal tokens (of new) | first difference at a top-2 gap | max abs logprob diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    failed = False
    for text in PROMPTS:
        ours = put(port, {"prompts": [text], "tokens_to_generate": new_tokens, "top_k": 1, "logprobs": True,
                          "stop_token": -1})
        tokens, logprobs = ours["tokens"][0], ours["logprobs"][0]
        prompt = prompt_tokens(port, text)
        if len(tokens) != len(prompt) + new_tokens:
            failed = True
        theirs, gaps = hf_greedy(model, prompt, new_tokens)
        same = 0
        while same < len(tokens) and same < len(theirs) and tokens[same] == theirs[same]:
            same += 1
        gap = "-"
        if same < len(tokens):
            g = gaps[same - len(prompt)]
            gap = f"{g:.3g}"
            failed |= g > tie  # a divergence is acceptable only at a near-tie of the peer
        with torch.no_grad():
            logits = model(torch.tensor([tokens], device=device())).logits[0, :, :VOCAB].float()
        lp = torch.log_softmax(logits, dim=-1)
        target = torch.tensor(tokens[1:], device=device())
        hf_lp = lp[torch.arange(len(tokens) - 1, device=device()), target].cpu()
        diff = (hf_lp - torch.tensor(logprobs)).abs().max().item()
        failed |= diff > logprob_tolerance
        print(f"| {json.dumps(text[:36])[1:-1]} | {len(prompt)} | {len(tokens) - len(prompt)} | "
              f"{same - len(prompt)} | {gap} | {diff:.3g} |")
    print(f"\n{'FAIL' if failed else 'PASS'} {label}: greedy tokens (near-ties under {tie} excepted) and "
          f"log-probabilities within {logprob_tolerance}")
    return failed


def parity(hf_dir, fp32_port, bf16_port, new_tokens):
    if torch is None:
        failed = False
        for port in (fp32_port, bf16_port):
            if port != "none":
                full = all(len(put(port, {"prompts": [p], "tokens_to_generate": new_tokens, "top_k": 1,
                                          "stop_token": -1})["tokens"][0]) == len(prompt_tokens(port, p)) + new_tokens
                           for p in PROMPTS)
                print(f"{'PASS' if full else 'FAIL'} ours on port {port}: every prompt continued by {new_tokens} tokens")
                failed |= not full
        return failed
    failed = False
    fp32 = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.float32).to(device()).eval()
    torch.backends.cuda.matmul.allow_tf32 = False
    failed |= compare("fp32: ours --device cpu against transformers float32", fp32_port, fp32, new_tokens, 1e-3, 1e-3)
    del fp32
    if bf16_port != "none":
        bf16 = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.bfloat16).to(device()).eval()
        failed |= compare("bf16: ours --device cuda against transformers bfloat16", bf16_port, bf16, new_tokens, 0.05, 0.1)
    return failed


def timed(fn):
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def peer_loop(model, ids, n):
    """plain PyTorch KV-cache greedy loop: (time to first token, total time)"""
    with torch.no_grad():
        ttft, out = timed(lambda: model(ids, use_cache=True))
        nxt = out.logits[:, -1, :VOCAB].argmax(-1, keepdim=True)
        past = out.past_key_values

        def rest():
            nonlocal out, past, nxt
            for _ in range(n - 1):
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1, :VOCAB].argmax(-1, keepdim=True)
        others, _ = timed(rest)
    return ttft, ttft + others


def peer_generate(model, ids, n):
    """transformers' generate, greedy, exactly n new tokens: (time to first token, total time)"""
    mask = torch.ones_like(ids)
    with torch.no_grad():
        ttft, _ = timed(lambda: model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=1,
                                               min_new_tokens=1, pad_token_id=VOCAB - 1))
        total, out = timed(lambda: model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                                                  min_new_tokens=n, pad_token_id=VOCAB - 1))
    assert out.shape[1] == ids.shape[1] + n
    return ttft, total


def speed(hf_dir, port, n):
    model = None
    if torch is not None:
        model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.bfloat16).to(device()).eval()
    print("\n| batch | prompt tokens | new tokens | ours TTFT ms | ours tokens/s | loop TTFT ms | loop tokens/s | "
          "generate TTFT ms | generate tokens/s | ours / loop | ours / generate |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    failed = False
    prompt_text = "The quick brown fox jumps over the lazy dog. " * 13
    prompt = prompt_tokens(port, prompt_text)
    for batch in (1, 32):
        body = {"prompts": [prompt_text] * batch, "top_k": 1, "stop_token": -1}
        put(port, dict(body, tokens_to_generate=4))  # warm-up
        ttft = statistics.median(timed(lambda: put(port, dict(body, tokens_to_generate=1)))[0] for _ in range(3))
        total, r = timed(lambda: put(port, dict(body, tokens_to_generate=n)))
        generated = sum(len(t) - len(prompt) for t in r["tokens"])
        if generated != batch * n:
            print(f"FAIL ours generated {generated} tokens, not {batch} x {n}")
            failed = True
        ours = batch * (n - 1) / max(total - ttft, 1e-9)
        row = [str(batch), str(len(prompt)), str(n), f"{ttft * 1e3:.1f}", f"{ours:.0f}"]
        if model is not None:
            ids = torch.tensor([prompt] * batch, device=device())
            peer_loop(model, ids, 8)  # warm-up
            loop_ttft, loop_total = peer_loop(model, ids, n)
            loop = batch * (n - 1) / (loop_total - loop_ttft)
            peer_generate(model, ids, 8)  # warm-up
            gen_ttft, gen_total = peer_generate(model, ids, n)
            gen = batch * (n - 1) / (gen_total - gen_ttft)
            row += [f"{loop_ttft * 1e3:.1f}", f"{loop:.0f}", f"{gen_ttft * 1e3:.1f}", f"{gen:.0f}",
                    f"{ours / loop:.2f}", f"{ours / gen:.2f}"]
        else:
            row += ["-"] * 6
        print("| " + " | ".join(row) + " |")
    print(f"\n{'FAIL' if failed else 'PASS'} speed: every sequence generated all {n} tokens")
    return failed


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "parity" and len(sys.argv) >= 5:
        failed = parity(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 32)
    elif mode == "speed" and len(sys.argv) >= 4:
        failed = speed(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 128)
    else:
        sys.exit(__doc__)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
