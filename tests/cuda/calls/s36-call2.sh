#!/bin/bash
# Session 36, call 2: (1) compute-sanitizer memcheck + leak check over `hone run` of a 2-layer AWQ g64 folder on
# cuda:0 — the engine's deferred repack: chunks made in a pinned host buffer during the upload; (2) AWQ calibration
# of the Llama-3-8B shape on the GPU with `hone quantize`'s GPU defaults (128 × 512 tokens of the built-in set, g128),
# end to end: time (goal ≤ 5 min) and peak host memory after session 35's changes (layer loads let the file's
# pages go, the result two values a byte); (3) on an H200 only: the BF16 and Q4_0 engine rows against the
# corrected probe. Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc HONE_SOURCE_ROOT=$PWD
B=$C/bin; M=/dev/shm/m; mkdir -p $M
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
$B/hone gen-model --shape qwen3-0.6b --type f16 --layers 2 -o $M/m.gguf -q
HONE_AWQ_DEVICE=cpu timeout 60 $B/hone quantize -m $M/m.gguf --rtn -g 64 -f awq -o $M/m-awq64 -q
P="$(head -c 600 README.md)"
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --leak-check full --print-limit 10 $B/hone run \
  -m $M/m-awq64 --device cuda:0 -p "$P" -n 24 --temp 0 > $W/memcheck.txt 2>&1
el "memcheck rc $?"; tail -3 $W/memcheck.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
timeout 400 $TV $B/hone quantize -m $M/8b-bf16.gguf -o $M/8b-awq-cal > $W/calibrate.txt 2>&1
el "calibrate rc $?: $(grep -E 'Maximum resident|Elapsed' $W/calibrate.txt | tr -s ' ' | tr '\n' ' ')"
grep -v "^layer\|ETA" $W/calibrate.txt | grep -v "^	" | tail -6
rm -rf $M/8b-awq-cal
case "$GPU" in *H200*)
  bench () {   # tag model
    timeout 90 $TV $B/hone bench -m $2 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$1.txt 2>&1
    el "bench $1 rc $?"; grep -E "decode \(tok|TTFT|roofline|Maximum resident" $W/bench-$1.txt
  }
  bench bf16 $M/8b-bf16.gguf; rm -f $M/8b-bf16.gguf
  timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/8b-q4_0.gguf -q
  bench q4_0 $M/8b-q4_0.gguf ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
