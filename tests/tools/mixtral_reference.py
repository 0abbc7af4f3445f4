#!/usr/bin/env python3
"""mixtral_reference.py: an independent reference of Hugging Face transformers'
MixtralForCausalLM forward pass, in plain Python (float64, no numpy or torch), written from
transformers' modeling_mixtral.py: it reads a Hugging Face folder (config.json and
model.safetensors or its shards, F32 or BF16) and the tokens and logits tests/tools/model_logits wrote for our forward
of the same model, computes the logits, and compares.

  decoder layer: h = x + o_proj(attention(input_layernorm(x)))
                 y = h + block_sparse_moe(post_attention_layernorm(h))
  RMSNorm:       w * x / sqrt(mean(x^2) + rms_norm_eps)
  attention:     causal, num_key_value_heads groups (query head i reads group i // (H / G)),
                 RoPE rotate_half on q and k: x*cos + rotate_half(x)*sin, frequencies
                 rope_theta^(-2i/D) duplicated over both halves, scale 1/sqrt(head_dim)
  sparse MoE:    p = softmax(gate(x)) over every expert; the num_experts_per_tok largest,
                 renormalized to sum 1; y = sum_j p_j * w2(silu(w1 x) * w3 x) of expert j
  output:        lm_head(norm(x)), or embed_tokens when tied

Prints the largest logit difference (absolute, and relative to the largest logit), the largest
difference of the log-probabilities (log-softmax over config's vocab_size) and the smallest gap
between the k-th and (k+1)-th routing probability seen (a tie there would let float32 and
float64 choose different experts), then PASS or FAIL: max |d log-prob| <= TOL and relative
logit difference <= TOL (default 1e-4, the issue's float32 tolerance). Exits 1 on FAIL.

--variant changes the reference on purpose, for the tests' negative controls:
  no-renormalize  the top-k probabilities are not renormalized (Megatron's
                  --moe-router-pre-softmax, Qwen2-MoE's norm_topk_prob false)
  swap-gate-up    w1 and w3 exchanged (fc1's halves read in the wrong order)

usage: mixtral_reference.py HF_DIR TOKENS LOGITS [--tol 1e-4] [--variant NAME]
"""
import json
import math
import operator
import os
import struct
import sys
from array import array


def fail(message):
    sys.stderr.write("mixtral_reference: error: " + message + "\n")
    sys.exit(2)


def read_safetensors(folder):
    """{name: (shape, flat list of floats)} of every tensor (F32 or BF16) of the folder's model files"""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
        files = [os.path.join(folder, f) for f in sorted(set(index["weight_map"].values()))]
    tensors = {}
    for path in files:
        data = open(path, "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            raw = data[8 + n + begin:8 + n + end]
            if entry["dtype"] == "F32":
                values = list(struct.unpack("<%df" % (len(raw) // 4), raw))
            elif entry["dtype"] == "BF16":  # the high half of a float32
                values = [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                          for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
            else:
                fail("%s: tensor %s is %s; the reference reads F32 and BF16" % (path, name, entry["dtype"]))
            tensors[name] = (entry["shape"], values)
    return tensors


def matrix(tensors, name, rows, cols):
    shape, values = tensors[name]
    if shape != [rows, cols]:
        fail("%s has shape %s, expected [%d, %d]" % (name, shape, rows, cols))
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


def vector(tensors, name, size):
    shape, values = tensors[name]
    if shape != [size]:
        fail("%s has shape %s, expected [%d]" % (name, shape, size))
    return values


def linear(weight, x):
    return [sum(map(operator.mul, row, x)) for row in weight]


def rms_norm(x, weight, eps):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [w * v * scale for w, v in zip(weight, x)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def softmax(values):
    top = max(values)
    e = [math.exp(v - top) for v in values]
    total = sum(e)
    return [v / total for v in e]


def log_softmax(values):
    top = max(values)
    log_total = top + math.log(sum(math.exp(v - top) for v in values))
    return [v - log_total for v in values]


def rope(x, position, head_dim, theta):
    """x*cos + rotate_half(x)*sin, rotate_half(x) = [-x2, x1] (HF Llama/Mixtral)"""
    half = head_dim // 2
    out = list(x)
    for i in range(half):
        angle = position * theta ** (-2.0 * i / head_dim)
        c, s = math.cos(angle), math.sin(angle)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


class Stats:
    smallest_margin = float("inf")


def sparse_moe(x, layer, config, variant, stats):
    probs = softmax(linear(layer["gate"], x))
    k = config["num_experts_per_tok"]
    order = sorted(range(len(probs)), key=lambda e: -probs[e])
    chosen = order[:k]
    if k < len(probs):
        stats.smallest_margin = min(stats.smallest_margin, probs[order[k - 1]] - probs[order[k]])
    weights = [probs[e] for e in chosen]
    if variant != "no-renormalize":
        total = sum(weights)
        weights = [w / total for w in weights]
    out = [0.0] * len(x)
    for e, w in zip(chosen, weights):
        w1, w2, w3 = layer["experts"][e]
        if variant == "swap-gate-up":
            w1, w3 = w3, w1
        hidden = [silu(g) * u for g, u in zip(linear(w1, x), linear(w3, x))]
        out = [o + w * y for o, y in zip(out, linear(w2, hidden))]
    return out


def forward(tokens, tensors, config, variant, stats):
    C = config["hidden_size"]
    H = config["num_attention_heads"]
    G = config.get("num_key_value_heads") or H
    D = config.get("head_dim") or C // H
    F = config["intermediate_size"]
    E = config["num_local_experts"]
    V = config["vocab_size"]
    eps = config.get("rms_norm_eps", 1e-5)
    rope_parameters = config.get("rope_parameters") or {}  # transformers 5 keeps rope_theta there
    theta = rope_parameters.get("rope_theta", config.get("rope_theta", 1e6))
    if config.get("rope_scaling") not in (None, {}) or rope_parameters.get("rope_type", "default") != "default":
        fail("the reference computes the default rotary embedding only (no rope scaling)")
    embed = matrix(tensors, "model.embed_tokens.weight", V, C)
    head = matrix(tensors, "lm_head.weight", V, C) if "lm_head.weight" in tensors else embed
    x = [list(embed[t]) for t in tokens]
    T = len(tokens)
    per = H // G
    for l in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % l
        layer = {
            "gate": matrix(tensors, p + "block_sparse_moe.gate.weight", E, C),
            "experts": [(matrix(tensors, p + "block_sparse_moe.experts.%d.w1.weight" % e, F, C),
                         matrix(tensors, p + "block_sparse_moe.experts.%d.w2.weight" % e, C, F),
                         matrix(tensors, p + "block_sparse_moe.experts.%d.w3.weight" % e, F, C)) for e in range(E)],
        }
        wq = matrix(tensors, p + "self_attn.q_proj.weight", H * D, C)
        wk = matrix(tensors, p + "self_attn.k_proj.weight", G * D, C)
        wv = matrix(tensors, p + "self_attn.v_proj.weight", G * D, C)
        wo = matrix(tensors, p + "self_attn.o_proj.weight", C, H * D)
        norm1 = vector(tensors, p + "input_layernorm.weight", C)
        norm2 = vector(tensors, p + "post_attention_layernorm.weight", C)
        normed = [rms_norm(v, norm1, eps) for v in x]
        q = [linear(wq, v) for v in normed]
        k = [linear(wk, v) for v in normed]
        v_ = [linear(wv, v) for v in normed]
        q = [[rope(q[t][h * D:(h + 1) * D], t, D, theta) for h in range(H)] for t in range(T)]
        k = [[rope(k[t][g * D:(g + 1) * D], t, D, theta) for g in range(G)] for t in range(T)]
        v_ = [[v_[t][g * D:(g + 1) * D] for g in range(G)] for t in range(T)]
        scale = 1.0 / math.sqrt(D)
        for t in range(T):
            context = []
            for h in range(H):
                g = h // per
                weights = softmax([sum(map(operator.mul, q[t][h], k[s][g])) * scale for s in range(t + 1)])
                context.extend(sum(weights[s] * v_[s][g][d] for s in range(t + 1)) for d in range(D))
            x[t] = [a + b for a, b in zip(x[t], linear(wo, context))]
        for t in range(T):
            moe = sparse_moe(rms_norm(x[t], norm2, eps), layer, config, variant, stats)
            x[t] = [a + b for a, b in zip(x[t], moe)]
    final = vector(tensors, "model.norm.weight", C)
    return [linear(head, rms_norm(v, final, eps)) for v in x]


def main():
    argv = sys.argv[1:]
    tol, variant = 1e-4, None
    while len(argv) > 3 and argv[-2] in ("--tol", "--variant"):
        if argv[-2] == "--tol":
            tol = float(argv[-1])
        else:
            variant = argv[-1]
            if variant not in ("no-renormalize", "swap-gate-up"):
                fail("unknown --variant " + variant)
        argv = argv[:-2]
    if len(argv) != 3:
        fail("usage: mixtral_reference.py HF_DIR TOKENS LOGITS [--tol 1e-4] [--variant NAME]")
    folder, tokens_path, logits_path = argv
    config = json.load(open(os.path.join(folder, "config.json")))
    if config.get("model_type") != "mixtral":
        fail("%s/config.json: model_type is %s, expected mixtral" % (folder, config.get("model_type")))
    tokens = array("i")
    tokens.frombytes(open(tokens_path, "rb").read())
    ours_flat = array("f")
    ours_flat.frombytes(open(logits_path, "rb").read())
    T, V = len(tokens), config["vocab_size"]
    if len(ours_flat) % T:
        fail("%s: %d values are not %d rows" % (logits_path, len(ours_flat), T))
    padded = len(ours_flat) // T
    ours = [ours_flat[t * padded:t * padded + V].tolist() for t in range(T)]
    stats = Stats()
    theirs = forward(list(tokens), read_safetensors(folder), config, variant, stats)
    d_logit = max(abs(a - b) for r, s in zip(theirs, ours) for a, b in zip(r, s))
    largest = max(abs(b) for s in ours for b in s)
    d_logprob = max(abs(a - b) for r, s in zip(theirs, ours) for a, b in zip(log_softmax(r), log_softmax(s)))
    relative = d_logit / largest
    print("mixtral_reference%s: %d tokens, vocab %d: max|d logit| %.3e (largest logit %.3f, relative %.3e), "
          "max|d log-prob| %.3e, smallest top-k routing margin %.3e" %
          (" (variant %s)" % variant if variant else "", T, V, d_logit, largest, relative, d_logprob,
           stats.smallest_margin))
    ok = d_logprob <= tol and relative <= tol
    print("%s: tolerance %g on max|d log-prob| and the relative logit difference" % ("PASS" if ok else "FAIL", tol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
