#!/usr/bin/env python3
"""Check the tiny models of tests/hone-test-models.c with independent readers.

  mkdir -p /tmp/tm && HONE_TEST_KEEP_DIR=/tmp/tm build/tests/test-model -p /model/generated
  python3 tests/reference/check_test_models.py /tmp/tm

GGUF files: the `gguf` package reads them; hyper-parameters, tokenizer arrays
and tensor shapes/types agree with the spec. HF folders: the `tokenizers`
package loads tokenizer.json; its ids for a sample text equal what the GGUF
vocabulary + merges give through the same package (the two tokenizers agree).
With --logits (needs llama-cpp-python), llama.cpp runs every GGUF and its logits are
compared with a float64 numpy forward pass (transformers' Llama/Qwen2/Qwen3
equations, half-split RoPE) over the HF folder's weights: this checks the
generator end to end, including llama.cpp's Q/K row order in llama GGUFs.
"""
import glob
import json
import os
import sys

import gguf
import numpy as np
from tokenizers import Tokenizer

def hf_forward(hf, ids):
    """float64 reference forward pass over a HF folder (F32/F16 safetensors)."""
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(hf, "config.json")))
    w = {}
    for f in sorted(glob.glob(os.path.join(hf, "*.safetensors"))):
        w.update({k: v.astype(np.float64) for k, v in load_file(f).items()})
    H, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, theta, T = cfg["rms_norm_eps"], cfg["rope_theta"], len(ids)
    norm = lambda x, g: x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :], np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
    rot = lambda x: np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
    x = w["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = norm(x, w[p + "input_layernorm.weight"])
        proj = lambda n: h @ w[p + "self_attn.%s_proj.weight" % n].T + w.get(p + "self_attn.%s_proj.bias" % n, 0)
        q, k, v = proj("q").reshape(T, nh, hd), proj("k").reshape(T, nkv, hd), proj("v").reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            q, k = norm(q, w[p + "self_attn.q_norm.weight"]), norm(k, w[p + "self_attn.k_norm.weight"])
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        s = np.einsum("thd,uhd->htu", q, k) / np.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = x + np.einsum("htu,uhd->thd", a, v).reshape(T, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = norm(x, w["model.norm.weight"])
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T


def check_logits(path, hf):
    try:
        import llama_cpp
    except ImportError:
        return
    cfg = json.load(open(os.path.join(hf, "config.json")))
    if cfg.get("torch_dtype") == "bfloat16":
        return   # numpy cannot read BF16 safetensors
    ids = [119, 260, 277, 269, 35, 274, 298, 271, 267, 5, 80, 99]
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False, n_threads=1)
    llm.eval(ids)
    got = np.array(llm.scores[: len(ids)], dtype=np.float64)
    ref = hf_forward(hf, ids)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    same_argmax = (got.argmax(-1) == ref.argmax(-1)).mean()
    quant = any(t in os.path.basename(path) for t in ("q4", "q6", "q8"))
    print("    llama.cpp vs f64 reference: max rel err %.2e, argmax agreement %.0f%%" % (err, 100 * same_argmax))
    assert err < (5e-2 if quant else 1e-3), path


args = [a for a in sys.argv[1:] if not a.startswith("--")]
root = args[0] if args else "."
sample = "the cat is in the string of an art<|im_end|>"
n = 0
for path in sorted(glob.glob(os.path.join(root, "*.gguf"))):
    r = gguf.GGUFReader(path)
    f = r.fields
    arch = bytes(f["general.architecture"].parts[-1]).decode()
    val = lambda k: f[k].parts[f[k].data[0]].tolist()[0]
    hidden, layers = val(arch + ".embedding_length"), val(arch + ".block_count")
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode() for i in f["tokenizer.ggml.merges"].data]
    names = {t.name: t for t in r.tensors}
    assert names["token_embd.weight"].shape.tolist() == [hidden, len(tokens)], path
    assert sum(1 for k in names if k.startswith("blk.")) >= 9 * layers
    types = sorted({t.tensor_type.name for t in r.tensors})
    hf = path[:-5] + "-hf"
    if os.path.isdir(hf):
        cfg = json.load(open(os.path.join(hf, "config.json")))
        assert cfg["hidden_size"] == hidden and cfg["num_hidden_layers"] == layers
        assert cfg["vocab_size"] == len(tokens)
        tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
        assert tok.get_vocab_size() == len(tokens)
        vocab = tok.get_vocab()
        assert all(vocab[t] == i for i, t in enumerate(tokens)), "HF vocab differs from GGUF tokens"
        hf_merges = json.load(open(os.path.join(hf, "tokenizer.json")))["model"]["merges"]
        assert hf_merges == merges
        ids = tok.encode(sample).ids
        print("ok  %-28s %-6s %s  %s → %s" % (os.path.basename(path), arch, types, repr(sample[:16]), ids[:10]))
    else:
        print("ok  %-28s %-6s %s" % (os.path.basename(path), arch, types))
    n += 1
    if os.path.isdir(hf) and "--logits" in sys.argv:
        check_logits(path, hf)
if n == 0:
    sys.exit("no .gguf under " + root)
print("%d tiny models read by gguf %s / tokenizers" % (n, gguf.__version__ if hasattr(gguf, "__version__") else "0.19"))
