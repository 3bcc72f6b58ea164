#!/usr/bin/env python3
"""Makes the tokenizer benchmark text and times HF tokenizers on it.

  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 tests/bench/bench_tokenizer_hf.py [TEXT] [GGUF] [CHUNK]

TEXT (default /tmp/hone-bench-text.txt) is written if missing: Debian's
/usr/share/common-licenses/* and then /usr/share/doc/*/copyright, in sorted
order, up to 4 MB. The vocabulary is the default model's (a tokenizer.json
built from the GGUF, as tests/reference/gen_tokenizer_fixtures.py does).
Compare with: bench-tokenizer TEXT (build-*/tests/bench/bench-tokenizer).
"""
import glob
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import gen_tokenizer_fixtures  # noqa: E402

LIMIT = 4_000_000


def make_text(path):
    files = sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright"))
    out = bytearray()
    for f in files:
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                out += fh.read()
        if len(out) >= LIMIT:
            break
    text = out[:LIMIT].decode("utf-8", errors="ignore")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/hone-bench-text.txt"
    gguf = sys.argv[2] if len(sys.argv) > 2 else gen_tokenizer_fixtures.DEFAULT_GGUF
    if not os.path.exists(path):
        make_text(path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    n = len(text.encode("utf-8"))
    chunk = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    tok = gen_tokenizer_fixtures.smollm_from_gguf(gguf)
    # Same chunking as bench-tokenizer --chunk: cut at the last line end.
    data = text.encode("utf-8")
    pieces = []
    off = 0
    while off < len(data):
        m = min(chunk or len(data), len(data) - off)
        if off + m < len(data):
            nl = data.rfind(b"\n", off, off + m)
            if nl > off:
                m = nl - off + 1
        pieces.append(data[off:off + m].decode("utf-8"))
        off += m

    def run():
        t0, c0 = time.perf_counter(), time.process_time()
        count = 0
        for p in pieces:
            count += len(tok.encode(p, add_special_tokens=False).ids)
        return time.perf_counter() - t0, time.process_time() - c0, count

    cold, cold_cpu, count = run()
    best, best_cpu = 1e30, 1e30
    for _ in range(3 if chunk else 1):
        w, c, count = run()
        best, best_cpu = min(best, w), min(best_cpu, c)
    import tokenizers
    print(f"text: {path}, {n / 1e6:.2f} MB, {count} tokens, chunk {chunk or 'whole'}; tokenizers "
          f"{tokenizers.__version__}, RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}")
    print(f"hf encode first run: {n / 1e6 / cold:.2f} MB/s wall ({cold:.3f} s), {n / 1e6 / cold_cpu:.2f} MB/s CPU")
    print(f"hf encode warm:      {n / 1e6 / best:.2f} MB/s wall ({best:.3f} s), {n / 1e6 / best_cpu:.2f} MB/s CPU")


if __name__ == "__main__":
    main()
