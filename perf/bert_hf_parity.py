#!/usr/bin/env python3
"""bert_hf_parity.py: transformers' MegatronBertForPreTraining (MegatronBertForMaskedLM for a
--bert-no-binary-head model: config.json's architectures), loaded from a checkpoint exported with
app/convert_checkpoint --to-hf, against our forward pass (tests/tools/bert_logits on the same
checkpoint, fp32 CPU backend) on a few samples with token types and padding.

First checks the load: no parameter missing or unexpected (but the decoder, tied to the word
embeddings as transformers ties it) and the decoder tied when config.json says so. Then, per
sample (OURS_PREFIX.N.tokens / .types / .mask / .logits / .binary) and per setting, float32 on the
CPU (and on the GPU when there is one), prints the largest absolute difference of the MLM logits
over the valid positions and of their log-probabilities (log_softmax over vocab_size), the
largest logit difference relative to the largest logit, and the binary (seq_relationship)
logits' largest difference; then one PASS/FAIL line per setting. The settings:
  lm-head exact GeLU  the LM head's transform_act_fn replaced by exact GeLU: our model's function
                      (its encoder MLP is GeLU's tanh form, config.json's gelu_new; Megatron's
                      LM head computes exact GeLU). Limits: relative logit and log-prob 1e-4,
                      binary 1e-4.
  as configured       transformers as config.json says (gelu_new in the LM head too): differs by
                      the tanh approximation inside the LM head. Limits 1e-3.
Exits 1 on any FAIL.

usage: bert_hf_parity.py HF_DIR OURS_PREFIX PROMPTS
       bert_hf_parity.py make OUT_DIR LIKE_CONFIG
  make: saves a random model of LIKE_CONFIG's architecture and sizes (the export's config.json)
  with every parameter perturbed (LayerNorm weights not 1, biases not 0, so that each tensor's
  mapping matters), for the import direction: convert_checkpoint --from-hf, then the comparison.
"""
import json
import sys

import numpy as np
import torch
import transformers


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def load(hf_dir, architecture, device):
    model_class = getattr(transformers, architecture)
    # float32 by .float() (from_pretrained's dtype keyword is torch_dtype before transformers 4.56, dtype after)
    model, info = model_class.from_pretrained(hf_dir, output_loading_info=True, attn_implementation="eager")
    model = model.float()
    tied_ok = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "bert.embeddings.position_ids"}
    missing = [k for k in info.get("missing_keys", []) if k not in tied_ok]
    unexpected = [k for k in info.get("unexpected_keys", []) if k not in tied_ok]
    mismatched = list(info.get("mismatched_keys", []))
    if missing or unexpected or mismatched:
        print(f"FAIL loading {hf_dir} as {architecture}: missing {missing}, unexpected {unexpected}, "
              f"mismatched {mismatched}")
        sys.exit(1)
    return model.to(device).eval()


def make(out_dir, like):
    config_dict = json.load(open(like))
    architecture = config_dict["architectures"][0]
    config = transformers.MegatronBertConfig(**{k: v for k, v in config_dict.items()
                                                if k not in ("architectures", "torch_dtype", "dtype")})
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name != "cls.predictions.decoder.weight":  # tied to the word embeddings
                parameter.add_(torch.randn_like(parameter) * 0.05)
    model.save_pretrained(out_dir, safe_serialization=True)
    print(f"# made a random {architecture} like {like} in {out_dir} (every parameter perturbed by N(0, 0.05))")
    return 0


def main():
    if sys.argv[1] == "make":
        sys.exit(make(sys.argv[2], sys.argv[3]))
    hf_dir, prefix, prompts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = json.load(open(f"{hf_dir}/config.json"))
    vocab, architecture = config["vocab_size"], config["architectures"][0]
    binary_head = architecture == "MegatronBertForPreTraining"
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs on the GPU too
    torch.backends.cudnn.allow_tf32 = False
    failed = False
    for device in devices:
        model = load(hf_dir, architecture, device)
        decoder, embeddings = model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight
        if config.get("tie_word_embeddings", True) and not torch.equal(decoder, embeddings):
            print("FAIL the MLM decoder is not tied to the word embeddings")
            sys.exit(1)
        configured_act = model.cls.predictions.transform.transform_act_fn
        for name, act, limit in (("lm-head exact GeLU", torch.nn.GELU(), 1e-4), ("as configured", configured_act, 1e-3)):
            model.cls.predictions.transform.transform_act_fn = act
            worst_logit = worst_logprob = worst_relative = worst_binary = 0.0
            agree = total = 0
            for p in range(prompts):
                tokens, types, mask = (np.fromfile(f"{prefix}.{p}.{s}", dtype=np.int32) for s in ("tokens", "types", "mask"))
                valid = np.nonzero(mask)[0]
                ours = np.fromfile(f"{prefix}.{p}.logits", dtype=np.float32).reshape(len(valid), -1)[:, :vocab]
                as_input = lambda a: torch.from_numpy(a.astype(np.int64)).unsqueeze(0).to(device)
                with torch.no_grad():
                    out = model(input_ids=as_input(tokens), token_type_ids=as_input(types), attention_mask=as_input(mask))
                mlm = out.prediction_logits if binary_head else out.logits
                theirs = mlm[0].float().cpu().numpy()[valid]
                d_logit = float(np.abs(theirs - ours).max())
                d_logprob = float(np.abs(log_softmax(theirs.astype(np.float64)) - log_softmax(ours.astype(np.float64))).max())
                relative = d_logit / float(np.abs(ours).max())
                d_binary = 0.0
                if binary_head:
                    ours_binary = np.fromfile(f"{prefix}.{p}.binary", dtype=np.float32)
                    d_binary = float(np.abs(out.seq_relationship_logits[0].float().cpu().numpy() - ours_binary).max())
                print(f"  {name:18s} float32 on {device:4s} sample {p} ({len(valid)} of {len(tokens)} positions valid): "
                      f"max|d logit| {d_logit:.3e}, relative {relative:.3e}, max|d log-prob| {d_logprob:.3e}, "
                      f"binary max|d logit| {d_binary:.3e}")
                worst_logit, worst_logprob = max(worst_logit, d_logit), max(worst_logprob, d_logprob)
                worst_relative, worst_binary = max(worst_relative, relative), max(worst_binary, d_binary)
                agree += int((theirs.argmax(-1) == ours.argmax(-1)).sum())
                total += len(valid)
            ok = worst_relative <= limit and worst_logprob <= limit and worst_binary <= limit
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'} transformers {architecture} float32 on {device}, {name}, vs ours (fp32 "
                  f"CPU), {prompts} samples: max|d logit| {worst_logit:.3e}, relative {worst_relative:.3e}, max|d "
                  f"log-prob| {worst_logprob:.3e}, binary {worst_binary:.3e} (limit {limit:g}); MLM argmax agrees on "
                  f"{agree} of {total} positions")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
