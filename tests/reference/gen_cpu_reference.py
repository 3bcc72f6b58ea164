#!/usr/bin/env python3
"""gen_cpu_reference.py — llama.cpp reference outputs for test-cpu-reference.

Runs the default model (SmolLM2-135M-Instruct Q4_1) with llama.cpp through
llama-cpp-python and writes tests/data/cpu/llamacpp-reference.json:
  - the first 512 tokens of tests/data/cpu/reference-text.txt (self-written
    prose) as llama.cpp tokenizes it, evaluated in one pass with logits_all:
    top-20 ids and logits at every position, the full vocabulary's logits at 3
    positions (float32, base64), and the perplexity over the 511 predictions;
  - greedy 64-token continuations of 5 prompts (prompt ids as llama.cpp
    tokenized them, so the C test does not depend on Hone's tokenizer).

This machine's CPU reports AMX, but the VM faults on AMX tile instructions, so
llama.cpp's extra buffer types (AMX, repack) are turned off; the plain CPU
path computes the same model.

usage: python3 tests/reference/gen_cpu_reference.py [MODEL]
"""
import base64
import hashlib
import json
import math
import os
import sys

import numpy as np
import llama_cpp
import llama_cpp.llama_cpp as llama_lowlevel

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "cpu")
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
N_TEXT = 512
N_CONT = 64
FULL_POSITIONS = [0, 255, 511]
PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWrite a haiku about autumn.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the sea,",
    "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n<|im_start|>assistant\n",
    "The three primary colors are",
]


def no_extra_buffer_types():
    default = llama_lowlevel.llama_model_default_params

    def patched():
        p = default()
        p.use_extra_bufts = False
        return p
    llama_lowlevel.llama_model_default_params = patched


def score_text(llm):
    """The fixture's text part: the reference text's first N_TEXT ids, the top-20 ids and logits at
    every position, the whole vocabulary's logits at FULL_POSITIONS and the perplexity."""
    with open(os.path.join(DATA, "reference-text.txt"), "rb") as f:
        text = f.read()
    ids = llm.tokenize(text, add_bos=False, special=False)[:N_TEXT]
    assert len(ids) == N_TEXT
    llm.reset()
    llm.eval(ids)
    logits = np.array(llm.scores[:N_TEXT], dtype=np.float32)   # N_TEXT × vocab
    top_ids = np.argsort(-logits, axis=1, kind="stable")[:, :20]
    top_logits = np.take_along_axis(logits, top_ids, axis=1)
    l64 = logits.astype(np.float64)
    lse = np.log(np.exp(l64 - l64.max(axis=1, keepdims=True)).sum(axis=1)) + l64.max(axis=1)
    nll = [lse[i] - l64[i, ids[i + 1]] for i in range(N_TEXT - 1)]
    return {
        "text_ids": ids,
        "top_k": 20,
        "top_ids": top_ids.tolist(),
        "top_logits": [[round(float(v), 5) for v in row] for row in top_logits],
        "full_positions": FULL_POSITIONS,
        "full_logits_f32_b64": [base64.b64encode(logits[p].tobytes()).decode() for p in FULL_POSITIONS],
        "perplexity": math.exp(sum(nll) / len(nll)),
    }


def greedy_continuations(llm, with_gaps=False):
    """N_CONT greedy tokens after each of PROMPTS (with the top-2 logit gap of every step if asked)."""
    conts = []
    for p in PROMPTS:
        pids = llm.tokenize(p.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(pids)
        out, gaps = [], []
        for _ in range(N_CONT):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            nxt = int(np.argmax(row))
            out.append(nxt)
            if with_gaps:
                two = np.sort(row)[-2:]
                gaps.append(round(float(two[1] - two[0]), 5))
            llm.eval([nxt])
        c = {"prompt": p, "prompt_ids": pids, "greedy_ids": out}
        if with_gaps:
            c["top2_gaps"] = gaps
        c["text"] = llm.detokenize(out).decode("utf-8", "replace")
        conts.append(c)
    return conts


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "HONE_DEFAULT_MODEL", os.path.expanduser("~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    with open(model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != MODEL_SHA256:
        sys.exit(f"{model}: sha256 {sha}, expected {MODEL_SHA256}")
    no_extra_buffer_types()
    llm = llama_cpp.Llama(model, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                          n_threads_batch=2, logits_all=True, verbose=False, seed=0)
    vocab = llm.n_vocab()

    text_part = score_text(llm)
    conts = greedy_continuations(llm)

    ref = {
        "generator": "tests/reference/gen_cpu_reference.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model_sha256": sha,
        "n_vocab": vocab,
        "settings": {"n_ctx": 1024, "n_batch": 512, "n_threads": 2, "kv_cache": "f16",
                     "use_extra_bufts": False},
        **text_part,
        "continuations": conts,
    }
    out = os.path.join(DATA, "llamacpp-reference.json")
    with open(out, "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"wrote {out}: perplexity {ref['perplexity']:.4f}, {len(conts)} continuations", file=sys.stderr)
    for c in conts:
        print(repr(c["prompt"][:40]), "->", repr(c["text"][:60]), file=sys.stderr)


if __name__ == "__main__":
    main()
