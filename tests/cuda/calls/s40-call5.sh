#!/bin/bash
# Session 40, call 5 (a call naming nvidia-h200): the goal rows on today's main, on an H200 only (BF16, AWQ
# g128 and Q4_0 8B, `hone bench -p 64 -n 128 -r 3 -w 1`); no H200 has run main since session 37 (87.6 / 58.0 /
# 61.1 % of 4.52 TB/s then). Predictions: within ±2 % of those — no decode kernel changed since, and greedy steps do
# not sample. On any other card it stops at once. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) ;; *) el "not an H200: nothing to do"; exit 0 ;; esac
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen-model q4_0 rc $?"
bench q4_0 $M/q.gguf; rm -f $M/q.gguf
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
bench bf16 $M/8b-bf16.gguf
timeout 100 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "rtn awq rc $?"
rm -f $M/8b-bf16.gguf
bench awq $M/8b-awq; rm -rf $M/8b-awq
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
el done
