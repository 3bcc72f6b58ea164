#!/bin/bash
# Session 45, call 3 (same warm H100): call 2's traces put the split combine at ~6-7 us of a 4k layer's ~18.6 on the
# step's path (last merge 11.9 -> last exit 18.6); the knobs that exist, in the engine: 32 splits with the flat combine
# (HONE_ATTN_CHUNK=128 at 4k, =512 at 16k) and the flat combine over 64 splits (HONE_ATTN_COMBINE=flat).
# Predictions: 8B Q4_0 -p 3900 CHUNK=128 within -2..+2 % (session 42, before the split rule: -2.5 %), flat -1..+1 %.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
env_ab 8b $M/q.gguf 3900 "X=1 HONE_ATTN_CHUNK=128 HONE_ATTN_COMBINE=flat HONE_ATTN_CHUNK=256" -c 4096 2>&1 | sed 's/^/  /' | tee $W/ab-8b.txt
rm -f $M/q.gguf
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/s.gguf -q; el "gen qwen3 rc $?"
env_ab qwen3 $M/s.gguf 16000 "X=1 HONE_ATTN_CHUNK=512 HONE_ATTN_COMBINE=flat" -c 16384 | tee $W/ab-qwen3.txt
el done
