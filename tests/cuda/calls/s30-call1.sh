#!/bin/bash
# Session 30, call 1: one-token dp4a GEMVs that normalize and quantize their own input (HONE_GEMV_QNORM)
# (and W4A16's normalized pack) against the RMSNorm / pack launch, same binary: checks, step A/B, the CUDA
# suites with it on, the engine, memcheck (in the order the budget should cut them).
# Carry .carry-release (bundle.tar.xz and model/) and this script.
set -u
C=$PWD/.carry-release; W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/xc
B=$C/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
OUT= timeout 60 $B/hone-cuda-check --check-qnorm > $W/qn.txt 2>&1; el "check-qnorm rc $?: $(tail -1 $W/qn.txt)"
grep -E "^FAIL" $W/qn.txt | head -8; grep -E "qnorm tiny" $W/qn.txt | cut -c1-150
mkdir -p $W/ab1 $W/ab2
ROUNDS=2 OUT=$W/ab1 timeout 200 tests/cuda/run-step-ab.sh "Q4_0" "X=1" "HONE_GEMV_QNORM=1" "HONE_GEMV_QNORM=gu" \
  "HONE_GEMV_QNORM=1 HONE_GEMV_SHAPE=gu=12" > /dev/null 2>&1
el "step A/B Q4_0"; cat $W/ab1/ab.txt
ROUNDS=2 OUT=$W/ab2 timeout 150 tests/cuda/run-step-ab.sh "AWQ Q8_0" "X=1" "HONE_GEMV_QNORM=1" > /dev/null 2>&1
el "step A/B AWQ Q8_0"; cat $W/ab2/ab.txt
M=/tmp/$(basename $(ls $C/model/*.gguf.xz | head -1) .xz); xz -dc $C/model/*.gguf.xz > $M
HONE_GEMV_QNORM=1 HONE_DEFAULT_MODEL=$M timeout 120 $B/test-cuda-backend --verbose > $W/suite.txt 2>&1
el "test-cuda-backend QNORM=1 rc $?: $(grep -c '^ok' $W/suite.txt) ok, $(grep -c '^not ok' $W/suite.txt) not ok"
grep "^not ok" $W/suite.txt | head
HONE_GEMV_QNORM=1 timeout 60 $B/test-cuda-awq --verbose > $W/suite-awq.txt 2>&1
el "test-cuda-awq QNORM=1 rc $?: $(grep -c '^ok' $W/suite-awq.txt) ok, $(grep -c '^not ok' $W/suite-awq.txt) not ok"
grep "^not ok" $W/suite-awq.txt | head
D=/dev/shm/m; mkdir -p $D
timeout 60 $B/hone gen-model --shape llama3-8b --type q4_0 -o $D/q.gguf > /dev/null 2>&1; el "gen q4_0 rc $?"
for v in 0 1; do
  HONE_GEMV_QNORM=$v timeout 30 $B/hone bench -m $D/q.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/b.txt 2>&1
  el "q4_0 QNORM=$v rc $?: $(grep -E 'TTFT|decode \(tok|roofline' $W/b.txt | tr -s ' ' | tr '\n' '|')"
done
rm -f $D/q.gguf
OUT= timeout 90 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-cuda-check --check-qnorm > $W/qn-mem.txt 2>&1
el "memcheck check-qnorm: $(grep 'ERROR SUMMARY' $W/qn-mem.txt | tail -1)"
