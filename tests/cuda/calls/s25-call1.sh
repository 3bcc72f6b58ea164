#!/bin/bash
# Session 25+, call 1: the many-block sampler chain (branch wip/s24-sample-chain-many, bundle in
# .carry-s25-branch) against main (bundle in .carry-release). Carry both bundle.tar.xz and this script.
set -u
M=.carry-release; N=.carry-s25-branch
for d in $M $N; do rm -rf $d/bin $d/lib; tar xJf $d/bundle.tar.xz -C $d; done
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
LM=$PWD/$M/lib:/usr/local/cuda/lib64; LN=$PWD/$N/lib:/usr/local/cuda/lib64
W=$(mktemp -d); T0=$(date +%s)
el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
save () { tar czf $OUT/all.tgz -C $W .; }
left () { echo $(( ${1} - ($(date +%s) - T0) )); }
# 1. the sampler checks alone (branch), the sampler bench twice
LD_LIBRARY_PATH=$LN OUT= timeout 90 $N/bin/hone-cuda-check --check-sample > $W/cs.txt 2>&1
el "check-sample rc $?: $(grep -E '^checks:' $W/cs.txt)"
grep -E "FAIL|  chain|boundary" $W/cs.txt | head -20
for r in 1 2; do
  LD_LIBRARY_PATH=$LN OUT= timeout 90 $N/bin/hone-cuda-check --bench-sample > $W/sb-$r.txt 2>&1; el "bench-sample rc $?"
done
grep "sample bench" $W/sb-1.txt | sed 's/  */ /g'; grep "sample bench" $W/sb-2.txt | grep -o "[0-9.]* us a call" | tr '\n' ' '; echo
save
# 2. the engine: a random Llama-3-8B Q4_0, hone bench with the chat's sampling and greedy, main and branch alternating
mkdir -p /dev/shm/m
LD_LIBRARY_PATH=$LM timeout 120 $M/bin/hone gen-model --shape llama3-8b --type q4_0 -o /dev/shm/m/q4_0.gguf > $W/gen.txt 2>&1
el "gen rc $?"
for v in main branch main branch; do
  if [ $v = main ]; then L=$LM; D=$M; else L=$LN; D=$N; fi
  for mode in --sample greedy; do
    a=$mode; [ $a = greedy ] && a=
    LD_LIBRARY_PATH=$L timeout 60 $D/bin/hone bench -m /dev/shm/m/q4_0.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 $a \
      > $W/bench-$v-$mode.txt 2>&1
    el "q4_0 $v $mode rc $?: $(grep -E 'decode \(tok|roofline: [0-9]|sampling' $W/bench-$v-$mode.txt | tr -s ' ' | tr '\n' '|')"
  done
done
rm -f /dev/shm/m/q4_0.gguf
save
# 3. memcheck of the sampler checks, the whole --check, racecheck of the sampler checks (what time is left)
LD_LIBRARY_PATH=$LN OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 10 $N/bin/hone-cuda-check --check-sample \
  > $W/san-mem.txt 2>&1
el "memcheck rc $?: $(grep -E 'ERROR SUMMARY' $W/san-mem.txt | tail -1)"
save
LD_LIBRARY_PATH=$LN OUT= timeout 150 $N/bin/hone-cuda-check --check > $W/check.txt 2>&1
el "check rc $?: $(grep -E '^checks:' $W/check.txt | tail -1)"
grep -E "FAIL" $W/check.txt | head
save
t=$(left 570); [ $t -gt 20 ] && {
  LD_LIBRARY_PATH=$LN OUT= timeout $t compute-sanitizer --tool racecheck --print-limit 10 $N/bin/hone-cuda-check --check-sample \
    > $W/san-race.txt 2>&1
  el "racecheck rc $? (limit ${t}s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-race.txt | tail -1)"
}
save
