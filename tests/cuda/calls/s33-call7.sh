#!/bin/bash
# Session 33, call 7: the two probes after they moved onto the shared headers (same figures expected as calls
# 4 and 6 on the same kind of card); then, on an H200 only, the engine rows against the corrected probe
# (as call 5). Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
C=$PWD/.carry-release
for p in hone-chain-bench hone-f16act-probe; do xz -dc $C/$p.xz > /tmp/$p && chmod +x /tmp/$p; done
timeout 60 /tmp/hone-chain-bench --type q4_0 > $W/chain.txt 2>&1; el "chain rc $?"; cat $W/chain.txt
timeout 60 /tmp/hone-f16act-probe > $W/f16act.txt 2>&1; el "f16act rc $?"; grep -E "best|checks|FAIL" $W/f16act.txt
case $name in *H200*) ;; *) echo "not an H200 ($name): no engine rows"; exit 0 ;; esac
OUT=$W/rel timeout 250 tests/cuda/run-release.sh engine > $W/rel.txt 2>&1; el "run-release engine rc $?"
grep -E "rc|roofline|decode \(tok|TTFT" $W/rel.txt | head -24
HONE_E2E_CARRY=.carry-release timeout 200 tests/cuda/run-awq-engine.sh bench > $W/awq.txt 2>&1; el "awq bench rc $?"
grep -E "decode \(tok|roofline|bytes per" $W/awq.txt
