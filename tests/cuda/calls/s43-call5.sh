#!/bin/bash
# Session 43, call 5: the closing tree's decode attention under the sanitizers (calls 2-3 changed its shared-memory
# use: the merge's per-query weights, the combine's thread groups adding up in the wo area) and its checks with the
# new cases (2 and 1 queries a block, Qwen3-0.6B's G 2, up to 20k keys); on an H200 also the issues' goal rows.
# Predictions: checks all pass; memcheck 0 errors, racecheck 0 hazards; H200 rows within +-2 % of session 37's.
set -u
. tests/cuda/calls/prelude.sh
timeout 100 $B/hone-attn-check --check > $W/attn-check.txt 2>&1
el "check rc $?"; grep -E "passed|FAIL" $W/attn-check.txt | tail -3
OUT= timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
OUT= timeout 120 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/san-race.txt 2>&1
el "racecheck rc $?"; grep -E "RACECHECK SUMMARY|hazard|passed" $W/san-race.txt | tail -3
case "$GPU" in *H200*) goal_rows ;; esac
el done
