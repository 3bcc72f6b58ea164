#!/usr/bin/env python3
"""Reference fixtures for tests/test-safetensors.c and tests/test-model.c.

Written by independent implementations (the `safetensors` and `gguf` PyPI
packages, numpy, and the permute function of llama.cpp's convert_hf_to_gguf.py),
so the C tests compare our reader against them:

  tests/data/model/ref-mixed.safetensors     safetensors.numpy.save_file, several dtypes
  tests/data/model/ref-mixed.json            the values it holds (dtype, shape, flat values)
  tests/data/model/ref-sharded/              2 shards + model.safetensors.index.json
  tests/data/model/pair-llama.gguf           a tiny llama, Q/K rows permuted as llama.cpp does
  tests/data/model/pair-llama-hf/            the same weights as a HF folder (HF row order)
  tests/data/model/pair-llama.json           its hyper-parameters
  tests/data/model/smollm2-expected.json     the default model's metadata as the gguf package reads it
                                             (only when the default model is present)

Run: python3 tests/reference/gen_model_fixtures.py   (from the repository root)
"""
import json
import os
import sys

import numpy as np
import gguf
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "model")


def bytes_to_unicode():
    """GPT-2's byte-to-unicode table (openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def permute(weights, n_head, n_head_kv):
    """Verbatim from llama.cpp convert_hf_to_gguf.py (LlamaModel.permute)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def gen_mixed():
    rng = np.random.default_rng(1234)
    tensors = {
        "a.f32": rng.standard_normal((3, 5)).astype(np.float32),
        "b.f16": rng.standard_normal((4,)).astype(np.float16),
        "c.f64": rng.standard_normal((2, 2)).astype(np.float64),
        "d.i64": rng.integers(-2**40, 2**40, size=(3,), dtype=np.int64),
        "e.i32": rng.integers(-2**30, 2**30, size=(2, 3), dtype=np.int32),
        "f.i16": rng.integers(-2**14, 2**14, size=(5,), dtype=np.int16),
        "g.i8": rng.integers(-128, 127, size=(7,), dtype=np.int8),
        "h.u8": rng.integers(0, 255, size=(3, 1, 2), dtype=np.uint8),
        "i.scalar": np.array(3.5, dtype=np.float32),
        "j.empty": np.zeros((0, 4), dtype=np.float32),
    }
    save_file(tensors, os.path.join(OUT, "ref-mixed.safetensors"), metadata={"format": "np", "origin": "gen_model_fixtures"})
    names = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int64: "I64",
             np.int32: "I32", np.int16: "I16", np.int8: "I8", np.uint8: "U8"}
    desc = {}
    for k, v in tensors.items():
        desc[k] = {"dtype": names[v.dtype.type], "shape": list(v.shape),
                   "values": [float(x) if v.dtype.kind == "f" else int(x) for x in v.reshape(-1)]}
    with open(os.path.join(OUT, "ref-mixed.json"), "w") as f:
        json.dump({"metadata": {"format": "np", "origin": "gen_model_fixtures"}, "tensors": desc}, f, indent=1)


def gen_sharded():
    d = os.path.join(OUT, "ref-sharded")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(99)
    s1 = {"x.weight": rng.standard_normal((4, 8)).astype(np.float32), "x.bias": rng.standard_normal((4,)).astype(np.float32)}
    s2 = {"y.weight": rng.standard_normal((2, 4)).astype(np.float16)}
    save_file(s1, os.path.join(d, "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    save_file(s2, os.path.join(d, "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    wm = {k: "model-00001-of-00002.safetensors" for k in s1}
    wm.update({k: "model-00002-of-00002.safetensors" for k in s2})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f, indent=1)
    with open(os.path.join(OUT, "ref-sharded.json"), "w") as f:
        json.dump({k: {"shape": list(v.shape), "values": [float(x) for x in v.reshape(-1)]}
                   for k, v in {**s1, **s2}.items()}, f, indent=1)


def tiny_vocab():
    b2u = bytes_to_unicode()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = specials + [b2u[b] for b in range(256)]
    merge_pairs = [(" ", "t"), ("h", "e"), ("i", "n"), (" t", "he"), ("e", "r"), ("a", "n")]
    merges = []
    for l, r in merge_pairs:
        le = "".join(b2u[c] for c in l.encode())
        re_ = "".join(b2u[c] for c in r.encode())
        merges.append(le + " " + re_)
        tokens.append(le + re_)
    while len(tokens) < 300:
        tokens.append("<|unused_%d|>" % (len(tokens) - 265))
    return specials, tokens, merges


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def gen_pair():
    """The same tiny llama twice: HF folder (HF order) and GGUF (converter order)."""
    hp = dict(hidden=64, layers=1, heads=4, kv_heads=2, head_dim=16, ffn=128, vocab=300, ctx=256,
              theta=50000.0, eps=1e-5)
    rng = np.random.default_rng(7)
    H, F, V, L = hp["hidden"], hp["ffn"], hp["vocab"], hp["layers"]
    q, kv = hp["heads"] * hp["head_dim"], hp["kv_heads"] * hp["head_dim"]
    w = {"model.embed_tokens.weight": rng.standard_normal((V, H)), "model.norm.weight": 1 + 0.1 * rng.standard_normal(H)}
    for i in range(L):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H)
        w[p + "self_attn.q_proj.weight"] = rng.standard_normal((q, H)) / 8
        w[p + "self_attn.k_proj.weight"] = rng.standard_normal((kv, H)) / 8
        w[p + "self_attn.v_proj.weight"] = rng.standard_normal((kv, H)) / 8
        w[p + "self_attn.o_proj.weight"] = rng.standard_normal((H, q)) / 8
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(H)
        w[p + "mlp.gate_proj.weight"] = rng.standard_normal((F, H)) / 8
        w[p + "mlp.up_proj.weight"] = rng.standard_normal((F, H)) / 8
        w[p + "mlp.down_proj.weight"] = rng.standard_normal((H, F)) / 11
    w = {k: v.astype(np.float32) for k, v in w.items()}

    specials, tokens, merges = tiny_vocab()

    # HF folder.
    d = os.path.join(OUT, "pair-llama-hf")
    os.makedirs(d, exist_ok=True)
    save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": hp["heads"],
              "num_key_value_heads": hp["kv_heads"], "max_position_embeddings": hp["ctx"],
              "rms_norm_eps": hp["eps"], "rope_theta": hp["theta"], "vocab_size": V,
              "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "float32",
              "rope_scaling": None, "bos_token_id": 1, "eos_token_id": 2}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, s in enumerate(specials)],
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "tokenizer_class": "GPT2Tokenizer",
                   "chat_template": [{"name": "tool_use", "template": "{{ 'tools' }}"},
                                     {"name": "default", "template": CHATML}]}, f, indent=1)

    # GGUF, as convert_hf_to_gguf.py writes a llama: permuted Q/K, F32 norms.
    gw = gguf.GGUFWriter(os.path.join(OUT, "pair-llama.gguf"), "llama")
    gw.add_name("pair-llama")
    gw.add_block_count(L)
    gw.add_context_length(hp["ctx"])
    gw.add_embedding_length(H)
    gw.add_feed_forward_length(F)
    gw.add_head_count(hp["heads"])
    gw.add_head_count_kv(hp["kv_heads"])
    gw.add_rope_freq_base(hp["theta"])
    gw.add_layer_norm_rms_eps(hp["eps"])
    gw.add_rope_dimension_count(hp["head_dim"])
    gw.add_vocab_size(V)
    gw.add_tokenizer_model("gpt2")
    gw.add_tokenizer_pre("gpt-2")
    gw.add_token_list(tokens)
    gw.add_token_types([3] * len(specials) + [1] * (len(tokens) - len(specials)))
    gw.add_token_merges(merges)
    gw.add_bos_token_id(1)
    gw.add_eos_token_id(2)
    gw.add_add_bos_token(False)
    gw.add_chat_template(CHATML)
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    gw.add_tensor("token_embd.weight", w["model.embed_tokens.weight"])
    for i in range(L):
        p = "model.layers.%d." % i
        for hf, gg in names.items():
            t = w[p + hf + ".weight"]
            if hf == "self_attn.q_proj":
                t = permute(t, hp["heads"], hp["heads"])
            elif hf == "self_attn.k_proj":
                t = permute(t, hp["heads"], hp["kv_heads"])
            gw.add_tensor("blk.%d.%s.weight" % (i, gg), np.ascontiguousarray(t))
    gw.add_tensor("output_norm.weight", w["model.norm.weight"])
    gw.write_header_to_file()
    gw.write_kv_data_to_file()
    gw.write_tensors_to_file()
    gw.close()

    with open(os.path.join(OUT, "pair-llama.json"), "w") as f:
        json.dump(hp, f, indent=1)


def gen_smollm2_expected():
    path = os.environ.get("HONE_DEFAULT_MODEL",
                          os.path.expanduser("~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not os.path.exists(path):
        print("default model absent: smollm2-expected.json not regenerated", file=sys.stderr)
        return
    r = gguf.GGUFReader(path)

    def field(key):
        f = r.fields.get(key)
        if f is None:
            return None
        if f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode()
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            return len(f.data)
        return f.parts[f.data[0]].tolist()[0]

    arch = field("general.architecture")
    names = [t.name for t in r.tensors]
    exp = {
        "architecture": arch,
        "block_count": field(arch + ".block_count"),
        "embedding_length": field(arch + ".embedding_length"),
        "feed_forward_length": field(arch + ".feed_forward_length"),
        "head_count": field(arch + ".attention.head_count"),
        "head_count_kv": field(arch + ".attention.head_count_kv"),
        "context_length": field(arch + ".context_length"),
        "rope_freq_base": field(arch + ".rope.freq_base"),
        "rms_eps": field(arch + ".attention.layer_norm_rms_epsilon"),
        "n_vocab": field("tokenizer.ggml.tokens"),
        "has_output_weight": "output.weight" in names,
        "n_tensors": len(names),
        "n_params": int(sum(int(np.prod(t.shape)) for t in r.tensors)),
        "tensor_types": {t.name: t.tensor_type.name for t in r.tensors if t.name in
                         ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_norm.weight")},
        "name": field("general.name"),
        "has_chat_template": field("tokenizer.chat_template") is not None,
        "file_bytes": os.path.getsize(path),
    }
    with open(os.path.join(OUT, "smollm2-expected.json"), "w") as f:
        json.dump(exp, f, indent=1)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    gen_mixed()
    gen_sharded()
    gen_pair()
    gen_smollm2_expected()
    print("fixtures written to", OUT)
