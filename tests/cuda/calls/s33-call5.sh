#!/bin/bash
# Session 33, call 5: on an H200 only (an H100 exits at once): the engine rows against the corrected read
# probe — BF16 and Q4_0 (run-release.sh engine), AWQ g128 (run-awq-engine.sh bench, last measured on an
# H200 in session 24). Carry .carry-release (bundle of f73f160 or later).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
case $name in *H200*) ;; *) echo "not an H200 ($name): nothing to do"; exit 0 ;; esac
OUT=$W/rel timeout 250 tests/cuda/run-release.sh engine > $W/rel.txt 2>&1; el "run-release engine rc $?"
grep -E "rc|roofline|decode \(tok|TTFT" $W/rel.txt | head -24
HONE_E2E_CARRY=.carry-release timeout 280 tests/cuda/run-awq-engine.sh bench > $W/awq.txt 2>&1; el "awq bench rc $?"
grep -E "decode \(tok|roofline|bytes per" $W/awq.txt
