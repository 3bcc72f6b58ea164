#!/bin/bash
# Session 50, call 10: the tree as committed (the mma.sync wrapper shared by the W4A16 GEMV and the fused GEMM, the
# GEMM's stage fill in one lambda: refactors, results must not move): the fused GEMM's checks, memcheck, the
# whole hone-w4-check --check, run-release.sh's suite step (CPU against CUDA on the default model's 2-layer cut and
# tiny models), the AWQ prefill benchmark (within ~2 % of call 9). On an H200 (with ~290 s of device time left) the
# issues' goal rows first, then the fused GEMM's checks only.
# Carry .carry-release (with the model cut).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*)
  goal_rows
  OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
  exit 0 ;;
esac
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 100 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
timeout 150 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "hone-w4-check --check rc $?"; grep -E "FAIL|passed" $W/w4-check.txt
OUT=$M/rel timeout 120 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1; el "run-release suite rc $?"; tail -4 $W/release.txt
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-prefill.txt 2>&1
el "--prefill-bench rc $?"; grep -E "prefill gemms|prefill +[0-9]+ tok" $W/w4-prefill.txt
el done
