#!/bin/bash
# Session 42, call 4 (naming nvidia-h200): the issues' goal rows on today's main, on an H200 only (8B Q4_0, BF16 and
# its RTN AWQ g128 export, `hone bench -p 64 -n 128 -r 3 -w 1`), then the sampler bench there. On any other card it
# stops at once. Predictions: within ±2 % of session 37's H200 rows (BF16 263.4, AWQ 557.7, Q4_0 654.4 tok/s; 87.6 /
# 58.0 / 61.1 % of 4.52 TB/s) — no decode kernel changed since; the sampler rows as on an H100 (SM-bound, same clock).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) ;; *) el "not an H200: nothing to do"; exit 0 ;; esac
goal_rows
OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/bs.txt 2>&1
el "bench-sample rc $?"; grep -E "vocab 128256.*(walked|within|CLI default\)|greedy  )" $W/bs.txt | sed 's/  */ /g'
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
el done
