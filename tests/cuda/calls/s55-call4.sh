#!/bin/bash
# Session 55, call 4: HONE_PREFILL_AHEAD, the dequantization pass of a quantized prefill (past the fused GEMM's range)
# run one matrix ahead on a side stream (1: the main stream's priority, 2: a higher one), against the default, same
# binary. Prediction written before the call: small or no gain — cuBLASLt's Hopper GEMMs are expected to hold a whole
# SM's registers, so the dequantizing blocks get SMs only in wave tails and beside attention / norm / RoPE launches:
# TTFT Q4_0 at 2,048 tokens 55.4 -> 53-55 ms, at 512 tokens 19.0 -> 18-19 ms; slower if the GEMMs are persistent
# (a CTA kept off its SM by dequantizing blocks delays the whole GEMM). Correctness: the generated ids of a greedy
# ~1,200-token-prompt run equal with the knob off (twice) and on, on Q4_0 and Q4_K_M (q|k|v of parts). Cut to fit
# the budget left after refused starts: variant 2 (HONE_PREFILL_AHEAD=2), the AWQ rows and 1,024 tokens are not run.
# Carry .carry-release (built with the knob). Run at 22:18 UTC on an H100; results in RESULTS-cuda.md "Session 55".
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
P=$(for i in $(seq 28); do printf 'the quick brown fox jumps over the lazy dog '; done)
ids () {   # tag model: the generated ids of knob off, off, 1
  for v in X=1 X=2 HONE_PREFILL_AHEAD=1; do
    env $v timeout 60 $B/hone run -m $2 --device cuda:0 -p "$P" -n 24 --temp 0 --json > $M/r.json 2> $M/r.err
    echo "$1 [$v] rc $?: $(tr -d ' \n' < $M/r.json | grep -o '"prompt_tokens":\[[^]]*\]' | tr -cd , | wc -c) prompt ids, $(tr -d ' \n' < $M/r.json | grep -o '"generated_tokens":\[[^]]*\]')"
    grep -iE "error|warn" $M/r.err | head -2
  done
}
V="X=1 HONE_PREFILL_AHEAD=1"
[ -f $M/q.gguf ] || { timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen q4_0 rc $?"; }
ttft_ab "$V" q4_0 $M/q.gguf 512 2048 | tee $W/ttft.txt
ids q4_0 $M/q.gguf | tee $W/ids.txt; rm -f $M/q.gguf
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/k.gguf -q; el "gen q4_k_m rc $?"
ids q4_k_m $M/k.gguf | tee -a $W/ids.txt
ttft_ab "$V" q4_k_m $M/k.gguf 2048 | tee -a $W/ttft.txt
el done
