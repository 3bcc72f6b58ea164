#!/bin/bash
# Superseded: run as s54-call1.sh and s54-call2.sh in session 54, which measured stream-K slower and took it out
# (HONE_W4_GEMM_STREAMK no longer exists); kept as the record of what was prepared.
# Session 53, call 8 — prepared, NOT run (the session's device time was spent): stream-K for the fused prefill GEMM
# (HONE_W4_GEMM_STREAMK; built in session 53, off by default). First its checks: hone-w4-check --gemm now runs every
# fused-GEMM case twice, the second time under hone_k_w4_gemm_set_streamk (2) (stream-K wherever the scratch takes it,
# one k step a block at least, so tiles are shared and summed by w4g_sk_reduce_kernel; a 28672x512 n=65 case keeps
# some tiles whole), plus memcheck. Then the A/B in one call: HONE_W4_GEMM_STREAMK=0 (the split over k) against =1
# (stream-K where its cost model wins): the GEMM alone, the AWQ layer, 8B Q4_K_M and AWQ TTFT.
# Predicted (the launch rule's own cost model; session 53's ncu: gate|up at 128 tokens runs 1.70 waves as 2): gate|up
# -7 to -17 % at 64-128 tokens and at 16, q|k|v -9 to -20 % at 64-128, o and down unchanged (stream-K not chosen);
# a layer -5 to -12 % at 64-128 tokens; Q4_K_M TTFT at 128 tokens 9.9 -> 8.9-9.5 ms. Make it the default only if the
# checks pass (88 expected from --gemm, 0 memcheck errors) and it wins in the same call. Carry .carry-release
# (build-carry.sh at or after this commit).
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 120 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 300 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
for v in 0 1 0 1; do
  OUT= HONE_W4_GEMM_STREAMK=$v timeout 100 $B/hone-kquant-check --bench-gemm >> $W/kq-gemm-sk$v.txt 2>&1; el "bench-gemm sk$v rc $?"
done
grep fused $W/kq-gemm-sk1.txt | head -24
for v in 0 1; do
  OUT= HONE_W4_GEMM_STREAMK=$v timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-pb-sk$v.txt 2>&1; el "prefill-bench sk$v rc $?"
  grep "one layer" $W/w4-pb-sk$v.txt
done
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf -q; el "gen q4_k_m rc $?"
ttft_ab "HONE_W4_GEMM_STREAMK=0 HONE_W4_GEMM_STREAMK=1" q4_k_m $M/km.gguf 16 64 128 192 | tee $W/ttft.txt
rm -f $M/km.gguf
awq_model
ttft_ab "HONE_W4_GEMM_STREAMK=0 HONE_W4_GEMM_STREAMK=1" awq $M/awq 16 64 128 192 | tee -a $W/ttft.txt
el done
