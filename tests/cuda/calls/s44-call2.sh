#!/bin/bash
# Session 44, call 2: the tree as committed (the split combine by the split count; call 1's ldmatrix.trans V path
# measured and taken out again), its decode-attention checks under the sanitizers — call 1's racecheck ran past its
# 75 s on the ldmatrix build — and a per-block trace of the 8B Q4_0 step at 16k keys: where a layer's ~38 us go
# now that the MIO instruction count is ruled out (call 1: 80 -> 48 MIO instructions a warp-step moved 16k by 1 %).
# Predictions (written before the call): check 301/301, memcheck 0 errors, racecheck 0 hazards (the flat combine's
# thread groups at 9-32 splits run in --small's 16- and 32-split cases); bench G 512 ~7.9 us, 1k ~8.8, 4k ~15.0,
# 16k ~38 (call 1's auto column without the ldmatrix part: 16k/32k ~1 % slower than it); trace: exit of the last
# block ~43 us after q|k|v on the step's path (session 43: 42.8), main loops done by ~30.
# Rows in order of need (the session's device time was nearly spent by refused starts): racecheck, memcheck,
# check, bench, trace; the call's time limit cuts the rest.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/san-race.txt 2>&1
el "racecheck rc $?"; grep -E "RACECHECK SUMMARY|hazard|passed" $W/san-race.txt | tail -3
OUT= timeout 45 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
timeout 90 $B/hone-attn-check --check > $W/attn-check.txt 2>&1
el "check rc $?"; grep -E "passed|FAIL" $W/attn-check.txt | tail -3
timeout 40 $B/hone-attn-check --bench --shapes AG > $W/attn-bench.txt 2>&1
el "bench rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench.txt
el "trace"
timeout 130 bash -c ". tests/cuda/calls/prelude.sh >/dev/null; trace_attention Q4_0@HONE_TRACE_CTX=16384"
grep -E "^==|attn  |  (go|main|merged|cl1|exit) " $W/attn-timeline.txt | head -40
el done
