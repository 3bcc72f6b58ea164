#!/bin/bash
# Session 33, call 1: the floor a decode step's launch structure sets (tests/cuda/hone-chain-bench.cu: plain
# read kernels with the 8B step's bytes and grids, with and without the step's small dependent kernels, PDL
# on/off), next to the real steps on the same card (run-step-ab.sh, one round); then main's release checks
# (run-release.sh suite checks). Carry .carry-release (bundle.tar.xz, model/, hone-chain-bench.xz).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
C=$PWD/.carry-release
xz -dc $C/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
for t in q4_0 awq bf16; do
  timeout 60 /tmp/hcb --type $t > $W/chain-$t.txt 2>&1; el "chain $t rc $?"; cat $W/chain-$t.txt
done
OUT=$W/ab ROUNDS=1 timeout 200 tests/cuda/run-step-ab.sh "Q4_0 AWQ BF16" "X=1" > /dev/null 2>&1; el "step ab rc $?"
cat $W/ab/ab.txt
OUT=$W/rel timeout 250 tests/cuda/run-release.sh suite checks > $W/rel.txt 2>&1; el "run-release rc $?"
tail -30 $W/rel.txt
