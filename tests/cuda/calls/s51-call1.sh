#!/bin/bash
# Session 51, call 1 (bundle of session 50's kernels; carry .carry-release). On an H200: the issues' goal rows
# (prelude's goal_rows), then the fused 4-bit prefill's TTFT on this card for the first time (Q4_0 and AWQ g128 8B,
# `-p 16/64/128 -n 32`, the default and HONE_W4_GEMM_MAX=0 at 64). On an H100: only the baseline for this session's
# Q4_K fused prefill work, the dequantization pass it would remove (hone-kquant-check --bench-dequant).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*)
  goal_rows
  for m in q4_0:$M/q.gguf awq:$M/awq; do
    for p in 16 64 128; do
      echo "${m%%:*} p=$p default: $(timeout 90 $B/hone bench -m ${m#*:} --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
    done
    echo "${m%%:*} p=64 W4_GEMM_MAX=0: $(HONE_W4_GEMM_MAX=0 timeout 90 $B/hone bench -m ${m#*:} --device cuda:0 -p 64 -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
  el done; exit 0 ;;
esac
timeout 100 $B/hone-kquant-check --bench-dequant > $W/kq-dequant.txt 2>&1; el "bench-dequant rc $?"; cat $W/kq-dequant.txt | tail -25
el done
