#!/bin/bash
# Session 50, call 3: why the fused W4A16 GEMM streams at only ~1 TB/s of packed weights at 16 tokens (call 2:
# kernel 2's deeper pipeline gained 4 %, so the loads' latency is not what binds). ncu (full set, SASS source
# counters) of kernel 2's gate|up launch (28672x4096) at 16 and at 64 tokens in hone-w4-check --prefill-bench
# (launch 1236 and 1442 of w4g_kernel_sw: 103 launches a shape, gate|up n=16 the 13th shape).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
for spec in "n16 1236" "n64 1442"; do
  set -- $spec
  timeout 200 ncu --clock-control none --set full --import-source yes -k regex:w4g_kernel_sw --launch-skip $2 \
    --launch-count 1 -o $M/$1 $B/hone-w4-check --prefill-bench > $W/ncu-$1.log 2>&1
  el "ncu $1 rc $?"
  ncu -i $M/$1.ncu-rep --page details > $W/ncu-$1-details.txt 2>&1
  ncu -i $M/$1.ncu-rep --page source --csv --print-source sass > $W/ncu-$1-sass.csv 2>&1 || true
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Grid Size|Waves Per SM|Issue Slots Busy|No Eligible|L2 Hit|Compute \(SM\) Throughput" $W/ncu-$1-details.txt | head -24
done
el done
