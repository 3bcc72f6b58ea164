#!/bin/bash
# Session 41, call 1: the device sampler walks the whole row when the answer lies past its 256 best (chain_wide in
# kernels/hone-k-sample.cu: pure temperature whose draw lands past them, a top-p / min-p set wider than them) instead
# of answering -1 (the host then sampled from the downloaded logits: 397 vs 532 tok/s greedy on an 8B, session 40).
# Predictions: check-sample all pass, the whole-row draws = the host reference (past >= 60 of them); bench-sample on
# 128,256 logits: pure temperature walked 40-70 us (3 passes from L2 by one block), top-p walked 60-100 (5 passes),
# the tree alone (-1) ~30; both CUDA suites pass (decode-ahead with and without the walk, the engine's pure-temperature
# and top-p 0.99 rows on the device = host); 8B Q4_0 random weights `hone run`: pure temperature 397 -> 480-510 tok/s,
# top-p 0.95 alone 142 -> 470-500, greedy ~532 (HONE_GPU_SAMPLING_WALK=0 reruns the old path in the same call). On an
# H200 also the goal rows. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 100 $B/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep '^checks:' $W/cs.txt)"; grep -E "^FAIL|not compared|past the 256|chain V=" $W/cs.txt | head -12
for r in 1 2; do
  OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sb-$r.txt 2>&1
  el "bench-sample rc $?"; grep -E "chain" $W/sb-$r.txt | grep -v "one block" | sed 's/  */ /g'
done
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok|^Bail|ERROR" $W/$t.txt | head
done
grep -E "^# (engine|decode ahead)" $W/test-cuda-backend.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for w in 1 0; do
  for cfg in "--temp 0" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.95 --min-p 0 --temp 1.0" ""; do
    HONE_GPU_SAMPLING_WALK=$w timeout 60 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
    el "walk $w run [${cfg:-defaults}] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
  done
done
case "$GPU" in *H200*)
  bench q4_0 $M/q.gguf; rm -f $M/q.gguf
  timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
  bench bf16 $M/8b-bf16.gguf
  timeout 100 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "rtn awq rc $?"
  rm -f $M/8b-bf16.gguf
  bench awq $M/8b-awq; rm -rf $M/8b-awq ;;
esac
rm -f $M/q.gguf
OUT= timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/mc.txt 2>&1
el "memcheck check-sample-rows rc $?: $(grep 'ERROR SUMMARY' $W/mc.txt | tail -1)"
el done
