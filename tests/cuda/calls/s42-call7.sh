#!/bin/bash
# Session 42, call 7: call 6's lead, measured first with the knobs that exist — decode attention's split size
# (HONE_ATTN_CHUNK = the least keys a split; default 32, i.e. 64 splits at 2k keys) at ~2k and ~4k keys.
# Predictions (written before the call): at -p 2100 on Qwen3-0.6B BF16 (default 751 tok/s) chunk 64 within ±5 %, 128
# and 256 slower (64-128 blocks for 132 SMs, each split's dependent chain longer); the 8B Q4_0 at -p 4000 the same
# order. If a larger chunk wins instead, the split's fixed cost (its launch share, the combine) is the floor.
# (As run, the 8B rows asked -p 4000 without -c and printed nothing: 4,000 + 128 tokens overran the default 4,096
# context. Fixed here to -p 3900 -c 4096; a second command ran chunk 0 and 128 that way: RESULTS-cuda.md.)
set -u
. tests/cuda/calls/prelude.sh
dec () {   # tag model prompt [env...]
  local tag=$1 m=$2 p=$3; shift 3
  echo "$tag p=$p $*: $(env "$@" timeout 60 $B/hone bench -m $m --device cuda:0 -p $p -c 4096 -n 128 -r 3 -w 1 2>&1 | grep -E 'decode \(tok|rror|achieved' | head -3 | tr '\n' ' ')"
}
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type bf16 -o $M/q06.gguf -q; el "gen qwen3-0.6b rc $?"
for c in 0 64 128 256 0; do dec "Qwen3-0.6B bf16" $M/q06.gguf 2100 HONE_ATTN_CHUNK=$c; done
dec "Qwen3-0.6B bf16" $M/q06.gguf 2100 HONE_STEP_PROBE=attn
rm -f $M/q06.gguf
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
for c in 0 64 128 256; do dec "8B q4_0" $M/q.gguf 3900 HONE_ATTN_CHUNK=$c; done
dec "8B q4_0" $M/q.gguf 3900 HONE_STEP_PROBE=attn
el done
