#!/bin/bash
# Session 36, call 1: (1) test-cuda-backend, whose AWQ case now also loads the folder as the engine opens it
# (HONE_MODEL_OPEN_DEFER_REPACK: the upload makes the Q4Z rows chunk by chunk) and must give the eager load's logits
# bit for bit; (2) the 8B AWQ RTN export on the device (no documents needed since this session), its time and
# peak memory; (3) `hone bench` of that AWQ model: the host memory a GPU load keeps without the whole repacked copy,
# and the decode row; with the page release off (keep-file-pages.so) for the A/B of the file pages; (4) on an H200
# only: the BF16 and Q4_0 rows against the corrected probe and the BF16 step without attention
# (HONE_STEP_PROBE=attn: the bound on what folding attention away could give). Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc
B=$C/bin; M=/dev/shm/m; mkdir -p $M; KEEP=$C/keep-file-pages.so
MODEL=/tmp/smollm2-3l.gguf; xz -dc $C/model/*.gguf.xz > $MODEL
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
HONE_DEFAULT_MODEL=$MODEL timeout 240 $B/test-cuda-backend --verbose > $W/suite.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/suite.txt) ok, $(grep -c '^not ok' $W/suite.txt) not ok"
grep -E "^not ok|ERROR|RssFile|tiny AWQ" $W/suite.txt | head
bench () {   # tag model [preload]
  LD_PRELOAD=${3:-} timeout 90 $TV $B/hone bench -m $2 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$1.txt 2>&1
  el "bench $1 rc $?"; grep -E "decode \(tok|TTFT|memory \(MB\)|roofline|bytes per|Maximum resident|Elapsed" $W/bench-$1.txt
}
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/8b-bf16.gguf -q; el "gen-model bf16 rc $?"
case "$GPU" in *H200*) bench bf16 $M/8b-bf16.gguf ;; esac
timeout 200 $TV $B/hone quantize -m $M/8b-bf16.gguf --rtn -g 128 -f awq -o $M/8b-awq -q > $W/quantize.txt 2>&1
el "quantize awq rc $?: $(grep -E 'Maximum resident|Elapsed' $W/quantize.txt | tr -s ' ' | tr '\n' ' ')"
head -3 $W/quantize.txt
rm -f $M/8b-bf16.gguf
bench awq $M/8b-awq
bench awq-keep $M/8b-awq $KEEP
rm -rf $M/8b-awq
case "$GPU" in *H200*)
  timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/8b-q4_0.gguf -q; el "gen-model q4_0 rc $?"
  bench q4_0 $M/8b-q4_0.gguf; rm -f $M/8b-q4_0.gguf
  OUT=$W/ab ROUNDS=1 timeout 200 tests/cuda/run-step-ab.sh "BF16 Q4_0" "X=1" "HONE_STEP_PROBE=attn" > /dev/null 2>&1
  el "step ab rc $?"; cat $W/ab/ab.txt ;;
esac
xz -dc $C/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
for t in bf16 q4_0; do
  timeout 60 /tmp/hcb --type $t > $W/chain-$t.txt 2>&1; el "chain $t rc $?"; grep -v persistent $W/chain-$t.txt
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
