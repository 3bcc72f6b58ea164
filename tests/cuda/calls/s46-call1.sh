#!/bin/bash
# Session 46, call 1: session 45's call 5 (refused then), on a fresh VM without .carry-base: the capped shape I as
# the one-token default past the short bound, against G (the previous default, forced with HONE_ATTN_LONG=G), and
# decode attention's own verification: --check of every shape, memcheck and racecheck over --small. On an H200,
# the issues' goal rows first.
# Predictions: 8B Q4_0 -p 3900 -c 4096 G ~443.7, default ~448 (H100); --check all pass; memcheck and racecheck 0 errors.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
env_ab 8b $M/q.gguf 3900 "HONE_ATTN_LONG=G X=1" -c 4096 | tee $W/ab-8b.txt
rm -f $M/q.gguf
timeout 90 $B/hone-attn-check --check > $W/attn-check.txt 2>&1; el "check rc $?"
grep -E "passed|FAIL" $W/attn-check.txt | tail -3
OUT= timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/san-race.txt 2>&1
el "racecheck rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed" $W/san-race.txt | tail -3
el done
