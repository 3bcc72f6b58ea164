#!/bin/bash
# Session 31, call 1 cut to a small budget: main after the input-prologue GEMVs were taken out (d4b65ee): the CUDA
# suites, hone-cuda-check --check (every GEMV form against f64), the Q4_0 8B engine.
# Carry .carry-release (bundle.tar.xz and model/) and this script.
set -u
C=$PWD/.carry-release; W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
B=$C/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
M=/tmp/$(basename $(ls $C/model/*.gguf.xz | head -1) .xz); xz -dc $C/model/*.gguf.xz > $M
HONE_DEFAULT_MODEL=$M timeout 100 $B/test-cuda-backend --verbose > $W/suite.txt 2>&1
el "test-cuda-backend rc $?: $(grep -c '^ok' $W/suite.txt) ok, $(grep -c '^not ok' $W/suite.txt) not ok"
grep "^not ok" $W/suite.txt | head
timeout 60 $B/test-cuda-awq --verbose > $W/suite-awq.txt 2>&1
el "test-cuda-awq rc $?: $(grep -c '^ok' $W/suite-awq.txt) ok, $(grep -c '^not ok' $W/suite-awq.txt) not ok"
OUT= timeout 150 $B/hone-cuda-check --check > $W/check.txt 2>&1; el "hone-cuda-check --check rc $?: $(tail -1 $W/check.txt)"
grep -E "^FAIL" $W/check.txt | head -8
D=/dev/shm/m; mkdir -p $D
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $D/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
timeout 40 $B/hone bench -m $D/q.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/b.txt 2>&1
el "engine q4_0 rc $?: $(grep -E 'TTFT|decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
