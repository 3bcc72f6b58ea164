#!/bin/bash
# Session 53, call 3: where the fused GEMM's k step waits now (call 2: ~15 % faster at 64-128 tokens, yet still
# ~230 TFLOP/s whatever n >= 64, at 2 warps a scheduler). ncu (full set, SASS counters) of Q4_0's 64-token-tile kernel
# (w4g_kernel<8, Q4_0>) on gate|up 28672x4096 at n=128 and n=64 in hone-kquant-check --bench-gemm (103 launches a
# shape and n; Q4_0's q|k|v and o come first: launch 515 is gate|up n=128's first, 412 its n=64's), and the AWQ
# prefill benchmark on this build (call 2's file did not come back: at most 8 files return). On an H200 the issues'
# goal rows first (decode: unchanged by this session's kernel work). Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -rf $M/q.gguf $M/awq ;; esac   # the issues' rows first, should an H200 come
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-pb-new.txt 2>&1; el "prefill-bench rc $?"; grep "one layer" $W/w4-pb-new.txt
for spec in "n128 520" "n64 420"; do
  set -- $spec
  OUT= timeout 200 ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
    -k regex:w4g_kernelILi8ELi2E --launch-skip $2 --launch-count 1 -o $M/$1 $B/hone-kquant-check --bench-gemm \
    > $M/ncu-$1.log 2>&1
  el "ncu $1 rc $?"; tail -3 $M/ncu-$1.log
  ncu -i $M/$1.ncu-rep --page details > $W/ncu-$1-details.txt 2>&1
  ncu -i $M/$1.ncu-rep --page source --csv --print-source sass > $M/ncu-$1-sass.csv 2>&1 || true
  xz -9 -c $M/ncu-$1-sass.csv > $W/ncu-$1-sass.csv.xz
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Waves Per SM|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Warp Cycles Per Issued" $W/ncu-$1-details.txt | head -20
done
el done
