#!/bin/bash
# Session 50, call 1: the fused W4A16 prefill GEMM (kernels/hone-k-gemm-w4.cu, hone_k_q4z_gemm). Its checks alone
# (f64 reference), under compute-sanitizer memcheck; the whole hone-w4-check (every W4A16 check, the tiny models'
# prefill fused and not, then the benchmarks: per matrix fused against dequantize + cuBLASLt at 16..512 tokens,
# the 8B prefill at 16..2048 tokens three ways); test-cuda-awq (CUDA against the CPU backend on AWQ models); the
# engine's TTFT on an 8B AWQ export with the default and with HONE_W4_GEMM_MAX=0; racecheck last.
# Predictions (H100, 3.2 TB/s): the fused GEMM at 16..64 tokens near the weights' read time (~2-2.5 TB/s of
# packed weights): one layer's four GEMMs at 64 tokens ~70 us fused against ~370 us dequantized (~6 ms of
# dequantization over 32 layers, session 49's TTFT gap); 8B AWQ prefill of 64 tokens 13.1 -> ~5 ms, under
# BF16's 7.3; at 512 tokens cuBLASLt's GEMM wins back the pass (crossover 128-256 tokens).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 120 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "hone-w4-check --gemm rc $?"
grep -E "FAIL|passed|gemm" $W/w4-gemm.txt | head -20
OUT= timeout 200 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -2 $W/w4-gemm-memcheck.txt
timeout 240 $B/hone-w4-check > $W/w4-check.txt 2>&1; el "hone-w4-check rc $?"
grep -E "FAIL|passed|tiny model|prefill gemms|prefill +[0-9]+ tok" $W/w4-check.txt
timeout 60 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -2 $W/test-cuda-awq.txt
awq_model
for p in 16 64 256; do
  for v in X=1 HONE_W4_GEMM_MAX=0; do
    echo "awq p=$p [$v]: $(env $v timeout 60 $B/hone bench -m $M/awq --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done | tee $W/ttft.txt
el "ttft done"
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-racecheck.txt 2>&1
el "racecheck rc $?"; tail -2 $W/w4-gemm-racecheck.txt
el done
