#!/bin/bash
# Session 46, call 4: why the capped clustered shape I gains on the Q4_0 8B step at ~4k keys (+1.1 %) and loses on
# the AWQ one (-0.8 %), calls 1-2. First the engine rows with fewer clusters a KV head (HONE_ATTN_CAP=<n>, new
# measurement knob; the default is 7 on an H100, all resident), then per-block traces of both steps at 4,096 keys,
# default (I) and HONE_ATTN_LONG=G (the trace build predates the knob; it does not need it).
# Predictions: if o's early-launched blocks beside 56 resident clusters are AWQ's loss, AWQ -p 3900 with cap 5-6
# is +0.5-1 % over cap 7 while Q4_0 loses 0-1 % (longer splits); traces: Q4_0's layer shorter with I by ~0.8 us,
# AWQ's longer by ~0.6 us, the difference in o's finish rather than attention's exit.
# CAP_VARIANTS: the engine rows' variants instead (session 47, call 2).
# Carry .carry-release and .carry-trace.
set -u
V=${CAP_VARIANTS:-"X=1 HONE_ATTN_CAP=6 HONE_ATTN_CAP=5 HONE_ATTN_CAP=4 HONE_ATTN_LONG=G"}
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
env_ab 8b $M/q.gguf 3900 "$V" -c 4096 | tee $W/ab-8b-4k.txt
rm -f $M/q.gguf
awq_model
env_ab awq $M/awq 3900 "$V" -c 4096 | tee $W/ab-awq-4k.txt
timeout 300 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention AWQ@HONE_TRACE_CTX=4096 AWQ@HONE_TRACE_CTX=4096@HONE_ATTN_LONG=G Q4_0@HONE_TRACE_CTX=4096 Q4_0@HONE_TRACE_CTX=4096@HONE_ATTN_LONG=G"
cp $M/trace/summary.txt $W/trace-summary.txt 2>/dev/null
grep -E "^==|step|rc " $W/trace-summary.txt | head -40
grep -E "^==|attn  |  (go|main|merged|cl1|exit|pos check) " $W/attn-timeline.txt | head -60
el done
