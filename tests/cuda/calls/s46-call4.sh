#!/bin/bash
# Session 46, call 4: why the capped clustered shape I gains on the Q4_0 8B step at ~4k keys (+1.1 %) and loses on
# the AWQ one (-0.8 %), calls 1-2: per-block traces of both steps at 4,096 keys, default (I) and HONE_ATTN_LONG=G.
# Predictions: Q4_0's layer shorter with I by ~0.8 us (+1.1 % of a ~2.3 ms step over 32 layers); AWQ's longer with I
# by ~0.6 us, the difference in o's finish (its early blocks beside 56 resident clusters), not in attention's exit.
# Carry .carry-release and .carry-trace.
set -u
. tests/cuda/calls/prelude.sh
timeout 400 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention AWQ@HONE_TRACE_CTX=4096 AWQ@HONE_TRACE_CTX=4096@HONE_ATTN_LONG=G Q4_0@HONE_TRACE_CTX=4096 Q4_0@HONE_TRACE_CTX=4096@HONE_ATTN_LONG=G"
cp $M/trace/summary.txt $W/trace-summary.txt 2>/dev/null
grep -E "^==|step|rc " $W/trace-summary.txt | head -40
grep -E "^==|attn  |  (go|main|merged|cl1|exit|pos check) " $W/attn-timeline.txt | head -60
el done
