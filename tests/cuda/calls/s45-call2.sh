#!/bin/bash
# Session 45, call 2: session 44's unrun measurement, a per-block trace of the 8B Q4_0 step at 16k keys, then at 4k
# (session 43's 4k trace was before the two-level combine): where one attention layer's ~38 us (16k, H100) go —
# start, main loop, merge, combine; then the BF16 step at 128 / 4k / 16k keys (run-step-ab, one round), the issue's
# "report also at 4k and 16k".
# Predictions (written before the call): attention blocks start within ~2 us of q|k|v's end, main loops ~25 us,
# merge + partial + combine ~8 us, last exit ~40 us after q|k|v (H100, 16k); at 4k last exit ~18 us (session 43:
# 20.5 before the two-level combine); BF16 u4096 / u16384 below session 37's H200 4.276 / 4.951 ms by ~0.05 / ~0.1.
# Carry .carry-release and .carry-trace.
set -u
. tests/cuda/calls/prelude.sh
timeout 240 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention Q4_0@HONE_TRACE_CTX=16384 Q4_0@HONE_TRACE_CTX=4096"
grep -E "^==|attn  |  (go|main|merged|cl1|exit|pos check) " $W/attn-timeline.txt | head -60
cp $M/trace/summary.txt $W/trace-summary.txt 2>/dev/null
OUT=$W/ab ROUNDS=1 timeout 200 bash tests/cuda/run-step-ab.sh "BF16" "X=1"; el "step-ab rc $?"
cat $W/ab/ab.txt
el done
