#!/bin/bash
# Session 40, call 2: the host sampler without a sort of the vocabulary (4b139db) on the GPU machine.
#  1. bench-sampler old (a6043fc's hone-sampler.c, session 39's) and new on this host's CPU, alternating: the CLI
#     defaults, top-p alone, pure temperature (carried as .carry-release/bench-sampler-{old,new}).
#  2. both CUDA suites (/cuda/engine-sampling and /cuda/decode-ahead draw through the host sampler).
#  3. the engine on an 8B Q4_0 (generated) where the device sampler declines and the host samples every token:
#     pure temperature (top-k 0, top-p 1, min-p 0) and top-p alone, against greedy and the defaults.
# Predictions (this VM: 49,152 vocab 5,390 -> 139 us pure temperature, 321 -> 27 top-p alone): on the GPU host's
# CPU the same order; the engine's pure-temperature decode on the 8B shape (128,256 vocab) was capped by a ~15 ms
# sort a token (old, not run here), now by the logits' copy and ~0.4 ms of sampling: 300-450 tok/s against ~548 greedy.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
for a in "" "--top-k 0" "--top-k 0 --top-p 1 --min-p 0" "--top-k 0 --top-p 1 --min-p 0 --vocab 128256" "--top-k 0 --min-p 0 --temp 1.5"; do
  for b in old new; do
    timeout 60 $C/bench-sampler-$b $a 2>&1 | sed "s/^/$b: /;s/(median of 5 rounds of 2000; //"
  done
done
el "bench-sampler done"
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok" $W/$t.txt | head
done
grep -E "^# engine|decode ahead|fallback" $W/test-cuda-backend.txt | head -12
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for r in 1 2; do
  for cfg in "--temp 0" "" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.95 --min-p 0 --temp 1.0"; do
    timeout 60 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
    el "run [${cfg:-defaults}] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
  done
done
rm -f $M/q.gguf
el done
