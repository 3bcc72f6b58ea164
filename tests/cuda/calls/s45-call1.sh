#!/bin/bash
# Session 45, call 1: (1) on an H200 only, the issues' decode goal rows on the current tree (session 37 was the last
# H200: BF16 263.4, Q4_0 654.4, AWQ 557.7 tok/s; sessions 38-44 changed only long-context attention and the sampled
# chain, so the rows should not move); (2) on any card, decode attention's L2 prefetch of the next weights issued
# after each block's main loop (HONE_DECODE_PF_HOW=5, new) against at entry (=1, session 2's, measured slower then)
# and none, in the engine at ~4k keys (entry prefetch dropped from the rows: session 2's, slower): at 4k a layer's memory idles through ~6 us of merges and combine (session
# 43's trace), in which o's 9.4 MB (Q4_0) could come into L2.
# Predictions (written before the call): H200 rows within 1.5 % of session 37's; 8B Q4_0 -p 3900: entry prefetch of
# late 10 MB +1 to +2 %, late 24 MB (o and gate|up's first 14 MB) +1 to +3 %;
# Qwen3-0.6B Q4_0 -p 2100 (o and gate|up 4.7 MB together): late 8 MB +1 to +3 %.
# Carry .carry-release. (HONE_K_PF_LATE, the "=5" bit, was taken out again in 63200c1 after this call: the script
# documents what ran; against later trees its "=5" rows prefetch at entry.)
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen-model 8b q4_0 rc $?"
env_ab 8b-q4_0 $M/q.gguf 3900 "X=1 HONE_DECODE_PF_ATTN=10,HONE_DECODE_PF_HOW=5 HONE_DECODE_PF_ATTN=24,HONE_DECODE_PF_HOW=5" -c 4096 | tee $W/pf-8b.txt; el "pf 8b"
rm -f $M/q.gguf
el "trace"   # call 2's first row, here in case no second machine comes (carry .carry-trace too)
[ -e .carry-trace/bundle.tar.xz ] && timeout 150 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention Q4_0@HONE_TRACE_CTX=16384" \
  && grep -E "^==|attn  |  (go|main|merged|cl1|exit|pos check) " $W/attn-timeline.txt | head -40
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/s.gguf -q; el "gen-model qwen3 q4_0 rc $?"
env_ab qwen3-q4_0 $M/s.gguf 2100 "X=1 HONE_DECODE_PF_ATTN=10,HONE_DECODE_PF_HOW=5 HONE_DECODE_PF_ATTN=24,HONE_DECODE_PF_HOW=5" | tee $W/pf-qwen3.txt; el "pf qwen3"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
el done
