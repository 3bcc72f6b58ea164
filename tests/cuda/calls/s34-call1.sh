#!/bin/bash
# Session 34, call 1 (any card): (1) the CPU backend's decode against its thread count on the GPU host's
# CPUs (a Qwen3-0.6B-shaped Q4_0 model written there: `hone gen-model`), to settle whether "one thread per
# logical CPU" is the right default where CPUs are SMT siblings; (2) the two device probes rebuilt from
# 22558eb (shared headers) run once; (3) on an H200 only: the engine rows (BF16, Q4_0) against the corrected
# read probe. Carry .carry-release (bundle of 22558eb).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L3)" ; nproc
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc
B=$C/bin; M=/dev/shm/m; mkdir -p $M
timeout 60 $B/hone gen-model --shape qwen3-0.6b --type q4_0 -o $M/q06-q4_0.gguf -q; el "gen-model rc $?"
for t in 1 2 4 8 12 16 0; do
  timeout 40 $B/hone bench -m $M/q06-q4_0.gguf --device cpu -t $t -p 64 -n 64 -r 3 -w 1 > $W/cpu-t$t.txt 2>&1
  el "cpu -t $t rc $?: $(grep -E '^(prefill|decode) \(tok' $W/cpu-t$t.txt | tr -s ' ' | tr '\n' ' ') $(grep -E '^device' $W/cpu-t$t.txt)"
done
grep roofline $W/cpu-t0.txt | head -2
for p in hone-chain-bench hone-f16act-probe; do xz -dc $C/$p.xz > /tmp/$p && chmod +x /tmp/$p; done
timeout 60 /tmp/hone-chain-bench > $W/chain.txt 2>&1; el "chain-bench rc $?"; tail -5 $W/chain.txt
timeout 60 /tmp/hone-f16act-probe > $W/f16act.txt 2>&1; el "f16act-probe rc $?"; tail -5 $W/f16act.txt
case $name in *H200*) ;; *) echo "not an H200 ($name): no engine rows"; exit 0 ;; esac
OUT=$W/rel timeout 300 tests/cuda/run-release.sh engine > $W/rel.txt 2>&1; el "run-release engine rc $?"
grep -E "rc|roofline|decode \(tok|TTFT" $W/rel.txt | head -24
