#!/bin/bash
# Session 28, call 2: the sampled chain's last block without serial L2 round trips (registers, a parallel
# bucket pick) against main's (bundle-main.tar.xz, 7d8c6a0); the Q4 block dequantization as the default.
# Carry .carry-release/bundle.tar.xz, .carry-release/bundle-main.tar.xz and this script.
set -u
C=$PWD/.carry-release; W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
for v in new main; do mkdir -p $C/$v; f=$C/bundle.tar.xz; [ $v = main ] && f=$C/bundle-main.tar.xz; tar xJf $f -C $C/$v; done
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
N=$C/new/bin; M=$C/main/bin; LN=$C/new/lib:/usr/local/cuda/lib64; LM=$C/main/lib:/usr/local/cuda/lib64
for m in 0 1; do
  LD_LIBRARY_PATH=$LN HONE_SAMPLE_CHAIN_MANY=$m OUT= timeout 60 $N/hone-cuda-check --check-sample > $W/cs$m.txt 2>&1
  el "check-sample MANY=$m rc $?: $(grep '^checks:' $W/cs$m.txt)"; grep -E "^FAIL|^  chain" $W/cs$m.txt | head -6
done
LD_LIBRARY_PATH=$LN OUT= timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $N/hone-cuda-check --check-sample-rows > $W/mc.txt 2>&1
el "memcheck check-sample-rows: $(grep 'ERROR SUMMARY' $W/mc.txt | tail -1)"
for r in 1 2; do for v in main new; do
  L=$LM; B=$M; [ $v = new ] && L=$LN && B=$N
  LD_LIBRARY_PATH=$L OUT= timeout 40 $B/hone-cuda-check --bench-sample > $W/sb-$v.txt 2>&1
  el "bench-sample $v rc $?"; grep -E "chain" $W/sb-$v.txt | sed 's/  */ /g'
done; done
LD_LIBRARY_PATH=$LN HONE_SAMPLE_CHAIN_MANY=1 OUT= timeout 60 $N/hone-cuda-check --bench-sample > $W/sb-many.txt 2>&1
el "bench-sample new MANY=1 rc $?"; grep -E "chain" $W/sb-many.txt | sed 's/  */ /g'
D=/dev/shm/m; mkdir -p $D
LD_LIBRARY_PATH=$LN timeout 60 $N/hone gen-model --shape llama3-8b --type q4_0 -o $D/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for r in 1 2; do for v in main new; do for s in --sample ""; do
  L=$LM; B=$M; [ $v = new ] && L=$LN && B=$N
  LD_LIBRARY_PATH=$L timeout 40 $B/hone bench -m $D/q.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 $s > $W/b.txt 2>&1
  el "$v q4_0 ${s:-greedy} rc $?: $(grep -E 'TTFT|decode \(tok' $W/b.txt | tr -s ' ' | tr '\n' '|')"
done; done; done
LD_LIBRARY_PATH=$LN timeout 40 $N/hone bench -m $D/q.gguf --device cuda:0 -p 2048 -n 16 -r 3 -w 1 > $W/b.txt 2>&1
el "new q4_0 default -p 2048 rc $?: $(grep -E 'TTFT|decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
rm -f $D/q.gguf
LD_LIBRARY_PATH=$LN OUT= timeout 150 $N/hone-cuda-check --check > $W/check.txt 2>&1; el "check rc $?: $(tail -1 $W/check.txt)"
grep -E "^FAIL" $W/check.txt | head -5
LD_LIBRARY_PATH=$LN timeout 150 $N/test-cuda-backend --verbose > $W/suite.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/suite.txt) ok, $(grep -c '^not ok' $W/suite.txt) not ok"; grep "^not ok" $W/suite.txt | head
LD_LIBRARY_PATH=$LN OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $N/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"
