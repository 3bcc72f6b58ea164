#!/usr/bin/env python3
"""Copy a llama-architecture GGUF keeping only its first N layers.

The default model (98 MB) is larger than what one call to the GPU machine
can carry; its first layers, with the real embeddings, tokenizer and head,
keep the CUDA-vs-CPU comparison meaningful (real activations, peaked logits).
Usage: shrink-gguf.py IN.gguf OUT.gguf N_LAYERS     (needs the `gguf` package)
"""
import sys
import gguf

src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = gguf.GGUFReader(src)
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
w = gguf.GGUFWriter(dst, arch)
T = gguf.GGUFValueType
for f in r.fields.values():
    if f.name.startswith("GGUF.") or f.name == "general.architecture":
        continue
    vt = f.types[0]
    if f.name == f"{arch}.block_count":
        w.add_uint32(f.name, keep)
        continue
    if vt == T.ARRAY:
        sub = f.types[1]
        if sub == T.STRING:
            val = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
        else:
            val = [f.parts[i].tolist()[0] for i in f.data]
        w.add_key_value(f.name, val, vt, sub_type=sub)
    elif vt == T.STRING:
        w.add_key_value(f.name, bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape"), vt)
    else:
        w.add_key_value(f.name, f.parts[f.data[0]].tolist()[0], vt)
for t in r.tensors:
    if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= keep:
        continue
    w.add_tensor(t.name, t.data, raw_shape=list(t.data.shape), raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
