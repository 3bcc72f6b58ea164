#!/bin/bash
# Session 35, call 1 (an H200): main's engine rows against the corrected read probe (BF16, Q4_0, Q4_1, AWQ g128,
# Llama-3-8B shape, `hone bench -p 64 -n 128 -r 3 -w 1`), and the host memory a GPU load keeps (the bench's peak/steady
# memory, /usr/bin/time's max RSS, VmRSS/RssFile after the load). Carry .carry-release (bundle of HEAD).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc
B=$C/bin; M=/dev/shm/m; mkdir -p $M
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
for t in bf16 q4_0 q4_1; do
  timeout 120 $B/hone gen-model --shape llama3-8b --type $t -o $M/8b-$t.gguf -q; el "gen-model $t rc $?"
  timeout 90 $TV $B/hone bench -m $M/8b-$t.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$t.txt 2>&1
  el "bench $t rc $?"; grep -E "decode \(tok|TTFT|memory|roofline|bytes per|Maximum resident" $W/bench-$t.txt
  [ $t = bf16 ] || rm -f $M/8b-$t.gguf
done
timeout 150 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "quantize awq rc $?"
rm -f $M/8b-bf16.gguf
timeout 90 $TV $B/hone bench -m $M/8b-awq --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-awq.txt 2>&1
el "bench awq rc $?"; grep -E "decode \(tok|TTFT|memory|roofline|bytes per|Maximum resident" $W/bench-awq.txt
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
