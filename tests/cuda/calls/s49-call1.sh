#!/bin/bash
# Session 49, call 1: the issues' goal rows on whichever card comes (on an H200 they are the rows issues #5 and #6
# ask for; on an H100 they are read against its own read ceiling, which `hone bench` measures), then the CUDA checks (test-cuda-awq: CUDA against
# the CPU backend on AWQ models; hone-w4-check: the int4 kernels against an f64 reference, then its prefill benchmark).
# Predictions on an H200: AWQ 560-575 tok/s (session 37: 557.7, before the tiny-tier prefetch's +1.2 %), Q4_0 and
# BF16 within 1 % of session 37's (654.4, 263.4). On an H100: AWQ ~462, Q4_0 within 1 % of session 48's rows.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
goal_rows
timeout 60 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -3 $W/test-cuda-awq.txt
timeout 120 $B/hone-w4-check > $W/w4-check.txt 2>&1; el "hone-w4-check rc $?"; tail -2 $W/w4-check.txt
el done
