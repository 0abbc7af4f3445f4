#!/usr/bin/env python3
"""megatron_bert_reference.py: an independent reference of Hugging Face transformers'
MegatronBertForPreTraining forward pass (MegatronBertForMaskedLM without cls.seq_relationship),
in plain Python (float64, no numpy or torch), written from transformers' modeling_megatron_bert.py:
it reads a Hugging Face folder (config.json, model.safetensors, F32 or BF16) and the inputs and
logits tests/tools/bert_logits wrote for our forward of the same model, computes the logits, and
compares.

  embeddings:  word_embeddings[id] + token_type_embeddings[type] + position_embeddings[pos]
               (no LayerNorm: Megatron moves it into the layers)
  layer:       h = x + attention.output.dense(attention(attention.ln(x)))
               y = h + output.dense(act(intermediate.dense(ln(h))))
  attention:   per head softmax(q k^T / sqrt(hidden / heads) + mask) v, query/key/value
               [H*D, C] head-major; padded keys (attention_mask 0) take no weight
  final:       s = encoder.ln(y); pooled = tanh(pooler.dense(s[0]))
  heads:       MLM logits = decoder(LayerNorm(act(transform.dense(s)))) + cls.predictions.bias,
               decoder = word_embeddings (tied) or cls.predictions.decoder.weight;
               binary logits = seq_relationship(pooled)
  act:         config's hidden_act: gelu_new / gelu_pytorch_tanh / gelu_fast (the tanh form) or
               gelu (exact, erf)

Prints the largest MLM logit difference over the valid positions (absolute, and relative to the
largest logit), the largest log-probability difference (log-softmax over vocab_size) and the
binary logits' largest difference, then PASS or FAIL: the relative logit difference, the
log-prob difference and the binary difference all <= TOL (default 1e-4). Exits 1 on FAIL.

--lm-head-gelu exact computes the LM head's transform with exact GeLU whatever hidden_act says:
what our model computes (hf_bert_config.h: Megatron's encoder MLP is the tanh form, its LM head
exact GeLU; transformers has one hidden_act for both). --variant changes the reference on purpose,
for the tests' negative controls:
  post-ln        BertForPreTraining's post-LN layer (LayerNorm after each residual sum)
  swap-key-value the key and value projections exchanged

usage: megatron_bert_reference.py HF_DIR OURS_PREFIX [--tol 1e-4] [--lm-head-gelu exact|config]
                                  [--variant NAME]
"""
import json
import math
import operator
import os
import struct
import sys


def fail(message):
    sys.stderr.write("megatron_bert_reference: error: " + message + "\n")
    sys.exit(2)


def read_safetensors(path):
    """{name: (shape, flat list of floats)} of every tensor (F32 or BF16)"""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    tensors = {}
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


def read_ints(path):
    data = open(path, "rb").read()
    return list(struct.unpack("<%di" % (len(data) // 4), data))


def read_floats(path):
    data = open(path, "rb").read()
    return list(struct.unpack("<%df" % (len(data) // 4), data))


class Weights:
    def __init__(self, tensors):
        self.tensors = tensors

    def matrix(self, name, rows, cols):
        if name not in self.tensors:
            fail("no tensor " + name)
        shape, values = self.tensors[name]
        if shape != [rows, cols]:
            fail("%s has shape %s, expected [%d, %d]" % (name, shape, rows, cols))
        return [values[r * cols:(r + 1) * cols] for r in range(rows)]

    def vector(self, name, size):
        if name not in self.tensors:
            fail("no tensor " + name)
        shape, values = self.tensors[name]
        if shape != [size]:
            fail("%s has shape %s, expected [%d]" % (name, shape, size))
        return values


def linear(weight, bias, x):
    return [sum(map(operator.mul, row, x)) + b for row, b in zip(weight, bias)]


def layer_norm(x, weight, bias, eps):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    scale = 1.0 / math.sqrt(var + eps)
    return [(v - mean) * scale * w + b for v, w, b in zip(x, weight, bias)]


def gelu_tanh(v):
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def gelu_exact(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def activation(name):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gelu_tanh
    if name == "gelu":
        return gelu_exact
    fail("hidden_act %s: the reference computes gelu, gelu_new, gelu_pytorch_tanh and gelu_fast" % name)


def softmax(values):
    top = max(values)
    e = [math.exp(v - top) for v in values]
    total = sum(e)
    return [v / total for v in e]


def log_softmax(values):
    top = max(values)
    log_total = top + math.log(sum(math.exp(v - top) for v in values))
    return [v - log_total for v in values]


def main():
    argv = sys.argv[1:]
    options = {"--tol": "1e-4", "--lm-head-gelu": "config", "--variant": ""}
    positional = []
    while argv:
        word = argv.pop(0)
        if word in options:
            if not argv:
                fail(word + " needs a value")
            options[word] = argv.pop(0)
        else:
            positional.append(word)
    if len(positional) != 2:
        fail("usage: megatron_bert_reference.py HF_DIR OURS_PREFIX [--tol T] [--lm-head-gelu exact|config] "
             "[--variant post-ln|swap-key-value]")
    folder, prefix = positional
    tol, variant = float(options["--tol"]), options["--variant"]
    if options["--lm-head-gelu"] not in ("exact", "config") or variant not in ("", "post-ln", "swap-key-value"):
        fail("unknown --lm-head-gelu or --variant")
    config = json.load(open(os.path.join(folder, "config.json")))
    if config.get("model_type") != "megatron-bert":
        fail("%s/config.json: model_type %s, expected megatron-bert" % (folder, config.get("model_type")))
    C, L, H = config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"]
    F, V, P = config["intermediate_size"], config["vocab_size"], config["max_position_embeddings"]
    eps, D = config.get("layer_norm_eps", 1e-12), C // H
    act = activation(config.get("hidden_act", "gelu"))
    head_act = gelu_exact if options["--lm-head-gelu"] == "exact" else act
    w = Weights(read_safetensors(os.path.join(folder, "model.safetensors")))
    tokens, types, mask = (read_ints(prefix + "." + s) for s in ("tokens", "types", "mask"))
    T = len(tokens)
    valid = [t for t in range(T) if mask[t]]
    ours = read_floats(prefix + ".logits")
    padded = len(ours) // len(valid)
    binary_head = "cls.seq_relationship.weight" in w.tensors

    word = w.matrix("bert.embeddings.word_embeddings.weight", V, C)
    position = w.matrix("bert.embeddings.position_embeddings.weight", P, C)
    token_type = w.matrix("bert.embeddings.token_type_embeddings.weight", 2, C)
    x = [[a + b + c for a, b, c in zip(word[tokens[t]], token_type[types[t]], position[t])] for t in range(T)]
    for layer in range(L):
        p = "bert.encoder.layer.%d." % layer
        ln1 = (w.vector(p + "attention.ln.weight", C), w.vector(p + "attention.ln.bias", C))
        q_w, k_w, v_w = (w.matrix(p + "attention.self.%s.weight" % n, C, C) for n in ("query", "key", "value"))
        q_b, k_b, v_b = (w.vector(p + "attention.self.%s.bias" % n, C) for n in ("query", "key", "value"))
        if variant == "swap-key-value":
            k_w, v_w, k_b, v_b = v_w, k_w, v_b, k_b
        o_w, o_b = w.matrix(p + "attention.output.dense.weight", C, C), w.vector(p + "attention.output.dense.bias", C)
        ln2 = (w.vector(p + "ln.weight", C), w.vector(p + "ln.bias", C))
        i_w, i_b = w.matrix(p + "intermediate.dense.weight", F, C), w.vector(p + "intermediate.dense.bias", F)
        f_w, f_b = w.matrix(p + "output.dense.weight", C, F), w.vector(p + "output.dense.bias", C)
        normed = x if variant == "post-ln" else [layer_norm(r, ln1[0], ln1[1], eps) for r in x]
        q = [linear(q_w, q_b, r) for r in normed]
        k = [linear(k_w, k_b, r) for r in normed]
        v = [linear(v_w, v_b, r) for r in normed]
        context = [[0.0] * C for _ in range(T)]
        for h in range(H):
            cols = range(h * D, (h + 1) * D)
            for t in range(T):
                scores = [sum(q[t][c] * k[s][c] for c in cols) / math.sqrt(D) if mask[s] else -1e30 for s in range(T)]
                probs = softmax(scores)
                for c in cols:
                    context[t][c] = sum(probs[s] * v[s][c] for s in range(T))
        h_rows = [[a + b for a, b in zip(r, linear(o_w, o_b, ctx))] for r, ctx in zip(x, context)]
        if variant == "post-ln":
            h_rows = [layer_norm(r, ln1[0], ln1[1], eps) for r in h_rows]
        normed = h_rows if variant == "post-ln" else [layer_norm(r, ln2[0], ln2[1], eps) for r in h_rows]
        x = [[a + b for a, b in zip(r, linear(f_w, f_b, [act(u) for u in linear(i_w, i_b, n)]))]
             for r, n in zip(h_rows, normed)]
        if variant == "post-ln":
            x = [layer_norm(r, ln2[0], ln2[1], eps) for r in x]
    s = [layer_norm(r, w.vector("bert.encoder.ln.weight", C), w.vector("bert.encoder.ln.bias", C), eps) for r in x]

    t_w, t_b = w.matrix("cls.predictions.transform.dense.weight", C, C), w.vector("cls.predictions.transform.dense.bias", C)
    t_ln = (w.vector("cls.predictions.transform.LayerNorm.weight", C), w.vector("cls.predictions.transform.LayerNorm.bias", C))
    decoder = w.matrix("cls.predictions.decoder.weight", V, C) if "cls.predictions.decoder.weight" in w.tensors else word
    out_bias = w.vector("cls.predictions.bias", V)
    worst_logit = worst_logprob = biggest = 0.0
    for i, t in enumerate(valid):
        transformed = layer_norm([head_act(u) for u in linear(t_w, t_b, s[t])], t_ln[0], t_ln[1], eps)
        theirs = linear(decoder, out_bias, transformed)
        mine = ours[i * padded:i * padded + V]
        worst_logit = max(worst_logit, max(abs(a - b) for a, b in zip(theirs, mine)))
        biggest = max(biggest, max(abs(v) for v in mine))
        worst_logprob = max(worst_logprob, max(abs(a - b) for a, b in zip(log_softmax(theirs), log_softmax(mine))))
    relative = worst_logit / biggest if biggest else worst_logit
    d_binary = 0.0
    if binary_head:
        pooled = [math.tanh(u) for u in linear(w.matrix("bert.pooler.dense.weight", C, C),
                                               w.vector("bert.pooler.dense.bias", C), s[0])]
        theirs = linear(w.matrix("cls.seq_relationship.weight", 2, C), w.vector("cls.seq_relationship.bias", 2), pooled)
        mine = read_floats(prefix + ".binary")
        d_binary = max(abs(a - b) for a, b in zip(theirs, mine))
    ok = relative <= tol and worst_logprob <= tol and d_binary <= tol
    label = "MegatronBertFor%s%s%s" % ("PreTraining" if binary_head else "MaskedLM",
                                       ", LM head exact GeLU" if options["--lm-head-gelu"] == "exact" else "",
                                       ", variant " + variant if variant else "")
    print("%s %s: %d valid positions: max|d logit| %.3e, relative %.3e, max|d log-prob| %.3e, binary max|d logit| "
          "%.3e (tolerance %g)" % ("PASS" if ok else "FAIL", label, len(valid), worst_logit, relative, worst_logprob,
                                   d_binary, tol))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
