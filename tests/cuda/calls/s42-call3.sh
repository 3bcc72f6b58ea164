#!/bin/bash
# Session 42, call 3: HONE_PREFILL_OVERLAP's smaller reserves. Call 2 (H100): AWQ g128 8B TTFT at 2,048 tokens, ms,
# medians of 3, two rounds: off 54.7 / 54.5, k=4 54.2 / 53.2, k=8 56.3 / 56.1, k=16 58.5 / 58.3 — the GEMMs lose
# more than proportionally on fewer SMs and only a small reserve pays. Now k=0 means the ring alone (no SM target),
# unset = off. Checks first on the default path (unchanged code path but the plans' new key), then the rows.
# Predictions (written before the call): test-cuda-backend 23/23 and test-cuda-awq 7/7 with the overlap unset and
# with k=2; AWQ TTFT k=0 within ±0.5 ms of off (the GEMMs' CTAs hold the whole register file: the dequantization only
# runs in their gaps), k=2 and k=4 0.5-1.5 ms under off, k=6 between k=4 and call 2's k=8; Q4_0 the same pattern.
set -u
. tests/cuda/calls/prelude.sh
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for k in "" 2; do
  HONE_PREFILL_OVERLAP=$k HONE_DEFAULT_MODEL=$MODEL timeout 150 $B/test-cuda-backend > $W/tcb$k.txt 2>&1
  el "test-cuda-backend [overlap '$k'] rc $?: $(grep -c '^ok' $W/tcb$k.txt) ok, $(grep -c '^not ok' $W/tcb$k.txt) not ok"
  HONE_PREFILL_OVERLAP=$k HONE_DEFAULT_MODEL=$MODEL timeout 120 $B/test-cuda-awq > $W/tca$k.txt 2>&1
  el "test-cuda-awq [overlap '$k'] rc $?: $(grep -c '^ok' $W/tca$k.txt) ok, $(grep -c '^not ok' $W/tca$k.txt) not ok"
done
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q; el "gen bf16 rc $?"
timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/a -q; el "rtn awq rc $?"
ttft () {   # tag k model (k "": off)
  echo "$1 k=${2:-off}: $(HONE_PREFILL_OVERLAP=$2 timeout 60 $B/hone bench -m $3 --device cuda:0 -p 2048 -n 16 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
}
for r in 1 2; do
  for k in "" 0 2 4 6; do ttft AWQ "$k" $M/a; done
  ttft BF16 "" $M/b.gguf
  el "round $r"
done
rm -f $M/b.gguf; rm -rf $M/a
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen q4_0 rc $?"
for k in "" 2 4 "" 2 4; do ttft Q4_0 "$k" $M/q.gguf; done
el done
