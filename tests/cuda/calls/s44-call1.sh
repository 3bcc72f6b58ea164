#!/bin/bash
# Session 44, call 1: V fragments by ldmatrix.trans (the default shape G and every non-COAL shape: one LDSM.T.x4 a
# 16-dim m-tile instead of two LDS.128 halves + 8 MOVM; the ring's piece slots swizzled so a matrix's 8 rows fall
# in 8 bank groups), and the split combine by the split count (two levels at <= 8 and > 32 splits, flat at 9-32:
# session 43's call 5 had two levels slower there). HEAD's kernels (.carry-base) are the same-call baseline.
# Session 4's counters: ~80 MIO instructions a warp a 16-key step (16 LDGSTS, 16 LDS.128, 36 MOVM, ~12 SHFL), short
# scoreboard + MIO throttle half the stall cycles at 16k; this takes 32 MOVM of them (80 -> 48).
# Predictions (written before the call): checks pass (the default list, 7 cases a shape, memcheck 0 errors, racecheck
# 0 hazards: lanes now read each other's ring pieces, behind the COAL shapes' __syncwarps); harness G (base -> new):
# 16k 37.9 -> ~35 us, 32k 66.9 -> ~62, 4k 15.0 -> ~14.3, 1k 9.6 -> ~8.5 (flat + LDSM), 512 9.15 -> ~7.8, 128
# unchanged (5.8); engine Qwen3-0.6B Q4_0 -p 2100
# ~1,080 -> ~1,100 tok/s, -p 16000 +3-6 %, 8B Q4_0 -p 3900 ~436 -> ~440. On an H200: the issues' goal rows first.
set -u
. tests/cuda/calls/prelude.sh
mkdir -p $M/base && xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so
timeout 90 $B/hone-attn-check --check > $W/attn-check.txt 2>&1
el "check rc $?"; grep -E "passed|FAIL" $W/attn-check.txt | tail -3
case "$GPU" in *H200*) goal_rows ;; esac
LD_LIBRARY_PATH=$M/base:$LD_LIBRARY_PATH timeout 40 $B/hone-attn-check --bench --shapes AG > $W/attn-bench-base.txt 2>&1
el "bench base rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-base.txt
for c in auto flat; do
  HONE_ATTN_COMBINE=$c timeout 40 $B/hone-attn-check --bench --shapes AG > $W/attn-bench-$c.txt 2>&1
  el "bench $c rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-$c.txt
done
OUT= timeout 45 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
OUT= timeout 75 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/san-race.txt 2>&1
el "racecheck rc $?"; grep -E "RACECHECK SUMMARY|hazard|passed" $W/san-race.txt | tail -3
timeout 40 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/q06.gguf -q; el "gen qwen3-0.6b rc $?"
{ engine_ab "Qwen3-0.6B Q4_0" $M/q06.gguf 2100; engine_ab "Qwen3-0.6B Q4_0" $M/q06.gguf 16000 -c 16384; } | tee $W/engine.txt
rm -f $M/q06.gguf
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
engine_ab "8B Q4_0" $M/q.gguf 3900 -c 4096 | tee -a $W/engine.txt
el done
