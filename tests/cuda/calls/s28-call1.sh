#!/bin/bash
# Session 28, call 1 (prepared in session 27): the Q4_0/Q4_1 block dequantization's value checks on the GPU,
# then the whole suite with it on, memcheck, and the Q4_0 TTFT both ways. Carry .carry-release/bundle.tar.xz
# (built from main at the end of session 27) and this script.
set -u
B=$PWD/.carry-release; rm -rf $B/bin $B/lib; tar xJf $B/bundle.tar.xz -C $B
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT= timeout 30 $B/bin/hone-cuda-check --check-misc > $W/misc.txt 2>&1; el "check-misc rc $?: $(tail -1 $W/misc.txt)"
grep -E "^FAIL|dequant" $W/misc.txt | head -20
OUT= timeout 30 compute-sanitizer --tool memcheck --print-limit 10 $B/bin/hone-cuda-check --check-misc > $W/misc-mc.txt 2>&1
el "memcheck check-misc: $(grep 'ERROR SUMMARY' $W/misc-mc.txt | tail -1)"
OUT= timeout 20 $B/bin/hone-kquant-check --bench-dequant > $W/dq.txt 2>&1; el "bench-dequant rc $?"; grep "us, " $W/dq.txt
for q in 0 1; do
  HONE_DEQUANT_Q4_BLOCKS=$q timeout 60 $B/bin/test-cuda-backend -p /cuda/tiny/Q4_0 -p /cuda/tiny/Q4_1 -p /cuda/tiny/Q8_0 \
    -p /cuda/mixed/Q8_0-BF16-Q4_1 --verbose > $W/tiny-$q.txt 2>&1
  el "tiny Q4 blocks=$q rc $?: $(grep -c '^ok' $W/tiny-$q.txt) ok, $(grep -c '^not ok' $W/tiny-$q.txt) not ok"
  grep -E "prefill" $W/tiny-$q.txt | head -8
done
mkdir -p /dev/shm/m; timeout 60 $B/bin/hone gen-model --shape llama3-8b --type q4_0 -o /dev/shm/m/q.gguf > $W/gen.txt 2>&1
for q in 0 1 0 1; do for p in "-p 2048 -n 16" "-p 64 -n 128"; do
  HONE_DEQUANT_Q4_BLOCKS=$q timeout 40 $B/bin/hone bench -m /dev/shm/m/q.gguf --device cuda:0 $p -r 3 -w 1 > $W/b.txt 2>&1
  el "blocks=$q $p rc $?: $(grep -E 'TTFT|decode \(tok' $W/b.txt | tr -s ' ' | tr '\n' '|')"
done; done
grep -h roofline $W/b.txt; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv
OUT= timeout 60 $B/bin/hone-cuda-check --check-sample > $W/cs.txt 2>&1; el "check-sample rc $?: $(tail -1 $W/cs.txt)"
OUT= timeout 200 compute-sanitizer --tool racecheck --print-limit 10 $B/bin/hone-cuda-check --check-sample > $W/cs-rc.txt 2>&1
el "racecheck check-sample rc $?: $(grep -E 'RACECHECK SUMMARY|hazard' $W/cs-rc.txt | tail -2 | tr '\n' '|')"; tail -5 $W/cs-rc.txt
