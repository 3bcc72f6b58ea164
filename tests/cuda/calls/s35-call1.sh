#!/bin/bash
# Session 35, call 1 (an H200): (1) test-cuda-backend with /cuda/host-pages (the upload lets the model file's pages
# go); (2) main's engine rows against the corrected read probe (BF16, Q4_0, Q4_1, AWQ g128, Llama-3-8B shape,
# `hone bench -p 64 -n 128 -r 3 -w 1`) with the host memory a GPU load keeps, each with the page release on and
# off (LD_PRELOAD of keep-file-pages.so: the same binaries with hone_file_pages_release a no-op); (3) the 8B AWQ
# export's time and peak memory. Carry .carry-release (bundle + the default model's cut + the shim).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc
B=$C/bin; M=/dev/shm/m; mkdir -p $M; KEEP=$C/keep-file-pages.so
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
HONE_DEFAULT_MODEL=$MODEL timeout 240 $B/test-cuda-backend --verbose > $W/suite.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/suite.txt) ok, $(grep -c '^not ok' $W/suite.txt) not ok"
grep -E "^not ok|ERROR|RssFile" $W/suite.txt | head
bench () {   # tag model [preload]
  LD_PRELOAD=${3:-} timeout 90 $TV $B/hone bench -m $2 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$1.txt 2>&1
  el "bench $1 rc $?"; grep -E "decode \(tok|TTFT|memory \(MB\)|roofline|bytes per|Maximum resident" $W/bench-$1.txt
}
# the most wanted rows first (the session's device time ran short): BF16 with and without the release, the AWQ
# export and its rows, then Q4_0 (Q4_1 left out)
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
bench bf16 $M/8b-bf16.gguf
bench bf16-keep $M/8b-bf16.gguf $KEEP
timeout 200 $TV $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q > $W/quantize.txt 2>&1
el "quantize awq rc $?: $(grep -E 'Maximum resident|Elapsed' $W/quantize.txt | tr -s ' ' | tr '\n' ' ')"
rm -f $M/8b-bf16.gguf
bench awq $M/8b-awq
bench awq-keep $M/8b-awq $KEEP
rm -rf $M/8b-awq
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/8b-q4_0.gguf -q; el "gen-model q4_0 rc $?"
bench q4_0 $M/8b-q4_0.gguf
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
