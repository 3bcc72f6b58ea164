#!/bin/bash
# Session 32, call 6: the AWQ int4 g128 Llama-3-8B shape through main's engine (tests/cuda/run-awq-engine.sh
# bench: gen-model BF16 -> quantize --rtn -g 128 -f awq -> hone bench -p 64 / -p 512, -n 128 -r 5 -w 1), so that
# all three decode-goal rows are measured on the same day's main. Carry .carry-release.
set -u
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
HONE_E2E_CARRY=.carry-release timeout 400 tests/cuda/run-awq-engine.sh bench > $W/awq.txt 2>&1; el "awq bench rc $?"
cat $W/awq.txt | tail -24
