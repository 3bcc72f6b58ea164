#!/usr/bin/env python3
"""Summarize a kernel timeline of one decode step (measurement only).

Input: the CSV that HONE_TRACE_STEP writes (kernels/hone-k-trace.cuh; a build
with the meson option kernel_trace): one "L" line per traced launch of the
captured step, in launch order, and one "B" line per block with %globaltimer
ns at entry (t0), after the PDL wait (t1), main loop done (t2), exit (t3),
and the marks t4..t6 a kernel places itself (decode attention: its pos/page
check passed, the block's warps merged, the first cluster barrier passed or,
without clusters, the last block past its split counter: "cl1|comb").

Output, per launch position of a decoder layer (median over the middle
layers) and for the lm_head:
  on path   end(prev) -> end(this): the step time this launch adds, where end
            is the last block's exit; the sum over all launches is the step
            (from the first traced launch's end on)
  handoff   end(prev) -> first block past its PDL wait (the dependency's
            latency, when this launch's blocks were already resident)
  resident  first block's entry relative to end(prev) (negative: it was
            resident and waiting before its predecessor finished)
  run       first wait passed -> last exit
  tail      median block exit -> last exit
  GB/s      weight bytes / on-path time, and % of the 4.52 TB/s read ceiling

--timeline: per launch of a layer, when its first block passed the PDL wait,
its first and last blocks finished the main loop, and its last block exited,
in us from the layer's q|k|v first wait (medians over the middle layers).
--attention: decode attention's blocks that ran (its marks t4..t6), in us
after the q|k|v GEMV's last exit: median / first / last block.
--sm: per GEMV of a layer, whether its wave spread is the SMs' own: each
SM's last main-loop end (us after the launch's first wait) averaged over the
middle layers, the spread of those per-SM means, the typical layer-to-layer
scatter of one SM, and the correlation of the per-SM means of the even and
the odd layers (near 1: some SMs are slower every time, so a static split
of the rows cannot balance them; near 0: the spread is noise); the same
correlation per blockIdx (the rows a block owns) in the last column.

usage: trace-summary.py TRACE.csv [--type Q4_0|Q4_1|Q8_0|BF16|AWQ] [--launches] [--timeline] [--attention] [--sm]
The weight type is taken from the file name (trace-<type>[-bound].csv)
unless given.
"""
import argparse
import os
import re
import statistics
import sys

READ_CEIL = 4.52e12
TAGS = {1: "gemv", 2: "attn", 3: "norm", 4: "quant", 5: "pack"}
# bytes a weight (GEMV matrices); AWQ g128: 4 bits + f16 scale + u8 zero per 128
BPW = {"BF16": 2.0, "F16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32, "Q4_1": 20 / 32, "AWQ": 0.5 + 3 / 128}
# Llama-3-8B shapes (rows, cols) -> name
SHAPES = {(6144, 4096): "qkv", (4096, 4096): "o", (28672, 4096): "gate|up", (4096, 14336): "down",
          (128256, 4096): "lm_head"}


def load(path):
    """launches; per launch its blocks' (sm, t0..t6) records; per launch their blockIdx, in the same order"""
    launches, blocks, block_ids = [], {}, {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.rstrip("\n").split(",")
            if p[0] == "L":
                launches.append({"i": int(p[1]), "tag": int(p[2]), "blocks": int(p[3]),
                                 "info0": int(p[4]), "info1": int(p[5])})
            elif p[0] == "B":
                blocks.setdefault(int(p[1]), []).append(tuple(int(x) for x in p[3:]))
                block_ids.setdefault(int(p[1]), []).append(int(p[2]))
    return launches, blocks, block_ids


def name_of(L):
    tag = TAGS.get(L["tag"], "?")
    if tag == "gemv":
        return SHAPES.get((L["info0"], L["info1"]), "gemv %dx%d" % (L["info0"], L["info1"]))
    return tag


def summarize(launches, blocks, wtype):
    rows = []
    for L in launches:
        recs = blocks.get(L["i"], [])
        t0 = [r[1] for r in recs if r[1] >= 0]
        t1 = [r[2] for r in recs if r[2] >= 0]
        t2 = [r[3] for r in recs if r[3] >= 0]
        t3 = [r[4] for r in recs if r[4] >= 0]
        if not t3:
            continue
        name = name_of(L)
        nbytes = 0.0
        if L["tag"] == 1 and wtype in BPW:
            bpw = 2.0 if (wtype == "AWQ" and name == "lm_head") else BPW[wtype]
            nbytes = L["info0"] * L["info1"] * bpw
        rows.append({
            "i": L["i"], "name": name, "blocks": L["blocks"], "bytes": nbytes,
            "entry": min(t0) if t0 else None, "go": min(t1) if t1 else None,
            "main": max(t2) if t2 else None, "end": max(t3),
            "exit_med": statistics.median(t3), "sms": len(set(r[0] for r in recs)),
        })
    prev_end = None
    for r in rows:
        r["prev_end"] = prev_end
        prev_end = r["end"]
    return rows


def fmt_us(ns):
    return "%8.2f" % (ns / 1e3) if ns is not None else "       -"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--type")
    ap.add_argument("--launches", action="store_true", help="print every launch")
    ap.add_argument("--timeline", action="store_true", help="a layer's launches on one time axis")
    ap.add_argument("--attention", action="store_true", help="decode attention's marks")
    ap.add_argument("--sm", action="store_true", help="per-SM main-loop ends of the GEMVs")
    a = ap.parse_args()
    wtype = a.type
    if not wtype:
        m = re.match(r"trace-([A-Za-z0-9_]+?)(-bound)?\.csv$", os.path.basename(a.trace))
        wtype = m.group(1) if m else "?"
    launches, blocks, block_ids = load(a.trace)
    rows = summarize(launches, blocks, wtype)
    if not rows:
        sys.exit("no traced launches in " + a.trace)
    if a.launches:
        print("  #  launch     blocks  entry      go    main     end (us from the first entry)")
        for r in rows:
            print("%4d %-9s %6d %s %s %s %s" % (r["i"], r["name"], r["blocks"], fmt_us(r["entry"]), fmt_us(r["go"]),
                                                fmt_us(r["main"]), fmt_us(r["end"])))
    span = rows[-1]["end"] - rows[0]["end"]
    total_bytes = sum(r["bytes"] for r in rows[1:])
    print("%s: %d traced launches, %.3f ms from the first launch's end to the last's"
          % (a.trace, len(rows), span / 1e6))
    starts, per = layer_starts([r["name"] for r in rows])
    if starts:
        groups = {}
        for base in starts:
            for k in range(per):
                groups.setdefault(k, []).append(rows[base + k])
        print("\nper layer (median of layers 2..%d), us:" % (len(starts) + 1))
        print("  launch      on path  handoff resident     run    tail   GB/s   %ceil  blocks SMs")
        layer_sum = 0.0
        layer_bytes = 0.0
        for k in range(per):
            g = groups[k]
            onp = statistics.median(r["end"] - r["prev_end"] for r in g)
            hand = statistics.median(r["go"] - r["prev_end"] for r in g if r["go"] is not None)
            res = statistics.median(r["entry"] - r["prev_end"] for r in g if r["entry"] is not None)
            run = statistics.median(r["end"] - r["go"] for r in g if r["go"] is not None)
            tail = statistics.median(r["end"] - r["exit_med"] for r in g)
            nb = g[0]["bytes"]
            layer_sum += onp
            layer_bytes += nb
            bw = "%6.0f  %5.1f" % (nb / (onp * 1e-9) / 1e9, 100 * nb / (onp * 1e-9) / READ_CEIL) if nb else "     -      -"
            print("  %-9s %s %s %s %s %s %s  %6d %3d" % (g[0]["name"], fmt_us(onp), fmt_us(hand), fmt_us(res),
                                                        fmt_us(run), fmt_us(tail), bw, g[0]["blocks"], g[0]["sms"]))
        print("  layer     %s us; weights %.1f MB -> %.1f %% of the read ceiling"
              % (fmt_us(layer_sum), layer_bytes / 1e6,
                 100 * layer_bytes / (layer_sum * 1e-9) / READ_CEIL if layer_sum else 0))
    for r in rows:
        if r["name"] == "lm_head":
            onp = r["end"] - r["prev_end"]
            print("  lm_head   %s us on path, %s run; %.0f GB/s (%.1f %%)"
                  % (fmt_us(onp), fmt_us(r["end"] - r["go"]), r["bytes"] / (onp * 1e-9) / 1e9,
                     100 * r["bytes"] / (onp * 1e-9) / READ_CEIL))
    if a.timeline:
        timeline(launches, blocks)
    if a.attention:
        attention(launches, blocks)
    if a.sm:
        per_sm(launches, blocks, block_ids)
    if total_bytes:
        print("  step (traced span): %.1f MB of weights in %.3f ms = %.1f %% of the read ceiling"
              % (total_bytes / 1e6, span / 1e6, 100 * total_bytes / (span * 1e-9) / READ_CEIL))


def layer_starts(names):
    """Index of each middle layer's q|k|v launch (layers 2 .. n-2: the first two and the last differ) in a
    list of launch names, and the launches a layer."""
    qkv = [i for i, n in enumerate(names) if n == "qkv"]
    return (qkv[2:-1], qkv[1] - qkv[0]) if len(qkv) >= 4 else ([], 0)


def middle_layers(launches):
    names = [name_of(L) for L in launches]
    return layer_starts(names) + (names,)


def timeline(launches, blocks):
    starts, per, names = middle_layers(launches)
    if not starts:
        return
    med = lambda v: statistics.median(v) if v else float("nan")
    print("\ntimeline of a layer (us from q|k|v's first wait; median over layers %d..%d):" % (2, len(starts) + 1))
    print("  launch     first go  first main  last main  last exit")
    for k in range(per):
        cols = [[], [], [], []]
        for base in starts:
            t0 = min(r[2] for r in blocks[base] if r[2] >= 0)
            recs = blocks[base + k]
            mains = [r[3] for r in recs if r[3] >= 0]
            cols[0].append(min(r[2] for r in recs if r[2] >= 0) - t0)
            cols[1].append(min(mains) - t0 if mains else float("nan"))
            cols[2].append(max(mains) - t0 if mains else float("nan"))
            cols[3].append(max(r[4] for r in recs) - t0)
        print("  %-9s %s" % (names[starts[0] + k], "  ".join("%9.2f" % (med(c) / 1e3) for c in cols)))


def attention(launches, blocks):
    starts, per, names = middle_layers(launches)
    marks = [("go", 2), ("pos check", 5), ("main", 3), ("merged", 6), ("cl1|comb", 7), ("exit", 4)]
    acc = {m: [] for m, _ in marks}
    for base in starts:
        i = base + 1
        if names[i] != "attn":
            return
        prev_end = max(r[4] for r in blocks[i - 1])
        ran = [r for r in blocks[i] if r[3] >= 0]
        for m, k in marks:
            v = sorted((r[k] - prev_end) / 1e3 for r in ran if len(r) > k and r[k] >= 0)
            if v:
                acc[m].append((statistics.median(v), v[0], v[-1]))
    print("\ndecode attention, blocks that ran (us after q|k|v's last exit; median over layers):")
    print("  mark        median block   first    last")
    for m, _ in marks:
        if acc[m]:
            print("  %-11s %9.2f %9.2f %8.2f" % (m, *(statistics.median(x[j] for x in acc[m]) for j in range(3))))


def corr(x, y):
    n = len(x)
    if n < 3:
        return float("nan")
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def per_sm(launches, blocks, block_ids):
    starts, per, names = middle_layers(launches)
    if not starts:
        return
    print("\nper SM, each SM's last main-loop end in us after the launch's first wait (middle layers):")
    print("  launch     blk/SM  SM mean: min  median    max  scatter  even/odd corr  launch max  blockIdx corr")
    for k in range(per):
        if launches[starts[0] + k]["tag"] != 1:
            continue
        by_sm = {}          # sm -> [per-layer last main end]
        by_blk = {}         # blockIdx -> [per-layer main end]
        nblk = {}
        lmax = []
        for j, base in enumerate(starts):
            recs = blocks[base + k]
            go = min(r[2] for r in recs if r[2] >= 0)
            for b, r in zip(block_ids.get(base + k, []), recs):
                if r[3] >= 0:
                    by_blk.setdefault(b, {})[j] = (r[3] - go) / 1e3
            last = {}
            for r in recs:
                if r[3] >= 0:
                    last[r[0]] = max(last.get(r[0], 0), r[3] - go)
                    if j == 0:
                        nblk[r[0]] = nblk.get(r[0], 0) + 1
            for sm, v in last.items():
                by_sm.setdefault(sm, {})[j] = v / 1e3
            lmax.append(max(last.values()) / 1e3)
        sms = [sm for sm, d in by_sm.items() if len(d) == len(starts)]
        if len(sms) < 3:
            continue
        means = {sm: statistics.mean(by_sm[sm].values()) for sm in sms}
        scatter = statistics.median(statistics.pstdev(by_sm[sm].values()) for sm in sms)
        even = [statistics.mean(v for j, v in by_sm[sm].items() if j % 2 == 0) for sm in sms]
        odd = [statistics.mean(v for j, v in by_sm[sm].items() if j % 2 == 1) for sm in sms]
        mv = sorted(means.values())
        counts = sorted(set(nblk.values()))
        bl = [b for b, d in by_blk.items() if len(d) == len(starts)]
        be = [statistics.mean(v for j, v in by_blk[b].items() if j % 2 == 0) for b in bl]
        bo = [statistics.mean(v for j, v in by_blk[b].items() if j % 2 == 1) for b in bl]
        print("  %-9s %7s %12.2f %7.2f %6.2f %8.2f %14.2f %11.2f %14.2f" % (
            names[starts[0] + k], "/".join(str(c) for c in counts), mv[0], statistics.median(mv), mv[-1],
            scatter, corr(even, odd), statistics.median(lmax), corr(be, bo)))
        slow = sorted(sms, key=lambda sm: -means[sm])[:8]
        print("            slowest SMs: " + " ".join("%d(%.1f,%dblk)" % (sm, means[sm], nblk.get(sm, 0)) for sm in slow))


if __name__ == "__main__":
    main()
