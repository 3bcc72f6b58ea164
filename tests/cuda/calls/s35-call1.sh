#!/bin/bash
# Session 35, call 1 (an H200): main's engine rows against the corrected read probe (BF16, Q4_0, Q4_1, AWQ g128,
# Llama-3-8B shape, `hone bench -p 64 -n 128 -r 3 -w 1`), and the host memory a GPU load keeps, before (libhoneall.so
# of 1a40760, carried as .carry-old/libhoneall.so.xz) and after the upload releases the file's pages (HEAD's bundle).
# Carry .carry-release/bundle.tar.xz and .carry-old (no model: the tree + carry must stay under 64 MiB).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
mkdir -p /tmp/oldlib && xz -dc .carry-old/libhoneall.so.xz > /tmp/oldlib/libhoneall.so || exit 1
export GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc
NEW=$C/lib:/usr/local/cuda/lib64; OLD=/tmp/oldlib:$NEW
B=$C/bin; M=/dev/shm/m; mkdir -p $M
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
bench () {   # lib-path tag model
  LD_LIBRARY_PATH=$1 timeout 90 $TV $B/hone bench -m $3 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$2.txt 2>&1
  el "bench $2 rc $?"; grep -E "decode \(tok|TTFT|memory \(MB\)|roofline|bytes per|Maximum resident" $W/bench-$2.txt
}
for t in bf16 q4_0 q4_1; do
  LD_LIBRARY_PATH=$NEW timeout 120 $B/hone gen-model --shape llama3-8b --type $t -o $M/8b-$t.gguf -q; el "gen-model $t rc $?"
  bench $NEW $t-new $M/8b-$t.gguf
  [ $t = q4_1 ] || bench $OLD $t-old $M/8b-$t.gguf
  [ $t = bf16 ] || rm -f $M/8b-$t.gguf
done
LD_LIBRARY_PATH=$NEW timeout 150 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "quantize awq rc $?"
rm -f $M/8b-bf16.gguf
bench $NEW awq-new $M/8b-awq
bench $OLD awq-old $M/8b-awq
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
