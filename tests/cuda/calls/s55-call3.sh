#!/bin/bash
# Session 55, call 3 — prepared, NOT run (refused starts spent the device time): the decode rows on the committed tree (decode unchanged since session 49; sessions 50-54 changed
# prefill only), on whichever card comes: on an H200 they are the issues' goal rows (BF16 >= 90 %, Q4_0/Q4_1 >= 75 %,
# AWQ >= 80 % of 4.52 TB/s), on an H100 they refresh the README's H100 table (session 49: BF16 196.4, Q4_0 547.8,
# AWQ 467.2 tok/s at -p 64). goal_rows (prelude.sh) plus Q4_1. Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
goal_rows
timeout 120 $B/hone gen-model --shape llama3-8b --type q4_1 -o $M/q1.gguf -q; el "gen-model q4_1 rc $?"
bench q4_1 $M/q1.gguf
el done
