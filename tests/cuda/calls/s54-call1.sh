#!/bin/bash
# Session 54, call 1: if the card is an H200, the issues' goal rows first (none since session 37). Then the first half
# of s53-call8.sh (stream-K for the fused prefill GEMM, built in session 53, never run): hone-w4-check --gemm (88
# checks expected: 43 cases twice, the second under stream-K, plus refusals), the same under memcheck (0 errors
# expected), and the GEMM alone, HONE_W4_GEMM_STREAMK=0 against =1, two rounds each.
# Predicted (s53-call8.sh): gate|up -7 to -17 % at 64-128 tokens, q|k|v -9 to -20 %, o and down unchanged.
# Carry .carry-release (built at c44daca).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
OUT= timeout 120 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt | head -20
OUT= timeout 200 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -3 $W/w4-gemm-memcheck.txt
for v in 0 1 0 1; do
  OUT= HONE_W4_GEMM_STREAMK=$v timeout 60 $B/hone-kquant-check --bench-gemm >> $W/kq-gemm-sk$v.txt 2>&1; el "bench-gemm sk$v rc $?"
done
grep fused $W/kq-gemm-sk1.txt | head -30
el done
