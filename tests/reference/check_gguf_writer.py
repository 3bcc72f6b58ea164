#!/usr/bin/env python3
"""Check a GGUF file written by Hone's writer with the `gguf` package (0.19.0).

The file comes from test-gguf's /gguf/writer/roundtrip test:

    HONE_GGUF_WRITE_OUT=tests/data/gguf/hone-written.gguf \
        build/tests/test-gguf -p /gguf/writer/roundtrip
    python3 tests/reference/check_gguf_writer.py tests/data/gguf/hone-written.gguf

It recomputes the test's deterministic source values, and checks with the
package: every metadata key, type and value; every tensor's name, type and
shape; for the types the package can quantize (F32, F16, BF16, Q8_0, Q4_0,
Q4_1) that Hone's bytes equal the package's quantization of the same values;
for Q4_K and Q6_K (no quantizer in the package) that the package's
dequantization of Hone's blocks is close to the source values.
Exit status 0 when everything matches.
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

# Keep in step with build_writer_file() / writer_tensors[] in tests/test-gguf.c.
TENSORS = [
    ("w.f32", T.F32, [64, 2]),
    ("w.f16", T.F16, [64, 2]),
    ("w.bf16", T.BF16, [64, 2]),
    ("w.q8_0", T.Q8_0, [128, 3]),
    ("w.q4_0", T.Q4_0, [128, 3]),
    ("w.q4_1", T.Q4_1, [128, 3]),
    ("w.q4_k", T.Q4_K, [256, 2]),
    ("w.q6_k", T.Q6_K, [512, 2]),
    ("w.f32_3d", T.F32, [4, 3, 2]),
    ("w.vec", T.F32, [5]),
]

KV = {
    "general.architecture": (V.STRING, "hone-test"),
    "general.alignment": (V.UINT32, 64),
    "w.u8": (V.UINT8, 250),
    "w.i8": (V.INT8, -120),
    "w.u16": (V.UINT16, 65000),
    "w.i16": (V.INT16, -32000),
    "w.u32": (V.UINT32, 3000000000),
    "w.i32": (V.INT32, -2100000000),
    "w.u64": (V.UINT64, 12345678901234567890),
    "w.i64": (V.INT64, -1234567890123456789),
    "w.f32": (V.FLOAT32, float(np.float32(0.1))),
    "w.f64": (V.FLOAT64, 0.1),
    "w.bool": (V.BOOL, True),
    "w.str": (V.STRING, "ChatML ✓ {{ x }}"),
    "w.replaced": (V.INT32, 99),
    "w.a_u8": (V.ARRAY, (V.UINT8, [0, 255, 7])),
    "w.a_i8": (V.ARRAY, (V.INT8, [-128, 127])),
    "w.a_u16": (V.ARRAY, (V.UINT16, [1, 65535])),
    "w.a_i16": (V.ARRAY, (V.INT16, [-2, 32767])),
    "w.a_u32": (V.ARRAY, (V.UINT32, [4000000000])),
    "w.a_i32": (V.ARRAY, (V.INT32, [-5, 6, -7])),
    "w.a_u64": (V.ARRAY, (V.UINT64, [18446744073709551615])),
    "w.a_i64": (V.ARRAY, (V.INT64, [-9223372036854775808, 3])),
    "w.a_f32": (V.ARRAY, (V.FLOAT32, [1.5, -0.0, float(np.float32(1e-30))])),
    "w.a_f64": (V.ARRAY, (V.FLOAT64, [3.141592653589793, -1e300])),
    "w.a_bool": (V.ARRAY, (V.BOOL, [True, False])),
    "w.a_empty": (V.ARRAY, (V.INT32, [])),
    "w.a_str": (V.ARRAY, (V.STRING, ["hello", "", "wörld", "<|im_end|>"])),
    "w.a_raw": (V.ARRAY, (V.STRING, [b"a\x00b", b"xy"])),
}


def src_values(k, n):
    i = np.arange(n, dtype=np.int64)
    q = ((i * 7919 + k * 104729) % 2001) - 1000
    return q.astype(np.float32) / np.float32(1000.0)


def field_value(f):
    t = f.types[0]
    if t == V.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    if t == V.ARRAY:
        sub = f.types[1] if len(f.types) > 1 else None
        if sub == V.STRING:
            return sub, [bytes(f.parts[i]) for i in f.data]
        return sub, [f.parts[i].tolist()[0] for i in f.data]
    v = f.parts[f.data[0]].tolist()[0]
    return bool(v) if t == V.BOOL else v


def main(path):
    r = gguf.GGUFReader(path)
    errors = []
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    if keys != list(KV):
        errors.append(f"keys/order differ: {keys}")
    for key, (vtype, want) in KV.items():
        f = r.fields.get(key)
        if f is None:
            errors.append(f"missing {key}")
            continue
        if f.types[0] != vtype:
            errors.append(f"{key}: type {f.types[0]!r}, want {vtype!r}")
            continue
        got = field_value(f)
        if vtype == V.ARRAY:
            sub, vals = got
            wsub, wvals = want
            if wvals and sub != wsub:
                errors.append(f"{key}: element type {sub!r}, want {wsub!r}")
            if wsub == V.STRING:
                wvals = [w if isinstance(w, bytes) else w.encode() for w in wvals]
            if wsub == V.BOOL:
                vals = [bool(v) for v in vals]
            if wsub in (V.FLOAT32, V.FLOAT64):
                ok = len(vals) == len(wvals) and all(np.float64(a).tobytes() == np.float64(b).tobytes()
                                                     for a, b in zip(vals, wvals))
            else:
                ok = vals == wvals
            if not ok:
                errors.append(f"{key}: {vals!r}, want {wvals!r}")
        elif got != want:
            errors.append(f"{key}: {got!r}, want {want!r}")

    if len(r.tensors) != len(TENSORS):
        errors.append(f"{len(r.tensors)} tensors, want {len(TENSORS)}")
    for k, ((name, qt, ne), t) in enumerate(zip(TENSORS, r.tensors)):
        if t.name != name or t.tensor_type != qt or [int(x) for x in t.shape] != ne:
            errors.append(f"tensor {k}: {t.name} {t.tensor_type!r} {list(t.shape)}, want {name} {qt!r} {ne}")
            continue
        if t.data_offset % 64:
            errors.append(f"{name}: data offset {t.data_offset} not aligned to 64")
        n = int(np.prod(ne))
        src = src_values(k, n).reshape(-1, ne[0])
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        deq = np.asarray(gguf.quants.dequantize(raw, qt), dtype=np.float32).reshape(-1)
        if qt in (T.Q4_K, T.Q6_K):
            rel = float(np.sqrt(np.mean((deq - src.reshape(-1)) ** 2) / np.mean(src ** 2)))
            limit = 0.12 if qt == T.Q4_K else 0.03
            print(f"{name}: package dequantizes Hone's {qt.name} blocks, relative RMSE {rel:.4f} (limit {limit})")
            if not rel <= limit:
                errors.append(f"{name}: relative RMSE {rel}")
        else:
            want = np.asarray(gguf.quants.quantize(src, qt)).reshape(-1).view(np.uint8)
            same = want.tobytes() == raw.tobytes()
            print(f"{name}: Hone's {qt.name} bytes {'==' if same else '!='} package quantize ({raw.size} bytes)")
            if not same:
                errors.append(f"{name}: bytes differ from gguf.quants.quantize")
    for e in errors:
        print("FAIL", e)
    print(f"gguf {gguf.__name__} reader: {len(keys)} keys, {len(r.tensors)} tensors, "
          f"{'OK' if not errors else f'{len(errors)} problems'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf/hone-written.gguf"))
