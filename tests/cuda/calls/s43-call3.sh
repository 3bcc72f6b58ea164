#!/bin/bash
# Session 43, call 3: call 2's combine loop fixed (its split stride had left the loop rolled: a round trip a split,
# the last block's combine 13 us at 4k) and a one-pass combine to compare (HONE_ATTN_COMBINE=1: (m, l) and O of a
# batch of 16 splits loaded together, merged online; no weight round, no barrier before the data loads).
# Rows: hone-attn-check --check (A, G, I lists) with and without HONE_ATTN_COMBINE=1, --bench (A, G, E) both ways
# and with HEAD's kernels (the harness against .carry-base's libhoneall.so);
# the engine before (.carry-base) / after / after with HONE_ATTN_COMBINE=1 on Qwen3-0.6B BF16 and Q4_0 at -p 1800 /
# 2100 and 8B Q4_0 at -p 3900 -c 4096; the trace of the 8B Q4_0 step at 4k (both ways) and 16k.
# Predictions (written before the call): checks pass; harness (vs call 1, same card type) 4k A/G 18.3/18.1 -> ~16,
# 16k 42.8/42.0 -> ~41, 1k 11.7/11.6 -> ~10.5, 128 as call 2 (~6.5); trace 4k: the last block's combine (mark t6 ->
# exit) ~3 us; one-pass a further -0.5 to -1 us at 4k; engine: Qwen3-0.6B BF16 -p 2100 747 -> ~800 tok/s, Q4_0
# 941 -> ~1,030; 8B Q4_0 -p 3900 419 -> ~435 (call 2 had 393 with the rolled loop).
set -u
. tests/cuda/calls/prelude.sh
mkdir -p $M/base && xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so
for c in 0 1; do
  HONE_ATTN_COMBINE=$c timeout 120 $B/hone-attn-check --check --shapes AGI > $W/attn-check-c$c.txt 2>&1
  el "check combine=$c rc $?"; grep -E "passed|FAIL" $W/attn-check-c$c.txt | tail -3
done
LD_LIBRARY_PATH=$M/base:$LD_LIBRARY_PATH timeout 100 $B/hone-attn-check --bench --shapes AGE > $W/attn-bench-base.txt 2>&1
el "bench base rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-base.txt
for c in 0 1; do
  HONE_ATTN_COMBINE=$c timeout 100 $B/hone-attn-check --bench --shapes AGE > $W/attn-bench-c$c.txt 2>&1
  el "bench combine=$c rc $?"; sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-c$c.txt
done
dec () {   # tag model prompt [hone bench args...]: base, new, new with the one-pass combine; twice
  local tag=$1 m=$2 p=$3; shift 3
  for r in 1 2; do
    for v in base new new1; do
      local lp=$LD_LIBRARY_PATH c=0; [ $v = base ] && lp=$M/base:$LD_LIBRARY_PATH; [ $v = new1 ] && c=1
      echo "$tag p=$p $v: $(HONE_ATTN_COMBINE=$c LD_LIBRARY_PATH=$lp timeout 90 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 "$@" 2>&1 | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
    done
  done
}
for t in bf16 q4_0; do
  timeout 60 $B/hone gen-model --shape qwen3-0.6b --type $t -o $M/q06.gguf -q; el "gen qwen3-0.6b $t rc $?"
  for p in 1800 2100; do dec "Qwen3-0.6B $t" $M/q06.gguf $p; done
  rm -f $M/q06.gguf
done | tee $W/engine.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
dec "8B Q4_0" $M/q.gguf 3900 -c 4096 | tee -a $W/engine.txt
rm -f $M/q.gguf
el "trace"
trace_attention Q4_0@HONE_TRACE_CTX=4096 \
  Q4_0@HONE_TRACE_CTX=4096@HONE_ATTN_COMBINE=1 Q4_0@HONE_TRACE_CTX=16384
grep -E "^==|attn  |  (go|main|merged|cl1|exit) " $W/attn-timeline.txt
el done
