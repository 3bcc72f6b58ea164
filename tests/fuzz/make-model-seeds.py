#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz-model.c: tiny, valid models in the
target's input form (one byte, then a GGUF file; or one byte, config.json, a
NUL, tokenizer_config.json (may be empty: none), a NUL, model.safetensors).
Written with the `gguf` and `safetensors` packages
(tests/reference/requirements.txt), independent of Hone's writers.

    python3 tests/fuzz/make-model-seeds.py   # rewrites tests/fuzz/corpus-model/
"""
import json
import os
import tempfile

import numpy as np
import gguf
from safetensors.numpy import save

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus-model")
HIDDEN, HEADS, KV, HEAD_DIM, FFN, LAYERS = 32, 2, 1, 16, 64, 1
rng = np.random.default_rng(7)


def w(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


def byte_symbols():
    """GPT-2's bytes_to_unicode, in byte order."""
    direct = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in direct:
            out.append(chr(b))
        else:
            out.append(chr(0x100 + n))
            n += 1
    return out


def gguf_seed(arch, qtype, bias, name):
    tokens = ["<pad>", "<s>", "</s>"] + byte_symbols() + ["\u0120t"]
    vocab = len(tokens)
    path = tempfile.mktemp(suffix=".gguf")
    g = gguf.GGUFWriter(path, arch)
    g.add_name(name)
    g.add_block_count(LAYERS)
    g.add_context_length(128)
    g.add_embedding_length(HIDDEN)
    g.add_feed_forward_length(FFN)
    g.add_head_count(HEADS)
    g.add_head_count_kv(KV)
    g.add_key_length(HEAD_DIM)
    g.add_value_length(HEAD_DIM)
    g.add_rope_dimension_count(HEAD_DIM)
    g.add_rope_freq_base(10000.0)
    g.add_layer_norm_rms_eps(1e-5)
    g.add_vocab_size(vocab)
    g.add_tokenizer_model("gpt2")
    g.add_tokenizer_pre("gpt-2")
    g.add_token_list(tokens)
    g.add_token_types([3, 3, 3] + [1] * (vocab - 3))
    g.add_token_merges(["\u0120 t"])
    g.add_bos_token_id(1)
    g.add_eos_token_id(2)
    g.add_pad_token_id(0)
    g.add_chat_template("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}")

    def t(tname, arr, quant=True):
        if quant and qtype != gguf.GGMLQuantizationType.F32 and arr.ndim == 2:
            if qtype == gguf.GGMLQuantizationType.F16:
                g.add_tensor(tname, arr.astype(np.float16))
            else:
                g.add_tensor(tname, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
        else:
            g.add_tensor(tname, arr)

    t("token_embd.weight", w(vocab, HIDDEN))
    t("output_norm.weight", np.ones(HIDDEN, np.float32), False)
    for layer in range(LAYERS):
        p = "blk.%d." % layer
        t(p + "attn_norm.weight", np.ones(HIDDEN, np.float32), False)
        t(p + "attn_q.weight", w(HEADS * HEAD_DIM, HIDDEN))
        t(p + "attn_k.weight", w(KV * HEAD_DIM, HIDDEN))
        t(p + "attn_v.weight", w(KV * HEAD_DIM, HIDDEN))
        if bias:
            t(p + "attn_q.bias", w(HEADS * HEAD_DIM), False)
            t(p + "attn_k.bias", w(KV * HEAD_DIM), False)
            t(p + "attn_v.bias", w(KV * HEAD_DIM), False)
        t(p + "attn_output.weight", w(HIDDEN, HEADS * HEAD_DIM))
        t(p + "ffn_norm.weight", np.ones(HIDDEN, np.float32), False)
        t(p + "ffn_gate.weight", w(FFN, HIDDEN))
        t(p + "ffn_up.weight", w(FFN, HIDDEN))
        t(p + "ffn_down.weight", w(HIDDEN, FFN))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    data = open(path, "rb").read()
    os.unlink(path)
    return b"\x00" + data


def hf_input(config, tokenizer_config, tensors):
    tc = json.dumps(tokenizer_config).encode() if tokenizer_config is not None else b""
    return b"\x01" + json.dumps(config).encode() + b"\x00" + tc + b"\x00" + save(tensors, metadata={"format": "pt"})


def hf_seed(model_type, dtype, qk_norm, tied, tokenizer_config):
    config = {
        "architectures": ["Qwen3ForCausalLM" if model_type == "qwen3" else "LlamaForCausalLM"],
        "model_type": model_type, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_hidden_layers": LAYERS,
        "head_dim": HEAD_DIM, "vocab_size": 256, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": tied, "torch_dtype": "float16",
    }
    t = {"model.embed_tokens.weight": w(256, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32)}
    if not tied:
        t["lm_head.weight"] = w(256, HIDDEN)
    for layer in range(LAYERS):
        p = "model.layers.%d." % layer
        t[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.k_proj.weight"] = w(KV * HEAD_DIM, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = w(KV * HEAD_DIM, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = w(HIDDEN, HEADS * HEAD_DIM)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = np.ones(HEAD_DIM, np.float32)
            t[p + "self_attn.k_norm.weight"] = np.ones(HEAD_DIM, np.float32)
        t[p + "mlp.gate_proj.weight"] = w(FFN, HIDDEN)
        t[p + "mlp.up_proj.weight"] = w(FFN, HIDDEN)
        t[p + "mlp.down_proj.weight"] = w(HIDDEN, FFN)
    t = {k: v.astype(dtype) for k, v in t.items()}
    return hf_input(config, tokenizer_config, t)


def awq_linear(t, prefix, n_out, n_in, group):
    """An AutoAWQ GEMM linear of random codes: qweight int32 [K, N/8], qzeros
    int32 [K/g, N/8] (8 nibbles a word, AutoAWQ's order), scales f16 [K/g, N]."""
    def pack(codes):  # codes [rows, N] of 0..15 -> int32 [rows, N/8]
        order = [0, 2, 4, 6, 1, 3, 5, 7]
        words = np.zeros((codes.shape[0], codes.shape[1] // 8), np.uint32)
        for i, c in enumerate(order):
            words |= codes[:, c::8].astype(np.uint32) << np.uint32(4 * i)
        return words.view(np.int32)
    t[prefix + ".qweight"] = pack(rng.integers(0, 16, (n_in, n_out)))
    t[prefix + ".qzeros"] = pack(rng.integers(0, 16, (n_in // group, n_out)))
    t[prefix + ".scales"] = (rng.random((n_in // group, n_out)) * 0.01 + 0.001).astype(np.float16)


def hf_awq_seed(group):
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": FFN, "num_attention_heads": HEADS, "num_key_value_heads": KV,
        "num_hidden_layers": LAYERS, "vocab_size": 256, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float16",
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
                                "version": "gemm"},
    }
    t = {"model.embed_tokens.weight": w(256, HIDDEN).astype(np.float16),
         "lm_head.weight": w(256, HIDDEN).astype(np.float16),
         "model.norm.weight": np.ones(HIDDEN, np.float16)}
    for layer in range(LAYERS):
        p = "model.layers.%d." % layer
        t[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float16)
        t[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float16)
        awq_linear(t, p + "self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN, group)
        awq_linear(t, p + "self_attn.k_proj", KV * HEAD_DIM, HIDDEN, group)
        awq_linear(t, p + "self_attn.v_proj", KV * HEAD_DIM, HIDDEN, group)
        awq_linear(t, p + "self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM, group)
        awq_linear(t, p + "mlp.gate_proj", FFN, HIDDEN, group)
        awq_linear(t, p + "mlp.up_proj", FFN, HIDDEN, group)
        awq_linear(t, p + "mlp.down_proj", HIDDEN, FFN, group)
    return hf_input(config, None, t)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "gguf-llama-f16": gguf_seed("llama", gguf.GGMLQuantizationType.F16, False, "tiny llama"),
        "gguf-qwen2-q8_0": gguf_seed("qwen2", gguf.GGMLQuantizationType.Q8_0, True, "tiny qwen2"),
        "hf-llama-f16-tied": hf_seed("llama", np.float16, False, True,
                                     {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
                                      "bos_token": "!", "eos_token": {"content": "~"}, "add_bos_token": True}),
        "hf-qwen3-f32": hf_seed("qwen3", np.float32, True, False,
                                {"chat_template": [{"name": "tool_use", "template": "T"},
                                                   {"name": "default", "template": "{{ messages[0].content }}"}],
                                 "eos_token": "~", "add_eos_token": False}),
        "hf-llama-awq-g32": hf_awq_seed(32),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
