#!/usr/bin/env python3
"""The fused prefill GEMM's split over k: how well a cost model chooses it, against a sweep of forced splits.

Reads what tests/cuda/calls/s54-call3.sh writes (hone-kquant-check --bench-gemm under HONE_W4_GEMM_SPLIT=n, n = 0
for the launch rule's own choice; session 54's is tests/cuda/calls/s54-call3-sweep.txt) and, for the whole-waves rule
that chose until session 54 and for the model kernels/hone-k-gemm-w4.cu's w4g_launch uses now (its constants below,
W4G_BLOCK_COST, W4G_ALONE_RATE, W4G_SUM_COST, W4G_SUM_COST_MB), prints each row's choice, its time and the best
split's, and the summed regret (time at the choice / the best time - 1). --fit searches the constants' grid.
Blocks an SM (bps) are worked out from the kernel's shared memory a stage, as cudaOccupancy... reports them on an
H100 or H200 (228 KB an SM, 132 SMs)."""
import collections, math, re, sys

SM = 132

def nt(n):
    return 2 if n <= 16 else 4 if n <= 32 else 8

def bps(t, n):
    """blocks an SM: 4 stages of (weights [Q8_0 twice], Q6_K's high bits, X, scales) in 16-byte units"""
    w = 1024 if t == "Q8_0" else 512
    h = 256 if t == "Q6_K" else 0
    stage = (w + h + nt(n) * 128 + 128) * 16 * 4
    return min(3 if nt(n) < 8 else 2, (228 * 1024) // (stage + 1024))

def split_of(ks, sp):
    kper = (ks + sp - 1) // sp
    return (ks + kper - 1) // kper, kper

def blocks(r, n):
    return ((n + 8 * nt(n) - 1) // (8 * nt(n))) * ((r + 127) // 128)

def cost_waves(t, r, c, n, sp):
    s, kper = split_of(c // 128, sp)
    wave = bps(t, n) * SM
    return ((blocks(r, n) * s + wave - 1) // wave) * (kper + 3) + (s > 1)

def cost_model(t, r, c, n, sp, P=(2, 0.8, 1.0, 0.2)):
    C, alone, R0, Rmb = P
    s, kper = split_of(c // 128, sp)
    load = math.ceil(blocks(r, n) * s / SM)
    t_ = load * (kper + C) / (alone if min(load, bps(t, n)) == 1 else 1.0)
    if s > 1:
        t_ += R0 + Rmb * (8 / nt(n)) * (2 * s * n * r * 4 / 1e6)
    return t_

def candidates(r, c, n):
    ks = c // 128
    smax = max(1, min(ks // 4, (r * c * 2) // (n * r * 4)))   # the engine's scratch: the matrix in f16
    return [sp for sp in range(1, smax + 1) if split_of(ks, sp)[0] == sp]

def read(path):
    d = collections.defaultdict(lambda: collections.defaultdict(list))
    cur = None
    for line in open(path):
        m = re.match(r"== round (\d+) split (\d+)", line)
        if m:
            cur = int(m.group(2))
            continue
        m = re.match(r"\s*(\S+)\s+(\S+)\s+(\d+)x(\d+)\s+n\s+(\d+): fused\s+([\d.]+) us", line)
        if m:
            key = (m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))
            d[key][cur].append(float(m.group(6)))
    return d

def times(key, by):
    """measured µs by effective split (forced rows, and the waves rule's choice as its 'split 0' row)"""
    t, sh, r, c, n = key
    best = {s: min(v) for s, v in by.items()}
    m = {split_of(c // 128, s)[0]: u for s, u in best.items() if s}
    m.setdefault(min(candidates(r, c, n), key=lambda s: (cost_waves(t, r, c, n, s), s)), best[0])
    return m

def regret(d, cost, verbose=False):
    tot, worst, missing = 0.0, 0.0, 0
    for key, by in d.items():
        m = times(key, by)
        t, sh, r, c, n = key
        pick = min(candidates(r, c, n), key=lambda s: (cost(t, r, c, n, s), s))
        if pick not in m:   # not measured: the mean of its neighbours
            near = [m[s] for s in (pick - 1, pick + 1) if s in m]
            if not near:
                missing += 1
                continue
            u = sum(near) / len(near)
        else:
            u = m[pick]
        g = u / min(m.values()) - 1
        tot, worst = tot + g, max(worst, g)
        if verbose:
            print(f"  {t} {sh:8} n {n:3}: split {pick:2} {u:7.1f} us, best {min(m.values()):7.1f} ({100 * g:+.1f} %)")
    return tot, worst, missing

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    d = read(args[0] if args else "tests/cuda/calls/s54-call3-sweep.txt")
    print("whole waves (until session 54): regret %.2f, worst %.1f %%, %d unmeasured" % (
        lambda r: (r[0], 100 * r[1], r[2]))(regret(d, cost_waves, "-v" in sys.argv)))
    print("the model w4g_launch uses:")
    r = regret(d, cost_model, True)
    print("regret %.2f, worst %.1f %%, %d unmeasured" % (r[0], 100 * r[1], r[2]))
    if "--fit" in sys.argv:
        grid = [(C, a, R0, Rmb) for C in (1, 2, 3, 4, 6) for a in (0.6, 0.7, 0.8, 0.9, 1.0)
                for R0 in (0, 1, 2, 4, 6) for Rmb in (0, 0.2, 0.4, 0.6, 1.0, 1.5)]
        best = min(grid, key=lambda P: regret(d, lambda t, r_, c, n, s: cost_model(t, r_, c, n, s, P))[0])
        print("best constants (block cost, alone rate, sum fixed, sum a MB):", best)

if __name__ == "__main__":
    main()
