#!/usr/bin/env python3
"""qwen2_moe_reference.py: an independent reference of Hugging Face transformers'
Qwen2MoeForCausalLM forward pass, in plain Python (float64, no numpy or torch), written from
transformers' modeling_qwen2_moe.py; the helpers (safetensors reading, RMSNorm, RoPE, softmax)
are mixtral_reference.py's. It reads a Hugging Face folder and the tokens and logits
tests/tools/model_logits wrote for our forward of the same model, computes the logits, and
compares as mixtral_reference.py does (PASS within --tol, default 1e-4; exit 1 on FAIL).

  decoder layer: h = x + o_proj(attention(input_layernorm(x)))     q, k, v with biases (qkv_bias)
                 y = h + mlp(post_attention_layernorm(h))
  mlp:           layer l sparse when l not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0:
                   p = softmax(gate(x)) over every expert; the num_experts_per_tok largest,
                   divided by their sum only with norm_topk_prob;
                   y = sum_j p_j * down(silu(gate_proj x) * up_proj x) of expert j
                       + sigmoid(shared_expert_gate x) * shared_expert(x)
                 else the dense SwiGLU MLP of intermediate_size

--variant, the tests' negative controls:
  flip-normalization  renormalize when norm_topk_prob is false, and not when it is true
  no-shared-gate      the shared expert's output without its sigmoid gate
  no-qkv-bias         q, k and v without their biases

usage: qwen2_moe_reference.py HF_DIR TOKENS LOGITS [--tol 1e-4] [--variant NAME]
"""
import json
import math
import operator
import os
import sys
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mixtral_reference import (Stats, fail, linear, log_softmax, matrix, read_safetensors,  # noqa: E402
                               rms_norm, rope, silu, softmax, vector)

VARIANTS = ("flip-normalization", "no-shared-gate", "no-qkv-bias")


def swiglu_mlp(x, gate_proj, up_proj, down_proj):
    return linear(down_proj, [silu(g) * u for g, u in zip(linear(gate_proj, x), linear(up_proj, x))])


def sparse_moe(x, layer, config, variant, stats):
    probs = softmax(linear(layer["gate"], x))
    k = config.get("num_experts_per_tok", 4)
    order = sorted(range(len(probs)), key=lambda e: -probs[e])
    chosen = order[:k]
    if k < len(probs):
        stats.smallest_margin = min(stats.smallest_margin, probs[order[k - 1]] - probs[order[k]])
    weights = [probs[e] for e in chosen]
    normalize = bool(config.get("norm_topk_prob", False))
    if variant == "flip-normalization":
        normalize = not normalize
    if normalize:
        total = sum(weights)
        weights = [w / total for w in weights]
    out = [0.0] * len(x)
    for e, w in zip(chosen, weights):
        out = [o + w * y for o, y in zip(out, swiglu_mlp(x, *layer["experts"][e]))]
    shared = swiglu_mlp(x, *layer["shared"])
    scale = 1.0 if variant == "no-shared-gate" else 1.0 / (1.0 + math.exp(-linear(layer["shared_gate"], x)[0]))
    return [o + scale * s for o, s in zip(out, shared)]


def forward(tokens, tensors, config, variant, stats):
    C = config["hidden_size"]
    H = config["num_attention_heads"]
    G = config.get("num_key_value_heads") or H
    D = config.get("head_dim") or C // H
    F = config["intermediate_size"]
    Fm = config.get("moe_intermediate_size", 1408)
    Fs = config.get("shared_expert_intermediate_size", 5632)
    E = config.get("num_experts", 60)
    V = config["vocab_size"]
    L = config["num_hidden_layers"]
    eps = config.get("rms_norm_eps", 1e-6)
    rope_parameters = config.get("rope_parameters") or {}
    theta = rope_parameters.get("rope_theta", config.get("rope_theta", 10000.0))
    if config.get("rope_scaling") not in (None, {}) or rope_parameters.get("rope_type", "default") != "default":
        fail("the reference computes the default rotary embedding only (no rope scaling)")
    step = config.get("decoder_sparse_step", 1)
    dense_layers = set(config.get("mlp_only_layers") or [])
    qkv_bias = config.get("qkv_bias", True) and variant != "no-qkv-bias"
    embed = matrix(tensors, "model.embed_tokens.weight", V, C)
    head = matrix(tensors, "lm_head.weight", V, C) if "lm_head.weight" in tensors else embed
    x = [list(embed[t]) for t in tokens]
    T = len(tokens)
    per = H // G
    for l in range(L):
        p = "model.layers.%d." % l
        sparse = l not in dense_layers and E > 0 and (l + 1) % step == 0
        if sparse:
            m = p + "mlp."
            layer = {
                "gate": matrix(tensors, m + "gate.weight", E, C),
                "experts": [(matrix(tensors, m + "experts.%d.gate_proj.weight" % e, Fm, C),
                             matrix(tensors, m + "experts.%d.up_proj.weight" % e, Fm, C),
                             matrix(tensors, m + "experts.%d.down_proj.weight" % e, C, Fm)) for e in range(E)],
                "shared": (matrix(tensors, m + "shared_expert.gate_proj.weight", Fs, C),
                           matrix(tensors, m + "shared_expert.up_proj.weight", Fs, C),
                           matrix(tensors, m + "shared_expert.down_proj.weight", C, Fs)),
                "shared_gate": matrix(tensors, m + "shared_expert_gate.weight", 1, C),
            }
        else:
            dense = (matrix(tensors, p + "mlp.gate_proj.weight", F, C), matrix(tensors, p + "mlp.up_proj.weight", F, C),
                     matrix(tensors, p + "mlp.down_proj.weight", C, F))
        wq = matrix(tensors, p + "self_attn.q_proj.weight", H * D, C)
        wk = matrix(tensors, p + "self_attn.k_proj.weight", G * D, C)
        wv = matrix(tensors, p + "self_attn.v_proj.weight", G * D, C)
        zero = lambda n: [0.0] * n  # noqa: E731
        bq = vector(tensors, p + "self_attn.q_proj.bias", H * D) if qkv_bias else zero(H * D)
        bk = vector(tensors, p + "self_attn.k_proj.bias", G * D) if qkv_bias else zero(G * D)
        bv = vector(tensors, p + "self_attn.v_proj.bias", G * D) if qkv_bias else zero(G * D)
        wo = matrix(tensors, p + "self_attn.o_proj.weight", C, H * D)
        norm1 = vector(tensors, p + "input_layernorm.weight", C)
        norm2 = vector(tensors, p + "post_attention_layernorm.weight", C)
        normed = [rms_norm(v, norm1, eps) for v in x]
        q = [[a + b for a, b in zip(linear(wq, v), bq)] for v in normed]
        k = [[a + b for a, b in zip(linear(wk, v), bk)] for v in normed]
        v_ = [[a + b for a, b in zip(linear(wv, v), bv)] for v in normed]
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
            h = rms_norm(x[t], norm2, eps)
            y = sparse_moe(h, layer, config, variant, stats) if sparse else swiglu_mlp(h, *dense)
            x[t] = [a + b for a, b in zip(x[t], y)]
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
            if variant not in VARIANTS:
                fail("unknown --variant " + variant)
        argv = argv[:-2]
    if len(argv) != 3:
        fail("usage: qwen2_moe_reference.py HF_DIR TOKENS LOGITS [--tol 1e-4] [--variant NAME]")
    folder, tokens_path, logits_path = argv
    config = json.load(open(os.path.join(folder, "config.json")))
    if config.get("model_type") != "qwen2_moe":
        fail("%s/config.json: model_type is %s, expected qwen2_moe" % (folder, config.get("model_type")))
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
    print("qwen2_moe_reference%s: %d tokens, vocab %d: max|d logit| %.3e (largest logit %.3f, relative %.3e), "
          "max|d log-prob| %.3e, smallest top-k routing margin %.3e" %
          (" (variant %s)" % variant if variant else "", T, V, d_logit, largest, relative, d_logprob,
           stats.smallest_margin))
    ok = d_logprob <= tol and relative <= tol
    print("%s: tolerance %g on max|d log-prob| and the relative logit difference" % ("PASS" if ok else "FAIL", tol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
