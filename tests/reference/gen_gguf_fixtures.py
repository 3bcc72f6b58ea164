#!/usr/bin/env python3
"""Generate the GGUF / dtype fixtures under tests/data/gguf/ with the `gguf`
PyPI package (pinned in requirements.txt: gguf==0.19.0), an implementation of
GGUF and of the ggml block formats independent of Hone.

    python3 tests/reference/gen_gguf_fixtures.py            # unit fixtures
    python3 tests/reference/gen_gguf_fixtures.py --model PATH/SmolLM2-135M-Instruct.Q4_1.gguf

Files (all little-endian):
  types-v3.gguf / .json    every metadata value type (incl. string arrays, a
                           nested array, empty array) and one tensor of every
                           supported tensor type, written by gguf.GGUFWriter.
                           Plain/Q4_0/Q4_1/Q8_0/BF16/F16 tensors are made by
                           gguf.quants.quantize from random f32 (the source
                           values are stored in types-v3.src.bin so Hone's
                           quantizers can be compared byte for byte); Q4_K and
                           Q6_K, which the package cannot quantize, are random
                           bytes with finite fp16 scales.
  types-v3.expected.bin    gguf.quants.dequantize of every tensor, f32, in
                           tensor order.
  types-v2.gguf / .json    a small file with version 2 (GGUFWriter writes v3;
                           v2 and v3 little-endian files are byte-identical but
                           for the version field, which we patch) and
                           general.alignment = 64.
  ggml-quants.bin          f32 rows and their Q4_K/Q6_K/Q4_0/Q4_1/Q8_0 blocks made by
                           llama.cpp's quantize_row_*_ref (libggml-base.so from
                           llama-cpp-python), for byte-exact quantizer checks.
  f16-cases.bin            (f32 bits, numpy f16 bits, package bf16 bits) for
                           tricky values: ties, subnormals, overflow, inf.
  smollm2-sample.json/.bin (--model) metadata of the default model and rows of a
                           Q8_0 and Q4_1 tensor dequantized by the package.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gguf")

assert gguf.__name__ == "gguf"


def f32(x):
    return float(np.float32(x))


INT_TYPES = {V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64}


def kv_expect(vtype, value, sub=None):
    # Integers go to JSON as decimal strings: 64-bit values do not survive a
    # JSON number parser.
    if vtype in INT_TYPES:
        value = str(value)
    elif vtype == V.ARRAY and sub in INT_TYPES:
        value = [str(v) for v in value]
    d = {"type": int(vtype), "value": value}
    if sub is not None:
        d["subtype"] = int(sub)
    return d


def random_kquant_blocks(rng, qtype, n_blocks):
    """Random K-quant blocks whose fp16 super-block scales are finite."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype == T.Q4_K:
        d = rng.uniform(1e-3, 2e-2, size=(n_blocks, 2)).astype(np.float16)
        b[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    elif qtype == T.Q6_K:
        d = rng.uniform(1e-4, 2e-3, size=(n_blocks, 1)).astype(np.float16)
        b[:, size - 2:size] = d.view(np.uint8).reshape(n_blocks, 2)
    else:
        raise ValueError(qtype)
    return b


def write_types_v3(rng):
    path = os.path.join(OUT, "types-v3.gguf")
    w = gguf.GGUFWriter(path, arch="hone-test")
    expect = {"general.architecture": kv_expect(V.STRING, "hone-test")}

    def add(key, vtype, value, sub=None):
        w.add_key_value(key, value, vtype, sub_type=sub)
        expect[key] = kv_expect(vtype, value, sub)

    add("test.u8", V.UINT8, 200)
    add("test.i8", V.INT8, -100)
    add("test.u16", V.UINT16, 60000)
    add("test.i16", V.INT16, -30000)
    add("test.u32", V.UINT32, 4000000000)
    add("test.i32", V.INT32, -2000000000)
    add("test.f32", V.FLOAT32, f32(3.14159))
    add("test.bool_true", V.BOOL, True)
    add("test.bool_false", V.BOOL, False)
    add("test.string", V.STRING, "héllo, wörld ✓")
    add("test.empty_string", V.STRING, "")
    add("test.u64", V.UINT64, 2**63 + 12345)
    add("test.i64", V.INT64, -(2**62) - 7)
    add("test.f64", V.FLOAT64, 2.718281828459045)
    add("test.small_u64", V.UINT64, 77)
    add("test.arr_u32", V.ARRAY, [1, 2, 3, 4000000000], V.UINT32)
    add("test.arr_i16", V.ARRAY, [-1, 0, 32767, -32768], V.INT16)
    add("test.arr_f32", V.ARRAY, [f32(0.5), f32(-1.25), f32(1e-8)], V.FLOAT32)
    add("test.arr_bool", V.ARRAY, [True, False, True], V.BOOL)
    add("test.arr_str", V.ARRAY, ["alpha", "", "γάμμα", "a\x00b", "<|im_start|>"], V.STRING)
    add("test.arr_nested", V.ARRAY, [["x", "yz"], ["w"]], V.ARRAY)
    add("test.arr_i64", V.ARRAY, [-5, 2**40], V.INT64)

    src_all = []
    tensors = []
    # (name, type, ne0, rows); shapes chosen so every row holds several blocks.
    specs = [
        ("t.f32", T.F32, 64, 3),
        ("t.f16", T.F16, 64, 3),
        ("t.bf16", T.BF16, 64, 3),
        ("t.q8_0", T.Q8_0, 128, 4),
        ("t.q4_0", T.Q4_0, 128, 4),
        ("t.q4_1", T.Q4_1, 128, 4),
        ("t.q4_k", T.Q4_K, 512, 3),
        ("t.q6_k", T.Q6_K, 512, 3),
        ("t.f32_3d", T.F32, 8, 6),     # stored as [2, 3, 8]
    ]
    expected = []
    for name, qt, ne0, rows in specs:
        if qt in (T.Q4_K, T.Q6_K):
            bs, ts = gguf.GGML_QUANT_SIZES[qt]
            blocks = random_kquant_blocks(rng, qt, rows * ne0 // bs)
            data = blocks.reshape(rows, ne0 // bs * ts)
            src = None
        else:
            src = rng.standard_normal((rows, ne0)).astype(np.float32)
            # A few blocks with structure: a zero block, a constant block, outliers,
            # values that round to f16 subnormals / overflow.
            if qt in (T.Q8_0, T.Q4_0, T.Q4_1):
                src[0, 0:32] = 0.0
                src[0, 32:64] = np.float32(0.75)
                src[1, 0] = np.float32(40.0)
                src[2, 5] = np.float32(-35.5)
            if qt in (T.F16, T.BF16):
                src[0, :8] = np.array([1e-7, -3e-8, 65519.0, 65520.0, 1e6, -np.inf, 2.0**-24, 3 * 2.0**-25],
                                      dtype=np.float32)
            data = gguf.quants.quantize(src, qt)
        if name == "t.f32_3d":
            data3 = data.reshape(2, 3, ne0)
            w.add_tensor(name, data3)
            ne = [ne0, 3, 2]
        elif qt in (T.F32, T.F16):
            w.add_tensor(name, data)
            ne = [ne0, rows]
        else:
            w.add_tensor(name, data, raw_dtype=qt)
            ne = [ne0, rows]
        deq = gguf.quants.dequantize(np.asarray(data).reshape(-1).view(np.uint8) if qt not in (T.F32, T.F16)
                                     else np.asarray(data), qt)
        deq = np.asarray(deq, dtype=np.float32).reshape(-1)
        tensors.append({
            "name": name, "type": int(qt), "ne": ne,
            "expected_offset": int(sum(e.size for e in expected)),
            "src_offset": int(sum(s.size for s in src_all)) if src is not None else -1,
        })
        expected.append(deq)
        if src is not None:
            src_all.append(src.reshape(-1))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    np.concatenate(expected).astype("<f4").tofile(os.path.join(OUT, "types-v3.expected.bin"))
    np.concatenate(src_all).astype("<f4").tofile(os.path.join(OUT, "types-v3.src.bin"))

    # Read back with the package's reader: what we claim is what it sees.
    r = gguf.GGUFReader(path)
    assert len(r.tensors) == len(specs)
    for t, rt in zip(tensors, r.tensors):
        assert rt.name == t["name"]
        t["data_offset"] = int(rt.data_offset)
        t["n_bytes"] = int(rt.n_bytes)
    sizes = {}
    for qt in T:
        if qt in gguf.GGML_QUANT_SIZES and int(qt) < 40:
            bs, ts = gguf.GGML_QUANT_SIZES[qt]
            sizes[qt.name] = {"type": int(qt), "block_size": bs, "type_size": ts}
    with open(os.path.join(OUT, "types-v3.json"), "w", encoding="utf-8") as f:
        json.dump({"version": 3, "alignment": 32, "kv": expect, "tensors": tensors, "quant_sizes": sizes,
                   "generator": f"gguf {gguf_version()} via gen_gguf_fixtures.py"},
                  f, ensure_ascii=False, indent=1)


def write_types_v2(rng):
    path = os.path.join(OUT, "types-v2.gguf")
    w = gguf.GGUFWriter(path, arch="hone-v2")
    w.add_custom_alignment(64)
    w.add_uint32("test.answer", 42)
    w.add_string("test.s", "v2")
    w.add_array("test.words", ["one", "two", "three"])
    src = rng.standard_normal((2, 64)).astype(np.float32)
    q = gguf.quants.quantize(src, T.Q8_0)
    w.add_tensor("a", q, raw_dtype=T.Q8_0)
    w.add_tensor("b", src[:, :16].copy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.seek(4)
        assert struct.unpack("<I", f.read(4))[0] == 3
        f.seek(4)
        f.write(struct.pack("<I", 2))
    r = gguf.GGUFReader(path)
    deq_a = gguf.quants.dequantize(r.tensors[0].data.reshape(-1), T.Q8_0).reshape(-1)
    deq_b = src[:, :16].reshape(-1)
    np.concatenate([deq_a, deq_b]).astype("<f4").tofile(os.path.join(OUT, "types-v2.expected.bin"))
    offs = [int(t.data_offset) for t in r.tensors]
    with open(os.path.join(OUT, "types-v2.json"), "w", encoding="utf-8") as f:
        json.dump({"version": 2, "alignment": 64, "data_offsets": offs,
                   "file_size": os.path.getsize(path),
                   "kv": {"test.answer": kv_expect(V.UINT32, 42), "test.s": kv_expect(V.STRING, "v2"),
                          "test.words": kv_expect(V.ARRAY, ["one", "two", "three"], V.STRING),
                          "general.alignment": kv_expect(V.UINT32, 64)},
                   "tensors": [{"name": "a", "type": int(T.Q8_0), "ne": [64, 2], "expected_offset": 0},
                               {"name": "b", "type": int(T.F32), "ne": [16, 2], "expected_offset": 128}]},
                  f, indent=1)


def write_f16_cases(rng):
    vals = []
    # Every f16 midpoint in a few binades (ties → even), ±1 f32 ulp around them.
    h = np.arange(0, 0x7c00, dtype=np.uint16)
    lo = h.view(np.float16).astype(np.float32)
    hi = (h + 1).view(np.float16).astype(np.float32)
    mids = ((lo.astype(np.float64) + hi.astype(np.float64)) / 2).astype(np.float32)
    pick = np.concatenate([np.arange(0, 1100), rng.choice(np.arange(1100, 0x7c00), 1500, replace=False)])
    for m in mids[pick]:
        b = np.float32(m).view(np.uint32)
        vals += [b, b - 1, b + 1]
    specials = [0.0, -0.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e10, np.inf, -np.inf,
                2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 2.0**-14, 2.0**-14 * (1 - 2.0**-11),
                1e-45, 3.4028235e38, -3.4028235e38, 1.0, -1.0, 1.00048828125, 1.000732421875]
    vals += [np.float32(s).view(np.uint32) for s in specials]
    vals += list(rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32))
    bits = np.array(vals, dtype=np.uint32)
    f = bits.view(np.float32)
    keep = ~np.isnan(f)      # NaN payloads are implementation-specific; tested separately
    bits, f = bits[keep], f[keep]
    with np.errstate(over="ignore"):
        f16 = f.astype(np.float16).view(np.uint16)
    bf16 = gguf.quants.quantize(f.reshape(1, -1), T.BF16).view(np.uint16).reshape(-1)
    rec = np.zeros(len(bits), dtype=[("f", "<u4"), ("h", "<u2"), ("b", "<u2")])
    rec["f"], rec["h"], rec["b"] = bits, f16, bf16
    rec.tofile(os.path.join(OUT, "f16-cases.bin"))


def write_ggml_quants(rng):
    """Hone's quantizers against llama.cpp's own reference quantizers
    (quantize_row_*_ref in ggml-quants.c), called through ctypes from the
    libggml-base.so that llama-cpp-python (pinned in requirements.txt) ships.
    ggml-kquants.bin: header u32 n_rows, u32 n_cols, u32 n_types, then the f32
    source, then per type: u32 ggml type, the quantized bytes of every row."""
    import ctypes
    import llama_cpp
    libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    lib = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
    rows, cols = 24, 512
    src = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
    src[0, :] = 0.0                       # all-zero row
    src[1, :] = np.float32(0.125)         # constant row
    src[2, 100] = np.float32(3.0)         # outliers
    src[3, 7] = np.float32(-2.5)
    src[4, :256] = np.abs(src[4, :256])   # a block with no negative value (min > 0 path)
    src[5, :] = rng.uniform(-1, 1, cols).astype(np.float32)
    src[6, :32] = np.float32(1e-20)       # tiny values (GROUP_MAX_EPS paths)
    types = [T.Q4_K, T.Q6_K, T.Q4_0, T.Q4_1, T.Q8_0]
    out = bytearray(struct.pack("<III", rows, cols, len(types)))
    out += src.astype("<f4").tobytes()
    for qt in types:
        fn = getattr(lib, f"quantize_row_{qt.name.lower() if qt.name.endswith(('_0', '_1')) else qt.name[:-2].lower() + '_K'}_ref")
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        q = np.zeros(rows * cols // bs * ts, dtype=np.uint8)
        fn(src.ctypes.data, q.ctypes.data, rows * cols)
        out += struct.pack("<I", int(qt)) + q.tobytes()
    with open(os.path.join(OUT, "ggml-quants.bin"), "wb") as f:
        f.write(out)
    return llama_cpp.__version__


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # pragma: no cover
        return "?"


def write_model_sample(path):
    r = gguf.GGUFReader(path)

    def field(key):
        fl = r.fields[key]
        t = fl.types[0]
        if t == V.STRING:
            return bytes(fl.parts[fl.data[0]]).decode("utf-8")
        if t == V.ARRAY:
            return len(fl.data)
        return fl.parts[fl.data[0]].tolist()[0]

    def arr_str(key, i):
        fl = r.fields[key]
        return bytes(fl.parts[fl.data[i]]).decode("utf-8")

    meta = {}
    for key in ["general.architecture", "general.name", "llama.block_count", "llama.context_length",
                "llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
                "llama.attention.head_count_kv", "llama.rope.freq_base",
                "llama.attention.layer_norm_rms_epsilon", "llama.vocab_size", "llama.rope.dimension_count",
                "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                "general.file_type"]:
        meta[key] = {"type": int(r.fields[key].types[0]), "value": field(key)}
    strings = {"tokenizer.ggml.tokens": {str(i): arr_str("tokenizer.ggml.tokens", i) for i in (0, 1, 2, 300, 49151)},
               "tokenizer.ggml.merges": {str(i): arr_str("tokenizer.ggml.merges", i) for i in (0, 300, 48899)}}
    samples = []
    blobs = []
    off = 0
    by_name = {t.name: t for t in r.tensors}
    for name, rows in [("token_embd.weight", [0, 1, 2, 12345, 49151]),
                       ("blk.0.ffn_down.weight", [0, 100, 575]),
                       ("blk.29.attn_q.weight", [0, 575]),
                       ("blk.0.attn_norm.weight", [0])]:
        t = by_name[name]
        qt = T(int(t.tensor_type))
        ne = [int(x) for x in t.shape]
        data = np.asarray(t.data)
        for row in rows:
            if qt == T.F32:
                deq = data.reshape(-1, ne[0])[row]
            else:
                deq = gguf.quants.dequantize(data.reshape(ne[1] if len(ne) > 1 else 1, -1)[row], qt)
            deq = np.asarray(deq, dtype=np.float32).reshape(-1)
            assert deq.size == ne[0]
            blobs.append(deq)
            samples.append({"tensor": name, "type": int(qt), "ne": ne, "row": row, "offset": off})
            off += deq.size
    np.concatenate(blobs).astype("<f4").tofile(os.path.join(OUT, "smollm2-sample.bin"))
    with open(os.path.join(OUT, "smollm2-sample.json"), "w", encoding="utf-8") as f:
        json.dump({"n_tensors": len(r.tensors),
                   # GGUFReader lists the header as pseudo-fields "GGUF.*"; they are not metadata.
                   "n_kv": len([k for k in r.fields if not k.startswith("GGUF.")]), "meta": meta, "strings": strings,
                   "rows": samples}, f, ensure_ascii=False, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="default model GGUF (writes smollm2-sample.*)")
    args = ap.parse_args()
    if gguf_version() != "0.19.0":
        print(f"warning: gguf {gguf_version()} installed, fixtures were made with 0.19.0", file=sys.stderr)
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261129)
    write_types_v3(rng)
    write_types_v2(rng)
    write_f16_cases(rng)
    print("ggml-quants.bin from llama-cpp-python", write_ggml_quants(np.random.default_rng(7)))
    if args.model:
        write_model_sample(args.model)


if __name__ == "__main__":
    main()
