#!/usr/bin/env python3
"""Check a Hone AWQ export with independent implementations.

Usage:
  hone quantize -m MODEL.gguf -g 64 --samples 2 --seq-len 64 -o OUT --also-gguf OUT.gguf
  python3 tests/reference/check_awq_export.py OUT OUT.gguf MODEL.gguf

1. Weights: reads OUT/model.safetensors with the `safetensors` package,
   dequantizes every linear by AutoAWQ's GEMM rules (unpack nibbles with the
   order map [0,2,4,6,1,3,5,7], (q - z) * s), and compares it, exactly, with
   the same weights that Hone wrote as Q4_1 into OUT.gguf, read and
   dequantized by the `gguf` package (Q/K rows permuted back to HF order).
2. Tokenizer: transformers' AutoTokenizer loads OUT (tokenizer.json rebuilt
   from GGUF metadata) and must tokenize the tokenizer test corpus exactly as
   llama.cpp (llama-cpp-python, vocab only) tokenizes it with MODEL.gguf.
   The chat template must be the GGUF's.
3. Config: AutoConfig loads config.json; its quantization_config is accepted
   by transformers' AwqConfig (bits 4, zero point, GEMM).
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_corpus  # noqa: E402

ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEARS = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def unpack(words):
    """int32 [R, C/8] -> uint8 [R, C] by AutoAWQ's order map."""
    w = words.view(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1] * 8), dtype=np.uint8)
    for i, col in enumerate(ORDER):
        out[:, col::8] = (w >> (4 * i)) & 15
    return out


def awq_dequant(qweight, qzeros, scales, group):
    q = unpack(qweight).astype(np.float32)            # [K, N]
    z = unpack(qzeros).astype(np.float32)             # [K/g, N]
    s = scales.astype(np.float32)                     # [K/g, N]
    z = np.repeat(z, group, axis=0)
    s = np.repeat(s, group, axis=0)
    return ((q - z) * s).T                            # [N, K] like nn.Linear.weight


def unpermute(w, n_head):
    """llama.cpp's converter permutes HF rows with
    w.reshape(n_head, 2, d/2, K).swapaxes(1, 2); undo it."""
    rows, k = w.shape
    d = rows // n_head
    return w.reshape(n_head, d // 2, 2, k).swapaxes(1, 2).reshape(rows, k)


def check_weights(folder, gguf_path):
    st = load_file(os.path.join(folder, "model.safetensors"))
    cfg = json.load(open(os.path.join(folder, "config.json")))
    group = cfg["quantization_config"]["group_size"]
    reader = gguf.GGUFReader(gguf_path)
    tensors = {t.name: t for t in reader.tensors}
    n_checked = 0
    for l in range(cfg["num_hidden_layers"]):
        for hf, gg in LINEARS.items():
            p = f"model.layers.{l}.{hf}"
            w_awq = awq_dequant(st[p + ".qweight"], st[p + ".qzeros"], st[p + ".scales"], group)
            t = tensors[f"blk.{l}.{gg}.weight"]
            assert t.tensor_type == gguf.GGMLQuantizationType.Q4_1, t.tensor_type
            w_gguf = gguf.quants.dequantize(t.data, t.tensor_type).reshape(w_awq.shape).astype(np.float32)
            if gg == "attn_q":
                w_gguf = unpermute(w_gguf, cfg["num_attention_heads"])
            elif gg == "attn_k":
                w_gguf = unpermute(w_gguf, cfg["num_key_value_heads"])
            if not np.array_equal(w_awq, w_gguf):
                bad = np.argwhere(w_awq != w_gguf)[:5]
                raise SystemExit(f"{p}: AutoAWQ dequant != Hone Q4_1 at {bad.tolist()}")
            n_checked += w_awq.size
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        assert st[name].dtype == np.float16, name
    print(f"weights: {n_checked} values of {cfg['num_hidden_layers'] * 7} linears equal (group {group})")


def check_tokenizer(folder, model_gguf):
    from transformers import AutoTokenizer
    import llama_cpp

    hf = AutoTokenizer.from_pretrained(folder)
    ll = llama_cpp.Llama(model_path=model_gguf, vocab_only=True, verbose=False)
    corpus = [b.decode("utf-8", errors="replace") for b in tokenizer_corpus.corpus()]
    mismatches = 0
    for text in corpus:
        a = hf.encode(text, add_special_tokens=False)
        b = ll.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if a != b:
            mismatches += 1
            if mismatches <= 3:
                print("mismatch:", repr(text[:80]), a[:12], b[:12])
    reader = gguf.GGUFReader(model_gguf)
    field = reader.fields["tokenizer.chat_template"]
    template = bytes(field.parts[field.data[0]]).decode("utf-8")
    assert hf.chat_template == template, "chat template differs from the GGUF's"
    print(f"tokenizer: {len(corpus) - mismatches}/{len(corpus)} corpus strings identical to llama.cpp")
    if mismatches:
        raise SystemExit(f"{mismatches} tokenizer mismatches")


def check_config(folder):
    from transformers import AutoConfig, AwqConfig

    cfg = AutoConfig.from_pretrained(folder)
    q = cfg.quantization_config
    awq = AwqConfig.from_dict(dict(q))
    assert awq.bits == 4 and awq.zero_point and awq.group_size == q["group_size"], awq
    assert q["quant_method"] == "awq" and q["version"] == "gemm", q
    print(f"config: {type(cfg).__name__} with AwqConfig(bits={awq.bits}, group_size={awq.group_size}, "
          f"zero_point={awq.zero_point}) accepted")


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    folder, out_gguf, model_gguf = sys.argv[1:]
    check_weights(folder, out_gguf)
    check_config(folder)
    check_tokenizer(folder, model_gguf)
    print("OK")


if __name__ == "__main__":
    main()
