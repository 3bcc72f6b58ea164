#!/bin/bash
# Session 47, call 4: the W4A16 tiny-tier prefetch default (kernels/hone-k-forward.cu gemv_pf_mb: a one-token AWQ
# step bounded to the tiny attention tier prefetches 4 MB of the next matrix into L2 in each GEMV's last wave)
# against the previous behaviour (HONE_DECODE_PF=0), same build; on an H200 the goal rows first; then
# test-cuda-awq (CUDA against the CPU backend on AWQ models).
# Predictions (H100): AWQ -p 64 +1.0..+1.5 % (call 3: +1.3 %); AWQ -p 1000 (the 2k tier: auto gives 0) and the
# Q4_0 step -p 64 equal within 0.3 %; test-cuda-awq passes. Two screens on top of the new default at -p 64: the packs
# at entry (call 3's trace: q|k|v resident 3.8 us early but its pack +1.7 us), and that with q|k|v on shape 7 (whose
# early loads cover the whole matrix where the blocks fit): each -1..+1 %. On an H200: AWQ goal row 560-575 tok/s (session 37:
# 557.7), Q4_0 and BF16 within 1 % of session 37's (654.4, 263.4).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
awq_model
env_ab awq $M/awq 64 "X=1 HONE_DECODE_PF=0 HONE_NORM_TRIGGER=entry HONE_NORM_TRIGGER=entry,HONE_GEMV_SHAPE=qkv=7" | tee $W/ab-awq-64.txt
env_ab awq $M/awq 1000 "X=1 HONE_DECODE_PF=0" -c 2048 | tee $W/ab-awq-1k.txt
[ -e $M/q.gguf ] || { timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"; }
env_ab 8b $M/q.gguf 64 "X=1 HONE_DECODE_PF=0" | tee $W/ab-8b-64.txt
timeout 240 $B/test-cuda-awq > $W/test-cuda-awq.txt 2>&1; el "test-cuda-awq rc $?"; tail -3 $W/test-cuda-awq.txt
el done
