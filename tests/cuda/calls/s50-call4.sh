#!/bin/bash
# Session 50, call 4: kernel 2 reworked after call 3's ncu (scales and zero points through the shared stages, loaded
# three steps before use by thread-per-row loads; X read in its natural order and stored swizzled; the k split
# chosen by whole waves) against kernel 1 (HONE_W4_GEMM_KERNEL=1), with call 2's checks and benchmarks.
# Prediction: one layer's four GEMMs at 16 tokens 110 -> ~70 us, at 64 tokens 241 -> ~170 us (kernel 2).
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
