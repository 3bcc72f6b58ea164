#!/bin/bash
# Session 38, call 1: an L2 streamer beside the decode chain (hone-chain-bench's new rows): one warp on a parallel
# graph branch keeps bulk L2 prefetches issued up to a window past the read kernels' frontier, so the memory stays
# busy through the launch boundaries and the small kernels. Q4_0, BF16 and AWQ chains, each row against the same
# chain without it (first and last row of each block). Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
xz -dkf $C/hone-chain-bench.xz
for t in q4_0 bf16 awq q4_0; do
  timeout 120 $C/hone-chain-bench --type $t > $W/chain-$t.txt 2>&1; el "chain $t rc $?"
  grep -E "^device|one read kernel|L2 streamer|no streamer" $W/chain-$t.txt
done
el done
