#!/bin/bash
# Session 38, call 2: the L2 streamer in the engine (kernels/hone-k-l2-stream.cu, HONE_L2_STREAM=<window KB>:<piece
# KB>, off by default). (1) test-cuda-backend with it on (the same logits checks; it only prefetches), and how often
# it left on its 2 ms timeout (must be never: every GEMV of the step counts its rows); (2) same-binary A/B of the
# whole 8B step (run-step-ab.sh) BF16, Q4_0, AWQ: off, 8 MB ahead, 16 MB ahead (8 KB prefetches); (3) the engine's
# BF16 decode row off/on/off/on. Carry .carry-release.
# Ran on a build with the streamer in the engine; that change was taken out after this call (RESULTS-cuda.md,
# "Session 38"), so on main HONE_L2_STREAM is ignored and every variant runs the same code.
set -u
. tests/cuda/calls/prelude.sh
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
HONE_L2_STREAM=8192:8 HONE_L2_STREAM_VERBOSE=1 HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/test-cuda-backend --verbose \
  > $W/test-cuda-backend.txt 2>&1
el "test-cuda-backend (streamer on) rc $?: $(grep -c '^ok' $W/test-cuda-backend.txt) ok, $(grep -c '^not ok' $W/test-cuda-backend.txt) not ok"
grep -E "^not ok|ERROR" $W/test-cuda-backend.txt | head; grep "L2 streamer" $W/test-cuda-backend.txt | sort | uniq -c | head -5
HONE_L2_STREAM=8192:8 HONE_L2_STREAM_VERBOSE=1 HONE_DECODE_TYPES=BF16 HONE_DECODE_DEFAULT_ONLY=1 timeout 90 \
  $B/hone-cuda-check --decode > $W/decode-bf16-on.txt 2>&1
el "decode bf16 on rc $?"; grep -E "L2 streamer" $W/decode-bf16-on.txt | sort | uniq -c
OUT=$W/ab ROUNDS=2 bash tests/cuda/run-step-ab.sh "BF16 Q4_0 AWQ" "X=1" "HONE_L2_STREAM=8192:8" "HONE_L2_STREAM=16384:8"
el "ab done"; cat $W/ab/ab.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
for r in off on off on; do
  [ $(( $(date +%s) - T0 )) -gt 480 ] && break
  if [ $r = on ]; then export HONE_L2_STREAM=8192:8; else unset HONE_L2_STREAM; fi
  bench bf16-$r-$RANDOM $M/8b-bf16.gguf
done
el done
