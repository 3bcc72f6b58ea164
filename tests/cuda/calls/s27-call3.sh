#!/bin/bash
# Session 27, call 3: the block dequantization kernels (Q8_0/Q4_0/Q4_1 and Q4_K/Q6_K -> 16-bit, prefill GEMM path).
# A = .carry-s25-branch (old kernels), B = .carry-release (new). Correctness first, then speed.
set -u
A=$PWD/.carry-s25-branch; B=$PWD/.carry-release
for d in $A $B; do rm -rf $d/bin $d/lib; tar xJf $d/bundle.tar.xz -C $d; done
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
LA=$A/lib:/usr/local/cuda/lib64; LB=$B/lib:/usr/local/cuda/lib64
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
LD_LIBRARY_PATH=$LB OUT= timeout 30 $B/bin/hone-cuda-check --check-misc > $W/misc.txt 2>&1; el "check-misc rc $?: $(tail -1 $W/misc.txt)"
grep -E "^FAIL|block kernel" $W/misc.txt | head -8
LD_LIBRARY_PATH=$LB OUT= timeout 40 $B/bin/hone-kquant-check --check > $W/kq.txt 2>&1; el "kquant check rc $?: $(tail -1 $W/kq.txt)"
grep -E "^FAIL" $W/kq.txt | head -5
LD_LIBRARY_PATH=$LB OUT= timeout 30 $B/bin/hone-kquant-check --bench-dequant > $W/dq.txt 2>&1; el "bench-dequant rc $?"
grep -E "us, " $W/dq.txt
mkdir -p /dev/shm/m
LD_LIBRARY_PATH=$LB timeout 60 $B/bin/hone gen-model --shape llama3-8b --type q4_0 -o /dev/shm/m/q.gguf > $W/gen.txt 2>&1; el "gen rc $?"
for v in A B; do
  if [ $v = A ]; then L=$LA; D=$A; else L=$LB; D=$B; fi
  for p in "-p 2048 -n 16" "-p 64 -n 128"; do
    LD_LIBRARY_PATH=$L timeout 40 $D/bin/hone bench -m /dev/shm/m/q.gguf --device cuda:0 $p -r 3 -w 1 > $W/b-$v-${p// /_}.txt 2>&1
    el "$v $p rc $?: $(grep -E 'TTFT|decode \(tok' $W/b-$v-${p// /_}.txt | tr -s ' ' | tr '\n' '|')"
  done
done
LD_LIBRARY_PATH=$LB timeout 60 compute-sanitizer --tool memcheck --print-limit 10 \
  $B/bin/test-cuda-backend -p /cuda/tiny/Q4_0 -p /cuda/tiny/Q4_1 -p /cuda/tiny/Q8_0 -p /cuda/tiny/Q4_K -p /cuda/tiny/Q6_K > $W/mc.txt 2>&1
el "memcheck tiny rc $?: $(grep -E 'ERROR SUMMARY' $W/mc.txt | tail -1) $(grep -c '^ok' $W/mc.txt) ok"
