#!/bin/bash
# Session 54, call 3: on an H200 the goal rows first. Then the tree with stream-K taken out (calls 1-2: slower
# everywhere it was chosen): hone-w4-check --gemm (44 GEMM checks + refusals expected), the same with every launch
# split 3 ways (HONE_W4_GEMM_SPLIT=3, the new measurement knob). Then the sweep: hone-kquant-check --bench-gemm
# (now 16/64/128/192 tokens) under the cost model and under forced splits 1, 2, 3, 4, 6, 8, 12.
# Why: the GEMM alone runs q|k|v and o at 128 tokens at ~65 % of gate|up's tile-step rate (session 53's rows), and
# calls 1-2 showed a part-filled wave is not as slow as the cost model assumes. Predicted: the model's choice within
# 5 % of the sweep's best in most rows; q|k|v and o at 64-128 tokens 5-15 % faster on some other split.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
OUT= timeout 100 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt | head
OUT= HONE_W4_GEMM_SPLIT=3 timeout 100 $B/hone-w4-check --gemm > $W/w4-gemm-s3.txt 2>&1; el "--gemm split 3 rc $?"
grep -E "FAIL|passed" $W/w4-gemm-s3.txt | head
for r in 1 2; do
  for s in 0 1 2 3 4 6 8 12; do
    echo "== round $r split $s" >> $W/sweep.txt
    OUT= HONE_W4_GEMM_SPLIT=$s timeout 60 $B/hone-kquant-check --bench-gemm 2>&1 | grep fused >> $W/sweep.txt; el "split $s rc $?"
  done
done
el done
