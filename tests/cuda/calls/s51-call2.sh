#!/bin/bash
# Session 51, call 2: the fused 4-bit prefill GEMM extended to the K-quants (Q4_K, Q6_K) and to q|k|v parts
# (Q4_K_M's Q4_K q|k + Q6_K v). Carry .carry-release (with the model cut). On an H200 the issues' goal rows first.
#  1. checks: hone-w4-check --gemm (now 43 checks: Q4_K, Q6_K and parts against f64 on the values the kernel
#     forms), its memcheck, hone-kquant-check --check (its generator moved into the shared header), the whole
#     hone-w4-check --check, run-release.sh's suite step (test-cuda-backend's Q4_K / Q6_K / Q4_K_M tiny models
#     prefill through the fused GEMM now);
#  2. hone-kquant-check --bench-gemm: the fused GEMM alone on Q4_K, Q6_K (and Q4_0) at the 8B shapes, 16/64/128 tokens,
#     next to each matrix's f16 dequantization alone;
#  3. the 8B Q4_K_M model (`hone gen-model --type q4_k_m`, 4.9 GB), TTFT `-p 16/64/128 -n 32`, default against
#     HONE_W4_GEMM_MAX=0 (the dequantize + cuBLASLt path, the baseline), and its decode row (-p 64 -n 128).
# Predicted (H100): fused TTFT 5-7 ms at 16 tokens, 7-10 at 64, 11-15 at 128; dequantize + cuBLASLt 15-22 ms at
# each (one f16 pass over 8B weights, ~13 ms for Q4_0 in session 50, K-quant dequantization a little slower).
# The GEMM alone: Q4_K within ±15 % of Q4_0 at every shape and n (same nibble bytes, fewer scale bytes, the scale
# decode off the critical path); Q6_K 1.3-1.6x Q4_K's time (1.46x the bytes, 4 more ALU ops a word).
# On an H200 (goal rows first) the whole hone-w4-check --check and the suite step are left out for time.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -f $M/q.gguf ;; esac
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
OUT= timeout 120 $B/hone-kquant-check --check > $W/kq-check.txt 2>&1; el "kquant --check rc $?"; grep -E "FAIL|passed" $W/kq-check.txt
case "$GPU" in *H200*) ;; *)
  timeout 150 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "hone-w4-check --check rc $?"; grep -E "FAIL|passed" $W/w4-check.txt
  OUT=$M/rel timeout 120 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1; el "run-release suite rc $?"; tail -4 $W/release.txt ;;
esac
OUT= timeout 120 $B/hone-kquant-check --bench-gemm > $W/kq-gemm.txt 2>&1; el "kquant --bench-gemm rc $?"; grep -E "fused|FAIL" $W/kq-gemm.txt
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf > $W/gen-km.txt 2>&1; el "gen q4_k_m rc $?"; cat $W/gen-km.txt
for p in 16 64 128; do
  for v in X=1 HONE_W4_GEMM_MAX=0; do
    echo "q4_k_m p=$p [$v]: $(env $v timeout 90 $B/hone bench -m $M/km.gguf --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done
timeout 90 $B/hone bench -m $M/km.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-km.txt 2>&1; el "bench km rc $?"
grep -E "decode \(tok|TTFT|roofline" $W/bench-km.txt
el done
