#!/bin/bash
# Session 47, call 3: AWQ's q|k|v. Call 2's traces (H100, 4k keys) put the whole AWQ-over-Q4_0 layer difference in
# q|k|v: 7.68 us on path against Q4_0's 3.33 (first block's main loop done 4.80 us after its wait, Q4_0's 0.96).
# Q4_0's q|k|v is resident 8.6 us before down ends (its norm triggers at entry) and issues its weight loads there;
# AWQ's is resident only after the pack (which triggers late, session 13), so its loads start after the wait.
# Screen, same build: the packs triggering at entry (HONE_NORM_TRIGGER=entry), down's last wave prefetching the
# first 4 / 12 MB of the next q|k|v into L2 (HONE_DECODE_PF, off since session 2 when it was slower on Q4_0/BF16),
# q|k|v on shapes 7 (R4 U2 KS2, Q4_0's) and 10 (R4 U1 KS2). Then traces at 128 keys, default vs the two first ones.
# On an H200 the goal rows come first.
# Predictions (decode tok/s against the default, -p 64 and -p 3900): entry within +-1 % (session 24: 0 at t128);
# PF=12 -1..+3 % (the q|k|v bytes move into down's tail and the pack, where DRAM idles ~3 us a layer), PF=4 0..+1.5 %;
# shapes 7 / 10 +-1 %. Traces: with PF=12 q|k|v's on-path time 7.7 -> 4-5 us, down +0.5-1.5 us.
# Carry .carry-release and .carry-trace.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
awq_model
V="X=1 HONE_NORM_TRIGGER=entry HONE_DECODE_PF=4 HONE_DECODE_PF=12 HONE_GEMV_SHAPE=qkv=7 HONE_GEMV_SHAPE=qkv=10"
env_ab awq $M/awq 64 "$V" | tee $W/ab-awq-64.txt
env_ab awq $M/awq 3900 "$V" -c 4096 | tee $W/ab-awq-4k.txt
timeout 200 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention AWQ AWQ@HONE_NORM_TRIGGER=entry AWQ@HONE_DECODE_PF=12"
cp $M/trace/summary.txt $W/trace-summary.txt 2>/dev/null
grep -E "^  (qkv|attn|o|pack|gate|down|layer|lm_head)|step \(traced" $W/trace-summary.txt
el done
