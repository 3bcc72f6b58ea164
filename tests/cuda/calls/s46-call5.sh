#!/bin/bash
# Session 46, call 5: call 4 cut to what the last device minutes hold — the cap rows alone (no traces): AWQ and
# Q4_0 8B at -p 3900 -c 4096 with 5 clusters a KV head (HONE_ATTN_CAP=5) against the default (7 on an H100) and G.
# Predictions: as call 4's — if o's early blocks beside 56 resident clusters are AWQ's loss, cap 5 is +0.5-1 % over
# the default on AWQ and 0 to -1 % on Q4_0.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
awq_model
env_ab awq $M/awq 3900 "X=1 HONE_ATTN_CAP=5 HONE_ATTN_LONG=G" -c 4096 | tee $W/ab-awq-4k.txt
rm -rf $M/awq
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
env_ab 8b $M/q.gguf 3900 "X=1 HONE_ATTN_CAP=5" -c 4096 | tee $W/ab-8b-4k.txt
el done
