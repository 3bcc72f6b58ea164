#!/bin/bash
# Session 41, call 2: call 1's one-block walk was right (152 whole-row draws = the host's) but took 500-680 us a call
# (its 64-bit shared atomics are compare-and-swap loops, crowded into a few buckets on a flat row). The walk is now
# chain_walk_kernel: a launch a level over 128 blocks, warps summing their lanes per bucket (match_any) before one L2
# atomic, the level's last block choosing the bucket. Predictions: check-sample and both CUDA suites pass (the suite's
# distribution test now draws pure temperature and a top-p 0.99 nucleus on the device); bench-sample on 128,256
# logits: pure temperature walked 40-50 us (tree ~30 + 3 launches of 3-6 us), top-p walked 50-65 (5 launches), a
# nucleus inside the 256 best ~ the tree + 5 idle launches (~35); 8B Q4_0 random weights `hone run`: pure temperature
# 401 -> 480-500 tok/s, top-p 0.95 alone 142 -> 460-490, greedy ~523 (HONE_GPU_SAMPLING_WALK=0: the old path, same
# call). The walk's launches with PDL (default) and without (HONE_SAMPLE_WALK_PDL=0): idle launches 1-2 us cheaper
# each with it. (Cut after a first try was taken back mid-call: no H200 rows, test-cuda-awq or second rounds.)
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 100 $B/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep '^checks:' $W/cs.txt)"; grep -E "^FAIL|not compared|past the 256|chain V=" $W/cs.txt | head -12
for r in 1 0; do
  HONE_SAMPLE_WALK_PDL=$r OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sb-$r.txt 2>&1
  el "bench-sample (walk PDL $r) rc $?"; grep -E "chain" $W/sb-$r.txt | grep -v "one block" | sed 's/  */ /g'
done
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok|^Bail|ERROR" $W/$t.txt | head
done
grep -E "^# (engine|decode ahead|temperature)" $W/test-cuda-backend.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for w in "1 1" "1 0" "0 1"; do
  set -- $w
  for cfg in "--temp 0" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.95 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.9 --min-p 0 --temp 0.3" ""; do
    HONE_GPU_SAMPLING_WALK=$1 HONE_SAMPLE_WALK_PDL=$2 timeout 60 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
    el "walk $1 pdl $2 run [${cfg:-defaults}] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
  done
done
rm -f $M/q.gguf
OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/mc.txt 2>&1
el "memcheck check-sample-rows rc $?: $(grep 'ERROR SUMMARY' $W/mc.txt | tail -1)"
OUT= timeout 90 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"
el done
