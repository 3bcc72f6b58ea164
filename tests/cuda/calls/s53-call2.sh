#!/bin/bash
# Session 53, call 2: the fused prefill GEMM's k step with fewer instructions (SASS of session 52's build, sm_90,
# instructions between the main loop's barriers at 64-token tiles: Q4Z 765, Q4_0 941, Q4_1 945, Q8_0 856, Q4_K 928,
# Q6_K 1,129; now 588 / 582 / 581 / 636 / 569 / 783): the GGUF types' B operands taken as adjacent registers of one
# 16-byte load (their pairing with the other piece's word cost ~180 register moves a step), the stage fills' row
# offsets and X pointer worked out once a thread, the scale rows' base once. Checks first, then the GEMM alone and
# the AWQ prefill with .carry-base's libhoneall.so (73cc32b's kernels) against this build's in the same call, then
# 8B Q4_K_M TTFT both ways, then the fused path past 128 tokens, then memcheck. Carry .carry-release and .carry-base.
# Predictions (written before the call): the 64-128-token regime is issue-bound (session 50's ncu), so GEMM time there
# falls by about half the instruction cut: Q4_0 / Q4_K -12 to -23 % (gate|up at 128 tokens 150 / 147 -> 115-130 us),
# Q6_K -10 to -18 %, Q8_0 and AWQ -8 to -15 %; at 16 tokens (latency-bound) 0 to -8 %. AWQ one layer at 128 tokens
# 262 -> 220-240 us; Q4_K_M TTFT at 128 tokens 11.4 -> 9.5-10.5 ms, at 16 tokens within 5 %. Checks: all pass, 0 errors.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 120 $B/hone-kquant-check --check > $W/kq-check.txt 2>&1; el "kquant --check rc $?"; grep -E "FAIL|passed" $W/kq-check.txt
mkdir -p $M/base; xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so; BL=$M/base:$LD_LIBRARY_PATH
for v in base new; do
  L=$LD_LIBRARY_PATH; [ $v = base ] && L=$BL
  OUT= LD_LIBRARY_PATH=$L timeout 100 $B/hone-kquant-check --bench-gemm > $W/kq-gemm-$v.txt 2>&1; el "bench-gemm $v rc $?"
done
paste -d'\n' <(grep fused $W/kq-gemm-base.txt | sed 's/^/base /') <(grep fused $W/kq-gemm-new.txt | sed 's/^/new  /')
for v in base new; do
  L=$LD_LIBRARY_PATH; [ $v = base ] && L=$BL
  OUT= LD_LIBRARY_PATH=$L timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-pb-$v.txt 2>&1; el "prefill-bench $v rc $?"
done
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf -q; el "gen q4_k_m rc $?"
for p in 16 64 128; do
  for v in base new; do
    L=$LD_LIBRARY_PATH; [ $v = base ] && L=$BL
    echo "q4_k_m p=$p [$v]: $(LD_LIBRARY_PATH=$L timeout 90 $B/hone bench -m $M/km.gguf --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done | tee $W/ttft-km.txt
ttft_ab "X=1 HONE_W4_GEMM_MAX=256" q4_k_m $M/km.gguf 192 256 | tee -a $W/ttft-km.txt
rm -f $M/km.gguf
OUT= timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
el done
