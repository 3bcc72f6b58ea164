#!/bin/bash
# Session 51, call 2 (not run in session 51: no device machine started in sixteen tries; the next session's first
# call): the fused prefill GEMM extended to the K-quants (Q4_K, Q6_K), to q|k|v parts (Q4_K_M's Q4_K q|k + Q6_K v)
# and to Q8_0, which prefill takes only with HONE_W4_GEMM_TYPES=all until these checks pass (fused_by_default in
# kernels/hone-k-forward.cu). Carry .carry-release (with the model cut). On an H200 the issues' goal rows first.
#  1. checks: hone-w4-check --gemm (Q4_K, Q6_K, Q8_0 and parts against f64 on the values the kernel forms), its
#     memcheck, hone-kquant-check --check (its generator moved into the shared header), run-release.sh's suite step
#     with HONE_W4_GEMM_TYPES=all (test-cuda-backend's Q8_0 / Q4_K / Q6_K / Q4_K_M tiny models prefill through the
#     fused GEMM then);
#  2. hone-kquant-check --bench-gemm: the fused GEMM alone on Q4_K, Q6_K, Q4_0 and Q8_0 at the 8B shapes, 16/64/128
#     tokens, next to each matrix's f16 dequantization alone;
#  3. 8B Q4_K_M (`hone gen-model --type q4_k_m`, 4.9 GB) and Q8_0: TTFT `-n 32`, HONE_W4_GEMM_TYPES=all (fused)
#     against the default (dequantize + cuBLASLt for these types, the baseline), and the Q4_K_M decode row;
#  4. the whole hone-w4-check --check last (left out on an H200, after the goal rows, for time).
# Predicted (H100): Q4_K_M fused TTFT 5-7 ms at 16 tokens, 7-10 at 64, 11-15 at 128; dequantize + cuBLASLt 15-22 ms
# at each (one f16 pass over 8B weights, ~13 ms for Q4_0 in session 50, K-quant dequantization a little slower).
# Q8_0: fused 6-9 ms at 16 tokens (twice the bytes of Q4_0's 4.8 ms, better streamed), 12-17 at 128; old 13-17.
# The GEMM alone: Q4_K within ±15 % of Q4_0 at every shape and n (same nibble bytes, fewer scale bytes, the scale
# decode off the critical path); Q6_K 1.3-1.6x Q4_K's time (1.46x the bytes, 4 more ALU ops a word); Q8_0 1.4-1.9x
# Q4_0's (1.89x the bytes, better streamed).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -f $M/q.gguf ;; esac
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
OUT= timeout 120 $B/hone-kquant-check --check > $W/kq-check.txt 2>&1; el "kquant --check rc $?"; grep -E "FAIL|passed" $W/kq-check.txt
case "$GPU" in *H200*) ;; *)
  HONE_W4_GEMM_TYPES=all OUT=$M/rel timeout 120 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1
  el "run-release suite (all types fused) rc $?"; tail -4 $W/release.txt ;;
esac
OUT= timeout 120 $B/hone-kquant-check --bench-gemm > $W/kq-gemm.txt 2>&1; el "kquant --bench-gemm rc $?"; grep -E "fused|FAIL" $W/kq-gemm.txt
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf > $W/gen-km.txt 2>&1; el "gen q4_k_m rc $?"; cat $W/gen-km.txt
ttft_ab "HONE_W4_GEMM_TYPES=all X=1" q4_k_m $M/km.gguf 16 64 128
timeout 90 $B/hone bench -m $M/km.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-km.txt 2>&1; el "bench km rc $?"
grep -E "decode \(tok|TTFT|roofline" $W/bench-km.txt
rm -f $M/km.gguf
timeout 120 $B/hone gen-model --shape llama3-8b --type q8_0 -o $M/q8.gguf -q; el "gen q8_0 rc $?"
ttft_ab "HONE_W4_GEMM_TYPES=all X=1" q8_0 $M/q8.gguf 16 128
rm -f $M/q8.gguf
case "$GPU" in *H200*) ;; *)
  timeout 150 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "hone-w4-check --check rc $?"; grep -E "FAIL|passed" $W/w4-check.txt ;;
esac
el done
