#!/bin/bash
# Session 33, call 3: the new read-ceiling probe (f73f160: 4 GiB in contiguous 64 KB slices) against
# hone-chain-bench --ceiling on the same card; then the three engine rows against it: BF16 and Q4_0
# (run-release.sh engine) and AWQ g128 (run-awq-engine.sh bench). Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
C=$PWD/.carry-release
xz -dc $C/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
timeout 60 /tmp/hcb --type q4_0 --ceiling 2>&1 | grep -E "one read|contiguous +(16|64) |1056 x 512" | tee $W/ceil.txt
[ -d $C/bin ] || tar xJf $C/bundle.tar.xz -C $C
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory
M=/dev/shm/s.gguf; xz -dc $(ls $C/model/*.gguf.xz | head -1) > $M
for r in 1 2 3; do
  XDG_CACHE_HOME=/tmp/xc$r timeout 60 $C/bin/hone bench -m $M --device cuda:0 -p 16 -n 16 -r 1 -w 0 2>&1 | grep -i "GB/s read"
done
el "probe done"
OUT=$W/rel timeout 250 tests/cuda/run-release.sh engine > $W/rel.txt 2>&1; el "run-release engine rc $?"
grep -E "rc|roofline|decode \(tok|TTFT" $W/rel.txt | head -24
HONE_E2E_CARRY=.carry-release timeout 280 tests/cuda/run-awq-engine.sh bench > $W/awq.txt 2>&1; el "awq bench rc $?"
tail -16 $W/awq.txt
