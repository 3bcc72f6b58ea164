#!/bin/bash
# Session 39, call 7: every kernel harness's checks on the closing tree (run-release.sh checks: the sampler's rows
# are part of hone-cuda-check --check); on an H200 also the engine with and without the chat's sampling (8B BF16 and
# Q4_0), which no H200 has measured since session 37. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT=$W/rel timeout 330 tests/cuda/run-release.sh checks 2>&1 | grep -vE "^\s*$" | tail -20
el "checks done"
case "$GPU" in
  *H200*)
    for t in q4_0 bf16; do
      timeout 120 $B/hone gen-model --shape llama3-8b --type $t -o $M/$t.gguf > /dev/null 2>&1; el "gen $t rc $?"
      for s in "" --sample; do
        timeout 60 $B/hone bench -m $M/$t.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 $s > $W/b.txt 2>&1
        el "$t ${s:-greedy} rc $?: $(grep -E 'decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
      done
      rm -f $M/$t.gguf
    done ;;
esac
el done
