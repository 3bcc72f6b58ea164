#!/bin/bash
# Session 43, call 1 (H100 asked; an H200 came or not): where decode attention's time goes at 4k-16k keys (measurement only; no kernel change).
# Session 42 found decode attention is all of the long-context loss (Qwen3-0.6B BF16: 1,149 tok/s at -p 64, 751 at
# -p 2100; 1,276 without attention). Rows:
#   1. per-block timeline (trace build, carry .carry-trace) of the 8B Q4_0 step at 4,096 and 16,384 keys and BF16 at
#      4,096 (HONE_TRACE_CTX), summarized by tests/cuda/trace-summary.py --attention;
#   2. hone-attn-check --bench for shapes A, G, E (release build): µs a layer per context, split sizes, floor;
#   3. ncu (full set, source counters) of shape A's launch at 4k and 16k (hone-attn-check --profile).
# Predictions (written before the call): attention at 4k on the H100 ~18-20 us a layer on the step's path; its
# blocks' main loops end 4-12 us after the wait, the last block's combine adds ~3 us after the median exit; at 16k
# ~40 us, main loops dominate; ncu: short scoreboard + MIO throttle the top stalls at 16k, DRAM < 45 %.
set -u
. tests/cuda/calls/prelude.sh
# on an H200 first the issues' goal rows (none measured there since session 37: 263.4 / 557.7 / 654.4 tok/s BF16 / AWQ /
# Q4_0, predicted within +-2 %)
case "$GPU" in *H200*) goal_rows ;; esac
el "trace"
HONE_TRACE_CARRY=.carry-trace OUT=$W/trace bash tests/cuda/run-trace.sh \
  Q4_0@HONE_TRACE_CTX=4096 Q4_0@HONE_TRACE_CTX=16384 BF16@HONE_TRACE_CTX=4096 > $W/trace.log 2>&1
el "trace rc $?"
for f in $W/trace/traces.tar.xz; do
  mkdir -p $M/tr && tar xJf $f -C $M/tr 2>/dev/null
  for t in $(find $M/tr -name 'trace-*.csv*'); do
    [ "${t%.xz}" != "$t" ] && xz -dk "$t" && t=${t%.xz}
    echo "== $t" >> $W/attn-timeline.txt
    python3 tests/cuda/trace-summary.py "$t" --attention --timeline >> $W/attn-timeline.txt 2>&1
  done
done
el "harness bench"
timeout 240 $B/hone-attn-check --bench --shapes AGE > $W/attn-bench.txt 2>&1
el "bench rc $?"
if command -v ncu > /dev/null; then
  timeout 200 ncu --clock-control none --set full --import-source yes -k regex:attn3 --launch-skip 1 --launch-count 1 \
    -o $M/a4k $B/hone-attn-check --profile --shapes A > $W/ncu4k.log 2>&1
  el "ncu 4k rc $?"
  timeout 200 ncu --clock-control none --set full --import-source yes -k regex:attn3 --launch-skip 3 --launch-count 1 \
    -o $M/a16k $B/hone-attn-check --profile --shapes A > $W/ncu16k.log 2>&1
  el "ncu 16k rc $?"
  for r in a4k a16k; do
    ncu -i $M/$r.ncu-rep --page details > $W/ncu-$r-details.txt 2>&1
    ncu -i $M/$r.ncu-rep --page source --csv --print-source sass > $W/ncu-$r-sass.csv 2>&1 || true
    xz -T4 $W/ncu-$r-sass.csv
  done
fi
el done
