#!/usr/bin/env python3
"""Tiny AutoAWQ "GEMM" checkpoints for tests/test-awq-load.c, built from known integers.

Independent of Hone: the packer below follows AutoAWQ's WQLinear_GEMM.from_linear
(awq/modules/linear/gemm.py): intweight [in, out], pack_num = 8, for each packed
column c and nibble i, qweight[:, c] |= intweight[:, 8c + order[i]] << 4i with
order = [0, 2, 4, 6, 1, 3, 5, 7]; qzeros packed the same way from zeros [in/g, out];
scales fp16 [in/g, out]; the weight is (q - z) * s (AutoAWQ's dequantize_gemm).
It is checked here by an unpacker that follows AutoAWQ's unpack_awq/reverse_awq_order
(awq/utils/packing_utils.py) before anything is written.

Writes tests/data/awq/:
  tiny-awq/       config.json (quantization_config awq, bits 4, group 64, zero_point, gemm),
                  two shards + model.safetensors.index.json (as sharded third-party
                  checkpoints are), bf16 embed_tokens, f16 lm_head (untied), f16 norms,
                  tokenizer files copied from tests/data/model/pair-llama-hf
  tiny-f32/       the same model with every linear as the f32 weight (q - z)*s it implies
                  (exact in f32), everything else byte-identical: Hone's plain HF path
  linears.safetensors  one linear per group size 32 and 128 (K=128, N=16) plus
                  "<name>.expected" f32 [N, K] — the dequantized values
Run: python3 tests/reference/gen_awq_load.py   (numpy, safetensors==0.8.0)
"""
import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "awq")
TOK_SRC = os.path.join(ROOT, "data", "model", "pair-llama-hf")

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE = [0, 4, 1, 5, 2, 6, 3, 7]

HIDDEN, FFN, HEADS, KV_HEADS, LAYERS, VOCAB, GROUP = 64, 128, 2, 1, 2, 300, 64
HEAD_DIM = HIDDEN // HEADS


def pack(intvals):
    """AutoAWQ GEMM packing of an [rows, cols] array of 0..15 → int32 [rows, cols/8]."""
    rows, cols = intvals.shape
    out = np.zeros((rows, cols // 8), dtype=np.uint32)
    for col in range(cols // 8):
        for i in range(8):
            out[:, col] |= intvals[:, col * 8 + AWQ_ORDER[i]].astype(np.uint32) << np.uint32(4 * i)
    return out.view(np.int32)


def unpack(packed):
    """AutoAWQ unpack_awq + reverse_awq_order: int32 [rows, cols/8] → [rows, cols]."""
    p = packed.view(np.uint32)
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    iw = ((p[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(p.shape[0], -1)
    idx = np.arange(iw.shape[1]).reshape(-1, 8)[:, AWQ_REVERSE].reshape(-1)
    return iw[:, idx].astype(np.int64)


def make_linear(rng, k, n, g, scale_lo=0.004, scale_hi=0.03):
    """Known integers of one linear: q [k, n], z [k/g, n], s fp16 [k/g, n]; the f32 weight [n, k]."""
    q = rng.integers(0, 16, size=(k, n))
    z = rng.integers(0, 16, size=(k // g, n))
    z[0, :2] = [0, 15]                      # both ends of the zero range
    q[0, :2] = [15, 0]
    s = rng.uniform(scale_lo, scale_hi, size=(k // g, n)).astype(np.float16)
    zf = np.repeat(z, g, axis=0)
    sf = np.repeat(s.astype(np.float32), g, axis=0)
    w = ((q - zf).astype(np.float32) * sf).T.copy()     # [out, in], exact in f32
    qweight, qzeros = pack(q), pack(z)
    assert (unpack(qweight) == q).all() and (unpack(qzeros) == z).all()
    # AutoAWQ dequantize_gemm, in f64 as a cross-check of the f32 product
    w64 = ((unpack(qweight) - np.repeat(unpack(qzeros), g, axis=0)) * np.repeat(s.astype(np.float64), g, axis=0)).T
    assert (w64 == w.astype(np.float64)).all()
    return {"qweight": qweight, "qzeros": qzeros, "scales": s}, w


def f16(a):
    return a.astype(np.float16)


def bf16_bits(a):
    """Round-to-nearest-even f32 → bf16, as raw uint16 (numpy has no bf16)."""
    u = a.astype(np.float32).view(np.uint32)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def write_bf16_file(path, tensors, bf16_names):
    """save_file has no bf16 for numpy: write F16 placeholders, then patch the dtype in the header."""
    save_file(tensors, path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    for name in bf16_names:
        assert header[name]["dtype"] == "F16"
        header[name]["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text))
    assert len(text) == n
    data[8:8 + n] = text
    with open(path, "wb") as f:
        f.write(data)


def main():
    rng = np.random.default_rng(20261129)
    os.makedirs(OUT, exist_ok=True)
    for d in ("tiny-awq", "tiny-f32"):
        shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
        os.makedirs(os.path.join(OUT, d))

    # Shared unquantized tensors: embeddings as bf16 bits, lm_head and norms fp16.
    embd = bf16_bits(rng.normal(0, 0.5, size=(VOCAB, HIDDEN)).astype(np.float32))
    lm_head = f16(rng.normal(0, 0.2, size=(VOCAB, HIDDEN)))
    common = {"model.embed_tokens.weight": embd.view(np.float16), "lm_head.weight": lm_head,
              "model.norm.weight": f16(rng.uniform(0.8, 1.2, size=HIDDEN))}
    awq_layers, f32_layers = {}, {}
    shapes = {"self_attn.q_proj": (HIDDEN, HEADS * HEAD_DIM), "self_attn.k_proj": (HIDDEN, KV_HEADS * HEAD_DIM),
              "self_attn.v_proj": (HIDDEN, KV_HEADS * HEAD_DIM), "self_attn.o_proj": (HEADS * HEAD_DIM, HIDDEN),
              "mlp.gate_proj": (HIDDEN, FFN), "mlp.up_proj": (HIDDEN, FFN), "mlp.down_proj": (FFN, HIDDEN)}
    for l in range(LAYERS):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            common[f"model.layers.{l}.{norm}.weight"] = f16(rng.uniform(0.8, 1.2, size=HIDDEN))
        for name, (k, n) in shapes.items():
            parts, w = make_linear(rng, k, n, GROUP)
            for p, v in parts.items():
                awq_layers[f"model.layers.{l}.{name}.{p}"] = v
            f32_layers[f"model.layers.{l}.{name}.weight"] = w

    # AWQ folder: two shards (layer 0 + embeddings / layer 1 + the rest) and an index.
    shard1 = {k: v for k, v in {**common, **awq_layers}.items()
              if k.startswith("model.layers.0.") or k == "model.embed_tokens.weight"}
    shard2 = {k: v for k, v in {**common, **awq_layers}.items() if k not in shard1}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    write_bf16_file(os.path.join(OUT, "tiny-awq", names[0]), shard1, ["model.embed_tokens.weight"])
    save_file(shard2, os.path.join(OUT, "tiny-awq", names[1]))
    index = {"metadata": {"total_size": 0}, "weight_map": {}}
    for i, sh in enumerate((shard1, shard2)):
        for k in sh:
            index["weight_map"][k] = names[i]
    with open(os.path.join(OUT, "tiny-awq", "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    # f32 folder: one file.
    write_bf16_file(os.path.join(OUT, "tiny-f32", "model.safetensors"), {**common, **f32_layers},
                    ["model.embed_tokens.weight"])

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "vocab_size": VOCAB, "tie_word_embeddings": False, "hidden_act": "silu",
              "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16"}
    with open(os.path.join(OUT, "tiny-f32", "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": GROUP,
                                     "zero_point": True, "version": "gemm", "modules_to_not_convert": None}
    with open(os.path.join(OUT, "tiny-awq", "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    for d in ("tiny-awq", "tiny-f32"):
        for t in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(TOK_SRC, t), os.path.join(OUT, d, t))

    # Single linears at the other group sizes, with their expected values.
    lin = {}
    for g in (32, 128):
        parts, w = make_linear(rng, 128, 16, g)
        for p, v in parts.items():
            lin[f"g{g}.{p}"] = v
        lin[f"g{g}.expected"] = w
    save_file(lin, os.path.join(OUT, "linears.safetensors"))
    for base, _, files in os.walk(OUT):
        for name in files:
            os.chmod(os.path.join(base, name), 0o644)


if __name__ == "__main__":
    main()
