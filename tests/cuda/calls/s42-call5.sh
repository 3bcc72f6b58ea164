#!/bin/bash
# Session 42, call 5: the streamed decode (HONE_DECODE_STREAM=1: per layer attention and one persistent launch for
# o, gate|up, down and the next q|k|v; off by default since sessions 5-7 measured the 8B 1.05x (BF16) / 1.25x (Q4_0)
# slower) on a *small* model, where a step is mostly launch boundaries (Qwen3-0.6B BF16: 0.88 ms a token on an H100
# for 1.19 GB, ~42 % of the card's read). Never measured there. On an H200 the goal rows (s42-call4) run first.
# Predictions (written before the call): HONE_DECODE_STREAM=1 test-cuda-backend 23/23 (the streamed path still
# agrees with the CPU); Qwen3-0.6B BF16 at -p 64: streamed 0.85-1.15x the default's tok/s (no basis to call the
# sign: fewer launches, but each phase's grid-wide wait and input staging measured ~2.4 us + 5 us a layer on the 8B);
# Q4_0 the same range; the 8B BF16 row as session 6 (~1.05x slower) if time allows.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; esac
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
HONE_DECODE_STREAM=1 HONE_DEFAULT_MODEL=$MODEL timeout 150 $B/test-cuda-backend > $W/tcb.txt 2>&1
el "test-cuda-backend [streamed] rc $?: $(grep -c '^ok' $W/tcb.txt) ok, $(grep -c '^not ok' $W/tcb.txt) not ok"
grep '^not ok' $W/tcb.txt | head -3
dec () {   # tag stream model prompt
  echo "$1 stream=$2 p=$4: $(HONE_DECODE_STREAM=$2 timeout 60 $B/hone bench -m $3 --device cuda:0 -p $4 -n 128 -r 3 -w 1 2>&1 | grep -E 'decode \(tok|rror|declin' | head -2 | tr '\n' ' ')"
}
for t in bf16 q4_0; do
  timeout 60 $B/hone gen-model --shape qwen3-0.6b --type $t -o $M/q06-$t.gguf -q; el "gen qwen3-0.6b $t rc $?"
  for s in 0 1 0 1; do dec "Qwen3-0.6B $t" $s $M/q06-$t.gguf 64; done
  for s in 0 1; do dec "Qwen3-0.6B $t" $s $M/q06-$t.gguf 2048; done
  rm -f $M/q06-$t.gguf
done
OUT= timeout 60 $B/hone-cuda-check --check-stream > $W/chs.txt 2>&1   # the streamed launches counted, per tiny model
el "check-stream rc $?: $(grep '^checks:' $W/chs.txt)"; grep -E "^FAIL|declined" $W/chs.txt | head -3
el done
