#!/bin/bash
# Session 48, call 1: session 47's call 4 cut to what the last ~800 s of device time can hold after eight refused
# starts. On an H200 the issues' goal rows first (the built tree: the AWQ tiny-tier prefetch default included); then
# the built default against HONE_DECODE_PF=0 (the previous behaviour) on AWQ and on the Q4_0 step at -p 64, then
# test-cuda-awq (CUDA against the CPU backend on AWQ models). The screens and the -p 1000 row of s47-call4.sh are
# left out. Predictions as s47-call4.sh's: AWQ -p 64 +1.0..+1.5 % on an H100 (session 47 call 3 through the knob:
# +1.3 %), Q4_0 equal within 0.3 %, checks pass; on an H200 the AWQ goal row 560-575 tok/s (session 37: 557.7),
# Q4_0 and BF16 within 1 % of session 37's (654.4, 263.4).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
awq_model
env_ab awq $M/awq 64 "X=1 HONE_DECODE_PF=0" | tee $W/ab-awq-64.txt
timeout 60 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -3 $W/test-cuda-awq.txt
[ -e $M/q.gguf ] || { timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"; }
env_ab 8b $M/q.gguf 64 "X=1 HONE_DECODE_PF=0" | tee $W/ab-8b-64.txt
el done
