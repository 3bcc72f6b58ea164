#!/bin/bash
# Session 47, call 5: call 4's short form for the last device minutes — the AWQ tiny-tier prefetch default against
# HONE_DECODE_PF=0 at -p 64, then test-cuda-awq. Predictions as call 4's: +1.0..+1.5 % on an H100; checks pass.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
awq_model
env_ab awq $M/awq 64 "X=1 HONE_DECODE_PF=0" | tee $W/ab-awq-64.txt
timeout 60 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -3 $W/test-cuda-awq.txt
el done
