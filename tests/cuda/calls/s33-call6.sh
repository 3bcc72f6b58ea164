#!/bin/bash
# Session 33, call 6: could the Q4_0 GEMVs take a 16-bit input (and so lose the norm/quantize launches)?
# hone-f16act-probe (checks against f64, then the 8B shapes alone over 10 launch shapes) next to the dp4a
# kernels on the same card (HONE_DECODE_TYPES=Q4_0 hone-cuda-check --gemv-sweep). Any card will do (a
# relative figure). Carry .carry-release (bundle.tar.xz, hone-f16act-probe.xz).
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
C=$PWD/.carry-release
xz -dc $C/hone-f16act-probe.xz > /tmp/hfp && chmod +x /tmp/hfp
timeout 120 /tmp/hfp > $W/f16act.txt 2>&1; el "probe rc $?"
grep -E "check|best|checks" $W/f16act.txt
[ -d $C/bin ] || tar xJf $C/bundle.tar.xz -C $C
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64
HONE_DECODE_TYPES=Q4_0 timeout 200 $C/bin/hone-cuda-check --gemv-sweep > $W/sweep.txt 2>&1; el "sweep rc $?"
grep -E "Q4_0" $W/sweep.txt | head -20
