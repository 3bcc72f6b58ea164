#!/usr/bin/env python3
"""Check that files written by Hone's safetensors writer load in the reference
implementation (the `safetensors` PyPI package).

  mkdir -p /tmp/st && HONE_TEST_KEEP_DIR=/tmp/st build/tests/test-safetensors
  HONE_TEST_KEEP_DIR=/tmp/st build/tests/test-model      # also keeps tiny HF folders
  python3 tests/reference/check_safetensors_writer.py /tmp/st

Every *.safetensors under the folder must load (safe_open + load_file, which
validate the header, offsets and coverage); round-trip.safetensors must hold
the values recorded in round-trip.expected.json.
"""
import glob
import json
import os
import sys

import numpy as np
from safetensors import safe_open

root = sys.argv[1] if len(sys.argv) > 1 else "."
files = sorted(glob.glob(os.path.join(root, "**", "*.safetensors"), recursive=True))
if not files:
    sys.exit("no .safetensors files under " + root)
for path in files:
    dtypes = set()
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
        assert meta.get("format") == "pt", (path, meta)
        keys = list(f.keys())
        for k in keys:
            sl = f.get_slice(k)
            dtypes.add(sl.get_dtype())
            if sl.get_dtype() != "BF16":   # numpy has no bfloat16: shape only
                assert list(f.get_tensor(k).shape) == sl.get_shape()
    print("ok  %-60s %3d tensors  %s" % (os.path.relpath(path, root), len(keys), sorted(dtypes)))

rt = os.path.join(root, "round-trip.safetensors")
if os.path.exists(rt):
    exp = json.load(open(os.path.join(root, "round-trip.expected.json")))
    t = {}
    with safe_open(rt, framework="np") as f:
        for k in f.keys():
            if f.get_slice(k).get_dtype() != "BF16":
                t[k] = f.get_tensor(k)
    assert t["w.f32"].shape == (2, 3) and t["w.f32"].dtype == np.float32
    assert np.array_equal(t["w.f32"].reshape(-1), np.array(exp["w.f32"], dtype=np.float32))
    assert t["w.i64"].tolist() == exp["w.i64"]
    assert t['odd "name"\n'].tolist() == [-128, 5, 127]
    assert t["w.f64"].shape == () and t["w.f64"] == 0.1
    assert t["w.empty"].shape == (0, 4)
    print("ok  round-trip values match")
print("all %d files accepted by safetensors %s" % (len(files), __import__("safetensors").__version__))
