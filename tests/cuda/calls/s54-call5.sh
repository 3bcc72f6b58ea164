#!/bin/bash
# Session 54, call 5 — prepared, NOT run (the session's device time was spent): the committed tree (a3d188a: the
# split choice moved into hone_k_w4_gemm_splits, the same arithmetic as call 4's build, unit-tested on the host) on a
# GPU. On an H200 the goal rows first. Then hone-w4-check --gemm (45 expected), the GEMM alone and the AWQ layer
# (expected within ±2 % of call 4's "new" rows: Q4_0 layer 107 / 160 / 268 / 396 µs at 16 / 64 / 128 / 192 tokens on an
# H100), then the README's TTFT table on one card: AWQ, Q4_0, Q4_K_M, Q8_0 at 16-256 tokens, default against
# HONE_W4_GEMM_MAX=0 (expected on an H100: AWQ 4.2 / 6.3 / 9.4 / 13.1 ms at 16-192, Q4_K_M 4.8 / 6.6 / 10.0 / 14.1).
# Carry .carry-release (build-carry.sh at or after a3d188a).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
OUT= timeout 100 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt | head
OUT= timeout 60 $B/hone-kquant-check --bench-gemm > $W/kq-gemm.txt 2>&1; el "bench-gemm rc $?"
OUT= timeout 100 $B/hone-w4-check --prefill-bench > $W/w4-pb.txt 2>&1; el "prefill-bench rc $?"; grep "one layer" $W/w4-pb.txt
awq_model
ttft_ab "X=1 HONE_W4_GEMM_MAX=0" awq $M/awq 16 64 128 192 256 | tee $W/ttft.txt
for t in q4_0 q4_k_m q8_0; do
  timeout 200 $B/hone gen-model --shape llama3-8b --type $t -o $M/t.gguf -q; el "gen $t rc $?"
  ttft_ab "X=1 HONE_W4_GEMM_MAX=0" $t $M/t.gguf 16 64 128 192 256 | tee -a $W/ttft.txt
  rm -f $M/t.gguf
done
el done
