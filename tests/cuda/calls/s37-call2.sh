#!/bin/bash
# Session 37, call 2: (1) AWQ calibration of the Llama-3-8B shape end to end with `hone quantize`'s GPU defaults
# (128 × 512 tokens of the built-in set, g128): time and peak host memory now that the writers make deferred tensors
# in pieces of whole rows (the f16 lm_head and embeddings were made whole: ~1 GB each); (2) on an H200 only: the
# BF16, Q4_0 and AWQ g128 engine rows (`hone bench -p 64 -n 128`) against the corrected read probe.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
timeout 300 $TV $B/hone quantize -m $M/8b-bf16.gguf -o $M/8b-awq-cal > $W/calibrate.txt 2>&1
el "calibrate rc $?: $(grep -E 'Maximum resident|Elapsed' $W/calibrate.txt | tr -s ' ' | tr '\n' ' ')"
grep -v "^layer\|ETA" $W/calibrate.txt | grep -v "^	" | tail -6
rm -rf $M/8b-awq-cal
case "$GPU" in *H200*)
  bench bf16 $M/8b-bf16.gguf
  timeout 100 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "rtn awq rc $?"
  rm -f $M/8b-bf16.gguf
  bench awq $M/8b-awq; rm -rf $M/8b-awq
  timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/8b-q4_0.gguf -q; el "gen-model q4_0 rc $?"
  bench q4_0 $M/8b-q4_0.gguf ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
