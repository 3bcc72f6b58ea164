#!/bin/bash
# Session 45, call 4: session 4's unrun next step. Call 2's traces put the split combine's two handshakes (fence +
# atomic + loads, twice) at ~6-7 us of a 4k layer's ~18.6 on the step's path. Shape I combines each cluster of 8
# splits in distributed shared memory (a cluster barrier, no fence/atomic round trip) and then <= 8 cluster results
# globally; it lost 20-25 % from 4k up in session 4 because 8 KV heads x 8 clusters = 64 > the 62 clusters of 8 the
# chip holds at once (two waves). Capped at 7 clusters a KV head (HONE_ATTN_CHUNK=73 at 4k: 52 splits; =293 at 16k:
# 54 splits) it runs in one wave. Env only (HONE_ATTN_V3 forces the shape), no new code.
# Predictions: harness 4k G 15.1 us, I@73 12.5-14.0, G@73 15-16; 16k G 38, I@293 35-38; engine 8B Q4_0 -p 3900
# 434 -> 445-460 tok/s with I@73; Qwen3-0.6B Q4_0 -p 16000 595 -> 600-620 with I@293.
set -u
. tests/cuda/calls/prelude.sh
ab () {   # tag model prompt "variants" [bench args]
  local tag=$1 m=$2 p=$3 vs=$4; shift 4
  for r in 1 2; do for v in $vs; do
    echo "$tag p=$p [$v]: $(env ${v//,/ } timeout 90 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 "$@" 2>&1 \
      | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
  done; done
}
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
ab 8b $M/q.gguf 3900 "X=1 HONE_ATTN_V3=I,HONE_ATTN_CHUNK=73 HONE_ATTN_CHUNK=73" -c 4096 | tee $W/ab-8b.txt
rm -f $M/q.gguf
for c in 73 293; do
  HONE_ATTN_CHUNK=$c timeout 40 $B/hone-attn-check --bench --shapes GI > $W/attn-bench-$c.txt 2>&1; el "bench chunk $c rc $?"
  sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-$c.txt | head -12
done
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/s.gguf -q; el "gen qwen3 rc $?"
ab qwen3 $M/s.gguf 16000 "X=1 HONE_ATTN_V3=I,HONE_ATTN_CHUNK=293" -c 16384 | tee $W/ab-qwen3.txt
el done
