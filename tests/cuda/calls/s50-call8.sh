#!/bin/bash
# Session 50, call 8: on an H200 only (any other card: stop at once) the issues' goal rows (prelude's goal_rows),
# then the fused W4A16 prefill GEMM's benchmark there (hone-w4-check --prefill-bench) and the AWQ export's TTFT at
# 16/64/128 tokens, default against HONE_W4_GEMM_MAX=0. Predictions as s49-call2.sh for the goal rows (AWQ
# 560-575 tok/s, Q4_0 and BF16 within 1 % of session 37's 654.4 and 263.4); prefill ratios as on the H100 (call 7).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) ;; *) el "not an H200: $GPU"; exit 0 ;; esac
goal_rows
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-prefill.txt 2>&1
el "--prefill-bench rc $?"; grep -E "prefill gemms|prefill +[0-9]+ tok" $W/w4-prefill.txt
for p in 16 64 128; do
  for v in X=1 HONE_W4_GEMM_MAX=0; do
    echo "awq p=$p [$v]: $(env $v timeout 60 $B/hone bench -m $M/awq --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done | tee $W/ttft.txt
el done
