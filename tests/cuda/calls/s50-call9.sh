#!/bin/bash
# Session 50, call 9: the fused GEMM extended to GGUF Q4_0/Q4_1 (one PRMT a word lines the GGUF nibble order up
# with the same LOP3s; B takes the matching halves of X), so their prefill chunks up to 192 tokens skip the
# dequantization pass too. Checks: the fused GEMM's (Q4Z, Q4_0, Q4_1 against f64) alone, memcheck, racecheck; then
# run-release.sh's suite and checks steps (test-cuda-backend: CPU against CUDA on the default model's cut (Q4_1)
# and tiny models of every type; test-cuda-awq; every harness's --check). Benchmarks: AWQ prefill (as call 7, the
# AWQ path unchanged but for the B loads' order) and the engine's TTFT on a generated 8B Q4_0 at 16-256 tokens,
# default against HONE_W4_GEMM_MAX=0. Prediction: Q4_0 TTFT at 64 tokens 13.1 (session 49) -> ~6.5 ms, like AWQ's.
# Carry .carry-release (with the model cut).
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 100 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
OUT= timeout 150 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-racecheck.txt 2>&1
el "racecheck rc $?"; tail -1 $W/w4-gemm-racecheck.txt
OUT=$M/rel timeout 420 bash tests/cuda/run-release.sh suite checks > $W/release.txt 2>&1; el "run-release suite checks rc $?"
cp $M/rel/summary.txt $W/release-summary.txt 2>/dev/null; cat $W/release.txt | tail -30
OUT= timeout 150 $B/hone-w4-check --prefill-bench > $W/w4-prefill.txt 2>&1
el "--prefill-bench rc $?"; grep -E "prefill gemms|prefill +[0-9]+ tok" $W/w4-prefill.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen-model q4_0 rc $?"
for p in 16 64 128 192 256; do
  for v in X=1 HONE_W4_GEMM_MAX=0; do
    echo "q4_0 p=$p [$v]: $(env $v timeout 60 $B/hone bench -m $M/q.gguf --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
  done
done | tee $W/ttft-q4_0.txt
el done
