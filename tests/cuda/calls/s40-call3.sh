#!/bin/bash
# Session 40, call 3: the host sampler's radix walk (17a1bf9) on the GPU machine. Call 2 found the engine on a
# random-weights 8B Q4_0 sampling at 53 tok/s (pure temperature) and 57 (top-p alone) against 523 greedy: its logits
# are near uniform, so one 3 % bucket held most of the 128,256 candidates and was sorted whole. Now the walk goes on
# inside the bucket. Predictions: bench-sampler at T 100 (near uniform) ~0.3-0.5 ms a token here (5.4 ms before);
# the engine's host-sampled rows 300-450 tok/s (sampling ~0.5-1 ms of 128,256 plus the logits' copy a token).
# Carry .carry-release (bench-sampler-{old,new} as in call 2).
set -u
. tests/cuda/calls/prelude.sh
for a in "--top-k 0 --top-p 1 --min-p 0 --temp 100" "--top-k 0 --min-p 0 --temp 100 --vocab 128256" "--top-k 0 --top-p 1 --min-p 0 --vocab 128256"; do
  timeout 60 $C/bench-sampler-new $a 2>&1 | sed "s/^/new: /;s/(median of 5 rounds of 2000; //"
done
el "bench-sampler done"
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/test-cuda-backend --verbose > $W/test-cuda-backend.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/test-cuda-backend.txt) ok, $(grep -c '^not ok' $W/test-cuda-backend.txt) not ok"
grep -E "^not ok" $W/test-cuda-backend.txt | head
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for r in 1 2; do
  for cfg in "--temp 0" "" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0" "--top-k 0 --top-p 0.95 --min-p 0 --temp 1.0"; do
    timeout 60 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
    el "run [${cfg:-defaults}] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
  done
done
rm -f $M/q.gguf
el done
