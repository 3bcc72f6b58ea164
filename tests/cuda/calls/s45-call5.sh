#!/bin/bash
# Session 45, call 5: the tree with the capped shape I as the one-token default past the short bound (sm_90):
# decode attention's checks, and the engine row of call 4 through the default (no environment).
# Predictions: --check all pass (call 4: I 135/135), memcheck 0 errors; 8B Q4_0 -p 3900 base ~443.7, new ~448.4
# (call 4's HONE_ATTN_LONG=I row).
# Carry .carry-release and .carry-base.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
engine_ab 8b $M/q.gguf 3900 -c 4096 | tee $W/ab-8b.txt
timeout 90 $B/hone-attn-check --check > $W/attn-check.txt 2>&1; el "check rc $?"
grep -E "passed|FAIL" $W/attn-check.txt | tail -3
OUT= timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
el done
