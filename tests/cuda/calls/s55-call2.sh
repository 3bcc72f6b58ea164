#!/bin/bash
# Session 55, call 2: the committed tree's release checks after session 54's split model (a3d188a; call 1 ran its
# --gemm checks and the TTFT table). On an H200 the goal rows first. Then run-release.sh suite (test-cuda-backend:
# the default model's cut and tiny models of every type, CPU against CUDA; test-cuda-awq) and compute-sanitizer
# memcheck over hone-w4-check --gemm (the fused GEMM with the model's splits, partials in the scratch).
# Expected: 23 ok / 7 ok, 0 not ok; 45 passed, 0 memcheck errors. Then TTFT at 512 / 1,024 / 2,048 tokens for the 8B
# BF16, Q4_0 and AWQ g128 models (the dequantizing path: expected ~6.5 ms over BF16 on an H100, the pass over 19 GB).
# Carry .carry-release and .carry-model.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) goal_rows ;; *) el "not an H200: $GPU (no goal rows)" ;; esac
mkdir -p .carry-release/model && cp .carry-model/*.gguf.xz .carry-release/model/
OUT=$W/rel timeout 420 tests/cuda/run-release.sh suite; el "run-release suite rc $?"
OUT= timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; grep -E "passed|ERROR SUMMARY" $W/w4-gemm-memcheck.txt | tail -2
[ $(( $(date +%s) - T0 )) -gt 330 ] && { el "no time left for the long TTFT rows"; exit 0; }
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q; el "gen bf16 rc $?"
ttft_ab X=1 bf16 $M/b.gguf 512 1024 2048 | tee $W/ttft-long.txt
rm -rf $M/awq; timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/awq -q; el "rtn awq rc $?"; rm -f $M/b.gguf
ttft_ab X=1 awq $M/awq 512 1024 2048 | tee -a $W/ttft-long.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen q4_0 rc $?"
ttft_ab X=1 q4_0 $M/q.gguf 512 1024 2048 | tee -a $W/ttft-long.txt
el done
