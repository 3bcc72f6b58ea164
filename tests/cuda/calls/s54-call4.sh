#!/bin/bash
# Session 54, call 4: the fused GEMM's split over k chosen by a new cost model (fitted to call 3's sweep: an SM's
# share of the blocks × (steps + 2), a block alone on an SM at 0.8 of the rate, the partials' sum a fixed cost and
# their bytes) against .carry-base's libhoneall.so (call 3's build: the whole-waves rule) in the same call. On an
# H200 the goal rows first, and then no TTFT rows (the budget). Checks, the GEMM alone, the AWQ layer, 8B Q4_K_M and
# AWQ TTFT at 16-192 tokens.
# Predicted (call 3's sweep times at the new model's picks): the GEMM alone, Q4_0 layer sums -6.5 % at 16 tokens,
# -0.6 % at 64, -2.2 % at 128, -2.3 % at 192; Q8_0 -4.8 % at 128; the AWQ layer -4 to -7 % at 16 tokens, 0 to -3 %
# at 64-192; TTFT -2 to -5 % at 16 tokens, 0 to -3 % elsewhere. Checks: all pass.
# Carry .carry-release (this tree) and .carry-base (call 3's libhoneall.so).
set -u
. tests/cuda/calls/prelude.sh
H200=0; case "$GPU" in *H200*) H200=1; goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
OUT= timeout 100 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt | head
mkdir -p $M/base; xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so; BL=$M/base:$LD_LIBRARY_PATH
for r in 1 2; do
  for v in base new; do
    L=$LD_LIBRARY_PATH; [ $v = base ] && L=$BL
    OUT= LD_LIBRARY_PATH=$L timeout 60 $B/hone-kquant-check --bench-gemm 2>&1 | grep fused | sed "s/^/$v /" >> $W/gemm-ab.txt; el "bench-gemm $v rc $?"
    OUT= LD_LIBRARY_PATH=$L timeout 100 $B/hone-w4-check --prefill-bench 2>&1 | grep "one layer" | sed "s/^/$v /" >> $W/pb-ab.txt; el "prefill-bench $v rc $?"
  done
done
cat $W/pb-ab.txt
[ $H200 = 1 ] && { el done; exit 0; }
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf -q; el "gen q4_k_m rc $?"
ttft_ab "LD_LIBRARY_PATH=$BL X=1" q4_k_m $M/km.gguf 16 64 128 192 | tee $W/ttft.txt
rm -f $M/km.gguf
awq_model
ttft_ab "LD_LIBRARY_PATH=$BL X=1" awq $M/awq 16 64 128 192 | tee -a $W/ttft.txt
el done
