#!/bin/bash
# Session 53, call 3 (after two refused starts, one call for all that is left): the built default with thresholds by
# type (4-bit types fused up to 192 tokens, Q8_0/Q6_K up to 128, parts up to their smallest) — run-release.sh's suite
# and the fused GEMM's checks; ncu (full set, SASS counters) of Q4_0's 64-token-tile kernel on gate|up 28672x4096 at
# n=128 (hone-kquant-check --bench-gemm: 103 launches a shape and n, Q4_0's q|k|v and o first, so launch 520 is
# gate|up n=128's); the AWQ prefill benchmark (call 2's file did not come back: at most 8 files return); then 8B TTFT
# by type at 160/192/256 tokens: the default against HONE_W4_GEMM_MAX=128 (dequantized above 128) and =256 (fused).
# Predicted (call 2's -8 to -15 % on the old kernel's call-1 rows): Q4_0 fused wins at 160-192 (~13.6 vs 14.3 ms at
# 192), loses at 256; Q8_0 and Q6_K fused lose from 160 (~17.8 vs 15.2 and ~17.9 vs 15.4 ms at 192); Q4_K_M's default
# at 192 at or below call 2's all-fused 13.8 ms. On an H200 the issues' goal rows first. Carry .carry-release (model in).
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows; rm -rf $M/q.gguf $M/awq; (cd $W && tar cJf goal-rows.tar.xz bench-*.txt && rm -f bench-*.txt) ;; esac
OUT=$M/rel timeout 150 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1; el "run-release suite rc $?"; tail -4 $W/release.txt
OUT= timeout 60 $B/hone-w4-check --gemm > $W/checks.txt 2>&1; el "--gemm rc $?"
OUT= timeout 120 $B/hone-kquant-check --check >> $W/checks.txt 2>&1; el "kquant --check rc $?"; grep -E "FAIL|passed" $W/checks.txt
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-pb-new.txt 2>&1; el "prefill-bench rc $?"; grep -E "one layer|^prefill  *[0-9]+ tok" $W/w4-pb-new.txt
for t in q4_0 q8_0 q6_k q4_k_m; do
  timeout 200 $B/hone gen-model --shape llama3-8b --type $t -o $M/t.gguf -q; el "gen $t rc $?"
  ttft_ab "X=1 HONE_W4_GEMM_MAX=128 HONE_W4_GEMM_MAX=256" $t $M/t.gguf 160 192 256 | tee -a $W/ttft-sweep.txt
  rm -f $M/t.gguf
done
OUT= timeout 200 ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
  -k regex:w4g_kernelILi8ELi2E --launch-skip 520 --launch-count 1 -o $M/n128 $B/hone-kquant-check --bench-gemm \
  > $M/ncu.log 2>&1
el "ncu rc $?"; tail -2 $M/ncu.log
ncu -i $M/n128.ncu-rep --page details > $W/ncu-n128-details.txt 2>&1
ncu -i $M/n128.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -9 > $W/ncu-n128-sass.csv.xz
grep -E "Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Warp Cycles Per Issued" $W/ncu-n128-details.txt | head -14
el done
