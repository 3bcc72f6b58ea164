#!/bin/bash
# Session 46, call 6: what the last ~260 s of device time hold (a fresh machine's start takes most of it). On an
# H200: the Q4_0 goal row (8B, -p 64) on today's tree and the long-context default against G at ~4k; elsewhere
# the Q4_0 half of call 5 (5 clusters a KV head against the default's 7).
# Predictions: H200 Q4_0 goal row within 1 % of session 37's 61.1 % of 4.52 TB/s; I over G +0.5-2 % at 4k;
# H100 cap 5 0 to -1 % against the default.
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen 8b rc $?"
case "$GPU" in
  *H200*) bench q4_0 $M/q.gguf; env_ab 8b $M/q.gguf 3900 "X=1 HONE_ATTN_LONG=G" -c 4096 | tee $W/ab-8b-4k.txt ;;
  *) env_ab 8b $M/q.gguf 3900 "X=1 HONE_ATTN_CAP=5" -c 4096 | tee $W/ab-8b-4k.txt ;;
esac
el done
