#!/bin/bash
# Session 40, call 1: the sampler kernel after its two bitonic loops became one step helper (warp_bitonic_step;
# behaviour meant unchanged): its checks and sanitizers and µs (against session 39's call 6), both CUDA suites
# (the first GPU run of /cuda/engine-sampling against session 39's host sampler with top-k selected on the logits),
# the engine with and without sampling. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 90 $B/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep '^checks:' $W/cs.txt)"; grep -E "^FAIL|not compared" $W/cs.txt | head -8
OUT= timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/mc.txt 2>&1
el "memcheck check-sample-rows rc $?: $(grep 'ERROR SUMMARY' $W/mc.txt | tail -1)"
OUT= timeout 100 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"
for r in 1 2; do
  OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sb-$r.txt 2>&1
  el "bench-sample rc $?"; grep -E "chain" $W/sb-$r.txt | grep -v "one block" | sed 's/  */ /g'
done
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok" $W/$t.txt | head
done
grep -E "engine-sampling|^ok|^not ok" $W/test-cuda-backend.txt | grep -i sampl
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for s in --sample ""; do
  timeout 60 $B/hone bench -m $M/q.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 $s > $W/b.txt 2>&1
  el "q4_0 ${s:-greedy} rc $?: $(grep -E 'decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
done
rm -f $M/q.gguf
el done
