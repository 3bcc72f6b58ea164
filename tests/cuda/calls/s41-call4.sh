#!/bin/bash
# Session 41, call 4: after the walk's launcher became hone_k_launch_pdl (the PDL-launch body hone_k_launch_role now
# calls too; behaviour meant unchanged): the sampler checks, the CUDA backend suite, and one 8B engine row each of
# greedy and pure temperature. Predictions: 8/8, 23/23, ~532 and ~512 tok/s (call 2). Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 60 $B/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep '^checks:' $W/cs.txt)"; grep -E "^FAIL|past the 256" $W/cs.txt | head -4
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
HONE_DEFAULT_MODEL=$MODEL timeout 120 $B/test-cuda-backend > $W/tcb.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/tcb.txt) ok, $(grep -c '^not ok' $W/tcb.txt) not ok"
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for cfg in "--temp 0" "--top-k 0 --top-p 1 --min-p 0 --temp 1.0"; do
  timeout 30 $B/hone run -m $M/q.gguf --device cuda:0 -p "Hello there, tell me a story." $cfg --seed 5 -n 256 --metrics > /dev/null 2> $W/run.txt
  el "run [$cfg] rc $?: $(grep -oE 'decode [0-9]+ tokens at [0-9.]+ tok/s' $W/run.txt)"
done
rm -f $M/q.gguf; el done
