#!/bin/bash
# Session 38, call 3: the closing tree on a GPU — test-cuda-backend and test-cuda-awq (the engine loads models
# through the session's changed checks: JSON members read by type, a GGUF's chat template checked for UTF-8), and
# hone-chain-bench with its timing helper refactored (one Q4_0 run with the L2 rows). Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok|ERROR" $W/$t.txt | head
done
xz -dkf $C/hone-chain-bench.xz
timeout 120 $C/hone-chain-bench --type q4_0 > $W/chain-q4_0.txt 2>&1; el "chain q4_0 rc $?"
grep -E "^device|one read kernel|real structure|L2 probe" $W/chain-q4_0.txt | head -20
el done
