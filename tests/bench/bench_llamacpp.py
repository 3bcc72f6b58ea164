#!/usr/bin/env python3
"""bench_llamacpp.py — llama.cpp (llama-cpp-python) prefill/decode speed, the
same protocol as bench-cpu.c: a fixed prompt of N token ids
(id_i = 1 + (7919*i + 13) mod (vocab - 1)), prefill timed as one eval of the
whole prompt, then D single-token evals feeding back the argmax; median of R
runs, a fresh KV cache per run, n_ctx max(512, prompt + decode), n_batch 512.

usage: bench_llamacpp.py [MODEL] [--threads 2] [--prompt 256] [--decode 128] [--runs 5]
Prints one JSON line (wall tok/s, CPU ms per token, peak RSS).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np
import llama_cpp
import llama_cpp.llama_cpp as llama_lowlevel


def no_extra_buffer_types():
    """This machine's CPU reports AMX, but the VM faults on tile instructions
    (SIGILL in ggml_backend_amx_mul_mat); llama-cpp-python does not expose
    llama_model_params.use_extra_bufts, so turn it off in the defaults it reads.
    That also turns off ggml's weight repacking (which has no Q4_1 layout)."""
    default = llama_lowlevel.llama_model_default_params

    def patched():
        p = default()
        p.use_extra_bufts = False
        return p
    llama_lowlevel.llama_model_default_params = patched


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=os.environ.get(
        "HONE_DEFAULT_MODEL",
        os.path.expanduser("~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    no_extra_buffer_types()

    llm = llama_cpp.Llama(a.model, n_ctx=max(512, a.prompt + a.decode), n_batch=512, n_ubatch=512, n_threads=a.threads,
                          n_threads_batch=a.threads, logits_all=False, verbose=False)
    vocab = llm.n_vocab()
    ids = [1 + (7919 * i + 13) % (vocab - 1) for i in range(a.prompt)]
    pre, dec, pre_cpu, dec_cpu = [], [], [], []
    for r in range(a.runs):
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(ids)
        t1, c1 = time.perf_counter(), time.process_time()
        for _ in range(a.decode):
            logits = llm._ctx.get_logits()   # last token's logits (C pointer)
            arr = np.ctypeslib.as_array(logits, shape=(vocab,))
            llm.eval([int(arr.argmax())])
        t2, c2 = time.perf_counter(), time.process_time()
        pre.append(a.prompt / (t1 - t0))
        dec.append(a.decode / (t2 - t1))
        pre_cpu.append((c1 - c0) * 1e3 / a.prompt)
        dec_cpu.append((c2 - c1) * 1e3 / a.decode)
        print(f"run {r}: prefill {pre[-1]:.1f} tok/s ({pre_cpu[-1]:.2f} cpu-ms/tok), "
              f"decode {dec[-1]:.1f} tok/s ({dec_cpu[-1]:.2f} cpu-ms/tok)", file=sys.stderr)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({
        "engine": "llama.cpp " + llama_cpp.__version__, "threads": a.threads, "prompt": a.prompt,
        "decode": a.decode, "runs": a.runs,
        "prefill_tok_s": round(statistics.median(pre), 1), "decode_tok_s": round(statistics.median(dec), 1),
        "prefill_cpu_ms_per_tok": round(statistics.median(pre_cpu), 3),
        "decode_cpu_ms_per_tok": round(statistics.median(dec_cpu), 3),
        "peak_rss_mib": round(peak, 1), "model_mib": round(os.path.getsize(a.model) / 1048576.0, 1)}))


if __name__ == "__main__":
    main()
