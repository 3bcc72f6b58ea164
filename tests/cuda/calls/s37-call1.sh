#!/bin/bash
# Session 37, call 1: (1) the CUDA suites on main (session 36's d28f1f7: the upload's progress counts the bytes it
# reads; the AWQ case's deferred load asserts the bar ends at exactly 1) — session 36's unrun call 4; (2) on an H200
# only: the Llama-3-8B-shaped BF16, Q4_0 and AWQ g128 engine rows (`hone bench -p 64 -n 128`) against the corrected
# read probe, never measured on an H200 since session 33's probe fix. Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc HONE_SOURCE_ROOT=$PWD
B=$C/bin; M=/dev/shm/m; mkdir -p $M
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
for t in test-cuda-backend test-cuda-awq; do
  HONE_DEFAULT_MODEL=$MODEL timeout 200 $B/$t --verbose > $W/$t.txt 2>&1
  el "$t rc $?: $(grep -c '^ok' $W/$t.txt) ok, $(grep -c '^not ok' $W/$t.txt) not ok"; grep -E "^not ok|ERROR" $W/$t.txt | head
done
case "$GPU" in *H200*)
  bench () {   # tag model
    timeout 90 $TV $B/hone bench -m $2 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$1.txt 2>&1
    el "bench $1 rc $?"; grep -E "decode \(tok|TTFT|roofline|Maximum resident" $W/bench-$1.txt
  }
  timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
  bench bf16 $M/8b-bf16.gguf
  timeout 100 $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q; el "rtn awq rc $?"
  rm -f $M/8b-bf16.gguf
  bench awq $M/8b-awq; rm -rf $M/8b-awq
  timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/8b-q4_0.gguf -q; el "gen-model q4_0 rc $?"
  bench q4_0 $M/8b-q4_0.gguf ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
