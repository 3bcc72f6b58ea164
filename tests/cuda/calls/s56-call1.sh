#!/bin/bash
# Session 56, call 1: the new /cuda/prefill-ahead check (test-cuda-backend: HONE_PREFILL_AHEAD=1's second buffer in
# the workspace, three 512-token prefills of the default model's cut against the default path and the CPU) through
# run-release.sh suite — expected 24 ok / 7 ok, 0 not ok; then the decode rows (goal_rows + Q4_1): on an H200 the
# issues' goal rows, on an H100 a refresh of the README's H100 table (session 49: BF16 196.4, Q4_0 547.8, AWQ 467.2
# tok/s at -p 64; decode unchanged since); then TTFT of the AWQ g128 export at 512 / 1,024 tokens with and without
# HONE_PREFILL_AHEAD=1 (session 55 measured Q4_0 only: 18.7 -> 17.9 ms at 512). Carry .carry-release and .carry-model.
set -u
. tests/cuda/calls/prelude.sh
mkdir -p .carry-release/model && cp .carry-model/*.gguf.xz .carry-release/model/
OUT=$W/rel timeout 300 tests/cuda/run-release.sh suite; el "run-release suite rc $?"
grep -E "prefill-ahead|workspace|ahead run" $W/rel/suite.txt | head -8
goal_rows
[ $(( $(date +%s) - T0 )) -gt 250 ] && { el "no time left for Q4_1"; exit 0; }
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_1 -o $M/q1.gguf -q; el "gen-model q4_1 rc $?"
bench q4_1 $M/q1.gguf; rm -f $M/q1.gguf
[ $(( $(date +%s) - T0 )) -gt 280 ] && { el "no time left for the AWQ ahead rows"; exit 0; }
ttft_ab "X=1 HONE_PREFILL_AHEAD=1" awq $M/awq 512 1024 | tee $W/ttft-awq-ahead.txt
el done
