#!/bin/bash
# Session 53, call 4: the README's TTFT table on the committed tree (2c9266d: the k step in fewer instructions,
# 4-bit types fused up to 192 tokens, Q8_0/Q6_K up to 128): 8B Q4_0, Q8_0 and AWQ g128 (RTN export) TTFT by default
# against HONE_W4_GEMM_MAX=0 (dequantize + cuBLASLt) at 16/64/128/192 tokens. On an H200 the issues' goal rows first.
# Predicted (call 2's GEMM -3 to -13 %, session 50/52's TTFT rows): Q4_0 4.6-4.8 / 6.2-6.6 / 9.6-10.2 / 13.8-14.2 ms,
# Q8_0 5.0-5.2 / - / 12.6-13.2, AWQ 4.4-4.6 / 6.0-6.3 / 9.3-9.7 / 13.2-13.6; the dequantized column as before
# (12.8-14.8). Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -rf $M/q.gguf; (cd $W && tar cJf goal-rows.tar.xz bench-*.txt && rm -f bench-*.txt) ;; esac
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/t.gguf -q; el "gen q4_0 rc $?"
ttft_ab "X=1 HONE_W4_GEMM_MAX=0" q4_0 $M/t.gguf 16 64 128 192 | tee -a $W/ttft.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q8_0 -o $M/t.gguf -q; el "gen q8_0 rc $?"
ttft_ab "X=1 HONE_W4_GEMM_MAX=0" q8_0 $M/t.gguf 16 64 128 | tee -a $W/ttft.txt
rm -f $M/t.gguf
awq_model
ttft_ab "X=1 HONE_W4_GEMM_MAX=0" awq $M/awq 16 64 128 192 | tee -a $W/ttft.txt
el done
