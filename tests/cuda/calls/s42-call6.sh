#!/bin/bash
# Session 42, call 6: where a small model's decode goes at ~2k keys. Call 5 (H100): Qwen3-0.6B BF16 decodes at
# 1,127-1,147 tok/s at -p 64 and 749 at -p 2048 — 0.45 ms a token more for a 242 MB KV cache (76 us at 3.2 TB/s).
# Rows (`hone bench -n 128 -r 3 -w 1`, decode tok/s): -p 64, -p 1800 (the context stays <= 2,048: the bounded
# short-context graph), -p 2100 (unbounded), each also with HONE_STEP_PROBE=attn (the step without its attention
# launches: a bound, the logits wrong). Predictions (written before the call): -p 1800 between -p 64 and -p 2100
# (~850-950 tok/s); attention's share at -p 2100 (its rows with and without) 0.25-0.35 ms a token, the rest (~0.1-0.2
# ms) the unbounded graph's tier; Q4_0 the same shape.
set -u
. tests/cuda/calls/prelude.sh
dec () {   # tag model prompt [env...]
  local tag=$1 m=$2 p=$3; shift 3
  echo "$tag p=$p $*: $(env "$@" timeout 60 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 2>&1 | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
}
for t in bf16 q4_0; do
  timeout 60 $B/hone gen-model --shape qwen3-0.6b --type $t -o $M/q06.gguf -q; el "gen qwen3-0.6b $t rc $?"
  for p in 64 1800 2100; do
    dec "Qwen3-0.6B $t" $M/q06.gguf $p X=1
    dec "Qwen3-0.6B $t" $M/q06.gguf $p HONE_STEP_PROBE=attn
  done
  rm -f $M/q06.gguf
done
el done
