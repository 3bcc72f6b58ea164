#!/bin/bash
# Session 36, call 3: hone-chain-bench's new rows — every read block copies the first 16/32/64 KB of its slice into
# shared memory before its PDL wait (the SMs the previous kernel's tail leaves idle fetch more of the next kernel's
# bytes), reads only and the real structure, BF16 and Q4_0 shapes. Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
xz -dc $PWD/.carry-release/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
for t in bf16 q4_0; do
  timeout 90 /tmp/hcb --type $t > $W/chain-$t.txt 2>&1; el "chain $t rc $?"; grep -v persistent $W/chain-$t.txt
done
