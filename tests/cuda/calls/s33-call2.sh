#!/bin/bash
# Session 33, call 2: is `hone bench`'s read ceiling (hone_k_read_stream: grid-stride, 1 GiB, best of 10) below
# what the card reads? Call 1's one plain kernel over 4.2 GB read at 4,703 GB/s where the probe has said
# 4,435-4,496 on H200s. hone-chain-bench --ceiling: contiguous blocks of 4 KB..1 MB against the probe's
# pattern at several grids, over the Q4_0 step's 4.2 GB and BF16's 15 GB; then the probe itself via `hone
# bench` (fresh cache) on the cut default model. Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
C=$PWD/.carry-release
xz -dc $C/hone-chain-bench.xz > /tmp/hcb && chmod +x /tmp/hcb
for t in q4_0 bf16; do timeout 90 /tmp/hcb --type $t --ceiling 2>&1 | tee $W/ceil-$t.txt; el "ceiling $t rc $?"; done
[ -d $C/bin ] || tar xJf $C/bundle.tar.xz -C $C
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory
M=/dev/shm/s.gguf; xz -dc $(ls $C/model/*.gguf.xz | head -1) > $M
for r in 1 2 3; do
  XDG_CACHE_HOME=/tmp/xc$r timeout 60 $C/bin/hone bench -m $M --device cuda:0 -p 16 -n 16 -r 1 -w 0 2>&1 | grep -i roofline
done
el "probe done"
timeout 90 /tmp/hcb --type q4_0 2>&1 | tee $W/chain-q4_0-2.txt; el "chain again"
