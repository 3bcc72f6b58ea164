#!/bin/bash
# Session 45, call 4: session 4's unrun next step. Call 2's traces put the split combine's two handshakes (fence +
# atomic + loads, twice) at ~6-7 us of a 4k layer's ~18.6 on the step's path. Shape I combines each cluster of 8
# splits in distributed shared memory (a cluster barrier, no fence/atomic round trip), then <= 8 cluster results
# globally; it lost 20-25 % from 4k up in session 4 because 8 KV heads x 8 clusters = 64 > the 62 clusters of 8 the
# chip holds at once (two waves). This build caps a clustered launch's splits so that its clusters fit at once
# (cluster_split_cap: 7 clusters a KV head at 8B, 52-54 splits at 4k-16k; HONE_ATTN_NO_CAP=1 lifts it) and lets
# HONE_ATTN_LONG=I choose I past the short-context bound (default G, unchanged). Base = HEAD's library (.carry-base).
# Predictions: --check of I all pass; harness 4k G 15.1 us, I 12.5-14.0 (I uncapped ~18); 16k G 38, I 35-38;
# engine 8B Q4_0 -p 3900 base = new ~434, new+LONG=I 445-460 tok/s; -p 1900 (bounded, I, now 7 clusters instead of
# 8 at 2k keys) +0-2 %; Qwen3-0.6B Q4_0 -p 16000 ~595, LONG=I 600-620.
# Carry .carry-release and .carry-base.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
env_ab 8b $M/q.gguf 3900 "base X=1 HONE_ATTN_LONG=I" -c 4096 | tee $W/ab-8b.txt
timeout 60 $B/hone-attn-check --check --shapes I > $W/attn-check-I.txt 2>&1; el "check I rc $?"
grep -E "passed|FAIL" $W/attn-check-I.txt | tail -3
timeout 40 $B/hone-attn-check --bench --shapes GI > $W/attn-bench.txt 2>&1; el "bench rc $?"
sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench.txt | head -14
HONE_ATTN_NO_CAP=1 timeout 40 $B/hone-attn-check --bench --shapes I > $W/attn-bench-nocap.txt 2>&1; el "bench nocap rc $?"
sed -n '/decode attention, one layer/,/^again/p' $W/attn-bench-nocap.txt | head -14
env_ab 8b $M/q.gguf 1900 "base X=1 HONE_ATTN_LONG=I" | tee $W/ab-8b-1900.txt
rm -f $M/q.gguf
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/s.gguf -q; el "gen qwen3 rc $?"
env_ab qwen3 $M/s.gguf 16000 "base X=1 HONE_ATTN_LONG=I" -c 16384 | tee $W/ab-qwen3.txt
el done
