#!/bin/bash
# Session 40, call 5 (a call naming nvidia-h200): the goal rows on today's main, on an H200 only (BF16, AWQ
# g128 and Q4_0 8B, `hone bench -p 64 -n 128 -r 3 -w 1`); no H200 has run main since session 37 (87.6 / 58.0 /
# 61.1 % of 4.52 TB/s then). Predictions: within ±2 % of those — no decode kernel changed since, and greedy steps do
# not sample. On any other card it stops at once. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) ;; *) el "not an H200: nothing to do"; exit 0 ;; esac
goal_rows   # prelude.sh: the same commands this script held (moved there in session 42)
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
el done
