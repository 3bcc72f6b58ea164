#!/bin/bash
# Session 40, call 4: call 3 measured the engine's host-sampled rows on a random-weights 8B Q4_0 at 36-48 tok/s
# (523-532 greedy) where the host sampler alone costs ~1-3 ms: the rest was the engine's own fallback walk
# (sample_with_draw in hone-engine.c: the whole vocabulary's probabilities, then a qsort of every candidate with a
# nonzero one — 128,256 of them on near-uniform logits). It now calls hone_sampler_sample_with_draw (the sampler's
# own path: no sort of the vocabulary). Predictions: pure temperature and top-p alone 250-450 tok/s (sampling
# ~1-3 ms of 128,256 near-uniform logits on this host's CPU, plus the logits' copy). On an H200 also the issue's
# goal rows on today's main (BF16, AWQ g128, Q4_0 8B, `hone bench -p 64 -n 128`; no H200 has run main since session
# 37: 87.6 / 58.0 / 61.1 % of 4.52 TB/s then): within ±2 % of those. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
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
case "$GPU" in *H200*)
  bench q4_0 $M/q.gguf; rm -f $M/q.gguf
  timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
  bench bf16 $M/8b-bf16.gguf
  timeout 100 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "rtn awq rc $?"
  rm -f $M/8b-bf16.gguf
  bench awq $M/8b-awq; rm -rf $M/8b-awq ;;
esac
rm -f $M/q.gguf
el done
