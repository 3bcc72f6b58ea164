#!/bin/bash
# Session 52, call 1: s51-call2.sh's steps reordered for a short budget (session 52 began with ~1,800 s and spent
# most of it in refused starts): the checks that decide whether prefill fuses Q8_0 / Q4_K / Q6_K / parts by default
# first, then their TTFT against the default, then (H200 only) the issues' goal rows, then the memcheck. Every step
# writes into $OUT as it goes, so a call cut by its time limit still brings back what it finished. Same carry
# (.carry-release, with the model cut) and the same predictions as s51-call2.sh.
set -u
. tests/cuda/calls/prelude.sh
OUT= timeout 60 $B/hone-w4-check --gemm > $W/w4-gemm.txt 2>&1; el "--gemm rc $?"; grep -E "FAIL|passed" $W/w4-gemm.txt
OUT= timeout 120 $B/hone-kquant-check --check > $W/kq-check.txt 2>&1; el "kquant --check rc $?"; grep -E "FAIL|passed" $W/kq-check.txt
HONE_W4_GEMM_TYPES=all OUT=$M/rel timeout 120 bash tests/cuda/run-release.sh suite > $W/release.txt 2>&1
el "run-release suite (all types fused) rc $?"; tail -4 $W/release.txt
OUT= timeout 90 $B/hone-kquant-check --bench-gemm > $W/kq-gemm.txt 2>&1; el "kquant --bench-gemm rc $?"; grep -E "fused|FAIL" $W/kq-gemm.txt
timeout 120 $B/hone gen-model --shape llama3-8b --type q8_0 -o $M/q8.gguf -q; el "gen q8_0 rc $?"
ttft_ab "HONE_W4_GEMM_TYPES=all X=1" q8_0 $M/q8.gguf 16 128 | tee $W/ttft-q8.txt
rm -f $M/q8.gguf
timeout 200 $B/hone gen-model --shape llama3-8b --type q4_k_m -o $M/km.gguf > $W/gen-km.txt 2>&1; el "gen q4_k_m rc $?"; cat $W/gen-km.txt
ttft_ab "HONE_W4_GEMM_TYPES=all X=1" q4_k_m $M/km.gguf 16 64 128 | tee $W/ttft-km.txt
timeout 90 $B/hone bench -m $M/km.gguf --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-km.txt 2>&1; el "bench km rc $?"
grep -E "decode \(tok|TTFT|roofline" $W/bench-km.txt
rm -f $M/km.gguf
case "$GPU" in *H200*) goal_rows; rm -f $M/q.gguf ;; esac
OUT= timeout 120 compute-sanitizer --tool memcheck --print-limit 10 $B/hone-w4-check --gemm > $W/w4-gemm-memcheck.txt 2>&1
el "memcheck rc $?"; tail -1 $W/w4-gemm-memcheck.txt
el done
