#!/bin/bash
# Session 43, call 4: an 8-warp block of 64 KB (shapes N, O: G with 8 warps × 8 KB rings, one 16-key step each in
# flight) against G; then the release checks of the tree with calls 2-3's merge and combine (the default).
# Call 3 (H100): the 96 KB 8-warp shape E at 4k with 128-key splits (256 blocks, one wave) took 14.35 us against G's
# 15.53; E is over the 60 KB that leaves the next GEMV room to stage its weights early, N is not.
# Rows: hone-attn-check --check --shapes NO (their generic and 40-case lists) and --bench --shapes GENO; the engine
# with the default shape vs HONE_ATTN_V3=N (its own split rule, and with HONE_ATTN_CHUNK=128) on 8B Q4_0 at -p 3900
# -c 4096 and -p 16000 -c 16384, Qwen3-0.6B Q4_0 at -p 2100; then run-release.sh suite checks.
# Predictions (written before the call): N/O checks pass; harness N at 4k with 128-key splits ~14.3 us (E's), at
# 16k-32k within 2 % of G; engine 8B Q4_0 -p 3900 428.7 -> ~435 tok/s with N and 128-key splits, unless its 64 KB
# keeps the o GEMV from staging early (then slower); release checks all pass.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone-attn-check --check --shapes NO > $W/attn-check-no.txt 2>&1
el "check N O rc $?"; grep -E "passed|FAIL" $W/attn-check-no.txt | tail -3
timeout 100 $B/hone-attn-check --bench --shapes GENO > $W/attn-bench.txt 2>&1
el "bench rc $?"; sed -n '/decode attention, one layer/,/^again/p;/split size/,/several tokens/p' $W/attn-bench.txt
dec () {   # tag model prompt [hone bench args...]: default, N, N with 128-key splits; twice
  local tag=$1 m=$2 p=$3; shift 3
  for r in 1 2; do
    for v in default N N128; do
      local e=(X=1); [ $v = N ] && e=(HONE_ATTN_V3=N); [ $v = N128 ] && e=(HONE_ATTN_V3=N HONE_ATTN_CHUNK=128)
      echo "$tag p=$p $v: $(env "${e[@]}" timeout 90 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 "$@" 2>&1 | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
    done
  done
}
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
{ dec "8B Q4_0" $M/q.gguf 3900 -c 4096; dec "8B Q4_0" $M/q.gguf 16000 -c 16384; } | tee $W/engine.txt
rm -f $M/q.gguf
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/q06.gguf -q; el "gen qwen3-0.6b rc $?"
dec "Qwen3-0.6B Q4_0" $M/q06.gguf 2100 | tee -a $W/engine.txt
rm -f $M/q06.gguf
el "release checks"
OUT=$W/rel timeout 330 tests/cuda/run-release.sh suite checks > $W/rel.txt 2>&1
el "run-release rc $?"; grep -vE "^\s*$" $W/rel/summary.txt 2>/dev/null | tail -25
el done
