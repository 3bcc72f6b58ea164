#!/bin/bash
# Session 50, call 2: the fused W4A16 prefill GEMM with its weights through shared memory (kernel 2,
# w4g_kernel_sw: a 4-stage cp.async pipeline of weight and X tiles) against call 1's kernel (1: a step of
# weights in registers, HONE_W4_GEMM_KERNEL=1). Call 1 measured kernel 1 at only 0.8-1.1 TB/s of packed weights
# at 16 tokens and 85-117 TFLOP/s at 64: neither the read nor the tensor cores bind, the loads wait on the step
# before. Prediction: kernel 2 at 16 tokens ~2-2.5 TB/s (one layer's four GEMMs 116 -> ~60 us), at 64 tokens
# ~150-180 us (from 256), the crossover with dequantize + cuBLASLt moving from ~110 to ~200 tokens.
# Then: the checks under both kernels, memcheck and racecheck of kernel 2, the whole hone-w4-check --check.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
for k in 2 1; do
  HONE_W4_GEMM_KERNEL=$k OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm-k$k.txt 2>&1; el "--gemm kernel $k rc $?"
  grep -E "FAIL|passed" $W/w4-gemm-k$k.txt
done
OUT= timeout 100 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -2 $W/w4-gemm-memcheck.txt
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-racecheck.txt 2>&1
el "racecheck rc $?"; tail -1 $W/w4-gemm-racecheck.txt
for k in 2 1; do
  HONE_W4_GEMM_KERNEL=$k OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-prefill-k$k.txt 2>&1
  el "--prefill-bench kernel $k rc $?"; grep -E "prefill gemms|prefill +[0-9]+ tok" $W/w4-prefill-k$k.txt
done
timeout 150 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "hone-w4-check --check rc $?"; grep -E "FAIL|passed" $W/w4-check.txt
el done
