#!/usr/bin/env python3
"""hf_t5_reference.py: Hugging Face T5ForConditionalGeneration's forward pass written out in
plain Python (float64, no torch), from transformers' modeling_t5.py, for the T5 configurations
convert_checkpoint exports (relative position bias in block 0 of each stack shared by its
layers, T5LayerNorm = RMSNorm without bias or mean, attention without 1/sqrt(d) scaling,
feed_forward_proj gated-silu, gelu (exact, erf) or gelu_new (tanh), untied lm_head without scaling). It reads an exported
folder (config.json, model.safetensors, F32) and tests/tools/t5_logits' tokens, and compares
the logits with ours: prints the largest |difference| relative to the largest |logit| and exits
1 when it exceeds the limit (default 1e-4: ours are fp32, the reference float64).

usage: hf_t5_reference.py HF_DIR OURS_PREFIX [LIMIT]
"""
import array
import json
import math
import struct
import sys


def load_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        assert v["dtype"] == "F32", f"{name}: {v['dtype']} (the reference reads F32 exports)"
        begin, end = v["data_offsets"]
        values = array.array("f")
        values.frombytes(data[8 + n + begin:8 + n + end])
        shape = v["shape"]
        if len(shape) == 2:
            tensors[name] = [list(values[r * shape[1]:(r + 1) * shape[1]]) for r in range(shape[0])]
        else:
            tensors[name] = list(values)
    return tensors


def read_ints(path):
    values = array.array("i")
    values.frombytes(open(path, "rb").read())
    return list(values)


def linear(x, w):  # x [C], w [out, C] -> [out]
    return [sum(a * b for a, b in zip(row, x)) for row in w]


def rms_norm(x, w, eps):
    variance = sum(v * v for v in x) / len(x)
    r = 1.0 / math.sqrt(variance + eps)
    return [a * r * g for a, g in zip(x, w)]


def relative_bucket(relative_position, bidirectional, num_buckets, max_distance):
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += num_buckets if relative_position > 0 else 0
        relative_position = abs(relative_position)
    else:
        relative_position = -min(relative_position, 0)
    max_exact = num_buckets // 2
    if relative_position < max_exact:
        return buckets + relative_position
    large = max_exact + int(math.log(relative_position / max_exact) / math.log(max_distance / max_exact)
                            * (num_buckets - max_exact))
    return buckets + min(large, num_buckets - 1)


def attention(xq, xkv, p, heads, d_kv, bias, key_valid, causal):
    """T5Attention: scores q.k (no scaling) + position bias, masked, softmax, o"""
    q = [linear(x, p["q"]) for x in xq]
    k = [linear(x, p["k"]) for x in xkv]
    v = [linear(x, p["v"]) for x in xkv]
    out = []
    for t1 in range(len(xq)):
        row = [0.0] * (heads * d_kv)
        for h in range(heads):
            s = slice(h * d_kv, (h + 1) * d_kv)
            visible = [t2 for t2 in range(len(xkv)) if key_valid[t2] and (not causal or t2 <= t1)]
            scores = {t2: sum(a * b for a, b in zip(q[t1][s], k[t2][s])) + (bias[h][t1][t2] if bias else 0.0)
                      for t2 in visible}
            top = max(scores.values())
            e = {t2: math.exp(scores[t2] - top) for t2 in visible}
            total = sum(e.values())
            for t2 in visible:
                a = e[t2] / total
                for d in range(d_kv):
                    row[h * d_kv + d] += a * v[t2][h * d_kv + d]
        out.append(linear(row, p["o"]))
    return out


def gelu_new(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1.0 + math.exp(-x))


def feed_forward(x, w, prefix, gated, act=gelu_new):
    if gated:
        h = [silu(a) * b for a, b in zip(linear(x, w[prefix + "wi_0.weight"]), linear(x, w[prefix + "wi_1.weight"]))]
    else:
        h = [act(a) for a in linear(x, w[prefix + "wi.weight"])]
    return linear(h, w[prefix + "wo.weight"])


def position_bias(table, heads, length, bidirectional, c):
    buckets = [[relative_bucket(t2 - t1, bidirectional, c["relative_attention_num_buckets"],
                                c["relative_attention_max_distance"]) for t2 in range(length)] for t1 in range(length)]
    return [[[table[buckets[t1][t2]][h] for t2 in range(length)] for t1 in range(length)] for h in range(heads)]


def add(a, b):
    return [[x + y for x, y in zip(r, s)] for r, s in zip(a, b)]


def forward(w, c, enc, mask, dec):
    heads, d_kv, eps = c["num_heads"], c["d_kv"], c["layer_norm_epsilon"]
    gated = c["feed_forward_proj"] == "gated-silu"
    act = {"gelu": gelu, "gelu_new": gelu_new, "gelu_pytorch_tanh": gelu_new}.get(c["feed_forward_proj"], gelu_new)
    shared = w["shared.weight"]
    def attn(prefix, kind):
        return {p: w[f"{prefix}.{kind}.{p}.weight"] for p in "qkvo"}
    x = [list(shared[t]) for t in enc]
    bias = position_bias(w["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], heads, len(enc), True, c)
    for l in range(c["num_layers"]):
        b = f"encoder.block.{l}.layer"
        n = [rms_norm(v, w[f"{b}.0.layer_norm.weight"], eps) for v in x]
        x = add(x, attention(n, n, attn(f"{b}.0", "SelfAttention"), heads, d_kv, bias, mask, False))
        n = [rms_norm(v, w[f"{b}.1.layer_norm.weight"], eps) for v in x]
        x = add(x, [feed_forward(v, w, f"{b}.1.DenseReluDense.", gated, act) for v in n])
    encoded = [rms_norm(v, w["encoder.final_layer_norm.weight"], eps) for v in x]
    y = [list(shared[t]) for t in dec]
    bias = position_bias(w["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], heads, len(dec), False, c)
    for l in range(c["num_decoder_layers"]):
        b = f"decoder.block.{l}.layer"
        n = [rms_norm(v, w[f"{b}.0.layer_norm.weight"], eps) for v in y]
        y = add(y, attention(n, n, attn(f"{b}.0", "SelfAttention"), heads, d_kv, bias, [1] * len(dec), True))
        n = [rms_norm(v, w[f"{b}.1.layer_norm.weight"], eps) for v in y]
        y = add(y, attention(n, encoded, attn(f"{b}.1", "EncDecAttention"), heads, d_kv, None, mask, False))
        n = [rms_norm(v, w[f"{b}.2.layer_norm.weight"], eps) for v in y]
        y = add(y, [feed_forward(v, w, f"{b}.2.DenseReluDense.", gated, act) for v in n])
    y = [rms_norm(v, w["decoder.final_layer_norm.weight"], eps) for v in y]
    return [linear(v, w["lm_head.weight"]) for v in y]


def main():
    hf_dir, prefix = sys.argv[1], sys.argv[2]
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    c = json.load(open(f"{hf_dir}/config.json"))
    assert c["model_type"] == "t5" and not c["tie_word_embeddings"], "an untied T5 export"
    w = load_safetensors(f"{hf_dir}/model.safetensors")
    enc, mask, dec = read_ints(f"{prefix}.enc"), read_ints(f"{prefix}.enc_mask"), read_ints(f"{prefix}.dec")
    ours = array.array("f")
    ours.frombytes(open(f"{prefix}.logits", "rb").read())
    vocab, padded = c["vocab_size"], len(ours) // len(dec)
    theirs = forward(w, c, enc, mask, dec)
    worst = max(abs(theirs[t][v] - ours[t * padded + v]) for t in range(len(dec)) for v in range(vocab))
    scale = max(abs(ours[t * padded + v]) for t in range(len(dec)) for v in range(vocab))
    agree = sum(max(range(vocab), key=lambda v: theirs[t][v]) == max(range(vocab), key=lambda v: ours[t * padded + v])
                for t in range(len(dec)))
    ok = worst <= limit * scale
    print(f"{'PASS' if ok else 'FAIL'} HF T5ForConditionalGeneration reference (float64) vs ours: {len(dec)} decoder "
          f"positions over {sum(mask)} of {len(enc)} encoder tokens: max|d logit| {worst:.3e}, relative "
          f"{worst / scale:.3e} (limit {limit:g}); argmax agrees at {agree} of {len(dec)}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
