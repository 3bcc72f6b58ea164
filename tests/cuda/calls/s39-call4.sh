#!/bin/bash
# Session 39, call 4: call 2 again after the merges became a warp a pair (one barrier a level) and the draw multiplies by
# reciprocals; plus call 3's stops. Against the argmax + chain_many_kernel form (HONE_SAMPLE_CHAIN_OLD=1, same binary): checks, sanitizer, the samplers'
# µs, the engine with the chat's sampling on the 8B Q4_0 and Qwen3-0.6B BF16 shapes. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 90 $B/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep '^checks:' $W/cs.txt)"; grep -E "^FAIL|^  chain|not compared" $W/cs.txt | head -8
OUT= timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/mc.txt 2>&1
el "memcheck check-sample-rows rc $?: $(grep 'ERROR SUMMARY' $W/mc.txt | tail -1)"
for r in 1 2; do for v in old new; do
  o=0; [ $v = old ] && o=1
  HONE_SAMPLE_CHAIN_OLD=$o OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sb-$v-$r.txt 2>&1
  el "bench-sample $v rc $?"; grep -E "chain" $W/sb-$v-$r.txt | grep -v "one block" | sed 's/  */ /g'
done; done
for pr in 1 2 3 4; do
  HONE_CHAIN_TREE_PROBE=$pr OUT= timeout 60 $B/hone-cuda-check --bench-sample > $W/sp-$pr.txt 2>&1
  el "probe $pr rc $?"; grep -E "CLI default\)|no top-k" $W/sp-$pr.txt | sed 's/  */ /g'
done
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type bf16 -o $M/s.gguf > /dev/null 2>&1; el "gen qwen3-0.6b rc $?"
for r in 1 2; do for m in q s; do for v in old new; do for s in --sample ""; do
  [ -z "$s" ] && [ $v = old ] && continue
  o=0; [ $v = old ] && o=1
  HONE_SAMPLE_CHAIN_OLD=$o timeout 60 $B/hone bench -m $M/$m.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 $s > $W/b.txt 2>&1
  el "$m $v ${s:-greedy} rc $?: $(grep -E 'decode \(tok' $W/b.txt | tr -s ' ')"
done; done; done; done
rm -f $M/q.gguf $M/s.gguf
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/test-cuda-backend --verbose > $W/tcb.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/tcb.txt) ok, $(grep -c '^not ok' $W/tcb.txt) not ok"; grep -E "^not ok" $W/tcb.txt | head
OUT= timeout 100 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"
el done
