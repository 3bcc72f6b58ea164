#!/usr/bin/env python3
"""gen_cpu_f32_reference.py — an f32 llama.cpp reference for Hone's precise CPU mode.

The default model (SmolLM2-135M-Instruct Q4_1) is turned into an all-F32 GGUF:
every tensor dequantized by the `gguf` package (gguf.quants.dequantize — an
implementation independent of Hone's), metadata copied unchanged except
general.file_type. llama.cpp (through llama-cpp-python) then runs f32 weights
× f32 activations with f32 accumulation — no activation quantization, unlike
its Q4_1 path (8-bit activations, gen_cpu_reference.py). The KV cache is f16
(type_k/type_v = F16, as Hone's) and flash attention is off, so attention
rounds q and the softmax probabilities to f16 exactly where Hone does.

Writes tests/data/cpu/llamacpp-f32-reference.json with the same layout as
llamacpp-reference.json (same text, prompts and positions, taken from
gen_cpu_reference.py):
  - the first 512 tokens of tests/data/cpu/reference-text.txt evaluated as one
    batch: top-20 ids and logits at every position, the full vocabulary at 3
    positions (float32, base64), the perplexity over the 511 predictions;
  - greedy 64-token continuations of 6 prompts (plain and chat-templated).

The F32 file (≈ 540 MB) is written to a temporary folder and removed.

usage: python3 tests/reference/gen_cpu_f32_reference.py [MODEL]
"""
import hashlib
import json
import os
import sys
import tempfile

import numpy as np
import gguf
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_cpu_reference import (DATA, MODEL_SHA256, greedy_continuations,  # noqa: E402
                               no_extra_buffer_types, score_text)

GGML_TYPE_F16 = 1


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_f32_gguf(src, dst):
    """Copy @src to @dst with every tensor dequantized to F32 by gguf.quants."""
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value = int(gguf.LlamaFileType.ALL_F32)
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    types = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        # numpy shape is ggml's ne reversed; dequantize expands the last axis to elements
        assert tuple(reversed(w.shape)) == tuple(int(n) for n in t.shape), (t.name, w.shape, t.shape)
        assert np.all(np.isfinite(w)), t.name
        writer.add_tensor(t.name, np.ascontiguousarray(w))
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return types


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "HONE_DEFAULT_MODEL", os.path.expanduser("~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    sha = sha256_of(model)
    if sha != MODEL_SHA256:
        sys.exit(f"{model}: sha256 {sha}, expected {MODEL_SHA256}")
    no_extra_buffer_types()
    with tempfile.TemporaryDirectory(prefix="hone-f32-") as tmp:
        f32 = os.path.join(tmp, "SmolLM2-135M-Instruct.F32.gguf")
        types = write_f32_gguf(model, f32)
        f32_sha = sha256_of(f32)
        print(f"dequantized {types} -> {f32} ({os.path.getsize(f32) >> 20} MiB)", file=sys.stderr)
        llm = llama_cpp.Llama(f32, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                              n_threads_batch=2, logits_all=True, verbose=False, seed=0,
                              flash_attn=False, type_k=GGML_TYPE_F16, type_v=GGML_TYPE_F16)
        vocab = llm.n_vocab()

        text_part = score_text(llm)
        conts = greedy_continuations(llm, with_gaps=True)
        del llm

    ref = {
        "generator": "tests/reference/gen_cpu_f32_reference.py",
        "llama_cpp_python": llama_cpp.__version__,
        "gguf": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0",
        "numpy": np.__version__,
        "model_sha256": sha,
        "f32_model_sha256": f32_sha,
        "dequantized_types": types,
        "n_vocab": vocab,
        "settings": {"n_ctx": 1024, "n_batch": 512, "n_threads": 2, "type_k": "f16", "type_v": "f16",
                     "flash_attn": False, "use_extra_bufts": False, "weights": "f32 (gguf.quants.dequantize)"},
        **text_part,
        "continuations": conts,
    }
    out = os.path.join(DATA, "llamacpp-f32-reference.json")
    with open(out, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"wrote {out}: perplexity {ref['perplexity']:.4f}, {len(conts)} continuations", file=sys.stderr)
    for c in conts:
        print(repr(c["prompt"][:40]), "->", repr(c["text"][:60]), "min gap", min(c["top2_gaps"]), file=sys.stderr)


if __name__ == "__main__":
    main()
