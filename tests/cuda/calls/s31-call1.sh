#!/bin/bash
# Session 31, call 1: main after the input-prologue GEMVs were taken out (d4b65ee): the release checks
# (tests/cuda/run-release.sh suite checks; the sanitizer step covers kernels this change left alone), then the engine on a generated Q4_0 8B.
# Carry .carry-release (bundle.tar.xz and model/) and this script.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
OUT=$W/rel timeout 240 tests/cuda/run-release.sh suite checks > $W/rel.txt 2>&1; el "run-release rc $?"
tail -45 $W/rel.txt
C=$PWD/.carry-release; B=$C/bin
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
D=/dev/shm/m; mkdir -p $D
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $D/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
timeout 40 $B/hone bench -m $D/q.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/b.txt 2>&1
el "engine q4_0 rc $?: $(grep -E 'TTFT|decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
