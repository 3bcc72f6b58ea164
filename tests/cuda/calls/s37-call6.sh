#!/bin/bash
# Session 37, call 6: the Q4Z dequantization of the prefill path with 4 words a thread (loads of all four issued
# before the first is used) against the one-word kernel (HONE_DEQUANT_WORDS=1), same binary: hone-w4-check --check
# (its dequantization checks are bit-exact), then hone-w4-check --bench's dequantization and prefill rows under each,
# then the engine's TTFT at 2,048 tokens, AWQ g128 under each and BF16, alternating. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone-w4-check --check > $W/w4-check.txt 2>&1; el "w4 check rc $?: $(tail -1 $W/w4-check.txt)"
HONE_DEQUANT_WORDS=1 timeout 60 $B/hone-w4-check --check > $W/w4-check-1.txt 2>&1; el "w4 check (1 word) rc $?"
grep -i "dequant" $W/w4-check.txt | head -4
for v in 1 4 1 4; do
  HONE_DEQUANT_WORDS=$v timeout 150 $B/hone-w4-check --bench > $W/w4-bench-$v.txt 2>&1
  el "w4 bench words=$v rc $?"; grep -iE "^dequant|prefill.*2048|2048.*prefill" $W/w4-bench-$v.txt
  [ $(( $(date +%s) - T0 )) -gt 200 ] && break
done
timeout 60 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q
timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/a -q; el "rtn rc $?"
for r in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 330 ] && break
  for v in 1 4; do
    echo "AWQ words=$v: $(HONE_DEQUANT_WORDS=$v timeout 60 $B/hone bench -m $M/a --device cuda:0 -p 2048 -n 16 -r 3 -w 1 2>&1 | grep TTFT)"
  done
  echo "BF16: $(timeout 60 $B/hone bench -m $M/b.gguf --device cuda:0 -p 2048 -n 16 -r 3 -w 1 2>&1 | grep TTFT)"
done
el done
