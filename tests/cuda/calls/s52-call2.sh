#!/bin/bash
# Session 52, call 2: the built default after fused_by_default was removed (every type hone_k_w4_gemm_supports takes
# is fused for prefill chunks of up to 128 tokens, no environment variable): run-release.sh's suite step as CI's
# GPU half runs it (test-cuda-backend's Q8_0 / K-quant / mixed-parts prefills against the CPU's logits), and 8B Q8_0
# TTFT at 16 tokens, default against HONE_W4_GEMM_MAX=0 (the old path). Expected: the suite as in call 1 (23 + 7 ok),
# TTFT as call 1's fused and old rows (5.2 against 14.1 ms on an H100). Carry .carry-release (NO_MODEL=1 is enough).
set -u
. tests/cuda/calls/prelude.sh
OUT=$M/rel timeout 120 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1
el "run-release suite (the default) rc $?"; tail -4 $W/release.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q8_0 -o $M/q8.gguf -q; el "gen q8_0 rc $?"
ttft_ab "X=1 HONE_W4_GEMM_MAX=0" q8_0 $M/q8.gguf 16 | tee $W/ttft-q8.txt
rm -f $M/q8.gguf
el done
