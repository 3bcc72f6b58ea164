#!/bin/bash
# Session 54, call 2: the second half of s53-call8.sh, run once s54-call1.sh's checks passed: stream-K
# (HONE_W4_GEMM_STREAMK=1, its cost model) against the split over k (=0) end to end, same call: the AWQ layer
# (hone-w4-check --prefill-bench), then 8B Q4_K_M and AWQ TTFT at 16-192 tokens.
# Predicted (s53-call8.sh): a layer -5 to -12 % at 64-128 tokens; Q4_K_M TTFT at 128 tokens 9.9 -> 8.9-9.5 ms.
# Carry .carry-release (built at c44daca).
set -u
. tests/cuda/calls/prelude.sh
for v in 0 1; do
  OUT= HONE_W4_GEMM_STREAMK=$v timeout 100 $B/hone-w4-check --prefill-bench >> $W/w4-pb-sk$v.txt 2>&1; el "prefill-bench sk$v rc $?"
done
grep "one layer" $W/w4-pb-sk0.txt $W/w4-pb-sk1.txt
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf -q; el "gen q4_k_m rc $?"
ttft_ab "HONE_W4_GEMM_STREAMK=0 HONE_W4_GEMM_STREAMK=1" q4_k_m $M/km.gguf 16 64 128 192 | tee $W/ttft.txt
rm -f $M/km.gguf
awq_model
ttft_ab "HONE_W4_GEMM_STREAMK=0 HONE_W4_GEMM_STREAMK=1" awq $M/awq 16 64 128 192 | tee -a $W/ttft.txt
el done
