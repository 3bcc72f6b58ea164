#!/bin/bash
# Session 43, call 5: the split combine in two levels of at most 8 (the default of this build; HONE_ATTN_COMBINE=flat
# the last block over all splits, calls 3-4's form, same binary), and the closing tree's decode attention under the
# sanitizers. Call 3's trace: the last block's combine of 64 splits took ~6 us at 4k, 128 KB of partials through one
# SM in a weight round and 4 rounds of loads; two levels spread it over one SM a group of 8, each merge one round
# ((m, l) and O of <= 8 inputs loaded together). ~340 s of device time were left: the rows in order of need.
# Predictions (written before the call): checks pass; harness G at 4k 15.6 -> ~13.5 us, 16k 39 -> ~37, 1k 8.8 -> ~8,
# 128 unchanged (<= 8 splits: one round either way, ~6.4); engine Qwen3-0.6B Q4_0 -p 2100 ~1,062 -> ~1,110 tok/s,
# 8B Q4_0 -p 3900 ~430 -> ~440; memcheck 0 errors, racecheck 0 hazards.
set -u
. tests/cuda/calls/prelude.sh
timeout 60 $B/hone-attn-check --check > $W/attn-check-two.txt 2>&1
el "check two rc $?"; grep -E "passed|FAIL" $W/attn-check-two.txt | tail -3
for c in two flat; do
  HONE_ATTN_COMBINE=$c timeout 30 $B/hone-attn-check --bench --shapes AG > $W/attn-bench-$c.txt 2>&1
  el "bench $c rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-$c.txt
done
dec () {   # tag model prompt [hone bench args...]: two levels, flat; twice
  local tag=$1 m=$2 p=$3; shift 3
  for r in 1 2; do
    for c in two flat; do
      echo "$tag p=$p $c: $(HONE_ATTN_COMBINE=$c timeout 40 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 "$@" 2>&1 | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
    done
  done
}
timeout 40 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/q06.gguf -q; el "gen qwen3-0.6b rc $?"
dec "Qwen3-0.6B Q4_0" $M/q06.gguf 2100 | tee $W/engine.txt
OUT= timeout 45 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-attn-check --small > $W/san-mem.txt 2>&1
el "memcheck rc $?"; grep -E "ERROR SUMMARY|passed" $W/san-mem.txt | tail -2
OUT= timeout 75 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-attn-check --small > $W/san-race.txt 2>&1
el "racecheck rc $?"; grep -E "RACECHECK SUMMARY|hazard|passed" $W/san-race.txt | tail -3
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
dec "8B Q4_0" $M/q.gguf 3900 -c 4096 | tee -a $W/engine.txt
el done
