#!/bin/bash
# Session 27, call 3 cut to the last minute of budget: the new dequantization kernels' checks, their bench,
# then the engine's Q4_0 TTFT with them (before: call 2b, 27.1 / 69.5 ms). B = .carry-release (branch 79c02e0).
set -u
B=$PWD/.carry-release; rm -rf $B/bin $B/lib; tar xJf $B/bundle.tar.xz -C $B
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT= timeout 20 $B/bin/hone-cuda-check --check-misc > $W/misc.txt 2>&1; el "check-misc rc $?: $(tail -1 $W/misc.txt)"
grep -E "^FAIL|block kernel" $W/misc.txt | head -8
OUT= timeout 20 $B/bin/hone-kquant-check --check > $W/kq.txt 2>&1; el "kquant check rc $?: $(tail -1 $W/kq.txt)"
grep -E "^FAIL|dequant" $W/kq.txt | head -8
OUT= timeout 15 $B/bin/hone-kquant-check --bench-dequant > $W/dq.txt 2>&1; el "bench-dequant rc $?"
grep -E "us, " $W/dq.txt
mkdir -p /dev/shm/m; timeout 30 $B/bin/hone gen-model --shape llama3-8b --type q4_0 -o /dev/shm/m/q.gguf > $W/gen.txt 2>&1; el "gen rc $?"
for p in "-p 2048 -n 16" "-p 64 -n 128"; do
  timeout 20 $B/bin/hone bench -m /dev/shm/m/q.gguf --device cuda:0 $p -r 3 -w 1 > $W/b-${p// /_}.txt 2>&1
  el "B $p rc $?: $(grep -E 'TTFT|decode \(tok' $W/b-${p// /_}.txt | tr -s ' ' | tr '\n' '|')"
done
