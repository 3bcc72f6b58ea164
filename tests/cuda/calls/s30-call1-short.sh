#!/bin/bash
# Session 30, the cut of call 1 that fits what was left of the budget: the input prologue's checks, then the
# Q4_0 and AWQ steps with it off and on (same binary). Carry .carry-release and this script.
set -u
C=$PWD/.carry-release; W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
B=$C/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
OUT= timeout 60 $B/hone-cuda-check --check-qnorm > $W/qn.txt 2>&1; el "check-qnorm rc $?: $(tail -1 $W/qn.txt)"
grep -E "^FAIL" $W/qn.txt | head -8; grep -E "qnorm tiny" $W/qn.txt | cut -c1-150
mkdir -p $W/ab1 $W/ab2
ROUNDS=2 OUT=$W/ab1 timeout 120 tests/cuda/run-step-ab.sh "Q4_0" "X=1" "HONE_GEMV_QNORM=1" > /dev/null 2>&1
el "step A/B Q4_0"; cat $W/ab1/ab.txt
ROUNDS=2 OUT=$W/ab2 timeout 100 tests/cuda/run-step-ab.sh "AWQ" "X=1" "HONE_GEMV_QNORM=1" > /dev/null 2>&1
el "step A/B AWQ"; cat $W/ab2/ab.txt
