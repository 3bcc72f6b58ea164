#!/bin/bash
# Session 53, call 1: on an H200 the issues' goal rows first (unmeasured there since session 37); then the threshold
# sweep session 52 left open: prefill fuses every supported type for chunks of at most 128 tokens
# (HONE_K_W4_GEMM_MAX_DEFAULT), measured for Q4_0 only. TTFT of 8B Q4_K_M, Q8_0 and Q6_K at 128/192/256 tokens,
# default (dequantize + cuBLAS above 128) against HONE_W4_GEMM_MAX=256 (fused up to 256). Expected (session 52's
# --bench-gemm: fused GEMM time grows ~linearly with tokens while dequant+GEMM stays ~flat): fused loses at 192+
# for Q6_K (already at parity at 128), roughly even for Q4_K_M and Q8_0 at 192, loses at 256. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -f $M/q.gguf ;; esac
for t in q4_k_m q8_0 q6_k; do
  timeout 200 $B/hone gen-model --shape llama3-8b --type $t -o $M/t.gguf -q; el "gen $t rc $?"
  ttft_ab "X=1 HONE_W4_GEMM_MAX=256" $t $M/t.gguf 128 192 256 | tee -a $W/ttft-sweep.txt
  rm -f $M/t.gguf
done
el done
