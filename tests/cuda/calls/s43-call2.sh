#!/bin/bash
# Session 43, call 2: decode attention's warp merge done once a query (not once a value) and its split combine over
# the block's queries only, with threads over (fewer queries than columns) splitting the splits. Call 1 (H100, trace
# of the 8B Q4_0 step at 4k): the merge after the main loop took 2.8 us a block (ncu: half of the kernel's
# instructions at 4k), the last block's combine ~6 us after the last merge.
# Rows: hone-attn-check --check (shapes A, G, I lists) and --bench (A, G, E; call 1's rows are the baseline, same
# card type); the engine before (.carry-base: HEAD's libhoneall.so) and after, alternating, on Qwen3-0.6B BF16 and
# Q4_0 at -p 64 / 1800 / 2100 and 8B Q4_0 at -p 64 / 3900 (-c 4096); the trace of the 8B Q4_0 step at 4k and 16k.
# Predictions (written before the call): checks all pass; harness 4k A/G 18.3/18.1 -> ~15.5 us, 16k 42.8/42.0 ->
# ~40, 1k 11.7/11.6 -> ~10, 128 8.35/7.95 -> ~7.5; trace 4k: merged - main 2.8 -> <= 0.8 us, attention on path
# 20.5 -> ~17 us; Qwen3-0.6B BF16 -p 2100 751 -> ~830 tok/s, -p 1800 807 -> ~870, -p 64 unchanged (tiny kernel);
# 8B Q4_0 -p 3900 +5-8 %.
set -u
. tests/cuda/calls/prelude.sh
mkdir -p $M/base && xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so
timeout 150 $B/hone-attn-check --check --shapes AGI > $W/attn-check.txt 2>&1
el "check rc $?"; grep -E "passed|FAIL" $W/attn-check.txt | tail -5
timeout 150 $B/hone-attn-check --bench --shapes AGE > $W/attn-bench.txt 2>&1
el "bench rc $?"; sed -n '/decode attention, one layer/,/L2-resident/p' $W/attn-bench.txt
for t in bf16 q4_0; do
  timeout 60 $B/hone gen-model --shape qwen3-0.6b --type $t -o $M/q06.gguf -q; el "gen qwen3-0.6b $t rc $?"
  for p in 64 1800 2100; do engine_ab "Qwen3-0.6B $t" $M/q06.gguf $p; done
  rm -f $M/q06.gguf
done | tee $W/engine.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b q4_0 rc $?"
{ engine_ab "8B Q4_0" $M/q.gguf 64; engine_ab "8B Q4_0" $M/q.gguf 3900 -c 4096; } | tee -a $W/engine.txt
rm -f $M/q.gguf
el "trace"
trace_attention Q4_0@HONE_TRACE_CTX=4096 Q4_0@HONE_TRACE_CTX=16384
el done
