#!/bin/bash
# Session 33, call 4: the floor of the persistent design (one cooperative launch, grid barriers between the
# phases, next-phase loads issued before each barrier, norm/quantize done by every block) next to the
# per-launch chain, for Q4_0, AWQ (F16 lm_head) and BF16. Carry .carry-release (hone-chain-bench.xz).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
xz -dc .carry-release/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
for t in q4_0 awq bf16; do timeout 90 /tmp/hcb --type $t 2>&1 | tee $W/chain-$t.txt; el "chain $t rc $?"; done
