#!/bin/bash
# Session 46, call 2: the capped clustered shapes on the other two goal types past the short bound.
# BF16 8B: its attention and o are off PDL past the tiny tier, so attention takes shape A there; forced H (A + clusters
# of 8 merging in distributed shared memory, splits capped as I's since session 45) against it. AWQ (RTN g128 export
# of the same BF16 model): the new default (I) against G.
# Predictions (H100): BF16 -p 3900 -c 4096 H +0-2 %, -p 7900 -c 8192 +1-4 % over A; AWQ -p 3900 default +0.5-2 %
# over G (Q4_0's +1.0 %).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q; el "gen bf16 rc $?"
env_ab bf16 $M/b.gguf 3900 "X=1 HONE_ATTN_V3=H" -c 4096 | tee $W/ab-bf16-4k.txt
env_ab bf16 $M/b.gguf 7900 "X=1 HONE_ATTN_V3=H" -c 8192 | tee $W/ab-bf16-8k.txt
timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/awq -q; el "rtn awq rc $?"
rm -f $M/b.gguf
env_ab awq $M/awq 3900 "HONE_ATTN_LONG=G X=1" -c 4096 | tee $W/ab-awq-4k.txt
env_ab awq $M/awq 7900 "HONE_ATTN_LONG=G X=1" -c 8192 | tee $W/ab-awq-8k.txt
el done
