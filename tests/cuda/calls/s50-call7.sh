#!/bin/bash
# Session 50, call 7: the fused W4A16 prefill GEMM as committed (one kernel, kernels/hone-k-gemm-w4.cu; the
# register-weights kernel of calls 1-4 removed), after call 6's ncu: the scale ring no longer swaps registers (a
# copy waited on the loads in flight: 27 % of the stall samples), scale tiles [group][row] (conflict-free stores).
# Default threshold 192 tokens (call 5: fused 13.57 ms against 14.40 at 192 tokens, 17.02 against 15.02 at 256).
# Prediction: one layer's four GEMMs at 16 tokens 96 -> ~75 us, at 64 tokens 144 -> ~130 us.
# Checks (f64, memcheck, racecheck, the whole hone-w4-check --check, test-cuda-awq), the prefill benchmark, and
# the engine's TTFT on an 8B AWQ export at 16-256 tokens, default against HONE_W4_GEMM_MAX=0.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 100 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -2 $W/w4-gemm-memcheck.txt
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-racecheck.txt 2>&1
el "racecheck rc $?"; tail -1 $W/w4-gemm-racecheck.txt
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-prefill.txt 2>&1
el "--prefill-bench rc $?"; grep -E "prefill gemms|prefill +[0-9]+ tok" $W/w4-prefill.txt
timeout 150 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "hone-w4-check --check rc $?"; grep -E "FAIL|passed" $W/w4-check.txt
timeout 60 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -2 $W/test-cuda-awq.txt
awq_model
for p in 16 64 128 192 256; do
  for v in X=1 HONE_W4_GEMM_MAX=0; do
    echo "awq p=$p [$v]: $(env $v timeout 60 $B/hone bench -m $M/awq --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done | tee $W/ttft.txt
el done
